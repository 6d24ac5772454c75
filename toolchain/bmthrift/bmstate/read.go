package bmstate

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
)

// Errors of Read that a caller may tell apart (errors.Is).
var (
	ErrVersion = errors.New("the state dump has an incompatible version")
	ErrMD5     = errors.New("the state dump does not match the program (md5 of the JSON differs)")
)

// maxHandles bounds handles and profile sizes: BMv2's handles are 24 bits.
const maxHandles = 1 << 24

// words splits b at C's white space (isspace in the C locale), as an
// input stream's >> does.
func words(b []byte) [][]byte {
	var out [][]byte
	start := -1
	for i, c := range b {
		space := c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
		switch {
		case space && start >= 0:
			out = append(out, b[start:i])
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	if start >= 0 {
		out = append(out, b[start:])
	}
	return out
}

// tokens reads a dump's body as BMv2 does: whitespace-separated words.
type tokens struct {
	words [][]byte
	pos   int
	where string // what is being read, for errors
}

func (t *tokens) left() int { return len(t.words) - t.pos }

func (t *tokens) next(what string) (string, error) {
	if t.pos >= len(t.words) {
		return "", fmt.Errorf("%s: %s: the dump ends early", t.where, what)
	}
	w := t.words[t.pos]
	t.pos++
	return string(w), nil
}

func (t *tokens) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", t.where, fmt.Sprintf(format, args...))
}

// uint reads a decimal number up to max.
func (t *tokens) uint(what string, max uint64) (uint64, error) {
	s, err := t.next(what)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || (s[0] == '+') {
		return 0, t.errorf("%s: %q is not a number", what, s)
	}
	if v > max {
		return 0, t.errorf("%s: %d is more than %d", what, v, max)
	}
	return v, nil
}

// count reads a number of items that follow, each taking at least per
// words: more than the dump holds is malformed (and never allocated).
func (t *tokens) count(what string, per int) (int, error) {
	v, err := t.uint(what, uint64(t.left()/per))
	return int(v), err
}

func (t *tokens) int(what string) (int, error) {
	s, err := t.next(what)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, t.errorf("%s: %q is not a number", what, s)
	}
	return int(v), nil
}

func (t *tokens) bool(what string) (bool, error) {
	s, err := t.next(what)
	if err != nil {
		return false, err
	}
	switch s {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, t.errorf("%s: %q is neither 0 nor 1", what, s)
}

// hexBytes reads n bytes written as 2n hex digits.
func (t *tokens) hexBytes(what string, n int) ([]byte, error) {
	s, err := t.next(what)
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != n {
		return nil, t.errorf("%s: %q is not %d bytes in hex", what, s, n)
	}
	return b, nil
}

// value reads a number in hex without prefix (action data).
func (t *tokens) value(what string) ([]byte, error) {
	s, err := t.next(what)
	if err != nil {
		return nil, err
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return nil, t.errorf("%s: %q is not a hex number", what, s)
		}
	}
	v, ok := new(big.Int).SetString(s, 16)
	if !ok || len(s) > 2*4096 {
		return nil, t.errorf("%s: %q is not a hex number", what, s)
	}
	if v.Sign() == 0 {
		return []byte{0}, nil
	}
	return v.Bytes(), nil
}

func (t *tokens) node(what string) (string, error) {
	s, err := t.next(what)
	if s == NoNode {
		s = ""
	}
	return s, err
}

func (t *tokens) action(what string, l *Layout) (Action, error) {
	id, err := t.int(what + " action")
	if err != nil {
		return Action{}, err
	}
	a := Action{ActionID: id}
	if id >= 0 {
		nparams, ok := l.ActionParams(id)
		if !ok {
			return a, t.errorf("%s: the program has no action %d", what, id)
		}
		n, err := t.count(what+" action data count", 1)
		if err != nil {
			return a, err
		}
		if n != nparams {
			return a, t.errorf("%s: action %d takes %d values, the dump gives %d", what, id, nparams, n)
		}
		for i := 0; i < n; i++ {
			v, err := t.value(what + " action data")
			if err != nil {
				return a, err
			}
			a.Data = append(a.Data, v)
		}
	} else if id != -1 {
		return a, t.errorf("%s: action id %d", what, id)
	}
	a.Next, err = t.node(what + " next node")
	return a, err
}

func (t *tokens) meter(what string, rates int) (Meter, error) {
	on, err := t.bool(what + " configured")
	if err != nil || !on {
		return Meter{}, err
	}
	m := Meter{Rates: make([]Rate, rates)}
	for i := range m.Rates {
		s, err := t.next(what + " rate")
		if err != nil {
			return m, err
		}
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			return m, t.errorf("%s: rate %q", what, s)
		}
		b, err := t.uint(what+" burst", math.MaxUint32)
		if err != nil {
			return m, err
		}
		m.Rates[i] = Rate{InfoRate: r, Burst: b}
	}
	return m, nil
}

// Read parses a dump of the program l describes, whose JSON has the md5
// sum md5. It checks the dump's structure and that what it names exists in
// the program; it does not apply it.
func Read(data []byte, l *Layout, md5 [16]byte) (*State, error) {
	vl := len(Version)
	if len(data) < vl+1 || string(data[:vl]) != Version || data[vl] != '\n' {
		return nil, ErrVersion
	}
	rest := data[vl+1:]
	if len(rest) < 17 || rest[16] != '\n' {
		return nil, errors.New("the state dump has no md5 line")
	}
	st := &State{}
	copy(st.MD5[:], rest[:16])
	if st.MD5 != md5 {
		return nil, ErrMD5
	}
	t := &tokens{words: words(rest[17:])}
	for _, lt := range l.Tables {
		ts, err := readTable(t, l, lt)
		if err != nil {
			return nil, err
		}
		st.Tables = append(st.Tables, ts)
	}
	for _, name := range l.Profiles {
		t.where = "action profile " + name
		p, err := readProfile(t, l)
		if err != nil {
			return nil, err
		}
		st.Profiles = append(st.Profiles, p)
	}
	for _, m := range l.Meters {
		t.where = "meter array " + m.Name
		cells := make([]Meter, 0, min(m.Size, t.left()))
		for i := 0; i < m.Size; i++ {
			c, err := t.meter(fmt.Sprintf("cell %d", i), m.RateCount)
			if err != nil {
				return nil, err
			}
			cells = append(cells, c)
		}
		st.Meters = append(st.Meters, cells)
	}
	if t.left() > 0 {
		t.where = "after the meter arrays"
		return nil, t.errorf("%d words that belong to nothing", t.left())
	}
	return st, nil
}

func readTable(t *tokens, l *Layout, lt *Table) (TableState, error) {
	t.where = "table " + lt.Name
	ts := TableState{Name: lt.Name}
	name, err := t.next("name")
	if err != nil {
		return ts, err
	}
	if name != lt.Name {
		return ts, t.errorf("the dump names table %q here", name)
	}
	if ts.MissNext, err = t.node("miss node"); err != nil {
		return ts, err
	}
	if ts.MissNext != lt.MissNext {
		return ts, t.errorf("miss node %s, the program's is %s", nodeName(ts.MissNext), nodeName(lt.MissNext))
	}
	n, err := t.count("number of entries", 5)
	if err != nil {
		return ts, err
	}
	if n > lt.Size {
		return ts, t.errorf("%d entries, the table holds %d", n, lt.Size)
	}
	keyLen := 0
	for _, k := range lt.Keys {
		keyLen += k.Bytes()
	}
	seen := map[uint32]bool{}
	for i := 0; i < n; i++ {
		var e Entry
		idx, err := t.uint("entry handle", uint64(lt.Size-1))
		if err != nil {
			return ts, err
		}
		e.Index = uint32(idx)
		if seen[e.Index] {
			return ts, t.errorf("handle %d listed twice", e.Index)
		}
		seen[e.Index] = true
		v, err := t.uint("handle version", 255)
		if err != nil {
			return ts, err
		}
		e.Version = uint32(v)
		if keyLen == 0 {
			return ts, t.errorf("an entry in a table without key")
		}
		if e.Key, err = t.hexBytes("key", keyLen); err != nil {
			return ts, err
		}
		switch lt.Unit {
		case UnitLPM:
			p, err := t.uint("prefix length", uint64(keyLen*8))
			if err != nil {
				return ts, err
			}
			e.PrefixLen = int(p)
		case UnitTernary, UnitRange:
			if e.Mask, err = t.hexBytes("mask", keyLen); err != nil {
				return ts, err
			}
			if e.Priority, err = t.int("priority"); err != nil {
				return ts, err
			}
		}
		if lt.Indirect {
			x, err := t.uint("member or group", math.MaxUint32)
			if err != nil {
				return ts, err
			}
			if hi := x >> 24; hi > 1 {
				return ts, t.errorf("%d is neither a member nor a group", x)
			}
			e.Indirect = uint32(x)
		} else {
			if e.Action, err = t.action(fmt.Sprintf("entry %d", e.Index), l); err != nil {
				return ts, err
			}
			if !lt.HasAction(e.Action.ActionID) {
				return ts, t.errorf("entry %d: action %d is not an action of the table", e.Index, e.Action.ActionID)
			}
			if want := lt.EntryNext(e.Action.ActionID); e.Action.Next != want {
				return ts, t.errorf("entry %d: next node %s, the program's is %s", e.Index, nodeName(e.Action.Next), nodeName(want))
			}
		}
		to, err := t.uint("timeout", math.MaxUint32)
		if err != nil {
			return ts, err
		}
		e.TimeoutMs = uint32(to)
		ts.Entries = append(ts.Entries, e)
	}
	if lt.DirectMeter != "" {
		m := l.Meter(lt.DirectMeter)
		for i := 0; i < m.Size; i++ {
			c, err := t.meter(fmt.Sprintf("direct meter %d", i), m.RateCount)
			if err != nil {
				return ts, err
			}
			ts.DirectMeters = append(ts.DirectMeters, c)
		}
	}
	if lt.Indirect {
		if ts.DefaultSet, err = t.bool("default entry set"); err != nil {
			return ts, err
		}
		if ts.DefaultSet {
			x, err := t.uint("default member or group", math.MaxUint32)
			if err != nil {
				return ts, err
			}
			if x>>24 > 1 {
				return ts, t.errorf("default %d is neither a member nor a group", x)
			}
			ts.DefaultIndex = uint32(x)
		}
		return ts, nil
	}
	if ts.Default, err = t.action("default entry", l); err != nil {
		return ts, err
	}
	if ts.Default.ActionID >= 0 && !lt.HasAction(ts.Default.ActionID) {
		return ts, t.errorf("default entry: action %d is not an action of the table", ts.Default.ActionID)
	}
	if want := lt.DefaultNext(ts.Default.ActionID); ts.Default.Next != want {
		return ts, t.errorf("default entry: next node %s, the program's is %s", nodeName(ts.Default.Next), nodeName(want))
	}
	return ts, nil
}

func readProfile(t *tokens, l *Layout) (ProfileState, error) {
	var p ProfileState
	slots, err := t.uint("size", maxHandles)
	if err != nil {
		return p, err
	}
	p.Slots = uint32(slots)
	n, err := t.count("number of members", 4)
	if err != nil {
		return p, err
	}
	if n > 0 && slots == 0 {
		return p, t.errorf("%d members in a profile of size 0", n)
	}
	members := map[uint32]bool{}
	for i := 0; i < n; i++ {
		h, err := t.uint("member handle", slots-1)
		if err != nil {
			return p, err
		}
		if members[uint32(h)] {
			return p, t.errorf("member %d listed twice", h)
		}
		members[uint32(h)] = true
		a, err := t.action(fmt.Sprintf("member %d", h), l)
		if err != nil {
			return p, err
		}
		if a.ActionID < 0 {
			return p, t.errorf("member %d has no action", h)
		}
		p.Members = append(p.Members, Member{Handle: uint32(h), Action: a})
	}
	readCounts := func(what string) ([]uint32, error) {
		n, err := t.count(what, 1)
		if err != nil {
			return nil, err
		}
		out := make([]uint32, n)
		for i := range out {
			c, err := t.uint(what, math.MaxUint32)
			if err != nil {
				return nil, err
			}
			out[i] = uint32(c)
		}
		return out, nil
	}
	if p.MemberRefs, err = readCounts("member use counts"); err != nil {
		return p, err
	}
	if uint64(len(p.MemberRefs)) != slots {
		return p, t.errorf("%d member use counts for a profile of size %d", len(p.MemberRefs), slots)
	}
	if p.GroupRefs, err = readCounts("group use counts"); err != nil {
		return p, err
	}
	ng, err := t.count("number of groups", 2)
	if err != nil {
		return p, err
	}
	groups := map[uint32]bool{}
	for i := 0; i < ng; i++ {
		h, err := t.uint("group handle", maxHandles-1)
		if err != nil {
			return p, err
		}
		if int(h) >= len(p.GroupRefs) {
			return p, t.errorf("group %d beyond the %d group use counts", h, len(p.GroupRefs))
		}
		if groups[uint32(h)] {
			return p, t.errorf("group %d listed twice", h)
		}
		groups[uint32(h)] = true
		g := Group{Handle: uint32(h)}
		nm, err := t.count("group size", 1)
		if err != nil {
			return p, err
		}
		for j := 0; j < nm; j++ {
			m, err := t.uint("group member", math.MaxUint32)
			if err != nil {
				return p, err
			}
			if !members[uint32(m)] {
				return p, t.errorf("group %d lists member %d, which the profile has not", h, m)
			}
			if slices.Contains(g.Members, uint32(m)) {
				return p, t.errorf("group %d lists member %d twice", h, m)
			}
			g.Members = append(g.Members, uint32(m))
		}
		p.Groups = append(p.Groups, g)
	}
	return p, nil
}
