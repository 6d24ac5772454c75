// Package pipeline is the runtime vocabulary of a loaded P4 program, shared
// by everything that programs or describes one: the engine (which produces
// it when it loads BMv2 JSON and takes it in its control API), the
// P4Runtime server and the targets it programs, and the STF runner. It holds
// only types: what a program contains (TableInfo, ActionInfo, the externs,
// value sets and digests, with their BMv2 JSON names and ids) and the
// values a control plane reads and writes (matches, action calls, counter
// data, meter configurations, replicas, clone sessions, value-set members,
// digests). One definition here means no package keeps a look-alike copy
// and no layer translates one into the other field by field.
package pipeline

import "time"

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
	// Mask is the key element's static mask (BMv2 JSON "mask", p4c's for
	// a key on a slice or a masked expression), (Bitwidth+7)/8 bytes; nil
	// when none. Added after the first publication of this API.
	Mask []byte
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
	// ConstDefaultEntry is true when not even the default action's data may
	// change (BMv2 JSON action_entry_const). Added after the first
	// publication of this API.
	ConstDefaultEntry bool
	// Immutable is true when the program gives the entries ("const entries"):
	// the control plane may read them but not add, modify or delete.
	Immutable bool
	// Hidden is true for tables p4c synthesizes for straight-line code
	// (no key, const default action); they are not in P4Info.
	Hidden bool
	// ActionProfile names the table's action profile or selector ("" for
	// direct tables); entries then carry TableEntry.Indirect.
	ActionProfile string
	// SupportTimeout is true when the table's entries may be given an
	// ageing timeout (BMv2 JSON support_timeout, P4 support_timeout).
	// Added after the first publication of this API.
	SupportTimeout bool
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

// HeaderTypeInfo describes one header type (BMv2 JSON header_types, the
// program's headers and metadata structs alike): its fields in declaration
// order, which for a header is their order on the wire. A variable-length
// field has Bitwidth 0.
type HeaderTypeInfo struct {
	Name   string
	Fields []ParamInfo
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
// second, bursts in the unit. BMv2 (and terrapin's engine) keeps rates per
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
	// Handle is the entry's BMv2 entry handle (read back only; the engine
	// gives it when the entry is added, whoever adds it). Added after the
	// first publication of this API.
	Handle uint32
	// Ageing is the entry's idle state in a table that supports timeouts
	// (support_timeout); nil elsewhere. Read back only. Added after the
	// first publication of this API.
	Ageing *EntryAgeing
}

// EntryAgeing is an entry's idle state: the timeout a control plane set
// (0: none) and the time since a packet last hit the entry (or since it
// was added or given its timeout, whichever came last).
type EntryAgeing struct {
	Timeout  time.Duration
	SinceHit time.Duration
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

// IndirectKind says what an entry of an indirect table refers to.
type IndirectKind uint8

// Indirect reference kinds.
const (
	IndirectNone   IndirectKind = iota // a direct table: the entry has an action
	IndirectMember                     // an action profile member
	IndirectGroup                      // an action selector group
)

// IndirectRef is the action reference of an entry of an indirect table.
type IndirectRef struct {
	Kind IndirectKind
	ID   uint32
}

// ActionProfileInfo describes an action profile (or selector).
type ActionProfileInfo struct {
	Name        string
	ID          int
	MaxSize     int
	HasSelector bool
	TableIDs    []int
}

// Schema is what a loaded program contains, as the engine produces it when
// it loads BMv2 JSON: every object with its JSON name and id, in JSON order,
// and the entries the program declares. A control plane checks its own
// description of the program (P4Runtime's P4Info) against it instead of
// reading the JSON a second time.
type Schema struct {
	Tables         []TableInfo // hidden tables included
	Actions        []ActionInfo
	Counters       []CounterInfo // arrays and direct counters
	Meters         []MeterInfo   // arrays and direct meters
	Registers      []RegisterInfo
	ValueSets      []ValueSetInfo
	Digests        []DigestInfo
	ActionProfiles []ActionProfileInfo
	// HeaderTypes are the program's header types, in JSON order. A control
	// plane finds the wire layout of its controller headers here (a
	// P4Runtime translated field's width on the device is not in P4Info).
	// Added after the first publication of this API.
	HeaderTypes []HeaderTypeInfo
	// ConstEntries are the entries of each table's "entries" property, by
	// table name, in the order the JSON lists them (only tables that have
	// some). Their priorities are the engine's (see ConstPriorityBase).
	ConstEntries map[string][]TableEntry
}

// ConstPriorityBase is where the engine numbers a table's declared entries
// from. BMv2 JSON gives them priorities where the smaller wins (p4c writes
// 1 for the most urgent); the engine, whose larger priority wins, stores
// ConstPriorityBase − p (ConstPriorityBase − n, n the entry's position, when
// p is outside [0, ConstPriorityBase)), so p = ConstPriorityBase − stored.
const ConstPriorityBase = 1 << 24

// CRCParams are the parameters of a custom CRC (BMv2's crc16_custom and
// crc32_custom calculations): the polynomial in normal (MSB-first) notation
// without its top bit, the initial remainder, the value xored into the
// final one, and whether each input byte and the final remainder are
// bit-reversed.
type CRCParams struct {
	Polynomial, Initial, FinalXor uint64
	ReflectData, ReflectRemainder bool
}
