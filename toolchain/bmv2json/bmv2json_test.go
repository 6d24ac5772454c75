package bmv2json

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/ir"
)

func TestHexWidth(t *testing.T) {
	tests := []struct {
		v    int64
		w    int
		want string
	}{
		{0, 9, "0x0000"},
		{1, 8, "0x01"},
		{255, 16, "0x00ff"},
		{-1, 8, "-0x01"},
		{0x123, 12, "0x0123"},
		{5, 0, "0x05"},
	}
	for _, tc := range tests {
		if got := hexWidth(big.NewInt(tc.v), tc.w); got != tc.want {
			t.Errorf("hexWidth(%d, %d) = %s, want %s", tc.v, tc.w, got, tc.want)
		}
	}
}

func TestRangeToMasks(t *testing.T) {
	// every value in lo..hi must be matched by exactly one pair, and no
	// other value by any
	for _, r := range [][2]int64{{0, 255}, {1, 10}, {3, 3}, {5, 200}, {0, 0}, {128, 255}} {
		pairs := rangeToMasks(big.NewInt(r[0]), big.NewInt(r[1]), 8)
		for v := int64(0); v < 256; v++ {
			n := 0
			for _, p := range pairs {
				if new(big.Int).And(big.NewInt(v), p[1]).Cmp(p[0]) == 0 {
					n++
				}
			}
			want := 0
			if v >= r[0] && v <= r[1] {
				want = 1
			}
			if n != want {
				t.Errorf("range %v: value %d matched by %d pairs", r, v, n)
				break
			}
		}
	}
}

func TestExpandKeyset(t *testing.T) {
	keys := []ir.KeysetElem{{Value: big.NewInt(0x12), Width: 8}, {Value: big.NewInt(3), Mask: big.NewInt(0xf), Width: 12}}
	got := expandKeyset(keys, []int{8, 12})
	if len(got) != 1 || got[0].value != "0x120003" || got[0].mask != "0xff000f" {
		t.Errorf("two keys: %+v", got)
	}
	plain := expandKeyset([]ir.KeysetElem{{Value: big.NewInt(0x800), Width: 16}}, []int{16})
	if len(plain) != 1 || plain[0].value != "0x0800" || plain[0].mask != "" {
		t.Errorf("exact key: %+v", plain)
	}
	rng := expandKeyset([]ir.KeysetElem{{Value: big.NewInt(2), Hi: big.NewInt(5), Width: 8}}, []int{8})
	if len(rng) != 2 || rng[0].value != "0x02" || rng[0].mask != "0xfe" || rng[1].value != "0x04" {
		t.Errorf("range 2..5: %+v", rng)
	}
}

func f8(h, f string) *ir.FieldRef { return &ir.FieldRef{Header: h, Field: f, T: ir.Bits(8, false)} }
func c8(v int64) *ir.Const        { return &ir.Const{Value: big.NewInt(v), T: ir.Bits(8, false)} }

// primitives renders an action body and decodes it for inspection.
func primitivesOf(t *testing.T, body []ir.Stmt) []map[string]any {
	t.Helper()
	e := &emitter{p: &ir.Program{}}
	b, err := json.Marshal(e.primitives(body))
	if err != nil || len(e.errs) > 0 {
		t.Fatalf("marshal: %v %v", err, e.errs)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func ops(ps []map[string]any) string {
	var s []string
	for _, p := range ps {
		s = append(s, p["op"].(string))
	}
	return strings.Join(s, " ")
}

func target(p map[string]any) string {
	params := p["parameters"].([]any)
	return params[len(params)-1].(map[string]any)["value"].(string)
}

func TestControlFlowInActions(t *testing.T) {
	cond := &ir.Binary{Op: "==", X: f8("h", "a"), Y: c8(1), T: ir.BoolType}
	// if (cond) { a = 2 } else { a = 3 }; b = 4
	ps := primitivesOf(t, []ir.Stmt{
		&ir.If{Cond: cond, Then: []ir.Stmt{&ir.Assign{Dst: f8("h", "a"), Src: c8(2)}}, Else: []ir.Stmt{&ir.Assign{Dst: f8("h", "a"), Src: c8(3)}}},
		&ir.Assign{Dst: f8("h", "b"), Src: c8(4)},
	})
	if ops(ps) != "_jump_if_zero assign _jump assign assign" {
		t.Fatalf("if/else: %s", ops(ps))
	}
	if target(ps[0]) != "0x3" || target(ps[2]) != "0x4" {
		t.Errorf("if/else targets: %s %s", target(ps[0]), target(ps[2]))
	}
	// block with an early leave, then exit
	ps = primitivesOf(t, []ir.Stmt{
		&ir.Block{Label: 1, Body: []ir.Stmt{&ir.Leave{Label: 1}, &ir.Assign{Dst: f8("h", "a"), Src: c8(1)}}},
		&ir.Exit{},
		&ir.Assign{Dst: f8("h", "b"), Src: c8(2)},
	})
	if ops(ps) != "_jump assign exit _jump assign" {
		t.Fatalf("block/exit: %s", ops(ps))
	}
	if target(ps[0]) != "0x2" || target(ps[3]) != "0x5" {
		t.Errorf("leave must jump past the block (2), exit to the end (5): %s %s", target(ps[0]), target(ps[3]))
	}
	// loop: while (cond) { if (cond) break; continue; } update
	ps = primitivesOf(t, []ir.Stmt{&ir.Loop{Cond: cond,
		Body:   []ir.Stmt{&ir.If{Cond: cond, Then: []ir.Stmt{&ir.Break{}}}, &ir.Continue{}},
		Update: []ir.Stmt{&ir.Assign{Dst: f8("h", "a"), Src: c8(0)}}}})
	if ops(ps) != "_jump_if_zero _jump_if_zero _jump _jump assign _jump" {
		t.Fatalf("loop: %s", ops(ps))
	}
	if target(ps[0]) != "0x6" || target(ps[2]) != "0x6" || target(ps[3]) != "0x4" || target(ps[5]) != "0x0" {
		t.Errorf("loop targets: exit %s, break %s, continue %s, back %s", target(ps[0]), target(ps[2]), target(ps[3]), target(ps[5]))
	}
}

func TestBoolDataConversions(t *testing.T) {
	e := &emitter{p: &ir.Program{}}
	valid := &ir.Valid{Header: "h"}
	b, _ := json.Marshal(e.data(valid))
	if !strings.Contains(string(b), `"op":"b2d"`) || !strings.Contains(string(b), `"$valid$"`) {
		t.Errorf("a validity test used as data needs b2d: %s", b)
	}
	b, _ = json.Marshal(e.boolean(f8("h", "a")))
	if !strings.Contains(string(b), `"op":"d2b"`) {
		t.Errorf("a field used as a condition needs d2b: %s", b)
	}
	// b2d(d2b(x)) collapses
	b, _ = json.Marshal(e.data(&ir.BitToBool{X: f8("h", "a")}))
	if string(b) != `{"type":"field","value":["h","a"]}` {
		t.Errorf("round trip not collapsed: %s", b)
	}
	b, _ = json.Marshal(e.node(&ir.SignWrap{X: &ir.Binary{Op: "+", X: f8("h", "a"), Y: c8(1), T: ir.Bits(8, true)}, T: ir.Bits(8, true)}))
	if !strings.Contains(string(b), `"op":"two_comp_mod"`) {
		t.Errorf("signed wrap: %s", b)
	}
}

// An action parameter is "runtime_data" as a primitive's own parameter and
// "local" inside an expression: BMv2 rejects "runtime_data" there, so a
// program comparing or adding a parameter did not load on simple_switch.
func TestActionParameterInsideAnExpressionIsLocal(t *testing.T) {
	v := &ir.ActionParam{Index: 0, T: ir.Bits(8, false)}
	tests := []struct {
		name, want, not string
		body            []ir.Stmt
	}{
		{"copied", `{"type":"runtime_data","value":0}`, `"local"`,
			[]ir.Stmt{&ir.Assign{Dst: f8("h", "a"), Src: v}}},
		{"added", `"left":{"type":"local","value":0}`, `"runtime_data"`,
			[]ir.Stmt{&ir.Assign{Dst: f8("h", "a"), Src: &ir.Binary{Op: "+", X: v, Y: c8(1), T: ir.Bits(8, false)}}}},
		{"compared", `"right":{"type":"local","value":0}`, `"runtime_data"`,
			[]ir.Stmt{&ir.If{Cond: &ir.Binary{Op: "==", X: f8("h", "a"), Y: v, T: ir.BoolType},
				Then: []ir.Stmt{&ir.Assign{Dst: f8("h", "b"), Src: c8(1)}}}}},
		{"chosen", `"right":{"type":"local","value":0}`, `"runtime_data"`,
			[]ir.Stmt{&ir.Assign{Dst: f8("h", "a"), Src: &ir.Mux{Cond: &ir.Binary{Op: "==", X: f8("h", "b"), Y: c8(0), T: ir.BoolType},
				Then: c8(1), Else: v, T: ir.Bits(8, false)}}}},
	}
	for _, tc := range tests {
		b, _ := json.Marshal(primitivesOf(t, tc.body))
		if !strings.Contains(string(b), tc.want) || strings.Contains(string(b), tc.not) {
			t.Errorf("%s: want %s and no %s in %s", tc.name, tc.want, tc.not, b)
		}
	}
}

func TestProgramDocument(t *testing.T) {
	ht := &ir.HeaderType{Name: "h_t", Fields: []ir.HeaderField{{Name: "a", Width: 8}, {Name: "opt", Width: 32, Varbit: true}}}
	act := &ir.Action{Name: "ingress.set", Params: []ir.ActionParamDecl{{Name: "v", Width: 8}},
		Body: []ir.Stmt{&ir.Assign{Dst: f8("h", "a"), Src: &ir.ActionParam{Index: 0, T: ir.Bits(8, false)}}}}
	cond := &ir.Conditional{Name: "node_1", Cond: &ir.Valid{Header: "h"}}
	tbl := &ir.Table{Name: "ingress.t", Size: 16, Key: []ir.KeyField{{Name: "h.a", Match: ir.MatchTernary, Expr: f8("h", "a"), Width: 8}},
		Actions: []ir.ActionRef{{Action: act}}, Default: &ir.DefaultEntry{Action: act, Args: []*big.Int{big.NewInt(7)}},
		Entries:    []*ir.Entry{{Keys: []ir.EntryKey{{Match: ir.MatchTernary, Value: big.NewInt(1), Mask: big.NewInt(0xf), Width: 8}}, Action: act, Args: []*big.Int{big.NewInt(2)}, Priority: 1}},
		UseHitMiss: true, HitNext: cond}
	cond.True, cond.False = nil, nil
	p := &ir.Program{
		SourceFile:  "x.p4",
		HeaderTypes: []*ir.HeaderType{ht},
		Headers:     []*ir.Header{{Name: "h", Type: ht}},
		Errors:      []ir.ErrorCode{{Name: "NoError", Value: 0}},
		Parsers: []*ir.Parser{{Name: "parser", Init: "start", States: []*ir.ParseState{{Name: "start",
			Ops: []ir.Stmt{&ir.Extract{Header: "h", VarbitBits: f8("scalars", "len")}},
			Key: []ir.Expr{f8("h", "a")}, Transitions: []ir.Transition{{Keys: []ir.KeysetElem{{Value: big.NewInt(1), Width: 8}}, Next: "start"}, {Default: true, Next: ir.RejectState}}}}}},
		Actions:   []*ir.Action{act},
		Pipelines: []*ir.Pipeline{{Name: "ingress", Init: tbl, Tables: []*ir.Table{tbl}, Conditionals: []*ir.Conditional{cond}}, {Name: "egress"}},
	}
	out, err := Emit(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		HeaderTypes []struct {
			Fields    [][]any `json:"fields"`
			MaxLength int     `json:"max_length"`
		} `json:"header_types"`
		Parsers []struct {
			States []struct {
				Ops []struct {
					Op string `json:"op"`
				} `json:"parser_ops"`
				Transitions []struct {
					Type string  `json:"type"`
					Next *string `json:"next_state"`
				} `json:"transitions"`
			} `json:"parse_states"`
		} `json:"parsers"`
		Pipelines []struct {
			Init   *string `json:"init_table"`
			Tables []struct {
				ID           int            `json:"id"`
				MatchType    string         `json:"match_type"`
				NextTables   map[string]any `json:"next_tables"`
				DefaultEntry struct {
					ActionData []string `json:"action_data"`
				} `json:"default_entry"`
				Entries []struct {
					Priority int `json:"priority"`
				} `json:"entries"`
			} `json:"tables"`
		} `json:"pipelines"`
		Meta struct {
			Version []int `json:"version"`
		} `json:"__meta__"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.HeaderTypes[0].Fields[1][1] != "*" || doc.HeaderTypes[0].MaxLength != 5 {
		t.Errorf("varbit field: %v, max_length %d", doc.HeaderTypes[0].Fields, doc.HeaderTypes[0].MaxLength)
	}
	st := doc.Parsers[0].States[0]
	if st.Ops[0].Op != "extract_VL" || st.Transitions[0].Type != "hexstr" || st.Transitions[1].Next != nil {
		t.Errorf("parser state: %+v", st)
	}
	tb := doc.Pipelines[0].Tables[0]
	if tb.MatchType != "ternary" || tb.NextTables["__HIT__"] != "node_1" || tb.DefaultEntry.ActionData[0] != "0x07" || tb.Entries[0].Priority != 1 {
		t.Errorf("table: %+v", tb)
	}
	if doc.Meta.Version[0] != 2 || doc.Meta.Version[1] != 23 {
		t.Errorf("version %v", doc.Meta.Version)
	}
}

// TestLogMsgItemsAreParameters: BMv2 reads each item of log_msg's
// parameters_vector as a parameter of its own, so action data is
// "runtime_data" there and an expression takes the parameter's second
// "expression" wrapper (one wrapper made BMv2 refuse the program).
func TestLogMsgItemsAreParameters(t *testing.T) {
	va := &ir.ActionParam{Index: 0, T: ir.Bits(8, false)}
	sum := &ir.Binary{Op: "+", X: f8("h", "a"), Y: va, T: ir.Bits(8, false)}
	ps := primitivesOf(t, []ir.Stmt{&ir.Primitive{Name: "log_msg", Args: []ir.Arg{{Kind: ir.ArgString, Name: "{} {}"},
		{Kind: ir.ArgExprList, List: []ir.Expr{va, sum}}}}})
	params := ps[0]["parameters"].([]any)
	got, _ := json.Marshal(params[len(params)-1])
	want := `{"type":"parameters_vector","value":[{"type":"runtime_data","value":0},` +
		`{"type":"expression","value":{"type":"expression","value":{"left":{"type":"field","value":["h","a"]},"op":"+","right":{"type":"local","value":0}}}}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
