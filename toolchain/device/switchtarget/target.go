// Package switchtarget makes a running device the Target of the P4Runtime
// server: pipelines pushed by SetForwardingPipelineConfig are compiled and
// swapped into the device, PacketOut frames enter ingress on the CPU port,
// frames sent to the CPU port become PacketIn, and digests flow to the
// server.
package switchtarget

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/p4rt"
	"github.com/terrapin/terrapin/toolchain/p4rt/enginetarget"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Compiled is one pipeline compiled from BMv2 JSON.
type Compiled struct {
	Pipeline device.Pipeline
	Control  p4rt.PipelineControl
	// Schema describes the compiled program (p4rt.PreparedPipeline.Schema).
	Schema pipeline.Schema
	// Digests delivers the pipeline's digest messages; nil if none. It is
	// drained while the pipeline forwards.
	Digests <-chan pipeline.Digest
	// Close releases the pipeline (optional).
	Close func()
	// Engine is the engine pipeline, when the compiler is the engine's
	// (BMv2's Thrift runtime drives it directly; toolchain/bmthrift).
	Engine *engine.Pipeline
}

// Compiler turns BMv2 JSON bytes into a pipeline.
type Compiler func(ctx context.Context, json []byte) (Compiled, error)

// EngineCompiler compiles with the engine, on dev's clock, logging the
// program's log_msg output to log (nil: discarded).
func EngineCompiler(dev *device.Device, log func(string)) Compiler {
	return func(ctx context.Context, json []byte) (Compiled, error) {
		pl, err := engine.Load(json, engine.Options{Clock: dev.NowNs, DropPort: device.DropPort, Log: log})
		if err != nil {
			return Compiled{}, err
		}
		return Compiled{
			Pipeline: device.NewEnginePipeline(pl),
			Control:  enginetarget.Control(pl),
			Schema:   pl.Schema(),
			Digests:  pl.Digests(),
			Engine:   pl,
		}, nil
	}
}

// Target implements p4rt.Target over a device.
type Target struct {
	dev     *device.Device
	compile Compiler

	mu         sync.Mutex
	current    *prepared
	digestSink atomic.Pointer[func(pipeline.Digest)]
	ctlCancel  func()
}

// New returns a Target for dev.
func New(dev *device.Device, compile Compiler) *Target {
	return &Target{dev: dev, compile: compile}
}

var _ p4rt.Target = (*Target)(nil)

type prepared struct {
	t         *Target
	c         Compiled
	json      []byte
	committed bool
	stop      chan struct{}
	done      chan struct{}
}

// PreparePipeline implements p4rt.Target.
func (t *Target) PreparePipeline(ctx context.Context, deviceConfig []byte) (p4rt.PreparedPipeline, error) {
	if t.compile == nil {
		return nil, errors.New("this switch was built without a pipeline compiler")
	}
	if len(deviceConfig) == 0 {
		return nil, errors.New("empty device config: expected BMv2 JSON")
	}
	c, err := t.compile(ctx, deviceConfig)
	if err != nil {
		return nil, err
	}
	return &prepared{t: t, c: c, json: deviceConfig}, nil
}

// Current returns the pipeline the device forwards with and the BMv2 JSON
// it was compiled from; ok is false when there is none.
func (t *Target) Current() (c Compiled, json []byte, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current == nil {
		return Compiled{}, nil, false
	}
	return t.current.c, t.current.json, true
}

// Device returns the device the target drives.
func (t *Target) Device() *device.Device { return t.dev }

func (p *prepared) Control() p4rt.PipelineControl { return p.c.Control }

func (p *prepared) Schema() pipeline.Schema { return p.c.Schema }

// Engine is the engine pipeline (nil when the compiler is not the engine).
func (p *prepared) Engine() *engine.Pipeline { return p.c.Engine }

// Commit swaps the pipeline into the device; packets already queued finish
// on the old one.
func (p *prepared) Commit() error {
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.committed {
		return errors.New("pipeline already committed")
	}
	p.committed = true
	t.dev.SetPipeline(p.c.Pipeline)
	old := t.current
	t.current = p
	if p.c.Digests != nil {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.forwardDigests()
	}
	if old != nil {
		old.release()
	}
	return nil
}

func (p *prepared) forwardDigests() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case dg, ok := <-p.c.Digests:
			if !ok {
				return
			}
			if sink := p.t.digestSink.Load(); sink != nil {
				(*sink)(dg)
			}
		}
	}
}

func (p *prepared) release() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	if p.c.Close != nil {
		p.c.Close()
	}
}

func (p *prepared) Discard() {
	if !p.committed && p.c.Close != nil {
		p.c.Close()
	}
}

// InjectPacketOut implements p4rt.Target.
func (t *Target) InjectPacketOut(frame []byte) error { return t.dev.InjectPacketOut(frame) }

// SetControllerSink implements p4rt.Target.
func (t *Target) SetControllerSink(sink func(frame []byte)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctlCancel != nil {
		t.ctlCancel()
		t.ctlCancel = nil
	}
	if sink != nil {
		t.ctlCancel = t.dev.SubscribePacketIn(sink)
	}
}

// SetDigestSink implements p4rt.Target.
func (t *Target) SetDigestSink(sink func(pipeline.Digest)) {
	if sink == nil {
		t.digestSink.Store(nil)
		return
	}
	t.digestSink.Store(&sink)
}

// Close stops digest forwarding and releases the current pipeline.
func (t *Target) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current != nil {
		t.current.release()
		t.current = nil
	}
}
