package engine

// Primitives: each BMv2 primitive the engine runs is one builder, registered
// by name in primitives (as BMv2 registers its primitives with
// REGISTER_PRIMITIVE), with the parameter counts it accepts. A builder turns
// one call, whose parameters have already been decoded and counted, into a
// prim at load time; nothing here runs per packet except the closures the
// builders return.

import (
	"math/big"
	"slices"
)

// primitiveBuilder compiles one call of a primitive. op is the name it was
// called by (several names share a builder), params has a length the
// primitive's arity allows, nprims is the number of primitives in the
// enclosing action (jump targets lie in [0, nprims]).
type primitiveBuilder func(c *closureBuilder, op string, params []*jsonExpr, nprims int) (*prim, error)

// primitiveDef is a registered primitive.
type primitiveDef struct {
	// arity lists the parameter counts the primitive takes; nil: its
	// builder checks them (the primitive takes a variable number).
	arity []int
	build primitiveBuilder
}

// primitives is the engine's primitive table, read-only after package
// initialization. Names are BMv2 JSON's (P4_14 aliases included, as
// simple_switch accepts them).
var primitives = map[string]primitiveDef{
	"assign":                              {[]int{2}, (*closureBuilder).primAssign},
	"modify_field":                        {[]int{2}, (*closureBuilder).primAssign},
	"assign_VL":                           {[]int{2}, (*closureBuilder).primAssignVL},
	"assign_header":                       {[]int{2}, (*closureBuilder).primAssignHeader},
	"copy_header":                         {[]int{2}, (*closureBuilder).primAssignHeader},
	"assign_union":                        {[]int{2}, (*closureBuilder).primAssignUnion},
	"assign_header_stack":                 {[]int{2}, (*closureBuilder).primAssignHeaderStack},
	"assign_union_stack":                  {[]int{2}, (*closureBuilder).primAssignUnionStack},
	"push":                                {[]int{2}, (*closureBuilder).primStackShift},
	"pop":                                 {[]int{2}, (*closureBuilder).primStackShift},
	"_jump":                               {[]int{1}, (*closureBuilder).primJump},
	"_jump_if_zero":                       {[]int{2}, (*closureBuilder).primJumpIfZero},
	"exit":                                {nil, (*closureBuilder).primExit},
	"assert":                              {[]int{1}, (*closureBuilder).primAssert},
	"assume":                              {[]int{1}, (*closureBuilder).primAssert},
	"log_msg":                             {nil, (*closureBuilder).primLogMsg},
	"add_header":                          {[]int{1}, (*closureBuilder).primSetValid},
	"add_header_fast":                     {[]int{1}, (*closureBuilder).primSetValid},
	"setValid":                            {[]int{1}, (*closureBuilder).primSetValid},
	"remove_header":                       {[]int{1}, (*closureBuilder).primSetInvalid},
	"setInvalid":                          {[]int{1}, (*closureBuilder).primSetInvalid},
	"mark_to_drop":                        {nil, (*closureBuilder).primMarkToDrop},
	"drop":                                {nil, (*closureBuilder).primMarkToDrop},
	"count":                               {[]int{2}, (*closureBuilder).primCount},
	"execute_meter":                       {[]int{3}, (*closureBuilder).primExecuteMeter},
	"register_read":                       {[]int{3}, (*closureBuilder).primRegisterRead},
	"register_write":                      {[]int{3}, (*closureBuilder).primRegisterWrite},
	"modify_field_with_hash_based_offset": {[]int{4}, (*closureBuilder).primHashOffset},
	"modify_field_rng_uniform":            {[]int{3}, (*closureBuilder).primRNGUniform},
	"clone_ingress_pkt_to_egress":         {[]int{1, 2}, (*closureBuilder).primClone},
	"clone_egress_pkt_to_egress":          {[]int{1, 2}, (*closureBuilder).primClone},
	"resubmit":                            {nil, (*closureBuilder).primResubmit},
	"recirculate":                         {nil, (*closureBuilder).primRecirculate},
	"generate_digest":                     {[]int{2}, (*closureBuilder).primGenerateDigest},
	"truncate":                            {[]int{1}, (*closureBuilder).primTruncate},
	"add_to_field":                        {[]int{2}, (*closureBuilder).primAddToField},
	"subtract_from_field":                 {[]int{2}, (*closureBuilder).primAddToField},
	"add":                                 {[]int{3}, (*closureBuilder).primBinaryOp},
	"subtract":                            {[]int{3}, (*closureBuilder).primBinaryOp},
	"bit_and":                             {[]int{3}, (*closureBuilder).primBinaryOp},
	"bit_or":                              {[]int{3}, (*closureBuilder).primBinaryOp},
	"bit_xor":                             {[]int{3}, (*closureBuilder).primBinaryOp},
	"shift_left":                          {[]int{3}, (*closureBuilder).primBinaryOp},
	"shift_right":                         {[]int{3}, (*closureBuilder).primBinaryOp},
	"no_op":                               {nil, (*closureBuilder).primNoOp},
}

// primitive compiles one call of the primitive op.
func (c *closureBuilder) primitive(op string, params []*jsonExpr, nprims int) (*prim, error) {
	def, ok := primitives[op]
	if !ok {
		return nil, c.errorf("unsupported primitive %q", op)
	}
	if def.arity != nil && !slices.Contains(def.arity, len(params)) {
		return nil, c.errorf("primitive %s takes %v parameters, got %d", op, def.arity, len(params))
	}
	return def.build(c, op, params, nprims)
}

// indexValue compiles a primitive's run-time number parameter (an index,
// a session, a length, a bound) as exactIndex reads it.
func (c *closureBuilder) indexValue(a *jsonExpr) (u64Fn, error) {
	d, err := c.data(a)
	if err != nil {
		return nil, err
	}
	return c.exactIndex(d), nil
}

func do(f func(p *Packet)) *prim { return &prim{do: f} }

// computed is a value a primitive works out per packet (a meter's colour, a
// hash, a random number), as an expression the assignment machinery takes.
func (c *closureBuilder) computed(bits int, f u64Fn) *dexpr {
	d := &dexpr{info: vinfo{bits: bits}, fieldSlot: -1}
	d.mod = func() u64Fn { return f }
	d.big = func() bigFn {
		s := c.newBig()
		return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(f(p)) }
	}
	return d
}

// ---- assignment and headers ----

func (c *closureBuilder) primAssign(op string, params []*jsonExpr, nprims int) (*prim, error) {
	switch params[0].kind {
	case "header":
		return c.primAssignHeader(op, params, nprims)
	case "header_union":
		return c.primAssignUnion(op, params, nprims)
	}
	dst, err := c.lvalue(params[0])
	if err != nil {
		return nil, err
	}
	if dst.fd.varbit && params[1].kind == "field" {
		return c.primAssignVL(op, params, nprims)
	}
	src, err := c.data(params[1])
	if err != nil {
		return nil, err
	}
	return do(c.assign(dst, src)), nil
}

func (c *closureBuilder) primAssignVL(_ string, params []*jsonExpr, _ int) (*prim, error) {
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
		return do(c.assign(dst, d)), nil
	}
	hs := c.lay.headers
	dfd, sfd := dst.fd, src.fd
	return do(func(p *Packet) {
		dh, sh := dst.hdr(p), src.hdr(p)
		d := p.wide[hs[dh].wideBase+dfd.woff : hs[dh].wideBase+dfd.woff+dfd.wlen]
		s := p.wide[hs[sh].wideBase+sfd.woff : hs[sh].wideBase+sfd.woff+sfd.wlen]
		clear(d)
		n := min(len(d), len(s))
		copy(d[len(d)-n:], s[len(s)-n:])
		p.hs[dh].vlen = p.hs[sh].vlen
		p.hs[dh].dmask = ^uint64(0)
	}), nil
}

func (c *closureBuilder) primAssignHeader(_ string, params []*jsonExpr, _ int) (*prim, error) {
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
	return do(func(p *Packet) {
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
}

func (c *closureBuilder) primAssignUnion(_ string, params []*jsonExpr, _ int) (*prim, error) {
	du, err := c.unionRef(params[0])
	if err != nil {
		return nil, err
	}
	su, err := c.unionRef(params[1])
	if err != nil {
		return nil, err
	}
	uns := c.lay.unions
	return do(func(p *Packet) {
		d, s := uns[du(p)], uns[su(p)]
		for i := range d.headers {
			if i < len(s.headers) {
				p.copyHeader(d.headers[i], s.headers[i])
			}
		}
	}), nil
}

func (c *closureBuilder) primAssignHeaderStack(_ string, params []*jsonExpr, _ int) (*prim, error) {
	ds, err := c.stackOf(params[0])
	if err != nil {
		return nil, err
	}
	ss, err := c.stackOf(params[1])
	if err != nil {
		return nil, err
	}
	return do(func(p *Packet) {
		for i := range ds.headers {
			if i < len(ss.headers) {
				p.copyHeader(ds.headers[i], ss.headers[i])
			}
		}
		p.stkNxt[ds.id] = p.stkNxt[ss.id]
	}), nil
}

func (c *closureBuilder) primAssignUnionStack(_ string, params []*jsonExpr, _ int) (*prim, error) {
	ds, ok1 := c.lay.ustByName[params[0].name]
	ss, ok2 := c.lay.ustByName[params[1].name]
	if !ok1 || !ok2 {
		return nil, c.errorf("assign_union_stack needs two header union stacks")
	}
	d, s := c.lay.ustacks[ds], c.lay.ustacks[ss]
	uns := c.lay.unions
	return do(func(p *Packet) {
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
}

// primStackShift is push (push_front) and pop (pop_front) on a header
// stack or a header union stack.
func (c *closureBuilder) primStackShift(op string, params []*jsonExpr, _ int) (*prim, error) {
	cnt, err := c.data(params[1])
	if err != nil {
		return nil, err
	}
	if cnt.cval == nil || !cnt.cval.IsInt64() || cnt.cval.Int64() < 0 {
		return nil, c.errorf("%s needs a constant count", op)
	}
	n := int(cnt.cval.Int64())
	push := op == "push"
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
		return do(func(p *Packet) { stackShift(p, elems, &p.ustNxt[us.id], n, push) }), nil
	}
	st, err := c.stackOf(params[0])
	if err != nil {
		return nil, err
	}
	elems := make([][]int, len(st.headers))
	for i, h := range st.headers {
		elems[i] = []int{h}
	}
	return do(func(p *Packet) { stackShift(p, elems, &p.stkNxt[st.id], n, push) }), nil
}

func (c *closureBuilder) primSetValid(_ string, params []*jsonExpr, _ int) (*prim, error) {
	h, _, err := c.header(params[0])
	if err != nil {
		return nil, err
	}
	hs := c.lay.headers
	return do(func(p *Packet) {
		id := h(p)
		if !p.hs[id].valid {
			p.zeroHeader(hs[id])
			p.setValid(id)
			p.lengthReg += uint32(headerBytes(hs[id], p))
		}
	}), nil
}

func (c *closureBuilder) primSetInvalid(_ string, params []*jsonExpr, _ int) (*prim, error) {
	h, _, err := c.header(params[0])
	if err != nil {
		return nil, err
	}
	hs := c.lay.headers
	return do(func(p *Packet) {
		id := h(p)
		if p.hs[id].valid && !hs[id].metadata {
			p.lengthReg -= uint32(headerBytes(hs[id], p))
			p.hs[id].valid = false
		}
	}), nil
}

// ---- control flow inside an action ----

func (c *closureBuilder) primJump(_ string, params []*jsonExpr, nprims int) (*prim, error) {
	t, err := c.jumpTarget(params[0], nprims)
	if err != nil {
		return nil, err
	}
	return &prim{jump: func(*Packet) int { return t }}, nil
}

func (c *closureBuilder) primJumpIfZero(_ string, params []*jsonExpr, nprims int) (*prim, error) {
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
}

func (c *closureBuilder) primExit(string, []*jsonExpr, int) (*prim, error) {
	return &prim{do: func(p *Packet) { p.exit = true }, stop: true}, nil
}

// primAssert is assert and assume.
func (c *closureBuilder) primAssert(op string, params []*jsonExpr, _ int) (*prim, error) {
	cond, err := c.boolean(params[0])
	if err != nil {
		return nil, err
	}
	where := c.where
	pl := c.pl
	return &prim{stop: true, do: func(p *Packet) {
		if !cond(p) {
			// BMv2 aborts the switch here; a switch must not die on a
			// packet, so the packet is dropped and the failure logged.
			p.failed = true
			pl.assertFailures.Add(1)
			pl.logf("%s failed (%s): packet dropped", op, where)
		}
	}}, nil
}

func (c *closureBuilder) primLogMsg(_ string, params []*jsonExpr, _ int) (*prim, error) {
	if len(params) < 1 {
		return nil, c.errorf("log_msg needs a format")
	}
	format := params[0].name
	var fns []bigFn
	if len(params) > 1 && params[1] != nil {
		for _, x := range params[1].list {
			d, err := c.data(x)
			if err != nil {
				return nil, err
			}
			fns = append(fns, d.big())
		}
	}
	pl := c.pl
	return do(func(p *Packet) {
		if pl.opts.Log == nil {
			return
		}
		vals := make([]string, len(fns))
		for i, f := range fns {
			vals[i] = f(p).String()
		}
		pl.logf("%s", formatLogMsg(format, vals))
	}), nil
}

func (c *closureBuilder) primNoOp(string, []*jsonExpr, int) (*prim, error) {
	return do(func(*Packet) {}), nil
}

// ---- v1model's packet fate: drop, clone, resubmit, recirculate, digest, truncate ----

// primMarkToDrop is mark_to_drop (with the standard metadata as its
// parameter, or none in older JSON) and P4_14's drop.
func (c *closureBuilder) primMarkToDrop(_ string, params []*jsonExpr, _ int) (*prim, error) {
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
	return do(func(p *Packet) {
		p.words[es] = drop
		if hasMg {
			p.words[mg] = 0
		}
	}), nil
}

func (c *closureBuilder) primClone(_ string, params []*jsonExpr, _ int) (*prim, error) {
	sf, err := c.indexValue(params[0])
	if err != nil {
		return nil, err
	}
	list, err := c.optionalFieldList(params, 1)
	if err != nil {
		return nil, err
	}
	return do(func(p *Packet) {
		p.cloneSession = uint32(sf(p))
		p.cloneValid = true
		p.cloneList = list
	}), nil
}

func (c *closureBuilder) primResubmit(_ string, params []*jsonExpr, _ int) (*prim, error) {
	list, err := c.optionalFieldList(params, 0)
	if err != nil {
		return nil, err
	}
	return do(func(p *Packet) { p.resubmit = true; p.resubmitList = list }), nil
}

func (c *closureBuilder) primRecirculate(_ string, params []*jsonExpr, _ int) (*prim, error) {
	list, err := c.optionalFieldList(params, 0)
	if err != nil {
		return nil, err
	}
	return do(func(p *Packet) { p.recirc = true; p.recircList = list }), nil
}

// optionalFieldList is the field list id in params[i], 0 (none) when the
// call has no such parameter.
func (c *closureBuilder) optionalFieldList(params []*jsonExpr, i int) (int, error) {
	if len(params) <= i {
		return 0, nil
	}
	return c.fieldListID(params[i])
}

func (c *closureBuilder) primGenerateDigest(_ string, params []*jsonExpr, _ int) (*prim, error) {
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
	return do(func(p *Packet) { p.learnList = lid }), nil
}

func (c *closureBuilder) primTruncate(_ string, params []*jsonExpr, _ int) (*prim, error) {
	nf, err := c.indexValue(params[0])
	if err != nil {
		return nil, err
	}
	return do(func(p *Packet) {
		v := nf(p)
		if v > 1<<30 {
			v = 1 << 30
		}
		p.truncLen = int(v)
		if p.truncLen == 0 {
			p.truncLen = -1 // truncate to nothing
		}
	}), nil
}

// ---- externs: counters, meters, registers, hashes, random numbers ----

// arrayCell resolves the (array, index) pair a counter, meter or register
// primitive starts with: params[0] names the array, params[1] is the index.
func arrayCell[A any](c *closureBuilder, byName map[string]*A, kind string, params []*jsonExpr) (*A, u64Fn, error) {
	a, ok := byName[params[0].name]
	if !ok {
		return nil, nil, c.errorf("unknown %s array %s", kind, params[0].name)
	}
	idx, err := c.indexValue(params[1])
	if err != nil {
		return nil, nil, err
	}
	return a, idx, nil
}

func (c *closureBuilder) primCount(_ string, params []*jsonExpr, _ int) (*prim, error) {
	ca, idx, err := arrayCell(c, c.pl.counters.byName, "counter", params)
	if err != nil {
		return nil, err
	}
	return do(func(p *Packet) {
		i := idx(p)
		if i < uint64(len(ca.cells)) {
			ca.cells[i].add(uint64(p.ingressLen))
		}
	}), nil
}

func (c *closureBuilder) primExecuteMeter(_ string, params []*jsonExpr, _ int) (*prim, error) {
	ma, idx, err := arrayCell(c, c.pl.meters.byName, "meter", params)
	if err != nil {
		return nil, err
	}
	dst, err := c.lvalue(params[2])
	if err != nil {
		return nil, err
	}
	color := c.computed(2, func(p *Packet) uint64 {
		i := idx(p)
		if i >= uint64(len(ma.cells)) {
			return 0
		}
		return uint64(ma.cells[i].execute(ma.input(p), p.meterTime()))
	})
	return do(c.assign(dst, color)), nil
}

func (c *closureBuilder) primRegisterRead(_ string, params []*jsonExpr, _ int) (*prim, error) {
	dst, err := c.lvalue(params[0])
	if err != nil {
		return nil, err
	}
	val, err := c.registerRead(&jsonExpr{kind: "register", name: params[1].name, right: params[2]})
	if err != nil {
		return nil, err
	}
	return do(c.assign(dst, val)), nil
}

func (c *closureBuilder) primRegisterWrite(_ string, params []*jsonExpr, _ int) (*prim, error) {
	ra, idx, err := arrayCell(c, c.pl.registers.byName, "register", params)
	if err != nil {
		return nil, err
	}
	v, err := c.data(params[2])
	if err != nil {
		return nil, err
	}
	if ra.width <= 64 {
		f := v.mod()
		m := mask64(ra.width)
		return do(func(p *Packet) { ra.store(idx(p), f(p)&m) }), nil
	}
	bf := v.big()
	return do(func(p *Packet) { ra.storeBig(idx(p), bf(p)) }), nil
}

// primHashOffset is modify_field_with_hash_based_offset(dst, base, calc,
// size): dst = base + hash % size (base alone when size is 0).
func (c *closureBuilder) primHashOffset(_ string, params []*jsonExpr, _ int) (*prim, error) {
	dst, err := c.lvalue(params[0])
	if err != nil {
		return nil, err
	}
	bf, err := c.indexValue(params[1])
	if err != nil {
		return nil, err
	}
	calc, ok := c.pl.calcByName[params[2].name]
	if !ok {
		return nil, c.errorf("unknown calculation %s", params[2].name)
	}
	sf, err := c.indexValue(params[3])
	if err != nil {
		return nil, err
	}
	h := c.computed(64, func(p *Packet) uint64 {
		v := calc.compute(p)
		if s := sf(p); s != 0 {
			return bf(p) + v%s
		}
		return bf(p)
	})
	return do(c.assign(dst, h)), nil
}

// primRNGUniform is modify_field_rng_uniform(dst, lo, hi): a uniform
// random value in [lo, hi] (lo when hi <= lo).
func (c *closureBuilder) primRNGUniform(_ string, params []*jsonExpr, _ int) (*prim, error) {
	dst, err := c.lvalue(params[0])
	if err != nil {
		return nil, err
	}
	lf, err := c.indexValue(params[1])
	if err != nil {
		return nil, err
	}
	hf, err := c.indexValue(params[2])
	if err != nil {
		return nil, err
	}
	r := c.computed(64, func(p *Packet) uint64 {
		l, h := lf(p), hf(p)
		if h <= l {
			return l
		}
		span := h - l + 1
		if span == 0 { // full 64-bit range
			return p.random()
		}
		return l + p.random()%span
	})
	return do(c.assign(dst, r)), nil
}

// ---- P4_14 arithmetic primitives, as assignments of an expression ----

// primAddToField is add_to_field and subtract_from_field: dst = dst ± v.
func (c *closureBuilder) primAddToField(op string, params []*jsonExpr, nprims int) (*prim, error) {
	o := "+"
	if op == "subtract_from_field" {
		o = "-"
	}
	return c.primAssign("assign", []*jsonExpr{params[0], {kind: "op", op: o, left: params[0], right: params[1]}}, nprims)
}

// binaryOps are the operators of P4_14's three-operand primitives.
var binaryOps = map[string]string{"add": "+", "subtract": "-", "bit_and": "&", "bit_or": "|", "bit_xor": "^", "shift_left": "<<", "shift_right": ">>"}

// primBinaryOp is add, subtract, bit_and, ...(dst, a, b): dst = a op b.
func (c *closureBuilder) primBinaryOp(op string, params []*jsonExpr, nprims int) (*prim, error) {
	return c.primAssign("assign", []*jsonExpr{params[0], {kind: "op", op: binaryOps[op], left: params[1], right: params[2]}}, nprims)
}
