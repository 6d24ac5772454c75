package engine

import (
	"errors"
	"testing"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// bitwiseCRC is the CRC by its definition, a bit at a time (no table), to
// check the table-driven model against.
func bitwiseCRC(width int, p pipeline.CRCParams, data []byte) uint64 {
	mask := mask64(width)
	r := p.Initial & mask
	for _, x := range data {
		for i := range 8 {
			bit := uint64(x>>(7-i)) & 1
			if p.ReflectData {
				bit = uint64(x>>i) & 1
			}
			top := r>>(width-1)&1 ^ bit
			r = r << 1 & mask
			if top != 0 {
				r ^= p.Polynomial & mask
			}
		}
	}
	if p.ReflectRemainder {
		var out uint64
		for i := range width {
			out |= (r >> i & 1) << (width - 1 - i)
		}
		r = out
	}
	return r ^ p.FinalXor&mask
}

// TestCRCModel: the parametrised CRC gives the catalogued check value
// (the CRC of "123456789") of well-known CRCs, and agrees with the bitwise
// definition on other inputs.
func TestCRCModel(t *testing.T) {
	cases := []struct {
		name  string
		width int
		p     pipeline.CRCParams
		check uint64
	}{
		{"CRC-16/ARC (crc16, the crc16_custom default)", 16, customCRCDefaults[16], 0xBB3D},
		{"CRC-16/CCITT-FALSE", 16, pipeline.CRCParams{Polynomial: 0x1021, Initial: 0xFFFF}, 0x29B1},
		{"CRC-16/XMODEM", 16, pipeline.CRCParams{Polynomial: 0x1021}, 0x31C3},
		{"CRC-16/KERMIT", 16, pipeline.CRCParams{Polynomial: 0x1021, ReflectData: true, ReflectRemainder: true}, 0x2189},
		{"CRC-16/DNP", 16, pipeline.CRCParams{Polynomial: 0x3D65, FinalXor: 0xFFFF, ReflectData: true, ReflectRemainder: true}, 0xEA82},
		{"CRC-32 (crc32, the crc32_custom default)", 32, customCRCDefaults[32], 0xCBF43926},
		{"CRC-32C", 32, pipeline.CRCParams{Polynomial: 0x1EDC6F41, Initial: 0xFFFFFFFF, FinalXor: 0xFFFFFFFF, ReflectData: true, ReflectRemainder: true}, 0xE3069283},
		{"CRC-32/BZIP2", 32, pipeline.CRCParams{Polynomial: 0x04C11DB7, Initial: 0xFFFFFFFF, FinalXor: 0xFFFFFFFF}, 0xFC891918},
		{"CRC-32/MPEG-2", 32, pipeline.CRCParams{Polynomial: 0x04C11DB7, Initial: 0xFFFFFFFF}, 0x0376E6E7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newCRCModel(tc.width, tc.p)
			if got := m.sum([]byte("123456789")); got != tc.check {
				t.Errorf("check value %#x, want %#x", got, tc.check)
			}
			data := make([]byte, 40)
			for i := range data {
				data[i] = byte(i*37 + 11)
			}
			for n := 0; n <= len(data); n += 7 {
				if got, want := m.sum(data[:n]), bitwiseCRC(tc.width, tc.p, data[:n]); got != want {
					t.Errorf("%d bytes: %#x, bitwise %#x", n, got, want)
				}
			}
		})
	}
}

// TestCustomCRCParameters: a crc16_custom or crc32_custom calculation
// starts as crc16 or crc32, takes new parameters from the control plane
// between packets, and keeps its own (a second calculation is not
// changed); the other calculations refuse them, as BMv2 does.
func TestCustomCRCParameters(t *testing.T) {
	ccitt := pipeline.CRCParams{Polynomial: 0x1021, Initial: 0xFFFF}
	castagnoli := pipeline.CRCParams{Polynomial: 0x1EDC6F41, Initial: 0xFFFFFFFF, FinalXor: 0xFFFFFFFF, ReflectData: true, ReflectRemainder: true}
	cases := []struct {
		algo          string
		width         int
		changed       pipeline.CRCParams
		before, after uint64
	}{
		{"crc16_custom", 16, ccitt, 0xBB3D, 0x29B1},
		{"crc32_custom", 32, castagnoli, 0xCBF43926, 0xE3069283},
	}
	for _, tc := range cases {
		t.Run(tc.algo, func(t *testing.T) {
			calc := func(name string) map[string]any {
				return map[string]any{"name": name, "id": 0, "algo": tc.algo, "input": []any{tF("h", "a")}}
			}
			plain := map[string]any{"name": "plain", "id": 2, "algo": "crc16", "input": []any{tF("h", "a")}}
			other := calc("other")
			other["id"] = 1
			tp := testProg{
				fields: [][]any{u("a", 72), u("r", tc.width)},
				prims:  []any{tPrim("modify_field_with_hash_based_offset", tF("h", "r"), tH("0x0"), named("calculation", "calc"), tH("0x100000000"))},
				extra:  map[string]any{"calculations": []any{calc("calc"), other, plain}},
			}
			pl := tp.load(t, Options{})
			in := append([]byte("123456789"), make([]byte, tc.width/8)...)
			result := func() uint64 {
				out := run1(t, pl, in)
				var got uint64
				for _, c := range out[9:] {
					got = got<<8 | uint64(c)
				}
				return got
			}
			if got := result(); got != tc.before {
				t.Fatalf("before: %#x, want the plain CRC's %#x", got, tc.before)
			}
			if err := pl.SetCustomCRC("calc", tc.width, tc.changed); err != nil {
				t.Fatal(err)
			}
			if got := result(); got != tc.after {
				t.Errorf("after: %#x, want %#x", got, tc.after)
			}
			if w, p, err := pl.CustomCRC("calc"); err != nil || w != tc.width || p != tc.changed {
				t.Errorf("CustomCRC(calc) = %d %+v %v", w, p, err)
			}
			if _, p, _ := pl.CustomCRC("other"); p != customCRCDefaults[tc.width] {
				t.Errorf("the other calculation changed too: %+v", p)
			}
			for _, bad := range []struct {
				name  string
				width int
				want  error
			}{
				{"nosuch", tc.width, ErrNoCalculation},
				{"plain", 16, ErrNotCustomCRC},
				{"calc", 48 - tc.width, ErrNotCustomCRC},
			} {
				if err := pl.SetCustomCRC(bad.name, bad.width, tc.changed); !errors.Is(err, bad.want) {
					t.Errorf("SetCustomCRC(%s, %d): %v, want %v", bad.name, bad.width, err, bad.want)
				}
			}
		})
	}
}
