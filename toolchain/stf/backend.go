package stf

import (
	"fmt"
	"sync"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Program is one compiled test program.
type Program struct {
	Name       string // NAME of NAME.p4
	JSON       []byte // BMv2 JSON
	JSONPath   string
	P4InfoPath string // P4Info text file, "" if none
	// Model is the JSON loaded into an engine pipeline; the runner resolves
	// STF names against it whatever the backend, and passes resolved
	// objects (with JSON names and ids) to the backend.
	Model *engine.Pipeline
}

// OutPacket is a frame the switch sent.
type OutPacket struct {
	Port uint32
	Data []byte
}

// Backend is a switch the runner drives. EngineBackend is the in-process
// implementation; a P4Runtime backend (entries over P4Runtime, packets over
// veth interfaces to a running terrapin-switch) implements the same
// methods. Names in the arguments are the BMv2 JSON's (TableInfo.Name,
// ActionInfo.Name, KeyFieldInfo.Name), which p4c also uses in P4Info.
type Backend interface {
	// Start loads the program into a fresh switch.
	Start(prog *Program) error
	AddEntry(t pipeline.TableInfo, e pipeline.TableEntry) error
	DeleteEntry(t pipeline.TableInfo, match []pipeline.Match, priority int32) error
	SetDefault(t pipeline.TableInfo, a pipeline.ActionCall) error
	SetCloneSession(id uint32, s pipeline.CloneSession) error
	SetMulticastGroup(group uint32, replicas []pipeline.Replica) error
	ReadCounter(c pipeline.CounterInfo, index int) (pipeline.CounterData, error)
	ReadDirectCounter(t pipeline.TableInfo, match []pipeline.Match, priority int32) (pipeline.CounterData, error)
	// Send injects a frame on a port.
	Send(port uint32, frame []byte) error
	// Wait returns once the switch has finished with every frame sent so
	// far.
	Wait() error
	// Outputs returns, after waiting, every frame the switch sent since the
	// last call, in the order sent on each port.
	Outputs() ([]OutPacket, error)
	// Stop releases the switch.
	Stop() error
}

// EngineBackend runs programs in-process on the engine.
type EngineBackend struct {
	pl  *engine.Pipeline
	mu  sync.Mutex
	out []OutPacket
}

// NewEngineBackend returns a backend running the engine in-process.
func NewEngineBackend() *EngineBackend { return &EngineBackend{} }

// Start implements Backend.
func (b *EngineBackend) Start(prog *Program) error {
	pl, err := engine.Load(prog.JSON, engine.Options{RandomSeed: 1})
	if err != nil {
		return err
	}
	b.pl = pl
	b.out = nil
	return nil
}

// AddEntry implements Backend.
func (b *EngineBackend) AddEntry(t pipeline.TableInfo, e pipeline.TableEntry) error {
	return b.pl.AddEntry(t.ID, e)
}

// DeleteEntry implements Backend.
func (b *EngineBackend) DeleteEntry(t pipeline.TableInfo, match []pipeline.Match, priority int32) error {
	return b.pl.DeleteEntry(t.ID, match, priority)
}

// SetDefault implements Backend.
func (b *EngineBackend) SetDefault(t pipeline.TableInfo, a pipeline.ActionCall) error {
	return b.pl.SetDefaultAction(t.ID, a)
}

// SetCloneSession implements Backend.
func (b *EngineBackend) SetCloneSession(id uint32, s pipeline.CloneSession) error {
	return b.pl.SetCloneSession(id, s)
}

// SetMulticastGroup implements Backend.
func (b *EngineBackend) SetMulticastGroup(group uint32, replicas []pipeline.Replica) error {
	return b.pl.SetMulticastGroup(group, replicas)
}

// ReadCounter implements Backend.
func (b *EngineBackend) ReadCounter(c pipeline.CounterInfo, index int) (pipeline.CounterData, error) {
	return b.pl.ReadCounter(c.ID, index)
}

// ReadDirectCounter implements Backend.
func (b *EngineBackend) ReadDirectCounter(t pipeline.TableInfo, match []pipeline.Match, priority int32) (pipeline.CounterData, error) {
	return b.pl.ReadDirectCounter(t.ID, match, priority)
}

// Send implements Backend: the engine processes the frame at once.
func (b *EngineBackend) Send(port uint32, frame []byte) (err error) {
	if b.pl == nil {
		return fmt.Errorf("no program loaded")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine panic: %v", r)
		}
	}()
	b.pl.ProcessPacket(frame, port, func(p uint32, f []byte) {
		b.mu.Lock()
		b.out = append(b.out, OutPacket{Port: p, Data: append([]byte(nil), f...)})
		b.mu.Unlock()
	})
	return nil
}

// Wait implements Backend (the engine is synchronous).
func (b *EngineBackend) Wait() error { return nil }

// Outputs implements Backend.
func (b *EngineBackend) Outputs() ([]OutPacket, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.out
	b.out = nil
	return out, nil
}

// Stop implements Backend.
func (b *EngineBackend) Stop() error {
	b.pl = nil
	return nil
}
