package bmthrift

import (
	"context"

	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/standard"
	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/engine"
)

func swapErr(code standard.SwapOperationErrorCode) error {
	return &standard.InvalidSwapOperation{Code: code}
}

// BmLoadNewConfig compiles a program to be swapped in by BmSwapConfigs.
// BMv2 refuses a second one while one waits (ONGOING_SWAP). A program
// that does not load is refused with CONFIG_SWAP_DISABLED, the only code
// the service has for it (BMv2 itself answers a bad JSON by exiting).
func (h *std) BmLoadNewConfig(ctx context.Context, config string) error {
	defer h.lock()()
	s := h.s
	if s.pendCfg.prepared != nil {
		return swapErr(standard.SwapOperationErrorCode_ONGOING_SWAP)
	}
	js := []byte(config)
	p, err := s.cfg.Target.PreparePipeline(ctx, js)
	if err != nil {
		s.log.Warn("load_new_config: the program does not load", "err", err)
		return swapErr(standard.SwapOperationErrorCode_CONFIG_SWAP_DISABLED)
	}
	s.pendCfg = pendingConfig{prepared: p, json: js}
	return nil
}

// BmSwapConfigs makes the loaded program the one forwarding. As in BMv2
// the new program starts with empty tables, counters, registers and
// multicast engine, and keeps the mirroring sessions (simple_switch keeps
// them outside the program's state). The P4Runtime server is told
// (Config.PipelineReplaced).
func (h *std) BmSwapConfigs(context.Context) error {
	defer h.lock()()
	s := h.s
	if s.pendCfg.prepared == nil {
		return swapErr(standard.SwapOperationErrorCode_NO_ONGOING_SWAP)
	}
	p := s.pendCfg
	s.pendCfg = pendingConfig{}
	if old, _, ok := s.cfg.Target.Current(); ok && old.Engine != nil {
		s.carryMirrors(old.Engine, p)
	}
	if err := p.prepared.Commit(); err != nil {
		p.prepared.Discard()
		s.log.Error("swap_configs", "err", err)
		return swapErr(standard.SwapOperationErrorCode_CONFIG_SWAP_DISABLED)
	}
	s.view = nil
	if s.cfg.PipelineReplaced != nil {
		s.cfg.PipelineReplaced(p.json)
	}
	s.log.Info("swap_configs: new program forwarding")
	return nil
}

// carryMirrors copies the mirroring (clone) sessions of old into the
// pending pipeline.
func (s *Server) carryMirrors(old *engine.Pipeline, p pendingConfig) {
	nu, ok := p.prepared.(interface{ Engine() *engine.Pipeline })
	if !ok || nu.Engine() == nil {
		return
	}
	for _, id := range old.CloneSessions() {
		if cs, ok := old.CloneSessionConfig(id); ok {
			_ = nu.Engine().SetCloneSession(id, cs)
		}
	}
}

// BmResetState empties every table (default entries too), action profile,
// counter, meter, register, value set and the multicast engine, keeping
// the program and the mirroring sessions, as BMv2's reset_state does.
func (h *std) BmResetState(context.Context) error {
	defer h.lock()()
	v, err := h.s.current()
	if err != nil {
		return nil
	}
	v.reset()
	h.s.view = nil
	return nil
}

func (v *view) reset() {
	pl := v.pl
	for _, t := range pl.Tables() {
		_ = pl.ClearTable(t.ID)
		_ = pl.ResetDefaultAction(t.ID)
	}
	for _, ap := range pl.ActionProfiles() {
		if ap.HasSelector {
			gs, _ := pl.ProfileGroups(ap.ID)
			for g := range gs {
				_ = pl.DeleteProfileGroup(ap.ID, g)
			}
		}
		ms, _ := pl.ProfileMembers(ap.ID)
		for m := range ms {
			_ = pl.DeleteProfileMember(ap.ID, m)
		}
		_ = pl.ResetProfile(ap.ID)
	}
	for _, c := range pl.Counters() {
		if !c.Direct {
			_ = pl.ResetCounters(c.ID)
		}
	}
	for _, m := range pl.Meters() {
		for i := 0; !m.Direct && i < m.Size; i++ {
			_ = pl.SetMeter(m.ID, i, nil)
		}
	}
	for _, r := range pl.Registers() {
		_ = pl.ResetRegister(r.ID)
	}
	for _, vs := range pl.ValueSets() {
		_ = pl.SetValueSet(vs.ID, nil)
	}
	for _, g := range pl.MulticastGroups() {
		_ = pl.DeleteMulticastGroup(g)
	}
}

// ---- device manager ----

func devErr() error { return &standard.InvalidDevMgrOperation{Code: standard.DevMgrErrorCode_ERROR} }

// port_add and port_remove open and close an interface while the switch
// runs (device.AddPort, RemovePort). BMv2 answers every failure with the
// one error code it has; the reason goes to the log.
func (h *std) BmDevMgrAddPort(_ context.Context, iface string, num int32, pcapDir string) error {
	if h.s.cfg.Device == nil || num < 0 || num >= device.DropPort {
		return devErr()
	}
	if err := h.s.cfg.Device.AddPort(uint16(num), iface, pcapDir); err != nil {
		h.s.log.Warn("port_add refused", "port", num, "iface", iface, "err", err)
		return devErr()
	}
	return nil
}

func (h *std) BmDevMgrRemovePort(_ context.Context, num int32) error {
	if h.s.cfg.Device == nil || num < 0 || num >= device.DropPort {
		return devErr()
	}
	if err := h.s.cfg.Device.RemovePort(uint16(num)); err != nil {
		h.s.log.Warn("port_remove refused", "port", num, "err", err)
		return devErr()
	}
	return nil
}

func (h *std) BmDevMgrShowPorts(context.Context) ([]*standard.DevMgrPortInfo, error) {
	out := []*standard.DevMgrPortInfo{}
	if h.s.cfg.Device == nil {
		return out, nil
	}
	for _, p := range h.s.cfg.Device.Ports() {
		out = append(out, &standard.DevMgrPortInfo{PortNum: int32(p.Number), IfaceName: p.Name, IsUp: p.Up,
			Extra: map[string]string{}})
	}
	return out, nil
}

func (h *std) BmMgmtGetInfo(context.Context) (*standard.BmConfig, error) {
	// An empty socket name where none is published, as simple_switch_grpc
	// answers.
	socket := h.s.cfg.NotificationsSocket
	return &standard.BmConfig{DeviceID: int64(h.s.cfg.DeviceID), ThriftPort: int32(h.s.cfg.ThriftPort),
		NotificationsSocket: &socket}, nil
}
