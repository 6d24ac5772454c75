package bmthrift

// BMv2's state dump (serialize_state) and its restore (--restore-state):
// the engine's state written and read in BMv2's own format (bmstate), with
// BMv2's entry, member and group handles, so a dump of terrapin-switch
// restores into simple_switch and the other way round.

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"math"
	"slices"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/terrapin/terrapin/toolchain/bmthrift/bmstate"
	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/standard"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// layout is the program's dump layout, read once per pipeline.
func (v *view) layout() (*bmstate.Layout, error) {
	if v.lay == nil && v.layErr == nil {
		v.lay, v.layErr = bmstate.NewLayout(v.json)
	}
	return v.lay, v.layErr
}

// BmSerializeState answers the switch's state in BMv2's dump format.
// Without a program it answers what BMv2 does without one: the version and
// the md5 of an empty JSON. A state the format cannot hold (a member or
// group id past BMv2's 24-bit handles) is refused with an application
// exception. The dump is atomic against concurrent writes (engine.Still).
func (h *std) BmSerializeState(context.Context) (string, error) {
	defer h.lock()()
	v, err := h.s.current()
	if err != nil {
		sum := md5.Sum(nil)
		return bmstate.Version + "\n" + string(sum[:]) + "\n", nil
	}
	// Still: a P4Runtime client may write while the dump is taken; the
	// dump must be one state, not tables from before a write and profiles
	// from after it.
	var out []byte
	err = v.pl.Still(func() (err error) {
		out, err = v.serialize()
		return err
	})
	if err != nil {
		h.s.log.Error("serialize_state", "err", err)
		return "", thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "serialize_state: "+err.Error())
	}
	return string(out), nil
}

// serialize writes v's state in BMv2's format.
func (v *view) serialize() ([]byte, error) {
	l, err := v.layout()
	if err != nil {
		return nil, err
	}
	st := &bmstate.State{MD5: md5.Sum(v.json)}
	direct := map[string][]bmstate.Meter{} // direct meter array -> cells
	for _, lt := range l.Tables {
		ts, err := v.tableState(l, lt)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", lt.Name, err)
		}
		if lt.DirectMeter != "" {
			direct[lt.DirectMeter] = ts.DirectMeters
		}
		st.Tables = append(st.Tables, ts)
	}
	for _, name := range l.Profiles {
		ps, err := v.profileState(name)
		if err != nil {
			return nil, fmt.Errorf("action profile %s: %w", name, err)
		}
		st.Profiles = append(st.Profiles, ps)
	}
	for _, m := range l.Meters {
		cells, ok := direct[m.Name]
		if !ok {
			if cells, err = v.meterCells(m); err != nil {
				return nil, fmt.Errorf("meter %s: %w", m.Name, err)
			}
		}
		st.Meters = append(st.Meters, cells)
	}
	var b bytes.Buffer
	if err := bmstate.Write(&b, l, st); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// rates is a meter configuration as BMv2 keeps it: peak rate first.
func rates(c *pipeline.MeterConfig, count int) bmstate.Meter {
	if c == nil || count != 2 {
		return bmstate.Meter{}
	}
	return bmstate.Meter{Rates: []bmstate.Rate{
		{InfoRate: float64(c.PIR) / 1e6, Burst: c.PBurst},
		{InfoRate: float64(c.CIR) / 1e6, Burst: c.CBurst},
	}}
}

// meterConfigOf is the inverse of rates.
func meterConfigOf(m bmstate.Meter) (*pipeline.MeterConfig, error) {
	if m.Rates == nil {
		return nil, nil
	}
	if len(m.Rates) != 2 {
		return nil, fmt.Errorf("meters of %d rates are not supported", len(m.Rates))
	}
	per := func(r float64) (uint64, error) {
		if r*1e6 > math.MaxUint64/2 {
			return 0, fmt.Errorf("rate %g too large", r)
		}
		return uint64(math.Round(r * 1e6)), nil
	}
	pir, err := per(m.Rates[0].InfoRate)
	if err != nil {
		return nil, err
	}
	cir, err := per(m.Rates[1].InfoRate)
	if err != nil {
		return nil, err
	}
	return &pipeline.MeterConfig{CIR: cir, CBurst: m.Rates[1].Burst, PIR: pir, PBurst: m.Rates[0].Burst}, nil
}

func (v *view) meterCells(m *bmstate.MeterArray) ([]bmstate.Meter, error) {
	cells := make([]bmstate.Meter, m.Size)
	if m.Direct {
		return cells, nil // bound to no table: never configured
	}
	id, ok := v.pl.Lookup(engine.KindMeter, m.Name)
	if !ok {
		return nil, fmt.Errorf("not in the engine")
	}
	for i := range cells {
		c, err := v.pl.Meter(id, i)
		if err != nil {
			return nil, err
		}
		cells[i] = rates(c, m.RateCount)
	}
	return cells, nil
}

func (v *view) tableState(l *bmstate.Layout, lt *bmstate.Table) (bmstate.TableState, error) {
	ts := bmstate.TableState{Name: lt.Name, MissNext: lt.MissNext}
	t, err := v.table(lt.Name)
	if err != nil {
		return ts, fmt.Errorf("not in the engine")
	}
	es, err := v.pl.EntriesByHandle(t.id)
	if err != nil {
		return ts, err
	}
	var meters *bmstate.MeterArray
	if lt.DirectMeter != "" {
		meters = l.Meter(lt.DirectMeter)
		ts.DirectMeters = make([]bmstate.Meter, meters.Size)
	}
	for _, e := range es {
		be, err := t.entry(e)
		if err != nil {
			return ts, err
		}
		key, mask, plen := bmKey(lt, be.MatchKey)
		se := bmstate.Entry{Index: e.Handle & 0xffffff, Version: e.Handle >> 24, Key: key, Mask: mask, PrefixLen: plen}
		if lt.Unit == bmstate.UnitTernary || lt.Unit == bmstate.UnitRange {
			se.Priority = int(t.bmPriority(e))
		}
		if lt.Indirect {
			if se.Indirect, err = indirectIndex(e.Indirect); err != nil {
				return ts, err
			}
		} else {
			se.Action = bmstate.Action{ActionID: e.Action.ActionID, Data: e.Action.Params, Next: lt.EntryNext(e.Action.ActionID)}
		}
		se.TimeoutMs = v.timeout(t.id, e.Handle)
		if meters != nil && int(se.Index) < meters.Size {
			ts.DirectMeters[se.Index] = rates(e.Meter, meters.RateCount)
		}
		ts.Entries = append(ts.Entries, se)
	}
	if lt.Indirect {
		ref, err := v.pl.DefaultIndirect(t.id)
		if err != nil {
			return ts, err
		}
		if ref.Kind != pipeline.IndirectNone {
			ts.DefaultSet = true
			if ts.DefaultIndex, err = indirectIndex(ref); err != nil {
				return ts, err
			}
		}
		return ts, nil
	}
	a, ok, err := v.pl.DefaultAction(t.id)
	if err != nil {
		return ts, err
	}
	ts.Default = bmstate.Action{ActionID: -1, Next: lt.DefaultNext(-1)}
	if ok {
		ts.Default = bmstate.Action{ActionID: a.ActionID, Data: a.Params, Next: lt.DefaultNext(a.ActionID)}
	}
	return ts, nil
}

// timeout is an entry's ageing timeout in ms (0: none, and in tables
// without timeouts).
func (v *view) timeout(tableID int, h uint32) uint32 {
	ms, _, err := v.pl.EntryTimeout(tableID, h)
	if err != nil {
		return 0
	}
	return ms
}

// indirectIndex is BMv2's index of a member or group.
func indirectIndex(ref pipeline.IndirectRef) (uint32, error) {
	if ref.ID >= bmstate.GroupFlag {
		return 0, fmt.Errorf("member or group id %d is past BMv2's 24-bit handles", ref.ID)
	}
	if ref.Kind == pipeline.IndirectGroup {
		return bmstate.GroupFlag | ref.ID, nil
	}
	return ref.ID, nil
}

// prefixMask is BMv2's mask of an lpm prefix over a field's bytes (from
// the first byte's top bit, whatever the field's width).
func prefixMask(plen, n int) []byte {
	m := make([]byte, n)
	for i := 0; i < plen && i < n*8; i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}

// bmKey lays params (a Thrift key, in the program's order) out as the
// table's match unit stores it: the key bytes in the unit's field order,
// the mask (ternary and range units) and the prefix length (lpm units).
func bmKey(lt *bmstate.Table, params standard.BmMatchParams) (key, mask []byte, plen int) {
	rangeBytes := 0
	for _, k := range lt.Keys {
		n := k.Bytes()
		p := params[k.Index]
		var data, m []byte
		switch {
		case p.Exact != nil:
			data, m = fitBytes(p.Exact.Key, k.Bits), bytes.Repeat([]byte{0xff}, n)
			plen += n * 8
		case p.Valid != nil:
			data, m = []byte{0}, []byte{0xff}
			if p.Valid.Key {
				data[0] = 1
			}
			plen += 8
		case p.Lpm != nil:
			data, m = fitBytes(p.Lpm.Key, k.Bits), prefixMask(int(p.Lpm.PrefixLength), n)
			plen += int(p.Lpm.PrefixLength)
		case p.Ternary != nil:
			data, m = fitBytes(p.Ternary.Key, k.Bits), fitBytes(p.Ternary.Mask, k.Bits)
		case p.Range != nil:
			data, m = fitBytes(p.Range.Start, k.Bits), fitBytes(p.Range.End_, k.Bits)
			rangeBytes += n
		}
		if k.Mask != nil {
			for i := range data {
				data[i] &= k.Mask[i]
			}
		}
		key = append(key, data...)
		mask = append(mask, m...)
	}
	switch lt.Unit {
	case bmstate.UnitTernary, bmstate.UnitRange:
		// BMv2 masks the key, past the range fields
		for i := rangeBytes; i < len(key); i++ {
			key[i] &= mask[i]
		}
		return key, mask, 0
	case bmstate.UnitLPM:
		return key, nil, plen
	}
	return key, nil, 0
}

// thriftKey is the inverse of bmKey: a dump's entry as a Thrift key in
// the program's order.
func thriftKeyOf(lt *bmstate.Table, e *bmstate.Entry) (standard.BmMatchParams, error) {
	params := make(standard.BmMatchParams, len(lt.Keys))
	off := 0
	lpmPlen := e.PrefixLen
	for _, k := range lt.Keys {
		if k.Kind != bmstate.KeyLPM {
			lpmPlen -= k.Bytes() * 8
		}
	}
	for _, k := range lt.Keys {
		n := k.Bytes()
		data := append([]byte(nil), e.Key[off:off+n]...)
		var m []byte
		if e.Mask != nil {
			m = append([]byte(nil), e.Mask[off:off+n]...)
		}
		off += n
		full := bytes.Repeat([]byte{0xff}, n)
		p := &standard.BmMatchParam{}
		switch k.Kind {
		case bmstate.KeyExact, bmstate.KeyValid:
			if m != nil && !bytes.Equal(m, full) {
				return nil, fmt.Errorf("key field %d (exact) with mask %x", k.Index, m)
			}
			if k.Kind == bmstate.KeyValid {
				p.Type, p.Valid = standard.BmMatchParamType_VALID, &standard.BmMatchParamValid{Key: data[0] != 0}
			} else {
				p.Type, p.Exact = standard.BmMatchParamType_EXACT, &standard.BmMatchParamExact{Key: data}
			}
		case bmstate.KeyLPM:
			plen := lpmPlen
			if lt.Unit != bmstate.UnitLPM {
				plen = 0
				for _, b := range m {
					for ; b != 0; b &= b - 1 {
						plen++
					}
				}
				if !bytes.Equal(m, prefixMask(plen, n)) {
					return nil, fmt.Errorf("key field %d (lpm) with mask %x", k.Index, m)
				}
			}
			if plen < 0 || plen > k.Bits {
				return nil, fmt.Errorf("key field %d (lpm): prefix length %d", k.Index, plen)
			}
			p.Type, p.Lpm = standard.BmMatchParamType_LPM, &standard.BmMatchParamLPM{Key: data, PrefixLength: int32(plen)}
		case bmstate.KeyTernary:
			p.Type, p.Ternary = standard.BmMatchParamType_TERNARY, &standard.BmMatchParamTernary{Key: data, Mask: m}
		case bmstate.KeyRange:
			p.Type, p.Range = standard.BmMatchParamType_RANGE, &standard.BmMatchParamRange{Start: data, End_: m}
		}
		params[k.Index] = p
	}
	return params, nil
}

// profileState is an action profile as BMv2 dumps it. The use counts are
// the profile's uses now: by groups (members), table entries and default
// entries.
func (v *view) profileState(name string) (bmstate.ProfileState, error) {
	var ps bmstate.ProfileState
	id, ok := v.pl.Lookup(engine.KindActionProfile, name)
	if !ok {
		return ps, fmt.Errorf("not in the engine")
	}
	var info pipeline.ActionProfileInfo
	for _, ap := range v.pl.ActionProfiles() {
		if ap.ID == id {
			info = ap
		}
	}
	p := &prof{v: v, id: id, info: info}
	ms, gs := p.members(), p.groups()
	mslots, gslots, err := v.pl.ProfileSlots(id)
	if err != nil {
		return ps, err
	}
	if mslots > bmstate.GroupFlag || gslots > bmstate.GroupFlag {
		return ps, fmt.Errorf("member or group ids past BMv2's 24-bit handles")
	}
	ps.Slots = mslots
	ps.MemberRefs = make([]uint32, mslots)
	ps.GroupRefs = make([]uint32, gslots)
	for _, mid := range sortedIDs(ms) {
		a := ms[mid]
		ps.Members = append(ps.Members, bmstate.Member{Handle: mid, Action: bmstate.Action{ActionID: a.ActionID, Data: a.Params}})
	}
	use := func(ref pipeline.IndirectRef) {
		switch {
		case ref.Kind == pipeline.IndirectMember && ref.ID < mslots:
			ps.MemberRefs[ref.ID]++
		case ref.Kind == pipeline.IndirectGroup && ref.ID < gslots:
			ps.GroupRefs[ref.ID]++
		}
	}
	for _, gid := range sortedIDs(gs) {
		g := bmstate.Group{Handle: gid, Members: slices.Sorted(slices.Values(gs[gid]))}
		for _, m := range g.Members {
			use(pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: m})
		}
		ps.Groups = append(ps.Groups, g)
	}
	for _, tid := range info.TableIDs {
		es, err := v.pl.ReadEntries(tid)
		if err != nil {
			return ps, err
		}
		for _, e := range es {
			use(e.Indirect)
		}
		ref, err := v.pl.DefaultIndirect(tid)
		if err != nil {
			return ps, err
		}
		use(ref)
	}
	return ps, nil
}

// RestoreState installs a state dump of the loaded program (BMv2's
// --restore-state, at start): its action profiles' members and groups, its
// tables' entries with their handles, default entries and direct meters,
// and its meter arrays. A dump of another program (its md5 differs) or a
// malformed one is refused with nothing installed; a dump the engine
// cannot take (an entry it refuses) stops midway with an error.
func (s *Server) RestoreState(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.current()
	if err != nil {
		return fmt.Errorf("no program loaded")
	}
	l, err := v.layout()
	if err != nil {
		return err
	}
	st, err := bmstate.Read(data, l, md5.Sum(v.json))
	if err != nil {
		return err
	}
	for i, name := range l.Profiles {
		if err := v.restoreProfile(name, &st.Profiles[i]); err != nil {
			return fmt.Errorf("action profile %s: %w", name, err)
		}
	}
	direct := map[string]*bmstate.Table{}
	for i, lt := range l.Tables {
		if err := v.restoreTable(lt, &st.Tables[i]); err != nil {
			return fmt.Errorf("table %s: %w", lt.Name, err)
		}
		if lt.DirectMeter != "" {
			direct[lt.DirectMeter] = lt
		}
	}
	for i, m := range l.Meters {
		var err error
		if lt, ok := direct[m.Name]; ok {
			err = v.restoreDirectMeters(lt, st.Meters[i])
		} else if !m.Direct {
			err = v.restoreMeters(m, st.Meters[i])
		}
		if err != nil {
			return fmt.Errorf("meter %s: %w", m.Name, err)
		}
	}
	return nil
}

// callOf is a dump's action as the engine's, its data fitted to the
// action's parameters.
func (v *view) callOf(a bmstate.Action) (pipeline.ActionCall, error) {
	ai, err := v.pl.Action(a.ActionID)
	if err != nil {
		return pipeline.ActionCall{}, err
	}
	args, err := actionData(ai, a.Data)
	if err != nil {
		return pipeline.ActionCall{}, fmt.Errorf("action %s: bad data", ai.Name)
	}
	return pipeline.ActionCall{ActionID: a.ActionID, Params: args}, nil
}

func (v *view) restoreProfile(name string, ps *bmstate.ProfileState) error {
	id, ok := v.pl.Lookup(engine.KindActionProfile, name)
	if !ok {
		return fmt.Errorf("not in the engine")
	}
	for _, m := range ps.Members {
		call, err := v.callOf(m.Action)
		if err != nil {
			return fmt.Errorf("member %d: %w", m.Handle, err)
		}
		if err := v.pl.SetProfileMember(id, m.Handle, call); err != nil {
			return fmt.Errorf("member %d: %w", m.Handle, err)
		}
	}
	for _, g := range ps.Groups {
		if err := v.pl.SetProfileGroup(id, g.Handle, g.Members); err != nil {
			return fmt.Errorf("group %d: %w", g.Handle, err)
		}
	}
	return v.pl.SetProfileSlots(id, ps.Slots, uint32(len(ps.GroupRefs)))
}

func refOf(x uint32) pipeline.IndirectRef {
	if x&bmstate.GroupFlag != 0 {
		return pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: x &^ bmstate.GroupFlag}
	}
	return pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: x}
}

func (v *view) restoreTable(lt *bmstate.Table, ts *bmstate.TableState) error {
	t, err := v.table(lt.Name)
	if err != nil {
		return fmt.Errorf("not in the engine")
	}
	if t.info.Immutable {
		// The program's own entries are in already, with these handles.
		es, err := v.pl.EntriesByHandle(t.id)
		if err != nil {
			return err
		}
		if len(es) != len(ts.Entries) {
			return fmt.Errorf("%d entries, the program's const entries are %d", len(ts.Entries), len(es))
		}
		for i, e := range es {
			if se := ts.Entries[i]; se.Index != e.Handle&0xffffff || se.Version != e.Handle>>24 {
				return fmt.Errorf("entry %d: not one of the program's const entries", se.Index)
			}
		}
	} else {
		for i := range ts.Entries {
			se := &ts.Entries[i]
			if err := v.restoreEntry(t, lt, se); err != nil {
				return fmt.Errorf("entry %d: %w", se.Index, err)
			}
		}
	}
	if err := v.restoreDirectMeters(lt, ts.DirectMeters); err != nil {
		return err
	}
	if lt.Indirect {
		if ts.DefaultSet {
			return v.pl.SetDefaultIndirect(t.id, refOf(ts.DefaultIndex))
		}
		return nil
	}
	if ts.Default.ActionID < 0 {
		if _, ok, _ := v.pl.DefaultAction(t.id); ok {
			return fmt.Errorf("no default action, the program gives one")
		}
		return nil
	}
	call, err := v.callOf(ts.Default)
	if err != nil {
		return fmt.Errorf("default entry: %w", err)
	}
	if cur, ok, _ := v.pl.DefaultAction(t.id); ok && sameCall(cur, call) {
		return nil // also a const default
	}
	if err := v.pl.SetDefaultAction(t.id, call); err != nil {
		return fmt.Errorf("default entry: %w", err)
	}
	return nil
}

func sameCall(a, b pipeline.ActionCall) bool {
	return a.ActionID == b.ActionID && slices.EqualFunc(a.Params, b.Params, bytes.Equal)
}

func (v *view) restoreEntry(t *tbl, lt *bmstate.Table, se *bmstate.Entry) error {
	params, err := thriftKeyOf(lt, se)
	if err != nil {
		return err
	}
	var opts *standard.BmAddEntryOptions
	if lt.Unit == bmstate.UnitTernary || lt.Unit == bmstate.UnitRange {
		p := int32(se.Priority)
		opts = &standard.BmAddEntryOptions{Priority: &p}
	}
	e, err := t.newEntry(params, opts)
	if err != nil {
		return err
	}
	if lt.Indirect {
		e.Indirect = refOf(se.Indirect)
	} else if e.Action, err = v.callOf(se.Action); err != nil {
		return err
	}
	h := se.Version<<24 | se.Index
	if err := v.pl.AddEntryAt(t.id, e, h); err != nil {
		return err
	}
	if _, err := t.remember(params, e); err != nil {
		return err
	}
	if se.TimeoutMs != 0 {
		return v.setTimeout(t, h, se.TimeoutMs)
	}
	return nil
}

// setTimeout sets an entry's ageing timeout.
func (v *view) setTimeout(t *tbl, h uint32, ms uint32) error {
	if !t.info.SupportTimeout {
		return fmt.Errorf("an ageing timeout, in a table without support_timeout")
	}
	return v.pl.SetEntryTimeout(t.id, h, ms)
}

// restoreDirectMeters configures the direct meters of lt's entries from
// the cells of its meter array (cells of indexes without an entry are
// left: the engine's meters live with their entries).
func (v *view) restoreDirectMeters(lt *bmstate.Table, cells []bmstate.Meter) error {
	if lt.DirectMeter == "" {
		return nil
	}
	t, err := v.table(lt.Name)
	if err != nil {
		return err
	}
	es, err := v.pl.EntriesByHandle(t.id)
	if err != nil {
		return err
	}
	for _, e := range es {
		i := int(e.Handle & 0xffffff)
		if i >= len(cells) || cells[i].Rates == nil {
			continue
		}
		cfg, err := meterConfigOf(cells[i])
		if err != nil {
			return err
		}
		if err := v.pl.SetDirectMeter(t.id, e.Match, e.Priority, cfg); err != nil {
			return fmt.Errorf("direct meter of entry %d: %w", i, err)
		}
	}
	return nil
}

func (v *view) restoreMeters(m *bmstate.MeterArray, cells []bmstate.Meter) error {
	id, ok := v.pl.Lookup(engine.KindMeter, m.Name)
	if !ok {
		return fmt.Errorf("not in the engine")
	}
	for i, c := range cells {
		if c.Rates == nil {
			continue
		}
		cfg, err := meterConfigOf(c)
		if err != nil {
			return fmt.Errorf("cell %d: %w", i, err)
		}
		if err := v.pl.SetMeter(id, i, cfg); err != nil {
			return fmt.Errorf("cell %d: %w", i, err)
		}
	}
	return nil
}
