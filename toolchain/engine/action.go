package engine

// Actions: each JSON action becomes a slice of closures, one per primitive
// call. _jump/_jump_if_zero (p4c's lowering of if/else inside actions)
// return the index to continue at.

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// maxLoopIterations bounds backward jumps within one action execution.
const maxLoopIterations = 1 << 16

// stmt runs one primitive; it returns -1 to continue with the next one, or
// the index of the primitive to jump to.
type stmt func(p *Packet) int

// prim is a compiled primitive: a jump (_jump, _jump_if_zero) or a plain
// statement. An action without jumps runs its plain statements directly,
// one indirect call per primitive.
type prim struct {
	do   func(p *Packet)
	jump stmt
	stop bool // may end the action (exit, assert, assume)
}

// stmt returns the primitive as a statement of a body with jumps.
func (pr *prim) stmt() stmt {
	if pr.jump != nil {
		return pr.jump
	}
	f := pr.do
	return func(p *Packet) int { f(p); return -1 }
}

// actionData is the control-plane data of one action invocation.
type actionData struct {
	u64  []uint64 // parameters of at most 64 bits
	wide [][]byte // wider parameters (big-endian, exact width), nil otherwise
}

type action struct {
	name   string
	id     int
	idx    int // position in Pipeline.actions
	params []pipeline.ParamInfo
	body   []stmt
	// plain: the body when it has no jumps (then body is nil)
	plain []func(p *Packet)
	// stops: some primitive may end the action (exit, assert, assume)
	stops bool
	// registers the action touches, locked for the whole action so that a
	// read-modify-write is atomic against other packets (BMv2 semantics,
	// simple_switch.md "BMv2 register implementation notes").
	locks []*sync.Mutex
}

func (a *action) info() pipeline.ActionInfo {
	return pipeline.ActionInfo{Name: a.name, ID: a.id, Params: append([]pipeline.ParamInfo(nil), a.params...)}
}

func (a *action) run(p *Packet, ad *actionData) {
	p.ad = ad
	if a.body == nil && a.locks == nil {
		if !a.stops {
			for _, f := range a.plain {
				f(p)
			}
			return
		}
		for _, f := range a.plain {
			f(p)
			if p.exit || p.failed {
				return
			}
		}
		return
	}
	for _, m := range a.locks {
		m.Lock()
	}
	if a.body == nil {
		for _, f := range a.plain {
			f(p)
			if p.exit || p.failed {
				break
			}
		}
	}
	body := a.body
	steps := 0
	for pc := 0; pc < len(body); {
		j := body[pc](p)
		if p.exit || p.failed {
			break
		}
		if j >= 0 {
			// A backward jump is a loop (P4 for statements); bound it so a
			// packet can never hang the switch.
			if j <= pc {
				steps++
				if steps > maxLoopIterations {
					p.failed = true
					p.pl.logf("action %s: loop ran more than %d iterations: packet dropped", a.name, maxLoopIterations)
					break
				}
			}
			pc = j
		} else {
			pc++
		}
	}
	for i := len(a.locks) - 1; i >= 0; i-- {
		a.locks[i].Unlock()
	}
}

// makeActionData converts control-plane parameter bytes to action data.
func makeActionData(params []pipeline.ParamInfo, vals [][]byte) (*actionData, error) {
	if len(vals) != len(params) {
		return nil, errf(CodeInvalidArgument, "action takes %d parameters, got %d", len(params), len(vals))
	}
	ad := &actionData{u64: make([]uint64, len(params))}
	for i, pi := range params {
		v := vals[i]
		if !fitsWidth(v, pi.Bitwidth) {
			return nil, errf(CodeInvalidArgument, "value of parameter %s does not fit in %d bits", pi.Name, pi.Bitwidth)
		}
		if pi.Bitwidth <= 64 {
			b := v
			if len(b) > 8 {
				b = b[len(b)-8:]
			}
			ad.u64[i] = getUint(b)
		} else {
			if ad.wide == nil {
				ad.wide = make([][]byte, len(params))
			}
			ad.wide[i] = normBytes(v, (pi.Bitwidth+7)/8)
		}
	}
	return ad, nil
}

// exportActionData converts action data back to byte strings.
func exportActionData(params []pipeline.ParamInfo, ad *actionData) [][]byte {
	out := make([][]byte, len(params))
	for i, pi := range params {
		if pi.Bitwidth <= 64 {
			b := make([]byte, (pi.Bitwidth+7)/8)
			putUint(b, ad.u64[i])
			out[i] = b
		} else {
			out[i] = append([]byte(nil), ad.wide[i]...)
		}
	}
	return out
}

func (c *closureBuilder) compileAction(ja *jAction) (*action, error) {
	a := &action{name: ja.Name, id: ja.ID}
	for _, rd := range ja.RuntimeData {
		a.params = append(a.params, pipeline.ParamInfo{Name: rd.Name, Bitwidth: rd.Bitwidth})
	}
	c.params = a.params
	defer func() { c.params = nil }()
	regs := map[*registerArray]bool{}
	var prims []*prim
	for i, prim := range ja.Primitives {
		c.where = fmt.Sprintf("action %s, primitive %d (%s)", ja.Name, i, prim.Op)
		for _, raw := range prim.Parameters {
			if err := checkActionData(raw, false); err != nil {
				return nil, c.errorf("%v", err)
			}
		}
		params, err := parseTVs(prim.Parameters)
		if err != nil {
			return nil, c.errorf("%v", err)
		}
		for _, r := range c.registersIn(prim.Op, params) {
			regs[r] = true
		}
		pr, err := c.primitive(prim.Op, params, len(ja.Primitives))
		if err != nil {
			return nil, err
		}
		prims = append(prims, pr)
	}
	c.where = ""
	jumps := c.pl.reference
	for _, pr := range prims {
		jumps = jumps || pr.jump != nil
	}
	for _, pr := range prims {
		a.stops = a.stops || pr.stop || c.pl.reference
		if jumps {
			a.body = append(a.body, pr.stmt())
		} else {
			a.plain = append(a.plain, pr.do)
		}
	}
	var rl []*registerArray
	for r := range regs {
		rl = append(rl, r)
	}
	sort.Slice(rl, func(i, j int) bool { return rl[i].id < rl[j].id })
	for _, r := range rl {
		a.locks = append(a.locks, &r.mu)
	}
	return a, nil
}

// registersIn lists the register arrays a primitive touches.
func (c *closureBuilder) registersIn(op string, params []*jsonExpr) []*registerArray {
	var out []*registerArray
	var walk func(a *jsonExpr)
	walk = func(a *jsonExpr) {
		if a == nil {
			return
		}
		if (a.kind == "register_array" || a.kind == "register") && a.name != "" {
			if r, ok := c.pl.registerByName[a.name]; ok {
				out = append(out, r)
			}
		}
		walk(a.left)
		walk(a.right)
		walk(a.cond)
		for _, x := range a.list {
			walk(x)
		}
	}
	for _, p := range params {
		walk(p)
	}
	return out
}

func (c *closureBuilder) nparams(op string, params []*jsonExpr, n ...int) error {
	for _, k := range n {
		if len(params) == k {
			return nil
		}
	}
	return c.errorf("primitive %s takes %v parameters, got %d", op, n, len(params))
}

// stdField resolves a standard_metadata field on a given header instance
// (mark_to_drop takes the standard metadata header as a parameter).
func (c *closureBuilder) stdFieldOn(h *headerInst, name string) (int, bool) {
	fi, ok := h.typ.byName[name]
	if !ok || !h.typ.fields[fi].narrow {
		return 0, false
	}
	return h.wordBase + h.typ.fields[fi].slot, true
}

func (c *closureBuilder) primitive(op string, params []*jsonExpr, nprims int) (*prim, error) {
	next := func(f func(p *Packet)) *prim { return &prim{do: f} }
	stopping := func(f func(p *Packet)) *prim { return &prim{do: f, stop: true} }
	switch op {
	case "assign", "modify_field":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		if params[0].kind == "header" {
			return c.primitive("assign_header", params, nprims)
		}
		if params[0].kind == "header_union" {
			return c.primitive("assign_union", params, nprims)
		}
		dst, err := c.lvalue(params[0])
		if err != nil {
			return nil, err
		}
		if dst.fd.varbit && params[1].kind == "field" {
			return c.primitive("assign_VL", params, nprims)
		}
		src, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		return next(c.assign(dst, src)), nil
	case "assign_VL":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		dst, err := c.lvalue(params[0])
		if err != nil {
			return nil, err
		}
		src, err := c.lvalue(params[1])
		if err != nil {
			return nil, err
		}
		if !dst.fd.varbit || !src.fd.varbit {
			d, err := c.data(params[1])
			if err != nil {
				return nil, err
			}
			return next(c.assign(dst, d)), nil
		}
		hs := c.lay.headers
		dfd, sfd := dst.fd, src.fd
		return next(func(p *Packet) {
			dh, sh := dst.hdr(p), src.hdr(p)
			d := p.wide[hs[dh].wideBase+dfd.woff : hs[dh].wideBase+dfd.woff+dfd.wlen]
			s := p.wide[hs[sh].wideBase+sfd.woff : hs[sh].wideBase+sfd.woff+sfd.wlen]
			clear(d)
			n := min(len(d), len(s))
			copy(d[len(d)-n:], s[len(s)-n:])
			p.hs[dh].vlen = p.hs[sh].vlen
			p.hs[dh].dmask = ^uint64(0)
		}), nil
	case "assign_header", "copy_header":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		dh, dt, err := c.header(params[0])
		if err != nil {
			return nil, err
		}
		sh, st, err := c.header(params[1])
		if err != nil {
			return nil, err
		}
		if dt != st {
			return nil, c.errorf("assign_header between different header types %s and %s", dt.name, st.name)
		}
		if params[1].kind == "header" {
			if h, ok := c.lay.hdrByName[params[1].name]; ok {
				c.markHeaderRead(h)
			}
		}
		meta := c.lay.headers
		return next(func(p *Packet) {
			d, s := dh(p), sh(p)
			if d == s {
				return
			}
			wasValid := p.hs[d].valid
			p.copyHeader(d, s)
			if meta[d].metadata {
				p.hs[d].valid = true
			} else if p.hs[d].valid && !wasValid {
				p.setValid(d)
			}
		}), nil
	case "assign_union":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		du, err := c.unionRef(params[0])
		if err != nil {
			return nil, err
		}
		su, err := c.unionRef(params[1])
		if err != nil {
			return nil, err
		}
		uns := c.lay.unions
		return next(func(p *Packet) {
			d, s := uns[du(p)], uns[su(p)]
			for i := range d.headers {
				if i < len(s.headers) {
					p.copyHeader(d.headers[i], s.headers[i])
				}
			}
		}), nil
	case "assign_header_stack":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		ds, err := c.stackOf(params[0])
		if err != nil {
			return nil, err
		}
		ss, err := c.stackOf(params[1])
		if err != nil {
			return nil, err
		}
		return next(func(p *Packet) {
			for i := range ds.headers {
				if i < len(ss.headers) {
					p.copyHeader(ds.headers[i], ss.headers[i])
				}
			}
			p.stkNxt[ds.id] = p.stkNxt[ss.id]
		}), nil
	case "assign_union_stack":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		ds, ok1 := c.lay.ustByName[params[0].name]
		ss, ok2 := c.lay.ustByName[params[1].name]
		if !ok1 || !ok2 {
			return nil, c.errorf("assign_union_stack needs two header union stacks")
		}
		d, s := c.lay.ustacks[ds], c.lay.ustacks[ss]
		uns := c.lay.unions
		return next(func(p *Packet) {
			for i := range d.unions {
				if i < len(s.unions) {
					du, su := uns[d.unions[i]], uns[s.unions[i]]
					for k := range du.headers {
						p.copyHeader(du.headers[k], su.headers[k])
					}
				}
			}
			p.ustNxt[d.id] = p.ustNxt[s.id]
		}), nil
	case "push", "pop":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		cnt, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		if cnt.cval == nil || !cnt.cval.IsInt64() || cnt.cval.Int64() < 0 {
			return nil, c.errorf("%s needs a constant count", op)
		}
		n := int(cnt.cval.Int64())
		if params[0].kind == "header_union_stack" {
			s, ok := c.lay.ustByName[params[0].name]
			if !ok {
				return nil, c.errorf("unknown header union stack %s", params[0].name)
			}
			us := c.lay.ustacks[s]
			elems := make([][]int, len(us.unions))
			for i, u := range us.unions {
				elems[i] = c.lay.unions[u].headers
			}
			return next(func(p *Packet) { stackShift(p, elems, &p.ustNxt[us.id], n, op == "push") }), nil
		}
		st, err := c.stackOf(params[0])
		if err != nil {
			return nil, err
		}
		elems := make([][]int, len(st.headers))
		for i, h := range st.headers {
			elems[i] = []int{h}
		}
		return next(func(p *Packet) { stackShift(p, elems, &p.stkNxt[st.id], n, op == "push") }), nil
	case "_jump":
		if err := c.nparams(op, params, 1); err != nil {
			return nil, err
		}
		t, err := c.jumpTarget(params[0], nprims)
		if err != nil {
			return nil, err
		}
		return &prim{jump: func(*Packet) int { return t }}, nil
	case "_jump_if_zero":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		cond, err := c.boolean(params[0])
		if err != nil {
			return nil, err
		}
		t, err := c.jumpTarget(params[1], nprims)
		if err != nil {
			return nil, err
		}
		return &prim{jump: func(p *Packet) int {
			if !cond(p) {
				return t
			}
			return -1
		}}, nil
	case "exit":
		return &prim{do: func(p *Packet) { p.exit = true }, stop: true}, nil
	case "assert", "assume":
		if err := c.nparams(op, params, 1); err != nil {
			return nil, err
		}
		cond, err := c.boolean(params[0])
		if err != nil {
			return nil, err
		}
		where := c.where
		pl := c.pl
		return stopping(func(p *Packet) {
			if !cond(p) {
				// BMv2 aborts the switch here; a switch must not die on a
				// packet, so the packet is dropped and the failure logged.
				p.failed = true
				pl.assertFailures.Add(1)
				pl.logf("%s failed (%s): packet dropped", op, where)
			}
		}), nil
	case "log_msg":
		if len(params) < 1 {
			return nil, c.errorf("log_msg needs a format")
		}
		format := params[0].name
		var args []*dexpr
		if len(params) > 1 && params[1] != nil {
			for _, x := range params[1].list {
				d, err := c.data(x)
				if err != nil {
					return nil, err
				}
				args = append(args, d)
			}
		}
		fns := make([]bigFn, len(args))
		for i, d := range args {
			fns[i] = d.big()
		}
		pl := c.pl
		return next(func(p *Packet) {
			if pl.opts.Log == nil {
				return
			}
			vals := make([]string, len(fns))
			for i, f := range fns {
				vals[i] = f(p).String()
			}
			pl.logf("%s", formatLogMsg(format, vals))
		}), nil
	case "add_header", "add_header_fast", "setValid":
		if err := c.nparams(op, params, 1); err != nil {
			return nil, err
		}
		h, _, err := c.header(params[0])
		if err != nil {
			return nil, err
		}
		hs := c.lay.headers
		return next(func(p *Packet) {
			id := h(p)
			if !p.hs[id].valid {
				p.zeroHeader(hs[id])
				p.setValid(id)
				p.lengthReg += uint32(headerBytes(hs[id], p))
			}
		}), nil
	case "remove_header", "setInvalid":
		if err := c.nparams(op, params, 1); err != nil {
			return nil, err
		}
		h, _, err := c.header(params[0])
		if err != nil {
			return nil, err
		}
		hs := c.lay.headers
		return next(func(p *Packet) {
			id := h(p)
			if p.hs[id].valid && !hs[id].metadata {
				p.lengthReg -= uint32(headerBytes(hs[id], p))
				p.hs[id].valid = false
			}
		}), nil
	case "mark_to_drop", "drop":
		var h *headerInst
		if len(params) == 1 {
			hid, ok := c.lay.hdrByName[params[0].name]
			if !ok {
				return nil, c.errorf("mark_to_drop: unknown header %s", params[0].name)
			}
			h = c.lay.headers[hid]
		} else if hid, ok := c.lay.hdrByName["standard_metadata"]; ok {
			h = c.lay.headers[hid]
		} else {
			return nil, c.errorf("mark_to_drop: no standard_metadata")
		}
		es, ok := c.stdFieldOn(h, "egress_spec")
		if !ok {
			return nil, c.errorf("mark_to_drop: header %s has no egress_spec", h.name)
		}
		mg, hasMg := c.stdFieldOn(h, "mcast_grp")
		drop := uint64(c.pl.dropPort)
		return next(func(p *Packet) {
			p.words[es] = drop
			if hasMg {
				p.words[mg] = 0
			}
		}), nil
	case "count":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		ca, ok := c.pl.counterByName[params[0].name]
		if !ok {
			return nil, c.errorf("unknown counter array %s", params[0].name)
		}
		ix, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		idx := c.exactIndex(ix)
		return next(func(p *Packet) {
			i := idx(p)
			if i < uint64(len(ca.cells)) {
				ca.cells[i].add(uint64(p.ingressLen))
			}
		}), nil
	case "execute_meter":
		if err := c.nparams(op, params, 3); err != nil {
			return nil, err
		}
		ma, ok := c.pl.meterByName[params[0].name]
		if !ok {
			return nil, c.errorf("unknown meter array %s", params[0].name)
		}
		ix, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		idx := c.exactIndex(ix)
		dst, err := c.lvalue(params[2])
		if err != nil {
			return nil, err
		}
		color := &dexpr{info: vinfo{bits: 2}, fieldSlot: -1}
		color.mod = func() u64Fn {
			return func(p *Packet) uint64 {
				i := idx(p)
				if i >= uint64(len(ma.cells)) {
					return 0
				}
				return uint64(ma.cells[i].execute(ma.input(p), p.meterTime()))
			}
		}
		color.big = func() bigFn {
			f := color.mod()
			s := c.newBig()
			return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(f(p)) }
		}
		return next(c.assign(dst, color)), nil
	case "register_read":
		if err := c.nparams(op, params, 3); err != nil {
			return nil, err
		}
		dst, err := c.lvalue(params[0])
		if err != nil {
			return nil, err
		}
		rd := &jsonExpr{kind: "register", name: params[1].name, right: params[2]}
		val, err := c.registerRead(rd)
		if err != nil {
			return nil, err
		}
		return next(c.assign(dst, val)), nil
	case "register_write":
		if err := c.nparams(op, params, 3); err != nil {
			return nil, err
		}
		ra, ok := c.pl.registerByName[params[0].name]
		if !ok {
			return nil, c.errorf("unknown register array %s", params[0].name)
		}
		ix, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		idx := c.exactIndex(ix)
		v, err := c.data(params[2])
		if err != nil {
			return nil, err
		}
		if ra.width <= 64 {
			f := v.mod()
			m := mask64(ra.width)
			return next(func(p *Packet) { ra.store(idx(p), f(p)&m) }), nil
		}
		bf := v.big()
		return next(func(p *Packet) { ra.storeBig(idx(p), bf(p)) }), nil
	case "modify_field_with_hash_based_offset":
		if err := c.nparams(op, params, 4); err != nil {
			return nil, err
		}
		dst, err := c.lvalue(params[0])
		if err != nil {
			return nil, err
		}
		base, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		calc, ok := c.pl.calcByName[params[2].name]
		if !ok {
			return nil, c.errorf("unknown calculation %s", params[2].name)
		}
		size, err := c.data(params[3])
		if err != nil {
			return nil, err
		}
		bf, sf := c.exactIndex(base), c.exactIndex(size)
		h := &dexpr{info: vinfo{bits: 64}, fieldSlot: -1}
		h.mod = func() u64Fn {
			return func(p *Packet) uint64 {
				v := calc.compute(p)
				if s := sf(p); s != 0 {
					return bf(p) + v%s
				}
				return bf(p)
			}
		}
		h.big = func() bigFn {
			f := h.mod()
			s := c.newBig()
			return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(f(p)) }
		}
		return next(c.assign(dst, h)), nil
	case "modify_field_rng_uniform":
		if err := c.nparams(op, params, 3); err != nil {
			return nil, err
		}
		dst, err := c.lvalue(params[0])
		if err != nil {
			return nil, err
		}
		lo, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		hi, err := c.data(params[2])
		if err != nil {
			return nil, err
		}
		lf, hf := c.exactIndex(lo), c.exactIndex(hi)
		r := &dexpr{info: vinfo{bits: 64}, fieldSlot: -1}
		r.mod = func() u64Fn {
			return func(p *Packet) uint64 {
				l, h := lf(p), hf(p)
				if h <= l {
					return l
				}
				span := h - l + 1
				if span == 0 { // full 64-bit range
					return p.random()
				}
				return l + p.random()%span
			}
		}
		r.big = func() bigFn {
			f := r.mod()
			s := c.newBig()
			return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(f(p)) }
		}
		return next(c.assign(dst, r)), nil
	case "clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress":
		if err := c.nparams(op, params, 1, 2); err != nil {
			return nil, err
		}
		sess, err := c.data(params[0])
		if err != nil {
			return nil, err
		}
		sf := c.exactIndex(sess)
		list := 0
		if len(params) == 2 {
			l, err := c.fieldListID(params[1])
			if err != nil {
				return nil, err
			}
			list = l
		}
		return next(func(p *Packet) {
			p.cloneSession = uint32(sf(p))
			p.cloneValid = true
			p.cloneList = list
		}), nil
	case "resubmit", "recirculate":
		list := 0
		if len(params) >= 1 {
			l, err := c.fieldListID(params[0])
			if err != nil {
				return nil, err
			}
			list = l
		}
		if op == "resubmit" {
			return next(func(p *Packet) { p.resubmit = true; p.resubmitList = list }), nil
		}
		return next(func(p *Packet) { p.recirc = true; p.recircList = list }), nil
	case "generate_digest":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		id, err := c.data(params[1])
		if err != nil {
			return nil, err
		}
		if id.cval == nil {
			return nil, c.errorf("generate_digest needs a constant learn list id")
		}
		lid := int(id.cval.Int64())
		if _, ok := c.pl.learnByID[lid]; !ok {
			return nil, c.errorf("generate_digest: unknown learn list %d", lid)
		}
		return next(func(p *Packet) { p.learnList = lid }), nil
	case "truncate":
		if err := c.nparams(op, params, 1); err != nil {
			return nil, err
		}
		n, err := c.data(params[0])
		if err != nil {
			return nil, err
		}
		nf := c.exactIndex(n)
		return next(func(p *Packet) {
			v := nf(p)
			if v > 1<<30 {
				v = 1 << 30
			}
			p.truncLen = int(v)
			if p.truncLen == 0 {
				p.truncLen = -1 // truncate to nothing
			}
		}), nil
	case "add_to_field", "subtract_from_field":
		if err := c.nparams(op, params, 2); err != nil {
			return nil, err
		}
		o := "+"
		if op == "subtract_from_field" {
			o = "-"
		}
		return c.primitive("assign", []*jsonExpr{params[0], {kind: "op", op: o, left: params[0], right: params[1]}}, nprims)
	case "add", "subtract", "bit_and", "bit_or", "bit_xor", "shift_left", "shift_right":
		if err := c.nparams(op, params, 3); err != nil {
			return nil, err
		}
		o := map[string]string{"add": "+", "subtract": "-", "bit_and": "&", "bit_or": "|", "bit_xor": "^", "shift_left": "<<", "shift_right": ">>"}[op]
		return c.primitive("assign", []*jsonExpr{params[0], {kind: "op", op: o, left: params[1], right: params[2]}}, nprims)
	case "no_op":
		return next(func(*Packet) {}), nil
	}
	return nil, c.errorf("unsupported primitive %q", op)
}

func (c *closureBuilder) jumpTarget(a *jsonExpr, nprims int) (int, error) {
	d, err := c.data(a)
	if err != nil {
		return 0, err
	}
	if d.cval == nil || !d.cval.IsInt64() || d.cval.Int64() < 0 || d.cval.Int64() > int64(nprims) {
		return 0, c.errorf("bad jump target")
	}
	return int(d.cval.Int64()), nil
}

func (c *closureBuilder) fieldListID(a *jsonExpr) (int, error) {
	d, err := c.data(a)
	if err != nil {
		return 0, err
	}
	if d.cval == nil || !d.cval.IsInt64() {
		return 0, c.errorf("field list id must be a constant")
	}
	id := int(d.cval.Int64())
	if id != 0 {
		if _, ok := c.pl.fieldLists[id]; !ok {
			return 0, c.errorf("unknown field list %d", id)
		}
	}
	return id, nil
}

// stackShift implements push_front (push) and pop_front (pop) on a stack
// whose elements are groups of headers (one header, or a union's members).
// New front elements after a push are invalid (P4_16 §8.18).
func stackShift(p *Packet, elems [][]int, next *int32, n int, push bool) {
	size := len(elems)
	if n <= 0 {
		return
	}
	if push {
		for i := size - 1; i >= 0; i-- {
			if i >= n {
				for k := range elems[i] {
					p.copyHeader(elems[i][k], elems[i-n][k])
				}
			} else {
				for _, h := range elems[i] {
					p.hs[h].valid = false
				}
			}
		}
		v := int(*next) + n
		if v > size {
			v = size
		}
		*next = int32(v)
		return
	}
	for i := 0; i < size; i++ {
		if i+n < size {
			for k := range elems[i] {
				p.copyHeader(elems[i][k], elems[i+n][k])
			}
		} else {
			for _, h := range elems[i] {
				p.hs[h].valid = false
			}
		}
	}
	v := int(*next) - n
	if v < 0 {
		v = 0
	}
	*next = int32(v)
}

// headerBytes is a header's size on the wire (fixed part plus the current
// varbit length).
func headerBytes(h *headerInst, p *Packet) int {
	bits := h.typ.fixedBits
	if h.typ.vlField >= 0 {
		bits += int(p.hs[h.id].vlen)
	}
	return (bits + 7) / 8
}

func formatLogMsg(format string, vals []string) string {
	var sb strings.Builder
	k := 0
	for i := 0; i < len(format); i++ {
		if format[i] == '{' && i+1 < len(format) && format[i+1] == '}' {
			if k < len(vals) {
				sb.WriteString(vals[k])
				k++
			}
			i++
			continue
		}
		sb.WriteByte(format[i])
	}
	return sb.String()
}
