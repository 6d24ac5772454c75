package enginetarget

import (
	"context"
	"errors"
	"sync"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/p4rt"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// CPUPort is the port PacketOut enters on and PacketIn leaves by, as
// terrapin-switch and simple_switch_grpc --cpu-port 255 use it.
const CPUPort = 255

// Loopback is a p4rt.Target that runs the engine in-process: frames are
// handed in with Send and come out through Received, PacketOut and
// PacketIn go through the same engine path as on the switch
// (engine.Pipeline.ProcessPacket: v1model ingress, replication, egress).
// No sockets, no interfaces; it is what the P4Runtime server's tests run
// against, and a way to serve P4Runtime over a pure software pipeline.
type Loopback struct {
	mu       sync.Mutex
	current  *engine.Pipeline
	stopDig  chan struct{}
	toCPU    func([]byte)
	digests  func(pipeline.Digest)
	received map[uint32][][]byte
}

// NewLoopback returns a target with no pipeline.
func NewLoopback() *Loopback { return &Loopback{received: map[uint32][][]byte{}} }

var _ p4rt.Target = (*Loopback)(nil)

type loopbackPrepared struct {
	lb *Loopback
	pl *engine.Pipeline
}

// PreparePipeline implements p4rt.Target.
func (lb *Loopback) PreparePipeline(_ context.Context, deviceConfig []byte) (p4rt.PreparedPipeline, error) {
	pl, err := engine.Load(deviceConfig, engine.Options{DropPort: 511})
	if err != nil {
		return nil, err
	}
	return &loopbackPrepared{lb: lb, pl: pl}, nil
}

func (p *loopbackPrepared) Control() p4rt.PipelineControl { return Control(p.pl) }

func (p *loopbackPrepared) Schema() pipeline.Schema { return p.pl.Schema() }

func (p *loopbackPrepared) Commit() error {
	lb := p.lb
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.stopDig != nil {
		close(lb.stopDig)
	}
	lb.current = p.pl
	stop := make(chan struct{})
	lb.stopDig = stop
	go lb.forwardDigests(p.pl, stop)
	return nil
}

func (p *loopbackPrepared) Discard() {}

// Pipeline is the forwarding pipeline (nil before the first commit), for
// callers that look at the device beside the P4Runtime server, as the
// server's tests do to check that it reads the device rather than a copy.
func (lb *Loopback) Pipeline() *engine.Pipeline {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.current
}

func (lb *Loopback) forwardDigests(pl *engine.Pipeline, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case d := <-pl.Digests():
			lb.mu.Lock()
			sink := lb.digests
			lb.mu.Unlock()
			if sink != nil {
				sink(d)
			}
		}
	}
}

// Close stops the digest forwarder.
func (lb *Loopback) Close() {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.stopDig != nil {
		close(lb.stopDig)
		lb.stopDig = nil
	}
}

// InjectPacketOut implements p4rt.Target.
func (lb *Loopback) InjectPacketOut(frame []byte) error { return lb.Send(CPUPort, frame) }

// SetControllerSink implements p4rt.Target.
func (lb *Loopback) SetControllerSink(sink func(frame []byte)) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.toCPU = sink
}

// SetDigestSink implements p4rt.Target.
func (lb *Loopback) SetDigestSink(sink func(pipeline.Digest)) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.digests = sink
}

// Send runs frame through the pipeline as received on port. Frames for
// the CPU port go to the controller sink; others are kept for Received.
func (lb *Loopback) Send(port uint32, frame []byte) error {
	lb.mu.Lock()
	pl := lb.current
	lb.mu.Unlock()
	if pl == nil {
		return errors.New("no pipeline committed")
	}
	pl.ProcessPacket(frame, port, func(out uint32, f []byte) {
		c := append([]byte(nil), f...)
		lb.mu.Lock()
		sink := lb.toCPU
		if out != CPUPort {
			lb.received[out] = append(lb.received[out], c)
		}
		lb.mu.Unlock()
		if out == CPUPort && sink != nil {
			sink(c)
		}
	})
	return nil
}

// Received returns and forgets the frames that left by port.
func (lb *Loopback) Received(port uint32) [][]byte {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := lb.received[port]
	delete(lb.received, port)
	return out
}
