package p4rt_test

import (
	"bytes"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

func ethFrame(dst []byte, size int) []byte {
	f := append(append(append([]byte{}, dst...), 0, 0, 0, 0, 0, 9), 0x88, 0xb5)
	for len(f) < size {
		f = append(f, byte(len(f)))
	}
	return f
}

func packetOut(payload []byte, md ...*p4v1.PacketMetadata) *p4v1.StreamMessageRequest {
	return &p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{Payload: payload, Metadata: md}}}
}

func meta(id uint32, v ...byte) *p4v1.PacketMetadata {
	return &p4v1.PacketMetadata{MetadataId: id, Value: v}
}

// PacketOut and PacketIn through the in-process engine: the
// @controller_header fields are built and stripped by the server.
func TestPacketIO(t *testing.T) {
	h := newHarness(t)
	h.primary = &p4v1.Uint128{High: 1}
	s, a := h.open(h.primary, "")
	if codes.Code(a.GetStatus().GetCode()) != codes.OK {
		t.Fatal(a)
	}
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config()); err != nil {
		t.Fatal(err)
	}
	id := h.ids()
	payload := ethFrame(b(0, 0, 0, 0, 0, 0xaa), 60)
	if err := s.stream.Send(packetOut(payload, meta(1, 2))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	var got [][]byte
	for len(got) == 0 && time.Now().Before(deadline) {
		got = h.target.Received(2)
		time.Sleep(5 * time.Millisecond)
	}
	if len(got) != 1 || !bytes.Equal(got[0], payload) {
		t.Fatalf("PacketOut to port 2: got %x", got)
	}

	h.mustWrite(insert(entry(id.l2, 0, call(id.toCPU), exact(1, 0, 0, 0, 0, 0, 0xff))))
	frame := ethFrame(b(0, 0, 0, 0, 0, 0xff), 64)
	if err := h.target.Send(3, frame); err != nil {
		t.Fatal(err)
	}
	m := s.next(t, func(m *p4v1.StreamMessageResponse) bool { return m.GetPacket() != nil })
	if m == nil {
		t.Fatal("no PacketIn")
	}
	pin := m.GetPacket()
	if !bytes.Equal(pin.GetPayload(), frame) || len(pin.GetMetadata()) != 2 ||
		pin.GetMetadata()[0].GetMetadataId() != 1 || !bytes.Equal(pin.GetMetadata()[0].GetValue(), b(3)) {
		t.Fatalf("PacketIn %v, want ingress_port 3 and the frame", pin)
	}

	// Bad PacketOuts are dropped with a stream error, the stream lives on.
	errTests := []struct {
		name string
		req  *p4v1.StreamMessageRequest
		code codes.Code
	}{
		{"unknown metadata", packetOut(payload, meta(9, 1)), codes.InvalidArgument},
		{"port too wide", packetOut(payload, meta(1, 2, 0)), codes.InvalidArgument},
		{"empty update", &p4v1.StreamMessageRequest{}, codes.InvalidArgument},
	}
	for _, tc := range errTests {
		if err := s.stream.Send(tc.req); err != nil {
			t.Fatal(err)
		}
		m := s.next(t, func(m *p4v1.StreamMessageResponse) bool { return m.GetError() != nil })
		if m == nil || codes.Code(m.GetError().GetCanonicalCode()) != tc.code {
			t.Errorf("%s: stream error %v, want %v", tc.name, m, tc.code)
		}
	}

	// A backup may not send packets.
	backup, _ := h.open(&p4v1.Uint128{Low: 1}, "")
	if err := backup.stream.Send(packetOut(payload, meta(1, 2))); err != nil {
		t.Fatal(err)
	}
	if m := backup.next(t, func(m *p4v1.StreamMessageResponse) bool { return m.GetError() != nil }); m == nil ||
		codes.Code(m.GetError().GetCanonicalCode()) != codes.PermissionDenied {
		t.Errorf("backup PacketOut: %v, want PERMISSION_DENIED", m)
	}
}

// Digests: nothing until enabled, one list per message with max_list_size
// 1, duplicates held back until acknowledged.
func TestDigests(t *testing.T) {
	h := newHarness(t)
	h.primary = &p4v1.Uint128{High: 1}
	s, _ := h.open(h.primary, "")
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config()); err != nil {
		t.Fatal(err)
	}
	id := h.ids()
	isDigest := func(m *p4v1.StreamMessageResponse) bool { return m.GetDigest() != nil }
	digest := func() *p4v1.DigestList { return s.next(t, isDigest).GetDigest() }
	// With max_list_size 1 a list leaves at once: half a second of silence
	// means none is coming.
	noDigest := func() *p4v1.DigestList { return s.nextWithin(t, 500*time.Millisecond, isDigest).GetDigest() }
	frame := ethFrame(mac2, 64)
	if err := h.target.Send(4, frame); err != nil {
		t.Fatal(err)
	}
	if d := noDigest(); d != nil {
		t.Fatalf("digest before DigestEntry: %v", d)
	}
	h.mustWrite(update(p4v1.Update_INSERT, digestEntity(id.learn, &p4v1.DigestEntry_Config{MaxListSize: 1, AckTimeoutNs: int64(time.Minute)})))
	if err := h.target.Send(4, frame); err != nil {
		t.Fatal(err)
	}
	d := digest()
	if d == nil || d.GetDigestId() != id.learn || len(d.GetData()) != 1 {
		t.Fatalf("digest list %v", d)
	}
	members := d.GetData()[0].GetStruct().GetMembers()
	// The learned struct: source MAC 00:00:00:00:00:09, ingress port 4.
	if len(members) != 2 || !bytes.Equal(members[0].GetBitstring(), b(9)) || !bytes.Equal(members[1].GetBitstring(), b(4)) {
		t.Fatalf("digest data %v", d.GetData())
	}
	if err := h.target.Send(4, frame); err != nil {
		t.Fatal(err)
	}
	if again := noDigest(); again != nil {
		t.Fatalf("unacknowledged duplicate sent again: %v", again)
	}
	ack := &p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_DigestAck{DigestAck: &p4v1.DigestListAck{DigestId: id.learn, ListId: d.GetListId()}}}
	if err := s.stream.Send(ack); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := h.target.Send(4, frame); err != nil {
		t.Fatal(err)
	}
	if after := digest(); after == nil || after.GetListId() == d.GetListId() {
		t.Fatalf("after the ack, the digest was not sent again: %v", after)
	}
	read, err := h.read(digestEntity(0, nil))
	if err != nil || len(read) != 1 || read[0].GetDigestEntry().GetConfig().GetMaxListSize() != 1 {
		t.Errorf("digest entry read: %v %v", read, err)
	}
}

// Digest timers: a list that is not full leaves when its max_timeout_ns
// has passed (not before), and an unacknowledged list's entries are
// forgotten after ack_timeout_ns, so the same digest is sent again. The
// engine arms a timer only for these deadlines.
func TestDigestTimeouts(t *testing.T) {
	h := newHarness(t)
	h.primary = &p4v1.Uint128{High: 1}
	s, _ := h.open(h.primary, "")
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config()); err != nil {
		t.Fatal(err)
	}
	id := h.ids()
	isDigest := func(m *p4v1.StreamMessageResponse) bool { return m.GetDigest() != nil }
	const maxTimeout, ackTimeout = 40 * time.Millisecond, 300 * time.Millisecond
	h.mustWrite(update(p4v1.Update_INSERT, digestEntity(id.learn, &p4v1.DigestEntry_Config{
		MaxListSize: 10, MaxTimeoutNs: int64(maxTimeout), AckTimeoutNs: int64(ackTimeout)})))
	frame := ethFrame(mac2, 64)
	sent := time.Now()
	if err := h.target.Send(4, frame); err != nil {
		t.Fatal(err)
	}
	d := s.nextWithin(t, 5*time.Second, isDigest).GetDigest()
	if d == nil || len(d.GetData()) != 1 {
		t.Fatalf("no list after max_timeout_ns: %v", d)
	}
	if waited := time.Since(sent); waited < maxTimeout {
		t.Errorf("a list of 1 (max 10) left after %v, before max_timeout_ns %v", waited, maxTimeout)
	}
	if err := h.target.Send(4, frame); err != nil {
		t.Fatal(err)
	}
	if again := s.nextWithin(t, 100*time.Millisecond, isDigest).GetDigest(); again != nil {
		t.Fatalf("unacknowledged duplicate sent again before ack_timeout_ns: %v", again)
	}
	time.Sleep(ackTimeout)
	if err := h.target.Send(4, frame); err != nil {
		t.Fatal(err)
	}
	again := s.nextWithin(t, 5*time.Second, isDigest).GetDigest()
	if again == nil || again.GetListId() == d.GetListId() {
		t.Fatalf("after ack_timeout_ns the digest was not sent again: %v", again)
	}
}
