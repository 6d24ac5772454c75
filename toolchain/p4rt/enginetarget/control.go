// Package enginetarget connects the P4Runtime server to the pipeline
// engine: Control adapts an engine pipeline's control API to
// p4rt.PipelineControl (names → JSON ids, P4Runtime error codes), and
// Loopback is a complete in-process p4rt.Target over the engine, with
// packets passed through function calls instead of interfaces (used by
// the server's tests and by anything that wants P4Runtime without ports).
package enginetarget

import (
	"errors"
	"math"
	"sync"
	"time"

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

// wrap gives an engine error its gRPC code, which is the engine's code
// by value; an error that already has one (a name this adapter could not
// resolve) keeps it.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
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

// Every method below resolves the name it is given to the engine's id and
// makes one engine call with it: read and change hold that shape.

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

// change resolves name and applies one change to the object of that id.
func change(c *control, kind engine.ObjectKind, what, name string, apply func(id int) error) error {
	id, err := c.id(kind, what, name)
	if err != nil {
		return err
	}
	return wrap(apply(id))
}

func (c *control) inTable(table string, apply func(tid int) error) error {
	return change(c, engine.KindTable, "table", table, apply)
}

func (c *control) inProfile(profile string, apply func(pid int) error) error {
	return change(c, engine.KindActionProfile, "action profile", profile, apply)
}

// writeEntry resolves a direct entry's table and action and hands the
// entry to write (the engine's AddEntry or ModifyEntry).
func (c *control) writeEntry(table string, key []pipeline.Match, priority int32, action string, args [][]byte,
	write func(tid int, e pipeline.TableEntry) error) error {
	return c.inTable(table, func(tid int) error {
		a, err := c.call(tid, action, args)
		if err != nil {
			return err
		}
		return write(tid, pipeline.TableEntry{Match: key, Priority: priority, Action: a})
	})
}

func (c *control) AddEntry(table string, key []pipeline.Match, priority int32, action string, args [][]byte) error {
	return c.writeEntry(table, key, priority, action, args, c.pl.AddEntry)
}

func (c *control) ModifyEntry(table string, key []pipeline.Match, priority int32, action string, args [][]byte) error {
	return c.writeEntry(table, key, priority, action, args, c.pl.ModifyEntry)
}

func (c *control) DeleteEntry(table string, key []pipeline.Match, priority int32) error {
	return c.inTable(table, func(tid int) error { return c.pl.DeleteEntry(tid, key, priority) })
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
	if err != nil && engine.ErrorCodeOf(err) == engine.CodeNotFound {
		return pipeline.TableEntry{}, false, nil
	}
	return e, err == nil, wrap(err)
}

func (c *control) SetEntryTimeout(table string, key []pipeline.Match, priority int32, timeout time.Duration) error {
	return c.inTable(table, func(tid int) error {
		e, err := c.pl.ReadEntry(tid, key, priority)
		if err != nil {
			return err
		}
		// The engine counts in whole milliseconds, as BMv2: a timeout
		// between two of them becomes the longer, never the shorter.
		ms := timeout / time.Millisecond
		if timeout%time.Millisecond != 0 {
			ms++
		}
		return c.pl.SetEntryTimeout(tid, e.Handle, uint32(min(ms, math.MaxUint32)))
	})
}

func (c *control) SetDefaultAction(table string, action string, args [][]byte) error {
	return c.inTable(table, func(tid int) error {
		a, err := c.call(tid, action, args)
		if err != nil {
			return err
		}
		return c.pl.SetDefaultAction(tid, a)
	})
}

func (c *control) ResetDefaultAction(table string) error {
	return c.inTable(table, c.pl.ResetDefaultAction)
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
	return read(c, engine.KindTable, "table", table, func(tid int) (pipeline.CounterData, error) {
		return c.pl.ReadDirectCounter(tid, key, priority)
	})
}

func (c *control) WriteDirectCounter(table string, key []pipeline.Match, priority int32, v pipeline.CounterData) error {
	return c.inTable(table, func(tid int) error { return c.pl.WriteDirectCounter(tid, key, priority, v) })
}

func (c *control) SetDirectMeter(table string, key []pipeline.Match, priority int32, m *pipeline.MeterConfig) error {
	return c.inTable(table, func(tid int) error { return c.pl.SetDirectMeter(tid, key, priority, m) })
}

func (c *control) DirectMeter(table string, key []pipeline.Match, priority int32) (*pipeline.MeterConfig, error) {
	return read(c, engine.KindTable, "table", table, func(tid int) (*pipeline.MeterConfig, error) {
		return c.pl.DirectMeter(tid, key, priority)
	})
}

func (c *control) ReadCounter(counter string, index int64) (pipeline.CounterData, error) {
	return read(c, engine.KindCounter, "counter", counter, func(id int) (pipeline.CounterData, error) {
		return c.pl.ReadCounter(id, int(index))
	})
}

func (c *control) WriteCounter(counter string, index int64, v pipeline.CounterData) error {
	return change(c, engine.KindCounter, "counter", counter, func(id int) error { return c.pl.WriteCounter(id, int(index), v) })
}

func (c *control) SetMeter(meter string, index int64, m *pipeline.MeterConfig) error {
	return change(c, engine.KindMeter, "meter", meter, func(id int) error {
		if index < 0 {
			return status.Errorf(codes.InvalidArgument, "negative meter index %d", index)
		}
		return c.pl.SetMeter(id, int(index), m)
	})
}

func (c *control) Meter(meter string, index int64) (*pipeline.MeterConfig, error) {
	return read(c, engine.KindMeter, "meter", meter, func(id int) (*pipeline.MeterConfig, error) {
		return c.pl.Meter(id, int(index))
	})
}

func (c *control) ReadRegister(register string, index int64) ([]byte, error) {
	return read(c, engine.KindRegister, "register", register, func(id int) ([]byte, error) {
		return c.pl.ReadRegister(id, int(index))
	})
}

func (c *control) WriteRegister(register string, index int64, value []byte) error {
	return change(c, engine.KindRegister, "register", register, func(id int) error { return c.pl.WriteRegister(id, int(index), value) })
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
	return c.inProfile(profile, func(pid int) error {
		aid, err := c.profileAction(pid, action)
		if err != nil {
			return err
		}
		return c.pl.SetProfileMember(pid, member, pipeline.ActionCall{ActionID: aid, Params: args})
	})
}

func (c *control) DeleteProfileMember(profile string, member uint32) error {
	return c.inProfile(profile, func(pid int) error { return c.pl.DeleteProfileMember(pid, member) })
}

func (c *control) ProfileMembers(profile string) (map[uint32]pipeline.ActionCall, error) {
	return read(c, engine.KindActionProfile, "action profile", profile, c.pl.ProfileMembers)
}

func (c *control) SetProfileGroup(profile string, group uint32, members []uint32) error {
	return c.inProfile(profile, func(pid int) error { return c.pl.SetProfileGroup(pid, group, members) })
}

func (c *control) DeleteProfileGroup(profile string, group uint32) error {
	return c.inProfile(profile, func(pid int) error { return c.pl.DeleteProfileGroup(pid, group) })
}

func (c *control) AddIndirectEntry(table string, key []pipeline.Match, priority int32, ref pipeline.IndirectRef) error {
	return c.inTable(table, func(tid int) error {
		return c.pl.AddEntry(tid, pipeline.TableEntry{Match: key, Priority: priority, Indirect: ref})
	})
}

func (c *control) ModifyIndirectEntry(table string, key []pipeline.Match, priority int32, ref pipeline.IndirectRef) error {
	return c.inTable(table, func(tid int) error {
		return c.pl.ModifyEntry(tid, pipeline.TableEntry{Match: key, Priority: priority, Indirect: ref})
	})
}

func (c *control) SetValueSet(valueSet string, members []pipeline.ValueSetMember) error {
	return change(c, engine.KindValueSet, "value set", valueSet, func(id int) error { return c.pl.SetValueSet(id, members) })
}

func (c *control) ValueSet(valueSet string) ([]pipeline.ValueSetMember, error) {
	return read(c, engine.KindValueSet, "value set", valueSet, c.pl.ValueSet)
}
