package device

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
)

// QueueStats are the counters of one priority queue of a port.
type QueueStats struct {
	Queue    int
	Enqueued uint64
	Dropped  uint64 // tail drops (queue full) and flushes at pipeline change
	Depth    int64
	MaxDepth int64
	Delay    LatencyStats // time from enqueue to dequeue
}

// PortStats are the counters of one port.
type PortStats struct {
	Port        uint16
	Iface       string
	IO          string // afpacket, afxdp/native, afxdp/generic; empty for the CPU port
	RateBps     uint64
	RxPackets   uint64
	RxBytes     uint64
	RxTruncated uint64 // frames longer than the ring slot or buffer
	RxRingDrops uint64 // frames the kernel dropped because the ring was full
	TxPackets   uint64
	TxBytes     uint64
	TxErrors    uint64 // frames the kernel refused
	TxNoCarrier uint64 // frames dropped because the link had no carrier
	NoCarrier   bool   // the link has no carrier now
	Depth       int64
	MaxDepth    int64
	Queues      []QueueStats
	RxDelay     LatencyStats // per receive batch: its oldest frame's wait in the ring
	PacerLate   LatencyStats // per pacer sleep: how late it woke (paced ports)
}

// Stats is a snapshot of all counters.
type Stats struct {
	Ports          []PortStats
	DropNoPipeline uint64
	DropNoPort     uint64
	DropPriority   uint64 // priority beyond --priority-queues (BMv2 drops these)
	DropIngress    uint64 // ingress produced no packet to queue
	DropEgress     uint64 // egress sent nothing out (dropped, recirculated)
	// RTExhausted counts the 100 ms windows in which the forwarding threads
	// used up their real-time budget and ran at their nice value for the
	// rest of the window (sched.go): a frame may then wait behind the hosts.
	RTExhausted uint64
}

// readRingDrops adds the kernel's receive drops since the last call (ring
// or UMEM full) to the running total.
func (in *inputPort) readRingDrops() uint64 {
	if in.sock == nil {
		return 0
	}
	in.statMu.Lock()
	defer in.statMu.Unlock()
	in.ringDrops.Add(in.sock.rxDrops())
	return in.ringDrops.Load()
}

// Stats returns a snapshot of the counters (allocates; not for the
// per-packet path).
func (d *Device) Stats() Stats {
	var s Stats
	ins := map[uint16]*inputPort{}
	for _, in := range d.inputPorts() {
		ins[in.num] = in
	}
	if d.cpuIn != nil {
		ins[d.cpuIn.num] = d.cpuIn
	}
	for _, eg := range d.egressPorts() {
		if eg.noIface {
			continue
		}
		ps := PortStats{
			Port: eg.num, Iface: eg.iface, RateBps: eg.rateBps,
			TxPackets: eg.txPackets.Load(), TxBytes: eg.txBytes.Load(), TxErrors: eg.txErrors.Load(),
			TxNoCarrier: eg.txNoCarrier.Load(), NoCarrier: eg.noCarrier.Load(),
			MaxDepth: eg.maxDepth.Load(), PacerLate: eg.pacerLate.snapshot(),
		}
		if eg.sock != nil {
			ps.IO = eg.sock.kind()
		}
		if in := ins[eg.num]; in != nil {
			ps.RxPackets, ps.RxBytes = in.rxPackets.Load(), in.rxBytes.Load()
			ps.RxTruncated = in.rxTruncated.Load()
			ps.RxRingDrops = in.readRingDrops()
			ps.RxDelay = in.rxDelay.snapshot()
		}
		for i := range eg.queues {
			q := &eg.queues[i]
			qs := QueueStats{Queue: i, Enqueued: q.enq.Load(), Dropped: q.drops.Load(), Depth: q.depth.Load(), MaxDepth: q.maxDepth.Load(), Delay: q.delay.snapshot()}
			ps.Depth += qs.Depth
			ps.Queues = append(ps.Queues, qs)
		}
		s.Ports = append(s.Ports, ps)
	}
	sort.Slice(s.Ports, func(i, j int) bool { return s.Ports[i].Port < s.Ports[j].Port })
	s.DropNoPipeline = d.dropNoPipeline.Load()
	s.DropNoPort = d.dropNoPort.Load()
	s.DropPriority = d.dropPriority.Load()
	s.DropIngress = d.dropIngress.Load()
	s.DropEgress = d.dropEgress.Load()
	s.RTExhausted = d.rt.demotions.Load()
	return s
}

// ResetMaxDepth clears the max-depth watermarks (a controller reads and
// resets them per measurement interval).
func (d *Device) ResetMaxDepth() {
	for _, eg := range d.egressPorts() {
		eg.mu.Lock()
		eg.maxDepth.Store(int64(eg.depth))
		for i := range eg.queues {
			eg.queues[i].maxDepth.Store(int64(eg.queues[i].n))
		}
		eg.mu.Unlock()
	}
}

// WriteMetrics writes the counters in the Prometheus text exposition format.
func (d *Device) WriteMetrics(w io.Writer) error {
	s := d.Stats()
	bw := bufio.NewWriter(w)
	type metric struct {
		name, help, typ string
		port            func(p PortStats) uint64
	}
	portMetrics := []metric{
		{"terrapin_port_rx_packets_total", "Frames received on the port.", "counter", func(p PortStats) uint64 { return p.RxPackets }},
		{"terrapin_port_rx_bytes_total", "Bytes received on the port.", "counter", func(p PortStats) uint64 { return p.RxBytes }},
		{"terrapin_port_rx_truncated_total", "Received frames dropped for exceeding the frame size.", "counter", func(p PortStats) uint64 { return p.RxTruncated }},
		{"terrapin_port_rx_ring_drops_total", "Frames the kernel dropped because the receive ring was full.", "counter", func(p PortStats) uint64 { return p.RxRingDrops }},
		{"terrapin_port_tx_packets_total", "Frames transmitted on the port.", "counter", func(p PortStats) uint64 { return p.TxPackets }},
		{"terrapin_port_tx_bytes_total", "Bytes transmitted on the port.", "counter", func(p PortStats) uint64 { return p.TxBytes }},
		{"terrapin_port_tx_errors_total", "Frames the kernel refused to transmit.", "counter", func(p PortStats) uint64 { return p.TxErrors }},
		{"terrapin_port_tx_no_carrier_total", "Frames dropped because the port's link had no carrier.", "counter", func(p PortStats) uint64 { return p.TxNoCarrier }},
		{"terrapin_port_carrier", "1 while the port's link is up with a carrier.", "gauge", func(p PortStats) uint64 {
			if p.NoCarrier {
				return 0
			}
			return 1
		}},
		{"terrapin_port_queue_depth", "Packets queued on the port now.", "gauge", func(p PortStats) uint64 { return uint64(p.Depth) }},
		{"terrapin_port_queue_depth_max", "Most packets queued on the port at once.", "gauge", func(p PortStats) uint64 { return uint64(p.MaxDepth) }},
		{"terrapin_port_rate_bits_per_second", "Configured line rate (0 = unlimited).", "gauge", func(p PortStats) uint64 { return p.RateBps }},
	}
	for _, m := range portMetrics {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.typ)
		for _, p := range s.Ports {
			fmt.Fprintf(bw, "%s{port=\"%d\",iface=\"%s\"} %d\n", m.name, p.Port, p.Iface, m.port(p))
		}
	}
	// The I/O a port got (--io auto chooses per port): an info metric, as
	// Prometheus exposes build versions.
	fmt.Fprintf(bw, "# HELP terrapin_port_io_info The port's packet I/O (afpacket, afxdp/native, afxdp/generic) in label io; always 1.\n# TYPE terrapin_port_io_info gauge\n")
	for _, p := range s.Ports {
		if p.IO != "" {
			fmt.Fprintf(bw, "terrapin_port_io_info{port=\"%d\",iface=\"%s\",io=\"%s\"} 1\n", p.Port, p.Iface, p.IO)
		}
	}
	type qmetric struct {
		name, help, typ string
		q               func(q QueueStats) uint64
	}
	for _, m := range []qmetric{
		{"terrapin_queue_enqueued_total", "Packets enqueued in the priority queue.", "counter", func(q QueueStats) uint64 { return q.Enqueued }},
		{"terrapin_queue_drops_total", "Packets tail-dropped by the full priority queue.", "counter", func(q QueueStats) uint64 { return q.Dropped }},
		{"terrapin_queue_depth", "Packets in the priority queue now.", "gauge", func(q QueueStats) uint64 { return uint64(q.Depth) }},
		{"terrapin_queue_depth_max", "Most packets in the priority queue at once.", "gauge", func(q QueueStats) uint64 { return uint64(q.MaxDepth) }},
	} {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.typ)
		for _, p := range s.Ports {
			for _, q := range p.Queues {
				fmt.Fprintf(bw, "%s{port=\"%d\",queue=\"%d\"} %d\n", m.name, p.Port, q.Queue, m.q(q))
			}
		}
	}
	type hmetric struct {
		name, help string
		get        func(p PortStats) (LatencyStats, bool)
	}
	for _, m := range []hmetric{
		{"terrapin_port_rx_delay_seconds", "Per receive batch, how long its oldest frame waited in the receive ring.", func(p PortStats) (LatencyStats, bool) { return p.RxDelay, p.RxDelay.Counts != nil }},
		{"terrapin_port_pacer_late_seconds", "Per pacer sleep, how much later than due the pacer woke (paced ports).", func(p PortStats) (LatencyStats, bool) { return p.PacerLate, p.RateBps > 0 }},
	} {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s histogram\n", m.name, m.help, m.name)
		for _, p := range s.Ports {
			if h, ok := m.get(p); ok {
				writeHistogram(bw, m.name, fmt.Sprintf("port=\"%d\",iface=\"%s\"", p.Port, p.Iface), h)
			}
		}
		fmt.Fprintf(bw, "# HELP %s_max Largest observation of %s.\n# TYPE %s_max gauge\n", m.name, m.name, m.name)
		for _, p := range s.Ports {
			if h, ok := m.get(p); ok {
				fmt.Fprintf(bw, "%s_max{port=\"%d\",iface=\"%s\"} %g\n", m.name, p.Port, p.Iface, float64(h.MaxNs)/1e9)
			}
		}
	}
	fmt.Fprintf(bw, "# HELP terrapin_queue_delay_seconds Time from enqueue to dequeue.\n# TYPE terrapin_queue_delay_seconds histogram\n")
	for _, p := range s.Ports {
		for _, q := range p.Queues {
			if q.Delay.Total() > 0 {
				writeHistogram(bw, "terrapin_queue_delay_seconds", fmt.Sprintf("port=\"%d\",queue=\"%d\"", p.Port, q.Queue), q.Delay)
			}
		}
	}
	fmt.Fprintf(bw, "# HELP terrapin_queue_delay_seconds_max Longest time from enqueue to dequeue.\n# TYPE terrapin_queue_delay_seconds_max gauge\n")
	for _, p := range s.Ports {
		for _, q := range p.Queues {
			if q.Delay.Total() > 0 {
				fmt.Fprintf(bw, "terrapin_queue_delay_seconds_max{port=\"%d\",queue=\"%d\"} %g\n", p.Port, q.Queue, float64(q.Delay.MaxNs)/1e9)
			}
		}
	}
	fmt.Fprintf(bw, "# HELP terrapin_drops_total Packets dropped outside the queues, by reason.\n# TYPE terrapin_drops_total counter\n")
	for _, r := range []struct {
		reason string
		v      uint64
	}{
		{"no_pipeline", s.DropNoPipeline}, {"no_such_port", s.DropNoPort}, {"priority_out_of_range", s.DropPriority},
		{"ingress", s.DropIngress}, {"egress", s.DropEgress},
	} {
		fmt.Fprintf(bw, "terrapin_drops_total{reason=%q} %d\n", r.reason, r.v)
	}
	fmt.Fprintf(bw, "# HELP terrapin_rt_budget_exhausted_total Windows of 100 ms in which the forwarding threads used up their real-time CPU budget (--rt-priority) and ran at their nice value for the rest of it.\n# TYPE terrapin_rt_budget_exhausted_total counter\nterrapin_rt_budget_exhausted_total %d\n", s.RTExhausted)
	return bw.Flush()
}

// MetricsHandler serves WriteMetrics over HTTP (for --metrics-addr).
func (d *Device) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = d.WriteMetrics(w)
	})
}
