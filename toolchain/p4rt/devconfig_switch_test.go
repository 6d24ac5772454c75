package p4rt_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/terrapin/terrapin/toolchain/stf/viap4rt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
)

// wrap encodes PI's p4.tmp.P4DeviceConfig (p4/tmp/p4config.proto:
// reassign = 1, extras = 2 { map<string,string> kv = 1 }, device_data =
// 3), as p4lang's tutorials' p4runtime_lib sends it.
func wrap(reassign bool, data []byte, extras map[string]string) []byte {
	var b []byte
	if reassign {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if len(extras) > 0 {
		var ex []byte
		for k, v := range extras {
			var kv []byte
			kv = protowire.AppendTag(kv, 1, protowire.BytesType)
			kv = protowire.AppendString(kv, k)
			kv = protowire.AppendTag(kv, 2, protowire.BytesType)
			kv = protowire.AppendString(kv, v)
			ex = protowire.AppendTag(ex, 1, protowire.BytesType)
			ex = protowire.AppendBytes(ex, kv)
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, ex)
	}
	if data != nil {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, data)
	}
	return b
}

// switchBinaries are the P4Runtime switches a cross-switch test runs:
// terrapin-switch built from this tree, and p4lang's simple_switch_grpc
// where scripts/bmv2-bin.sh finds one (PATH, else make bmv2's build).
func switchBinaries(t *testing.T) map[string]string {
	t.Helper()
	tmp := t.TempDir()
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", tmp+"/", "./cmd/terrapin-switch")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building terrapin-switch: %v\n%s", err, out)
	}
	bins := map[string]string{"terrapin-switch": filepath.Join(tmp, "terrapin-switch")}
	if out, err := exec.Command("bash", "../../scripts/bmv2-bin.sh", "simple_switch_grpc").Output(); err == nil {
		bins["simple_switch_grpc"] = strings.TrimSpace(string(out))
	} else {
		t.Log("no simple_switch_grpc (make bmv2 builds it): terrapin-switch only")
	}
	return bins
}

// TestDeviceConfigEncodingsOnBothSwitches pushes the program in every
// p4_device_config encoding PI's simple_switch_grpc takes, to terrapin-switch
// and (when built) to simple_switch_grpc itself, and checks the same
// outcome on both: accepted, read back byte for byte, and forwarding with
// an entry written afterwards; or refused with the previous program still
// forwarding. Where BMv2 accepts what then breaks it, the case says so and
// runs on terrapin-switch only (docs/p4runtime.md).
func TestDeviceConfigEncodingsOnBothSwitches(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	prog := testProgram(t)
	h := &harness{t: t, prog: prog}
	id := h.ids()
	jsonFile := filepath.Join(t.TempDir(), "p4rt_test.json")
	if err := os.WriteFile(jsonFile, prog.json, 0o644); err != nil {
		t.Fatal(err)
	}
	frame := append(append(append([]byte{}, mac2...), 0, 0, 0, 0, 0, 1, 0x88, 0xb5), make([]byte, 50)...)
	tests := []struct {
		name string
		// started: the switch runs the program from its command line
		// (PI's legacy flow) instead of starting with --no-p4 and getting
		// the raw JSON first.
		started bool
		cfg     []byte
		// refused: the code terrapin-switch answers (OK: accepted);
		// PI's answer, where it refuses too, may differ in code (PI
		// answers UNKNOWN for everything its BMv2 target throws).
		refused codes.Code
		// bmv2Skip says why simple_switch_grpc cannot take the case.
		bmv2Skip string
	}{
		{name: "BMv2 JSON", cfg: prog.json},
		{name: "BMv2 JSON after whitespace", cfg: append([]byte(" \n"), prog.json...)},
		{name: "P4DeviceConfig, reassign", cfg: wrap(true, prog.json, nil)},
		{name: "P4DeviceConfig, no reassign", cfg: wrap(false, prog.json, nil)},
		{name: "P4DeviceConfig with extras", cfg: wrap(true, prog.json, map[string]string{"port": "9090"})},
		{name: "P4DeviceConfig without device_data, program on the command line", started: true, cfg: wrap(true, nil, nil)},
		{name: "empty, program on the command line", started: true, cfg: []byte{}},
		{name: "P4DeviceConfig without device_data, no program", cfg: wrap(true, nil, nil), refused: codes.FailedPrecondition,
			bmv2Skip: "PI answers OK, and then every table write fails: 'Error when adding match entry to target'"},
		{name: "neither JSON nor a P4DeviceConfig", cfg: []byte("\xff\xfe not a config"), refused: codes.InvalidArgument},
		{name: "P4DeviceConfig of something not JSON", cfg: wrap(true, []byte("not json"), nil), refused: codes.InvalidArgument,
			bmv2Skip: "BMv2 answers UNKNOWN 'Error in first phase of device update', then crashes (segmentation fault)"},
	}
	for swName, bin := range switchBinaries(t) {
		for i, tc := range tests {
			t.Run(swName+"/"+tc.name, func(t *testing.T) {
				if swName == "simple_switch_grpc" && tc.bmv2Skip != "" {
					t.Skipf("not on BMv2: %s", tc.bmv2Skip)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				opts := viap4rt.Options{Switch: bin, Ports: []uint32{1, 2}, Veth: true,
					Namespace: fmt.Sprintf("trptp4rtdc%dx%d", os.Getpid(), i)}
				if tc.started {
					opts.Program = jsonFile
				}
				d, err := viap4rt.Start(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				set := func(cfg []byte) error {
					_, err := d.Client().SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{
						DeviceId: viap4rt.DeviceID, ElectionId: d.Primary(),
						Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
						Config: &p4v1.ForwardingPipelineConfig{P4Info: prog.info, P4DeviceConfig: cfg}})
					return err
				}
				forwards := func() {
					t.Helper()
					if err := d.Send(1, frame); err != nil {
						t.Fatal(err)
					}
					if got := d.Collect(2 * time.Second)[2]; len(got) != 1 {
						t.Fatalf("%d frames out of port 2, want 1 (%s)", len(got), d.ExitReason())
					}
				}
				if tc.refused != codes.OK && tc.refused != codes.FailedPrecondition {
					// a program that forwards, then the refused config
					if err := set(prog.json); err != nil {
						t.Fatal(err)
					}
					if err := d.Write(ctx, insert(entry(id.l2, 0, call(id.forward, b(2)), exact(1, mac2...)))); err != nil {
						t.Fatal(err)
					}
				}
				err = set(tc.cfg)
				if tc.refused != codes.OK {
					if err == nil {
						t.Fatal("accepted")
					}
					if c := status.Code(err); swName == "terrapin-switch" && c != tc.refused {
						t.Errorf("refused with %v (%v), want %v", c, err, tc.refused)
					}
					if tc.refused != codes.FailedPrecondition {
						forwards() // the previous program still runs
					}
					return
				}
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				g, err := d.Client().GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: viap4rt.DeviceID})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(g.GetConfig().GetP4DeviceConfig(), tc.cfg) {
					t.Errorf("GetForwardingPipelineConfig returns %d bytes, not the %d sent", len(g.GetConfig().GetP4DeviceConfig()), len(tc.cfg))
				}
				if err := d.Write(ctx, insert(entry(id.l2, 0, call(id.forward, b(2)), exact(1, mac2...)))); err != nil {
					t.Fatal(err)
				}
				forwards()
			})
		}
	}
}

// TestTutorialClientOnBothSwitches runs a client written the way p4lang's
// tutorials write theirs for simple_switch_grpc (testdata/tutorial_client.py:
// the pipeline pushed as a p4.tmp.P4DeviceConfig, an entry written and read
// back, a frame forwarded by it) unchanged against terrapin-switch and, when
// built, simple_switch_grpc. Needs root and the p4runtime-shell venv (made
// once by scripts/p4rt-shell.sh).
func TestTutorialClientOnBothSwitches(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", filepath.Join(repo, "scripts/p4rt-shell.sh"), "--setup-only").CombinedOutput(); err != nil {
		t.Fatalf("p4runtime-shell venv: %v\n%s", err, out)
	}
	prog := testProgram(t)
	dir := t.TempDir()
	jsonPath, infoPath := filepath.Join(dir, "p4rt_test.json"), filepath.Join(dir, "p4rt_test.p4info.txtpb")
	info, err := prototext.Marshal(prog.info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jsonPath, prog.json, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(infoPath, info, 0o644); err != nil {
		t.Fatal(err)
	}
	for swName, bin := range switchBinaries(t) {
		t.Run(swName, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ns := fmt.Sprintf("trptp4rttc%d", os.Getpid())
			d, err := viap4rt.Start(ctx, viap4rt.Options{Switch: bin, Ports: []uint32{1, 2}, Veth: true, Namespace: ns, Passive: true})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			client := exec.CommandContext(ctx, "ip", "netns", "exec", ns,
				filepath.Join(repo, "build/venv-p4rtshell/bin/python"), "testdata/tutorial_client.py",
				"--addr", "127.0.0.1:19650", "--device-id", fmt.Sprint(viap4rt.DeviceID),
				"--p4info", infoPath, "--json", jsonPath, "--ports", "tp4rt1h,tp4rt2h")
			out, err := client.CombinedOutput()
			t.Logf("tutorial client against %s:\n%s", swName, out)
			if err != nil {
				t.Errorf("the client failed (%v); switch: %s", err, d.ExitReason())
			}
		})
	}
}
