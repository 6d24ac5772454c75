package difftest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
)

// The generator reads the parser of a BMv2 JSON program (the reference
// one, p4c's) and walks it at random: each extract appends a header's
// bytes, each select picks one of the state's cases and writes its value
// (under its mask) into the key fields already laid down, so packets reach
// the states behind the selects instead of dying in the first one. What
// the walk cannot steer (keys computed into metadata, value sets,
// variable-length fields) is left to chance: the packet is still sent, it
// only goes where its random bits take it.

type jsonProgram struct {
	HeaderTypes []struct {
		Name   string  `json:"name"`
		Fields [][]any `json:"fields"`
	} `json:"header_types"`
	Headers []struct {
		Name       string `json:"name"`
		ID         int    `json:"id"`
		HeaderType string `json:"header_type"`
		Metadata   bool   `json:"metadata"`
	} `json:"headers"`
	HeaderStacks []struct {
		Name      string `json:"name"`
		HeaderIDs []int  `json:"header_ids"`
	} `json:"header_stacks"`
	Parsers []struct {
		Name        string       `json:"name"`
		InitState   string       `json:"init_state"`
		ParseStates []parseState `json:"parse_states"`
	} `json:"parsers"`
}

type parseState struct {
	Name      string `json:"name"`
	ParserOps []struct {
		Op         string `json:"op"`
		Parameters []struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"parameters"`
	} `json:"parser_ops"`
	Transitions []struct {
		Type      string  `json:"type"`
		Value     *string `json:"value"`
		Mask      *string `json:"mask"`
		NextState *string `json:"next_state"`
	} `json:"transitions"`
	TransitionKey []struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	} `json:"transition_key"`
}

type field struct {
	name  string
	off   int // bits from the header's start
	width int // 0 for a variable-length field
}

type headerType struct {
	fields []field
	width  int // fixed part, bits
	hasVL  bool
}

// Generator makes packets for one program.
type Generator struct {
	types    map[string]*headerType // by header instance name
	meta     map[string]bool        // metadata instances
	stacks   map[string][]string    // stack name -> element instance names
	states   map[string]*parseState
	init     string
	ports    []uint32
	seeds    [][]byte // packets of the STF script: bases for fields and mutants
	maxSteps int
	dict     []uint64 // the program's constants
}

// NewGenerator builds a generator from a BMv2 JSON program's first
// parser. ports are the ports packets arrive on (at least one); seeds are
// known-good packets (the STF script's), whose bytes the generator reuses
// so that table keys the script installs are hit.
func NewGenerator(programJSON []byte, ports []uint32, seeds [][]byte) (*Generator, error) {
	var jp jsonProgram
	if err := json.Unmarshal(programJSON, &jp); err != nil {
		return nil, err
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("no ports")
	}
	g := &Generator{
		types:    map[string]*headerType{},
		meta:     map[string]bool{},
		stacks:   map[string][]string{},
		states:   map[string]*parseState{},
		ports:    ports,
		seeds:    seeds,
		maxSteps: 64,
	}
	var doc any
	if err := json.Unmarshal(programJSON, &doc); err != nil {
		return nil, err
	}
	consts := map[uint64]bool{}
	constants(doc, consts)
	for c := range consts {
		g.dict = append(g.dict, c)
	}
	slices.Sort(g.dict)
	byType := map[string]*headerType{}
	for _, ht := range jp.HeaderTypes {
		t := &headerType{}
		for _, f := range ht.Fields {
			if len(f) < 2 {
				continue
			}
			name, _ := f[0].(string)
			w, ok := f[1].(float64)
			if !ok { // "*": variable length
				t.fields = append(t.fields, field{name: name, off: t.width})
				t.hasVL = true
				continue
			}
			t.fields = append(t.fields, field{name: name, off: t.width, width: int(w)})
			t.width += int(w)
		}
		byType[ht.Name] = t
	}
	byID := map[int]string{}
	for _, h := range jp.Headers {
		byID[h.ID] = h.Name
		if t := byType[h.HeaderType]; t != nil {
			g.types[h.Name] = t
		}
		g.meta[h.Name] = h.Metadata
	}
	for _, s := range jp.HeaderStacks {
		for _, id := range s.HeaderIDs {
			g.stacks[s.Name] = append(g.stacks[s.Name], byID[id])
		}
	}
	if len(jp.Parsers) == 0 {
		return nil, fmt.Errorf("no parser")
	}
	p := jp.Parsers[0]
	g.init = p.InitState
	for i := range p.ParseStates {
		g.states[p.ParseStates[i].Name] = &p.ParseStates[i]
	}
	return g, nil
}

// Packet is one generated input.
type Packet struct {
	Port uint32
	Data []byte
	Kind string // how it was made: walk, truncated, mutant, garbage (stf: the script's own)
}

// Next makes one packet.
func (g *Generator) Next(r *rand.Rand) Packet {
	port := g.ports[r.IntN(len(g.ports))]
	var base []byte
	if len(g.seeds) > 0 && r.IntN(2) == 0 {
		base = g.seeds[r.IntN(len(g.seeds))]
	}
	switch k := r.IntN(100); {
	case k < 55:
		data, p := g.walk(r, base, port)
		return Packet{Port: p, Data: data, Kind: "walk"}
	case k < 70:
		data, p := g.walk(r, base, port)
		return Packet{Port: p, Data: data[:r.IntN(len(data)+1)], Kind: "truncated"}
	case k < 90 && len(g.seeds) > 0:
		return Packet{Port: port, Data: mutate(r, g.seeds[r.IntN(len(g.seeds))]), Kind: "mutant"}
	default:
		data := make([]byte, r.IntN(80))
		fillRandom(r, data)
		return Packet{Port: port, Data: data, Kind: "garbage"}
	}
}

// walker is the state of one walk: the packet so far and where each
// header landed in it.
type walker struct {
	r     *rand.Rand
	base  []byte
	buf   []byte
	pos   int            // bits laid down so far
	where map[string]int // header instance -> bit offset of its last extraction
	next  map[string]int // stack -> next element
	port  uint32
	sets  map[string]expr // metadata field -> the expression the parser set it to
	dict  []uint64
	// pinned: bits past pos a lookahead select has set; the extract that
	// lays them down keeps them.
	pinned map[int]bool
}

// walk builds a packet along a random path through the parser; it
// returns the packet and its port (a select on the ingress port may have
// picked another).
func (g *Generator) walk(r *rand.Rand, base []byte, port uint32) ([]byte, uint32) {
	w := &walker{r: r, base: base, where: map[string]int{}, next: map[string]int{}, port: port,
		sets: map[string]expr{}, dict: g.dict, pinned: map[int]bool{}}
	state := g.init
	for step := 0; state != "" && step < g.maxSteps; step++ {
		st := g.states[state]
		if st == nil {
			break
		}
		for _, op := range st.ParserOps {
			if len(op.Parameters) == 0 {
				continue
			}
			p := op.Parameters[0]
			switch op.Op {
			case "extract", "extract_VL":
				inst := g.instance(w, p.Type, p.Value)
				if inst == "" {
					w.appendRandom(8 * (1 + r.IntN(8)))
					continue
				}
				w.extract(inst, g.types[inst], op.Op == "extract_VL")
			case "set":
				if ref := refOfRaw(p.Value); len(ref) == 2 && len(op.Parameters) > 1 {
					var e expr
					if json.Unmarshal(op.Parameters[1].Value, &e) == nil {
						w.sets[ref[0]+"."+ref[1]] = expr{"type": op.Parameters[1].Type, "value": e}
					}
				}
			case "verify":
				// Most packets pass the parser's checks (a tenth do not:
				// the error path is tested too).
				if r.IntN(10) > 0 {
					var e any
					if json.Unmarshal(p.Value, &e) == nil {
						g.satisfy(w, expr{"type": p.Type, "value": e}, 0)
					}
				}
			case "advance":
				bits := 8 * (1 + r.IntN(8))
				if p.Type == "hexstr" {
					var s string
					if json.Unmarshal(p.Value, &s) == nil {
						if v, ok := parseHex(s); ok && v.IsInt64() && v.Int64() >= 0 && v.Int64() < 1<<16 {
							bits = int(v.Int64())
						}
					}
				}
				w.appendRandom(bits)
			}
		}
		state = g.choose(w, st)
	}
	// A payload after the headers: the deparser must carry it across.
	w.appendRandom(8 * r.IntN(24))
	return w.buf, w.port
}

// instance names the header an extract fills (advancing stack counters).
func (g *Generator) instance(w *walker, typ string, raw json.RawMessage) string {
	switch typ {
	case "regular":
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	case "stack":
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		els := g.stacks[s]
		i := w.next[s]
		w.next[s] = i + 1
		if i >= len(els) {
			return ""
		}
		return els[i]
	case "union_stack":
		var v []string
		if json.Unmarshal(raw, &v) != nil || len(v) != 2 {
			return ""
		}
		i := w.next[v[0]]
		w.next[v[0]] = i + 1
		name := fmt.Sprintf("%s[%d].%s", v[0], i, v[1])
		if g.types[name] == nil {
			return ""
		}
		return name
	}
	return ""
}

func (w *walker) extract(inst string, t *headerType, vl bool) {
	if t == nil {
		return
	}
	w.where[inst] = w.pos
	for _, f := range t.fields {
		if f.width == 0 {
			continue
		}
		w.fillField(w.pos+f.off, f.width)
	}
	w.grow(w.pos + t.width)
	w.pos += t.width
	if vl || t.hasVL {
		// The length comes from an expression the walk does not evaluate:
		// lay down a plausible amount and let the parser decide. Half the
		// time none: the verify conditions met above usually mean the
		// shortest header (an IPv4 ihl of 5).
		if w.r.IntN(2) == 0 {
			w.appendRandom(8 * 4 * w.r.IntN(11))
		}
	}
}

// fillField writes one field's bits: random, the base packet's bits at the
// same place (so that keys of the script's entries match), the edge
// values all-zeros and all-ones that arithmetic gets wrong, or one of the
// program's constants (what its conditions compare with).
func (w *walker) fillField(off, width int) {
	w.grow(off + width)
	k := w.r.IntN(100)
	if k >= 88 && len(w.dict) > 0 {
		c := w.dict[w.r.IntN(len(w.dict))]
		for i := 0; i < width; i++ {
			var b byte
			if sh := width - 1 - i; sh < 64 {
				b = byte(c>>sh) & 1
			}
			w.put(off+i, b)
		}
		return
	}
	for i := 0; i < width; i++ {
		var b byte
		switch {
		case k < 35 && (off+i)/8 < len(w.base):
			b = getBit(w.base, off+i)
		case k < 43:
			b = 0
		case k < 51:
			b = 1
		default:
			b = byte(w.r.IntN(2))
		}
		w.put(off+i, b)
	}
}

// put lays down one new bit of the packet unless a lookahead pinned it.
func (w *walker) put(i int, b byte) {
	if !w.pinned[i] {
		setBit(w.buf, i, b)
	}
}

func (w *walker) appendRandom(bits int) {
	w.grow(w.pos + bits)
	for i := 0; i < bits; i++ {
		w.put(w.pos+i, byte(w.r.IntN(2)))
	}
	w.pos += bits
}

func (w *walker) grow(bits int) {
	for len(w.buf)*8 < bits {
		w.buf = append(w.buf, byte(w.r.IntN(256)))
	}
}

// choose picks a transition of st and makes the packet take it where the
// keys are bits of the packet; it returns the next state ("" to stop).
func (g *Generator) choose(w *walker, st *parseState) string {
	if len(st.Transitions) == 0 {
		return ""
	}
	i := w.r.IntN(len(st.Transitions))
	t := st.Transitions[i]
	switch {
	case t.Type == "hexstr" && t.Value != nil:
		g.steer(w, st, *t.Value, t.Mask)
	case t.Type == "default" && portOnly(st):
		// The default of a select on the ingress port is taken only by
		// ports no case names: the port is known, follow the case it
		// matches (the packet must be the path's).
		t = st.Transitions[matchPort(st, w.port)]
	case t.Type == "default":
		g.avoid(w, st)
	}
	if t.NextState == nil {
		return ""
	}
	return *t.NextState
}

// portOnly reports whether a state selects on the ingress port alone.
func portOnly(st *parseState) bool {
	if len(st.TransitionKey) != 1 || st.TransitionKey[0].Type != "field" {
		return false
	}
	ref := refOfRaw(st.TransitionKey[0].Value)
	return len(ref) == 2 && ref[0] == "standard_metadata" && ref[1] == "ingress_port"
}

// matchPort returns the index of the first transition of a select on the
// ingress port that port takes.
func matchPort(st *parseState, port uint32) int {
	p := new(big.Int).SetUint64(uint64(port))
	for i, t := range st.Transitions {
		if t.Type == "default" {
			return i
		}
		if t.Type != "hexstr" || t.Value == nil {
			continue
		}
		v, ok := parseHex(*t.Value)
		if !ok {
			continue
		}
		m := new(big.Int).SetUint64(1<<9 - 1)
		if t.Mask != nil {
			if mv, ok := parseHex(*t.Mask); ok {
				m = mv
			}
		}
		if new(big.Int).And(p, m).Cmp(new(big.Int).And(v, m)) == 0 {
			return i
		}
	}
	return len(st.Transitions) - 1
}

// selectKey is one key of a select, placed in the packet being built.
type selectKey struct {
	off, width int // off < 0: not bits of the packet (not steerable)
	port       bool
}

// keys places a state's select keys; total is their size in bytes, each
// key rounded up to whole bytes as the case values are written.
func (g *Generator) keys(w *walker, st *parseState) (keys []selectKey, total int) {
	keys = make([]selectKey, len(st.TransitionKey))
	for i, k := range st.TransitionKey {
		keys[i] = selectKey{off: -1}
		switch k.Type {
		case "field", "stack_field":
			var ref []string
			if json.Unmarshal(k.Value, &ref) != nil || len(ref) != 2 {
				continue
			}
			keys[i].off, keys[i].width, keys[i].port = g.locate(w, k.Type, ref)
		case "lookahead":
			var v []int
			if json.Unmarshal(k.Value, &v) != nil || len(v) != 2 {
				continue
			}
			keys[i] = selectKey{off: w.pos + v[0], width: v[1]}
		}
		total += (keys[i].width + 7) / 8
	}
	return keys, total
}

// avoid makes a packet that takes a select's default miss its cases: the
// key's bits, where they are the packet's, are drawn again while they
// match a case (constants and the script's bytes make that likely).
func (g *Generator) avoid(w *walker, st *parseState) {
	keys, _ := g.keys(w, st)
	for _, k := range keys {
		if k.off < 0 && k.width > 0 {
			return // a key the walk cannot see: left to chance
		}
	}
	for try := 0; try < 16 && g.matchesCase(w, st, keys); try++ {
		for _, k := range keys {
			if k.off >= 0 {
				for i := 0; i < k.width; i++ {
					setBit(w.buf, k.off+i, byte(w.r.IntN(2)))
					if k.off+i >= w.pos {
						w.pinned[k.off+i] = true
					}
				}
			}
		}
	}
}

// matchesCase reports whether the keys' current bits match one of the
// select's value/mask cases.
func (g *Generator) matchesCase(w *walker, st *parseState, keys []selectKey) bool {
	cur := new(big.Int)
	for _, k := range keys {
		cur.Lsh(cur, uint(8*((k.width+7)/8)))
		v := new(big.Int)
		if k.port {
			v.SetUint64(uint64(w.port))
		} else {
			w.grow(k.off + k.width)
			for i := 0; i < k.width; i++ {
				v.Lsh(v, 1)
				v.Or(v, big.NewInt(int64(getBit(w.buf, k.off+i))))
			}
		}
		cur.Or(cur, v)
	}
	for _, t := range st.Transitions {
		if t.Type != "hexstr" || t.Value == nil {
			continue
		}
		v, ok := parseHex(*t.Value)
		if !ok {
			continue
		}
		c := new(big.Int).Set(cur)
		if t.Mask != nil {
			if m, ok := parseHex(*t.Mask); ok {
				c.And(c, m)
				v.And(v, m)
			}
		}
		if c.Cmp(v) == 0 {
			return true
		}
	}
	return false
}

// steer writes a select case's value into the key's bits.
func (g *Generator) steer(w *walker, st *parseState, value string, mask *string) {
	keys, total := g.keys(w, st)
	val, ok := parseHex(value)
	if !ok {
		return
	}
	m := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(8*total)), big.NewInt(1))
	if mask != nil {
		if mv, ok := parseHex(*mask); ok {
			m = mv
		}
	}
	// The case's bytes are the keys' bytes, each key rounded up to whole
	// bytes, first key first.
	shift := 8 * total
	for _, k := range keys {
		nb := (k.width + 7) / 8
		shift -= 8 * nb
		if k.width == 0 {
			continue
		}
		kv := new(big.Int).Rsh(val, uint(shift))
		km := new(big.Int).Rsh(m, uint(shift))
		if k.port {
			lim := new(big.Int).Lsh(big.NewInt(1), uint(k.width))
			kv.Mod(kv, lim)
			if kv.IsUint64() && kv.Uint64() < 512 {
				w.port = uint32(kv.Uint64())
			}
			continue
		}
		if k.off < 0 {
			continue
		}
		w.grow(k.off + k.width)
		for i := 0; i < k.width; i++ {
			bit := uint(k.width - 1 - i)
			if km.Bit(int(bit)) == 1 {
				setBit(w.buf, k.off+i, byte(kv.Bit(int(bit))))
				if k.off+i >= w.pos {
					w.pinned[k.off+i] = true
				}
			}
		}
	}
}

// locate finds a field in the packet being built: its bit offset (-1 when
// it is not packet bits laid down so far), its width, and whether it is
// the ingress port.
func (g *Generator) locate(w *walker, typ string, ref []string) (off, width int, port bool) {
	inst := ref[0]
	if typ == "stack_field" {
		els := g.stacks[inst]
		n := w.next[inst]
		if n < 1 || n > len(els) {
			return -1, 0, false
		}
		inst = els[n-1]
	}
	t := g.types[inst]
	if t == nil {
		return -1, 0, false
	}
	var f *field
	for i := range t.fields {
		if t.fields[i].name == ref[1] {
			f = &t.fields[i]
		}
	}
	if f == nil {
		return -1, 0, false
	}
	if inst == "standard_metadata" && ref[1] == "ingress_port" {
		return -1, f.width, true
	}
	at, ok := w.where[inst]
	if !ok || g.meta[inst] || f.width == 0 {
		return -1, f.width, false
	}
	return at + f.off, f.width, false
}

// expr is a BMv2 JSON expression, decoded generically.
type expr = map[string]any

// satisfy makes the packet meet a verify condition where it can: the
// conditions p4c writes (d2b of a temporary set in the same state to b2d
// of a comparison, "and" of such) come down to "field == constant" or
// "field >= constant" (and <=), met by writing the constant.
func (g *Generator) satisfy(w *walker, e expr, depth int) {
	if e == nil || depth > 16 {
		return
	}
	switch e["type"] {
	case "expression":
		v, _ := e["value"].(map[string]any)
		if _, isOp := v["op"]; !isOp {
			g.satisfy(w, v, depth+1)
			return
		}
		l, _ := v["left"].(map[string]any)
		r, _ := v["right"].(map[string]any)
		switch v["op"] {
		case "d2b", "b2d":
			g.satisfy(w, r, depth+1)
		case "and":
			g.satisfy(w, l, depth+1)
			g.satisfy(w, r, depth+1)
		case "==", ">=", "<=":
			if l["type"] == "hexstr" {
				l, r = r, l
			}
			hs, _ := r["value"].(string)
			c, ok := parseHex(hs)
			if r["type"] != "hexstr" || !ok {
				return
			}
			if typ, _ := l["type"].(string); typ == "field" || typ == "stack_field" {
				ref := refOf(l["value"])
				if off, width, _ := g.locate(w, typ, ref); off >= 0 {
					w.grow(off + width)
					for i := 0; i < width; i++ {
						setBit(w.buf, off+i, byte(c.Bit(width-1-i)))
					}
				}
			}
		}
	case "field":
		// A temporary: what the state set it to.
		if ref := refOf(e["value"]); len(ref) == 2 && g.meta[ref[0]] {
			g.satisfy(w, w.sets[ref[0]+"."+ref[1]], depth+1)
		}
	}
}

func refOfRaw(raw json.RawMessage) []string {
	var ref []string
	if json.Unmarshal(raw, &ref) != nil {
		return nil
	}
	return ref
}

func refOf(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// constants collects the program's hexstr constants that fit 64 bits: a
// dictionary of values the program compares fields with.
func constants(v any, out map[uint64]bool) {
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "hexstr" {
			if s, ok := x["value"].(string); ok {
				if c, ok := parseHex(s); ok && c.IsUint64() {
					out[c.Uint64()] = true
				}
			}
		}
		for _, y := range x {
			constants(y, out)
		}
	case []any:
		for _, y := range x {
			constants(y, out)
		}
	}
}

// mutate changes a known-good packet a little: a few bits flipped, a few
// bytes set to edge values, cut short or lengthened.
func mutate(r *rand.Rand, in []byte) []byte {
	out := append([]byte(nil), in...)
	for n := 1 + r.IntN(3); n > 0 && len(out) > 0; n-- {
		i := r.IntN(len(out))
		switch r.IntN(4) {
		case 0:
			out[i] ^= 1 << r.IntN(8)
		case 1:
			out[i] = 0
		case 2:
			out[i] = 0xff
		default:
			out[i] = byte(r.IntN(256))
		}
	}
	switch r.IntN(6) {
	case 0:
		out = out[:r.IntN(len(out)+1)]
	case 1:
		tail := make([]byte, 1+r.IntN(16))
		fillRandom(r, tail)
		out = append(out, tail...)
	}
	return out
}

func fillRandom(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
}

func parseHex(s string) (*big.Int, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	v, ok := new(big.Int).SetString(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16)
	if !ok {
		return nil, false
	}
	if neg {
		return nil, false
	}
	return v, true
}

func getBit(b []byte, i int) byte { return (b[i/8] >> (7 - i%8)) & 1 }

func setBit(b []byte, i int, v byte) {
	if v != 0 {
		b[i/8] |= 1 << (7 - i%8)
	} else {
		b[i/8] &^= 1 << (7 - i%8)
	}
}
