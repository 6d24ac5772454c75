// Package enginetarget connects the P4Runtime server to the pipeline
// engine: Control adapts an engine pipeline's control API to
// p4rt.PipelineControl (names → JSON ids, P4Runtime error codes), and
// Loopback is a complete in-process p4rt.Target over the engine, with
// packets passed through function calls instead of interfaces (used by
// the server's tests and by anything that wants P4Runtime without ports).
package enginetarget

import (
	"errors"
	"sync"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/p4rt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Control adapts pl to the control interface the P4Runtime server uses.
func Control(pl *engine.Pipeline) p4rt.PipelineControl {
	return &control{pl: pl, tableActions: map[int]map[string]int{}}
}

type control struct {
	pl *engine.Pipeline

	mu           sync.Mutex
	tableActions map[int]map[string]int // table id → action name → JSON id
}

// grpcCode maps the engine's error classes one to one.
func grpcCode(c engine.ErrorCode) codes.Code {
	switch c {
	case engine.CodeInvalidArgument:
		return codes.InvalidArgument
	case engine.CodeNotFound:
		return codes.NotFound
	case engine.CodeAlreadyExists:
		return codes.AlreadyExists
	case engine.CodeOutOfRange:
		return codes.OutOfRange
	case engine.CodeResourceExhausted:
		return codes.ResourceExhausted
	case engine.CodePermissionDenied:
		return codes.PermissionDenied
	case engine.CodeUnimplemented:
		return codes.Unimplemented
	case engine.CodeFailedPrecondition:
		return codes.FailedPrecondition
	}
	return codes.Internal
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	var e *engine.Error
	if errors.As(err, &e) {
		return status.Error(grpcCode(e.Code), e.Msg)
	}
	return status.Error(codes.Internal, err.Error())
}

func (c *control) id(kind engine.ObjectKind, what, name string) (int, error) {
	id, ok := c.pl.Lookup(kind, name)
	if !ok {
		return 0, status.Errorf(codes.NotFound, "the pipeline has no %s %q", what, name)
	}
	return id, nil
}

// action resolves an action name within a table: p4c may emit several
// JSON actions with one name (copies per call site), and the table's
// action list says which one it runs.
func (c *control) action(table int, name string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.tableActions[table]
	if !ok {
		ti, err := c.pl.Table(table)
		if err != nil {
			return 0, wrap(err)
		}
		m = map[string]int{}
		for _, aid := range ti.ActionIDs {
			ai, err := c.pl.Action(aid)
			if err != nil {
				return 0, wrap(err)
			}
			if _, dup := m[ai.Name]; !dup {
				m[ai.Name] = aid
			}
		}
		c.tableActions[table] = m
	}
	aid, ok := m[name]
	if !ok {
		return 0, status.Errorf(codes.InvalidArgument, "action %q is not an action of the table", name)
	}
	return aid, nil
}

func matches(key []p4rt.KeyField) []engine.Match {
	out := make([]engine.Match, len(key))
	for i, k := range key {
		out[i] = engine.Match{Value: k.Value, Mask: k.Mask, High: k.High, PrefixLen: k.PrefixLen,
			Wildcard: k.Wildcard && k.Kind != p4rt.MatchExact}
	}
	return out
}

func (c *control) call(table int, action string, args [][]byte) (engine.ActionCall, error) {
	aid, err := c.action(table, action)
	if err != nil {
		return engine.ActionCall{}, err
	}
	return engine.ActionCall{ActionID: aid, Params: args}, nil
}

func (c *control) AddEntry(table string, key []p4rt.KeyField, priority int32, action string, args [][]byte) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	a, err := c.call(tid, action, args)
	if err != nil {
		return err
	}
	return wrap(c.pl.AddEntry(tid, engine.TableEntry{Match: matches(key), Priority: priority, Action: a}))
}

func (c *control) ModifyEntry(table string, key []p4rt.KeyField, priority int32, action string, args [][]byte) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	a, err := c.call(tid, action, args)
	if err != nil {
		return err
	}
	return wrap(c.pl.ModifyEntry(tid, engine.TableEntry{Match: matches(key), Priority: priority, Action: a}))
}

func (c *control) DeleteEntry(table string, key []p4rt.KeyField, priority int32) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.DeleteEntry(tid, matches(key), priority))
}

func (c *control) SetDefaultAction(table string, action string, args [][]byte) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	a, err := c.call(tid, action, args)
	if err != nil {
		return err
	}
	return wrap(c.pl.SetDefaultAction(tid, a))
}

func (c *control) ResetDefaultAction(table string) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.ResetDefaultAction(tid))
}

func (c *control) ReadDirectCounter(table string, key []p4rt.KeyField, priority int32) (p4rt.CounterValue, error) {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return p4rt.CounterValue{}, err
	}
	d, err := c.pl.ReadDirectCounter(tid, matches(key), priority)
	return counterValue(d), wrap(err)
}

func (c *control) WriteDirectCounter(table string, key []p4rt.KeyField, priority int32, v p4rt.CounterValue) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.WriteDirectCounter(tid, matches(key), priority, counterData(v)))
}

func (c *control) SetDirectMeter(table string, key []p4rt.KeyField, priority int32, m *p4rt.MeterConfig) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.SetDirectMeter(tid, matches(key), priority, meterConfig(m)))
}

func (c *control) ReadCounter(counter string, index int64) (p4rt.CounterValue, error) {
	id, err := c.id(engine.KindCounter, "counter", counter)
	if err != nil {
		return p4rt.CounterValue{}, err
	}
	d, err := c.pl.ReadCounter(id, int(index))
	return counterValue(d), wrap(err)
}

func (c *control) WriteCounter(counter string, index int64, v p4rt.CounterValue) error {
	id, err := c.id(engine.KindCounter, "counter", counter)
	if err != nil {
		return err
	}
	return wrap(c.pl.WriteCounter(id, int(index), counterData(v)))
}

func (c *control) SetMeter(meter string, index int64, m *p4rt.MeterConfig) error {
	id, err := c.id(engine.KindMeter, "meter", meter)
	if err != nil {
		return err
	}
	if index < 0 {
		return status.Errorf(codes.InvalidArgument, "negative meter index %d", index)
	}
	return wrap(c.pl.SetMeter(id, int(index), meterConfig(m)))
}

func (c *control) ReadRegister(register string, index int64) ([]byte, error) {
	id, err := c.id(engine.KindRegister, "register", register)
	if err != nil {
		return nil, err
	}
	v, err := c.pl.ReadRegister(id, int(index))
	return v, wrap(err)
}

func (c *control) WriteRegister(register string, index int64, value []byte) error {
	id, err := c.id(engine.KindRegister, "register", register)
	if err != nil {
		return err
	}
	return wrap(c.pl.WriteRegister(id, int(index), value))
}

func replicas(rs []p4rt.Replica) []engine.Replica {
	out := make([]engine.Replica, len(rs))
	for i, r := range rs {
		out[i] = engine.Replica{Port: r.Port, Rid: r.Instance}
	}
	return out
}

func (c *control) SetMulticastGroup(group uint32, rs []p4rt.Replica) error {
	return wrap(c.pl.SetMulticastGroup(group, replicas(rs)))
}

func (c *control) DeleteMulticastGroup(group uint32) error {
	return wrap(c.pl.DeleteMulticastGroup(group))
}

func (c *control) SetCloneSession(session uint32, s p4rt.CloneSession) error {
	return wrap(c.pl.SetCloneSession(session, engine.CloneSession{
		Replicas: replicas(s.Replicas), TruncateLength: int(s.TruncateBytes), ClassOfService: s.ClassOfService}))
}

func (c *control) DeleteCloneSession(session uint32) error {
	return wrap(c.pl.DeleteCloneSession(session))
}

// profileAction resolves an action name for a member of profile: the
// profile's actions are those of the tables it implements.
func (c *control) profileAction(profile int, name string) (int, error) {
	for _, info := range c.pl.ActionProfiles() {
		if info.ID != profile {
			continue
		}
		for _, tid := range info.TableIDs {
			if aid, err := c.action(tid, name); err == nil {
				return aid, nil
			}
		}
	}
	return 0, status.Errorf(codes.InvalidArgument, "action %q is not an action of the profile's tables", name)
}

func (c *control) SetProfileMember(profile string, member uint32, action string, args [][]byte) error {
	pid, err := c.id(engine.KindActionProfile, "action profile", profile)
	if err != nil {
		return err
	}
	aid, err := c.profileAction(pid, action)
	if err != nil {
		return err
	}
	return wrap(c.pl.SetProfileMember(pid, member, engine.ActionCall{ActionID: aid, Params: args}))
}

func (c *control) DeleteProfileMember(profile string, member uint32) error {
	pid, err := c.id(engine.KindActionProfile, "action profile", profile)
	if err != nil {
		return err
	}
	return wrap(c.pl.DeleteProfileMember(pid, member))
}

func (c *control) SetProfileGroup(profile string, group uint32, members []uint32) error {
	pid, err := c.id(engine.KindActionProfile, "action profile", profile)
	if err != nil {
		return err
	}
	return wrap(c.pl.SetProfileGroup(pid, group, members))
}

func (c *control) DeleteProfileGroup(profile string, group uint32) error {
	pid, err := c.id(engine.KindActionProfile, "action profile", profile)
	if err != nil {
		return err
	}
	return wrap(c.pl.DeleteProfileGroup(pid, group))
}

func indirectRef(ref p4rt.IndirectRef) engine.IndirectRef {
	switch ref.Kind {
	case p4rt.IndirectMember:
		return engine.IndirectRef{Kind: engine.IndirectMember, ID: ref.ID}
	case p4rt.IndirectGroup:
		return engine.IndirectRef{Kind: engine.IndirectGroup, ID: ref.ID}
	}
	return engine.IndirectRef{}
}

func (c *control) AddIndirectEntry(table string, key []p4rt.KeyField, priority int32, ref p4rt.IndirectRef) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.AddEntry(tid, engine.TableEntry{Match: matches(key), Priority: priority, Indirect: indirectRef(ref)}))
}

func (c *control) ModifyIndirectEntry(table string, key []p4rt.KeyField, priority int32, ref p4rt.IndirectRef) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.ModifyEntry(tid, engine.TableEntry{Match: matches(key), Priority: priority, Indirect: indirectRef(ref)}))
}

func (c *control) SetValueSet(valueSet string, members []p4rt.ValueSetMember) error {
	id, err := c.id(engine.KindValueSet, "value set", valueSet)
	if err != nil {
		return err
	}
	ms := make([]engine.ValueSetMember, len(members))
	for i, m := range members {
		ms[i] = engine.ValueSetMember{Value: m.Value, Mask: m.Mask}
	}
	return wrap(c.pl.SetValueSet(id, ms))
}

func counterValue(d engine.CounterData) p4rt.CounterValue {
	return p4rt.CounterValue{Bytes: int64(d.Bytes), Packets: int64(d.Packets)}
}

func counterData(v p4rt.CounterValue) engine.CounterData {
	return engine.CounterData{Bytes: uint64(v.Bytes), Packets: uint64(v.Packets)}
}

func meterConfig(m *p4rt.MeterConfig) *engine.MeterConfig {
	if m == nil {
		return nil
	}
	return &engine.MeterConfig{CIR: uint64(m.CIR), CBurst: uint64(m.CBurst), PIR: uint64(m.PIR), PBurst: uint64(m.PBurst)}
}

// DigestOf converts an engine digest for the server's digest sink.
func DigestOf(d engine.Digest) p4rt.Digest {
	return p4rt.Digest{Name: d.Name, Fields: d.Fields}
}
