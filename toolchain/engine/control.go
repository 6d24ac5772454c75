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
)

// ErrorCode classifies control API errors the way P4Runtime (gRPC) needs them.
type ErrorCode int

// Error codes; the P4RT server maps them one to one onto gRPC status codes.
const (
	CodeInvalidArgument ErrorCode = iota + 1
	CodeNotFound
	CodeAlreadyExists
	CodeOutOfRange
	CodeResourceExhausted
	CodePermissionDenied // e.g. writing a const table or a const default action
	CodeUnimplemented
	CodeFailedPrecondition
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

// MatchKind is the match kind of one table key field.
type MatchKind uint8

// Match kinds. MatchValid is P4_14's "valid" kind (a header's validity as a
// one-bit exact key); p4c's v1model back end does not emit it.
const (
	MatchExact MatchKind = iota
	MatchLPM
	MatchTernary
	MatchRange
	MatchOptional
	MatchValid
)

func (k MatchKind) String() string {
	switch k {
	case MatchExact:
		return "exact"
	case MatchLPM:
		return "lpm"
	case MatchTernary:
		return "ternary"
	case MatchRange:
		return "range"
	case MatchOptional:
		return "optional"
	case MatchValid:
		return "valid"
	}
	return "unknown"
}

// KeyFieldInfo describes one field of a table key.
type KeyFieldInfo struct {
	// Name is the key element's name as the JSON gives it (p4c writes the P4
	// expression or its @name, e.g. "hdr.ipv4.dstAddr"); this is also the
	// P4Info match field name.
	Name string
	// Target is "header.field" of the matched field ("header.$valid$" for
	// validity keys).
	Target   string
	Kind     MatchKind
	Bitwidth int
}

// ParamInfo describes one action parameter (control-plane action data).
type ParamInfo struct {
	Name     string
	Bitwidth int
}

// ActionInfo describes one action of the program.
type ActionInfo struct {
	Name   string // fully qualified, as in the JSON (e.g. "ingress.set_nhop")
	ID     int    // the JSON id
	Params []ParamInfo
}

// TableInfo describes one match-action table.
type TableInfo struct {
	Name      string // fully qualified, as in the JSON (e.g. "ingress.ipv4_lpm")
	ID        int    // the JSON id
	Keys      []KeyFieldInfo
	ActionIDs []int
	MaxSize   int
	// NeedsPriority is true when entries carry a priority: the table has a
	// ternary, range or optional key field (BMv2's ternary/range tables).
	NeedsPriority bool
	// DirectCounter and DirectMeter name the direct resources, or "".
	DirectCounter string
	DirectMeter   string
	// ConstDefault is true when the control plane may not change the default
	// action (P4 "const default_action").
	ConstDefault bool
	// Immutable is true when the program gives the entries ("const entries"):
	// the control plane may read them but not add, modify or delete.
	Immutable bool
	// Hidden is true for tables p4c synthesizes for straight-line code
	// (no key, const default action); they are not in P4Info.
	Hidden bool
	// ActionProfile names the table's action profile or selector ("" for
	// direct tables); entries then carry TableEntry.Indirect.
	ActionProfile string
}

// CounterInfo describes a counter array (indirect) or a direct counter.
type CounterInfo struct {
	Name   string
	ID     int
	Size   int    // number of cells (0 for direct counters)
	Direct bool   // true for direct counters
	Table  string // the table a direct counter is bound to
}

// MeterUnit says what a meter measures.
type MeterUnit uint8

// Meter units.
const (
	MeterBytes MeterUnit = iota
	MeterPackets
)

// MeterInfo describes a meter array (indirect) or a direct meter.
type MeterInfo struct {
	Name   string
	ID     int
	Size   int // number of cells (0 for direct meters)
	Direct bool
	Table  string // the table a direct meter is bound to
	Unit   MeterUnit
	// RateCount is the number of rates (2 for v1model's two-rate meters).
	RateCount int
}

// RegisterInfo describes a register array.
type RegisterInfo struct {
	Name     string
	ID       int
	Size     int
	Bitwidth int
}

// ValueSetInfo describes a parser value set.
type ValueSetInfo struct {
	Name string
	ID   int
	// Bitwidth is the compressed width of one member: the sum of the widths of
	// the select key fields it is matched against.
	Bitwidth int
	MaxSize  int
}

// DigestInfo describes one digest (a BMv2 "learn list").
type DigestInfo struct {
	Name   string
	ID     int
	Fields []ParamInfo // name ("header.field") and width of each element
}

// Match is one key field of a table entry.
type Match struct {
	// Value: exact/optional/valid value, ternary value, lpm prefix value,
	// range low bound.
	Value []byte
	// Mask: ternary mask (bits set are compared).
	Mask []byte
	// High: range high bound (inclusive).
	High []byte
	// PrefixLen: lpm prefix length in bits (0..Bitwidth).
	PrefixLen int
	// Wildcard makes the field match anything (P4Runtime's omitted
	// ternary/lpm/range/optional field). Not allowed for exact fields.
	Wildcard bool
}

// ActionCall is an action with its control-plane arguments.
type ActionCall struct {
	ActionID int
	Params   [][]byte // one per ActionInfo.Params, in order
}

// CounterData is the value of one counter cell. v1model counters count
// both; which of the two P4Info exposes is the P4RT server's business.
type CounterData struct {
	Packets uint64
	Bytes   uint64
}

// MeterConfig configures a two-rate three-colour meter (RFC 2698, as BMv2
// implements it). Rates are in the meter's unit (bytes or packets) per
// second, bursts in the unit. BMv2 (and this engine) keeps rates per
// microsecond internally: CIR/1e6.
type MeterConfig struct {
	CIR    uint64
	CBurst uint64
	PIR    uint64
	PBurst uint64
}

// TableEntry is a match-action entry as the control API takes and returns it.
type TableEntry struct {
	Match []Match // one per TableInfo.Keys, in order
	// Priority orders overlapping entries of ternary/range/optional tables:
	// the larger value wins (P4Runtime convention). Ignored for exact and
	// lpm tables. Entries of equal priority: the one added first wins.
	Priority int32
	Action   ActionCall
	// Counter is the direct counter value: the initial value on AddEntry,
	// the current value on ReadEntries.
	Counter CounterData
	// Meter is the direct meter configuration (nil: unconfigured, which
	// colours every packet green).
	Meter *MeterConfig
	// Const is set on entries the program declared ("const entries").
	Const bool
	// Indirect is what an entry of an indirect table (action profile or
	// selector) runs: a member or a group; Action is then unused. Added
	// after the first publication of this API.
	Indirect IndirectRef
}

// Replica is one copy made by a multicast group or clone session.
type Replica struct {
	Port uint32 // egress port
	Rid  uint32 // egress_rid (P4Runtime "instance"); v1model keeps 16 bits
}

// CloneSession configures a clone (mirror) session.
type CloneSession struct {
	Replicas []Replica
	// TruncateLength, when > 0, cuts clones to at most this many bytes on
	// output (P4Runtime packet_length_bytes).
	TruncateLength int
	ClassOfService uint32 // accepted and stored; not used by v1model
}

// ValueSetMember is one member of a parser value set, in compressed form
// (the select key fields' bits concatenated, big-endian).
type ValueSetMember struct {
	Value []byte
	Mask  []byte // nil: all ones
}

// Digest is one digest message (a v1model digest() call).
type Digest struct {
	ListID int    // DigestInfo.ID
	Name   string // DigestInfo.Name
	Fields [][]byte
	// Timestamp is the engine clock in microseconds when it was generated.
	Timestamp uint64
}

// ---- Names and ids ----

// Tables returns every table, hidden ones included, in JSON order.
func (pl *Pipeline) Tables() []TableInfo { return pl.tableInfos() }

// Actions returns every action in JSON order.
func (pl *Pipeline) Actions() []ActionInfo { return pl.actionInfos() }

// Counters returns the counter arrays and direct counters.
func (pl *Pipeline) Counters() []CounterInfo { return pl.counterInfos() }

// Meters returns the meter arrays and direct meters.
func (pl *Pipeline) Meters() []MeterInfo { return pl.meterInfos() }

// Registers returns the register arrays.
func (pl *Pipeline) Registers() []RegisterInfo { return pl.registerInfos() }

// ValueSets returns the parser value sets.
func (pl *Pipeline) ValueSets() []ValueSetInfo { return pl.valueSetInfos() }

// DigestLists returns the digests (learn lists) the program may send.
func (pl *Pipeline) DigestLists() []DigestInfo { return pl.digestInfos() }

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
func (pl *Pipeline) Table(id int) (TableInfo, error) {
	t, err := pl.table(id)
	if err != nil {
		return TableInfo{}, err
	}
	return t.info, nil
}

// Action returns the description of action id.
func (pl *Pipeline) Action(id int) (ActionInfo, error) {
	a, ok := pl.actionByID[id]
	if !ok {
		return ActionInfo{}, errf(CodeNotFound, "no action with id %d", id)
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

// Batch runs fn with the control plane's write lock held. Writes made
// through tx become visible to packets together when fn returns (also when
// it returns an error: P4Runtime applies the updates of a batch one by
// one, not atomically).
func (pl *Pipeline) Batch(fn func(tx *Txn) error) error {
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
func (tx *Txn) AddEntry(tableID int, e TableEntry) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	return t.add(tx.state(t), e)
}

// ModifyEntry replaces the action of the entry with the same match and
// priority. Its direct counter and meter are kept (use WriteDirectCounter
// and SetDirectMeter to change them).
func (tx *Txn) ModifyEntry(tableID int, e TableEntry) error {
	t, err := tx.pl.table(tableID)
	if err != nil {
		return err
	}
	return t.modify(tx.state(t), e)
}

// DeleteEntry removes the entry with this match and priority.
func (tx *Txn) DeleteEntry(tableID int, match []Match, priority int32) error {
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
func (tx *Txn) SetDefaultAction(tableID int, a ActionCall) error {
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
	return nil
}

// AddEntry inserts an entry (see Txn.AddEntry).
func (pl *Pipeline) AddEntry(tableID int, e TableEntry) error {
	return pl.Batch(func(tx *Txn) error { return tx.AddEntry(tableID, e) })
}

// ModifyEntry replaces an entry's action (see Txn.ModifyEntry).
func (pl *Pipeline) ModifyEntry(tableID int, e TableEntry) error {
	return pl.Batch(func(tx *Txn) error { return tx.ModifyEntry(tableID, e) })
}

// DeleteEntry removes the entry with this match and priority.
func (pl *Pipeline) DeleteEntry(tableID int, match []Match, priority int32) error {
	return pl.Batch(func(tx *Txn) error { return tx.DeleteEntry(tableID, match, priority) })
}

// ClearTable removes every entry the control plane added (const entries
// stay) and restores the program's default action.
func (pl *Pipeline) ClearTable(tableID int) error {
	return pl.Batch(func(tx *Txn) error { return tx.ClearTable(tableID) })
}

// SetDefaultAction sets the action run on a miss.
func (pl *Pipeline) SetDefaultAction(tableID int, a ActionCall) error {
	return pl.Batch(func(tx *Txn) error { return tx.SetDefaultAction(tableID, a) })
}

// ResetDefaultAction restores the program's default action.
func (pl *Pipeline) ResetDefaultAction(tableID int) error {
	return pl.Batch(func(tx *Txn) error { return tx.ResetDefaultAction(tableID) })
}

// ReadEntries returns a copy of every entry of the table (const entries
// included), in insertion order, with current direct counter values.
func (pl *Pipeline) ReadEntries(tableID int) ([]TableEntry, error) {
	t, err := pl.table(tableID)
	if err != nil {
		return nil, err
	}
	return t.read(t.state.Load()), nil
}

// ReadEntry returns the entry with this match and priority.
func (pl *Pipeline) ReadEntry(tableID int, match []Match, priority int32) (TableEntry, error) {
	t, err := pl.table(tableID)
	if err != nil {
		return TableEntry{}, err
	}
	en, err := t.find(t.state.Load(), match, priority)
	if err != nil {
		return TableEntry{}, err
	}
	return t.export(en), nil
}

// DefaultAction returns the current default action. ok is false when the
// table has none (a miss then runs no action).
func (pl *Pipeline) DefaultAction(tableID int) (a ActionCall, ok bool, err error) {
	t, err := pl.table(tableID)
	if err != nil {
		return ActionCall{}, false, err
	}
	a, ok = t.getDefault(t.state.Load())
	return a, ok, nil
}

// ---- Direct resources ----

// ReadDirectCounter returns the direct counter of an entry.
func (pl *Pipeline) ReadDirectCounter(tableID int, match []Match, priority int32) (CounterData, error) {
	e, err := pl.ReadEntry(tableID, match, priority)
	return e.Counter, err
}

// WriteDirectCounter sets the direct counter of an entry.
func (pl *Pipeline) WriteDirectCounter(tableID int, match []Match, priority int32, d CounterData) error {
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
func (pl *Pipeline) SetDirectMeter(tableID int, match []Match, priority int32, cfg *MeterConfig) error {
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
func (pl *Pipeline) DirectMeter(tableID int, match []Match, priority int32) (*MeterConfig, error) {
	e, err := pl.ReadEntry(tableID, match, priority)
	return e.Meter, err
}

// ---- Indirect counters, meters, registers ----

// ReadCounter returns one cell of a counter array.
func (pl *Pipeline) ReadCounter(counterID, index int) (CounterData, error) {
	c, err := pl.counterArray(counterID, index)
	if err != nil {
		return CounterData{}, err
	}
	return c.cells[index].load(), nil
}

// WriteCounter sets one cell of a counter array.
func (pl *Pipeline) WriteCounter(counterID, index int, d CounterData) error {
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
		c.cells[i].store(CounterData{})
	}
	return nil
}

// SetMeter configures (cfg != nil) or resets (cfg == nil) one cell of a
// meter array. index < 0 configures every cell.
func (pl *Pipeline) SetMeter(meterID, index int, cfg *MeterConfig) error {
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
func (pl *Pipeline) Meter(meterID, index int) (*MeterConfig, error) {
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
func (pl *Pipeline) SetMulticastGroup(group uint32, replicas []Replica) error {
	return pl.pre.setGroup(group, replicas)
}

// DeleteMulticastGroup removes a multicast group.
func (pl *Pipeline) DeleteMulticastGroup(group uint32) error {
	return pl.pre.deleteGroup(group)
}

// MulticastGroup returns the replicas of a group.
func (pl *Pipeline) MulticastGroup(group uint32) ([]Replica, bool) {
	return pl.pre.group(group)
}

// MulticastGroups returns the ids of every configured group, ascending.
func (pl *Pipeline) MulticastGroups() []uint32 { return pl.pre.groupIDs() }

// SetCloneSession creates or replaces a clone session.
func (pl *Pipeline) SetCloneSession(id uint32, s CloneSession) error {
	return pl.pre.setSession(id, s)
}

// DeleteCloneSession removes a clone session.
func (pl *Pipeline) DeleteCloneSession(id uint32) error {
	return pl.pre.deleteSession(id)
}

// CloneSessionConfig returns a clone session's configuration.
func (pl *Pipeline) CloneSessionConfig(id uint32) (CloneSession, bool) {
	return pl.pre.session(id)
}

// CloneSessions returns the ids of every configured session, ascending.
func (pl *Pipeline) CloneSessions() []uint32 { return pl.pre.sessionIDs() }

// ---- Parser value sets ----

// SetValueSet replaces the members of a parser value set.
func (pl *Pipeline) SetValueSet(id int, members []ValueSetMember) error {
	vs, ok := pl.vsetByID[id]
	if !ok {
		return errf(CodeNotFound, "no value set with id %d", id)
	}
	return vs.set(members)
}

// ValueSet returns the members of a parser value set.
func (pl *Pipeline) ValueSet(id int) ([]ValueSetMember, error) {
	vs, ok := pl.vsetByID[id]
	if !ok {
		return nil, errf(CodeNotFound, "no value set with id %d", id)
	}
	return vs.get(), nil
}

// ---- Digests ----

// Digests returns the channel on which digest messages arrive. The channel
// is buffered; when it is full, new digests are dropped and counted
// (DroppedDigests) rather than blocking packet processing.
func (pl *Pipeline) Digests() <-chan Digest { return pl.digests }

// DroppedDigests returns how many digests were dropped because the channel
// was full.
func (pl *Pipeline) DroppedDigests() uint64 { return pl.digestDrops.Load() }
