package p4rt

import (
	"bytes"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// A 9-bit port plus 7 bits of padding, as the tutorials' and Terrapin's
// controller headers lay it out.
var portHeader = &controllerHeader{
	fields: []ctrlField{{id: 1, name: "port", width: 9}, {id: 2, name: "_pad", width: 7}},
	bits:   16,
}

func TestPacketInDecode(t *testing.T) {
	tests := []struct {
		name    string
		frame   []byte
		port    []byte
		payload []byte
		bad     bool
	}{
		{"port 3", []byte{0x01, 0x80, 0xaa, 0xbb}, []byte{0x03}, []byte{0xaa, 0xbb}, false},
		{"port 511", []byte{0xff, 0x80}, []byte{0x01, 0xff}, []byte{}, false},
		{"port 0", []byte{0x00, 0x00, 0x01}, []byte{0x00}, []byte{0x01}, false},
		{"short frame", []byte{0x01}, nil, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pin, err := decodePacketIn(portHeader, tc.frame)
			if tc.bad {
				if err == nil {
					t.Fatal("accepted a frame shorter than the header")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(pin.GetMetadata()[0].GetValue(), tc.port) || pin.GetMetadata()[0].GetMetadataId() != 1 {
				t.Errorf("port metadata %v, want %x", pin.GetMetadata()[0], tc.port)
			}
			if !bytes.Equal(pin.GetPayload(), tc.payload) {
				t.Errorf("payload %x, want %x", pin.GetPayload(), tc.payload)
			}
		})
	}
}

func TestPacketOutEncode(t *testing.T) {
	md := func(id uint32, v ...byte) *p4v1.PacketMetadata { return &p4v1.PacketMetadata{MetadataId: id, Value: v} }
	tests := []struct {
		name string
		md   []*p4v1.PacketMetadata
		want []byte
		bad  bool
	}{
		{"port 3", []*p4v1.PacketMetadata{md(1, 3)}, []byte{0x01, 0x80, 0xee}, false},
		{"port 511 padded value", []*p4v1.PacketMetadata{md(1, 0, 1, 0xff), md(2, 0)}, []byte{0xff, 0x80, 0xee}, false},
		{"no metadata is zero", nil, []byte{0x00, 0x00, 0xee}, false},
		{"port too wide", []*p4v1.PacketMetadata{md(1, 2, 0)}, nil, true},
		{"unknown id", []*p4v1.PacketMetadata{md(7, 1)}, nil, true},
		{"duplicate", []*p4v1.PacketMetadata{md(1, 1), md(1, 2)}, nil, true},
		{"empty value", []*p4v1.PacketMetadata{md(1)}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := encodePacketOut(portHeader, &p4v1.PacketOut{Payload: []byte{0xee}, Metadata: tc.md})
			if tc.bad != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.bad)
			}
			if !tc.bad && !bytes.Equal(got, tc.want) {
				t.Fatalf("frame %x, want %x", got, tc.want)
			}
		})
	}
	if _, err := encodePacketOut(nil, &p4v1.PacketOut{Metadata: []*p4v1.PacketMetadata{md(1, 1)}}); err == nil {
		t.Error("metadata accepted for a program without a packet_out header")
	}
}
