package engine

// The parser, compiled from BMv2's parse states, with BMv2's error
// behaviour (src/bm_sim/parser.cpp): an error stops parsing, the error code
// goes to standard_metadata.parser_error, headers extracted so far stay
// valid, and the payload starts after the last byte consumed. A select
// with no matching case and no default accepts (BMv2 does not raise
// NoMatch by itself).

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
)

// Core parser error names, with BMv2's default numbering used when the
// program's JSON does not list them.
var coreErrors = []string{"NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"}

const (
	errNoError = iota
	errPacketTooShort
	errNoMatch
	errStackOutOfBounds
	errHeaderTooShort
	errParserTimeout
	errParserInvalidArgument
)

// maxParserStates bounds the states one packet may visit; BMv2 has no
// bound (a looping parser hangs it), we report ParserTimeout instead.
const maxParserStates = 4096

// parserOp returns 0 on success or an error value for parser_error + 1
// (so that an error value of 0 can still be signalled).
type parserOp func(p *Packet) uint64

type selPart struct {
	slot   int // PHV word of a plain narrow field, -1 otherwise
	width  int
	read   u64Fn               // narrow field
	wide   func(p *Packet) int // wide field byte offset
	nbytes int
	la     bool // lookahead
	laOff  int  // bit offset
}

type selCase struct {
	v64, m64 uint64 // key <= 64 bits
	vb, mb   []byte // wider keys (right-aligned, keyBytes long)
	vset     *valueSet
	next     *parseState
	hasMask  bool
}

type parseState struct {
	name     string
	ops      []parserOp
	parts    []selPart
	keyBits  int
	keyBytes int
	laBytes  int // bytes lookahead in the key needs
	cases    []selCase
	def      *parseState
	hasKey   bool
	mayStop  bool // some op may set Packet.exit or failed
}

type parser struct {
	name  string
	init  *parseState
	errs  [7]uint64 // core error values in this program
	names map[string]*parseState
}

// hdrExtract describes how to extract one header type.
type hdrExtract struct {
	typ *headerType
}

func (pl *Pipeline) coreErrorValue(errs [][]any, k int) uint64 {
	name := coreErrors[k]
	for _, e := range errs {
		if len(e) == 2 {
			if n, ok := e[0].(string); ok && n == name {
				if v, ok := e[1].(float64); ok {
					return uint64(v)
				}
			}
		}
	}
	return uint64(k)
}

func (c *closureBuilder) compileParser(jp *jParser, errs [][]any) (*parser, error) {
	ps := &parser{name: jp.Name, names: map[string]*parseState{}}
	for k := range ps.errs {
		ps.errs[k] = c.pl.coreErrorValue(errs, k)
	}
	for i := range jp.ParseStates {
		js := &jp.ParseStates[i]
		ps.names[js.Name] = &parseState{name: js.Name}
	}
	for i := range jp.ParseStates {
		js := &jp.ParseStates[i]
		st := ps.names[js.Name]
		c.where = fmt.Sprintf("parser %s state %s", jp.Name, js.Name)
		for _, op := range js.ParserOps {
			o, err := c.parserOp(ps, op)
			if err != nil {
				return nil, err
			}
			st.ops = append(st.ops, o)
			// only a primitive (assert, assume) can end parsing early
			st.mayStop = st.mayStop || op.Op == "primitive" || c.pl.reference
		}
		if err := c.selectKey(st, js.TransitionKey); err != nil {
			return nil, err
		}
		for _, tr := range js.Transitions {
			var next *parseState
			if tr.NextState != nil {
				n, ok := ps.names[*tr.NextState]
				if !ok {
					return nil, c.errorf("unknown next state %s", *tr.NextState)
				}
				next = n
			}
			typ := tr.Type
			if typ == "" {
				// BMv2's older JSON (p4c-bm, P4_14): no type, the
				// value "default" or a hexstr, as BMv2 still reads it.
				var v string
				if json.Unmarshal(tr.Value, &v) == nil && v == "default" {
					typ = "default"
				} else {
					typ = "hexstr"
				}
			}
			switch typ {
			case "default":
				st.def = next
				// Cases after a default can never match.
				goto doneTransitions
			case "hexstr", "parse_vset":
				sc := selCase{next: next}
				var mask *big.Int
				if len(tr.Mask) > 0 && string(tr.Mask) != "null" {
					var ms string
					if err := json.Unmarshal(tr.Mask, &ms); err != nil {
						return nil, c.errorf("bad transition mask %s", string(tr.Mask))
					}
					m, err := parseHexstr(ms)
					if err != nil {
						return nil, c.errorf("%v", err)
					}
					mask = c.compress(st, m)
					sc.hasMask = true
				} else {
					mask = new(big.Int).Sub(bigPow2(st.keyBits), big.NewInt(1))
				}
				if typ == "parse_vset" {
					var name string
					if err := json.Unmarshal(tr.Value, &name); err != nil {
						return nil, c.errorf("bad value set reference %s", string(tr.Value))
					}
					vs, ok := c.pl.vsets.byName[name]
					if !ok {
						return nil, c.errorf("unknown value set %s", name)
					}
					sc.vset = vs
				} else {
					var vs string
					if err := json.Unmarshal(tr.Value, &vs); err != nil {
						return nil, c.errorf("bad transition value %s", string(tr.Value))
					}
					v, err := parseHexstr(vs)
					if err != nil {
						return nil, c.errorf("%v", err)
					}
					val := c.compress(st, v)
					val.And(val, mask)
					if st.keyBits <= 64 {
						sc.v64 = low64(val)
					} else {
						sc.vb = make([]byte, st.keyBytes)
						val.FillBytes(sc.vb)
					}
				}
				if st.keyBits <= 64 {
					sc.m64 = low64(mask)
				} else {
					sc.mb = make([]byte, st.keyBytes)
					mask.FillBytes(sc.mb)
				}
				st.cases = append(st.cases, sc)
			default:
				return nil, c.errorf("unsupported transition type %q", typ)
			}
		}
	doneTransitions:
	}
	c.where = ""
	init, ok := ps.names[jp.InitState]
	if !ok && jp.InitState != "" {
		return nil, fmt.Errorf("parser %s: unknown init state %s", jp.Name, jp.InitState)
	}
	ps.init = init
	return ps, nil
}

// compress turns a byte-padded transition value (each key part padded to
// whole bytes, as JSON_format.md specifies) into the concatenation of the
// parts' bits.
func (c *closureBuilder) compress(st *parseState, v *big.Int) *big.Int {
	out := new(big.Int)
	rest := new(big.Int).Set(v)
	shift := 0
	for i := len(st.parts) - 1; i >= 0; i-- {
		pt := st.parts[i]
		nb := (pt.width + 7) / 8
		part := new(big.Int).And(rest, new(big.Int).Sub(bigPow2(pt.width), big.NewInt(1)))
		part.Lsh(part, uint(shift))
		out.Or(out, part)
		rest.Rsh(rest, uint(nb*8))
		shift += pt.width
	}
	return out
}

func (c *closureBuilder) selectKey(st *parseState, raws []json.RawMessage) error {
	keys, err := parseTVs(raws)
	if err != nil {
		return c.errorf("%v", err)
	}
	for _, k := range keys {
		if k == nil {
			continue
		}
		st.hasKey = true
		sp := selPart{slot: -1}
		switch k.kind {
		case "field":
			r, ok := c.lay.lookupField(k.names[0], k.names[1])
			if !ok {
				return c.errorf("unknown field %s.%s in select key", k.names[0], k.names[1])
			}
			d := c.fieldRead(r)
			if r.fld < 0 {
				sp.width = 1
				sp.read = d.mod()
			} else {
				fd := c.lay.field(r)
				sp.width = fd.width
				if fd.narrow {
					slot := c.lay.word(r)
					c.markRead(slot)
					sp.slot = slot
					sp.read = func(p *Packet) uint64 { return p.words[slot] }
				} else {
					off := c.lay.wideAt(r)
					sp.wide = func(*Packet) int { return off }
					sp.nbytes = fd.wlen
				}
			}
		case "stack_field":
			h, ht, err := c.stackLast(k.names[0])
			if err != nil {
				return err
			}
			fi, ok := ht.byName[k.names[1]]
			if !ok {
				return c.errorf("stack %s has no field %s", k.names[0], k.names[1])
			}
			fd := &ht.fields[fi]
			sp.width = fd.width
			hs := c.lay.headers
			if fd.narrow {
				sp.read = func(p *Packet) uint64 { return p.words[hs[h(p)].wordBase+fd.slot] }
			} else {
				sp.wide = func(p *Packet) int { return hs[h(p)].wideBase + fd.woff }
				sp.nbytes = fd.wlen
			}
		case "union_stack_field", "header_union_stack_field":
			if len(k.names) != 3 {
				return c.errorf("bad union_stack_field %v", k.names)
			}
			s, ok := c.lay.ustByName[k.names[0]]
			if !ok {
				return c.errorf("unknown header union stack %s", k.names[0])
			}
			us := c.lay.ustacks[s]
			un0 := c.lay.unions[us.unions[0]]
			mi, ok := un0.members[k.names[1]]
			if !ok {
				return c.errorf("union stack %s has no member %s", k.names[0], k.names[1])
			}
			ht := c.lay.headers[un0.headers[mi]].typ
			fi, ok := ht.byName[k.names[2]]
			if !ok {
				return c.errorf("header %s has no field %s", ht.name, k.names[2])
			}
			fd := &ht.fields[fi]
			sp.width = fd.width
			hs, uns, sid := c.lay.headers, c.lay.unions, us.id
			hdr := func(p *Packet) int {
				n := p.ustNxt[sid]
				if n <= 0 {
					n = 1
				}
				return uns[us.unions[n-1]].headers[mi]
			}
			if fd.narrow {
				sp.read = func(p *Packet) uint64 { return p.words[hs[hdr(p)].wordBase+fd.slot] }
			} else {
				sp.wide = func(p *Packet) int { return hs[hdr(p)].wideBase + fd.woff }
				sp.nbytes = fd.wlen
			}
		case "lookahead":
			sp.la = true
			sp.laOff = k.idx
			sp.width = k.width
			need := k.idx/8 + (k.width+7)/8
			if need > st.laBytes {
				st.laBytes = need
			}
		default:
			return c.errorf("unsupported select key type %q", k.kind)
		}
		st.parts = append(st.parts, sp)
		st.keyBits += sp.width
	}
	st.keyBytes = (st.keyBits + 7) / 8
	if st.keyBytes > c.pl.maxKeyBytes {
		c.pl.maxKeyBytes = st.keyBytes
	}
	return nil
}

// lazyExtract is how the parser's fast path extracts one header instance.
// Fields no expression, key, select, field list, digest or checksum
// verification reads are not loaded with the header (Load decides,
// finishLazy): the in-place deparser rewrites only changed fields and
// Internet checksums are summed from the header's bytes, so for a
// forwarding program most fields are never needed in the PHV. Anything
// that reads a whole header's PHV (copies, the full deparser, checksums
// and hashes over the fields) first calls Packet.materialize, which loads
// them from the header's bytes, still as the parser found them.
type lazyExtract struct {
	eager []extractStep // with the header
	rest  []extractStep // by materialize (field index = slot: all narrow)
	lazy  bool          // rest is not empty
}

func (pl *Pipeline) lazyExtractOf(h *headerInst) *lazyExtract {
	if pl.lazyEx[h.id] == nil {
		pl.lazyEx[h.id] = &lazyExtract{eager: h.typ.plan}
	}
	return pl.lazyEx[h.id]
}

// finishLazy splits the extraction plans once every reader of the PHV is
// compiled (readWords is complete).
func (pl *Pipeline) finishLazy() {
	for hid, ex := range pl.lazyEx {
		if ex == nil {
			continue
		}
		h := pl.lay.headers[hid]
		// Stack elements are read through run-time indices, which readWords
		// cannot see.
		if pl.reference || len(h.typ.fields) > 64 || h.stack >= 0 || h.union >= 0 || h.hidden || h.metadata {
			continue
		}
		var eager, rest []extractStep
		for _, st := range h.typ.plan {
			if pl.readWords[h.wordBase+int(st.slot)] || int(st.slot) >= len(h.typ.fields) || h.typ.fields[st.slot].slot != int(st.slot) {
				eager = append(eager, st)
			} else {
				rest = append(rest, st)
			}
		}
		if len(rest) > 0 {
			ex.eager, ex.rest, ex.lazy = eager, rest, true
		}
	}
}

// materialize loads the fields of header h the parser left in the buffer
// (lazyExtract), except those changed since.
func (p *Packet) materialize(h int) {
	if !p.hs[h].lazy {
		return
	}
	p.hs[h].lazy = false
	off := int(p.hs[h].hoff)
	if off < 0 {
		return
	}
	hi := p.pl.lay.headers[h]
	data := p.buf[off:]
	dirty := p.hs[h].dmask
	for _, st := range p.pl.lazyEx[h].rest {
		if dirty&(1<<(uint(st.slot)&63)) == 0 {
			p.words[hi.wordBase+int(st.slot)] = binary.BigEndian.Uint64(data[st.byteOff:]) << (st.shl & 63) >> (st.shr & 63)
		}
	}
}

// extractInto reads header h's fields from data (starting at byte 0),
// with the varbit field (if any) vlBits long. It returns the bytes used.
func extractInto(p *Packet, h *headerInst, data []byte, vlBits int) int {
	nb := (h.typ.fixedBits + 7) / 8
	if plan := h.typ.plan; plan != nil && len(data) >= nb+8 {
		data = data[:nb+8]
		words := p.words[h.wordBase : h.wordBase+h.typ.nwords]
		for _, st := range plan {
			v := binary.BigEndian.Uint64(data[st.byteOff:])
			words[st.slot] = v << (st.shl & 63) >> (st.shr & 63)
		}
		return nb
	}
	off := 0
	for i := range h.typ.fields {
		fd := &h.typ.fields[i]
		if fd.narrow {
			if fd.width > 0 {
				p.words[h.wordBase+fd.slot] = readBits(data, off, fd.width)
			}
			off += fd.width
			continue
		}
		w := fd.width
		if fd.varbit {
			w = vlBits
		}
		dst := p.wide[h.wideBase+fd.woff : h.wideBase+fd.woff+fd.wlen]
		clear(dst)
		if w > 0 {
			copyBits(dst, fd.wlen*8-w, data, off, w)
		}
		off += w
	}
	if h.typ.vlField >= 0 {
		p.hs[h.id].vlen = int32(vlBits)
	}
	return (off + 7) / 8
}

// parserOps are the parser operations the engine runs, by BMv2 JSON name
// (read-only after package initialization), as primitives are registered.
var parserOps = map[string]func(c *closureBuilder, ps *parser, op jParserOp, params []*jsonExpr) (parserOp, error){
	"extract":    (*closureBuilder).parseOpExtract,
	"extract_VL": (*closureBuilder).parseOpExtract,
	"set":        (*closureBuilder).parseOpSet,
	"verify":     (*closureBuilder).parseOpVerify,
	"advance":    (*closureBuilder).parseOpAdvance,
	"shift":      (*closureBuilder).parseOpAdvance,
	"primitive":  (*closureBuilder).parseOpPrimitive,
}

func (c *closureBuilder) parserOp(ps *parser, op jParserOp) (parserOp, error) {
	params, err := parseTVs(op.Parameters)
	if err != nil {
		return nil, c.errorf("%v", err)
	}
	build, ok := parserOps[op.Op]
	if !ok {
		return nil, c.errorf("unsupported parser op %q", op.Op)
	}
	return build(c, ps, op, params)
}

// errorValue is the parser_error value (plus one: 0 is "no error") of the
// error numbered k among the architecture's errors.
func (ps *parser) errorValue(k int) uint64 { return ps.errs[k] + 1 }

// parseOpExtract is extract and extract_VL: a header (or the next element of a
// stack or union stack) from the packet at the cursor.
func (c *closureBuilder) parseOpExtract(ps *parser, op jParserOp, params []*jsonExpr) (parserOp, error) {
	E := ps.errorValue
	if len(params) < 1 {
		return nil, c.errorf("%s without a target", op.Op)
	}
	var lenFn u64Fn
	vl := op.Op == "extract_VL"
	if vl {
		if len(params) != 2 {
			return nil, c.errorf("extract_VL needs a length expression")
		}
		d, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		lenFn = c.exactIndex(d)
	}
	t := params[0]
	// target header chooser
	var pick func(p *Packet) (int, bool)
	var ht *headerType
	switch t.kind {
	case "regular", "header":
		h, ok := c.lay.hdrByName[t.name]
		if !ok {
			return nil, c.errorf("extract: unknown header %s", t.name)
		}
		ht = c.lay.headers[h].typ
		pick = func(*Packet) (int, bool) { return h, true }
	case "stack", "header_stack":
		s, ok := c.lay.stkByName[t.name]
		if !ok {
			return nil, c.errorf("extract: unknown header stack %s", t.name)
		}
		st := c.lay.stacks[s]
		ht = st.typ
		pick = func(p *Packet) (int, bool) {
			n := p.stkNxt[st.id]
			if int(n) >= len(st.headers) {
				return 0, false
			}
			p.stkNxt[st.id] = n + 1
			return st.headers[n], true
		}
	case "union_stack":
		if len(t.names) != 2 {
			return nil, c.errorf("extract: bad union_stack %v", t.names)
		}
		s, ok := c.lay.ustByName[t.names[0]]
		if !ok {
			return nil, c.errorf("extract: unknown header union stack %s", t.names[0])
		}
		us := c.lay.ustacks[s]
		un0 := c.lay.unions[us.unions[0]]
		mi, ok := un0.members[t.names[1]]
		if !ok {
			return nil, c.errorf("extract: union stack %s has no member %s", t.names[0], t.names[1])
		}
		ht = c.lay.headers[un0.headers[mi]].typ
		uns := c.lay.unions
		pick = func(p *Packet) (int, bool) {
			n := p.ustNxt[us.id]
			if int(n) >= len(us.unions) {
				return 0, false
			}
			p.ustNxt[us.id] = n + 1
			return uns[us.unions[n]].headers[mi], true
		}
	default:
		return nil, c.errorf("extract: unsupported target %q", t.kind)
	}
	if !vl && ht.vlField >= 0 && ht.lengthExp != nil {
		// P4_14 style: the header type carries its varbit length.
		d, err := c.data(ht.lengthExp)
		if err != nil {
			return nil, err
		}
		lf := c.exactIndex(d)
		lenFn = func(p *Packet) uint64 { return lf(p) * 8 }
		vl = true
	}
	hs := c.lay.headers
	fixedBytes := (ht.fixedBits + 7) / 8
	maxBytes := ht.maxBytes
	if !vl && (t.kind == "regular" || t.kind == "header") && ht.plan != nil && c.lay.headers[c.lay.hdrByName[t.name]].union < 0 {
		// The common case, specialised: a fixed header, not in a
		// union or stack.
		hi := c.lay.headers[c.lay.hdrByName[t.name]]
		h := hi.id
		wb, we := hi.wordBase, hi.wordBase+ht.nwords
		tooShort := E(errPacketTooShort)
		ex := c.pl.lazyExtractOf(hi)
		small := fixedBytes <= 64
		return func(p *Packet) uint64 {
			cur := p.cur
			if p.end-cur < fixedBytes {
				return tooShort
			}
			hs := &p.hs[h]
			hs.hoff, hs.valid, hs.dmask = int32(cur), true, 0
			p.cur = cur + fixedBytes
			if w := window(p.buf, cur); w != nil && small {
				words := p.words[wb:we]
				for _, st := range ex.eager {
					v := binary.BigEndian.Uint64(w[st.byteOff&(windowBytes-9):])
					words[st.slot] = v << (st.shl & 63) >> (st.shr & 63)
				}
				hs.lazy = ex.lazy
				return 0
			}
			extractInto(p, hi, p.buf[cur:], 0)
			hs.lazy = false
			return 0
		}, nil
	}
	if !vl {
		return func(p *Packet) uint64 {
			if p.end-p.cur < fixedBytes {
				return E(errPacketTooShort)
			}
			h, ok := pick(p)
			if !ok {
				return E(errStackOutOfBounds)
			}
			extractInto(p, hs[h], p.buf[p.cur:], 0)
			p.hs[h].lazy = false
			p.setValid(h)
			p.hs[h].hoff = int32(p.cur)
			p.hs[h].dmask = 0
			p.cur += fixedBytes
			return 0
		}, nil
	}
	return func(p *Packet) uint64 {
		nbits := lenFn(p)
		if nbits%8 != 0 {
			return E(errParserInvalidArgument)
		}
		if nbits > 1<<30 {
			return E(errPacketTooShort)
		}
		n := fixedBytes + int(nbits/8)
		if p.end-p.cur < n {
			return E(errPacketTooShort)
		}
		if maxBytes != 0 && maxBytes < n {
			return E(errHeaderTooShort)
		}
		h, ok := pick(p)
		if !ok {
			return E(errStackOutOfBounds)
		}
		if int(nbits) > ht.fields[ht.vlField].width {
			return E(errHeaderTooShort)
		}
		extractInto(p, hs[h], p.buf[p.cur:], int(nbits))
		p.hs[h].lazy = false
		p.setValid(h)
		p.hs[h].hoff = -1 // varbit headers are always deparsed in full
		p.cur += n
		return 0
	}, nil
}

// parseOpSet assigns a field, from an expression or from a lookahead of the
// packet at the cursor.
func (c *closureBuilder) parseOpSet(ps *parser, op jParserOp, params []*jsonExpr) (parserOp, error) {
	E := ps.errorValue
	if len(params) != 2 {
		return nil, c.errorf("set needs two parameters")
	}
	dst, err := c.lvalue(params[0])
	if err != nil {
		return nil, err
	}
	if params[1].kind == "lookahead" {
		off, w := params[1].idx, params[1].width
		need := off/8 + (w+7)/8
		la := &dexpr{info: vinfo{bits: w}, fieldSlot: -1}
		// The lookahead value is read by a closure that needs the
		// parser cursor; we stash it in p.keyU[0] before assigning.
		if w <= 64 {
			la.mod = func() u64Fn { return func(p *Packet) uint64 { return p.laVal } }
			la.big = func() bigFn {
				s := c.newBig()
				return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(p.laVal) }
			}
			asg := c.assign(dst, la)
			return func(p *Packet) uint64 {
				if p.end-p.cur < need {
					return E(errPacketTooShort)
				}
				p.laVal = readBits(p.buf[p.cur:], off, w)
				asg(p)
				return 0
			}, nil
		}
		nb := (w + 7) / 8
		la.big = func() bigFn {
			s := c.newBig()
			return func(p *Packet) *big.Int { return p.bigs[s].SetBytes(p.laBuf[:nb]) }
		}
		la.mod = func() u64Fn { return bigToMod(la.big()) }
		asg := c.assign(dst, la)
		return func(p *Packet) uint64 {
			if p.end-p.cur < need {
				return E(errPacketTooShort)
			}
			if cap(p.laBuf) < nb {
				p.laBuf = make([]byte, nb)
			}
			p.laBuf = p.laBuf[:nb]
			clear(p.laBuf)
			copyBits(p.laBuf, nb*8-w, p.buf[p.cur:], off, w)
			asg(p)
			return 0
		}, nil
	}
	src, err := c.data(params[1])
	if err != nil {
		return nil, err
	}
	asg := c.assign(dst, src)
	return func(p *Packet) uint64 { asg(p); return 0 }, nil
}

// parseOpVerify ends parsing with the given error when its condition is false.
func (c *closureBuilder) parseOpVerify(ps *parser, op jParserOp, params []*jsonExpr) (parserOp, error) {
	if len(params) != 2 {
		return nil, c.errorf("verify needs two parameters")
	}
	cond, err := c.boolean(params[0])
	if err != nil {
		return nil, err
	}
	ef, err := c.indexValue(params[1])
	if err != nil {
		return nil, err
	}
	return func(p *Packet) uint64 {
		if !cond(p) {
			return ef(p) + 1
		}
		return 0
	}, nil
}

// parseOpAdvance is advance (in bits) and P4_14's shift (in bytes): the
// cursor moves on.
func (c *closureBuilder) parseOpAdvance(ps *parser, op jParserOp, params []*jsonExpr) (parserOp, error) {
	E := ps.errorValue
	if len(params) != 1 {
		return nil, c.errorf("%s needs one parameter", op.Op)
	}
	nf, err := c.indexValue(params[0])
	if err != nil {
		return nil, err
	}
	bitsUnit := op.Op == "advance"
	return func(p *Packet) uint64 {
		n := nf(p)
		if bitsUnit {
			if n%8 != 0 {
				return E(errParserInvalidArgument)
			}
			n /= 8
		}
		if n > uint64(p.end-p.cur) {
			return E(errPacketTooShort)
		}
		p.cur += int(n)
		return 0
	}, nil
}

// parseOpPrimitive runs an action primitive inside a parser state (p4c's
// lowering of assignments and method calls there).
func (c *closureBuilder) parseOpPrimitive(ps *parser, op jParserOp, params []*jsonExpr) (parserOp, error) {
	if len(op.Parameters) != 1 {
		return nil, c.errorf("primitive op needs one parameter")
	}
	var prim jPrimitive
	if err := json.Unmarshal(op.Parameters[0], &prim); err != nil {
		return nil, c.errorf("bad primitive: %v", err)
	}
	pp, err := parseTVs(prim.Parameters)
	if err != nil {
		return nil, c.errorf("%v", err)
	}
	pr, err := c.primitive(prim.Op, pp, 1)
	if err != nil {
		return nil, err
	}
	s := pr.stmt()
	regs := c.registersIn(prim.Op, pp)
	if len(regs) > 0 {
		r := regs[0]
		return func(p *Packet) uint64 { r.mu.Lock(); s(p); r.mu.Unlock(); return 0 }, nil
	}
	return func(p *Packet) uint64 { s(p); return 0 }, nil
}

// run parses the packet bytes buf[p.start:p.end]. It returns the value for
// parser_error (0 = NoError as numbered by the program) and sets p.payload.
func (ps *parser) run(p *Packet) uint64 {
	p.cur = p.start
	st := ps.init
	errVal := ps.errs[errNoError]
	for steps := 0; st != nil; steps++ {
		if steps >= maxParserStates {
			errVal = ps.errs[errParserTimeout]
			break
		}
		failed := false
		for _, op := range st.ops {
			if e := op(p); e != 0 {
				errVal = e - 1
				failed = true
				break
			}
			if st.mayStop && (p.exit || p.failed) {
				break
			}
		}
		if failed {
			break
		}
		if !st.hasKey {
			st = st.def
			continue
		}
		if p.end-p.cur < st.laBytes {
			errVal = ps.errs[errPacketTooShort]
			break
		}
		st = st.transition(p, p.cur)
	}
	p.payload = p.cur
	return errVal
}

func (st *parseState) transition(p *Packet, cur int) *parseState {
	if st.keyBits <= 64 {
		var k uint64
		if len(st.parts) == 1 && st.parts[0].slot >= 0 {
			k = p.words[st.parts[0].slot]
			goto match
		}
		for i := range st.parts {
			sp := &st.parts[i]
			var v uint64
			switch {
			case sp.la:
				v = readBits(p.buf[cur:], sp.laOff, sp.width)
			case sp.read != nil:
				v = sp.read(p)
			default:
				off := sp.wide(p)
				v = getUint(p.wide[off : off+sp.nbytes])
			}
			k = k<<uint(sp.width) | (v & mask64(sp.width))
		}
	match:
		for i := range st.cases {
			sc := &st.cases[i]
			if sc.vset != nil {
				for _, m := range sc.vset.members() {
					if k&sc.m64&m.m64 == m.v64&sc.m64 {
						return sc.next
					}
				}
				continue
			}
			if k&sc.m64 == sc.v64 {
				return sc.next
			}
		}
		return st.def
	}
	// wide key: build the right-aligned bit string in p.keyB
	n := st.keyBytes
	if cap(p.keyB) < n+8 {
		p.keyB = make([]byte, 0, 2*(n+8))
	}
	kb := p.keyB[:n+8]
	clear(kb)
	off := n*8 - st.keyBits
	for i := range st.parts {
		sp := &st.parts[i]
		switch {
		case sp.la:
			copyBits(kb, off, p.buf[cur:], sp.laOff, sp.width)
		case sp.read != nil:
			writeBits(kb, off, sp.width, sp.read(p))
		default:
			wo := sp.wide(p)
			copyBits(kb, off, p.wide[wo:wo+sp.nbytes], sp.nbytes*8-sp.width, sp.width)
		}
		off += sp.width
	}
	kb = kb[:n]
	for i := range st.cases {
		sc := &st.cases[i]
		if sc.vset != nil {
			for _, m := range sc.vset.members() {
				if maskedEqual3(kb, sc.mb, m.vb, m.mb) {
					return sc.next
				}
			}
			continue
		}
		ok := true
		for j := 0; j < n; j++ {
			if kb[j]&sc.mb[j] != sc.vb[j] {
				ok = false
				break
			}
		}
		if ok {
			return sc.next
		}
	}
	return st.def
}

// maskedEqual3 reports k & m1 & m2 == v & m1 (byte strings of equal length,
// v and m2 may be shorter: right-aligned).
func maskedEqual3(k, m1, v, m2 []byte) bool {
	n := len(k)
	for j := 0; j < n; j++ {
		var vb, mb byte
		if d := n - len(v); j >= d {
			vb = v[j-d]
		}
		mb = 0xff
		if m2 != nil {
			mb = 0
			if d := n - len(m2); j >= d {
				mb = m2[j-d]
			}
		}
		if k[j]&m1[j]&mb != vb&m1[j] {
			return false
		}
	}
	return true
}
