package difftest

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/stf"
)

// A parser: port (ingress_port 7 or not) -> start: eth (16-bit type) ->
// 0x0800: l3 (an 8-bit field under a mask, a verify on another) -> 0x3_:
// l4 (a lookahead of the next byte) -> 0xab: l5.
const genProgram = `{
 "header_types": [
  {"name": "scalars_0", "fields": [["tmp", 1, false]]},
  {"name": "standard_metadata", "fields": [["ingress_port", 9, false]]},
  {"name": "eth_t", "fields": [["type", 16, false]]},
  {"name": "l3_t", "fields": [["kind", 8, false], ["version", 4, false], ["rest", 4, false]]},
  {"name": "l4_t", "fields": [["x", 8, false]]},
  {"name": "l5_t", "fields": [["y", 8, false]]}
 ],
 "headers": [
  {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": true},
  {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": true},
  {"name": "eth", "id": 2, "header_type": "eth_t", "metadata": false},
  {"name": "l3", "id": 3, "header_type": "l3_t", "metadata": false},
  {"name": "l4", "id": 4, "header_type": "l4_t", "metadata": false},
  {"name": "l5", "id": 5, "header_type": "l5_t", "metadata": false}
 ],
 "header_stacks": [],
 "parsers": [{"name": "parser", "init_state": "port", "parse_states": [
  {"name": "port", "parser_ops": [],
   "transitions": [{"type": "hexstr", "value": "0x0007", "mask": null, "next_state": "start"},
                   {"type": "default", "value": null, "mask": null, "next_state": "start"}],
   "transition_key": [{"type": "field", "value": ["standard_metadata", "ingress_port"]}]},
  {"name": "start", "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "eth"}]}],
   "transitions": [{"type": "hexstr", "value": "0x0800", "mask": null, "next_state": "l3"},
                   {"type": "default", "value": null, "mask": null, "next_state": null}],
   "transition_key": [{"type": "field", "value": ["eth", "type"]}]},
  {"name": "l3", "parser_ops": [
     {"op": "extract", "parameters": [{"type": "regular", "value": "l3"}]},
     {"op": "set", "parameters": [{"type": "field", "value": ["scalars", "tmp"]},
        {"type": "expression", "value": {"type": "expression", "value": {"op": "b2d", "left": null, "right":
          {"type": "expression", "value": {"op": "==", "left": {"type": "field", "value": ["l3", "version"]}, "right": {"type": "hexstr", "value": "0x04"}}}}}}]},
     {"op": "verify", "parameters": [{"type": "expression", "value": {"op": "d2b", "left": null, "right": {"type": "field", "value": ["scalars", "tmp"]}}}, {"type": "hexstr", "value": "0x7"}]}],
   "transitions": [{"type": "hexstr", "value": "0x30", "mask": "0xf0", "next_state": "l4"},
                   {"type": "default", "value": null, "mask": null, "next_state": null}],
   "transition_key": [{"type": "field", "value": ["l3", "kind"]}]},
  {"name": "l4", "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "l4"}]}],
   "transitions": [{"type": "hexstr", "value": "0xab", "mask": null, "next_state": "l5"},
                   {"type": "default", "value": null, "mask": null, "next_state": null}],
   "transition_key": [{"type": "lookahead", "value": [0, 8]}]},
  {"name": "l5", "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "l5"}]}],
   "transitions": [{"type": "default", "value": null, "mask": null, "next_state": null}],
   "transition_key": []}
 ]}]
}`

// The walk reaches the states behind the selects: the case values land in
// the key fields (under their masks), verify conditions hold, and a select
// on the ingress port picks the port.
func TestGeneratorSteersSelects(t *testing.T) {
	g, err := NewGenerator([]byte(genProgram), []uint32{1, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 2000
	var deep, deeper, verified, port7 int
	for i := 0; i < n; i++ {
		data, port := g.walk(r, nil, 1)
		if port == 7 {
			port7++
		} else if port != 1 {
			t.Fatalf("port %d: neither the given port nor the select's", port)
		}
		if len(data) >= 4 && data[0] == 0x08 && data[1] == 0x00 {
			if data[3]>>4 == 4 {
				verified++
			}
			if data[2]&0xf0 == 0x30 {
				deep++
				if len(data) >= 6 && data[5] == 0xab {
					deeper++
				}
			}
		}
	}
	// Each select has two cases (taken about half the time each): about
	// n/4 packets reach l4, n/8 l5 (the lookahead's byte is pinned before
	// l4's extract lays it down); the verify holds in nine tenths of those
	// that reach l3 (plus chance).
	for _, c := range []struct {
		what     string
		got, min int
	}{{"reach l4", deep, n / 6}, {"reach l5", deeper, n / 12}, {"pass the verify", verified, n / 3}, {"select port 7", port7, n / 3}} {
		if c.got < c.min {
			t.Errorf("%d of %d walks %s, want at least %d", c.got, n, c.what, c.min)
		}
	}
}

// A walk that takes a select's default makes the key miss every case,
// though fields are often given the program's constants (0x30 here).
func TestGeneratorDefaultMissesCases(t *testing.T) {
	g, err := NewGenerator([]byte(genProgram), []uint32{1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		r := rand.New(rand.NewPCG(uint64(i), 3))
		w := &walker{r: r, buf: []byte{0x08, 0x00, 0x30 | byte(i%16), 0x45}, pos: 32,
			where: map[string]int{"eth": 0, "l3": 16}, next: map[string]int{}, port: 1,
			sets: map[string]expr{}, pinned: map[int]bool{}}
		g.avoid(w, g.states["l3"])
		if w.buf[2]&0xf0 == 0x30 {
			t.Fatalf("l3's default taken with kind %#x, which its case 0x3_ matches", w.buf[2])
		}
		if w.buf[0] != 0x08 || w.buf[1] != 0x00 || w.buf[3] != 0x45 {
			t.Fatalf("bits outside the key changed: % x", w.buf)
		}
	}
}

// The same seed gives the same packets; another seed others.
func TestGeneratorIsSeeded(t *testing.T) {
	g, err := NewGenerator([]byte(genProgram), []uint32{1, 2, 3}, [][]byte{{0x08, 0x00, 0x31, 0x45, 0x99}})
	if err != nil {
		t.Fatal(err)
	}
	stream := func(seed uint64) string {
		r := rand.New(rand.NewPCG(seed, seed))
		var sb strings.Builder
		for i := 0; i < 50; i++ {
			p := g.Next(r)
			sb.WriteString(p.Kind)
			sb.WriteByte(byte('0' + p.Port))
			sb.Write(p.Data)
		}
		return sb.String()
	}
	if stream(5) != stream(5) {
		t.Error("one seed, two streams")
	}
	if stream(5) == stream(6) {
		t.Error("two seeds, one stream")
	}
}

// plan keeps the script's control commands in order, drops its
// expectations, keeps its packets, and puts the random packets before the
// first packet after each change of the tables.
func TestPlan(t *testing.T) {
	script := `add t k:1 a()
packet 1 0800
expect 2 0800
packet 1 0801
add t k:2 a()
setdefault t b()
packet 2 0802
expect 2 0802
check_counter c(0) packets == 1
add t k:3 a()
`
	cmds, err := stf.ParseScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	seq, packets, err := plan([]byte(genProgram), cmds, 9, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, c := range seq {
		if c.Op != "packet" {
			shape = append(shape, c.Text)
			continue
		}
		if c.Line != 0 {
			shape = append(shape, "stf:"+c.Data)
		} else if n := len(shape); n > 0 && shape[n-1] == "random" {
			continue
		} else {
			shape = append(shape, "random")
		}
	}
	want := []string{"add t k:1 a()", "random", "stf:0800", "stf:0801", "add t k:2 a()", "setdefault t b()",
		"random", "stf:0802", "add t k:3 a()", "random"}
	if strings.Join(shape, " | ") != strings.Join(want, " | ") {
		t.Errorf("sequence\n %s\nwant\n %s", strings.Join(shape, " | "), strings.Join(want, " | "))
	}
	random := 0
	for _, p := range packets {
		if p.Kind != "stf" {
			random++
			if p.Port != 1 && p.Port != 2 && p.Port != 7 {
				t.Errorf("random packet on port %d, not one the script uses", p.Port)
			}
		}
	}
	if random != 9 || len(packets) != 12 {
		t.Errorf("%d random packets of %d, want 9 of 12", random, len(packets))
	}
}
