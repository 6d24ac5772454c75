package engine

// This file is the engine's control API: everything a control plane (the
// P4Runtime server in toolchain/p4rt, the STF runner in toolchain/stf) may do
// to a loaded pipeline. Every method is safe to call concurrently with packet
// processing on other goroutines. Table contents are copy-on-write
// snapshots: a writer (writers are serialized by one mutex) clones the
// table's state, changes it and publishes it with an atomic store; packets
// read the current snapshot with one atomic load and never block or write
// shared memory for it. A write is atomic with respect to packets (a table
// apply sees it entirely or not at all). Batch groups writes so that a bulk
// load copies each table once. Counters are atomics, meters and registers
// have their own locks.
//
// Stability: this API is published for the P4RT and DEVICE helpers; it only
// grows. Values are big-endian byte strings of any length (leading zero bytes
// optional, as P4Runtime's canonical form strips them); a value that does not
// fit the field's bit width is rejected with CodeInvalidArgument.

import (
	"errors"
	"fmt"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// ErrorCode classifies control API errors the way P4Runtime (gRPC) needs them.
type ErrorCode int

// Error codes, numbered as google.rpc.Code (the canonical codes gRPC
// carries), so that an adapter converts one by value instead of keeping a
// table of its own (p4rt/enginetarget's TestErrorCodesAreGRPCCodes checks
// every one).
const (
	CodeInvalidArgument    ErrorCode = 3
	CodeNotFound           ErrorCode = 5
	CodeAlreadyExists      ErrorCode = 6
	CodePermissionDenied   ErrorCode = 7 // e.g. writing a const table or a const default action
	CodeResourceExhausted  ErrorCode = 8
	CodeFailedPrecondition ErrorCode = 9
	CodeOutOfRange         ErrorCode = 11
	CodeUnimplemented      ErrorCode = 12
)

func (c ErrorCode) String() string {
	switch c {
	case CodeInvalidArgument:
		return "INVALID_ARGUMENT"
	case CodeNotFound:
		return "NOT_FOUND"
	case CodeAlreadyExists:
		return "ALREADY_EXISTS"
	case CodeOutOfRange:
		return "OUT_OF_RANGE"
	case CodeResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case CodePermissionDenied:
		return "PERMISSION_DENIED"
	case CodeUnimplemented:
		return "UNIMPLEMENTED"
	case CodeFailedPrecondition:
		return "FAILED_PRECONDITION"
	}
	return fmt.Sprintf("code(%d)", int(c))
}

// Error is the error type returned by the control API.
type Error struct {
	Code ErrorCode
	Msg  string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Msg }

// ErrorCodeOf returns the ErrorCode of err, or 0 if err is not an *Error.
func ErrorCodeOf(err error) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func errf(code ErrorCode, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ---- Names and ids ----

// Tables returns every table, hidden ones included, in JSON order.
func (pl *Pipeline) Tables() []pipeline.TableInfo { return pl.tableInfos() }

// Actions returns every action in JSON order.
func (pl *Pipeline) Actions() []pipeline.ActionInfo { return pl.actionInfos() }

// Counters returns the counter arrays and direct counters.
func (pl *Pipeline) Counters() []pipeline.CounterInfo { return pl.counterInfos() }

// Meters returns the meter arrays and direct meters.
func (pl *Pipeline) Meters() []pipeline.MeterInfo { return pl.meterInfos() }

// Registers returns the register arrays.
func (pl *Pipeline) Registers() []pipeline.RegisterInfo { return pl.registerInfos() }

// ValueSets returns the parser value sets.
func (pl *Pipeline) ValueSets() []pipeline.ValueSetInfo { return pl.valueSetInfos() }

// DigestLists returns the digests (learn lists) the program may send.
func (pl *Pipeline) DigestLists() []pipeline.DigestInfo { return pl.digestInfos() }

// Schema returns everything above in one value, with each table's declared
// ("const") entries as the JSON gives them: what a control plane checks its
// own description of the program against.
func (pl *Pipeline) Schema() pipeline.Schema {
	s := pipeline.Schema{
		Tables: pl.tableInfos(), Actions: pl.actionInfos(), Counters: pl.counterInfos(),
		Meters: pl.meterInfos(), Registers: pl.registerInfos(), ValueSets: pl.valueSetInfos(),
		Digests: pl.digestInfos(), ActionProfiles: pl.ActionProfiles(),
		HeaderTypes: pl.headerTypeInfos(), ConstEntries: map[string][]pipeline.TableEntry{},
	}
	for _, t := range pl.tables.list {
		if len(t.declared) > 0 {
			s.ConstEntries[t.info.Name] = append([]pipeline.TableEntry(nil), t.declared...)
		}
	}
	return s
}

// ObjectKind selects the namespace of Lookup.
type ObjectKind uint8

// Object kinds for Lookup.
const (
	KindTable ObjectKind = iota
	KindAction
	KindCounter
	KindMeter
	KindRegister
	KindValueSet
	KindDigest
	KindHeader
	KindActionProfile // added after the first publication
)

// Lookup returns the JSON id of the named object of the given kind. The name
// is the JSON name (fully qualified as p4c writes it).
func (pl *Pipeline) Lookup(kind ObjectKind, name string) (int, bool) {
	id, ok := pl.names[kind][name]
	return id, ok
}

// Table returns the description of table id.
func (pl *Pipeline) Table(id int) (pipeline.TableInfo, error) {
	t, err := pl.table(id)
	if err != nil {
		return pipeline.TableInfo{}, err
	}
	return t.info, nil
}

// Action returns the description of action id.
func (pl *Pipeline) Action(id int) (pipeline.ActionInfo, error) {
	a, ok := pl.actionByID[id]
	if !ok {
		return pipeline.ActionInfo{}, errf(CodeNotFound, "no action with id %d", id)
	}
	return a.info(), nil
}

// ---- Table entries ----

// Txn is a group of control-plane writes made under one Batch: every table
// it changes gets one new snapshot, published when the batch ends, so a
// batch of n writes costs one copy of each table touched rather than n.
type Txn struct {
	pl     *Pipeline
	states map[*table]*tableState
}

func (tx *Txn) state(t *table) *tableState {
	if st, ok := tx.states[t]; ok {
		return st
	}
	st := t.state.Load().clone()
	tx.states[t] = st
	return st
}

// writing marks a control-plane write in progress until the function it
// returns is called (see Still).
func (pl *Pipeline) writing() func() {
	pl.still.RLock()
	return pl.still.RUnlock
}

// Still runs fn while no control-plane write is in progress and none can
// start: what fn reads of entries, defaults, profiles, meter
// configurations and timeouts is one state, as BMv2's state dump takes it
// under its context's lock. Packets keep flowing meanwhile. fn must not
// write to the control plane.
func (pl *Pipeline) Still(fn func() error) error {
	pl.still.Lock()
	defer pl.still.Unlock()
	return fn()
}

// Batch runs fn with the control plane's write lock held. Writes made
// through tx become visible to packets together when fn returns (also when
// it returns an error: P4Runtime applies the updates of a batch one by
// one, not atomically).
func (pl *Pipeline) Batch(fn func(tx *Txn) error) error {
	defer pl.writing()()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	tx := &Txn{pl: pl, states: map[*table]*tableState{}}
	err := fn(tx)
	for t, st := range tx.states {
		t.state.Store(st)
	}
	return err
}

// AddEntry inserts an entry. It fails with CodeAlreadyExists if an entry
// with the same match (and priority, for tables with priorities) exists.
func (tx *Txn) AddEntry(tableID int, e pipeline.TableEntry) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	return t.add(tx.state(t), e, nil)
}

// AddEntryAt inserts an entry with the entry handle h (index and version),
// as a restored BMv2 state dump gives it; AddEntry's errors, and
// CodeAlreadyExists if an entry has h's index.
func (tx *Txn) AddEntryAt(tableID int, e pipeline.TableEntry, h uint32) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	return t.add(tx.state(t), e, &h)
}

// ModifyEntry replaces the action of the entry with the same match and
// priority. Its direct counter and meter are kept (use WriteDirectCounter
// and SetDirectMeter to change them).
func (tx *Txn) ModifyEntry(tableID int, e pipeline.TableEntry) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	return t.modify(tx.state(t), e)
}

// DeleteEntry removes the entry with this match and priority.
func (tx *Txn) DeleteEntry(tableID int, match []pipeline.Match, priority int32) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	return t.remove(tx.state(t), match, priority)
}

// ClearTable removes every entry the control plane added (const entries
// stay) and restores the program's default action.
func (tx *Txn) ClearTable(tableID int) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	tx.states[t] = t.cleared(tx.state(t))
	return nil
}

// SetDefaultAction sets the action run on a miss.
func (tx *Txn) SetDefaultAction(tableID int, a pipeline.ActionCall) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	return t.setDefault(tx.state(t), a)
}

// ResetDefaultAction restores the program's default action.
func (tx *Txn) ResetDefaultAction(tableID int) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	st := tx.state(t)
	st.defAct, st.defData = t.progDefAct, t.progDefData
	st.defRef = pipeline.IndirectRef{}
	return nil
}

// SetDefaultIndirect makes a member or group of an indirect table's
// profile the entry run on a miss (BMv2's table_indirect_set_default and
// table_indirect_set_default_with_group); ResetDefaultAction and
// SetDefaultAction undo it.
func (tx *Txn) SetDefaultIndirect(tableID int, ref pipeline.IndirectRef) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	return t.setDefaultRef(tx.state(t), ref)
}

// AddEntry inserts an entry (see Txn.AddEntry).
func (pl *Pipeline) AddEntry(tableID int, e pipeline.TableEntry) error {
	return pl.Batch(func(tx *Txn) error { return tx.AddEntry(tableID, e) })
}

// AddEntryAt inserts an entry with a given handle (see Txn.AddEntryAt).
func (pl *Pipeline) AddEntryAt(tableID int, e pipeline.TableEntry, h uint32) error {
	return pl.Batch(func(tx *Txn) error { return tx.AddEntryAt(tableID, e, h) })
}

// ModifyEntry replaces an entry's action (see Txn.ModifyEntry).
func (pl *Pipeline) ModifyEntry(tableID int, e pipeline.TableEntry) error {
	return pl.Batch(func(tx *Txn) error { return tx.ModifyEntry(tableID, e) })
}

// DeleteEntry removes the entry with this match and priority.
func (pl *Pipeline) DeleteEntry(tableID int, match []pipeline.Match, priority int32) error {
	return pl.Batch(func(tx *Txn) error { return tx.DeleteEntry(tableID, match, priority) })
}

// ClearTable removes every entry the control plane added (const entries
// stay) and restores the program's default action.
func (pl *Pipeline) ClearTable(tableID int) error {
	return pl.Batch(func(tx *Txn) error { return tx.ClearTable(tableID) })
}

// SetDefaultAction sets the action run on a miss.
func (pl *Pipeline) SetDefaultAction(tableID int, a pipeline.ActionCall) error {
	return pl.Batch(func(tx *Txn) error { return tx.SetDefaultAction(tableID, a) })
}

// ResetDefaultAction restores the program's default action.
func (pl *Pipeline) ResetDefaultAction(tableID int) error {
	return pl.Batch(func(tx *Txn) error { return tx.ResetDefaultAction(tableID) })
}

// SetDefaultIndirect makes a member or group the default entry of an
// indirect table (see Txn.SetDefaultIndirect).
func (pl *Pipeline) SetDefaultIndirect(tableID int, ref pipeline.IndirectRef) error {
	return pl.Batch(func(tx *Txn) error { return tx.SetDefaultIndirect(tableID, ref) })
}

// DefaultIndirect returns the member or group an indirect table runs on a
// miss; Kind is IndirectNone when none is set.
func (pl *Pipeline) DefaultIndirect(tableID int) (pipeline.IndirectRef, error) {
	t, err := pl.table(tableID)
	if err != nil {
		return pipeline.IndirectRef{}, err
	}
	return t.state.Load().defRef, nil
}

// ReadEntries returns a copy of every entry of the table (const entries
// included), in insertion order, with current direct counter values.
func (pl *Pipeline) ReadEntries(tableID int) ([]pipeline.TableEntry, error) {
	t, err := pl.table(tableID)
	if err != nil {
		return nil, err
	}
	return t.read(t.state.Load()), nil
}

// ReadEntry returns the entry with this match and priority.
func (pl *Pipeline) ReadEntry(tableID int, match []pipeline.Match, priority int32) (pipeline.TableEntry, error) {
	t, err := pl.table(tableID)
	if err != nil {
		return pipeline.TableEntry{}, err
	}
	en, err := t.find(t.state.Load(), match, priority)
	if err != nil {
		return pipeline.TableEntry{}, err
	}
	return t.export(en), nil
}

// DefaultAction returns the current default action. ok is false when the
// table has none (a miss then runs no action).
func (pl *Pipeline) DefaultAction(tableID int) (a pipeline.ActionCall, ok bool, err error) {
	t, err := pl.table(tableID)
	if err != nil {
		return pipeline.ActionCall{}, false, err
	}
	a, ok = t.getDefault(t.state.Load())
	return a, ok, nil
}

// ---- Direct resources ----

// ReadDirectCounter returns the direct counter of an entry.
func (pl *Pipeline) ReadDirectCounter(tableID int, match []pipeline.Match, priority int32) (pipeline.CounterData, error) {
	e, err := pl.ReadEntry(tableID, match, priority)
	return e.Counter, err
}

// WriteDirectCounter sets the direct counter of an entry.
func (pl *Pipeline) WriteDirectCounter(tableID int, match []pipeline.Match, priority int32, d pipeline.CounterData) error {
	t, err := pl.table(tableID)
	if err != nil {
		return err
	}
	if t.directCounter == nil {
		return errf(CodeInvalidArgument, "table %s has no direct counter", t.info.Name)
	}
	en, err := t.find(t.state.Load(), match, priority)
	if err != nil {
		return err
	}
	en.counter.store(d)
	return nil
}

// SetDirectMeter configures (cfg != nil) or resets (cfg == nil) the direct
// meter of an entry.
func (pl *Pipeline) SetDirectMeter(tableID int, match []pipeline.Match, priority int32, cfg *pipeline.MeterConfig) error {
	defer pl.writing()()
	t, err := pl.table(tableID)
	if err != nil {
		return err
	}
	if t.directMeter == nil {
		return errf(CodeInvalidArgument, "table %s has no direct meter", t.info.Name)
	}
	en, err := t.find(t.state.Load(), match, priority)
	if err != nil {
		return err
	}
	return en.meter.configure(cfg, pl.clock())
}

// DirectMeter returns the configuration of an entry's direct meter (nil when
// unconfigured).
func (pl *Pipeline) DirectMeter(tableID int, match []pipeline.Match, priority int32) (*pipeline.MeterConfig, error) {
	e, err := pl.ReadEntry(tableID, match, priority)
	return e.Meter, err
}

// ---- Indirect counters, meters, registers ----

// ReadCounter returns one cell of a counter array.
func (pl *Pipeline) ReadCounter(counterID, index int) (pipeline.CounterData, error) {
	c, err := pl.counterArray(counterID, index)
	if err != nil {
		return pipeline.CounterData{}, err
	}
	return c.cells[index].load(), nil
}

// WriteCounter sets one cell of a counter array.
func (pl *Pipeline) WriteCounter(counterID, index int, d pipeline.CounterData) error {
	c, err := pl.counterArray(counterID, index)
	if err != nil {
		return err
	}
	c.cells[index].store(d)
	return nil
}

// ResetCounters zeroes every cell of a counter array.
func (pl *Pipeline) ResetCounters(counterID int) error {
	c, err := pl.counterArray(counterID, 0)
	if err != nil && ErrorCodeOf(err) != CodeOutOfRange {
		return err
	}
	for i := range c.cells {
		c.cells[i].store(pipeline.CounterData{})
	}
	return nil
}

// SetMeter configures (cfg != nil) or resets (cfg == nil) one cell of a
// meter array. index < 0 configures every cell.
func (pl *Pipeline) SetMeter(meterID, index int, cfg *pipeline.MeterConfig) error {
	defer pl.writing()()
	m, err := pl.meterArray(meterID, index)
	if err != nil {
		return err
	}
	now := pl.clock()
	if index < 0 {
		for i := range m.cells {
			if err := m.cells[i].configure(cfg, now); err != nil {
				return err
			}
		}
		return nil
	}
	return m.cells[index].configure(cfg, now)
}

// Meter returns the configuration of one meter cell (nil: unconfigured).
func (pl *Pipeline) Meter(meterID, index int) (*pipeline.MeterConfig, error) {
	m, err := pl.meterArray(meterID, index)
	if err != nil {
		return nil, err
	}
	if index < 0 {
		return nil, errf(CodeOutOfRange, "meter index %d", index)
	}
	return m.cells[index].config(), nil
}

// ReadRegister returns one register cell as a big-endian byte string of the
// register's width.
func (pl *Pipeline) ReadRegister(registerID, index int) ([]byte, error) {
	r, err := pl.registerArray(registerID, index)
	if err != nil {
		return nil, err
	}
	return r.read(index), nil
}

// WriteRegister sets one register cell.
func (pl *Pipeline) WriteRegister(registerID, index int, value []byte) error {
	r, err := pl.registerArray(registerID, index)
	if err != nil {
		return err
	}
	return r.write(index, value)
}

// ResetRegister zeroes every cell of a register array.
func (pl *Pipeline) ResetRegister(registerID int) error {
	r, err := pl.registerArray(registerID, 0)
	if err != nil && ErrorCodeOf(err) != CodeOutOfRange {
		return err
	}
	r.reset()
	return nil
}

// ---- Packet replication engine ----

// SetMulticastGroup creates or replaces a multicast group. Group 0 means "no
// multicast" in v1model and is rejected.
func (pl *Pipeline) SetMulticastGroup(group uint32, replicas []pipeline.Replica) error {
	return pl.pre.setGroup(group, replicas)
}

// DeleteMulticastGroup removes a multicast group.
func (pl *Pipeline) DeleteMulticastGroup(group uint32) error {
	return pl.pre.deleteGroup(group)
}

// MulticastGroup returns the replicas of a group.
func (pl *Pipeline) MulticastGroup(group uint32) ([]pipeline.Replica, bool) {
	return pl.pre.group(group)
}

// MulticastGroups returns the ids of every configured group, ascending.
func (pl *Pipeline) MulticastGroups() []uint32 { return pl.pre.groupIDs() }

// SetCloneSession creates or replaces a clone session.
func (pl *Pipeline) SetCloneSession(id uint32, s pipeline.CloneSession) error {
	return pl.pre.setSession(id, s)
}

// DeleteCloneSession removes a clone session.
func (pl *Pipeline) DeleteCloneSession(id uint32) error {
	return pl.pre.deleteSession(id)
}

// CloneSessionConfig returns a clone session's configuration.
func (pl *Pipeline) CloneSessionConfig(id uint32) (pipeline.CloneSession, bool) {
	return pl.pre.session(id)
}

// CloneSessions returns the ids of every configured session, ascending.
func (pl *Pipeline) CloneSessions() []uint32 { return pl.pre.sessionIDs() }

// ---- Parser value sets ----

// SetValueSet replaces the members of a parser value set.
func (pl *Pipeline) SetValueSet(id int, members []pipeline.ValueSetMember) error {
	vs, ok := pl.vsets.byID[id]
	if !ok {
		return errf(CodeNotFound, "no value set with id %d", id)
	}
	return vs.set(members)
}

// ValueSet returns the members of a parser value set.
func (pl *Pipeline) ValueSet(id int) ([]pipeline.ValueSetMember, error) {
	vs, ok := pl.vsets.byID[id]
	if !ok {
		return nil, errf(CodeNotFound, "no value set with id %d", id)
	}
	return vs.get(), nil
}

// ---- Digests ----

// Digests returns the channel on which digest messages arrive. The channel
// is buffered; when it is full, new digests are dropped and counted
// (DroppedDigests) rather than blocking packet processing.
func (pl *Pipeline) Digests() <-chan pipeline.Digest { return pl.digests }

// DroppedDigests returns how many digests were dropped because the channel
// was full.
func (pl *Pipeline) DroppedDigests() uint64 { return pl.digestDrops.Load() }
