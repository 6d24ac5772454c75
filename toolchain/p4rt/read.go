package p4rt

import (
	"fmt"
	"slices"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// readChunk bounds the entities per ReadResponse so a large table streams
// out in pieces (spec §13.4 lets the server split responses).
const readChunk = 512

// Read serves a batch of read requests (spec §13). Requests that fail get
// their own p4.v1.Error; the others' entities are still returned.
func (s *Server) Read(req *p4v1.ReadRequest, stream p4v1.P4Runtime_ReadServer) error {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return rpcError(err)
	}
	s.mu.RLock()
	ps := s.cur
	if ps == nil {
		s.mu.RUnlock()
		return rpcError(errorf(codes.FailedPrecondition, "no forwarding pipeline config has been set"))
	}
	var out []*p4v1.Entity
	errs := make([]error, len(req.GetEntities()))
	for i, e := range req.GetEntities() {
		var got []*p4v1.Entity
		got, errs[i] = ps.readGuarded(s, e)
		if errs[i] == nil {
			out = append(out, got...)
		}
	}
	s.mu.RUnlock()
	for len(out) > 0 {
		n := min(len(out), readChunk)
		if err := stream.Send(&p4v1.ReadResponse{Entities: out[:n]}); err != nil {
			return err
		}
		out = out[n:]
	}
	return batchError("Read", errs)
}

func (ps *pipelineState) readGuarded(s *Server, e *p4v1.Entity) (out []*p4v1.Entity, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("BUG: panic while reading", "panic", fmt.Sprint(r))
			out, err = nil, errorf(codes.Internal, "internal error: %v", r)
		}
	}()
	return ps.read(e)
}

func (ps *pipelineState) read(e *p4v1.Entity) ([]*p4v1.Entity, error) {
	if e == nil {
		return nil, invalid("empty entity")
	}
	switch x := e.GetEntity().(type) {
	case *p4v1.Entity_TableEntry:
		return ps.readTableEntries(x.TableEntry)
	case *p4v1.Entity_CounterEntry:
		return ps.readCounters(x.CounterEntry)
	case *p4v1.Entity_DirectCounterEntry:
		return ps.readDirectCounters(x.DirectCounterEntry)
	case *p4v1.Entity_MeterEntry:
		return ps.readMeters(x.MeterEntry)
	case *p4v1.Entity_DirectMeterEntry:
		return ps.readDirectMeters(x.DirectMeterEntry)
	case *p4v1.Entity_RegisterEntry:
		return ps.readRegisters(x.RegisterEntry)
	case *p4v1.Entity_PacketReplicationEngineEntry:
		return ps.readPRE(x.PacketReplicationEngineEntry)
	case *p4v1.Entity_DigestEntry:
		return ps.readDigestEntries(x.DigestEntry)
	case *p4v1.Entity_ActionProfileMember:
		return ps.readProfileMembers(x.ActionProfileMember)
	case *p4v1.Entity_ActionProfileGroup:
		return ps.readProfileGroups(x.ActionProfileGroup)
	case *p4v1.Entity_ValueSetEntry:
		return ps.readValueSets(x.ValueSetEntry)
	case *p4v1.Entity_ExternEntry:
		return nil, errorf(codes.Unimplemented, "v1model has no P4Runtime extern entries")
	default:
		return nil, invalid("entity has no entity set (no whole-state wildcard, spec §13.2)")
	}
}

func tableEntity(te *p4v1.TableEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}
}

// readTableEntries implements the TableEntry wildcard rules (§9.1.5).
func (ps *pipelineState) readTableEntries(q *p4v1.TableEntry) ([]*p4v1.Entity, error) {
	ids := ps.schema.tableIDs
	if q.GetTableId() != 0 {
		if _, ok := ps.schema.tables[q.GetTableId()]; !ok {
			return nil, errorf(codes.NotFound, "no table with id %#x", q.GetTableId())
		}
		ids = []uint32{q.GetTableId()}
	} else if len(q.GetMatch()) != 0 {
		return nil, invalid("a match filter needs a table id")
	}
	if q.GetTimeSinceLastHit() != nil {
		// As PI: every table the read names must age its entries, a
		// wildcard read's included, and a default entry has no idle time.
		if q.GetIsDefaultAction() {
			return nil, invalid("a default entry has no idle time: time_since_last_hit must be unset")
		}
		for _, id := range ids {
			if t := ps.schema.tables[id]; !t.idleTimeout {
				return nil, invalid("table %q does not support idle timeout: time_since_last_hit must be unset", t.name)
			}
		}
	}
	var out []*p4v1.Entity
	for _, id := range ids {
		t, ts := ps.schema.tables[id], ps.tables[id]
		if q.GetIsDefaultAction() {
			te, err := ps.defaultEntryProto(t, ts)
			if err != nil {
				return nil, err
			}
			out = append(out, tableEntity(te))
			continue
		}
		var entries []*tableEntry
		if q.GetMatch() != nil {
			_, e, err := ps.lookup(t, q)
			if err != nil {
				return nil, err
			}
			if e != nil {
				entries = append(entries, e)
			}
		} else {
			var err error
			if entries, err = ps.entries(t); err != nil {
				return nil, err
			}
		}
		for _, e := range entries {
			if q.GetPriority() != 0 && e.priority != q.GetPriority() {
				continue
			}
			if q.GetControllerMetadata() != 0 && e.controllerMetadata != q.GetControllerMetadata() {
				continue
			}
			if len(q.GetMetadata()) != 0 && string(e.metadata) != string(q.GetMetadata()) {
				continue
			}
			if q.GetAction().GetType() != nil && !e.hasAction(q.GetAction()) {
				continue
			}
			te, err := ps.entryProto(t, e, q)
			if err != nil {
				return nil, err
			}
			out = append(out, tableEntity(te))
		}
	}
	return out, nil
}

func (ps *pipelineState) entryProto(t *tableInfo, e *tableEntry, q *p4v1.TableEntry) (*p4v1.TableEntry, error) {
	match, err := matchProto(t, e.match)
	if err != nil {
		return nil, err
	}
	te := &p4v1.TableEntry{
		TableId:            t.id,
		Match:              match,
		Priority:           e.priority,
		ControllerMetadata: e.controllerMetadata,
		Metadata:           clone(e.metadata),
		IdleTimeoutNs:      e.idleTimeoutNs,
		IsConst:            e.isConst,
	}
	switch {
	case e.oneShot != nil:
		te.Action, err = e.oneShot.proto(ps.schema)
	case e.ref != nil:
		te.Action = indirectAction(e.ref)
	default:
		te.Action, err = ps.schema.tableAction(e.action)
	}
	if err != nil {
		return nil, errorf(codeOf(err), "table %q: %s", t.name, messageOf(err))
	}
	if len(te.Metadata) == 0 {
		te.Metadata = nil
	}
	if q.GetTimeSinceLastHit() != nil {
		if te.TimeSinceLastHit, err = ps.timeSinceLastHit(t, e); err != nil {
			return nil, err
		}
	}
	// Direct resources are returned only when the request sets them
	// (spec §9.1.8).
	if t.directCounter != 0 && q.GetCounterData() != nil {
		v, err := ps.ctl.ReadDirectCounter(t.name, keyFields(t, e.match), e.priority)
		if err != nil {
			return nil, engineErr("reading the direct counter", err)
		}
		te.CounterData = &p4v1.CounterData{ByteCount: int64(v.Bytes), PacketCount: int64(v.Packets)}
	}
	if t.directMeter != 0 && q.GetMeterConfig() != nil {
		m, err := ps.ctl.DirectMeter(t.name, keyFields(t, e.match), e.priority)
		if err != nil {
			return nil, engineErr("reading the direct meter", err)
		}
		if m != nil {
			te.MeterConfig = meterProto(m)
		}
	}
	return te, nil
}

// timeSinceLastHit is the entry's idle time on the device, with or
// without a timeout (the spec's Idle-timeout section: read even when the
// TTL is 0).
func (ps *pipelineState) timeSinceLastHit(t *tableInfo, e *tableEntry) (*p4v1.TableEntry_IdleTimeout, error) {
	ageing, err := ps.ageingOf(t, e)
	if err != nil {
		return nil, err
	}
	return &p4v1.TableEntry_IdleTimeout{ElapsedNs: int64(ageing.SinceHit)}, nil
}

// ageingOf is the entry's idle state on the device; an entry read from
// the program's declaration asks the device for it.
func (ps *pipelineState) ageingOf(t *tableInfo, e *tableEntry) (*pipeline.EntryAgeing, error) {
	if e.ageing != nil {
		return e.ageing, nil
	}
	de, ok, err := ps.ctl.Entry(t.name, keyFields(t, e.match), e.priority)
	if err != nil || !ok || de.Ageing == nil {
		return nil, errorf(codes.Internal, "table %q: the device keeps no idle time for the entry (%v)", t.name, err)
	}
	return de.Ageing, nil
}

func (ps *pipelineState) defaultEntryProto(t *tableInfo, ts *tableState) (*p4v1.TableEntry, error) {
	te := &p4v1.TableEntry{TableId: t.id, IsDefaultAction: true}
	// The default action the device holds, whoever set it: this client, the
	// program, or another control plane (BMv2's Thrift runtime), as PI reads
	// it from the target.
	act, ok, err := ps.deviceDefault(t)
	if err != nil {
		return nil, err
	}
	if !ok && ts.clientDefault {
		return nil, errorf(codes.Internal, "table %q: the device has no default action, the client set one", t.name)
	}
	if !ok {
		act, ok = ps.schema.initialDefault(t)
	}
	if ok {
		if te.Action, err = ps.schema.tableAction(act); err != nil {
			return nil, errorf(codeOf(err), "table %q default entry: %s", t.name, messageOf(err))
		}
	}
	if ts.clientDefault {
		te.ControllerMetadata = ts.defaultCookie
		if len(ts.defaultMeta) != 0 {
			te.Metadata = clone(ts.defaultMeta)
		}
	}
	te.IsConst = t.constDefaultID != 0
	return te, nil
}

// deviceDefault reads a table's default action from the device; false
// where it has none.
func (ps *pipelineState) deviceDefault(t *tableInfo) (boundAction, bool, error) {
	a, ok, err := ps.ctl.DefaultAction(t.name)
	if err != nil {
		return boundAction{}, false, engineErr("reading the default action", err)
	}
	if !ok {
		return boundAction{}, false, nil
	}
	b, err := ps.schema.actionFrom(t, a)
	if err != nil {
		return boundAction{}, false, errorf(codes.Internal, "table %q: the device's default action: %v", t.name, err)
	}
	return b, true, nil
}

func (ps *pipelineState) directTables(tableID uint32, has func(*tableInfo) bool, what string) ([]uint32, error) {
	if tableID == 0 {
		var ids []uint32
		for _, id := range ps.schema.tableIDs {
			if has(ps.schema.tables[id]) {
				ids = append(ids, id)
			}
		}
		return ids, nil
	}
	t, ok := ps.schema.tables[tableID]
	if !ok {
		return nil, errorf(codes.NotFound, "no table with id %#x", tableID)
	}
	if !has(t) {
		return nil, invalid("table %q has no %s", t.name, what)
	}
	return []uint32{tableID}, nil
}

// directEntries resolves the table entries a DirectCounter/MeterEntry read
// names: one entry, or all entries of one or every table.
func (ps *pipelineState) directEntries(q *p4v1.TableEntry, has func(*tableInfo) bool, what string) ([]*tableInfo, []*tableEntry, error) {
	ids, err := ps.directTables(q.GetTableId(), has, what)
	if err != nil {
		return nil, nil, err
	}
	var ts []*tableInfo
	var es []*tableEntry
	for _, id := range ids {
		t := ps.schema.tables[id]
		if q.GetMatch() != nil && q.GetTableId() != 0 {
			_, e, err := ps.findEntry(q)
			if err != nil {
				return nil, nil, err
			}
			ts, es = append(ts, t), append(es, e)
			continue
		}
		entries, err := ps.entries(t)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range entries {
			ts, es = append(ts, t), append(es, e)
		}
	}
	return ts, es, nil
}

func (ps *pipelineState) keyOnly(t *tableInfo, e *tableEntry) (*p4v1.TableEntry, error) {
	match, err := matchProto(t, e.match)
	if err != nil {
		return nil, err
	}
	return &p4v1.TableEntry{TableId: t.id, Match: match, Priority: e.priority}, nil
}

func (ps *pipelineState) readDirectCounters(q *p4v1.DirectCounterEntry) ([]*p4v1.Entity, error) {
	ts, es, err := ps.directEntries(q.GetTableEntry(), func(t *tableInfo) bool { return t.directCounter != 0 }, "direct counter")
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for i, e := range es {
		v, err := ps.ctl.ReadDirectCounter(ts[i].name, keyFields(ts[i], e.match), e.priority)
		if err != nil {
			return nil, engineErr("reading the direct counter", err)
		}
		key, err := ps.keyOnly(ts[i], e)
		if err != nil {
			return nil, err
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
			TableEntry: key,
			Data:       &p4v1.CounterData{ByteCount: int64(v.Bytes), PacketCount: int64(v.Packets)},
		}}})
	}
	return out, nil
}

func (ps *pipelineState) readDirectMeters(q *p4v1.DirectMeterEntry) ([]*p4v1.Entity, error) {
	if q.GetCounterData() != nil {
		return nil, errorf(codes.Unimplemented, "per-colour meter counters are not supported")
	}
	ts, es, err := ps.directEntries(q.GetTableEntry(), func(t *tableInfo) bool { return t.directMeter != 0 }, "direct meter")
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for i, e := range es {
		m, err := ps.ctl.DirectMeter(ts[i].name, keyFields(ts[i], e.match), e.priority)
		if err != nil {
			return nil, engineErr("reading the direct meter", err)
		}
		key, err := ps.keyOnly(ts[i], e)
		if err != nil {
			return nil, err
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_DirectMeterEntry{DirectMeterEntry: &p4v1.DirectMeterEntry{
			TableEntry: key,
			Config:     meterProto(m),
		}}})
	}
	return out, nil
}

func (ps *pipelineState) readCounters(q *p4v1.CounterEntry) ([]*p4v1.Entity, error) {
	ids := ps.schema.counterIDs
	if q.GetCounterId() != 0 {
		if _, ok := ps.schema.counters[q.GetCounterId()]; !ok {
			return nil, errorf(codes.NotFound, "no counter with id %#x", q.GetCounterId())
		}
		ids = []uint32{q.GetCounterId()}
	}
	var out []*p4v1.Entity
	for _, id := range ids {
		ci := ps.schema.counters[id]
		idx := q.GetIndex()
		if q.GetCounterId() == 0 {
			idx = nil
		}
		lo, hi, err := indexRange(idx, ci.size)
		if err != nil {
			return nil, err
		}
		for i := lo; i < hi; i++ {
			v, err := ps.ctl.ReadCounter(ci.name, i)
			if err != nil {
				return nil, engineErr("reading the counter", err)
			}
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
				CounterId: id, Index: &p4v1.Index{Index: i},
				Data: &p4v1.CounterData{ByteCount: int64(v.Bytes), PacketCount: int64(v.Packets)},
			}}})
		}
	}
	return out, nil
}

func (ps *pipelineState) readMeters(q *p4v1.MeterEntry) ([]*p4v1.Entity, error) {
	if q.GetCounterData() != nil {
		return nil, errorf(codes.Unimplemented, "per-colour meter counters are not supported")
	}
	ids := ps.schema.meterIDs
	if q.GetMeterId() != 0 {
		if _, ok := ps.schema.meters[q.GetMeterId()]; !ok {
			return nil, errorf(codes.NotFound, "no meter with id %#x", q.GetMeterId())
		}
		ids = []uint32{q.GetMeterId()}
	}
	var out []*p4v1.Entity
	for _, id := range ids {
		mi := ps.schema.meters[id]
		idx := q.GetIndex()
		if q.GetMeterId() == 0 {
			idx = nil
		}
		lo, hi, err := indexRange(idx, mi.size)
		if err != nil {
			return nil, err
		}
		for i := lo; i < hi; i++ {
			m, err := ps.ctl.Meter(mi.name, i)
			if err != nil {
				return nil, engineErr("reading the meter", err)
			}
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_MeterEntry{MeterEntry: &p4v1.MeterEntry{
				MeterId: id, Index: &p4v1.Index{Index: i}, Config: meterProto(m),
			}}})
		}
	}
	return out, nil
}

func (ps *pipelineState) readRegisters(q *p4v1.RegisterEntry) ([]*p4v1.Entity, error) {
	ids := ps.schema.registerIDs
	if q.GetRegisterId() != 0 {
		if _, ok := ps.schema.registers[q.GetRegisterId()]; !ok {
			return nil, errorf(codes.NotFound, "no register with id %#x", q.GetRegisterId())
		}
		ids = []uint32{q.GetRegisterId()}
	}
	var out []*p4v1.Entity
	for _, id := range ids {
		ri := ps.schema.registers[id]
		idx := q.GetIndex()
		if q.GetRegisterId() == 0 {
			idx = nil
		}
		lo, hi, err := indexRange(idx, ri.size)
		if err != nil {
			return nil, err
		}
		for i := lo; i < hi; i++ {
			v, err := ps.ctl.ReadRegister(ri.name, i)
			if err != nil {
				return nil, engineErr("reading the register", err)
			}
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{
				RegisterId: id, Index: &p4v1.Index{Index: i},
				Data: &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: trimmed(v)}},
			}}})
		}
	}
	return out, nil
}

func (ps *pipelineState) readPRE(q *p4v1.PacketReplicationEngineEntry) ([]*p4v1.Entity, error) {
	wrap := func(e *p4v1.PacketReplicationEngineEntry) *p4v1.Entity {
		return &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: e}}
	}
	var out []*p4v1.Entity
	switch x := q.GetType().(type) {
	case *p4v1.PacketReplicationEngineEntry_MulticastGroupEntry:
		id := x.MulticastGroupEntry.GetMulticastGroupId()
		for _, g := range ps.ctl.MulticastGroups() {
			if id == 0 || id == g {
				out = append(out, wrap(&p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{
					MulticastGroupEntry: ps.multicastGroup(g)}}))
			}
		}
		if id != 0 && len(out) == 0 {
			return nil, errorf(codes.NotFound, "no multicast group %d", id)
		}
	case *p4v1.PacketReplicationEngineEntry_CloneSessionEntry:
		id := x.CloneSessionEntry.GetSessionId()
		for _, c := range ps.ctl.CloneSessions() {
			if id == 0 || id == c {
				out = append(out, wrap(&p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{
					CloneSessionEntry: ps.cloneSession(c)}}))
			}
		}
		if id != 0 && len(out) == 0 {
			return nil, errorf(codes.NotFound, "no clone session %d", id)
		}
	default:
		return nil, invalid("packet replication engine entry has no type set")
	}
	return out, nil
}

func (ps *pipelineState) readDigestEntries(q *p4v1.DigestEntry) ([]*p4v1.Entity, error) {
	if q.GetDigestId() != 0 {
		if _, ok := ps.schema.digests[q.GetDigestId()]; !ok {
			return nil, errorf(codes.NotFound, "no digest with id %#x", q.GetDigestId())
		}
	}
	var out []*p4v1.Entity
	for _, id := range sortedKeys(ps.digestCfg) {
		if q.GetDigestId() == 0 || q.GetDigestId() == id {
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{
				DigestId: id, Config: proto.Clone(ps.digestCfg[id]).(*p4v1.DigestEntry_Config)}}})
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[uint32]V) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
