package engine

import "testing"

// TestBufSum: the Internet checksum summed from a header's bytes
// (calculation.inBuf) is used only for field lists where it provably equals
// the sum over the packed fields, and then equals it on random headers.
func TestBufSum(t *testing.T) {
	ipv4 := [][]any{u("version", 4), u("ihl", 4), u("diffserv", 8), u("totalLen", 16), u("identification", 16),
		u("flags", 3), u("fragOffset", 13), u("ttl", 8), u("protocol", 8), u("hdrChecksum", 16), u("srcAddr", 32), u("dstAddr", 32)}
	all := func(fields [][]any, skip ...string) []string {
		var out []string
	next:
		for _, f := range fields {
			for _, s := range skip {
				if f[0] == s {
					continue next
				}
			}
			out = append(out, f[0].(string))
		}
		return out
	}
	cases := []struct {
		name   string
		fields [][]any
		list   []string
		inBuf  bool
	}{
		{"IPv4 header checksum", ipv4, all(ipv4, "hdrChecksum"), true},
		{"IPv4 without the addresses", ipv4, all(ipv4, "hdrChecksum", "srcAddr", "dstAddr"), true},
		{"whole header", ipv4, all(ipv4), true},
		{"left out 8 bits mid-list", ipv4, all(ipv4, "hdrChecksum", "ttl"), false},
		{"left out 4 bits first", ipv4, all(ipv4, "hdrChecksum", "version"), false},
		{"left out 8 bits at the end", ipv4, all(ipv4, "hdrChecksum", "dstAddr", "srcAddr", "protocol"), true},
		{"fields out of order", ipv4, []string{"srcAddr", "dstAddr", "ttl"}, false},
		{"odd-byte header", [][]any{u("a", 8), u("b", 16), u("c", 16), u("d", 8), u("e", 24)}, []string{"a", "b", "d", "e"}, true},
		{"72-byte header", [][]any{u("a", 64), u("b", 64), u("c", 64), u("d", 64), u("e", 64), u("f", 64), u("g", 64), u("h", 64), u("i", 64)}, []string{"a", "c", "i"}, false}, // longer than bufSumMaxChunks
		{"64-byte header", [][]any{u("a", 64), u("b", 64), u("c", 64), u("d", 64), u("e", 64), u("f", 64), u("g", 64), u("h", 64)}, []string{"a", "c", "h"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var in []any
			for _, f := range tc.list {
				in = append(in, tF("h", f))
			}
			tp := testProg{fields: tc.fields, extra: map[string]any{
				"calculations": []any{map[string]any{"name": "calc", "id": 0, "algo": "csum16", "input": in}},
				"checksums": []any{map[string]any{"name": "ck", "id": 0, "target": []string{"h", tc.fields[0][0].(string)},
					"type": "generic", "calculation": "calc", "verify": true, "update": true, "if_cond": nil}},
			}}
			pl := tp.load(t, Options{})
			calc := pl.calcByName["calc"]
			if (calc.inBuf != nil) != tc.inBuf {
				t.Errorf("inBuf made: %v, want %v", calc.inBuf != nil, tc.inBuf)
			}
			if calc.inBuf == nil {
				return
			}
			ref := *calc
			ref.fast, ref.inBuf = nil, nil
			hbytes := pl.lay.headers[calc.inBuf.hdr].typ.fixedBits / 8
			rng := uint64(7)
			for k := 0; k < 500; k++ {
				frame := make([]byte, hbytes+k%5)
				for i := range frame {
					rng ^= rng << 13
					rng ^= rng >> 7
					rng ^= rng << 17
					frame[i] = byte(rng)
					if k%7 == 0 {
						frame[i] = 0xff // sums that fold more than once
					} else if k%11 == 0 {
						frame[i] = 0
					}
				}
				p := pl.acquire()
				p.load(frame)
				p.resetAll()
				pl.parser.run(p)
				got, ok := calc.inBuf.sum(p)
				if want := ref.compute(p); !ok || got != want {
					t.Fatalf("frame %x: sum from bytes %#x (%v), over packed fields %#x", frame, got, ok, want)
				}
				// change some fields, as actions do (dirty bits set)
				h := pl.lay.headers[calc.inBuf.hdr]
				for i := range h.typ.fields {
					if rng>>uint(i%60)&3 == 0 {
						fd := &h.typ.fields[i]
						p.words[h.wordBase+fd.slot] = (rng * uint64(i+1)) & mask64(fd.width)
						p.hs[h.id].dmask |= fd.dirtyBit()
					}
				}
				got, ok = calc.inBuf.sum(p)
				if want := ref.compute(p); !ok || got != want {
					t.Fatalf("frame %x, fields changed (%b): sum from bytes %#x (%v), over packed fields %#x", frame, p.hs[h.id].dmask, got, ok, want)
				}
				p.Release()
			}
		})
	}
}
