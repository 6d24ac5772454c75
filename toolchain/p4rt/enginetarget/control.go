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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/p4rt"
	"github.com/terrapin/terrapin/toolchain/pipeline"
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

// wrap gives an engine error its gRPC code, which is the engine's code by
// value.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var e *engine.Error
	if errors.As(err, &e) {
		return status.Error(codes.Code(e.Code), e.Msg)
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

func (c *control) call(table int, action string, args [][]byte) (pipeline.ActionCall, error) {
	aid, err := c.action(table, action)
	if err != nil {
		return pipeline.ActionCall{}, err
	}
	return pipeline.ActionCall{ActionID: aid, Params: args}, nil
}

func (c *control) AddEntry(table string, key []pipeline.Match, priority int32, action string, args [][]byte) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	a, err := c.call(tid, action, args)
	if err != nil {
		return err
	}
	return wrap(c.pl.AddEntry(tid, pipeline.TableEntry{Match: key, Priority: priority, Action: a}))
}

func (c *control) ModifyEntry(table string, key []pipeline.Match, priority int32, action string, args [][]byte) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	a, err := c.call(tid, action, args)
	if err != nil {
		return err
	}
	return wrap(c.pl.ModifyEntry(tid, pipeline.TableEntry{Match: key, Priority: priority, Action: a}))
}

func (c *control) DeleteEntry(table string, key []pipeline.Match, priority int32) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.DeleteEntry(tid, key, priority))
}

// read resolves name and reads one object by its id.
func read[T any](c *control, kind engine.ObjectKind, what, name string, get func(id int) (T, error)) (T, error) {
	id, err := c.id(kind, what, name)
	if err != nil {
		var none T
		return none, err
	}
	v, err := get(id)
	return v, wrap(err)
}

func (c *control) Entries(table string) ([]pipeline.TableEntry, error) {
	return read(c, engine.KindTable, "table", table, c.pl.ReadEntries)
}

func (c *control) Entry(table string, key []pipeline.Match, priority int32) (pipeline.TableEntry, bool, error) {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return pipeline.TableEntry{}, false, err
	}
	e, err := c.pl.ReadEntry(tid, key, priority)
	if err != nil {
		if engine.ErrorCodeOf(err) == engine.CodeNotFound {
			return pipeline.TableEntry{}, false, nil
		}
		return pipeline.TableEntry{}, false, wrap(err)
	}
	return e, true, nil
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

func (c *control) DefaultAction(table string) (pipeline.ActionCall, bool, error) {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return pipeline.ActionCall{}, false, err
	}
	a, ok, err := c.pl.DefaultAction(tid)
	return a, ok, wrap(err)
}

func (c *control) ReadDirectCounter(table string, key []pipeline.Match, priority int32) (pipeline.CounterData, error) {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return pipeline.CounterData{}, err
	}
	d, err := c.pl.ReadDirectCounter(tid, key, priority)
	return d, wrap(err)
}

func (c *control) WriteDirectCounter(table string, key []pipeline.Match, priority int32, v pipeline.CounterData) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.WriteDirectCounter(tid, key, priority, v))
}

func (c *control) SetDirectMeter(table string, key []pipeline.Match, priority int32, m *pipeline.MeterConfig) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.SetDirectMeter(tid, key, priority, m))
}

func (c *control) DirectMeter(table string, key []pipeline.Match, priority int32) (*pipeline.MeterConfig, error) {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return nil, err
	}
	m, err := c.pl.DirectMeter(tid, key, priority)
	return m, wrap(err)
}

func (c *control) ReadCounter(counter string, index int64) (pipeline.CounterData, error) {
	id, err := c.id(engine.KindCounter, "counter", counter)
	if err != nil {
		return pipeline.CounterData{}, err
	}
	d, err := c.pl.ReadCounter(id, int(index))
	return d, wrap(err)
}

func (c *control) WriteCounter(counter string, index int64, v pipeline.CounterData) error {
	id, err := c.id(engine.KindCounter, "counter", counter)
	if err != nil {
		return err
	}
	return wrap(c.pl.WriteCounter(id, int(index), v))
}

func (c *control) SetMeter(meter string, index int64, m *pipeline.MeterConfig) error {
	id, err := c.id(engine.KindMeter, "meter", meter)
	if err != nil {
		return err
	}
	if index < 0 {
		return status.Errorf(codes.InvalidArgument, "negative meter index %d", index)
	}
	return wrap(c.pl.SetMeter(id, int(index), m))
}

func (c *control) Meter(meter string, index int64) (*pipeline.MeterConfig, error) {
	id, err := c.id(engine.KindMeter, "meter", meter)
	if err != nil {
		return nil, err
	}
	m, err := c.pl.Meter(id, int(index))
	return m, wrap(err)
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

func (c *control) SetMulticastGroup(group uint32, rs []pipeline.Replica) error {
	return wrap(c.pl.SetMulticastGroup(group, rs))
}

func (c *control) DeleteMulticastGroup(group uint32) error {
	return wrap(c.pl.DeleteMulticastGroup(group))
}

func (c *control) SetCloneSession(session uint32, s pipeline.CloneSession) error {
	return wrap(c.pl.SetCloneSession(session, s))
}

func (c *control) MulticastGroup(group uint32) ([]pipeline.Replica, bool) {
	return c.pl.MulticastGroup(group)
}

func (c *control) MulticastGroups() []uint32 { return c.pl.MulticastGroups() }

func (c *control) CloneSession(session uint32) (pipeline.CloneSession, bool) {
	return c.pl.CloneSessionConfig(session)
}

func (c *control) CloneSessions() []uint32 { return c.pl.CloneSessions() }

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
	return wrap(c.pl.SetProfileMember(pid, member, pipeline.ActionCall{ActionID: aid, Params: args}))
}

func (c *control) DeleteProfileMember(profile string, member uint32) error {
	pid, err := c.id(engine.KindActionProfile, "action profile", profile)
	if err != nil {
		return err
	}
	return wrap(c.pl.DeleteProfileMember(pid, member))
}

func (c *control) ProfileMembers(profile string) (map[uint32]pipeline.ActionCall, error) {
	return read(c, engine.KindActionProfile, "action profile", profile, c.pl.ProfileMembers)
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

func (c *control) AddIndirectEntry(table string, key []pipeline.Match, priority int32, ref pipeline.IndirectRef) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.AddEntry(tid, pipeline.TableEntry{Match: key, Priority: priority, Indirect: ref}))
}

func (c *control) ModifyIndirectEntry(table string, key []pipeline.Match, priority int32, ref pipeline.IndirectRef) error {
	tid, err := c.id(engine.KindTable, "table", table)
	if err != nil {
		return err
	}
	return wrap(c.pl.ModifyEntry(tid, pipeline.TableEntry{Match: key, Priority: priority, Indirect: ref}))
}

func (c *control) SetValueSet(valueSet string, members []pipeline.ValueSetMember) error {
	id, err := c.id(engine.KindValueSet, "value set", valueSet)
	if err != nil {
		return err
	}
	return wrap(c.pl.SetValueSet(id, members))
}

func (c *control) ValueSet(valueSet string) ([]pipeline.ValueSetMember, error) {
	return read(c, engine.KindValueSet, "value set", valueSet, c.pl.ValueSet)
}
