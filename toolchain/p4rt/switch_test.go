package p4rt_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/terrapin/terrapin/toolchain/stf/viap4rt"
	"google.golang.org/protobuf/proto"
)

// TestSwitchSurvivesMalformedInput throws mutated WriteRequests and
// malformed frames at a running terrapin-switch process (in a tp4rt
// namespace, on veths): every answer must carry a spec code, and the
// switch must still serve and forward afterwards.
func TestSwitchSurvivesMalformedInput(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	prog := testProgram(t)
	tmp := t.TempDir()
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", tmp+"/", "./cmd/terrapin-switch")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building terrapin-switch: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := viap4rt.Start(ctx, viap4rt.Options{Switch: filepath.Join(tmp, "terrapin-switch"), Ports: []uint32{1, 2},
		Veth: true, Namespace: fmt.Sprintf("trptp4rtfz%d", os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Load(ctx, prog.info, prog.json); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, prog: prog}
	id := h.ids()
	client := d.Client()
	rng := rand.New(rand.NewPCG(1, 2))
	seeds := writeSeeds(id)
	for i := 0; i < 3000; i++ {
		req := &p4v1.WriteRequest{DeviceId: viap4rt.DeviceID, ElectionId: d.Primary(),
			Updates: []*p4v1.Update{seeds[rng.IntN(len(seeds))], seeds[rng.IntN(len(seeds))]}}
		data, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		for n := rng.IntN(4) + 1; n > 0; n-- { // flip, drop or duplicate bytes
			p := rng.IntN(len(data))
			switch rng.IntN(3) {
			case 0:
				data[p] ^= byte(1 << rng.IntN(8))
			case 1:
				data = append(data[:p], data[p+1:]...)
			default:
				data = append(data[:p+1], data[p:]...)
			}
			if len(data) == 0 {
				break
			}
		}
		bad := &p4v1.WriteRequest{}
		if proto.Unmarshal(data, bad) != nil {
			continue
		}
		bad.DeviceId, bad.ElectionId = viap4rt.DeviceID, d.Primary()
		_, err = client.Write(ctx, bad)
		checkWriteStatus(t, bad, err)
	}
	for i := 0; i < 2000; i++ {
		frame := make([]byte, 14+rng.IntN(120))
		for j := range frame {
			frame[j] = byte(rng.Uint32())
		}
		if err := d.Send(1, frame); err != nil {
			t.Fatal(err)
		}
	}
	d.Collect(2 * time.Second)
	if !d.Alive() {
		t.Fatal("terrapin-switch died")
	}
	if _, err := client.Capabilities(ctx, &p4v1.CapabilitiesRequest{}); err != nil {
		t.Fatalf("switch no longer answers: %v", err)
	}
	// Still forwarding by what P4Runtime programs.
	if err := d.Load(ctx, prog.info, prog.json); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctx, insert(entry(id.l2, 0, call(id.forward, b(2)), exact(1, mac2...)))); err != nil {
		t.Fatal(err)
	}
	frame := append(append(append([]byte{}, mac2...), 0, 0, 0, 0, 0, 1, 0x88, 0xb5), make([]byte, 50)...)
	if err := d.Send(1, frame); err != nil {
		t.Fatal(err)
	}
	if got := d.Collect(2 * time.Second)[2]; len(got) != 1 {
		t.Fatalf("after the storm, %d frames out of port 2, want 1", len(got))
	}
}
