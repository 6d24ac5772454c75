package engine

import (
	"bytes"
	"strings"
	"testing"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// TestReplication covers v1model's packet replication: I2E and E2E clones
// (with truncation), multicast with egress_rid, resubmit and recirculate,
// with BMv2's instance_type values.
func TestReplication(t *testing.T) {
	it := tF("standard_metadata", "instance_type")
	isNormal := tE("==", it, tH("0x0"))
	// egress writes instance_type into h.b so that the tests see it
	markType := tAssign(tF("h", "b"), it)
	t.Run("I2E clone with truncation", func(t *testing.T) {
		tp := testProg{
			fields: [][]any{u("a", 8), u("b", 8)},
			prims:  []any{tAssign(tF("h", "a"), tH("0xaa")), tPrim("clone_ingress_pkt_to_egress", tH("0x5"), tH("0x0"))},
			egress: []any{markType},
		}
		pl := tp.load(t, Options{})
		if err := pl.SetCloneSession(5, pipeline.CloneSession{Replicas: []pipeline.Replica{{Port: 3}}, TruncateLength: 3}); err != nil {
			t.Fatal(err)
		}
		out := process(pl, mustHex(t, "0102 cccccc"), 0)
		byPort := map[uint32][]byte{}
		for _, o := range out {
			byPort[o.port] = o.frame
		}
		if got := byPort[1]; !bytes.Equal(got, mustHex(t, "aa00 cccccc")) {
			t.Errorf("original: %x", got)
		}
		// the clone carries the packet as it entered ingress, truncated
		if got := byPort[3]; !bytes.Equal(got, mustHex(t, "0101 cc")) {
			t.Errorf("clone: %x, want 0101cc (instance_type 1, 3 bytes)", got)
		}
	})
	t.Run("E2E clone", func(t *testing.T) {
		tp := testProg{
			fields: [][]any{u("a", 8), u("b", 8)},
			egress: []any{
				markType,
				tPrim("_jump_if_zero", isNormal, tH("0x3")),
				tPrim("clone_egress_pkt_to_egress", tH("0x6"), tH("0x0")),
			},
		}
		pl := tp.load(t, Options{})
		if err := pl.SetCloneSession(6, pipeline.CloneSession{Replicas: []pipeline.Replica{{Port: 4}}}); err != nil {
			t.Fatal(err)
		}
		out := process(pl, mustHex(t, "0102"), 0)
		if len(out) != 2 {
			t.Fatalf("%d frames, want 2", len(out))
		}
		for _, o := range out {
			want := map[uint32]string{1: "0100", 4: "0102"}[o.port]
			if want == "" || !bytes.Equal(o.frame, mustHex(t, want)) {
				t.Errorf("port %d: %x, want %s", o.port, o.frame, want)
			}
		}
	})
	t.Run("multicast", func(t *testing.T) {
		tp := testProg{
			fields: [][]any{u("a", 8), u("b", 8)},
			prims:  []any{tAssign(tF("standard_metadata", "mcast_grp"), tH("0x7"))},
			egress: []any{tAssign(tF("h", "a"), tF("standard_metadata", "egress_rid")), markType},
		}
		pl := tp.load(t, Options{})
		if err := pl.SetMulticastGroup(7, []pipeline.Replica{{Port: 1, Rid: 10}, {Port: 2, Rid: 20}, {Port: 2, Rid: 21}}); err != nil {
			t.Fatal(err)
		}
		out := process(pl, mustHex(t, "0000"), 0)
		var got []string
		for _, o := range out {
			got = append(got, string(rune('0'+o.port))+":"+strings.ToUpper(string(mustHexEnc(o.frame))))
		}
		want := "1:0A05 2:1405 2:1505"
		if strings.Join(got, " ") != want {
			t.Errorf("got %v, want %s", got, want)
		}
		if err := pl.SetMulticastGroup(0, nil); ErrorCodeOf(err) != CodeInvalidArgument {
			t.Errorf("group 0: %v", err)
		}
		if err := pl.DeleteMulticastGroup(7); err != nil {
			t.Fatal(err)
		}
		if out := process(pl, mustHex(t, "0000"), 0); len(out) != 0 {
			t.Errorf("deleted group still replicates: %v", out)
		}
	})
	t.Run("resubmit", func(t *testing.T) {
		tp := testProg{
			fields: [][]any{u("a", 8), u("b", 8)},
			prims: []any{
				tAssign(tF("h", "b"), it),
				tPrim("_jump_if_zero", isNormal, tH("0x4")),
				tPrim("resubmit", tH("0x0")),
			},
		}
		pl := tp.load(t, Options{})
		out := process(pl, mustHex(t, "0100"), 0)
		if len(out) != 1 || !bytes.Equal(out[0].frame, mustHex(t, "0106")) {
			t.Errorf("got %v, want one frame 0106 (instance_type 6)", out)
		}
	})
	t.Run("recirculate", func(t *testing.T) {
		tp := testProg{
			fields: [][]any{u("a", 8), u("b", 8)},
			prims:  []any{tAssign(tF("h", "a"), tE("&", tE("+", tF("h", "a"), tH("0x1")), tH("0xff"))), tAssign(tF("h", "b"), it)},
			// Egress sees instance_type NORMAL even for a recirculated
			// packet (BMv2 resets it on unicast enqueue), so the decision
			// uses h.b, which ingress set from its instance_type.
			egress: []any{
				tPrim("_jump_if_zero", tE("==", tF("h", "b"), tH("0x0")), tH("0x2")),
				tPrim("recirculate", tH("0x0")),
			},
		}
		pl := tp.load(t, Options{})
		out := process(pl, mustHex(t, "0100"), 0)
		// first pass: a=2, b=0, recirculated; second pass: a=3, b=4
		if len(out) != 1 || !bytes.Equal(out[0].frame, mustHex(t, "0304")) {
			t.Errorf("got %v, want one frame 0304", out)
		}
	})
}

func mustHexEnc(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

// TestValueSetsDigestsLogs: parser value sets set by the control plane,
// digests on the channel, log_msg formatting.
func TestValueSetsDigestsLogs(t *testing.T) {
	var logs []string
	tp := testProg{
		fields: [][]any{u("a", 8), u("b", 8)},
		prims: []any{
			tPrim("generate_digest", tH("0x0"), tH("0x1")),
			tPrim("log_msg", map[string]any{"type": "string", "value": "a={} b={}"},
				map[string]any{"type": "parameters_vector", "value": []any{tF("h", "a"), tF("h", "b")}}),
			tAssign(tF("standard_metadata", "egress_spec"), tF("standard_metadata", "parser_error")),
		},
		extra: map[string]any{
			"parse_vsets": []any{map[string]any{"name": "vs", "id": 0, "compressed_bitwidth": 8, "max_size": 4}},
			"learn_lists": []any{map[string]any{"id": 1, "name": "dg", "elements": []any{tF("h", "a"), tF("h", "b")}}},
			"parsers": []any{map[string]any{"name": "parser", "id": 0, "init_state": "start", "parse_states": []any{
				map[string]any{"name": "start", "id": 0, "parser_ops": []any{map[string]any{"op": "extract", "parameters": []any{map[string]any{"type": "regular", "value": "h"}}}},
					"transitions": []any{
						map[string]any{"type": "parse_vset", "value": "vs", "mask": nil, "next_state": "hit"},
						map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": nil}},
					"transition_key": []any{tF("h", "a")}},
				map[string]any{"name": "hit", "id": 1, "parser_ops": []any{map[string]any{"op": "verify", "parameters": []any{map[string]any{"type": "bool", "value": false}, tH("0x2")}}},
					"transitions": []any{map[string]any{"type": "default", "value": nil, "mask": nil, "next_state": nil}}, "transition_key": []any{}},
			}}},
		},
	}
	pl := tp.load(t, Options{Log: func(m string) { logs = append(logs, m) }})
	vs, _ := pl.Lookup(KindValueSet, "vs")
	if out := process(pl, mustHex(t, "0501"), 0); len(out) != 1 || out[0].port != 0 {
		t.Fatalf("empty value set matched: %v", out)
	}
	if err := pl.SetValueSet(vs, []pipeline.ValueSetMember{{Value: []byte{5}}, {Value: []byte{0x40}, Mask: []byte{0xf0}}}); err != nil {
		t.Fatal(err)
	}
	for in, port := range map[string]uint32{"0501": 2, "4701": 2, "0601": 0} {
		if out := process(pl, mustHex(t, in), 0); len(out) != 1 || out[0].port != port {
			t.Errorf("%s: %v, want port %d", in, out, port)
		}
	}
	if got, _ := pl.ValueSet(vs); len(got) != 2 {
		t.Errorf("value set read back %v", got)
	}
	if err := pl.SetValueSet(vs, []pipeline.ValueSetMember{{Value: []byte{1, 0}}}); ErrorCodeOf(err) != CodeInvalidArgument {
		t.Errorf("too wide member: %v", err)
	}
	n := 0
	for len(pl.Digests()) > 0 {
		d := <-pl.Digests()
		if d.Name != "dg" || len(d.Fields) != 2 {
			t.Errorf("digest %+v", d)
		}
		n++
	}
	if n != 4 {
		t.Errorf("%d digests, want 4", n)
	}
	if len(logs) != 4 || logs[0] != "a=5 b=1" {
		t.Errorf("log_msg output %q", logs)
	}
}

// TestIngressTimestampEveryPass: a resubmitted or recirculated packet's
// ingress pass gets ingress_global_timestamp anew, as BMv2's ingress
// thread stamps every packet it takes in. The clock advances 1 us per read,
// so each read is distinguishable.
func TestIngressTimestampEveryPass(t *testing.T) {
	it := tF("standard_metadata", "instance_type")
	ts := tF("standard_metadata", "ingress_global_timestamp")
	recordTS := tAssign(tF("h", "c"), tE("&", ts, tH("0xffff")))
	cases := []struct {
		name string
		tp   testProg
		want string // Ingress stamps the arrival at the 1st clock read
	}{
		{"resubmit", testProg{
			fields: [][]any{u("a", 8), u("b", 8), u("c", 16)},
			prims: []any{
				tAssign(tF("h", "b"), it),
				recordTS,
				tPrim("_jump_if_zero", tE("==", it, tH("0x0")), tH("0x5")), // past the resubmit
				tPrim("resubmit", tH("0x0")),
			},
		}, "01 06 0002"}, // the resubmitted pass is stamped at the 2nd read
		{"recirculate", testProg{
			fields: [][]any{u("a", 8), u("b", 8), u("c", 16)},
			prims:  []any{tAssign(tF("h", "b"), it), recordTS},
			egress: []any{
				tPrim("_jump_if_zero", tE("==", tF("h", "b"), tH("0x0")), tH("0x2")),
				tPrim("recirculate", tH("0x0")),
			},
		}, "01 04 0003"}, // 2nd read: the egress queue's enq_timestamp; 3rd: the recirculated pass
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var reads int64
			clock := func() int64 { reads++; return reads * 1000 }
			pl := tc.tp.load(t, Options{Clock: clock})
			out := process(pl, mustHex(t, "01 00 0000"), 0)
			if len(out) != 1 || !bytes.Equal(out[0].frame, mustHex(t, tc.want)) {
				t.Errorf("got %v, want one frame %s", out, tc.want)
			}
		})
	}
}
