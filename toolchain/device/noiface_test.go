package device

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/terrapin/terrapin/toolchain/compiler"
	"github.com/terrapin/terrapin/toolchain/engine"
)

// noIfaceProgram sends every frame from port 1 to port 510, which has no
// interface, and egress recirculates what reaches 510, as SD-Fabric's
// v1model build recirculates UE-to-UE traffic (its FAKE_V1MODEL_RECIRC_PORT).
// The recirculated pass leaves on port 2 with the source MAC's last byte
// set to 0xee. A frame from port 2 goes to port 509, also without an
// interface, where egress does nothing: it is dropped.
const noIfaceProgram = `
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { }
parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.eth); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 4) {          // recirculated
            h.eth.src[7:0] = 0xee;
            sm.egress_spec = 2;
        } else if (sm.ingress_port == 1) {
            sm.egress_spec = 510;
        } else {
            sm.egress_spec = 509;
        }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == 510) {
            recirculate_preserving_field_list(0);
        }
    }
}
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
`

func compileSource(t *testing.T, src string) []byte {
	t.Helper()
	res, errs := compiler.Compile(compiler.Options{
		Program: "prog.p4",
		ReadFile: func(name string) ([]byte, error) {
			if name == "prog.p4" {
				return []byte(src), nil
			}
			return os.ReadFile(name)
		},
	})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	return res.JSON
}

// TestEgressRunsForAPortWithoutInterface: BMv2 queues a packet for any port
// below the drop port and runs egress on it, interface or not, so a program
// may send a packet to a port number no interface has and recirculate (or
// clone) it in egress. The device did drop such a packet before egress
// (no_such_port), and SD-Fabric's UE-to-UE traffic never came back.
func TestEgressRunsForAPortWithoutInterface(t *testing.T) {
	js := compileSource(t, noIfaceProgram)
	tn := newTestNet(t, 2, 1500)
	d := tn.newDevice(t, Config{})
	pl, err := engine.Load(js, engine.Options{Clock: d.NowNs, DropPort: DropPort})
	if err != nil {
		t.Fatal(err)
	}
	d.SetPipeline(NewEnginePipeline(pl))
	h1, h2 := tn.hostSocket(t, 1), tn.hostSocket(t, 2)
	start(t, d)

	f := testFrame(100, 1, 0)
	h1.send(t, f)
	got, _ := h2.recv(t, 2*time.Second)
	if got == nil {
		t.Fatalf("the frame sent to port 510 and recirculated there did not come out of port 2 (drops: no_such_port %d)",
			d.Stats().DropNoPort)
	}
	want := append([]byte(nil), f...)
	want[11] = 0xee
	if !bytes.Equal(got, want) {
		t.Errorf("recirculated frame: % x, want % x", got[:14], want[:14])
	}
	if n := d.Stats().DropNoPort; n != 0 {
		t.Errorf("no_such_port = %d after a recirculation, want 0", n)
	}

	// Egress ran for port 509 too, and left a frame nobody can carry: it is
	// dropped and counted, and nothing comes out anywhere.
	h2.send(t, testFrame(100, 2, 0))
	waitFor(t, func() bool { return d.Stats().DropNoPort == 1 }, "the frame for port 509 counted as no_such_port")
	for i, h := range []*hostSock{h1, h2} {
		if g, _ := h.recv(t, 100*time.Millisecond); g != nil {
			t.Errorf("a frame came out of port %d: % x", i+1, g[:14])
		}
	}
}
