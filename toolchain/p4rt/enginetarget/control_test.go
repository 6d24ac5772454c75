package enginetarget

import (
	"errors"
	"os"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// ternary2-bmv2 from p4c's corpus: p4c's own JSON, where "ingress.noop"
// is two JSON actions (ids 1 and 2) used by different tables.
func loadCorpus(t *testing.T, name string) *engine.Pipeline {
	t.Helper()
	js, err := os.ReadFile("../../../../shared/conformance/p4c-stf/" + name + ".p4c.json")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := engine.Load(js, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func TestErrorCodesAreGRPCCodes(t *testing.T) {
	for _, tc := range []struct {
		engine engine.ErrorCode
		grpc   codes.Code
	}{
		{engine.CodeInvalidArgument, codes.InvalidArgument},
		{engine.CodeNotFound, codes.NotFound},
		{engine.CodeAlreadyExists, codes.AlreadyExists},
		{engine.CodePermissionDenied, codes.PermissionDenied},
		{engine.CodeResourceExhausted, codes.ResourceExhausted},
		{engine.CodeFailedPrecondition, codes.FailedPrecondition},
		{engine.CodeOutOfRange, codes.OutOfRange},
		{engine.CodeUnimplemented, codes.Unimplemented},
	} {
		if got := status.Code(wrap(&engine.Error{Code: tc.engine, Msg: "x"})); got != tc.grpc {
			t.Errorf("engine %v becomes %v, want %v", tc.engine, got, tc.grpc)
		}
	}
	if got := status.Code(wrap(errors.New("plain"))); got != codes.Internal {
		t.Errorf("an error without a code becomes %v, want Internal", got)
	}
	if got := status.Code(wrap(status.Error(codes.NotFound, "no such table"))); got != codes.NotFound {
		t.Errorf("an error with a gRPC code becomes %v, want it kept", got)
	}
}

func TestControl(t *testing.T) {
	pl := loadCorpus(t, "ternary2-bmv2")
	c := Control(pl)
	key := func(v, m byte) []pipeline.Match {
		return []pipeline.Match{{Value: []byte{0, 0, 1, v}, Mask: []byte{0, 0, 0xff, m}}}
	}
	tests := []struct {
		name string
		run  func() error
		code codes.Code
	}{
		{"add", func() error {
			return c.AddEntry("ingress.test1", key(1, 0xff), 5, "ingress.setb1", [][]byte{{0, 2}, {0x7f}})
		}, codes.OK},
		{"add with the table's copy of a shared action name", func() error {
			return c.AddEntry("ingress.ex1", []pipeline.Match{{Value: []byte{0x25, 0}, Mask: []byte{0xff, 0}}}, 5, "ingress.noop", nil)
		}, codes.OK},
		{"duplicate", func() error {
			return c.AddEntry("ingress.test1", key(1, 0xff), 5, "ingress.setb1", [][]byte{{0, 3}, {0x7f}})
		}, codes.AlreadyExists},
		{"modify", func() error { return c.ModifyEntry("ingress.test1", key(1, 0xff), 5, "ingress.noop", nil) }, codes.OK},
		{"delete missing", func() error { return c.DeleteEntry("ingress.test1", key(2, 0xff), 5) }, codes.NotFound},
		{"delete", func() error { return c.DeleteEntry("ingress.test1", key(1, 0xff), 5) }, codes.OK},
		{"unknown table", func() error { return c.AddEntry("ingress.nosuch", key(1, 0xff), 5, "ingress.noop", nil) }, codes.NotFound},
		{"action of another table", func() error { return c.SetDefaultAction("ingress.test1", "ingress.act1", [][]byte{{1}}) }, codes.InvalidArgument},
		{"default action", func() error { return c.SetDefaultAction("ingress.test1", "ingress.setb1", [][]byte{{0, 1}, {1}}) }, codes.OK},
		{"reset default", func() error { return c.ResetDefaultAction("ingress.test1") }, codes.OK},
		{"unknown counter", func() error { _, err := c.ReadCounter("nosuch", 0); return err }, codes.NotFound},
		{"multicast group", func() error { return c.SetMulticastGroup(3, []pipeline.Replica{{Port: 1, Rid: 1}}) }, codes.OK},
		{"clone session", func() error {
			return c.SetCloneSession(4, pipeline.CloneSession{Replicas: []pipeline.Replica{{Port: 2}}})
		}, codes.OK},
	}
	for _, tc := range tests {
		if got := status.Code(tc.run()); got != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.code)
		}
	}
}

func TestLoopbackPacketPath(t *testing.T) {
	lb := NewLoopback()
	if err := lb.Send(0, []byte{1}); err == nil {
		t.Fatal("Send without a pipeline succeeded")
	}
	js, err := os.ReadFile("../../../../shared/conformance/p4c-stf/ternary2-bmv2.p4c.json")
	if err != nil {
		t.Fatal(err)
	}
	pp, err := lb.PreparePipeline(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.Control().AddEntry("ingress.test1", []pipeline.Match{{Value: []byte{0, 0, 1, 1}, Mask: []byte{0, 0, 0xff, 0xff}}}, 1, "ingress.setb1", [][]byte{{0, 2}, {0x7f}}); err != nil {
		t.Fatal(err)
	}
	if err := pp.Commit(); err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	frame := []byte{0, 0, 1, 1, 0, 0, 2, 2, 3, 3, 0x55, 0x66, 0x77, 0x77, 0x88, 0}
	if err := lb.Send(0, frame); err != nil {
		t.Fatal(err)
	}
	got := lb.Received(2)
	if len(got) != 1 || got[0][10] != 0x7f {
		t.Fatalf("port 2 got %x, want the frame with b1 = 0x7f", got)
	}
	if again := lb.Received(2); len(again) != 0 {
		t.Fatal("Received did not forget what it returned")
	}
}

func TestErrorCodes(t *testing.T) {
	for ec, want := range map[engine.ErrorCode]codes.Code{
		engine.CodeInvalidArgument: codes.InvalidArgument, engine.CodeNotFound: codes.NotFound,
		engine.CodeAlreadyExists: codes.AlreadyExists, engine.CodeOutOfRange: codes.OutOfRange,
		engine.CodeResourceExhausted: codes.ResourceExhausted, engine.CodePermissionDenied: codes.PermissionDenied,
		engine.CodeUnimplemented: codes.Unimplemented, engine.CodeFailedPrecondition: codes.FailedPrecondition,
	} {
		if got := status.Code(wrap(&engine.Error{Code: ec, Msg: "x"})); got != want {
			t.Errorf("%v → %v, want %v", ec, got, want)
		}
	}
	if wrap(nil) != nil {
		t.Error("wrap(nil) != nil")
	}
}
