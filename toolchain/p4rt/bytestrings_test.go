package p4rt

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/codes"
)

// The examples of spec §8.4's "valid" and "invalid" bytestring tables
// (unsigned rows), plus the edge cases around them.
func TestCanonical(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		width int
		want  []byte
		code  codes.Code
	}{
		{"bit8 99", []byte{0x63}, 8, []byte{0x63}, codes.OK},
		{"bit16 99 padded", []byte{0x00, 0x63}, 16, []byte{0x63}, codes.OK},
		{"bit16 12388", []byte{0x30, 0x64}, 16, []byte{0x30, 0x64}, codes.OK},
		{"bit16 12388 extra byte", []byte{0x00, 0x30, 0x64}, 16, []byte{0x30, 0x64}, codes.OK},
		{"bit12 99 two zero bytes", []byte{0x00, 0x00, 0x63}, 12, []byte{0x63}, codes.OK},
		{"zero", []byte{0x00, 0x00}, 16, []byte{0x00}, codes.OK},
		{"bit9 max", []byte{0x01, 0xff}, 9, []byte{0x01, 0xff}, codes.OK},
		{"bit8 too wide", []byte{0x01, 0x63}, 8, nil, codes.OutOfRange},
		{"empty", []byte{}, 8, nil, codes.OutOfRange},
		{"bit16 three bytes", []byte{0x01, 0x00, 0x63}, 16, nil, codes.OutOfRange},
		{"bit12 0x1063", []byte{0x10, 0x63}, 12, nil, codes.OutOfRange},
		{"bit12 0x4063", []byte{0x00, 0x40, 0x63}, 12, nil, codes.OutOfRange},
		{"bit9 512", []byte{0x02, 0x00}, 9, nil, codes.OutOfRange},
		{"bit1 1", []byte{0x01}, 1, []byte{0x01}, codes.OK},
		{"bit1 2", []byte{0x02}, 1, nil, codes.OutOfRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := canonical(tc.in, tc.width)
			if codeOf(err) != tc.code {
				t.Fatalf("code %v, want %v (err %v)", codeOf(err), tc.code, err)
			}
			if err == nil && !bytes.Equal(got, tc.want) {
				t.Fatalf("got %x, want %x", got, tc.want)
			}
		})
	}
}

func TestBitHelpers(t *testing.T) {
	if got := padded([]byte{0x63}, 12); !bytes.Equal(got, []byte{0x00, 0x63}) {
		t.Errorf("padded = %x", got)
	}
	if got := allOnes(9); !bytes.Equal(got, []byte{0x01, 0xff}) {
		t.Errorf("allOnes(9) = %x", got)
	}
	if got := prefixMask(4, 12); !bytes.Equal(got, []byte{0x0f, 0x00}) {
		t.Errorf("prefixMask(4,12) = %x", got)
	}
	if got := trailingZeros([]byte{0x0a, 0x00, 0x00, 0x00}, 32); got != 25 {
		t.Errorf("trailingZeros(10.0.0.0) = %d", got)
	}
	if got := trailingZeros([]byte{0x00}, 32); got != 32 {
		t.Errorf("trailingZeros(0) = %d", got)
	}
	if got := andBytes([]byte{0x12, 0x34}, []byte{0xff, 0x00}, 16); !bytes.Equal(got, []byte{0x12, 0x00}) {
		t.Errorf("andBytes = %x", got)
	}
	if compareValue([]byte{0x01, 0x00}, []byte{0xff}) != 1 || compareValue([]byte{0x05}, []byte{0x05}) != 0 {
		t.Error("compareValue")
	}
}
