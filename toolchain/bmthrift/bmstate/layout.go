package bmstate

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// MatchUnit is the kind of match unit BMv2 gives a table (its JSON
// "match_type"): it decides which fields an entry's key has in a dump.
type MatchUnit int

// BMv2's match units.
const (
	UnitExact MatchUnit = iota
	UnitLPM
	UnitTernary
	UnitRange
)

// KeyKind is a key field's match kind, in BMv2's own order: a match unit
// lays its key out by kind, ranges first, then valid, exact, lpm and
// ternary fields, keeping the program's order within a kind.
type KeyKind int

// BMv2's match kinds, in that order.
const (
	KeyRange KeyKind = iota
	KeyValid
	KeyExact
	KeyLPM
	KeyTernary
)

// KeyField is one field of a table's key.
type KeyField struct {
	Kind  KeyKind
	Bits  int    // the field's width (valid: 8, as BMv2 stores it)
	Mask  []byte // the JSON's static mask ("mask"), Bytes() long; nil if none
	Name  string
	Index int // position in the program's key
}

// Bytes is the field's width in bytes.
func (k KeyField) Bytes() int { return (k.Bits + 7) / 8 }

// Table is what a dump holds and needs of one table.
type Table struct {
	Name     string
	Unit     MatchUnit
	Indirect bool // "indirect" or "indirect_ws"
	Size     int
	// Keys in the match unit's order (see KeyKind).
	Keys []KeyField
	// MissNext is the node written after the table's name: the "__MISS__"
	// node of a hit/miss table, else its base_default_next; "" is none.
	MissNext string
	hitMiss  bool
	hitNext  string
	next     map[string]string // action name -> next node ("": none)
	actions  map[int]string    // action id -> name
	// DirectMeter is the name of the table's direct meter array, "" if none.
	DirectMeter string
	Ageing      bool // support_timeout
}

// EntryNext is the node an entry with action actionID leads to.
func (t *Table) EntryNext(actionID int) string {
	if t.hitMiss {
		return t.hitNext
	}
	return t.next[t.actions[actionID]]
}

// DefaultNext is the node the default entry with action actionID leads to
// (actionID -1: the table's default entry without an action).
func (t *Table) DefaultNext(actionID int) string {
	switch {
	case actionID < 0 && t.hitMiss:
		return "" // BMv2 gives a hit/miss table's empty default no node
	case actionID < 0, t.hitMiss:
		return t.MissNext
	}
	return t.next[t.actions[actionID]]
}

// HasAction reports whether actionID is one of the table's actions.
func (t *Table) HasAction(actionID int) bool {
	_, ok := t.actions[actionID]
	return ok
}

// MeterArray is one of the program's meter arrays (direct ones included).
type MeterArray struct {
	Name      string
	Size      int
	RateCount int
	Direct    bool
}

// Layout is what a dump holds for one program, in the order BMv2 writes
// it: its tables, action profiles and meter arrays each in the order of
// BMv2's hash map of them.
type Layout struct {
	Tables   []*Table
	Profiles []string
	Meters   []*MeterArray
	// actions: id -> number of parameters
	params map[int]int
}

// ActionParams returns the number of parameters of action id, and whether
// the program has that action.
func (l *Layout) ActionParams(id int) (int, bool) {
	n, ok := l.params[id]
	return n, ok
}

// Table returns the table named name, nil if none.
func (l *Layout) Table(name string) *Table {
	for _, t := range l.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Meter returns the meter array named name, nil if none.
func (l *Layout) Meter(name string) *MeterArray {
	for _, m := range l.Meters {
		if m.Name == name {
			return m
		}
	}
	return nil
}

type jProgram struct {
	HeaderTypes []struct {
		Name   string  `json:"name"`
		Fields [][]any `json:"fields"`
	} `json:"header_types"`
	Headers []struct {
		Name       string `json:"name"`
		HeaderType string `json:"header_type"`
	} `json:"headers"`
	Actions []struct {
		Name        string            `json:"name"`
		ID          int               `json:"id"`
		RuntimeData []json.RawMessage `json:"runtime_data"`
	} `json:"actions"`
	MeterArrays []struct {
		Name      string `json:"name"`
		Size      int    `json:"size"`
		RateCount int    `json:"rate_count"`
		IsDirect  bool   `json:"is_direct"`
	} `json:"meter_arrays"`
	Pipelines []struct {
		ActionProfiles []struct {
			Name string `json:"name"`
		} `json:"action_profiles"`
		Tables []jTable `json:"tables"`
	} `json:"pipelines"`
}

type jTable struct {
	Name      string `json:"name"`
	MatchType string `json:"match_type"`
	Type      string `json:"type"`
	MaxSize   *int   `json:"max_size"`
	Key       []struct {
		MatchType string          `json:"match_type"`
		Target    json.RawMessage `json:"target"`
		Mask      *string         `json:"mask"`
		Name      string          `json:"name"`
	} `json:"key"`
	ActionIDs       []int              `json:"action_ids"`
	Actions         []string           `json:"actions"`
	NextTables      map[string]*string `json:"next_tables"`
	BaseDefaultNext *string            `json:"base_default_next"`
	ActionProfile   string             `json:"action_profile"`
	ActProfName     string             `json:"act_prof_name"`
	DirectMeters    *string            `json:"direct_meters"`
	SupportTimeout  bool               `json:"support_timeout"`
	Entries         []json.RawMessage  `json:"entries"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// NewLayout reads what a dump needs from a BMv2 JSON program.
func NewLayout(program []byte) (*Layout, error) {
	var p jProgram
	if err := json.Unmarshal(program, &p); err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	widths := map[string]map[string]int{} // header type -> field -> bits
	for _, ht := range p.HeaderTypes {
		fs := map[string]int{"$valid$": 1}
		for _, f := range ht.Fields {
			if len(f) < 2 {
				continue
			}
			name, _ := f[0].(string)
			if w, ok := f[1].(float64); ok {
				fs[name] = int(w)
			}
		}
		widths[ht.Name] = fs
	}
	headerType := map[string]string{}
	for _, h := range p.Headers {
		headerType[h.Name] = h.HeaderType
	}
	l := &Layout{params: map[int]int{}}
	actionName := map[int]string{}
	actionID := map[string]int{}
	for _, a := range p.Actions {
		actionName[a.ID] = a.Name
		if _, ok := actionID[a.Name]; !ok {
			actionID[a.Name] = a.ID
		}
		l.params[a.ID] = len(a.RuntimeData)
	}
	var tableNames, profileNames []string
	tables := map[string]*Table{}
	for _, pl := range p.Pipelines {
		for _, ap := range pl.ActionProfiles {
			profileNames = append(profileNames, ap.Name)
		}
		for _, jt := range pl.Tables {
			t, err := newTable(&jt, widths, headerType, actionName, actionID)
			if err != nil {
				return nil, fmt.Errorf("table %s: %w", jt.Name, err)
			}
			if _, dup := tables[t.Name]; dup {
				return nil, fmt.Errorf("two tables named %s", t.Name)
			}
			tables[t.Name] = t
			tableNames = append(tableNames, t.Name)
			if jt.ActionProfile == "" && jt.ActProfName != "" {
				profileNames = append(profileNames, jt.ActProfName)
			}
		}
	}
	for _, n := range UnorderedMapOrder(tableNames) {
		l.Tables = append(l.Tables, tables[n])
	}
	l.Profiles = UnorderedMapOrder(profileNames)
	meters := map[string]*MeterArray{}
	var meterNames []string
	for _, m := range p.MeterArrays {
		meters[m.Name] = &MeterArray{Name: m.Name, Size: m.Size, RateCount: m.RateCount, Direct: m.IsDirect}
		meterNames = append(meterNames, m.Name)
	}
	for _, n := range UnorderedMapOrder(meterNames) {
		l.Meters = append(l.Meters, meters[n])
	}
	for _, t := range l.Tables {
		if t.DirectMeter != "" && meters[t.DirectMeter] == nil {
			return nil, fmt.Errorf("table %s: unknown direct meter %s", t.Name, t.DirectMeter)
		}
	}
	return l, nil
}

func newTable(jt *jTable, widths map[string]map[string]int, headerType map[string]string,
	actionName map[int]string, actionID map[string]int) (*Table, error) {
	t := &Table{Name: jt.Name, next: map[string]string{}, actions: map[int]string{},
		DirectMeter: str(jt.DirectMeters), Ageing: jt.SupportTimeout}
	switch jt.MatchType {
	case "exact":
		t.Unit = UnitExact
	case "lpm":
		t.Unit = UnitLPM
	case "ternary":
		t.Unit = UnitTernary
	case "range":
		t.Unit = UnitRange
	default:
		return nil, fmt.Errorf("match_type %q", jt.MatchType)
	}
	switch jt.Type {
	case "simple", "":
	case "indirect", "indirect_ws":
		t.Indirect = true
	default:
		return nil, fmt.Errorf("type %q", jt.Type)
	}
	switch {
	case jt.MaxSize != nil && jt.Entries == nil:
		t.Size = *jt.MaxSize
	default:
		t.Size = len(jt.Entries)
	}
	byKind := make([][]KeyField, KeyTernary+1)
	for i, k := range jt.Key {
		f := KeyField{Index: i, Name: k.Name}
		switch k.MatchType {
		case "range":
			f.Kind = KeyRange
		case "valid":
			f.Kind = KeyValid
		case "exact":
			f.Kind = KeyExact
		case "lpm":
			f.Kind = KeyLPM
		case "ternary":
			f.Kind = KeyTernary
		default:
			return nil, fmt.Errorf("key match type %q", k.MatchType)
		}
		if f.Kind == KeyValid {
			f.Bits = 8
		} else {
			var target []string
			if err := json.Unmarshal(k.Target, &target); err != nil || len(target) != 2 {
				return nil, fmt.Errorf("key target %s", k.Target)
			}
			w, ok := widths[headerType[target[0]]][target[1]]
			if !ok {
				return nil, fmt.Errorf("key field %s.%s", target[0], target[1])
			}
			f.Bits = w
		}
		if k.Mask != nil {
			m, ok := new(big.Int).SetString(strings.TrimPrefix(*k.Mask, "0x"), 16)
			if !ok || m.Sign() < 0 || m.BitLen() > f.Bytes()*8 {
				return nil, fmt.Errorf("key mask %q", *k.Mask)
			}
			f.Mask = m.FillBytes(make([]byte, f.Bytes()))
		}
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	for _, fs := range byKind {
		t.Keys = append(t.Keys, fs...)
	}
	ids := jt.ActionIDs
	if ids == nil {
		for _, n := range jt.Actions {
			id, ok := actionID[n]
			if !ok {
				return nil, fmt.Errorf("unknown action %s", n)
			}
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		t.actions[id] = actionName[id]
	}
	for a, n := range jt.NextTables {
		t.next[a] = str(n)
	}
	if hit, ok := jt.NextTables["__HIT__"]; ok {
		if miss, ok := jt.NextTables["__MISS__"]; ok {
			t.hitMiss, t.hitNext, t.MissNext = true, str(hit), str(miss)
		}
	}
	if !t.hitMiss {
		t.MissNext = str(jt.BaseDefaultNext)
	}
	return t, nil
}
