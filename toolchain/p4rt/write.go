package p4rt

import (
	"context"
	"fmt"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Write applies a batch of updates (spec §12). Updates are applied in
// order (CONTINUE_ON_ERROR); the optional atomicity modes are
// UNIMPLEMENTED.
func (s *Server) Write(_ context.Context, req *p4v1.WriteRequest) (resp *p4v1.WriteResponse, err error) {
	if err := s.checkPrimary(req.GetDeviceId(), req.GetRole(), req.GetElectionId()); err != nil {
		return nil, rpcError(err)
	}
	if req.GetAtomicity() != p4v1.WriteRequest_CONTINUE_ON_ERROR {
		return nil, rpcError(errorf(codes.Unimplemented, "atomicity %v is not supported; use CONTINUE_ON_ERROR", req.GetAtomicity()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, rpcError(errorf(codes.FailedPrecondition, "no forwarding pipeline config has been set"))
	}
	errs := make([]error, len(req.GetUpdates()))
	for i, u := range req.GetUpdates() {
		errs[i] = s.applyGuarded(s.cur, u)
	}
	s.idle.poke()
	if err := batchError("Write", errs); err != nil {
		return nil, err
	}
	return &p4v1.WriteResponse{}, nil
}

// applyGuarded keeps one bad update from taking the switch down: a panic
// in the translation or the engine becomes an INTERNAL error for that
// update, and is logged for a bug report.
func (s *Server) applyGuarded(ps *pipelineState, u *p4v1.Update) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("BUG: panic while applying a P4Runtime update", "panic", fmt.Sprint(r))
			err = errorf(codes.Internal, "internal error: %v", r)
		}
	}()
	return s.apply(ps, u)
}

func (s *Server) apply(ps *pipelineState, u *p4v1.Update) error {
	if u == nil || u.GetEntity() == nil {
		return invalid("update has no entity")
	}
	typ := u.GetType()
	if typ != p4v1.Update_INSERT && typ != p4v1.Update_MODIFY && typ != p4v1.Update_DELETE {
		return invalid("update type %v is not INSERT, MODIFY or DELETE", typ)
	}
	e := u.GetEntity()
	switch x := e.GetEntity().(type) {
	case *p4v1.Entity_TableEntry:
		return ps.writeTableEntry(typ, x.TableEntry)
	case *p4v1.Entity_CounterEntry:
		return ps.writeCounterEntry(typ, x.CounterEntry)
	case *p4v1.Entity_DirectCounterEntry:
		return ps.writeDirectCounterEntry(typ, x.DirectCounterEntry)
	case *p4v1.Entity_MeterEntry:
		return ps.writeMeterEntry(typ, x.MeterEntry)
	case *p4v1.Entity_DirectMeterEntry:
		return ps.writeDirectMeterEntry(typ, x.DirectMeterEntry)
	case *p4v1.Entity_RegisterEntry:
		return ps.writeRegisterEntry(typ, x.RegisterEntry)
	case *p4v1.Entity_PacketReplicationEngineEntry:
		return ps.writePRE(typ, x.PacketReplicationEngineEntry)
	case *p4v1.Entity_DigestEntry:
		err := ps.writeDigestEntry(typ, x.DigestEntry)
		if err == nil {
			s.digests.reset(ps)
		}
		return err
	case *p4v1.Entity_ActionProfileMember:
		return ps.writeProfileMember(typ, x.ActionProfileMember)
	case *p4v1.Entity_ActionProfileGroup:
		return ps.writeProfileGroup(typ, x.ActionProfileGroup)
	case *p4v1.Entity_ValueSetEntry:
		return ps.writeValueSet(typ, x.ValueSetEntry)
	case *p4v1.Entity_ExternEntry:
		return errorf(codes.Unimplemented, "v1model has no P4Runtime extern entries")
	default:
		return invalid("entity has no entity set")
	}
}

// engineErr maps an engine failure that the server's own checks did not
// foresee: a code the engine chose is kept, anything else is INTERNAL.
func engineErr(what string, err error) error {
	c := codeOf(err)
	return errorf(c, "%s: %s", what, messageOf(err))
}

func (ps *pipelineState) table(id uint32) (*tableInfo, *tableState, error) {
	if id == 0 {
		return nil, nil, invalid("table id 0 is only allowed as a read wildcard")
	}
	t, ok := ps.schema.tables[id]
	if !ok {
		return nil, nil, errorf(codes.NotFound, "no table with id %#x", id)
	}
	return t, ps.tables[id], nil
}

func (ps *pipelineState) writeTableEntry(typ p4v1.Update_Type, te *p4v1.TableEntry) error {
	t, ts, err := ps.table(te.GetTableId())
	if err != nil {
		return err
	}
	if te.GetIsConst() {
		return invalid("is_const must be false in a write")
	}
	if t.missing {
		return errorf(codes.Unimplemented, "table %q is not in the device config (the compiler removed it)", t.name)
	}
	if te.GetIsDefaultAction() {
		return ps.writeDefaultEntry(typ, t, ts, te)
	}
	if len(t.fields) == 0 && typ == p4v1.Update_INSERT {
		return invalid("table %q has no key: only its default entry can be written", t.name)
	}
	if te.GetTimeSinceLastHit() != nil {
		return invalid("time_since_last_hit must be unset in a write")
	}
	if te.GetIdleTimeoutNs() < 0 {
		return invalid("idle_timeout_ns must not be negative")
	}
	if typ != p4v1.Update_DELETE && te.GetIdleTimeoutNs() != 0 && !t.idleTimeout {
		return invalid("table %q does not support idle timeout", t.name)
	}
	prio := te.GetPriority()
	if t.needsPriority && prio <= 0 {
		return invalid("table %q has ternary/range/optional fields: priority must be > 0", t.name)
	}
	if !t.needsPriority && prio != 0 {
		return invalid("table %q has only exact/lpm fields: priority must be 0", t.name)
	}
	match, old, err := ps.lookup(t, te)
	if err != nil {
		return err
	}
	w := &entryWrite{t: t, ts: ts, te: te, key: entryKey(match, prio), ekey: keyFields(t, match), prio: prio, old: old}
	if typ == p4v1.Update_DELETE {
		return ps.deleteEntry(w)
	}
	if err := w.parseDirect(); err != nil {
		return err
	}
	if typ == p4v1.Update_INSERT {
		return ps.insertEntry(w)
	}
	return ps.modifyEntry(w)
}

// entryWrite is a table entry write that passed the checks every update
// type shares, with the entry it names.
type entryWrite struct {
	t    *tableInfo
	ts   *tableState
	te   *p4v1.TableEntry
	key  string           // entryKey, tableState.meta's key
	ekey []pipeline.Match // the key as the device takes it
	prio int32
	old  *tableEntry // nil: no entry has this key
	// The entry's direct resources as written (INSERT, MODIFY).
	counter pipeline.CounterData
	meter   *pipeline.MeterConfig
}

// parseDirect checks and parses the entry's direct counter and meter data.
func (w *entryWrite) parseDirect() error {
	t, te := w.t, w.te
	if te.GetMeterCounterData() != nil {
		return errorf(codes.Unimplemented, "per-colour meter counters are not supported")
	}
	if te.GetCounterData() != nil && t.directCounter == 0 {
		return invalid("table %q has no direct counter", t.name)
	}
	if te.GetCounterData() != nil {
		var err error
		if w.counter, err = counterValue(te.GetCounterData()); err != nil {
			return err
		}
	}
	if te.GetMeterConfig() != nil && t.directMeter == 0 {
		return invalid("table %q has no direct meter", t.name)
	}
	var err error
	w.meter, err = parseMeterConfig(te.GetMeterConfig(), t.meterType)
	return err
}

func (ps *pipelineState) deleteEntry(w *entryWrite) error {
	t, old := w.t, w.old
	if t.isConst || (old != nil && old.isConst) {
		return errorf(codes.PermissionDenied, "table %q: entries declared by the program cannot be deleted", t.name)
	}
	if old == nil {
		return errorf(codes.NotFound, "table %q: no such entry", t.name)
	}
	if err := ps.ctl.DeleteEntry(t.name, w.ekey, w.prio); err != nil {
		return engineErr("deleting the entry", err)
	}
	ps.reference(t, old.ref, -1)
	ps.dropOneShot(t, old.oneShot)
	delete(w.ts.meta, w.key)
	w.ts.count--
	return nil
}

func (ps *pipelineState) insertEntry(w *entryWrite) error {
	t, ts, te, ekey, prio := w.t, w.ts, w.te, w.ekey, w.prio
	if t.isConst {
		return errorf(codes.PermissionDenied, "table %q is const: entries cannot be added", t.name)
	}
	if w.old != nil {
		return errorf(codes.AlreadyExists, "table %q: the entry exists", t.name)
	}
	if te.GetAction() == nil {
		return invalid("table %q: INSERT needs an action", t.name)
	}
	var act boundAction
	var ref *pipeline.IndirectRef
	var os *oneShot
	if t.indirect {
		// Checked before resolveIndirect programs a one-shot set for the entry.
		if t.size > 0 && ts.count >= t.size {
			return errorf(codes.ResourceExhausted, "table %q is full (%d entries)", t.name, t.size)
		}
		r, o, err := ps.resolveIndirect(t, te.GetAction())
		if err != nil {
			return err
		}
		ref, os = &r, o
	} else {
		if te.GetAction().GetAction() == nil {
			return notDirectAction(t)
		}
		var err error
		if act, err = ps.schema.parseAction(t, te.GetAction().GetAction(), false); err != nil {
			return err
		}
	}
	if t.size > 0 && ts.count >= t.size {
		return errorf(codes.ResourceExhausted, "table %q is full (%d entries)", t.name, t.size)
	}
	if ref != nil {
		if err := ps.ctl.AddIndirectEntry(t.name, ekey, prio, *ref); err != nil {
			ps.dropOneShot(t, os)
			return engineErr("adding the entry", err)
		}
	} else {
		name, args := ps.schema.engineArgs(act)
		if err := ps.ctl.AddEntry(t.name, ekey, prio, name, args); err != nil {
			return engineErr("adding the entry", err)
		}
	}
	if w.meter != nil {
		if err := ps.ctl.SetDirectMeter(t.name, ekey, prio, w.meter); err != nil {
			_ = ps.ctl.DeleteEntry(t.name, ekey, prio)
			ps.dropOneShot(t, os)
			return engineErr("configuring the direct meter", err)
		}
	}
	if te.GetCounterData() != nil {
		if err := ps.ctl.WriteDirectCounter(t.name, ekey, prio, w.counter); err != nil {
			_ = ps.ctl.DeleteEntry(t.name, ekey, prio)
			ps.dropOneShot(t, os)
			return engineErr("setting the direct counter", err)
		}
	}
	if ns := te.GetIdleTimeoutNs(); ns != 0 {
		if err := ps.ctl.SetEntryTimeout(t.name, ekey, prio, time.Duration(ns)); err != nil {
			_ = ps.ctl.DeleteEntry(t.name, ekey, prio)
			ps.dropOneShot(t, os)
			return engineErr("setting the idle timeout", err)
		}
	}
	ts.setMeta(w.key, entryMeta{oneShot: os, controllerMetadata: te.GetControllerMetadata(), metadata: clone(te.GetMetadata()), idleTimeoutNs: te.GetIdleTimeoutNs()})
	ts.count++
	ps.reference(t, ref, +1)
	return nil
}

// modifyEntry has full-snapshot semantics (§12), except that an unset
// action keeps the action and an unset counter_data keeps the count
// (§9.1.2, §9.1.8).
func (ps *pipelineState) modifyEntry(w *entryWrite) error {
	t, te, old, ekey, prio := w.t, w.te, w.old, w.ekey, w.prio
	if old == nil {
		return errorf(codes.NotFound, "table %q: no such entry", t.name)
	}
	if (t.isConst || old.isConst) && te.GetAction() != nil {
		// Only the direct resources of a const entry may change (§9.1.4).
		return errorf(codes.PermissionDenied, "table %q: the action of a const entry cannot change", t.name)
	}
	oneShot := old.oneShot
	if te.GetAction() != nil && t.indirect {
		ref, os, err := ps.resolveIndirect(t, te.GetAction())
		if err != nil {
			return err
		}
		if err := ps.ctl.ModifyIndirectEntry(t.name, ekey, prio, ref); err != nil {
			ps.dropOneShot(t, os)
			return engineErr("modifying the entry", err)
		}
		ps.reference(t, old.ref, -1)
		ps.dropOneShot(t, old.oneShot)
		oneShot = os
		ps.reference(t, &ref, +1)
	} else if te.GetAction() != nil {
		if te.GetAction().GetAction() == nil {
			return notDirectAction(t)
		}
		act, err := ps.schema.parseAction(t, te.GetAction().GetAction(), false)
		if err != nil {
			return err
		}
		name, args := ps.schema.engineArgs(act)
		if err := ps.ctl.ModifyEntry(t.name, ekey, prio, name, args); err != nil {
			return engineErr("modifying the entry", err)
		}
	}
	if t.directMeter != 0 {
		if err := ps.ctl.SetDirectMeter(t.name, ekey, prio, w.meter); err != nil {
			return engineErr("configuring the direct meter", err)
		}
	}
	if te.GetCounterData() != nil {
		if err := ps.ctl.WriteDirectCounter(t.name, ekey, prio, w.counter); err != nil {
			return engineErr("setting the direct counter", err)
		}
	}
	// A MODIFY that keeps the timeout keeps the idle time running, as PI
	// does; a new timeout starts it again.
	if ns := te.GetIdleTimeoutNs(); t.idleTimeout && ns != old.idleTimeoutNs {
		if err := ps.ctl.SetEntryTimeout(t.name, ekey, prio, time.Duration(ns)); err != nil {
			return engineErr("setting the idle timeout", err)
		}
	}
	w.ts.setMeta(w.key, entryMeta{oneShot: oneShot, controllerMetadata: te.GetControllerMetadata(), metadata: clone(te.GetMetadata()), idleTimeoutNs: te.GetIdleTimeoutNs()})
	return nil
}

// writeDefaultEntry handles is_default_action (spec §9.1.3).
func (ps *pipelineState) writeDefaultEntry(typ p4v1.Update_Type, t *tableInfo, ts *tableState, te *p4v1.TableEntry) error {
	if typ != p4v1.Update_MODIFY {
		return invalid("the default entry can only be modified")
	}
	if len(te.GetMatch()) != 0 || te.GetPriority() != 0 {
		return invalid("the default entry has no match and priority 0")
	}
	if te.GetIdleTimeoutNs() != 0 || te.GetTimeSinceLastHit() != nil {
		return invalid("the default entry has no idle timeout")
	}
	if t.constDefaultID != 0 {
		return errorf(codes.PermissionDenied, "table %q has a const default action", t.name)
	}
	if te.GetCounterData() != nil || te.GetMeterConfig() != nil || te.GetMeterCounterData() != nil {
		return errorf(codes.Unimplemented, "direct resources of default entries are not supported (as in BMv2)")
	}
	if t.indirect {
		// PI, under simple_switch_grpc, refuses this too: the default
		// entry of an indirect table stays the program's.
		return invalid("table %q uses action profile %q: its default entry cannot be set or reset", t.name, t.profile.name)
	}
	if te.GetAction() == nil {
		// Reset to the program's default.
		if err := ps.ctl.ResetDefaultAction(t.name); err != nil {
			return engineErr("restoring the default action", err)
		}
		ts.clientDefault, ts.defaultCookie, ts.defaultMeta = false, 0, nil
		return nil
	}
	if te.GetAction().GetAction() == nil {
		return notDirectAction(t)
	}
	act, err := ps.schema.parseAction(t, te.GetAction().GetAction(), true)
	if err != nil {
		return err
	}
	name, args := ps.schema.engineArgs(act)
	if err := ps.ctl.SetDefaultAction(t.name, name, args); err != nil {
		return engineErr("setting the default action", err)
	}
	ts.clientDefault = true
	ts.defaultCookie = te.GetControllerMetadata()
	ts.defaultMeta = clone(te.GetMetadata())
	return nil
}

// initialDefault is the program's default action for t.
func (s *schema) initialDefault(t *tableInfo) (boundAction, bool) {
	d := t.initialDefault
	if d == nil {
		return boundAction{}, false
	}
	ai, ok := s.actions[d.GetActionId()]
	if !ok {
		return boundAction{}, false
	}
	var ps []*p4v1.Action_Param
	for _, a := range d.GetArguments() {
		ps = append(ps, &p4v1.Action_Param{ParamId: a.GetParamId(), Value: a.GetValue()})
	}
	b, err := s.bindParams(ai, ps, true)
	if err != nil {
		return boundAction{}, false
	}
	return b, true
}

// findEntry resolves the table entry a direct resource refers to.
func (ps *pipelineState) findEntry(te *p4v1.TableEntry) (*tableInfo, *tableEntry, error) {
	if te == nil {
		return nil, nil, invalid("table_entry is missing")
	}
	t, _, err := ps.table(te.GetTableId())
	if err != nil {
		return nil, nil, err
	}
	if te.GetIsDefaultAction() {
		return nil, nil, errorf(codes.Unimplemented, "direct resources of default entries are not supported (as in BMv2)")
	}
	_, e, err := ps.lookup(t, te)
	if err != nil {
		return nil, nil, err
	}
	if e == nil {
		return nil, nil, errorf(codes.NotFound, "table %q: no such entry", t.name)
	}
	return t, e, nil
}

func onlyModify(typ p4v1.Update_Type, what string) error {
	if typ != p4v1.Update_MODIFY {
		return invalid("%s supports MODIFY only", what)
	}
	return nil
}

func (ps *pipelineState) writeDirectCounterEntry(typ p4v1.Update_Type, d *p4v1.DirectCounterEntry) error {
	if err := onlyModify(typ, "DirectCounterEntry"); err != nil {
		return err
	}
	if t, ok := ps.schema.tables[d.GetTableEntry().GetTableId()]; ok && t.directCounter == 0 {
		return invalid("table %q has no direct counter", t.name)
	}
	t, e, err := ps.findEntry(d.GetTableEntry())
	if err != nil {
		return err
	}
	if d.GetData() == nil {
		return nil
	}
	v, err := counterValue(d.GetData())
	if err != nil {
		return err
	}
	if err := ps.ctl.WriteDirectCounter(t.name, keyFields(t, e.match), e.priority, v); err != nil {
		return engineErr("setting the direct counter", err)
	}
	return nil
}

func (ps *pipelineState) writeDirectMeterEntry(typ p4v1.Update_Type, d *p4v1.DirectMeterEntry) error {
	if err := onlyModify(typ, "DirectMeterEntry"); err != nil {
		return err
	}
	if d.GetCounterData() != nil {
		return errorf(codes.Unimplemented, "per-colour meter counters are not supported")
	}
	if t, ok := ps.schema.tables[d.GetTableEntry().GetTableId()]; ok && t.directMeter == 0 {
		return invalid("table %q has no direct meter", t.name)
	}
	t, e, err := ps.findEntry(d.GetTableEntry())
	if err != nil {
		return err
	}
	mc, err := parseMeterConfig(d.GetConfig(), t.meterType)
	if err != nil {
		return err
	}
	if err := ps.ctl.SetDirectMeter(t.name, keyFields(t, e.match), e.priority, mc); err != nil {
		return engineErr("configuring the direct meter", err)
	}
	return nil
}

// indexRange resolves an Index message against an array of size n: unset
// means every cell (spec §9.5, §9.6, §9.9).
func indexRange(idx *p4v1.Index, n int64) (int64, int64, error) {
	if idx == nil {
		return 0, n, nil
	}
	i := idx.GetIndex()
	if i < 0 {
		return 0, 0, invalid("negative index %d", i)
	}
	if i >= n {
		return 0, 0, errorf(codes.OutOfRange, "index %d is past the array's %d cells", i, n)
	}
	return i, i + 1, nil
}

// indexedExtern resolves the target of a write to a counter, meter or
// register array: MODIFY only, and a P4Info id (0 is a read wildcard).
func indexedExtern(typ p4v1.Update_Type, entity, kind string, arrays map[uint32]*arrayInfo, id uint32) (*arrayInfo, error) {
	if err := onlyModify(typ, entity); err != nil {
		return nil, err
	}
	if id == 0 {
		return nil, invalid("%s id 0 is only allowed as a read wildcard", kind)
	}
	a, ok := arrays[id]
	if !ok {
		return nil, errorf(codes.NotFound, "no %s with id %#x", kind, id)
	}
	return a, nil
}

// eachCell applies set to cells [lo, hi), stopping at the device's first
// refusal, which it reports as failing what.
func eachCell(lo, hi int64, what string, set func(i int64) error) error {
	for i := lo; i < hi; i++ {
		if err := set(i); err != nil {
			return engineErr(what, err)
		}
	}
	return nil
}

func (ps *pipelineState) writeCounterEntry(typ p4v1.Update_Type, c *p4v1.CounterEntry) error {
	ci, err := indexedExtern(typ, "CounterEntry", "counter", ps.schema.counters, c.GetCounterId())
	if err != nil {
		return err
	}
	lo, hi, err := indexRange(c.GetIndex(), ci.size)
	if err != nil {
		return err
	}
	if c.GetData() == nil {
		return nil
	}
	v, err := counterValue(c.GetData())
	if err != nil {
		return err
	}
	return eachCell(lo, hi, "writing the counter", func(i int64) error { return ps.ctl.WriteCounter(ci.name, i, v) })
}

func (ps *pipelineState) writeMeterEntry(typ p4v1.Update_Type, m *p4v1.MeterEntry) error {
	mi, err := indexedExtern(typ, "MeterEntry", "meter", ps.schema.meters, m.GetMeterId())
	if err != nil {
		return err
	}
	if m.GetCounterData() != nil {
		return errorf(codes.Unimplemented, "per-colour meter counters are not supported")
	}
	lo, hi, err := indexRange(m.GetIndex(), mi.size)
	if err != nil {
		return err
	}
	mc, err := parseMeterConfig(m.GetConfig(), mi.meterType)
	if err != nil {
		return err
	}
	return eachCell(lo, hi, "configuring the meter", func(i int64) error { return ps.ctl.SetMeter(mi.name, i, mc) })
}

func (ps *pipelineState) writeRegisterEntry(typ p4v1.Update_Type, r *p4v1.RegisterEntry) error {
	ri, err := indexedExtern(typ, "RegisterEntry", "register", ps.schema.registers, r.GetRegisterId())
	if err != nil {
		return err
	}
	lo, hi, err := indexRange(r.GetIndex(), ri.size)
	if err != nil {
		return err
	}
	bs := r.GetData().GetBitstring()
	if r.GetData() == nil || bs == nil {
		return invalid("register %q: data must be a bitstring P4Data", ri.name)
	}
	v, err := canonical(bs, ri.width)
	if err != nil {
		return invalid("register %q: %s", ri.name, messageOf(err))
	}
	return eachCell(lo, hi, "writing the register", func(i int64) error { return ps.ctl.WriteRegister(ri.name, i, padded(v, ri.width)) })
}

// notDirectAction is the error for a TableAction that is not an Action
// in a direct table: the oneof does not match the table (spec §9.1.2:
// INVALID_ARGUMENT).
func notDirectAction(t *tableInfo) error {
	return invalid("table %q takes a direct action, not an action profile member, group or action set", t.name)
}
