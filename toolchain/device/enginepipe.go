package device

import "github.com/terrapin/terrapin/toolchain/engine"

// EnginePipeline runs a compiled engine pipeline in the device. It only
// names the engine's calls as Pipeline's: jobs and queueing metadata are
// the engine's own, passed through untouched.
type EnginePipeline struct {
	pl *engine.Pipeline
}

// NewEnginePipeline adapts pl. Load pl with Options.Clock = Device.NowNs so
// that the program's timestamps, meters and the queueing metadata share one
// clock, as in BMv2.
func NewEnginePipeline(pl *engine.Pipeline) *EnginePipeline {
	return &EnginePipeline{pl: pl}
}

// Engine returns the adapted pipeline (for its control API).
func (e *EnginePipeline) Engine() *engine.Pipeline { return e.pl }

// Ingress implements Pipeline.
func (e *EnginePipeline) Ingress(frame []byte, port uint16, arrivalNs int64, jobs []engine.Job) []engine.Job {
	return e.pl.IngressAt(frame, uint32(port), arrivalNs, jobs)
}

// Egress implements Pipeline.
func (e *EnginePipeline) Egress(job engine.Job, q engine.QueueMeta, more []engine.Job) ([]byte, []engine.Job) {
	out, more := e.pl.Egress(job, q, more)
	if out.Pkt == nil {
		return nil, more
	}
	if out.Frame == nil {
		out.Frame = []byte{} // an empty frame still owns its packet
	}
	return out.Frame, more
}

// Release implements Pipeline.
func (e *EnginePipeline) Release(pkt *engine.Packet) { pkt.Release() }
