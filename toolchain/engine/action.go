package engine

// Actions: each JSON action becomes a slice of closures, one per primitive
// call. _jump/_jump_if_zero (p4c's lowering of if/else inside actions)
// return the index to continue at.

import (
	"fmt"
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
			if r, ok := c.pl.registers.byName[a.name]; ok {
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

// stdField resolves a standard_metadata field on a given header instance
// (mark_to_drop takes the standard metadata header as a parameter).
func (c *closureBuilder) stdFieldOn(h *headerInst, name string) (int, bool) {
	fi, ok := h.typ.byName[name]
	if !ok || !h.typ.fields[fi].narrow {
		return 0, false
	}
	return h.wordBase + h.typ.fields[fi].slot, true
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
