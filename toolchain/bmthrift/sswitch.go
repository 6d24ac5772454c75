package bmthrift

import (
	"context"
	"slices"
	"time"

	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/simple_switch"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// sswitch implements simple_switch.thrift's SimpleSwitch service.
type sswitch struct{ s *Server }

var _ simple_switch.SimpleSwitch = (*sswitch)(nil)

func (h *sswitch) lock() func() {
	h.s.mu.Lock()
	return h.s.mu.Unlock
}

func (h *sswitch) pipeline() (*engine.Pipeline, bool) {
	v, err := h.s.current()
	if err != nil {
		return nil, false
	}
	return v.pl, true
}

// mirrorsToGroups is the view's sessions to multicast groups.
func (h *sswitch) mirrorsToGroups() map[uint32]uint32 {
	v, err := h.s.current()
	if err != nil {
		return map[uint32]uint32{}
	}
	return v.mc.mirrors
}

// ---- mirroring: BMv2's mirroring sessions are the engine's clone
// sessions, which P4Runtime's CloneSessionEntry writes too. ----

func notFound() error {
	return &simple_switch.InvalidMirroringOperation{Code: simple_switch.MirroringOperationErrorCode_SESSION_NOT_FOUND}
}

// MirroringSessionAdd adds or replaces a session. A session to a multicast
// group (mgid) clones to the group's replicas: the engine's sessions list
// replicas, so the session is rewritten when the group is changed over
// Thrift, not when P4Runtime changes it (docs/bmv2.md).
func (h *sswitch) MirroringSessionAdd(_ context.Context, id int32, cfg *simple_switch.MirroringSessionConfig) error {
	defer h.lock()()
	pl, ok := h.pipeline()
	if !ok || id < 0 || cfg == nil {
		return notFound()
	}
	var cs pipeline.CloneSession
	switch {
	case cfg.Port != nil:
		cs.Replicas = []pipeline.Replica{{Port: uint32(*cfg.Port)}}
	case cfg.Mgid != nil:
		reps, _ := pl.MulticastGroup(uint32(*cfg.Mgid))
		cs.Replicas = append(cs.Replicas, reps...)
	}
	if err := pl.SetCloneSession(uint32(id), cs); err != nil {
		h.s.log.Warn("mirroring_session_add", "id", id, "err", err)
		return notFound()
	}
	mirrors := h.mirrorsToGroups()
	delete(mirrors, uint32(id))
	if cfg.Port == nil && cfg.Mgid != nil {
		mirrors[uint32(id)] = uint32(*cfg.Mgid)
	}
	return nil
}

func (h *sswitch) MirroringSessionDelete(_ context.Context, id int32) error {
	defer h.lock()()
	pl, ok := h.pipeline()
	if !ok || id < 0 {
		return notFound()
	}
	if _, ok := pl.CloneSessionConfig(uint32(id)); !ok {
		return notFound()
	}
	if err := pl.DeleteCloneSession(uint32(id)); err != nil {
		return notFound()
	}
	delete(h.mirrorsToGroups(), uint32(id))
	return nil
}

// MirroringSessionGet reads a session back: one added to a group as its
// mgid; one of one replica as its port; one of several that P4Runtime
// wrote as neither.
func (h *sswitch) MirroringSessionGet(_ context.Context, id int32) (*simple_switch.MirroringSessionConfig, error) {
	defer h.lock()()
	pl, ok := h.pipeline()
	if !ok || id < 0 {
		return nil, notFound()
	}
	cs, ok := pl.CloneSessionConfig(uint32(id))
	if !ok {
		return nil, notFound()
	}
	out := &simple_switch.MirroringSessionConfig{}
	g, toGroup := h.mirrorsToGroups()[uint32(id)]
	if toGroup {
		// unless P4Runtime rewrote the session since
		reps, _ := pl.MulticastGroup(g)
		toGroup = slices.Equal(reps, cs.Replicas)
	}
	if toGroup {
		mg := int32(g)
		out.Mgid = &mg
	} else if len(cs.Replicas) == 1 {
		p := int32(cs.Replicas[0].Port)
		out.Port = &p
	}
	return out, nil
}

// The deprecated mapping calls, over the same sessions: 0 is success.

func (h *sswitch) MirroringMappingAdd(ctx context.Context, id int32, port int32) (int32, error) {
	if err := h.MirroringSessionAdd(ctx, id, &simple_switch.MirroringSessionConfig{Port: &port}); err != nil {
		return 1, nil
	}
	return 0, nil
}

func (h *sswitch) MirroringMappingDelete(ctx context.Context, id int32) (int32, error) {
	if err := h.MirroringSessionDelete(ctx, id); err != nil {
		return 1, nil
	}
	return 0, nil
}

func (h *sswitch) MirroringMappingGetEgressPort(ctx context.Context, id int32) (int32, error) {
	cfg, err := h.MirroringSessionGet(ctx, id)
	if err != nil || cfg.Port == nil {
		return -1, nil
	}
	return *cfg.Port, nil
}

// ---- egress queues ----

func (h *sswitch) setDepth(port, priority, depth int) int32 {
	if h.s.cfg.Device == nil {
		return 1
	}
	if err := h.s.cfg.Device.SetQueueDepth(port, priority, depth); err != nil {
		h.s.log.Warn("set_queue_depth", "err", err)
		return 1
	}
	return 0
}

func (h *sswitch) SetEgressPriorityQueueDepth(_ context.Context, port, priority, depth int32) (int32, error) {
	if port < 0 || priority < 0 {
		return 1, nil
	}
	return h.setDepth(int(port), int(priority), int(depth)), nil
}

func (h *sswitch) SetEgressQueueDepth(_ context.Context, port, depth int32) (int32, error) {
	if port < 0 {
		return 1, nil
	}
	return h.setDepth(int(port), -1, int(depth)), nil
}

func (h *sswitch) SetAllEgressQueueDepths(_ context.Context, depth int32) (int32, error) {
	return h.setDepth(-1, -1, int(depth)), nil
}

// Queue rates: BMv2 limits each priority queue of a port to a number of
// packets per second (0: no limit); so does the device (Device.SetQueueRate),
// beside a port's line rate in bits per second (--port-rate). 0 is success,
// as BMv2 answers, also for a port number without an interface (BMv2
// keeps queues for any); the drop port and beyond answer 1.
func (h *sswitch) setRate(port, priority int, rate int64) int32 {
	if h.s.cfg.Device == nil {
		return 1
	}
	if err := h.s.cfg.Device.SetQueueRate(port, priority, rate); err != nil {
		h.s.log.Warn("set_queue_rate", "err", err)
		return 1
	}
	return 0
}

func (h *sswitch) SetEgressPriorityQueueRate(_ context.Context, port, priority int32, rate int64) (int32, error) {
	if port < 0 || priority < 0 {
		return 1, nil
	}
	return h.setRate(int(port), int(priority), rate), nil
}

func (h *sswitch) SetEgressQueueRate(_ context.Context, port int32, rate int64) (int32, error) {
	if port < 0 {
		return 1, nil
	}
	return h.setRate(int(port), -1, rate), nil
}

func (h *sswitch) SetAllEgressQueueRates(_ context.Context, rate int64) (int32, error) {
	return h.setRate(-1, -1, rate), nil
}

// ---- the clock ----

// GetTimeElapsedUs is the switch's clock: microseconds since it started,
// the clock of ingress_global_timestamp.
func (h *sswitch) GetTimeElapsedUs(context.Context) (int64, error) {
	if h.s.cfg.Device == nil {
		return 0, nil
	}
	return h.s.cfg.Device.NowNs() / 1000, nil
}

// GetTimeSinceEpochUs is the Unix time in microseconds.
func (h *sswitch) GetTimeSinceEpochUs(context.Context) (int64, error) {
	return time.Now().UnixMicro(), nil
}
