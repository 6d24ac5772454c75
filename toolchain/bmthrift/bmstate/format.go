// Package bmstate writes and reads BMv2's state dump: the text simple_switch
// answers to the Thrift call bm_serialize_state (simple_switch_CLI's
// serialize_state) and reads back with --restore-state.
//
// A dump is a version line, the md5 of the program's JSON (16 raw bytes)
// on a line of its own, then, as decimal and hex tokens each on its own
// line: every table's match unit (its entries by internal handle, with the
// handle's version, key, value and ageing timeout, then the cells of its
// direct meter array) and default entry; every action profile (members,
// the use counts of members and groups, groups); every meter array's cells.
// Tables, action profiles and meter arrays come in the iteration order of
// BMv2's hash maps of them (hashorder.go); registers and counters are not
// in it. Layout says, for one program, what the dump holds and in which
// order; State is a dump's content.
package bmstate

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
)

// Version is the format's version line.
const Version = "06062016_0"

// NoNode is how a dump writes "no next node".
const NoNode = "__NULL__"

// Action is an action with its data and the control-flow node it leads to,
// as a table entry, a default entry or a member holds it. ActionID -1 is
// no action (a table's default entry when the program gives none); Next is
// "" for no node.
type Action struct {
	ActionID int
	Data     [][]byte // big-endian values
	Next     string
}

// Entry is one entry of a match unit.
type Entry struct {
	Index   uint32 // the handle's index (its low 24 bits)
	Version uint32 // the handle's version (its high 8 bits)
	// Key is the match unit's key: the fields in the unit's order, each in
	// its width in bytes.
	Key       []byte
	PrefixLen int    // lpm units: the prefix over the whole key
	Mask      []byte // ternary and range units (range fields: the high end)
	Priority  int    // ternary and range units
	Action    Action // simple tables
	Indirect  uint32 // indirect tables: a member, or 1<<24 | a group
	TimeoutMs uint32
}

// GroupFlag marks an indirect entry's group (Entry.Indirect).
const GroupFlag = 1 << 24

// Rate is one rate of a meter: units per microsecond and a burst.
type Rate struct {
	InfoRate float64
	Burst    uint64
}

// Meter is one meter cell: nil rates when not configured. BMv2 keeps a
// two-rate meter's rates peak first.
type Meter struct {
	Rates []Rate
}

// TableState is one table of a dump.
type TableState struct {
	Name     string
	MissNext string
	Entries  []Entry // by index
	// DirectMeters are the cells of the table's direct meter array.
	DirectMeters []Meter
	Default      Action // simple tables
	// indirect tables
	DefaultSet   bool
	DefaultIndex uint32
}

// Member is one member of an action profile.
type Member struct {
	Handle uint32
	Action Action
}

// Group is one group of an action selector.
type Group struct {
	Handle  uint32
	Members []uint32
}

// ProfileState is one action profile of a dump.
type ProfileState struct {
	// Slots is one more than the highest member handle given out since
	// the profile was last emptied by a reset.
	Slots      uint32
	Members    []Member // by handle
	MemberRefs []uint32 // per member handle: groups, entries and defaults using it
	GroupRefs  []uint32 // per group handle: entries and defaults using it
	Groups     []Group  // by handle
}

// State is the content of a dump, in the order of its Layout.
type State struct {
	MD5      [16]byte
	Tables   []TableState
	Profiles []ProfileState
	Meters   [][]Meter // per meter array, its cells
}

type writer struct {
	b bytes.Buffer
}

func (w *writer) line(s string)    { w.b.WriteString(s); w.b.WriteByte('\n') }
func (w *writer) uint(v uint64)    { w.line(strconv.FormatUint(v, 10)) }
func (w *writer) int(v int64)      { w.line(strconv.FormatInt(v, 10)) }
func (w *writer) bool(v bool)      { w.line(map[bool]string{false: "0", true: "1"}[v]) }
func (w *writer) node(name string) { w.line(nodeName(name)) }

func nodeName(n string) string {
	if n == "" {
		return NoNode
	}
	return n
}

func (w *writer) action(a Action) {
	if a.ActionID < 0 {
		w.int(-1)
		w.node(a.Next)
		return
	}
	w.int(int64(a.ActionID))
	w.uint(uint64(len(a.Data)))
	for _, d := range a.Data {
		w.line(new(big.Int).SetBytes(d).Text(16))
	}
	w.node(a.Next)
}

func (w *writer) meter(m Meter) {
	w.bool(m.Rates != nil)
	for _, r := range m.Rates {
		w.line(FormatDouble(r.InfoRate) + " " + strconv.FormatUint(r.Burst, 10))
	}
}

// Write writes st, a state of the program l describes, in BMv2's format.
func Write(out io.Writer, l *Layout, st *State) error {
	if len(st.Tables) != len(l.Tables) || len(st.Profiles) != len(l.Profiles) || len(st.Meters) != len(l.Meters) {
		return fmt.Errorf("state and program differ: %d/%d tables, %d/%d action profiles, %d/%d meter arrays",
			len(st.Tables), len(l.Tables), len(st.Profiles), len(l.Profiles), len(st.Meters), len(l.Meters))
	}
	w := &writer{}
	w.line(Version)
	w.b.Write(st.MD5[:])
	w.b.WriteByte('\n')
	for i, t := range st.Tables {
		lt := l.Tables[i]
		w.line(lt.Name)
		w.node(lt.MissNext)
		w.uint(uint64(len(t.Entries)))
		for _, e := range t.Entries {
			w.uint(uint64(e.Index))
			w.uint(uint64(e.Version))
			w.line(hex.EncodeToString(e.Key))
			switch lt.Unit {
			case UnitLPM:
				w.int(int64(e.PrefixLen))
			case UnitTernary, UnitRange:
				w.line(hex.EncodeToString(e.Mask))
				w.int(int64(e.Priority))
			}
			if lt.Indirect {
				w.uint(uint64(e.Indirect))
			} else {
				w.action(e.Action)
			}
			w.uint(uint64(e.TimeoutMs))
		}
		if lt.DirectMeter != "" {
			for _, m := range t.DirectMeters {
				w.meter(m)
			}
		}
		if lt.Indirect {
			w.bool(t.DefaultSet)
			if t.DefaultSet {
				w.uint(uint64(t.DefaultIndex))
			}
		} else {
			w.action(t.Default)
		}
	}
	for _, p := range st.Profiles {
		w.uint(uint64(p.Slots))
		w.uint(uint64(len(p.Members)))
		for _, m := range p.Members {
			w.uint(uint64(m.Handle))
			w.action(m.Action)
		}
		w.uint(uint64(len(p.MemberRefs)))
		for _, c := range p.MemberRefs {
			w.uint(uint64(c))
		}
		w.uint(uint64(len(p.GroupRefs)))
		for _, c := range p.GroupRefs {
			w.uint(uint64(c))
		}
		w.uint(uint64(len(p.Groups)))
		for _, g := range p.Groups {
			w.uint(uint64(g.Handle))
			w.uint(uint64(len(g.Members)))
			for _, m := range g.Members {
				w.uint(uint64(m))
			}
		}
	}
	for _, cells := range st.Meters {
		for _, m := range cells {
			w.meter(m)
		}
	}
	_, err := out.Write(w.b.Bytes())
	return err
}

// FormatDouble formats v as a C++ output stream does by default (printf's
// %g with 6 significant digits).
func FormatDouble(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "nan"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
