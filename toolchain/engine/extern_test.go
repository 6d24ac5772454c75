package engine

import (
	"bytes"
	"testing"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

func named(kind, name string) map[string]any { return map[string]any{"type": kind, "value": name} }

// TestMeterColours checks two-rate three-colour metering against hand-worked
// RFC 2698 cases, with BMv2's token arithmetic (meters.cpp): buckets refill
// from the time origin in whole microseconds; the peak bucket is checked
// first; a yellow packet still takes peak tokens; a red one takes none.
func TestMeterColours(t *testing.T) {
	var nowNs int64
	clock := func() int64 { return nowNs }
	type pkt struct {
		atUs  int64
		color byte
	}
	cases := []struct {
		name string
		unit string
		cfg  *pipeline.MeterConfig
		size int
		pkts []pkt
	}{
		{"packets", "packets", &pipeline.MeterConfig{CIR: 1000, CBurst: 2, PIR: 2000, PBurst: 3}, 1, []pkt{
			{0, ColorGreen}, {0, ColorGreen}, {0, ColorYellow}, {0, ColorRed},
			// +1 ms: 2 peak tokens, 1 committed token
			{1000, ColorGreen}, {1000, ColorYellow}, {1000, ColorRed},
			// +4 ms more: both buckets full again (3 and 2)
			{5000, ColorGreen}, {5000, ColorGreen}, {5000, ColorYellow}, {5000, ColorRed},
		}},
		{"bytes", "bytes", &pipeline.MeterConfig{CIR: 1000, CBurst: 100, PIR: 2000, PBurst: 200}, 60, []pkt{
			{0, ColorGreen}, {0, ColorYellow}, {0, ColorYellow}, {0, ColorRed},
			// +30 ms: +60 peak bytes (20+60=80), +30 committed (40+30=70)
			{30000, ColorGreen},
		}},
		{"unconfigured is green", "packets", nil, 1, []pkt{{0, ColorGreen}, {0, ColorGreen}, {0, ColorGreen}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nowNs = 0
			tp := testProg{
				fields: [][]any{u("c", 8)},
				prims:  []any{tPrim("execute_meter", named("meter_array", "m"), tH("0x2"), tF("h", "c"))},
				extra:  map[string]any{"meter_arrays": []any{map[string]any{"name": "m", "id": 0, "type": tc.unit, "rate_count": 2, "size": 4, "is_direct": false}}},
			}
			pl := tp.load(t, Options{Clock: clock})
			if err := pl.SetMeter(0, 2, tc.cfg); err != nil {
				t.Fatal(err)
			}
			got, _ := pl.Meter(0, 2)
			if (got == nil) != (tc.cfg == nil) || (got != nil && *got != *tc.cfg) {
				t.Errorf("Meter read back %+v, want %+v", got, tc.cfg)
			}
			for i, p := range tc.pkts {
				nowNs = p.atUs * 1000
				in := make([]byte, tc.size)
				out := run1(t, pl, in)
				if out[0] != p.color {
					t.Errorf("packet %d at %d us: colour %d, want %d", i, p.atUs, out[0], p.color)
				}
			}
		})
	}
	t.Run("bad config", func(t *testing.T) {
		tp := testProg{fields: [][]any{u("c", 8)}, extra: map[string]any{"meter_arrays": []any{map[string]any{"name": "m", "id": 0, "type": "bytes", "rate_count": 2, "size": 1, "is_direct": false}}}}
		pl := tp.load(t, Options{})
		if err := pl.SetMeter(0, 0, &pipeline.MeterConfig{CIR: 10, PIR: 5}); ErrorCodeOf(err) != CodeInvalidArgument {
			t.Errorf("PIR < CIR accepted: %v", err)
		}
		if err := pl.SetMeter(0, 1, &pipeline.MeterConfig{}); ErrorCodeOf(err) != CodeOutOfRange {
			t.Errorf("index out of range: %v", err)
		}
	})
}

// TestDirectMeterAndCounter: a table's direct meter colours packets of the
// entry they hit, its direct counter counts them (bytes as received).
func TestDirectMeterAndCounter(t *testing.T) {
	var nowNs int64
	tp := testProg{
		fields:    [][]any{u("k", 8), u("c", 8)},
		keys:      []any{keyDef("exact", "k")},
		actions:   []map[string]any{{"name": "fwd", "id": 1, "runtime_data": []any{}, "primitives": []any{tAssign(tF("standard_metadata", "egress_spec"), tH("0x2"))}}},
		tableMore: map[string]any{"with_counters": true, "direct_meters": "dm"},
		extra: map[string]any{
			"meter_arrays":   []any{map[string]any{"name": "dm", "id": 0, "type": "packets", "rate_count": 2, "size": 1024, "is_direct": true, "binding": "ingress.t", "result_target": []string{"h", "c"}}},
			"counter_arrays": []any{map[string]any{"name": "dc", "id": 0, "size": 1024, "is_direct": true, "binding": "ingress.t"}},
		},
	}
	pl := tp.load(t, Options{Clock: func() int64 { return nowNs }})
	tid, _ := pl.Lookup(KindTable, "ingress.t")
	m := []pipeline.Match{{Value: []byte{5}}}
	cfg := &pipeline.MeterConfig{CIR: 1, CBurst: 1, PIR: 1, PBurst: 2}
	if err := pl.AddEntry(tid, pipeline.TableEntry{Match: m, Action: pipeline.ActionCall{ActionID: 1}, Meter: cfg}); err != nil {
		t.Fatal(err)
	}
	want := []byte{ColorGreen, ColorYellow, ColorRed}
	for i, w := range want {
		out := process(pl, []byte{5, 0, 0xee, 0xee}, 0)
		if len(out) != 1 || out[0].port != 2 || out[0].frame[1] != w {
			t.Errorf("packet %d: %v, want colour %d on port 2", i, out, w)
		}
	}
	process(pl, []byte{6, 0}, 0) // a miss is not counted
	d, err := pl.ReadDirectCounter(tid, m, 0)
	if err != nil || d.Packets != 3 || d.Bytes != 12 {
		t.Errorf("direct counter %+v, %v; want 3 packets, 12 bytes", d, err)
	}
	if err := pl.WriteDirectCounter(tid, m, 0, pipeline.CounterData{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := pl.DirectMeter(tid, m, 0); got == nil || *got != *cfg {
		t.Errorf("direct meter config %+v", got)
	}
	// Modifying the entry keeps its counter.
	process(pl, []byte{5, 0}, 0)
	if err := pl.ModifyEntry(tid, pipeline.TableEntry{Match: m, Action: pipeline.ActionCall{ActionID: 0}}); err != nil {
		t.Fatal(err)
	}
	if d, _ := pl.ReadDirectCounter(tid, m, 0); d.Packets != 1 {
		t.Errorf("counter after modify: %+v", d)
	}
}

func TestCountersAndRegisters(t *testing.T) {
	tp := testProg{
		fields: [][]any{u("c", 32), u("w", 128)},
		prims: []any{
			tPrim("count", named("counter_array", "cnt"), tH("0x2")),
			tPrim("register_read", tF("h", "c"), named("register_array", "r"), tH("0x1")),
			tPrim("register_write", named("register_array", "r"), tH("0x1"), tE("&", tE("+", tF("h", "c"), tH("0x1")), tH("0xffffffff"))),
			tPrim("register_write", named("register_array", "rw"), tH("0x0"), tF("h", "w")),
			tPrim("register_read", tF("h", "w"), named("register_array", "rw"), tH("0x1")),
		},
		extra: map[string]any{
			"counter_arrays":  []any{map[string]any{"name": "cnt", "id": 0, "size": 4, "is_direct": false}},
			"register_arrays": []any{map[string]any{"name": "r", "id": 0, "size": 8, "bitwidth": 32}, map[string]any{"name": "rw", "id": 1, "size": 2, "bitwidth": 128}},
		},
	}
	pl := tp.load(t, Options{})
	in := make([]byte, 20)
	copy(in[4:], bytes.Repeat([]byte{0xab}, 16))
	for i := 0; i < 3; i++ {
		out := run1(t, pl, in)
		if out[3] != byte(i) {
			t.Errorf("packet %d read register value %d", i, out[3])
		}
	}
	d, err := pl.ReadCounter(0, 2)
	if err != nil || d.Packets != 3 || d.Bytes != 60 {
		t.Errorf("counter %+v %v, want 3 packets 60 bytes", d, err)
	}
	if v, err := pl.ReadRegister(0, 1); err != nil || !bytes.Equal(v, []byte{0, 0, 0, 3}) {
		t.Errorf("register r[1] = %x %v", v, err)
	}
	if v, _ := pl.ReadRegister(1, 0); !bytes.Equal(v, bytes.Repeat([]byte{0xab}, 16)) {
		t.Errorf("wide register rw[0] = %x", v)
	}
	// Control-plane writes are seen by packets.
	if err := pl.WriteRegister(1, 1, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	out := run1(t, pl, in)
	if !bytes.Equal(out[4:20], append(make([]byte, 13), 1, 2, 3)) {
		t.Errorf("packet read rw[1] = %x", out[4:20])
	}
	if err := pl.WriteRegister(0, 8, []byte{1}); ErrorCodeOf(err) != CodeOutOfRange {
		t.Errorf("out of range register write: %v", err)
	}
	if err := pl.WriteRegister(0, 0, []byte{1, 0, 0, 0, 0}); ErrorCodeOf(err) != CodeInvalidArgument {
		t.Errorf("too wide register value: %v", err)
	}
	if err := pl.WriteCounter(0, 2, pipeline.CounterData{Packets: 9}); err != nil {
		t.Fatal(err)
	}
	if d, _ := pl.ReadCounter(0, 2); d.Packets != 9 {
		t.Errorf("counter write: %+v", d)
	}
}

// TestHashVectors checks the hash algorithms against their published check
// values (the CRC catalogue's "123456789" vectors, RFC 1071's example).
func TestHashVectors(t *testing.T) {
	check := []byte("123456789")
	cases := []struct {
		algo string
		in   []byte
		want uint64
	}{
		{"crc16", check, 0xBB3D},
		{"crc32", check, 0xCBF43926},
		{"crcCCITT", check, 0x29B1},
		{"csum16", []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, 0x220d},
		{"csum16", []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}, 0xb861},
		{"csum16", []byte{0x01}, 0xfeff},
		{"xor16", []byte{0x12, 0x34, 0x56, 0x78}, 0x444c},
		{"identity", []byte{1, 2, 3}, 0x010203},
	}
	for _, tc := range cases {
		f, ok := lookupAlgo(tc.algo)
		if !ok {
			t.Fatalf("no algorithm %s", tc.algo)
		}
		if got := f(nil, tc.in); got != tc.want {
			t.Errorf("%s(%x) = %#x, want %#x", tc.algo, tc.in, got, tc.want)
		}
	}
}

// TestHashPrimitive runs modify_field_with_hash_based_offset over header
// fields, including fields that are not byte-aligned (inputs are packed bit
// by bit, as BMv2 does).
func TestHashPrimitive(t *testing.T) {
	cases := []struct {
		name   string
		fields [][]any
		inputs []any
		algo   string
		base   string
		size   string
		in     string
		want   uint64
	}{
		{"crc16 of 123456789", [][]any{u("a", 72), u("r", 16)}, []any{tF("h", "a")}, "crc16", "0x0", "0x10000", "313233343536373839 0000", 0xBB3D},
		{"crc32 modulo and base", [][]any{u("a", 72), u("r", 32)}, []any{tF("h", "a")}, "crc32", "0x10", "0x100", "313233343536373839 00000000", 0x10 + 0xCBF43926%0x100},
		{"packed 4+4 bits", [][]any{u("a", 4), u("b", 4), u("r", 16)}, []any{tF("h", "a"), tF("h", "b")}, "identity", "0x0", "0x10000", "ab 0000", 0xab},
		{"constant input", [][]any{u("a", 8), u("r", 16)}, []any{map[string]any{"type": "hexstr", "value": "0x0102", "bitwidth": 16}, tF("h", "a")}, "identity", "0x0", "0x1000000", "03 0000", 0x010203 % 0x1000000 & 0xffff},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := testProg{
				fields: tc.fields,
				prims:  []any{tPrim("modify_field_with_hash_based_offset", tF("h", "r"), tH(tc.base), named("calculation", "calc"), tH(tc.size))},
				extra:  map[string]any{"calculations": []any{map[string]any{"name": "calc", "id": 0, "algo": tc.algo, "input": tc.inputs}}},
			}
			pl := tp.load(t, Options{})
			in := mustHex(t, tc.in)
			out := run1(t, pl, in)
			var got uint64
			rb := (tc.fields[len(tc.fields)-1][1].(int)) / 8
			for _, c := range out[len(out)-rb:] {
				got = got<<8 | uint64(c)
			}
			if want := tc.want & mask64(rb*8); got != want {
				t.Errorf("hash result %#x, want %#x", got, want)
			}
		})
	}
}

// TestChecksums: verify sets checksum_error; update rewrites the field,
// with and without the payload.
func TestChecksums(t *testing.T) {
	fields := [][]any{u("a", 16), u("b", 16), u("ck", 16), u("err", 8)}
	calc := func(payload bool) map[string]any {
		in := []any{tF("h", "a"), tF("h", "b")}
		if payload {
			in = append(in, map[string]any{"type": "payload", "value": nil})
		}
		return map[string]any{"name": "calc", "id": 0, "algo": "csum16", "input": in}
	}
	ck := func(verify, update bool) map[string]any {
		return map[string]any{"name": "ck", "id": 0, "target": []string{"h", "ck"}, "type": "generic", "calculation": "calc", "verify": verify, "update": update, "if_cond": nil}
	}
	t.Run("verify", func(t *testing.T) {
		tp := testProg{fields: fields, prims: []any{tAssign(tF("h", "err"), tF("standard_metadata", "checksum_error"))},
			extra: map[string]any{"calculations": []any{calc(false)}, "checksums": []any{ck(true, false)}}}
		pl := tp.load(t, Options{})
		good := inetChecksum([]byte{0x12, 0x34, 0x56, 0x78})
		in := []byte{0x12, 0x34, 0x56, 0x78, byte(good >> 8), byte(good), 0}
		if out := run1(t, pl, in); out[6] != 0 {
			t.Errorf("good checksum flagged")
		}
		in[5] ^= 1
		if out := run1(t, pl, in); out[6] != 1 {
			t.Errorf("bad checksum not flagged")
		}
	})
	for _, payload := range []bool{false, true} {
		t.Run(map[bool]string{false: "update", true: "update with payload"}[payload], func(t *testing.T) {
			tp := testProg{fields: fields, extra: map[string]any{"calculations": []any{calc(payload)}, "checksums": []any{ck(false, true)}}}
			pl := tp.load(t, Options{})
			pay := []byte{0xde, 0xad, 0xbe}
			in := append([]byte{0x12, 0x34, 0x56, 0x78, 0, 0, 0}, pay...)
			out := run1(t, pl, in)
			data := []byte{0x12, 0x34, 0x56, 0x78}
			if payload {
				data = append(data, pay...)
			}
			want := inetChecksum(data)
			if got := uint16(out[4])<<8 | uint16(out[5]); got != want {
				t.Errorf("checksum %#x, want %#x", got, want)
			}
		})
	}
}

// TestParserErrors checks the error codes BMv2 reports and that parsing
// stops there; the program sends the packet to port parser_error.
func TestParserErrors(t *testing.T) {
	toErrPort := []any{tAssign(tF("standard_metadata", "egress_spec"), tF("standard_metadata", "parser_error"))}
	la := map[string]any{"type": "lookahead", "value": []int{0, 16}}
	cases := []struct {
		name   string
		ops    []any
		in     string
		port   uint32
		out    string
		states []any
	}{
		{"no error", nil, "0102", 0, "0102", nil},
		{"packet too short", nil, "01", 1, "01", nil},
		{"verify fails", []any{map[string]any{"op": "verify", "parameters": []any{tE("==", tF("h", "a"), tH("0x05")), tH("0x6")}}}, "0102", 6, "0102", nil},
		{"verify passes", []any{map[string]any{"op": "verify", "parameters": []any{tE("==", tF("h", "a"), tH("0x01")), tH("0x6")}}}, "0102", 0, "0102", nil},
		{"advance not a multiple of 8", []any{map[string]any{"op": "advance", "parameters": []any{tH("0x3")}}}, "0102ff", 6, "0102ff", nil},
		{"advance skips bytes", []any{map[string]any{"op": "advance", "parameters": []any{tH("0x8")}}}, "0102ff", 0, "0102", nil},
		{"advance past the end", []any{map[string]any{"op": "advance", "parameters": []any{tH("0x10")}}}, "0102ff", 1, "0102ff", nil},
		{"lookahead past the end", []any{map[string]any{"op": "set", "parameters": []any{tF("h", "b"), la}}}, "0102ff", 1, "0102ff", nil},
		{"lookahead", []any{map[string]any{"op": "set", "parameters": []any{tF("h", "b"), la}}}, "0102ff55", 0, "0155ff55", nil}, // 16 bits ff55 stored in 8: 55
		{"parser loop times out", nil, "0102", 5, "0102", []any{
			map[string]any{"name": "start", "id": 0, "parser_ops": []any{map[string]any{"op": "extract", "parameters": []any{map[string]any{"type": "regular", "value": "h"}}}},
				"transitions": []any{map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": "spin"}}, "transition_key": []any{}},
			map[string]any{"name": "spin", "id": 1, "parser_ops": []any{},
				"transitions": []any{map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": "spin"}}, "transition_key": []any{}},
		}},
		{"select with mask and default", nil, "0102", 3, "0102", []any{
			map[string]any{"name": "start", "id": 0, "parser_ops": []any{map[string]any{"op": "extract", "parameters": []any{map[string]any{"type": "regular", "value": "h"}}}},
				"transitions": []any{
					map[string]any{"type": "hexstr", "value": "0x0000", "mask": "0xff00", "next_state": "bad"},
					map[string]any{"type": "hexstr", "value": "0x0100", "mask": "0xff00", "next_state": "err3"},
					map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": nil}},
				"transition_key": []any{tF("h", "a"), tF("h", "b")}},
			map[string]any{"name": "err3", "id": 1, "parser_ops": []any{map[string]any{"op": "verify", "parameters": []any{map[string]any{"type": "bool", "value": false}, tH("0x3")}}},
				"transitions": []any{map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": nil}}, "transition_key": []any{}},
			map[string]any{"name": "bad", "id": 2, "parser_ops": []any{map[string]any{"op": "verify", "parameters": []any{map[string]any{"type": "bool", "value": false}, tH("0x4")}}},
				"transitions": []any{map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": nil}}, "transition_key": []any{}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := testProg{fields: [][]any{u("a", 8), u("b", 8)}, prims: toErrPort, parserOps: tc.ops}
			if tc.states != nil {
				tp.extra = map[string]any{"parsers": []any{map[string]any{"name": "parser", "id": 0, "init_state": "start", "parse_states": tc.states}}}
			}
			pl := tp.load(t, Options{})
			out := process(pl, mustHex(t, tc.in), 0)
			if len(out) != 1 {
				t.Fatalf("got %d frames", len(out))
			}
			if out[0].port != tc.port {
				t.Errorf("parser_error %d, want %d", out[0].port, tc.port)
			}
			if want := mustHex(t, tc.out); !bytes.Equal(out[0].frame, want) {
				t.Errorf("frame %x, want %x", out[0].frame, want)
			}
		})
	}
}
