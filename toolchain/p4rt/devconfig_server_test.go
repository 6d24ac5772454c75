package p4rt_test

import (
	"bytes"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDeviceConfigActions: each p4_device_config encoding under each
// SetForwardingPipelineConfig action, on the in-process server. A
// P4DeviceConfig without device_data keeps the running program for VERIFY
// and VERIFY_AND_COMMIT (PI's legacy form) and is refused elsewhere, or
// when nothing runs.
func TestDeviceConfigActions(t *testing.T) {
	const (
		verify    = p4v1.SetForwardingPipelineConfigRequest_VERIFY
		save      = p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE
		commit    = p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT
		reconcile = p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT
	)
	prog := testProgram(t)
	wrapped := wrap(true, prog.json, nil)
	legacy := wrap(true, nil, nil)
	tests := []struct {
		name    string
		running bool // a program was committed first (raw JSON)
		action  p4v1.SetForwardingPipelineConfigRequest_Action
		cfg     []byte
		want    codes.Code
	}{
		{"wrapper, VERIFY", false, verify, wrapped, codes.OK},
		{"wrapper, VERIFY_AND_SAVE", false, save, wrapped, codes.OK},
		{"wrapper, VERIFY_AND_COMMIT", false, commit, wrapped, codes.OK},
		{"wrapper, RECONCILE_AND_COMMIT", true, reconcile, wrapped, codes.OK},
		{"no device_data, VERIFY_AND_COMMIT, nothing runs", false, commit, legacy, codes.FailedPrecondition},
		{"no device_data, VERIFY, nothing runs", false, verify, legacy, codes.FailedPrecondition},
		{"no device_data, VERIFY_AND_COMMIT", true, commit, legacy, codes.OK},
		{"empty, VERIFY_AND_COMMIT", true, commit, []byte{}, codes.OK},
		{"no device_data, VERIFY", true, verify, legacy, codes.OK},
		{"no device_data, VERIFY_AND_SAVE", true, save, legacy, codes.InvalidArgument},
		{"no device_data, RECONCILE_AND_COMMIT", true, reconcile, legacy, codes.InvalidArgument},
		{"wrapper of something not JSON", true, commit, wrap(true, []byte("{nope"), nil), codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.becomePrimary()
			if tc.running {
				if err := h.setPipeline(commit, h.config()); err != nil {
					t.Fatal(err)
				}
			}
			cfg := h.config()
			cfg.P4DeviceConfig = tc.cfg
			err := h.setPipeline(tc.action, cfg)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("%v (%v), want %v", got, err, tc.want)
			}
			if err != nil || tc.action != commit {
				return
			}
			// Read back as sent, and the program runs: an entry of its
			// table can be written.
			g, err := h.client.GetForwardingPipelineConfig(h.ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: deviceID})
			if err != nil || !bytes.Equal(g.GetConfig().GetP4DeviceConfig(), tc.cfg) {
				t.Errorf("GetForwardingPipelineConfig: %v; the config differs from what was sent", err)
			}
			id := h.ids()
			h.mustWrite(insert(entry(id.l2, 0, call(id.forward, b(2)), exact(1, mac2...))))
		})
	}
}
