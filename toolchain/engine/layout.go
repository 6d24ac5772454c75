package engine

// The packet header vector (PHV) layout. Every header instance (packet
// headers and metadata alike) gets a run of 64-bit words for its fields of
// at most 64 bits and a run of bytes for wider and variable-length fields.
// A field reference compiles to an index into those arrays, so reading a
// field at run time is one slice access; nothing is looked up by name.

import (
	"encoding/json"
	"fmt"
	"math/big"
)

type fieldDef struct {
	name   string
	idx    int // position in the header type
	bitOff int // bit offset in the header (meaningful when the type has no varbit)
	width  int // bits; varbit: the maximum width
	signed bool
	varbit bool
	narrow bool // width <= 64 and fixed: stored in one word
	slot   int  // narrow: word index within the header's words
	woff   int  // wide/varbit: byte offset within the header's wide bytes
	wlen   int  // wide/varbit: bytes
}

type headerType struct {
	name      string
	id        int
	fields    []fieldDef
	byName    map[string]int
	nwords    int
	nwide     int
	fixedBits int // sum of fixed-width fields
	vlField   int // index of the varbit field, -1 if none
	maxBytes  int // max_length (bytes) when the type has a varbit field
	lengthExp *jsonExpr
	// plan extracts a fixed-size header with one 64-bit load per field
	// (nil for headers with a varbit field or fields wider than 56 bits
	// at an unaligned offset).
	plan []extractStep
	// pack deparses the header (same conditions as plan, header bits a
	// multiple of 8); nil otherwise.
	pack *packPlan
}

type extractStep struct {
	slot    int32 // word within the header
	byteOff int32 // first byte of the field
	shl     uint8 // shift left to drop leading bits
	shr     uint8 // then shift right to right-align
}

type headerInst struct {
	name     string
	id       int
	typ      *headerType
	metadata bool
	wordBase int
	wideBase int
	union    int // header union instance id, -1 if none
	stack    int // header stack id, -1 if none
	stackPos int
	hidden   bool // engine-made sink for out-of-range stack accesses
}

type headerStack struct {
	name    string
	id      int
	typ     *headerType
	headers []int // header ids, element 0 first
	sink    int   // hidden header id used for out-of-range indices
}

type headerUnion struct {
	name    string
	id      int
	headers []int // member header ids, in declaration order
	members map[string]int
	ustack  int // union stack id, -1 if none
}

type unionStack struct {
	name   string
	id     int
	unions []int // union ids, element 0 first
}

// layout is the PHV shape of one pipeline.
type layout struct {
	types     []*headerType
	typeByNm  map[string]*headerType
	headers   []*headerInst
	hdrByName map[string]int
	stacks    []*headerStack
	stkByName map[string]int
	unions    []*headerUnion
	unByName  map[string]int
	ustacks   []*unionStack
	ustByName map[string]int
	aliases   map[string][2]string

	nwords int
	nwide  int
	// metaWords/metaWide list the word and byte ranges of metadata headers,
	// zeroed by reset_metadata.
	metaHeaders []int
	sinks       []int // hidden headers absorbing out-of-range stack accesses
	// metadata word and byte ranges (merged runs), and the validity of
	// every header for a fresh packet (metadata valid, headers not)
	metaWords [][2]int
	metaWide  [][2]int
	// stateInit: every header's state for a fresh packet (metadata valid,
	// nothing extracted)
	stateInit []hdrState
	maxWidth  int // widest field, for big-number shift caps
}

// fieldRef is a statically resolved field: header instance + field index.
type fieldRef struct {
	hdr int
	fld int
}

func (l *layout) field(r fieldRef) *fieldDef { return &l.headers[r.hdr].typ.fields[r.fld] }

// word returns the PHV word index of a narrow field.
func (l *layout) word(r fieldRef) int {
	h := l.headers[r.hdr]
	return h.wordBase + h.typ.fields[r.fld].slot
}

// wideAt returns the PHV byte offset of a wide field.
func (l *layout) wideAt(r fieldRef) int {
	h := l.headers[r.hdr]
	return h.wideBase + h.typ.fields[r.fld].woff
}

func buildLayout(p *jProgram) (*layout, error) {
	l := &layout{
		typeByNm:  map[string]*headerType{},
		hdrByName: map[string]int{},
		stkByName: map[string]int{},
		unByName:  map[string]int{},
		ustByName: map[string]int{},
		aliases:   map[string][2]string{},
	}
	for _, jt := range p.HeaderTypes {
		ht := &headerType{name: jt.Name, id: jt.ID, byName: map[string]int{}, vlField: -1}
		for i, f := range jt.Fields {
			if len(f) < 2 {
				return nil, fmt.Errorf("header type %s: bad field %v", jt.Name, f)
			}
			name, ok := f[0].(string)
			if !ok {
				return nil, fmt.Errorf("header type %s: bad field name %v", jt.Name, f[0])
			}
			fd := fieldDef{name: name}
			switch w := f[1].(type) {
			case float64:
				fd.width = int(w)
				if fd.width < 0 || fd.width > 1<<16 {
					return nil, fmt.Errorf("header type %s: field %s has width %d", jt.Name, name, fd.width)
				}
			case string:
				if w != "*" {
					return nil, fmt.Errorf("header type %s: field %s has width %q", jt.Name, name, w)
				}
				if ht.vlField >= 0 {
					return nil, fmt.Errorf("header type %s has more than one variable-length field", jt.Name)
				}
				fd.varbit = true
				ht.vlField = i
			default:
				return nil, fmt.Errorf("header type %s: field %s has a bad width", jt.Name, name)
			}
			if len(f) >= 3 {
				if s, ok := f[2].(bool); ok {
					fd.signed = s
				}
			}
			ht.byName[name] = i
			ht.fields = append(ht.fields, fd)
		}
		for i := range ht.fields {
			ht.fields[i].idx = i
			ht.fields[i].bitOff = ht.fixedBits
			if !ht.fields[i].varbit {
				ht.fixedBits += ht.fields[i].width
			}
		}
		if ht.vlField >= 0 {
			if jt.MaxLength != nil {
				ht.maxBytes = *jt.MaxLength
			}
			maxBits := ht.maxBytes*8 - ht.fixedBits
			if maxBits <= 0 {
				// No usable max_length: allow a generous default so that
				// extraction still works (BMv2 would reject such JSON).
				maxBits = 8 * 1024 * 8
			}
			ht.fields[ht.vlField].width = maxBits
			if len(jt.LengthExp) > 0 && string(jt.LengthExp) != "null" {
				e, err := parseTV(jt.LengthExp)
				if err != nil {
					return nil, fmt.Errorf("header type %s length_exp: %v", jt.Name, err)
				}
				ht.lengthExp = e
			}
		}
		for i := range ht.fields {
			fd := &ht.fields[i]
			if fd.width > l.maxWidth {
				l.maxWidth = fd.width
			}
			if !fd.varbit && fd.width <= 64 {
				fd.narrow = true
				fd.slot = ht.nwords
				ht.nwords++
			} else {
				fd.woff = ht.nwide
				fd.wlen = (fd.width + 7) / 8
				ht.nwide += fd.wlen
			}
		}
		ht.plan = makePlan(ht)
		if _, dup := l.typeByNm[ht.name]; dup {
			return nil, fmt.Errorf("duplicate header type %s", ht.name)
		}
		l.typeByNm[ht.name] = ht
		l.types = append(l.types, ht)
	}

	// Header instances are indexed by their JSON id, which p4c numbers
	// densely from 0; we index by position and map ids.
	idToIdx := map[int]int{}
	for _, jh := range p.Headers {
		ht, ok := l.typeByNm[jh.HeaderType]
		if !ok {
			return nil, fmt.Errorf("header %s: unknown header type %s", jh.Name, jh.HeaderType)
		}
		if _, dup := l.hdrByName[jh.Name]; dup {
			return nil, fmt.Errorf("duplicate header %s", jh.Name)
		}
		idx := len(l.headers)
		idToIdx[jh.ID] = idx
		l.addHeader(&headerInst{name: jh.Name, id: idx, typ: ht, metadata: jh.Metadata, union: -1, stack: -1})
	}
	for _, js := range p.HeaderStacks {
		ht, ok := l.typeByNm[js.HeaderType]
		if !ok {
			return nil, fmt.Errorf("header stack %s: unknown header type %s", js.Name, js.HeaderType)
		}
		st := &headerStack{name: js.Name, id: len(l.stacks), typ: ht}
		for pos, hid := range js.HeaderIDs {
			idx, ok := idToIdx[hid]
			if !ok {
				return nil, fmt.Errorf("header stack %s: unknown header id %d", js.Name, hid)
			}
			st.headers = append(st.headers, idx)
			l.headers[idx].stack = st.id
			l.headers[idx].stackPos = pos
		}
		sink := &headerInst{name: js.Name + "$sink", id: len(l.headers), typ: ht, union: -1, stack: -1, hidden: true}
		l.addHeader(sink)
		st.sink = sink.id
		l.sinks = append(l.sinks, sink.id)
		l.stkByName[st.name] = st.id
		l.stacks = append(l.stacks, st)
	}
	unionTypes := map[string][]string{}
	for _, raw := range p.HeaderUnionTypes {
		var ut struct {
			Name    string  `json:"name"`
			Headers [][]any `json:"headers"`
		}
		if err := json.Unmarshal(raw, &ut); err != nil {
			return nil, fmt.Errorf("bad header_union_types entry: %v", err)
		}
		for _, h := range ut.Headers {
			if len(h) > 0 {
				if s, ok := h[0].(string); ok {
					unionTypes[ut.Name] = append(unionTypes[ut.Name], s)
				}
			}
		}
	}
	for _, ju := range p.HeaderUnions {
		un := &headerUnion{name: ju.Name, id: len(l.unions), members: map[string]int{}, ustack: -1}
		names := unionTypes[ju.UnionType]
		for i, hid := range ju.HeaderIDs {
			idx, ok := idToIdx[hid]
			if !ok {
				return nil, fmt.Errorf("header union %s: unknown header id %d", ju.Name, hid)
			}
			un.headers = append(un.headers, idx)
			l.headers[idx].union = un.id
			if i < len(names) {
				un.members[names[i]] = i
			}
		}
		l.unByName[un.name] = un.id
		l.unions = append(l.unions, un)
	}
	for _, jus := range p.HeaderUnionStacks {
		us := &unionStack{name: jus.Name, id: len(l.ustacks)}
		for _, uid := range jus.HeaderUnionIDs {
			if uid < 0 || uid >= len(p.HeaderUnions) {
				return nil, fmt.Errorf("header union stack %s: unknown union id %d", jus.Name, uid)
			}
			// Union ids are positions in header_unions for p4c output.
			found := -1
			for i, ju := range p.HeaderUnions {
				if ju.ID == uid {
					found = i
				}
			}
			if found < 0 {
				return nil, fmt.Errorf("header union stack %s: unknown union id %d", jus.Name, uid)
			}
			us.unions = append(us.unions, found)
			l.unions[found].ustack = us.id
		}
		l.ustByName[us.name] = us.id
		l.ustacks = append(l.ustacks, us)
	}
	l.stateInit = make([]hdrState, len(l.headers))
	for i := range l.stateInit {
		l.stateInit[i].hoff = -1
	}
	for _, hid := range l.metaHeaders {
		h := l.headers[hid]
		l.stateInit[hid].valid = true
		l.metaWords = addRange(l.metaWords, h.wordBase, h.wordBase+h.typ.nwords)
		l.metaWide = addRange(l.metaWide, h.wideBase, h.wideBase+h.typ.nwide)
	}
	for _, a := range p.FieldAliases {
		if len(a) != 2 {
			continue
		}
		from, ok := a[0].(string)
		to, ok2 := a[1].([]any)
		if !ok || !ok2 || len(to) != 2 {
			continue
		}
		h, _ := to[0].(string)
		f, _ := to[1].(string)
		l.aliases[from] = [2]string{h, f}
	}
	return l, nil
}

func (l *layout) addHeader(h *headerInst) {
	h.wordBase = l.nwords
	h.wideBase = l.nwide
	l.nwords += h.typ.nwords
	l.nwide += h.typ.nwide
	l.hdrByName[h.name] = h.id
	l.headers = append(l.headers, h)
	if h.metadata {
		l.metaHeaders = append(l.metaHeaders, h.id)
	}
}

// lookupField resolves "header.field" (also through field aliases).
func (l *layout) lookupField(hdr, fld string) (fieldRef, bool) {
	if h, ok := l.hdrByName[hdr]; ok {
		if fld == "$valid$" {
			return fieldRef{hdr: h, fld: -1}, true
		}
		if f, ok := l.headers[h].typ.byName[fld]; ok {
			return fieldRef{hdr: h, fld: f}, true
		}
	}
	if a, ok := l.aliases[hdr+"."+fld]; ok {
		return l.lookupField(a[0], a[1])
	}
	return fieldRef{}, false
}

// bigPow2 returns 2^n (shared, never mutated).
func bigPow2(n int) *big.Int { return new(big.Int).Lsh(big.NewInt(1), uint(n)) }

func makePlan(ht *headerType) []extractStep {
	if ht.vlField >= 0 {
		return nil
	}
	var plan []extractStep
	off := 0
	for _, fd := range ht.fields {
		if !fd.narrow {
			return nil
		}
		s := off & 7
		if s+fd.width > 64 || fd.width == 0 {
			return nil
		}
		plan = append(plan, extractStep{slot: int32(fd.slot), byteOff: int32(off >> 3), shl: uint8(s), shr: uint8(64 - fd.width)})
		off += fd.width
	}
	return plan
}

// addRange appends [lo, hi) to runs, merging with the last run when they
// touch (headers are laid out in order, so metadata is usually one run).
func addRange(runs [][2]int, lo, hi int) [][2]int {
	if lo == hi {
		return runs
	}
	if n := len(runs); n > 0 && runs[n-1][1] == lo {
		runs[n-1][1] = hi
		return runs
	}
	return append(runs, [2]int{lo, hi})
}

// dirtyBit is the field's bit in Packet.dmask (all bits for fields past
// the 64th of a header: the whole header is then rewritten).
func (fd *fieldDef) dirtyBit() uint64 {
	if fd.idx < 64 {
		return 1 << uint(fd.idx)
	}
	return ^uint64(0)
}
