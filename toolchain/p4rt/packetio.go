package p4rt

import (
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// getBits reads width bits starting at bit offset off (0 = most
// significant bit of b[0]) as a canonical string.
func getBits(b []byte, off, width int) []byte {
	out := make([]byte, (width+7)/8)
	for i := 0; i < width; i++ {
		bit := off + i
		if b[bit/8]&(0x80>>(bit%8)) != 0 {
			pos := width - 1 - i // bit position in the value, from the LSB
			out[len(out)-1-pos/8] |= 1 << (pos % 8)
		}
	}
	return trimmed(out)
}

// setBits writes the low width bits of v (big-endian) at bit offset off.
func setBits(b []byte, off, width int, v []byte) {
	p := padded(v, width)
	for i := 0; i < width; i++ {
		pos := width - 1 - i
		if p[len(p)-1-pos/8]&(1<<(pos%8)) != 0 {
			bit := off + i
			b[bit/8] |= 0x80 >> (bit % 8)
		}
	}
}

// decodePacketIn splits a frame the pipeline sent to the CPU port into
// the @controller_header("packet_in") fields and the rest (spec §16.1).
// Fields of translated types are translated to the controller's values; a
// value the translation cannot express fails the whole packet.
func decodePacketIn(h *controllerHeader, frame []byte) (*p4v1.PacketIn, error) {
	if h == nil {
		return &p4v1.PacketIn{Payload: clone(frame)}, nil
	}
	n := (h.bits + 7) / 8
	if len(frame) < n {
		return nil, fmt.Errorf("frame of %d bytes is shorter than the %d-byte packet_in header", len(frame), n)
	}
	pin := &p4v1.PacketIn{Payload: clone(frame[n:])}
	off := 0
	for _, f := range h.fields {
		v := getBits(frame, off, f.width)
		if f.tr != nil {
			var err error
			if v, err = f.tr.toSDN(v); err != nil {
				return nil, &untranslatableError{fmt.Sprintf("packet_in metadata %q: %s", f.name, messageOf(err))}
			}
		}
		pin.Metadata = append(pin.Metadata, &p4v1.PacketMetadata{MetadataId: f.id, Value: v})
		off += f.width
	}
	return pin, nil
}

// encodePacketOut prepends the @controller_header("packet_out") header
// built from the PacketOut metadata, translating fields of translated
// types to the device's values. Fields the client leaves out are 0 —
// programs pad these headers and clients (p4runtime-shell) omit padding —
// but unknown, repeated or too-wide fields are rejected.
func encodePacketOut(h *controllerHeader, po *p4v1.PacketOut) ([]byte, error) {
	if h == nil {
		if len(po.GetMetadata()) != 0 {
			return nil, fmt.Errorf("the program declares no packet_out header, yet metadata was given")
		}
		return clone(po.GetPayload()), nil
	}
	n := (h.bits + 7) / 8
	frame := make([]byte, n+len(po.GetPayload()))
	copy(frame[n:], po.GetPayload())
	seen := map[uint32]bool{}
	for _, m := range po.GetMetadata() {
		if m == nil {
			return nil, fmt.Errorf("empty metadata")
		}
		if seen[m.GetMetadataId()] {
			return nil, fmt.Errorf("metadata id %d given twice", m.GetMetadataId())
		}
		seen[m.GetMetadataId()] = true
		off, found := 0, false
		for _, f := range h.fields {
			if f.id == m.GetMetadataId() {
				var v []byte
				var err error
				if f.tr != nil {
					v, err = f.tr.toDevice(m.GetValue(), f.width)
				} else {
					v, err = canonical(m.GetValue(), f.width)
				}
				if err != nil {
					return nil, fmt.Errorf("metadata %q: %s", f.name, messageOf(err))
				}
				setBits(frame, off, f.width, v)
				found = true
				break
			}
			off += f.width
		}
		if !found {
			return nil, fmt.Errorf("unknown packet_out metadata id %d", m.GetMetadataId())
		}
	}
	return frame, nil
}
