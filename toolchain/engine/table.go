package engine

// Match-action tables. A table's key is read field by field into the packet
// context's scratch (no allocation); the lookup structure depends on the
// key's shape:
//
//   - exact, key <= 64 bits: map[uint64]
//   - exact, wider key: map[string] over the byte-padded key
//   - lpm (one lpm field, the rest exact), key <= 64 bits: one map per
//     prefix length present, probed from the longest down
//   - anything else (ternary, range, optional, wide lpm): entries sorted by
//     priority (lpm tables: by prefix length) and scanned; the first match
//     wins
//
// Table contents change only under the pipeline's write lock; packet
// processing holds the read lock for a whole pass.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math/big"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

type tableKind uint8

const (
	tkNoKey tableKind = iota
	tkExact64
	tkExactBytes
	tkLPM64
	tkGeneric
)

type keyField struct {
	info   pipeline.KeyFieldInfo
	narrow bool
	read   u64Fn // narrow fields
	slot   int   // PHV word of a plain narrow field key, -1 otherwise
	wideAt func(p *Packet) int
	nbytes int    // padded byte width
	koff   int    // offset in the byte-padded key
	smask  uint64 // static key mask (narrow), all ones if none
	smaskB []byte // static key mask (wide), nil if none
}

// tableState is one version of a table's contents. Published states are
// never modified; writers fork, change and publish (shard maps make a fork
// cheap: see shardMap).
type tableState struct {
	byID    *shardMap[string] // canonical match (+priority) -> entry
	exact64 *shardMap[uint64]
	exactB  *shardMap[string]
	lpmLens []int               // distinct prefix lengths present, longest first
	lpmMaps []*shardMap[uint64] // by prefix length
	lpmOwn  uint64              // lpmMaps slots this version forked (lengths < 64)
	sorted  []*entry
	defAct  *action
	defData *actionData
	// defRef, when set, is an indirect table's default entry: a member or
	// group of its profile, run on a miss in place of defAct (BMv2's
	// set_default_member / set_default_group).
	defRef pipeline.IndirectRef
}

func (t *table) emptyState() *tableState {
	st := &tableState{byID: &shardMap[string]{}}
	switch t.kind {
	case tkExact64:
		st.exact64 = &shardMap[uint64]{}
	case tkExactBytes:
		st.exactB = &shardMap[string]{}
	case tkLPM64:
		st.lpmMaps = make([]*shardMap[uint64], len(t.lpmMask))
	}
	return st
}

func (st *tableState) clone() *tableState {
	n := &tableState{
		byID:    st.byID.fork(),
		exact64: st.exact64.fork(),
		exactB:  st.exactB.fork(),
		lpmLens: append([]int(nil), st.lpmLens...),
		sorted:  append([]*entry(nil), st.sorted...),
		defAct:  st.defAct,
		defData: st.defData,
		defRef:  st.defRef,
	}
	if st.lpmMaps != nil {
		n.lpmMaps = append([]*shardMap[uint64](nil), st.lpmMaps...)
	}
	return n
}

// lpmMap returns the map of prefix length l that this version may write.
func (st *tableState) lpmMap(l int) *shardMap[uint64] {
	own := l < 64 && st.lpmOwn&(1<<uint(l)) != 0
	if st.lpmMaps[l] == nil {
		st.lpmMaps[l] = &shardMap[uint64]{}
	} else if !own {
		st.lpmMaps[l] = st.lpmMaps[l].fork()
	}
	if l < 64 {
		st.lpmOwn |= 1 << uint(l)
	}
	return st.lpmMaps[l]
}

type entry struct {
	match   []pipeline.Match // normalized copy, for readback
	prio    int32
	act     *action
	data    *actionData
	counter *counterCell // shared by the versions of a modified entry
	meter   *meterCell
	life    *entryLife           // ageing tables: timeout and last hit
	ref     pipeline.IndirectRef // indirect tables: member or group (act is nil)
	seq     uint64
	isConst bool
	handle  uint32 // BMv2's entry handle (handles.go)

	k64    uint64   // exact64 / lpm64 combined key (masked)
	kbytes string   // exactBytes key
	prefix int      // lpm prefix length of the lpm field
	vals   []uint64 // per narrow field: value (masked) or range low
	masks  []uint64 // per narrow field: mask
	his    []uint64 // per narrow field: range high
	wvals  [][]byte // per wide field
	wmasks [][]byte
	whis   [][]byte
}

type table struct {
	pl      *Pipeline
	info    pipeline.TableInfo
	keys    []keyField
	kind    tableKind
	keyLen  int // byte-padded key length
	lpmIdx  int // index of the lpm key field, -1 if none
	lpmOnly bool
	prioTbl bool // entries ordered by priority (ternary/range/optional)
	actions map[int]*action

	// control flow
	nextByAction map[int]cfNode
	nextByIdx    []cfNode // by action.idx
	hitNext      cfNode
	missNext     cfNode
	hasHitMiss   bool
	baseNext     cfNode

	// contents: an immutable snapshot replaced atomically by writers
	// (copy-on-write), so the packet path reads it with one atomic load
	// and writes no shared memory.
	state   atomic.Pointer[tableState]
	seed    maphash.Seed // shard hashing of string keys
	lpmMask []uint64     // combined key mask per prefix length (lpm64)
	seq     uint64       // insertion counter (writers hold pl.mu)
	hnd     handles      // entry handles (writers hold pl.mu)

	progDefAct    *action
	progDefData   *actionData
	defEntryConst bool

	directCounter *counterArray
	directMeter   *meterArray
	ageing        bool           // support_timeout: entries have a timeout and a last hit
	profile       *actionProfile // indirect tables

	// declared are the JSON "entries" with their values as the JSON writes
	// them (before normalize masks them for matching): what a control
	// plane reads back as the program's entries (Pipeline.Schema).
	declared []pipeline.TableEntry
}

func matchKindOf(s string) (pipeline.MatchKind, error) {
	switch s {
	case "exact":
		return pipeline.MatchExact, nil
	case "lpm":
		return pipeline.MatchLPM, nil
	case "ternary":
		return pipeline.MatchTernary, nil
	case "range":
		return pipeline.MatchRange, nil
	case "optional":
		return pipeline.MatchOptional, nil
	case "valid":
		return pipeline.MatchValid, nil
	}
	return 0, fmt.Errorf("unsupported match kind %q", s)
}

func (c *closureBuilder) compileTable(jt *jTable) (*table, error) {
	t := &table{
		pl:           c.pl,
		actions:      map[int]*action{},
		nextByAction: map[int]cfNode{},
		lpmIdx:       -1,
		seed:         maphash.MakeSeed(),
	}
	t.info = pipeline.TableInfo{Name: jt.Name, ID: jt.ID, MaxSize: jt.MaxSize, ActionIDs: append([]int(nil), jt.ActionIDs...),
		SupportTimeout: jt.SupportTimeout}
	t.ageing = jt.SupportTimeout
	c.where = "table " + jt.Name
	defer func() { c.where = "" }()
	switch jt.Type {
	case "", "simple":
	case "indirect", "indirect_ws":
		ap, ok := c.pl.profiles.byName[jt.ActionProfile]
		if !ok {
			return nil, c.errorf("unknown action profile %q", jt.ActionProfile)
		}
		if jt.Type == "indirect_ws" && ap.selector == nil {
			return nil, c.errorf("indirect_ws table with action profile %s that has no selector", ap.name)
		}
		t.profile = ap
		ap.tables = append(ap.tables, t)
		t.info.ActionProfile = ap.name
	default:
		return nil, c.errorf("unsupported table type %q", jt.Type)
	}
	allNarrow := true
	totalBits := 0
	nLPM := 0
	for i, jk := range jt.Key {
		kind, err := matchKindOf(jk.MatchType)
		if err != nil {
			return nil, c.errorf("%v", err)
		}
		kf := keyField{info: pipeline.KeyFieldInfo{Name: jk.Name, Kind: kind}, smask: ^uint64(0), slot: -1}
		if kind == pipeline.MatchValid {
			var hname string
			if err := json.Unmarshal(jk.Target, &hname); err != nil {
				var pair []string
				if err2 := json.Unmarshal(jk.Target, &pair); err2 != nil || len(pair) < 1 {
					return nil, c.errorf("bad valid key target %s", string(jk.Target))
				}
				hname = pair[0]
			}
			h, ok := c.lay.hdrByName[hname]
			if !ok {
				return nil, c.errorf("unknown header %s in key", hname)
			}
			kf.info.Target = hname + ".$valid$"
			kf.info.Bitwidth = 1
			kf.narrow = true
			kf.read = func(p *Packet) uint64 {
				if p.hs[h].valid {
					return 1
				}
				return 0
			}
		} else {
			var pair []string
			if err := json.Unmarshal(jk.Target, &pair); err != nil || len(pair) != 2 {
				return nil, c.errorf("bad key target %s", string(jk.Target))
			}
			r, ok := c.lay.lookupField(pair[0], pair[1])
			if !ok {
				return nil, c.errorf("unknown key field %s.%s", pair[0], pair[1])
			}
			kf.info.Target = pair[0] + "." + pair[1]
			if r.fld < 0 {
				h := r.hdr
				kf.info.Bitwidth = 1
				kf.narrow = true
				kf.read = func(p *Packet) uint64 {
					if p.hs[h].valid {
						return 1
					}
					return 0
				}
			} else {
				fd := c.lay.field(r)
				if fd.varbit {
					return nil, c.errorf("cannot match on varbit field %s", kf.info.Target)
				}
				kf.info.Bitwidth = fd.width
				if fd.narrow {
					kf.narrow = true
					slot := c.lay.word(r)
					c.markRead(slot)
					kf.slot = slot
					kf.read = func(p *Packet) uint64 { return p.words[slot] }
				} else {
					off := c.lay.wideAt(r)
					kf.wideAt = func(*Packet) int { return off }
				}
			}
		}
		if kf.info.Name == "" {
			kf.info.Name = kf.info.Target
		}
		kf.nbytes = (kf.info.Bitwidth + 7) / 8
		if jk.Mask != nil {
			mv, err := parseHexstr(*jk.Mask)
			if err != nil {
				return nil, c.errorf("key mask: %v", err)
			}
			if kf.narrow {
				kf.smask = low64(mv) & mask64(kf.info.Bitwidth)
			} else {
				kf.smaskB = make([]byte, kf.nbytes)
				mv.FillBytes(kf.smaskB)
			}
			kf.info.Mask = make([]byte, kf.nbytes)
			new(big.Int).And(mv, new(big.Int).Sub(bigPow2(kf.nbytes*8), big.NewInt(1))).FillBytes(kf.info.Mask)
		}
		kf.koff = t.keyLen
		t.keyLen += kf.nbytes
		if !kf.narrow {
			allNarrow = false
		}
		totalBits += kf.info.Bitwidth
		switch kind {
		case pipeline.MatchLPM:
			nLPM++
			t.lpmIdx = i
		case pipeline.MatchTernary, pipeline.MatchRange, pipeline.MatchOptional:
			t.prioTbl = true
		}
		t.keys = append(t.keys, kf)
		t.info.Keys = append(t.info.Keys, kf.info)
	}
	if nLPM > 1 {
		return nil, c.errorf("more than one lpm key field")
	}
	t.info.NeedsPriority = t.prioTbl
	switch {
	case len(t.keys) == 0:
		t.kind = tkNoKey
	case t.prioTbl:
		t.kind = tkGeneric
	case nLPM == 1:
		t.lpmOnly = true
		if allNarrow && totalBits <= 64 {
			t.kind = tkLPM64
		} else {
			t.kind = tkGeneric
		}
	default:
		if allNarrow && totalBits <= 64 {
			t.kind = tkExact64
		} else {
			t.kind = tkExactBytes
		}
	}
	if len(t.keys) > c.pl.maxKeyFields {
		c.pl.maxKeyFields = len(t.keys)
	}
	if t.keyLen > c.pl.maxKeyBytes {
		c.pl.maxKeyBytes = t.keyLen
	}
	for _, aid := range jt.ActionIDs {
		a, ok := c.pl.actionByID[aid]
		if !ok {
			return nil, c.errorf("unknown action id %d", aid)
		}
		t.actions[aid] = a
		if t.profile != nil {
			t.profile.actions[aid] = a
		}
	}
	if jt.DefaultEntry != nil {
		a, ok := c.pl.actionByID[jt.DefaultEntry.ActionID]
		if !ok {
			return nil, c.errorf("default entry: unknown action id %d", jt.DefaultEntry.ActionID)
		}
		ad, err := hexActionData(a, jt.DefaultEntry.ActionData)
		if err != nil {
			return nil, c.errorf("default entry: %v", err)
		}
		t.progDefAct, t.progDefData = a, ad
		t.info.ConstDefault = jt.DefaultEntry.ActionConst
		t.defEntryConst = jt.DefaultEntry.ActionEntryConst
		t.info.ConstDefaultEntry = t.defEntryConst
	}
	if t.kind == tkLPM64 {
		lw := t.keys[t.lpmIdx].info.Bitwidth
		t.lpmMask = make([]uint64, lw+1)
		for plen := 0; plen <= lw; plen++ {
			t.lpmMask[plen] = t.lpmComboMask(plen)
		}
	}
	st := t.emptyState()
	st.defAct, st.defData = t.progDefAct, t.progDefData
	t.state.Store(st)
	// p4c's synthesized tables for straight-line code: no key, one
	// const default action. They are invisible to the control plane.
	t.info.Hidden = len(t.keys) == 0 && t.info.ConstDefault && len(jt.ActionIDs) <= 1 && strings.HasPrefix(shortName(jt.Name), "tbl_")
	return t, nil
}

func shortName(n string) string {
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		return n[i+1:]
	}
	return n
}

func hexActionData(a *action, hex []string) (*actionData, error) {
	vals := make([][]byte, len(hex))
	for i, h := range hex {
		v, err := parseHexstr(h)
		if err != nil {
			return nil, err
		}
		if v.Sign() < 0 {
			if i >= len(a.params) {
				return nil, fmt.Errorf("too many action arguments")
			}
			v.And(v, new(big.Int).Sub(bigPow2(a.params[i].Bitwidth), big.NewInt(1)))
		}
		vals[i] = v.Bytes()
	}
	return makeActionData(a.params, vals)
}

// constEntries installs the JSON "entries" of a table.
func (t *table) constEntries(jt *jTable) error {
	st := t.state.Load().clone()
	defer t.state.Store(st)
	for n, je := range jt.Entries {
		if len(je.MatchKey) != len(t.keys) {
			return fmt.Errorf("table %s entry %d: %d key fields, want %d", t.info.Name, n, len(je.MatchKey), len(t.keys))
		}
		var e pipeline.TableEntry
		for _, mk := range je.MatchKey {
			var m pipeline.Match
			keyHex := func() ([]byte, error) {
				var s string
				if err := json.Unmarshal(mk.Key, &s); err != nil {
					var b bool
					if err2 := json.Unmarshal(mk.Key, &b); err2 == nil {
						if b {
							return []byte{1}, nil
						}
						return []byte{0}, nil
					}
					return nil, fmt.Errorf("bad key %s", string(mk.Key))
				}
				v, err := parseHexstr(s)
				if err != nil {
					return nil, err
				}
				return v.Bytes(), nil
			}
			switch mk.MatchType {
			case "exact", "valid", "optional":
				v, err := keyHex()
				if err != nil {
					return fmt.Errorf("table %s entry %d: %v", t.info.Name, n, err)
				}
				m.Value = v
				if mk.MatchType == "optional" && mk.Mask != "" {
					mv, _ := parseHexstr(mk.Mask)
					if mv != nil && mv.Sign() == 0 {
						m.Wildcard = true
					}
				}
			case "lpm":
				v, err := keyHex()
				if err != nil {
					return fmt.Errorf("table %s entry %d: %v", t.info.Name, n, err)
				}
				m.Value, m.PrefixLen = v, mk.PrefixLength
			case "ternary":
				v, err := keyHex()
				if err != nil {
					return fmt.Errorf("table %s entry %d: %v", t.info.Name, n, err)
				}
				mv, err := parseHexstr(mk.Mask)
				if err != nil {
					return fmt.Errorf("table %s entry %d: %v", t.info.Name, n, err)
				}
				m.Value, m.Mask = v, mv.Bytes()
			case "range":
				lo, err := parseHexstr(mk.Start)
				if err != nil {
					return fmt.Errorf("table %s entry %d: %v", t.info.Name, n, err)
				}
				hi, err := parseHexstr(mk.End)
				if err != nil {
					return fmt.Errorf("table %s entry %d: %v", t.info.Name, n, err)
				}
				m.Value, m.High = lo.Bytes(), hi.Bytes()
			default:
				return fmt.Errorf("table %s entry %d: match type %q", t.info.Name, n, mk.MatchType)
			}
			e.Match = append(e.Match, m)
		}
		a, ok := t.actions[je.ActionEntry.ActionID]
		if !ok {
			return fmt.Errorf("table %s entry %d: action %d not in table", t.info.Name, n, je.ActionEntry.ActionID)
		}
		ad, err := hexActionData(a, je.ActionEntry.ActionData)
		if err != nil {
			return fmt.Errorf("table %s entry %d: %v", t.info.Name, n, err)
		}
		e.Action = pipeline.ActionCall{ActionID: a.id, Params: exportActionData(a.params, ad)}
		// BMv2 JSON priorities: smaller is stronger. Ours: larger wins.
		e.Priority = int32(pipeline.ConstPriorityBase - je.Priority)
		if je.Priority < 0 || je.Priority >= pipeline.ConstPriorityBase {
			e.Priority = int32(pipeline.ConstPriorityBase - n)
		}
		if err := t.insert(st, e, true); err != nil {
			return fmt.Errorf("table %s entry %d: %v", t.info.Name, n, err)
		}
		e.Const = true
		t.declared = append(t.declared, e)
	}
	if len(jt.Entries) > 0 {
		t.info.Immutable = true
	}
	return nil
}

// ---- entry normalization ----

// normalize validates m against key field kf and returns a normalized copy
// plus a canonical identity string fragment.
func (kf *keyField) normalize(m pipeline.Match) (pipeline.Match, string, error) {
	w := kf.info.Bitwidth
	nb := kf.nbytes
	full := make([]byte, nb)
	for i := range full {
		full[i] = 0xff
	}
	maskTop(full, w)
	name := kf.info.Name
	chk := func(v []byte, what string) error {
		if !fitsWidth(v, w) {
			return errf(CodeInvalidArgument, "%s of key field %s does not fit in %d bits", what, name, w)
		}
		return nil
	}
	var out pipeline.Match
	switch kf.info.Kind {
	case pipeline.MatchExact, pipeline.MatchValid:
		if m.Wildcard {
			return out, "", errf(CodeInvalidArgument, "exact key field %s cannot be a wildcard", name)
		}
		if err := chk(m.Value, "value"); err != nil {
			return out, "", err
		}
		out.Value = normBytes(m.Value, nb)
		return out, "e" + string(out.Value), nil
	case pipeline.MatchLPM:
		if m.Wildcard {
			out.Value = make([]byte, nb)
			out.PrefixLen = 0
		} else {
			if err := chk(m.Value, "value"); err != nil {
				return out, "", err
			}
			if m.PrefixLen < 0 || m.PrefixLen > w {
				return out, "", errf(CodeInvalidArgument, "prefix length %d of key field %s is out of range 0..%d", m.PrefixLen, name, w)
			}
			out.Value = normBytes(m.Value, nb)
			out.PrefixLen = m.PrefixLen
		}
		pm := prefixMask(w, out.PrefixLen)
		for i := range out.Value {
			out.Value[i] &= pm[i]
		}
		return out, fmt.Sprintf("l%d:%s", out.PrefixLen, out.Value), nil
	case pipeline.MatchTernary, pipeline.MatchOptional:
		if m.Wildcard {
			out.Value = make([]byte, nb)
			out.Mask = make([]byte, nb)
		} else {
			if err := chk(m.Value, "value"); err != nil {
				return out, "", err
			}
			out.Value = normBytes(m.Value, nb)
			if kf.info.Kind == pipeline.MatchOptional || m.Mask == nil {
				out.Mask = full
			} else {
				if err := chk(m.Mask, "mask"); err != nil {
					return out, "", err
				}
				out.Mask = normBytes(m.Mask, nb)
			}
		}
		for i := range out.Value {
			out.Value[i] &= out.Mask[i]
		}
		if kf.info.Kind == pipeline.MatchOptional && !m.Wildcard {
			out.Mask = nil
		}
		if m.Wildcard {
			out.Wildcard = true
		}
		mk := out.Mask
		if mk == nil {
			mk = full
		}
		return out, "t" + string(out.Value) + "/" + string(mk), nil
	case pipeline.MatchRange:
		if m.Wildcard {
			out.Value = make([]byte, nb)
			out.High = full
			out.Wildcard = true
		} else {
			if err := chk(m.Value, "low bound"); err != nil {
				return out, "", err
			}
			hi := m.High
			if hi == nil {
				hi = m.Value
			}
			if err := chk(hi, "high bound"); err != nil {
				return out, "", err
			}
			out.Value = normBytes(m.Value, nb)
			out.High = normBytes(hi, nb)
			if bytes.Compare(out.Value, out.High) > 0 {
				return out, "", errf(CodeInvalidArgument, "range of key field %s has low > high", name)
			}
		}
		return out, "r" + string(out.Value) + "-" + string(out.High), nil
	}
	return out, "", errf(CodeInvalidArgument, "unsupported match kind")
}

func prefixMask(w, plen int) []byte {
	nb := (w + 7) / 8
	m := make([]byte, nb)
	// the field occupies the low w bits of nb*8; the prefix is its top plen
	pad := nb*8 - w
	for b := 0; b < plen; b++ {
		bit := pad + b
		m[bit/8] |= 0x80 >> uint(bit%8)
	}
	return m
}

// identity returns the canonical key of an entry (match + priority when
// the table orders by priority).
func (t *table) identity(match []pipeline.Match, prio int32) ([]pipeline.Match, string, error) {
	if len(match) != len(t.keys) {
		return nil, "", errf(CodeInvalidArgument, "table %s has %d key fields, got %d", t.info.Name, len(t.keys), len(match))
	}
	norm := make([]pipeline.Match, len(match))
	var sb strings.Builder
	for i := range t.keys {
		m, id, err := t.keys[i].normalize(match[i])
		if err != nil {
			return nil, "", err
		}
		norm[i] = m
		sb.WriteString(id)
		sb.WriteByte(0)
	}
	if t.prioTbl {
		fmt.Fprintf(&sb, "p%d", prio)
	}
	return norm, sb.String(), nil
}

func (t *table) checkAction(a pipeline.ActionCall) (*action, *actionData, error) {
	act, ok := t.actions[a.ActionID]
	if !ok {
		return nil, nil, errf(CodeInvalidArgument, "action %d is not an action of table %s", a.ActionID, t.info.Name)
	}
	ad, err := makeActionData(act.params, a.Params)
	if err != nil {
		return nil, nil, err
	}
	return act, ad, nil
}

// ---- mutation ----
//
// Writers hold pl.mu and work on a private clone of the state (st), which
// the caller publishes.

// add inserts e; at, when not nil, is the handle it must have (a state
// being restored), else it gets the lowest free one.
func (t *table) add(st *tableState, e pipeline.TableEntry, at *uint32) error {
	if t.info.Immutable {
		return errf(CodePermissionDenied, "table %s has const entries", t.info.Name)
	}
	if len(t.keys) == 0 {
		return errf(CodeInvalidArgument, "table %s has no key; set its default action instead", t.info.Name)
	}
	return t.insertAt(st, e, false, at)
}

func (t *table) insert(st *tableState, e pipeline.TableEntry, isConst bool) error {
	return t.insertAt(st, e, isConst, nil)
}

func (t *table) insertAt(st *tableState, e pipeline.TableEntry, isConst bool, at *uint32) error {
	norm, id, err := t.identity(e.Match, e.Priority)
	if err != nil {
		return err
	}
	ids := shardOfString(t.seed, id)
	if st.byID.get(ids, id) != nil {
		return errf(CodeAlreadyExists, "table %s already has this entry", t.info.Name)
	}
	if !isConst && t.info.MaxSize > 0 && st.byID.n >= t.info.MaxSize {
		return errf(CodeResourceExhausted, "table %s is full (%d entries)", t.info.Name, t.info.MaxSize)
	}
	var act *action
	var ad *actionData
	if t.profile != nil {
		if err := t.checkRef(e.Indirect); err != nil {
			return err
		}
	} else {
		if e.Indirect.Kind != pipeline.IndirectNone {
			return errf(CodeInvalidArgument, "table %s is not indirect", t.info.Name)
		}
		if act, ad, err = t.checkAction(e.Action); err != nil {
			return err
		}
	}
	en := &entry{match: norm, prio: e.Priority, act: act, data: ad, isConst: isConst, counter: &counterCell{}, ref: e.Indirect}
	if !t.prioTbl {
		en.prio = 0
	}
	t.seq++
	en.seq = t.seq
	en.counter.store(e.Counter)
	if t.directMeter != nil {
		en.meter = &meterCell{}
		if e.Meter != nil {
			if err := en.meter.configure(e.Meter, 0); err != nil {
				return err
			}
		}
	}
	if t.ageing {
		en.life = &entryLife{}
		en.life.lastHit.Store(t.pl.clock())
	}
	t.compileEntry(en)
	if at != nil {
		if err := t.hnd.allocAt(id, *at); err != nil {
			return errf(CodeAlreadyExists, "table %s: handle %#x: %v", t.info.Name, *at, err)
		}
		en.handle = *at
	} else {
		en.handle = t.hnd.alloc(id)
	}
	st.byID.put(ids, id, en)
	t.index(st, en)
	return nil
}

func (t *table) compileEntry(en *entry) {
	n := len(t.keys)
	en.vals = make([]uint64, n)
	en.masks = make([]uint64, n)
	en.his = make([]uint64, n)
	var k64 uint64
	var kb []byte
	for i := range t.keys {
		kf := &t.keys[i]
		m := en.match[i]
		w := kf.info.Bitwidth
		var val, msk, hi []byte
		switch kf.info.Kind {
		case pipeline.MatchExact, pipeline.MatchValid:
			val = m.Value
			msk = nil
		case pipeline.MatchLPM:
			val = m.Value
			msk = prefixMask(w, m.PrefixLen)
			en.prefix = m.PrefixLen
		case pipeline.MatchTernary, pipeline.MatchOptional:
			val = m.Value
			msk = m.Mask
			if m.Wildcard {
				msk = make([]byte, kf.nbytes)
			}
		case pipeline.MatchRange:
			val, hi = m.Value, m.High
		}
		if kf.narrow {
			en.vals[i] = getUint(val)
			if msk == nil {
				en.masks[i] = mask64(w)
			} else {
				en.masks[i] = getUint(msk)
			}
			if hi != nil {
				en.his[i] = getUint(hi)
			}
			k64 = k64<<uint(w) | en.vals[i]
		} else {
			if en.wvals == nil {
				en.wvals = make([][]byte, n)
				en.wmasks = make([][]byte, n)
				en.whis = make([][]byte, n)
			}
			en.wvals[i] = val
			if msk == nil {
				full := make([]byte, kf.nbytes)
				for j := range full {
					full[j] = 0xff
				}
				maskTop(full, w)
				msk = full
			}
			en.wmasks[i] = msk
			en.whis[i] = hi
		}
		kb = append(kb, val...)
	}
	en.k64 = k64
	en.kbytes = string(kb)
}

func (t *table) lpmComboMask(plen int) uint64 {
	var m uint64
	for i := range t.keys {
		kf := &t.keys[i]
		w := kf.info.Bitwidth
		var fm uint64
		if i == t.lpmIdx {
			if plen > 0 {
				fm = mask64(plen) << uint(w-plen)
			}
		} else {
			fm = mask64(w)
		}
		m = m<<uint(w) | fm
	}
	return m
}

func (t *table) index(st *tableState, en *entry) {
	switch t.kind {
	case tkExact64:
		st.exact64.put(shardOfU64(en.k64), en.k64, en)
	case tkExactBytes:
		st.exactB.put(shardOfString(t.seed, en.kbytes), en.kbytes, en)
	case tkLPM64:
		if st.lpmMaps[en.prefix] == nil || st.lpmMaps[en.prefix].n == 0 {
			st.lpmLens = append(st.lpmLens, en.prefix)
			sort.Sort(sort.Reverse(sort.IntSlice(st.lpmLens)))
		}
		k := en.k64 & t.lpmMask[en.prefix]
		st.lpmMap(en.prefix).put(shardOfU64(k), k, en)
	case tkGeneric:
		// insert keeping the order: priority (lpm: prefix) descending,
		// then insertion order
		i := sort.Search(len(st.sorted), func(i int) bool { return t.before(en, st.sorted[i]) })
		st.sorted = append(st.sorted, nil)
		copy(st.sorted[i+1:], st.sorted[i:])
		st.sorted[i] = en
	}
}

// before reports whether a sorts before b in a generic table.
func (t *table) before(a, b *entry) bool {
	if t.lpmOnly {
		if a.prefix != b.prefix {
			return a.prefix > b.prefix
		}
		return a.seq < b.seq
	}
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	return a.seq < b.seq
}

func (t *table) unindex(st *tableState, en *entry) {
	switch t.kind {
	case tkExact64:
		st.exact64.del(shardOfU64(en.k64), en.k64)
	case tkExactBytes:
		st.exactB.del(shardOfString(t.seed, en.kbytes), en.kbytes)
	case tkLPM64:
		k := en.k64 & t.lpmMask[en.prefix]
		mp := st.lpmMap(en.prefix)
		mp.del(shardOfU64(k), k)
		if mp.n == 0 {
			st.lpmMaps[en.prefix] = nil
			for i, l := range st.lpmLens {
				if l == en.prefix {
					st.lpmLens = append(st.lpmLens[:i:i], st.lpmLens[i+1:]...)
					break
				}
			}
		}
	case tkGeneric:
		for i, x := range st.sorted {
			if x == en {
				st.sorted = append(st.sorted[:i:i], st.sorted[i+1:]...)
				break
			}
		}
	}
}

func (t *table) find(st *tableState, match []pipeline.Match, prio int32) (*entry, error) {
	_, id, err := t.identity(match, prio)
	if err != nil {
		return nil, err
	}
	en := st.byID.get(shardOfString(t.seed, id), id)
	if en == nil {
		return nil, errf(CodeNotFound, "no such entry in table %s", t.info.Name)
	}
	return en, nil
}

// replace swaps entry old for nu (same match) in st.
func (t *table) replace(st *tableState, id string, old, nu *entry) {
	st.byID.put(shardOfString(t.seed, id), id, nu)
	t.unindex(st, old)
	t.index(st, nu)
}

func (t *table) modify(st *tableState, e pipeline.TableEntry) error {
	if t.info.Immutable {
		return errf(CodePermissionDenied, "table %s has const entries", t.info.Name)
	}
	_, id, err := t.identity(e.Match, e.Priority)
	if err != nil {
		return err
	}
	old := st.byID.get(shardOfString(t.seed, id), id)
	if old == nil {
		return errf(CodeNotFound, "no such entry in table %s", t.info.Name)
	}
	nu := *old
	if t.profile != nil {
		if err := t.checkRef(e.Indirect); err != nil {
			return err
		}
		nu.ref = e.Indirect
	} else {
		act, ad, err := t.checkAction(e.Action)
		if err != nil {
			return err
		}
		// Packets may be using old: the new version shares its counter
		// and meter.
		nu.act, nu.data = act, ad
	}
	t.replace(st, id, old, &nu)
	return nil
}

func (t *table) remove(st *tableState, match []pipeline.Match, prio int32) error {
	if t.info.Immutable {
		return errf(CodePermissionDenied, "table %s has const entries", t.info.Name)
	}
	_, id, err := t.identity(match, prio)
	if err != nil {
		return err
	}
	ids := shardOfString(t.seed, id)
	en := st.byID.get(ids, id)
	if en == nil {
		return errf(CodeNotFound, "no such entry in table %s", t.info.Name)
	}
	st.byID.del(ids, id)
	t.unindex(st, en)
	t.hnd.release(en.handle)
	return nil
}

// cleared returns a state with only the const entries and the program's
// default action.
func (t *table) cleared(st *tableState) *tableState {
	n := t.emptyState()
	// BMv2 forgets every handle and version of a cleared table; the
	// program's own entries keep theirs.
	t.hnd = handles{}
	for _, en := range st.ordered() {
		if en.isConst {
			_, id, _ := t.identity(en.match, en.prio)
			c := *en
			c.handle = t.hnd.alloc(id)
			n.byID.put(shardOfString(t.seed, id), id, &c)
			t.index(n, &c)
		}
	}
	n.defAct, n.defData = t.progDefAct, t.progDefData
	return n
}

func (t *table) export(en *entry) pipeline.TableEntry {
	e := pipeline.TableEntry{
		Match:    make([]pipeline.Match, len(en.match)),
		Priority: en.prio,
		Counter:  en.counter.load(),
		Const:    en.isConst,
		Indirect: en.ref,
		Handle:   en.handle,
	}
	if en.act != nil {
		e.Action = pipeline.ActionCall{ActionID: en.act.id, Params: exportActionData(en.act.params, en.data)}
	}
	for i, m := range en.match {
		e.Match[i] = pipeline.Match{
			Value:     append([]byte(nil), m.Value...),
			Mask:      append([]byte(nil), m.Mask...),
			High:      append([]byte(nil), m.High...),
			PrefixLen: m.PrefixLen,
			Wildcard:  m.Wildcard,
		}
		if m.Mask == nil {
			e.Match[i].Mask = nil
		}
		if m.High == nil {
			e.Match[i].High = nil
		}
	}
	if en.meter != nil {
		e.Meter = en.meter.config()
	}
	if en.life != nil {
		e.Ageing = &pipeline.EntryAgeing{
			Timeout:  time.Duration(en.life.timeoutMs.Load()) * time.Millisecond,
			SinceHit: time.Duration(max(t.pl.clock()-en.life.lastHit.Load(), 0)),
		}
	}
	return e
}

func (t *table) read(st *tableState) []pipeline.TableEntry {
	es := st.ordered()
	out := make([]pipeline.TableEntry, 0, len(es))
	for _, en := range es {
		out = append(out, t.export(en))
	}
	return out
}

func (t *table) setDefault(st *tableState, a pipeline.ActionCall) error {
	act, ad, err := t.checkAction(a)
	if err != nil {
		return err
	}
	if t.info.ConstDefault && (t.progDefAct == nil || act != t.progDefAct) {
		return errf(CodePermissionDenied, "table %s has a const default action", t.info.Name)
	}
	if t.defEntryConst {
		return errf(CodePermissionDenied, "table %s has a const default entry", t.info.Name)
	}
	st.defAct, st.defData = act, ad
	st.defRef = pipeline.IndirectRef{}
	return nil
}

// setDefaultRef makes a member or group of an indirect table's profile
// its default entry.
func (t *table) setDefaultRef(st *tableState, ref pipeline.IndirectRef) error {
	if t.profile == nil {
		return errf(CodeInvalidArgument, "table %s is not indirect", t.info.Name)
	}
	if t.info.ConstDefault || t.defEntryConst {
		return errf(CodePermissionDenied, "table %s has a const default action", t.info.Name)
	}
	if err := t.checkRef(ref); err != nil {
		return err
	}
	st.defRef = ref
	return nil
}

func (t *table) getDefault(st *tableState) (pipeline.ActionCall, bool) {
	if st.defAct == nil {
		return pipeline.ActionCall{}, false
	}
	return pipeline.ActionCall{ActionID: st.defAct.id, Params: exportActionData(st.defAct.params, st.defData)}, true
}

// ---- lookup (packet path) ----

// buildKey reads the key fields into p.keyU (narrow) and p.keyB (wide).
func (t *table) buildKey(p *Packet) {
	for i := range t.keys {
		kf := &t.keys[i]
		if kf.narrow {
			p.keyU[i] = kf.read(p) & kf.smask
		}
	}
}

func (t *table) wideKey(p *Packet, kf *keyField) []byte {
	off := kf.wideAt(p)
	b := p.wide[off : off+kf.nbytes]
	if kf.smaskB != nil {
		start := len(p.keyB)
		p.keyB = append(p.keyB, b...)
		for j := range kf.smaskB {
			p.keyB[start+j] &= kf.smaskB[j]
		}
		return p.keyB[start:]
	}
	return b
}

func (t *table) lookup(st *tableState, p *Packet) *entry {
	switch t.kind {
	case tkNoKey:
		return nil
	case tkExact64:
		k := t.key64(p)
		return st.exact64.shards[shardOfU64(k)][k]
	case tkLPM64:
		k := t.key64(p)
		for _, l := range st.lpmLens {
			km := k & t.lpmMask[l]
			if en := st.lpmMaps[l].shards[shardOfU64(km)][km]; en != nil {
				return en
			}
		}
		return nil
	case tkExactBytes:
		p.keyB = p.keyB[:0]
		for i := range t.keys {
			kf := &t.keys[i]
			if kf.narrow {
				var tmp [8]byte
				putUint(tmp[8-kf.nbytes:], kf.read(p)&kf.smask)
				p.keyB = append(p.keyB, tmp[8-kf.nbytes:]...)
			} else {
				off := kf.wideAt(p)
				start := len(p.keyB)
				p.keyB = append(p.keyB, p.wide[off:off+kf.nbytes]...)
				if kf.smaskB != nil {
					for j := range kf.smaskB {
						p.keyB[start+j] &= kf.smaskB[j]
					}
				}
			}
		}
		return st.exactB.shards[shardOfBytes(t.seed, p.keyB)][string(p.keyB)]
	}
	// generic scan
	t.buildKey(p)
	p.keyB = p.keyB[:0]
outer:
	for _, en := range st.sorted {
		for i := range t.keys {
			kf := &t.keys[i]
			if kf.narrow {
				k := p.keyU[i]
				if kf.info.Kind == pipeline.MatchRange {
					if k < en.vals[i] || k > en.his[i] {
						continue outer
					}
				} else if k&en.masks[i] != en.vals[i] {
					continue outer
				}
				continue
			}
			off := kf.wideAt(p)
			k := p.wide[off : off+kf.nbytes]
			if kf.info.Kind == pipeline.MatchRange {
				if bytesMasked(k, kf.smaskB, en.wvals[i]) < 0 || bytesMasked(k, kf.smaskB, en.whis[i]) > 0 {
					continue outer
				}
				continue
			}
			m := en.wmasks[i]
			for j := range k {
				kb := k[j]
				if kf.smaskB != nil {
					kb &= kf.smaskB[j]
				}
				if kb&m[j] != en.wvals[i][j] {
					continue outer
				}
			}
		}
		return en
	}
	return nil
}

// key64 concatenates the key fields of a table whose key fits 64 bits.
func (t *table) key64(p *Packet) uint64 {
	if len(t.keys) == 1 {
		kf := &t.keys[0]
		if kf.slot >= 0 {
			return p.words[kf.slot] & kf.smask
		}
		return kf.read(p) & kf.smask
	}
	var k uint64
	for i := range t.keys {
		kf := &t.keys[i]
		var v uint64
		if kf.slot >= 0 {
			v = p.words[kf.slot]
		} else {
			v = kf.read(p)
		}
		k = k<<uint(kf.info.Bitwidth) | v&kf.smask
	}
	return k
}

// bytesMasked compares (k & smask) with v, big-endian.
func bytesMasked(k, smask, v []byte) int {
	for j := range k {
		kb := k[j]
		if smask != nil {
			kb &= smask[j]
		}
		if kb != v[j] {
			if kb < v[j] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// ordered returns the entries in insertion order.
func (st *tableState) ordered() []*entry {
	out := make([]*entry, 0, st.byID.n)
	st.byID.each(func(e *entry) { out = append(out, e) })
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}
