package p4rt_test

import (
	"bytes"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// errorKeyProgram has a table keyed on two values of type error.
const errorKeyProgram = "testdata/p4rt_error_key.p4"

// A table keyed on error values is accepted with P4Info that gives its
// match fields no bitwidth (as p4c writes it); entries carry the error's
// number (the JSON's "errors" list: NoError 0, PacketTooShort 1, NoMatch
// 2) as 32-bit values, match packets by it and read back canonical.
func TestErrorTypedKey(t *testing.T) {
	h := readyFor(t, errorKeyProgram)
	tid := h.tableID("I.by_error")
	for _, tb := range h.prog.info.GetTables() {
		if tb.GetPreamble().GetId() != tid {
			continue
		}
		for _, f := range tb.GetMatchFields() {
			if f.GetBitwidth() != 0 {
				t.Fatalf("match field %s has bitwidth %d: the test needs P4Info without one", f.GetName(), f.GetBitwidth())
			}
		}
	}
	setB := h.actionID("I.set_b")
	all := b(0xff, 0xff, 0xff, 0xff)
	noErrorNoMatch := entry(tid, 10, call(setB, b(0x22)), exact(1, 0), ternary(2, b(2), all))
	noErrorNoError := entry(tid, 20, call(setB, b(0x11)), exact(1, 0), ternary(2, b(0), all))
	tooShort := entry(tid, 5, call(setB, b(0x33)), exact(1, 1), ternary(2, b(0), all))
	h.mustWrite(insert(noErrorNoMatch), insert(noErrorNoError), insert(tooShort))

	for _, tc := range []struct {
		name     string
		in, want []byte
	}{
		{"m.e = NoMatch", b(1, 0), b(1, 0x22)},
		{"m.e = NoError", b(2, 0), b(2, 0x11)},
		// parser_error PacketTooShort: h is not valid, so nothing is
		// emitted but the payload byte
		{"parser_error = PacketTooShort", b(2), b(2)},
	} {
		if err := h.target.Send(0, tc.in); err != nil {
			t.Fatal(err)
		}
		got := h.target.Received(1)
		if len(got) != 1 || !bytes.Equal(got[0], tc.want) {
			t.Errorf("%s: port 1 sent %x, want %x", tc.name, got, tc.want)
		}
	}

	got, err := h.read(tableEntity(&p4v1.TableEntry{TableId: tid}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("read %d entries, want 3", len(got))
	}
	for _, e := range got {
		te := e.GetTableEntry()
		if v := te.GetMatch()[0].GetExact().GetValue(); len(v) != 1 {
			t.Errorf("entry read back with parser_error %x, want one canonical byte", v)
		}
		if te.GetPriority() == 10 && !proto.Equal(te.GetMatch()[1], ternary(2, b(2), all)) {
			t.Errorf("entry read back with m.e %v", te.GetMatch()[1])
		}
	}

	wide := entry(tid, 30, call(setB, b(0x44)), exact(1, 1, 0, 0, 0, 0), ternary(2, b(0), all))
	cs, err := h.write(insert(wide))
	if err != nil || cs[0] != codes.OutOfRange {
		t.Errorf("a 33-bit error value: %v %v, want OUT_OF_RANGE (P4Runtime §8.3)", cs, err)
	}
}
