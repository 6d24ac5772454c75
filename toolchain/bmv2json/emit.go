package bmv2json

import (
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/terrapin/terrapin/toolchain/ir"
)

// Compiler is recorded in __meta__.
const Compiler = "terrapin-p4c"

type emitter struct {
	p *ir.Program
	// BMv2 numbers tables, conditionals and action profiles across all
	// pipelines.
	tableSeq, condSeq, profileSeq int
	actionID                      map[*ir.Action]int
	headerID                      map[string]int
	stackID                       map[string]int
	unionID                       map[string]int
	errs                          []error
}

// Emit renders a program as indented BMv2 JSON.
func Emit(p *ir.Program) ([]byte, error) {
	e := &emitter{p: p, actionID: map[*ir.Action]int{}, headerID: map[string]int{}, stackID: map[string]int{}, unionID: map[string]int{}}
	doc := e.program()
	if len(e.errs) > 0 {
		return nil, e.errs[0]
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func (e *emitter) fail(format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf(format, args...))
}

func (e *emitter) program() object {
	p := e.p
	for i, a := range p.Actions {
		e.actionID[a] = i
	}
	doc := object{}
	doc.add("header_types", e.headerTypes())
	doc.add("headers", e.headers())
	doc.add("header_stacks", e.stacks())
	doc.add("header_union_types", e.unionTypes())
	doc.add("header_unions", e.unions())
	doc.add("header_union_stacks", e.unionStacks())
	doc.add("field_lists", e.fieldLists())
	errs := []any{}
	for _, c := range p.Errors {
		errs = append(errs, []any{c.Name, c.Value})
	}
	doc.add("errors", errs)
	enums := []any{}
	for _, en := range p.Enums {
		entries := []any{}
		for _, m := range en.Members {
			entries = append(entries, []any{m.Name, m.Value})
		}
		enums = append(enums, obj("name", en.Name, "entries", entries))
	}
	doc.add("enums", enums)
	parsers := []any{}
	for i, ps := range p.Parsers {
		parsers = append(parsers, e.parser(ps, i))
	}
	doc.add("parsers", parsers)
	vsets := []any{}
	for i, vs := range p.ValueSets {
		w := 0
		for _, x := range vs.Widths {
			w += x
		}
		vsets = append(vsets, obj("name", vs.Name, "id", i, "compressed_bitwidth", w))
	}
	doc.add("parse_vsets", vsets)
	deparsers := []any{}
	for i, d := range p.Deparsers {
		order := append([]string{}, d.Order...)
		o := obj("name", d.Name, "id", i)
		if si := sourceInfo(d.Loc); si != nil {
			o.add("source_info", si)
		}
		o.add("order", order)
		o.add("primitives", []any{})
		deparsers = append(deparsers, o)
	}
	doc.add("deparsers", deparsers)
	doc.add("meter_arrays", e.meters())
	doc.add("counter_arrays", e.counters())
	doc.add("register_arrays", e.registers())
	doc.add("calculations", e.calculations())
	doc.add("learn_lists", e.learnLists())
	doc.add("actions", e.actions())
	pipes := []any{}
	for i, pl := range p.Pipelines {
		pipes = append(pipes, e.pipeline(pl, i))
	}
	doc.add("pipelines", pipes)
	doc.add("checksums", e.checksums())
	doc.add("force_arith", []any{})
	doc.add("extern_instances", []any{})
	aliases := []any{}
	for _, a := range p.FieldAliases {
		aliases = append(aliases, []any{a.Alias, []any{a.Header, a.Field}})
	}
	doc.add("field_aliases", aliases)
	doc.add("program", p.SourceFile)
	doc.add("__meta__", obj("version", []int{2, 23}, "compiler", Compiler))
	return doc
}

func sourceInfo(s ir.Source) any {
	if !s.Pos.IsValid() {
		return nil
	}
	return obj("filename", s.Pos.File, "line", s.Pos.Line, "column", s.Pos.Col, "source_fragment", s.Fragment)
}

func (e *emitter) headerTypes() []any {
	out := []any{}
	for i, t := range e.p.HeaderTypes {
		fields := []any{}
		varbit := false
		for _, f := range t.Fields {
			if f.Varbit {
				fields = append(fields, []any{f.Name, "*"})
				varbit = true
				continue
			}
			fields = append(fields, []any{f.Name, f.Width, f.Signed})
		}
		o := obj("name", t.Name, "id", i, "fields", fields)
		if varbit {
			o.add("max_length", t.MaxLengthBytes())
		}
		out = append(out, o)
	}
	return out
}

func (e *emitter) headers() []any {
	out := []any{}
	for i, h := range e.p.Headers {
		e.headerID[h.Name] = i
		out = append(out, obj("name", h.Name, "id", i, "header_type", h.Type.Name, "metadata", h.Metadata, "pi_omit", true))
	}
	return out
}

func (e *emitter) stacks() []any {
	out := []any{}
	for i, s := range e.p.Stacks {
		e.stackID[s.Name] = i
		ids := []int{}
		for _, h := range s.Headers {
			ids = append(ids, e.headerID[h.Name])
		}
		out = append(out, obj("name", s.Name, "id", i, "header_type", s.Type.Name, "size", len(s.Headers), "header_ids", ids))
	}
	return out
}

func (e *emitter) unionTypes() []any {
	out := []any{}
	for i, u := range e.p.UnionTypes {
		hs := []any{}
		for _, m := range u.Members {
			hs = append(hs, []any{m.Name, m.Type.Name})
		}
		out = append(out, obj("name", u.Name, "id", i, "headers", hs))
	}
	return out
}

func (e *emitter) unions() []any {
	out := []any{}
	for i, u := range e.p.Unions {
		e.unionID[u.Name] = i
		ids := []int{}
		for _, h := range u.Headers {
			ids = append(ids, e.headerID[h.Name])
		}
		out = append(out, obj("name", u.Name, "id", i, "union_type", u.Type.Name, "header_ids", ids, "pi_omit", true))
	}
	return out
}

func (e *emitter) unionStacks() []any {
	out := []any{}
	for i, s := range e.p.UnionStacks {
		ids := []int{}
		for _, u := range s.Unions {
			ids = append(ids, e.unionID[u.Name])
		}
		out = append(out, obj("name", s.Name, "id", i, "union_type", s.Type.Name, "size", len(s.Unions), "header_union_ids", ids))
	}
	return out
}

func (e *emitter) fieldLists() []any {
	out := []any{}
	for _, fl := range e.p.FieldLists {
		els := []any{}
		for _, f := range fl.Fields {
			els = append(els, obj("type", "field", "value", []string{f.Header, f.Field}))
		}
		out = append(out, obj("id", fl.ID, "name", fl.Name, "elements", els))
	}
	return out
}

func (e *emitter) meters() []any {
	out := []any{}
	for i, m := range e.p.Meters {
		kind := "packets"
		if m.Bytes {
			kind = "bytes"
		}
		o := obj("name", m.Name, "id", i)
		if si := sourceInfo(m.Loc); si != nil {
			o.add("source_info", si)
		}
		o.add("is_direct", m.Direct)
		o.add("rate_count", 2)
		o.add("type", kind)
		size := m.Size
		if m.Direct {
			size = e.tableSize(m.Table)
			o.add("size", size)
			o.add("binding", m.Table)
			if m.Result != nil {
				o.add("result_target", []string{m.Result.Header, m.Result.Field})
			} else {
				e.fail("direct meter %s is never read; BMv2 needs a field for its result", m.Name)
			}
		} else {
			o.add("size", size)
		}
		out = append(out, o)
	}
	return out
}

func (e *emitter) tableSize(name string) int {
	for _, pl := range e.p.Pipelines {
		for _, t := range pl.Tables {
			if t.Name == name {
				return t.Size
			}
		}
	}
	return 1024
}

func (e *emitter) counters() []any {
	out := []any{}
	for i, c := range e.p.Counters {
		o := obj("name", c.Name, "id", i)
		if si := sourceInfo(c.Loc); si != nil {
			o.add("source_info", si)
		}
		o.add("is_direct", c.Direct)
		if c.Direct {
			o.add("binding", c.Table)
			o.add("size", e.tableSize(c.Table))
		} else {
			o.add("size", c.Size)
		}
		out = append(out, o)
	}
	return out
}

func (e *emitter) registers() []any {
	out := []any{}
	for i, r := range e.p.Registers {
		o := obj("name", r.Name, "id", i)
		if si := sourceInfo(r.Loc); si != nil {
			o.add("source_info", si)
		}
		o.add("size", r.Size)
		o.add("bitwidth", r.Width)
		out = append(out, o)
	}
	return out
}

func (e *emitter) calculations() []any {
	out := []any{}
	for i, c := range e.p.Calculations {
		inputs := []any{}
		for _, in := range c.Inputs {
			if in.Payload {
				inputs = append(inputs, obj("type", "payload", "value", nil))
				continue
			}
			switch x := in.Expr.(type) {
			case *ir.FieldRef:
				inputs = append(inputs, obj("type", "field", "value", []string{x.Header, x.Field}))
			case *ir.Const:
				w := x.T.Width
				if w == 0 {
					w = max(8, x.Value.BitLen())
				}
				inputs = append(inputs, obj("type", "hexstr", "value", hexWidth(x.Value, w), "bitwidth", w))
			default:
				e.fail("calculation %s: input must be a field or a constant", c.Name)
			}
		}
		o := obj("name", c.Name, "id", i)
		if si := sourceInfo(c.Loc); si != nil {
			o.add("source_info", si)
		}
		o.add("algo", c.Algorithm)
		o.add("input", inputs)
		out = append(out, o)
	}
	return out
}

func (e *emitter) learnLists() []any {
	out := []any{}
	for _, ll := range e.p.LearnLists {
		els := []any{}
		for _, f := range ll.Fields {
			if fr, ok := f.(*ir.FieldRef); ok {
				els = append(els, obj("type", "field", "value", []string{fr.Header, fr.Field}))
			}
		}
		out = append(out, obj("id", ll.ID, "name", ll.Name, "elements", els))
	}
	return out
}

func (e *emitter) checksums() []any {
	out := []any{}
	for i, c := range e.p.Checksums {
		o := obj("name", c.Name, "id", i)
		if si := sourceInfo(c.Loc); si != nil {
			o.add("source_info", si)
		}
		o.add("target", []string{c.Target.Header, c.Target.Field})
		o.add("type", "generic")
		o.add("calculation", c.Calculation.Name)
		o.add("verify", c.Verify)
		o.add("update", c.Update)
		if c.Cond != nil {
			o.add("if_cond", e.boolean(c.Cond))
		} else {
			o.add("if_cond", nil)
		}
		out = append(out, o)
	}
	return out
}

// ---- constants ----

// hexWidth formats v as p4c does: two hex digits per byte of the width;
// negative values (of signed types) keep their sign.
func hexWidth(v *big.Int, w int) string {
	digits := 2 * ((w + 7) / 8)
	if digits == 0 {
		digits = 2
	}
	if v.Sign() < 0 {
		return fmt.Sprintf("-0x%0*x", digits, new(big.Int).Neg(v))
	}
	return fmt.Sprintf("0x%0*x", digits, v)
}

func hexConst(c *ir.Const) string {
	w := c.T.Width
	if w == 0 {
		w = c.Value.BitLen()
		if w == 0 {
			w = 1
		}
	}
	return hexWidth(c.Value, w)
}

// ---- parsers ----

func (e *emitter) parser(ps *ir.Parser, id int) object {
	states := []any{}
	for i, st := range ps.States {
		states = append(states, e.parseState(st, i))
	}
	return obj("name", ps.Name, "id", id, "init_state", ps.Init, "parse_states", states)
}

func nextState(n string) any {
	if n == "" || n == ir.RejectState {
		return nil
	}
	return n
}

func (e *emitter) parseState(st *ir.ParseState, id int) object {
	ops := []any{}
	for _, op := range st.Ops {
		ops = append(ops, e.parserOp(op)...)
	}
	keys := []any{}
	var widths []int
	for _, k := range st.Key {
		switch x := k.(type) {
		case *ir.FieldRef:
			keys = append(keys, obj("type", "field", "value", []string{x.Header, x.Field}))
		case *ir.LastField:
			keys = append(keys, obj("type", "stack_field", "value", []string{x.Stack, x.Field}))
		case *ir.Lookahead:
			keys = append(keys, obj("type", "lookahead", "value", []int{x.Offset, x.Width}))
		default:
			e.fail("state %s: unsupported select key", st.Name)
		}
		widths = append(widths, k.Type().Width)
	}
	trans := []any{}
	for _, t := range st.Transitions {
		switch {
		case t.Default:
			trans = append(trans, obj("type", "default", "value", nil, "mask", nil, "next_state", nextState(t.Next)))
		case t.ValueSet != "":
			trans = append(trans, obj("type", "parse_vset", "value", t.ValueSet, "mask", nil, "next_state", nextState(t.Next)))
		default:
			for _, vm := range expandKeyset(t.Keys, widths) {
				var mask any
				if vm.mask != "" {
					mask = vm.mask
				}
				trans = append(trans, obj("type", "hexstr", "value", vm.value, "mask", mask, "next_state", nextState(t.Next)))
			}
		}
	}
	o := obj("name", st.Name, "id", id)
	if si := sourceInfo(st.Loc); si != nil {
		o.add("source_info", si)
	}
	o.add("parser_ops", ops)
	o.add("transitions", trans)
	o.add("transition_key", keys)
	return o
}

type valueMask struct{ value, mask string }

// expandKeyset turns a select case into BMv2 value/mask pairs: each key
// occupies whole bytes, and ranges become several masked values.
func expandKeyset(keys []ir.KeysetElem, widths []int) []valueMask {
	type part struct{ v, m *big.Int }
	alts := [][]part{{}}
	for i, k := range keys {
		w := 0
		if i < len(widths) {
			w = widths[i]
		}
		if w == 0 {
			w = k.Width
		}
		full := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1))
		var opts []part
		switch {
		case k.Wildcard:
			opts = []part{{big.NewInt(0), big.NewInt(0)}}
		case k.Hi != nil:
			for _, pm := range rangeToMasks(k.Value, k.Hi, w) {
				opts = append(opts, part{pm[0], pm[1]})
			}
		case k.Mask != nil:
			opts = []part{{new(big.Int).And(k.Value, k.Mask), new(big.Int).And(k.Mask, full)}}
		default:
			opts = []part{{k.Value, full}}
		}
		var next [][]part
		for _, a := range alts {
			for _, o := range opts {
				n := append(append([]part{}, a...), o)
				next = append(next, n)
			}
		}
		alts = next
	}
	var out []valueMask
	for _, a := range alts {
		value, mask := new(big.Int), new(big.Int)
		needMask := false
		total := 0
		for i, p := range a {
			w := 0
			if i < len(widths) {
				w = widths[i]
			}
			if w == 0 {
				w = keys[i].Width
			}
			bytes := (w + 7) / 8 * 8
			value.Lsh(value, uint(bytes)).Or(value, p.v)
			mask.Lsh(mask, uint(bytes)).Or(mask, p.m)
			full := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1))
			if p.m.Cmp(full) != 0 {
				needMask = true
			}
			total += bytes
		}
		vm := valueMask{value: hexWidth(value, total)}
		if needMask {
			vm.mask = hexWidth(mask, total)
		}
		out = append(out, vm)
	}
	return out
}

// rangeToMasks covers lo..hi with value/mask pairs of aligned blocks.
func rangeToMasks(lo, hi *big.Int, w int) [][2]*big.Int {
	var out [][2]*big.Int
	if lo.Cmp(hi) > 0 {
		return out
	}
	full := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1))
	cur := new(big.Int).Set(lo)
	one := big.NewInt(1)
	for cur.Cmp(hi) <= 0 && len(out) < 4096 {
		// the largest aligned block starting at cur within hi
		size := 0
		for size < w {
			blk := new(big.Int).Lsh(one, uint(size+1))
			if new(big.Int).Mod(cur, blk).Sign() != 0 {
				break
			}
			end := new(big.Int).Add(cur, blk)
			end.Sub(end, one)
			if end.Cmp(hi) > 0 {
				break
			}
			size++
		}
		m := new(big.Int).Xor(full, new(big.Int).Sub(new(big.Int).Lsh(one, uint(size)), one))
		out = append(out, [2]*big.Int{new(big.Int).Set(cur), m})
		cur.Add(cur, new(big.Int).Lsh(one, uint(size)))
	}
	return out
}

func (e *emitter) parserOp(s ir.Stmt) []any {
	switch x := s.(type) {
	case *ir.Extract:
		var target any
		switch {
		case x.Stack != "" && x.Member != "":
			target = obj("type", "union_stack", "value", []string{x.Stack, x.Member})
		case x.Stack != "":
			target = obj("type", "stack", "value", x.Stack)
		default:
			target = obj("type", "regular", "value", x.Header)
		}
		if x.VarbitBits != nil {
			return []any{obj("parameters", []any{target, obj("type", "expression", "value", e.data(x.VarbitBits))}, "op", "extract_VL")}
		}
		return []any{obj("parameters", []any{target}, "op", "extract")}
	case *ir.Assign:
		if _, ok := x.Dst.(*ir.FieldRef); ok {
			dst := e.data(x.Dst)
			var src any
			switch y := x.Src.(type) {
			case *ir.Lookahead:
				src = obj("type", "lookahead", "value", []int{y.Offset, y.Width})
			case *ir.FieldRef, *ir.Const:
				src = e.data(y)
			default:
				src = obj("type", "expression", "value", e.data(y))
			}
			if x.Dst.Type().Varbit {
				break
			}
			return []any{obj("parameters", []any{dst, src}, "op", "set")}
		}
	case *ir.Verify:
		var errv any
		if x.ErrorExpr != nil {
			errv = e.data(x.ErrorExpr)
		} else {
			errv = obj("type", "hexstr", "value", hexWidth(big.NewInt(int64(x.Error)), 32))
		}
		return []any{obj("parameters", []any{e.boolean(x.Cond), errv}, "op", "verify")}
	case *ir.Advance:
		return []any{obj("parameters", []any{e.data(x.Bits)}, "op", "advance")}
	}
	// anything else runs as an action primitive
	var out []any
	for _, p := range e.primitives([]ir.Stmt{s}) {
		out = append(out, obj("parameters", []any{p}, "op", "primitive"))
	}
	return out
}

// ---- actions ----

func (e *emitter) actions() []any {
	out := []any{}
	for i, a := range e.p.Actions {
		rd := []any{}
		for _, p := range a.Params {
			w := p.Width
			if p.DeviceWidth != 0 {
				w = p.DeviceWidth // the value as the data plane holds it
			}
			rd = append(rd, obj("name", p.Name, "bitwidth", w))
		}
		o := obj("name", a.Name, "id", i, "runtime_data", rd, "primitives", e.primitives(a.Body))
		out = append(out, o)
	}
	return out
}

// ---- pipelines ----

func nodeName(n ir.Node) any {
	switch x := n.(type) {
	case *ir.Table:
		return x.Name
	case *ir.Conditional:
		return x.Name
	}
	return nil
}

func (e *emitter) pipeline(pl *ir.Pipeline, id int) object {
	o := obj("name", pl.Name, "id", id)
	if si := sourceInfo(pl.Loc); si != nil {
		o.add("source_info", si)
	}
	o.add("init_table", nodeName(pl.Init))
	tables := []any{}
	for _, t := range pl.Tables {
		tables = append(tables, e.table(t, e.tableSeq))
		e.tableSeq++
	}
	o.add("tables", tables)
	profiles := []any{}
	for _, ap := range pl.Profiles {
		po := obj("name", ap.Name, "id", e.profileSeq, "max_size", ap.Size)
		e.profileSeq++
		if ap.Selector != nil {
			in := []any{}
			for _, x := range ap.Selector.Input {
				in = append(in, e.data(x))
			}
			po.add("selector", obj("algo", ap.Selector.Algorithm, "input", in))
		}
		profiles = append(profiles, po)
	}
	o.add("action_profiles", profiles)
	conds := []any{}
	for _, c := range pl.Conditionals {
		co := obj("name", c.Name, "id", e.condSeq)
		e.condSeq++
		if si := sourceInfo(c.Loc); si != nil {
			co.add("source_info", si)
		}
		co.add("expression", e.boolean(c.Cond))
		co.add("true_next", nodeName(c.True))
		co.add("false_next", nodeName(c.False))
		conds = append(conds, co)
	}
	o.add("conditionals", conds)
	return o
}

func bmv2Match(k ir.MatchKind) string {
	if k == ir.MatchOptional {
		return "ternary"
	}
	return string(k)
}

func (e *emitter) table(t *ir.Table, id int) object {
	o := obj("name", t.Name, "id", id)
	if si := sourceInfo(t.Loc); si != nil {
		o.add("source_info", si)
	}
	keys := []any{}
	overall := "exact"
	rank := map[string]int{"exact": 0, "lpm": 1, "ternary": 2, "range": 3}
	for _, k := range t.Key {
		var target any
		switch x := k.Expr.(type) {
		case *ir.FieldRef:
			target = []string{x.Header, x.Field}
		case *ir.Valid:
			target = []string{x.Header, "$valid$"}
		default:
			e.fail("table %s: unsupported key", t.Name)
		}
		mt := bmv2Match(k.Match)
		if mt == "selector" {
			continue
		}
		if rank[mt] > rank[overall] {
			overall = mt
		}
		var mask any
		if k.Mask != nil {
			mask = hexWidth(k.Mask, k.Width)
		}
		keys = append(keys, obj("match_type", mt, "name", k.Name, "target", target, "mask", mask))
	}
	o.add("key", keys)
	o.add("match_type", overall)
	kind := "simple"
	if t.Implementation != nil {
		kind = "indirect"
		if t.Implementation.Selector != nil {
			kind = "indirect_ws"
		}
	}
	o.add("type", kind)
	if t.Implementation != nil {
		o.add("action_profile", t.Implementation.Name)
	}
	o.add("max_size", t.Size)
	o.add("with_counters", t.DirectCounter != nil)
	o.add("support_timeout", t.SupportTimeout)
	if t.DirectMeter != nil {
		o.add("direct_meters", t.DirectMeter.Name)
	} else {
		o.add("direct_meters", nil)
	}
	ids := []int{}
	names := []string{}
	for _, r := range t.Actions {
		ids = append(ids, e.actionID[r.Action])
		names = append(names, r.Action.Name)
	}
	o.add("action_ids", ids)
	o.add("actions", names)
	o.add("base_default_next", nodeName(t.BaseNext))
	next := object{}
	if t.UseHitMiss {
		next.add("__HIT__", nodeName(t.HitNext))
		next.add("__MISS__", nodeName(t.MissNext))
	} else {
		for _, r := range t.Actions {
			n, ok := t.NextByAction[r.Action]
			if !ok {
				n = t.BaseNext
			}
			next.add(r.Action.Name, nodeName(n))
		}
	}
	o.add("next_tables", next)
	// A table with an action profile or selector has no default entry in
	// BMv2 (it refuses one that is const); p4c leaves it out.
	if t.Default != nil && t.Default.Action != nil && t.Implementation == nil {
		data := []string{}
		for i, v := range t.Default.Args {
			w := 32
			if i < len(t.Default.Action.Params) {
				w = t.Default.Action.Params[i].Width
			}
			data = append(data, hexWidth(v, w))
		}
		o.add("default_entry", obj("action_id", e.actionID[t.Default.Action], "action_const", t.Default.Const,
			"action_data", data, "action_entry_const", t.Default.Const))
	}
	if len(t.Entries) > 0 {
		entries := []any{}
		for _, en := range t.Entries {
			entries = append(entries, e.entry(t, en))
		}
		o.add("entries", entries)
	}
	return o
}

func (e *emitter) entry(t *ir.Table, en *ir.Entry) object {
	mk := []any{}
	for i, k := range en.Keys {
		w := k.Width
		switch k.Match {
		case ir.MatchExact:
			mk = append(mk, obj("match_type", "exact", "key", hexWidth(k.Value, w)))
		case ir.MatchTernary, ir.MatchOptional:
			mask := k.Mask
			if mask == nil {
				mask = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1))
			}
			mk = append(mk, obj("match_type", "ternary", "key", hexWidth(k.Value, w), "mask", hexWidth(mask, w)))
		case ir.MatchLPM:
			mk = append(mk, obj("match_type", "lpm", "key", hexWidth(k.Value, w), "prefix_length", k.PrefixLen))
		case ir.MatchRange:
			mk = append(mk, obj("match_type", "range", "start", hexWidth(k.Value, w), "end", hexWidth(k.Hi, w)))
		default:
			e.fail("table %s: key %d has an unsupported match kind for entries", t.Name, i)
		}
	}
	data := []string{}
	if en.Action != nil {
		for i, v := range en.Args {
			w := 32
			if i < len(en.Action.Params) {
				w = en.Action.Params[i].Width
			}
			data = append(data, hexWidth(v, w))
		}
	}
	o := object{}
	if si := sourceInfo(en.Loc); si != nil {
		o.add("source_info", si)
	}
	o.add("match_key", mk)
	o.add("action_entry", obj("action_id", e.actionID[en.Action], "action_data", data))
	o.add("priority", en.Priority)
	return o
}
