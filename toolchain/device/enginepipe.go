package device

import "github.com/terrapin/terrapin/toolchain/engine"

// EnginePipeline runs a compiled engine pipeline in the device.
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

// jobs returns the caller's engine job buffer, kept in its scratch.
func jobs(sc *Scratch) *[]engine.Job {
	if s, ok := sc.V.(*[]engine.Job); ok {
		return s
	}
	s := make([]engine.Job, 0, 64)
	sc.V = &s
	return &s
}

func (e *EnginePipeline) appendJobs(dst []Job, src []engine.Job) []Job {
	for i := range src {
		j := &src[i]
		port := uint16(DropPort + 1) // out of range: counted as no such port
		if j.Port < 512 {
			port = uint16(j.Port)
		}
		dst = append(dst, Job{Pkt: j.Pkt, Port: port, Priority: j.Priority})
		src[i] = engine.Job{}
	}
	return dst
}

// Ingress implements Pipeline.
func (e *EnginePipeline) Ingress(frame []byte, port uint16, arrivalNs int64, out []Job, sc *Scratch) []Job {
	s := jobs(sc)
	ej := e.pl.IngressAt(frame, uint32(port), arrivalNs, (*s)[:0])
	out = e.appendJobs(out, ej)
	*s = ej[:0]
	return out
}

// Egress implements Pipeline.
func (e *EnginePipeline) Egress(job Job, q QueueMeta, more []Job, sc *Scratch) ([]byte, []Job) {
	s := jobs(sc)
	pkt, _ := job.Pkt.(*engine.Packet)
	out, ej := e.pl.Egress(engine.Job{Pkt: pkt, Port: uint32(job.Port), Priority: job.Priority}, engine.QueueMeta{
		EnqTimestamp: q.EnqTimestampUs, EnqQdepth: q.EnqQdepth, DeqTimedelta: q.DeqTimedeltaUs,
		DeqQdepth: q.DeqQdepth, Qid: q.Qid,
	}, (*s)[:0])
	more = e.appendJobs(more, ej)
	*s = ej[:0]
	if out.Pkt == nil {
		return nil, more
	}
	if out.Frame == nil {
		out.Frame = []byte{} // an empty frame still owns its packet
	}
	return out.Frame, more
}

// Release implements Pipeline.
func (e *EnginePipeline) Release(pkt PacketRef) {
	if p, ok := pkt.(*engine.Packet); ok {
		p.Release()
	}
}
