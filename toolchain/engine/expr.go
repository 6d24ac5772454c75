package engine

// Expression compiler.
//
// BMv2 evaluates expressions with infinite precision and truncates only when
// a value is stored into a field (JSON_format.md, "General information");
// p4c relies on that and inserts explicit masks ("& 0xff") and two_comp_mod
// where P4 wraps. To run that fast we keep two code generators per node:
//
//   - mod: a func(*Packet) uint64 that yields the node's value modulo 2^64.
//     +, -, *, &, |, ^, ~ and << commute with "mod 2^64", so a tree of those
//     can run entirely in uint64. Operators that look at the whole value
//     (>>, comparisons, /, %, casts, conditions, indices) need their operands
//     exactly; they get them from the uint64 path when a static bound says
//     the value fits (info.fits), otherwise from the big path.
//   - big: a func(*Packet) *big.Int that yields the exact value, using one
//     preallocated big.Int per node in the packet context (no allocation
//     once a packet context has been used).
//
// info is a conservative bound on the node's value: in [0, 2^bits) or, when
// neg, in [-2^bits, 2^bits). When it fits 64 bits (63 plus sign), the uint64
// path is exact (read as int64 when neg).

import (
	"fmt"
	"math/big"
	"math/bits"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

type u64Fn func(p *Packet) uint64
type boolFn func(p *Packet) bool
type bigFn func(p *Packet) *big.Int
type hdrFn func(p *Packet) int

type vinfo struct {
	bits int
	neg  bool
}

const maxBits = 1 << 20

func (v vinfo) fits() bool {
	if v.neg {
		return v.bits <= 63
	}
	return v.bits <= 64
}

func capBits(n int) int {
	if n > maxBits {
		return maxBits
	}
	return n
}

// dexpr is a compiled data (integer) expression with lazy code generators.
type dexpr struct {
	info      vinfo
	cval      *big.Int // non-nil for constants
	mod       func() u64Fn
	big       func() bigFn
	fieldSlot int // >= 0 when the expression is a plain narrow unsigned field read
	paramIdx  int // >= 1 when the expression is action parameter paramIdx-1 (<= 64 bits)
	isBool    boolFn
	// affine, when set, says that the expression's value modulo 2^64 (what
	// mod computes) is (words[slot] + add) & and: p4c's shape for field
	// arithmetic such as ttl - 1, ((ttl + 0xff) & 0xff); assignments
	// compute it inline.
	affine *affineForm
}

type affineForm struct {
	slot     int
	add, and uint64
}

// exact returns a uint64 closure with the exact value (int64 bits if neg),
// or nil when the value may not fit.
func (d *dexpr) exact() u64Fn {
	if d.info.fits() {
		return d.mod()
	}
	return nil
}

// closureBuilder turns a loaded program's BMv2 JSON (expressions,
// primitives, parser ops, tables' keys) into the closures that run per
// packet; it lives only while Load runs.
type closureBuilder struct {
	pl     *Pipeline
	lay    *layout
	params []pipeline.ParamInfo // action parameters while compiling an action body
	where  string               // for error messages
}

func (c *closureBuilder) errorf(format string, args ...any) error {
	if c.where != "" {
		return fmt.Errorf("%s: %s", c.where, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf(format, args...)
}

// markRead records that the program reads PHV word w; the architecture
// skips producing values (timestamps) nobody reads.
func (c *closureBuilder) markRead(w int) {
	if c.pl.readWords == nil {
		c.pl.readWords = map[int]bool{}
	}
	c.pl.readWords[w] = true
}

func (c *closureBuilder) markHeaderRead(h int) {
	hi := c.lay.headers[h]
	for i := 0; i < hi.typ.nwords; i++ {
		c.markRead(hi.wordBase + i)
	}
}

func (c *closureBuilder) newBig() int {
	n := c.pl.nbig
	c.pl.nbig++
	return n
}

func infoOfConst(v *big.Int) vinfo {
	if v.Sign() < 0 {
		t := new(big.Int).Neg(v)
		return vinfo{bits: t.BitLen(), neg: true}
	}
	return vinfo{bits: v.BitLen()}
}

// constExpr makes a constant.
func (c *closureBuilder) constExpr(v *big.Int) *dexpr {
	v = new(big.Int).Set(v)
	lo := low64(v)
	d := &dexpr{info: infoOfConst(v), cval: v, fieldSlot: -1}
	d.mod = func() u64Fn { return func(*Packet) uint64 { return lo } }
	d.big = func() bigFn { return func(*Packet) *big.Int { return v } }
	return d
}

// low64 returns v modulo 2^64 (two's complement for negative v).
func low64(v *big.Int) uint64 {
	if v.Sign() >= 0 {
		if v.IsUint64() {
			return v.Uint64()
		}
		return new(big.Int).And(v, bigMask64).Uint64()
	}
	return new(big.Int).And(v, bigMask64).Uint64()
}

var bigMask64 = new(big.Int).SetUint64(^uint64(0))

// lowBits64 reads the low 64 bits of x's two's complement without
// allocating (x may be negative).
func lowBits64(x *big.Int) uint64 {
	w := x.Bits()
	var m uint64
	if len(w) > 0 {
		m = uint64(w[0])
		if bits.UintSize == 32 && len(w) > 1 {
			m |= uint64(w[1]) << 32
		}
	}
	if x.Sign() < 0 {
		return -m
	}
	return m
}

// isBoolAST reports whether a produces a boolean in BMv2's typing.
func isBoolAST(a *jsonExpr) bool {
	if a == nil {
		return false
	}
	switch a.kind {
	case "bool":
		return true
	case "op":
		switch a.op {
		case "and", "or", "not", "==", "!=", "<", "<=", ">", ">=", "valid", "valid_union", "d2b":
			return true
		case "?":
			return isBoolAST(a.left) && isBoolAST(a.right)
		}
	}
	return false
}

// ---- data expressions ----

func (c *closureBuilder) data(a *jsonExpr) (*dexpr, error) {
	if a == nil {
		return nil, c.errorf("missing expression operand")
	}
	switch a.kind {
	case "hexstr":
		return c.constExpr(a.val), nil
	case "bool":
		if a.b {
			return c.constExpr(big.NewInt(1)), nil
		}
		return c.constExpr(big.NewInt(0)), nil
	case "field":
		if len(a.names) != 2 {
			return nil, c.errorf("bad field reference %v", a.names)
		}
		r, ok := c.lay.lookupField(a.names[0], a.names[1])
		if !ok {
			return nil, c.errorf("unknown field %s.%s", a.names[0], a.names[1])
		}
		return c.fieldRead(r), nil
	case "runtime_data", "local":
		return c.param(a.idx)
	case "stack_field":
		if len(a.names) != 2 {
			return nil, c.errorf("bad stack_field %v", a.names)
		}
		h, ht, err := c.stackLast(a.names[0])
		if err != nil {
			return nil, err
		}
		fi, ok := ht.byName[a.names[1]]
		if !ok {
			return nil, c.errorf("stack %s has no field %s", a.names[0], a.names[1])
		}
		return c.dynFieldRead(h, ht, fi), nil
	case "register":
		return c.registerRead(a)
	case "op":
		if isBoolAST(a) {
			b, err := c.boolean(a)
			if err != nil {
				return nil, err
			}
			return c.b2d(b), nil
		}
		return c.dataOp(a)
	}
	return nil, c.errorf("unsupported operand type %q in expression", a.kind)
}

func (c *closureBuilder) b2d(b boolFn) *dexpr {
	d := &dexpr{info: vinfo{bits: 1}, fieldSlot: -1, isBool: b}
	d.mod = func() u64Fn {
		return func(p *Packet) uint64 {
			if b(p) {
				return 1
			}
			return 0
		}
	}
	d.big = func() bigFn {
		s := c.newBig()
		return func(p *Packet) *big.Int {
			z := &p.bigs[s]
			if b(p) {
				return z.SetInt64(1)
			}
			return z.SetInt64(0)
		}
	}
	return d
}

func (c *closureBuilder) param(idx int) (*dexpr, error) {
	if idx < 0 || idx >= len(c.params) {
		return nil, c.errorf("action parameter %d out of range", idx)
	}
	w := c.params[idx].Bitwidth
	d := &dexpr{info: vinfo{bits: w}, fieldSlot: -1}
	if w <= 64 {
		d.paramIdx = idx + 1
		d.mod = func() u64Fn { return func(p *Packet) uint64 { return p.ad.u64[idx] } }
		d.big = func() bigFn {
			s := c.newBig()
			return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(p.ad.u64[idx]) }
		}
		return d, nil
	}
	d.mod = func() u64Fn {
		return func(p *Packet) uint64 {
			b := p.ad.wide[idx]
			if len(b) > 8 {
				b = b[len(b)-8:]
			}
			return getUint(b)
		}
	}
	d.big = func() bigFn {
		s := c.newBig()
		return func(p *Packet) *big.Int { return p.bigs[s].SetBytes(p.ad.wide[idx]) }
	}
	return d, nil
}

// fieldRead compiles a read of a statically known field.
func (c *closureBuilder) fieldRead(r fieldRef) *dexpr {
	h := c.lay.headers[r.hdr]
	if r.fld < 0 { // $valid$
		hid := r.hdr
		return c.b2d(func(p *Packet) bool { return p.hs[hid].valid })
	}
	fd := &h.typ.fields[r.fld]
	if fd.narrow {
		slot := h.wordBase + fd.slot
		c.markRead(slot)
		return c.narrowRead(fd, func(*Packet) int { return slot }, slot)
	}
	off := h.wideBase + fd.woff
	return c.wideRead(fd, func(*Packet) int { return off })
}

// dynFieldRead compiles a read of field fi of a header chosen at run time.
func (c *closureBuilder) dynFieldRead(h hdrFn, ht *headerType, fi int) *dexpr {
	fd := &ht.fields[fi]
	hs := c.lay.headers
	if fd.narrow {
		// The header is known only at run time: the field counts as read
		// in every instance of the type (the parser loads it eagerly).
		for _, hi := range hs {
			if hi.typ == ht {
				c.markRead(hi.wordBase + fd.slot)
			}
		}
		return c.narrowRead(fd, func(p *Packet) int { return hs[h(p)].wordBase + fd.slot }, -1)
	}
	return c.wideRead(fd, func(p *Packet) int { return hs[h(p)].wideBase + fd.woff })
}

func (c *closureBuilder) narrowRead(fd *fieldDef, slotOf func(*Packet) int, static int) *dexpr {
	w := fd.width
	if fd.signed && w > 0 {
		sh := uint(64 - w)
		d := &dexpr{info: vinfo{bits: w - 1, neg: true}, fieldSlot: -1}
		if static >= 0 {
			d.mod = func() u64Fn {
				return func(p *Packet) uint64 { return uint64(int64(p.words[static]<<sh) >> sh) }
			}
		} else {
			d.mod = func() u64Fn {
				return func(p *Packet) uint64 { return uint64(int64(p.words[slotOf(p)]<<sh) >> sh) }
			}
		}
		d.big = func() bigFn {
			s := c.newBig()
			return func(p *Packet) *big.Int {
				return p.bigs[s].SetInt64(int64(p.words[slotOf(p)]<<sh) >> sh)
			}
		}
		return d
	}
	d := &dexpr{info: vinfo{bits: w}, fieldSlot: static}
	if static >= 0 {
		d.mod = func() u64Fn { return func(p *Packet) uint64 { return p.words[static] } }
	} else {
		d.mod = func() u64Fn { return func(p *Packet) uint64 { return p.words[slotOf(p)] } }
	}
	d.big = func() bigFn {
		s := c.newBig()
		return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(p.words[slotOf(p)]) }
	}
	return d
}

func (c *closureBuilder) wideRead(fd *fieldDef, offOf func(*Packet) int) *dexpr {
	n := fd.wlen
	w := fd.width
	info := vinfo{bits: w}
	if fd.signed {
		info = vinfo{bits: w - 1, neg: true}
	}
	d := &dexpr{info: info, fieldSlot: -1}
	d.mod = func() u64Fn {
		return func(p *Packet) uint64 {
			off := offOf(p)
			return getUint(p.wide[off+n-min(n, 8) : off+n])
		}
	}
	var pw *big.Int
	if fd.signed {
		pw = bigPow2(w)
	}
	d.big = func() bigFn {
		s := c.newBig()
		return func(p *Packet) *big.Int {
			off := offOf(p)
			z := p.bigs[s].SetBytes(p.wide[off : off+n])
			if pw != nil && z.Bit(w-1) == 1 {
				z.Sub(z, pw)
			}
			return z
		}
	}
	return d
}

// dataOp compiles an arithmetic operator node.
func (c *closureBuilder) dataOp(a *jsonExpr) (*dexpr, error) {
	switch a.op {
	case "b2d":
		b, err := c.boolean(a.right)
		if err != nil {
			return nil, err
		}
		return c.b2d(b), nil
	case "access_field":
		h, ht, err := c.header(a.left)
		if err != nil {
			return nil, err
		}
		if a.idx < 0 || a.idx >= len(ht.fields) {
			return nil, c.errorf("access_field offset %d out of range", a.idx)
		}
		return c.dynFieldRead(h, ht, a.idx), nil
	case "last_stack_index", "size_stack":
		st, err := c.stackOf(a.right)
		if err != nil {
			return nil, err
		}
		sid := st.id
		last := a.op == "last_stack_index"
		d := &dexpr{info: vinfo{bits: 32}, fieldSlot: -1}
		d.mod = func() u64Fn {
			return func(p *Packet) uint64 {
				n := uint64(p.stkNxt[sid])
				if last {
					return (n - 1) & 0xffffffff
				}
				return n
			}
		}
		d.big = func() bigFn {
			m := d.mod()
			s := c.newBig()
			return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(m(p)) }
		}
		return d, nil
	case "?":
		cond, err := c.boolean(a.cond)
		if err != nil {
			return nil, err
		}
		l, err := c.data(a.left)
		if err != nil {
			return nil, err
		}
		r, err := c.data(a.right)
		if err != nil {
			return nil, err
		}
		d := &dexpr{info: vinfo{bits: max(l.info.bits, r.info.bits), neg: l.info.neg || r.info.neg}, fieldSlot: -1}
		d.mod = func() u64Fn {
			lf, rf := l.mod(), r.mod()
			return func(p *Packet) uint64 {
				if cond(p) {
					return lf(p)
				}
				return rf(p)
			}
		}
		d.big = func() bigFn {
			lf, rf := l.big(), r.big()
			return func(p *Packet) *big.Int {
				if cond(p) {
					return lf(p)
				}
				return rf(p)
			}
		}
		return d, nil
	case "~", "not_bits":
		x, err := c.data(a.right)
		if err != nil {
			return nil, err
		}
		if x.cval != nil {
			return c.constExpr(new(big.Int).Not(x.cval)), nil
		}
		d := &dexpr{info: vinfo{bits: x.info.bits, neg: true}, fieldSlot: -1}
		d.mod = func() u64Fn { f := x.mod(); return func(p *Packet) uint64 { return ^f(p) } }
		d.big = func() bigFn {
			f := x.big()
			s := c.newBig()
			return func(p *Packet) *big.Int { return p.bigs[s].Not(f(p)) }
		}
		return d, nil
	case "two_comp_mod", "sat_cast", "usat_cast":
		x, err := c.data(a.left)
		if err != nil {
			return nil, err
		}
		wd, err := c.data(a.right)
		if err != nil {
			return nil, err
		}
		if wd.cval == nil || !wd.cval.IsInt64() || wd.cval.Int64() <= 0 || wd.cval.Int64() > maxBits {
			return nil, c.errorf("%s needs a constant positive width", a.op)
		}
		return c.castOp(a.op, x, int(wd.cval.Int64())), nil
	}
	if a.left == nil && a.op == "-" { // unary minus
		x, err := c.data(a.right)
		if err != nil {
			return nil, err
		}
		zero := c.constExpr(big.NewInt(0))
		return c.binary("-", zero, x)
	}
	if a.left == nil || a.right == nil {
		return nil, c.errorf("operator %q needs two operands", a.op)
	}
	l, err := c.data(a.left)
	if err != nil {
		return nil, err
	}
	r, err := c.data(a.right)
	if err != nil {
		return nil, err
	}
	return c.binary(a.op, l, r)
}

// shiftCap bounds big shifts: anything beyond every field width plus a
// margin is masked off by the consumer anyway (p4c masks shift results).
func (c *closureBuilder) shiftCap() uint {
	return uint(2*c.lay.maxWidth + 128)
}

func (c *closureBuilder) binary(op string, l, r *dexpr) (*dexpr, error) {
	if l.cval != nil && r.cval != nil {
		v, err := foldConst(op, l.cval, r.cval, c.shiftCap())
		if err != nil {
			return nil, c.errorf("%v", err)
		}
		return c.constExpr(v), nil
	}
	d := &dexpr{fieldSlot: -1}
	li, ri := l.info, r.info
	switch op {
	case "+":
		d.info = vinfo{bits: capBits(max(li.bits, ri.bits) + 1), neg: li.neg || ri.neg}
	case "-":
		d.info = vinfo{bits: capBits(max(li.bits, ri.bits) + 1), neg: true}
	case "*":
		d.info = vinfo{bits: capBits(li.bits + ri.bits + 1), neg: li.neg || ri.neg}
	case "&":
		switch {
		case !li.neg && !ri.neg:
			d.info = vinfo{bits: min(li.bits, ri.bits)}
		case !li.neg:
			d.info = vinfo{bits: li.bits}
		case !ri.neg:
			d.info = vinfo{bits: ri.bits}
		default:
			d.info = vinfo{bits: max(li.bits, ri.bits), neg: true}
		}
	case "|", "^":
		d.info = vinfo{bits: max(li.bits, ri.bits), neg: li.neg || ri.neg}
	case "<<":
		var k int
		if r.cval != nil {
			if !r.cval.IsInt64() || r.cval.Int64() < 0 {
				k = maxBits
			} else {
				k = int(min(r.cval.Int64(), maxBits))
			}
		} else if ri.bits >= 20 {
			k = maxBits
		} else {
			k = 1<<uint(ri.bits) - 1
		}
		d.info = vinfo{bits: capBits(li.bits + k), neg: li.neg}
	case ">>":
		d.info = li
	case "/", "%":
		d.info = vinfo{bits: li.bits, neg: li.neg || ri.neg}
		if op == "%" {
			d.info = vinfo{bits: min(li.bits, ri.bits+1), neg: li.neg || ri.neg}
		}
	default:
		return nil, c.errorf("unsupported operator %q", op)
	}

	// The big generator is the same for every operator.
	cap := c.shiftCap()
	d.big = func() bigFn {
		lf, rf := l.big(), r.big()
		s := c.newBig()
		return func(p *Packet) *big.Int {
			z := &p.bigs[s]
			x, y := lf(p), rf(p)
			switch op {
			case "+":
				return z.Add(x, y)
			case "-":
				return z.Sub(x, y)
			case "*":
				return z.Mul(x, y)
			case "&":
				return z.And(x, y)
			case "|":
				return z.Or(x, y)
			case "^":
				return z.Xor(x, y)
			case "<<":
				return z.Lsh(x, shiftAmount(y, cap))
			case ">>":
				return z.Rsh(x, shiftAmount(y, cap))
			case "/":
				if y.Sign() == 0 {
					return z.SetInt64(0)
				}
				return z.Quo(x, y)
			case "%":
				if y.Sign() == 0 {
					return z.SetInt64(0)
				}
				return z.Rem(x, y)
			}
			return z.SetInt64(0)
		}
	}

	switch op {
	case "+", "-", "*", "&", "|", "^":
		d.mod = func() u64Fn { return homomorphic(op, l, r) }
		if r.cval != nil {
			k := low64(r.cval)
			switch {
			case (op == "+" || op == "-") && l.fieldSlot >= 0:
				if op == "-" {
					k = -k
				}
				d.affine = &affineForm{slot: l.fieldSlot, add: k, and: ^uint64(0)}
			case op == "&" && l.fieldSlot >= 0:
				d.affine = &affineForm{slot: l.fieldSlot, and: k}
			case op == "&" && l.affine != nil:
				d.affine = &affineForm{slot: l.affine.slot, add: l.affine.add, and: l.affine.and & k}
			}
		}
	case "<<":
		d.mod = func() u64Fn {
			lf := l.mod()
			if r.cval != nil {
				k := r.cval
				if !k.IsUint64() || k.Uint64() >= 64 {
					return func(*Packet) uint64 { return 0 }
				}
				sh := uint(k.Uint64())
				return func(p *Packet) uint64 { return lf(p) << sh }
			}
			sf := c.exactOrBigLow(r)
			return func(p *Packet) uint64 {
				s := sf(p)
				if s >= 64 {
					return 0
				}
				return lf(p) << s
			}
		}
	case ">>":
		d.mod = func() u64Fn {
			lf := l.exact()
			if lf == nil {
				return bigToMod(d.big())
			}
			neg := l.info.neg
			if r.cval != nil {
				sh := uint(63)
				if r.cval.IsUint64() && r.cval.Uint64() < 64 {
					sh = uint(r.cval.Uint64())
				} else if !neg {
					return func(*Packet) uint64 { return 0 }
				}
				if neg {
					return func(p *Packet) uint64 { return uint64(int64(lf(p)) >> sh) }
				}
				return func(p *Packet) uint64 { return lf(p) >> sh }
			}
			sf := c.exactOrBigLow(r)
			if neg {
				return func(p *Packet) uint64 {
					s := sf(p)
					if s > 63 {
						s = 63
					}
					return uint64(int64(lf(p)) >> s)
				}
			}
			return func(p *Packet) uint64 {
				s := sf(p)
				if s >= 64 {
					return 0
				}
				return lf(p) >> s
			}
		}
	case "/", "%":
		d.mod = func() u64Fn {
			lf, rf := l.exact(), r.exact()
			if lf == nil || rf == nil || l.info.neg || r.info.neg {
				return bigToMod(d.big())
			}
			if op == "/" {
				return func(p *Packet) uint64 {
					y := rf(p)
					if y == 0 {
						return 0
					}
					return lf(p) / y
				}
			}
			return func(p *Packet) uint64 {
				y := rf(p)
				if y == 0 {
					return 0
				}
				return lf(p) % y
			}
		}
	}
	return d, nil
}

// exactOrBigLow returns a closure giving a non-negative shift amount,
// saturated at 2^64-1 when the exact value does not fit.
func (c *closureBuilder) exactOrBigLow(d *dexpr) u64Fn {
	if f := d.exact(); f != nil && !d.info.neg {
		return f
	}
	bf := d.big()
	return func(p *Packet) uint64 {
		x := bf(p)
		if x.Sign() < 0 {
			return 0
		}
		if !x.IsUint64() {
			return ^uint64(0)
		}
		return x.Uint64()
	}
}

func shiftAmount(y *big.Int, cap uint) uint {
	if y.Sign() <= 0 {
		return 0
	}
	if !y.IsUint64() || y.Uint64() > uint64(cap) {
		return cap
	}
	return uint(y.Uint64())
}

func bigToMod(f bigFn) u64Fn {
	return func(p *Packet) uint64 { return lowBits64(f(p)) }
}

// homomorphic builds the uint64 closure for an operator that commutes with
// reduction modulo 2^64, specialising constant and plain-field operands
// (the common shapes p4c emits, e.g. (f + 0xff) & 0xff).
func homomorphic(op string, l, r *dexpr) u64Fn {
	if r.cval != nil {
		k := low64(r.cval)
		if l.fieldSlot >= 0 {
			s := l.fieldSlot
			switch op {
			case "+":
				return func(p *Packet) uint64 { return p.words[s] + k }
			case "-":
				return func(p *Packet) uint64 { return p.words[s] - k }
			case "&":
				return func(p *Packet) uint64 { return p.words[s] & k }
			case "|":
				return func(p *Packet) uint64 { return p.words[s] | k }
			case "^":
				return func(p *Packet) uint64 { return p.words[s] ^ k }
			case "*":
				return func(p *Packet) uint64 { return p.words[s] * k }
			}
		}
		lf := l.mod()
		switch op {
		case "+":
			return func(p *Packet) uint64 { return lf(p) + k }
		case "-":
			return func(p *Packet) uint64 { return lf(p) - k }
		case "&":
			return func(p *Packet) uint64 { return lf(p) & k }
		case "|":
			return func(p *Packet) uint64 { return lf(p) | k }
		case "^":
			return func(p *Packet) uint64 { return lf(p) ^ k }
		case "*":
			return func(p *Packet) uint64 { return lf(p) * k }
		}
	}
	lf, rf := l.mod(), r.mod()
	switch op {
	case "+":
		return func(p *Packet) uint64 { return lf(p) + rf(p) }
	case "-":
		return func(p *Packet) uint64 { return lf(p) - rf(p) }
	case "*":
		return func(p *Packet) uint64 { return lf(p) * rf(p) }
	case "&":
		return func(p *Packet) uint64 { return lf(p) & rf(p) }
	case "|":
		return func(p *Packet) uint64 { return lf(p) | rf(p) }
	case "^":
		return func(p *Packet) uint64 { return lf(p) ^ rf(p) }
	}
	panic("homomorphic: bad operator " + op)
}

func foldConst(op string, x, y *big.Int, cap uint) (*big.Int, error) {
	z := new(big.Int)
	switch op {
	case "+":
		return z.Add(x, y), nil
	case "-":
		return z.Sub(x, y), nil
	case "*":
		return z.Mul(x, y), nil
	case "&":
		return z.And(x, y), nil
	case "|":
		return z.Or(x, y), nil
	case "^":
		return z.Xor(x, y), nil
	case "<<":
		return z.Lsh(x, shiftAmount(y, cap)), nil
	case ">>":
		return z.Rsh(x, shiftAmount(y, cap)), nil
	case "/":
		if y.Sign() == 0 {
			return z, nil
		}
		return z.Quo(x, y), nil
	case "%":
		if y.Sign() == 0 {
			return z, nil
		}
		return z.Rem(x, y), nil
	}
	return nil, fmt.Errorf("unsupported operator %q", op)
}

// castOp compiles two_comp_mod, sat_cast and usat_cast to width w.
func (c *closureBuilder) castOp(op string, x *dexpr, w int) *dexpr {
	pw := bigPow2(w)
	half := bigPow2(w - 1)
	maskW := new(big.Int).Sub(pw, big.NewInt(1))
	if x.cval != nil {
		return c.constExpr(castBig(op, new(big.Int), x.cval, w, pw, half, maskW))
	}
	d := &dexpr{fieldSlot: -1}
	switch op {
	case "two_comp_mod", "sat_cast":
		d.info = vinfo{bits: w - 1, neg: true}
	default:
		d.info = vinfo{bits: w}
	}
	d.big = func() bigFn {
		f := x.big()
		s := c.newBig()
		return func(p *Packet) *big.Int { return castBig(op, &p.bigs[s], f(p), w, pw, half, maskW) }
	}
	d.mod = func() u64Fn {
		if op == "two_comp_mod" && w <= 64 {
			// Only the low w bits of x matter: the uint64 path suffices.
			f := x.mod()
			sh := uint(64 - w)
			return func(p *Packet) uint64 { return uint64(int64(f(p)<<sh) >> sh) }
		}
		xf := x.exact()
		if xf == nil || w > 64 {
			return bigToMod(d.big())
		}
		if op == "usat_cast" {
			m := mask64(w)
			if x.info.neg {
				return func(p *Packet) uint64 {
					v := int64(xf(p))
					if v < 0 {
						return 0
					}
					if uint64(v) > m {
						return m
					}
					return uint64(v)
				}
			}
			return func(p *Packet) uint64 {
				v := xf(p)
				if v > m {
					return m
				}
				return v
			}
		}
		// sat_cast: clamp to [-2^(w-1), 2^(w-1)-1]
		hi := int64(mask64(w - 1))
		lo := -hi - 1
		if x.info.neg {
			return func(p *Packet) uint64 {
				v := int64(xf(p))
				if v > hi {
					v = hi
				} else if v < lo {
					v = lo
				}
				return uint64(v)
			}
		}
		return func(p *Packet) uint64 {
			v := xf(p)
			if v > uint64(hi) {
				return uint64(hi)
			}
			return v
		}
	}
	return d
}

func castBig(op string, z, x *big.Int, w int, pw, half, maskW *big.Int) *big.Int {
	switch op {
	case "two_comp_mod":
		z.And(x, maskW)
		if z.Cmp(half) >= 0 {
			z.Sub(z, pw)
		}
		return z
	case "usat_cast":
		if x.Sign() < 0 {
			return z.SetInt64(0)
		}
		if x.Cmp(maskW) > 0 {
			return z.Set(maskW)
		}
		return z.Set(x)
	default: // sat_cast
		if x.Cmp(half) >= 0 {
			return z.Sub(half, big.NewInt(1))
		}
		if x.Sign() < 0 && new(big.Int).Neg(x).Cmp(half) > 0 {
			return z.Neg(half)
		}
		return z.Set(x)
	}
}

// ---- boolean expressions ----

// validityOf returns the header whose validity the condition a is, when it
// is just that (p4c's d2b($valid$) and valid(header) shapes), else -1;
// such conditions are tested inline.
func (c *closureBuilder) validityOf(a *jsonExpr) int {
	if a == nil || a.kind != "op" {
		return -1
	}
	switch {
	case a.op == "d2b" && a.right != nil && a.right.kind == "field" && len(a.right.names) == 2 && a.right.names[1] == "$valid$":
		if h, ok := c.lay.hdrByName[a.right.names[0]]; ok {
			return h
		}
	case a.op == "valid" && a.right != nil && (a.right.kind == "header" || a.right.kind == "regular"):
		if h, ok := c.lay.hdrByName[a.right.name]; ok {
			return h
		}
	}
	return -1
}

func (c *closureBuilder) boolean(a *jsonExpr) (boolFn, error) {
	if a == nil {
		return nil, c.errorf("missing condition")
	}
	switch a.kind {
	case "bool":
		v := a.b
		return func(*Packet) bool { return v }, nil
	case "hexstr", "field", "runtime_data", "local", "stack_field":
		// Lenient: data used as a condition means "!= 0".
		d, err := c.data(a)
		if err != nil {
			return nil, err
		}
		return c.nonZero(d), nil
	case "op":
	default:
		return nil, c.errorf("unsupported condition operand %q", a.kind)
	}
	switch a.op {
	case "and", "or":
		l, err := c.boolean(a.left)
		if err != nil {
			return nil, err
		}
		r, err := c.boolean(a.right)
		if err != nil {
			return nil, err
		}
		if a.op == "and" {
			return func(p *Packet) bool { return l(p) && r(p) }, nil
		}
		return func(p *Packet) bool { return l(p) || r(p) }, nil
	case "not":
		x, err := c.boolean(a.right)
		if err != nil {
			return nil, err
		}
		return func(p *Packet) bool { return !x(p) }, nil
	case "d2b":
		d, err := c.data(a.right)
		if err != nil {
			return nil, err
		}
		return c.nonZero(d), nil
	case "valid":
		if a.right != nil && (a.right.kind == "header_union" || (a.right.kind == "op" && a.right.op == "dereference_union_stack")) {
			return c.unionValid(a.right)
		}
		h, _, err := c.header(a.right)
		if err != nil {
			return nil, err
		}
		return func(p *Packet) bool { return p.hs[h(p)].valid }, nil
	case "valid_union":
		return c.unionValid(a.right)
	case "?":
		cond, err := c.boolean(a.cond)
		if err != nil {
			return nil, err
		}
		l, err := c.boolean(a.left)
		if err != nil {
			return nil, err
		}
		r, err := c.boolean(a.right)
		if err != nil {
			return nil, err
		}
		return func(p *Packet) bool {
			if cond(p) {
				return l(p)
			}
			return r(p)
		}, nil
	case "==", "!=", "<", "<=", ">", ">=":
		if (a.op == "==" || a.op == "!=") && isBoolAST(a.left) && isBoolAST(a.right) {
			l, err := c.boolean(a.left)
			if err != nil {
				return nil, err
			}
			r, err := c.boolean(a.right)
			if err != nil {
				return nil, err
			}
			if a.op == "==" {
				return func(p *Packet) bool { return l(p) == r(p) }, nil
			}
			return func(p *Packet) bool { return l(p) != r(p) }, nil
		}
		l, err := c.data(a.left)
		if err != nil {
			return nil, err
		}
		r, err := c.data(a.right)
		if err != nil {
			return nil, err
		}
		return c.compare(a.op, l, r), nil
	}
	// A data operator used as a condition.
	d, err := c.dataOp(a)
	if err != nil {
		return nil, err
	}
	return c.nonZero(d), nil
}

func (c *closureBuilder) nonZero(d *dexpr) boolFn {
	if d.isBool != nil {
		return d.isBool
	}
	if f := d.exact(); f != nil {
		return func(p *Packet) bool { return f(p) != 0 }
	}
	bf := d.big()
	return func(p *Packet) bool { return bf(p).Sign() != 0 }
}

func (c *closureBuilder) unionValid(a *jsonExpr) (boolFn, error) {
	u, err := c.unionRef(a)
	if err != nil {
		return nil, err
	}
	uns := c.lay.unions
	return func(p *Packet) bool {
		for _, h := range uns[u(p)].headers {
			if p.hs[h].valid {
				return true
			}
		}
		return false
	}, nil
}

func cmpResult(op string, c int) bool {
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

func (c *closureBuilder) compare(op string, l, r *dexpr) boolFn {
	lf, rf := l.exact(), r.exact()
	if lf != nil && rf != nil {
		unsigned := !l.info.neg && !r.info.neg
		signedOK := (l.info.neg || l.info.bits <= 63) && (r.info.neg || r.info.bits <= 63)
		if unsigned {
			if r.cval != nil {
				k := r.cval.Uint64()
				if l.fieldSlot >= 0 {
					s := l.fieldSlot
					switch op {
					case "==":
						return func(p *Packet) bool { return p.words[s] == k }
					case "!=":
						return func(p *Packet) bool { return p.words[s] != k }
					}
				}
				switch op {
				case "==":
					return func(p *Packet) bool { return lf(p) == k }
				case "!=":
					return func(p *Packet) bool { return lf(p) != k }
				}
			}
			switch op {
			case "==":
				return func(p *Packet) bool { return lf(p) == rf(p) }
			case "!=":
				return func(p *Packet) bool { return lf(p) != rf(p) }
			case "<":
				return func(p *Packet) bool { return lf(p) < rf(p) }
			case "<=":
				return func(p *Packet) bool { return lf(p) <= rf(p) }
			case ">":
				return func(p *Packet) bool { return lf(p) > rf(p) }
			default:
				return func(p *Packet) bool { return lf(p) >= rf(p) }
			}
		}
		if signedOK {
			switch op {
			case "==":
				return func(p *Packet) bool { return lf(p) == rf(p) }
			case "!=":
				return func(p *Packet) bool { return lf(p) != rf(p) }
			case "<":
				return func(p *Packet) bool { return int64(lf(p)) < int64(rf(p)) }
			case "<=":
				return func(p *Packet) bool { return int64(lf(p)) <= int64(rf(p)) }
			case ">":
				return func(p *Packet) bool { return int64(lf(p)) > int64(rf(p)) }
			default:
				return func(p *Packet) bool { return int64(lf(p)) >= int64(rf(p)) }
			}
		}
	}
	lb, rb := l.big(), r.big()
	return func(p *Packet) bool { return cmpResult(op, lb(p).Cmp(rb(p))) }
}

// ---- header, stack and union references ----

// header resolves an expression denoting a header instance: a static
// header, a stack element chosen at run time, or a union member.
func (c *closureBuilder) header(a *jsonExpr) (hdrFn, *headerType, error) {
	if a == nil {
		return nil, nil, c.errorf("missing header operand")
	}
	switch a.kind {
	case "header", "regular":
		h, ok := c.lay.hdrByName[a.name]
		if !ok {
			return nil, nil, c.errorf("unknown header %s", a.name)
		}
		return func(*Packet) int { return h }, c.lay.headers[h].typ, nil
	case "op":
		switch a.op {
		case "dereference_header_stack":
			st, err := c.stackOf(a.left)
			if err != nil {
				return nil, nil, err
			}
			ix, err := c.data(a.right)
			if err != nil {
				return nil, nil, err
			}
			hs := st.headers
			sink := st.sink
			if ix.cval != nil {
				i := ix.cval
				h := sink
				if i.IsInt64() && i.Int64() >= 0 && i.Int64() < int64(len(hs)) {
					h = hs[i.Int64()]
				}
				return func(*Packet) int { return h }, st.typ, nil
			}
			f := c.exactIndex(ix)
			return func(p *Packet) int {
				i := f(p)
				if i < uint64(len(hs)) {
					return hs[i]
				}
				return sink
			}, st.typ, nil
		case "access_union_header":
			u, err := c.unionRef(a.left)
			if err != nil {
				return nil, nil, err
			}
			m := a.idx
			uns := c.lay.unions
			// All unions reached through one expression share a type.
			var typ *headerType
			for _, un := range uns {
				if m < len(un.headers) {
					typ = c.lay.headers[un.headers[m]].typ
					break
				}
			}
			if typ == nil {
				return nil, nil, c.errorf("access_union_header offset %d out of range", m)
			}
			return func(p *Packet) int { return uns[u(p)].headers[m] }, typ, nil
		}
	}
	return nil, nil, c.errorf("expected a header, got %v", a)
}

// exactIndex returns a closure giving a run-time index; values that do not
// fit in 64 bits (or are negative) map to an out-of-range index.
func (c *closureBuilder) exactIndex(d *dexpr) u64Fn {
	if f := d.exact(); f != nil {
		if d.info.neg {
			return func(p *Packet) uint64 {
				v := f(p)
				if int64(v) < 0 {
					return ^uint64(0)
				}
				return v
			}
		}
		return f
	}
	bf := d.big()
	return func(p *Packet) uint64 {
		x := bf(p)
		if x.Sign() < 0 || !x.IsUint64() {
			return ^uint64(0)
		}
		return x.Uint64()
	}
}

func (c *closureBuilder) stackOf(a *jsonExpr) (*headerStack, error) {
	if a == nil {
		return nil, c.errorf("missing header stack operand")
	}
	if a.kind == "header_stack" || a.kind == "stack" {
		s, ok := c.lay.stkByName[a.name]
		if !ok {
			return nil, c.errorf("unknown header stack %s", a.name)
		}
		return c.lay.stacks[s], nil
	}
	return nil, c.errorf("expected a header stack, got %v", a)
}

// stackLast returns the last extracted element of a stack (its sink when
// the stack is empty).
func (c *closureBuilder) stackLast(name string) (hdrFn, *headerType, error) {
	s, ok := c.lay.stkByName[name]
	if !ok {
		return nil, nil, c.errorf("unknown header stack %s", name)
	}
	st := c.lay.stacks[s]
	hs, sink, sid := st.headers, st.sink, st.id
	return func(p *Packet) int {
		n := p.stkNxt[sid]
		if n <= 0 || int(n) > len(hs) {
			return sink
		}
		return hs[n-1]
	}, st.typ, nil
}

// unionRef resolves an expression denoting a header union instance.
func (c *closureBuilder) unionRef(a *jsonExpr) (func(p *Packet) int, error) {
	if a == nil {
		return nil, c.errorf("missing header union operand")
	}
	switch a.kind {
	case "header_union":
		u, ok := c.lay.unByName[a.name]
		if !ok {
			return nil, c.errorf("unknown header union %s", a.name)
		}
		return func(*Packet) int { return u }, nil
	case "op":
		if a.op == "dereference_union_stack" {
			if a.left == nil || a.left.kind != "header_union_stack" {
				return nil, c.errorf("dereference_union_stack needs a header_union_stack")
			}
			s, ok := c.lay.ustByName[a.left.name]
			if !ok {
				return nil, c.errorf("unknown header union stack %s", a.left.name)
			}
			us := c.lay.ustacks[s].unions
			ix, err := c.data(a.right)
			if err != nil {
				return nil, err
			}
			f := c.exactIndex(ix)
			return func(p *Packet) int {
				i := f(p)
				if i < uint64(len(us)) {
					return us[i]
				}
				return us[len(us)-1]
			}, nil
		}
	}
	return nil, c.errorf("expected a header union, got %v", a)
}

// ---- lvalues ----

// lvalue is a field destination: static (hdr known at load) or dynamic.
type lvalue struct {
	fd     *fieldDef
	hdr    hdrFn
	static int // header id when static, else -1
	valid  bool
}

func (c *closureBuilder) lvalue(a *jsonExpr) (*lvalue, error) {
	if a == nil {
		return nil, c.errorf("missing assignment destination")
	}
	switch a.kind {
	case "field":
		if len(a.names) != 2 {
			return nil, c.errorf("bad field reference %v", a.names)
		}
		r, ok := c.lay.lookupField(a.names[0], a.names[1])
		if !ok {
			return nil, c.errorf("unknown field %s.%s", a.names[0], a.names[1])
		}
		if r.fld < 0 {
			return nil, c.errorf("cannot assign to %s.$valid$", a.names[0])
		}
		h := r.hdr
		return &lvalue{fd: c.lay.field(r), hdr: func(*Packet) int { return h }, static: h}, nil
	case "stack_field":
		h, ht, err := c.stackLast(a.names[0])
		if err != nil {
			return nil, err
		}
		fi, ok := ht.byName[a.names[1]]
		if !ok {
			return nil, c.errorf("stack %s has no field %s", a.names[0], a.names[1])
		}
		return &lvalue{fd: &ht.fields[fi], hdr: h, static: -1}, nil
	case "op":
		if a.op == "access_field" {
			h, ht, err := c.header(a.left)
			if err != nil {
				return nil, err
			}
			if a.idx < 0 || a.idx >= len(ht.fields) {
				return nil, c.errorf("access_field offset %d out of range", a.idx)
			}
			return &lvalue{fd: &ht.fields[a.idx], hdr: h, static: -1}, nil
		}
	}
	return nil, c.errorf("expected a field, got %v", a)
}

// assign compiles "dst = src" with BMv2's truncation to the field width.
// Stores into packet headers also mark the field dirty (Packet.dmask), so
// that an unmoved header is deparsed by rewriting only its changed fields.
func (c *closureBuilder) assign(dst *lvalue, src *dexpr) func(p *Packet) {
	fd := dst.fd
	hs := c.lay.headers
	bit := fd.dirtyBit()
	if fd.narrow {
		m := mask64(fd.width)
		slot := fd.slot
		if dst.static >= 0 {
			w := hs[dst.static].wordBase + slot
			dh := dst.static
			if hs[dh].metadata {
				if src.fieldSlot >= 0 {
					s := src.fieldSlot
					return func(p *Packet) { p.words[w] = p.words[s] & m }
				}
				if src.cval != nil {
					k := low64(src.cval) & m
					return func(p *Packet) { p.words[w] = k }
				}
				if src.paramIdx > 0 {
					i := src.paramIdx - 1
					return func(p *Packet) { p.words[w] = p.ad.u64[i] & m }
				}
				if a := src.affine; a != nil && !c.pl.reference {
					s, k, am := a.slot, a.add, a.and&m
					return func(p *Packet) { p.words[w] = (p.words[s] + k) & am }
				}
				f := src.mod()
				return func(p *Packet) { p.words[w] = f(p) & m }
			}
			if src.fieldSlot >= 0 {
				s := src.fieldSlot
				return func(p *Packet) { p.words[w] = p.words[s] & m; p.hs[dh].dmask |= bit }
			}
			if src.cval != nil {
				k := low64(src.cval) & m
				return func(p *Packet) { p.words[w] = k; p.hs[dh].dmask |= bit }
			}
			if src.paramIdx > 0 {
				i := src.paramIdx - 1
				return func(p *Packet) { p.words[w] = p.ad.u64[i] & m; p.hs[dh].dmask |= bit }
			}
			if a := src.affine; a != nil && !c.pl.reference {
				s, k, am := a.slot, a.add, a.and&m
				return func(p *Packet) { p.words[w] = (p.words[s] + k) & am; p.hs[dh].dmask |= bit }
			}
			f := src.mod()
			return func(p *Packet) { p.words[w] = f(p) & m; p.hs[dh].dmask |= bit }
		}
		f := src.mod()
		h := dst.hdr
		return func(p *Packet) {
			id := h(p)
			p.words[hs[id].wordBase+slot] = f(p) & m
			p.hs[id].dmask |= bit
		}
	}
	// wide or varbit destination
	n := fd.wlen
	woff := fd.woff
	h := dst.hdr
	if fd.varbit {
		// Assigning a number to a varbit: keep the current length.
		bf := src.big()
		maskW := new(big.Int).Sub(bigPow2(fd.width), big.NewInt(1))
		s := c.newBig()
		return func(p *Packet) {
			id := h(p)
			off := hs[id].wideBase + woff
			z := p.bigs[s].And(bf(p), maskW)
			z.FillBytes(p.wide[off : off+n])
			p.hs[id].dmask = ^uint64(0)
		}
	}
	maskW := new(big.Int).Sub(bigPow2(fd.width), big.NewInt(1))
	if src.info.fits() && !src.info.neg {
		f := src.mod()
		return func(p *Packet) {
			id := h(p)
			off := hs[id].wideBase + woff
			dst := p.wide[off : off+n]
			clear(dst)
			if n >= 8 {
				putUint(dst[n-8:], f(p))
			} else {
				putUint(dst, f(p))
			}
			maskTop(dst, fd.width)
			p.hs[id].dmask |= bit
		}
	}
	bf := src.big()
	s := c.newBig()
	return func(p *Packet) {
		id := h(p)
		off := hs[id].wideBase + woff
		z := p.bigs[s].And(bf(p), maskW)
		z.FillBytes(p.wide[off : off+n])
		p.hs[id].dmask |= bit
	}
}

// maskTop clears the bits of b (big-endian) above bit width w.
func maskTop(b []byte, w int) {
	extra := len(b)*8 - w
	if extra <= 0 {
		return
	}
	for i := 0; i < extra/8; i++ {
		b[i] = 0
	}
	if r := extra % 8; r != 0 {
		b[extra/8] &= byte(0xff >> uint(r))
	}
}

// registerRead compiles a "register" operand: [array, index].
func (c *closureBuilder) registerRead(a *jsonExpr) (*dexpr, error) {
	ra, ok := c.pl.registers.byName[a.name]
	if !ok {
		return nil, c.errorf("unknown register array %s", a.name)
	}
	ix, err := c.data(a.right)
	if err != nil {
		return nil, err
	}
	idx := c.exactIndex(ix)
	d := &dexpr{info: vinfo{bits: ra.width}, fieldSlot: -1}
	if ra.width <= 64 {
		d.mod = func() u64Fn { return func(p *Packet) uint64 { return ra.load(idx(p)) } }
		d.big = func() bigFn {
			s := c.newBig()
			return func(p *Packet) *big.Int { return p.bigs[s].SetUint64(ra.load(idx(p))) }
		}
		return d, nil
	}
	d.big = func() bigFn {
		s := c.newBig()
		return func(p *Packet) *big.Int { return ra.loadBig(&p.bigs[s], idx(p)) }
	}
	d.mod = func() u64Fn { return bigToMod(d.big()) }
	return d, nil
}
