package device

import "time"

// Arrival times. The kernel stamps every frame it puts in a receive ring
// (CLOCK_REALTIME, tpacket hdr tp_sec/tp_nsec). The device hands that time
// to the pipeline as the packet's arrival, in the device clock (ns since
// start, monotonic), so that meters judge the arrival process rather than
// the moment the device got round to the packet: on a busy 2-core machine a
// receive loop is sometimes descheduled for tens of milliseconds and then
// processes everything that arrived meanwhile in one batch; metered at
// processing time, a sender keeping exactly to its token-bucket envelope
// then looks like a burst and is marked red (measured: ~16% red for a video
// sender at its envelope).

const (
	// offsetRefresh is how often the REALTIME→device-clock offset is
	// measured again even without a suspicious timestamp: NTP slews
	// REALTIME by up to 500 ppm, 0.5 ms per second.
	offsetRefresh = int64(time.Second)
	// stepTolerance is how far a converted timestamp may lie after the
	// device clock, or before the port's previous arrival, before the
	// offset is taken to be stale (REALTIME stepped) and measured again.
	// Legitimate skew is microseconds (frames stamped on different CPUs).
	stepTolerance = int64(time.Millisecond)
)

// clockReader reads the wall clock and the device clock together.
type clockReader interface {
	readClocks() (wallNs, devNs int64)
}

// readClocks implements clockReader: one time.Now carries both the wall
// and the monotonic reading.
func (d *Device) readClocks() (wallNs, devNs int64) {
	t := time.Now()
	return t.UnixNano(), int64(t.Sub(d.start))
}

// arrivalClock converts one port's kernel receive timestamps to the device
// clock. It belongs to the port's receive goroutine (no locking).
type arrivalClock struct {
	measured   bool
	offset     int64 // REALTIME minus device clock, ns
	measuredAt int64 // device clock at the last measurement
	now        int64 // device clock as last read (once per batch)
	last       int64 // the port's previous arrival
}

func (c *arrivalClock) measure(r clockReader) {
	wall, dev := r.readClocks()
	c.offset, c.measuredAt, c.now, c.measured = wall-dev, dev, dev, true
}

// beginBatch reads the device clock once for a batch of frames (and
// refreshes the offset when it is due).
func (c *arrivalClock) beginBatch(r clockReader) {
	if !c.measured {
		c.measure(r)
		return
	}
	_, c.now = r.readClocks()
	if c.now-c.measuredAt > offsetRefresh {
		c.measure(r)
	}
}

// arrival returns the device-clock arrival time of a frame stamped tsNs
// (REALTIME; 0 = not stamped): never after the device clock, never before
// the port's previous arrival, so that the pipeline sees a monotonic
// arrival process per port.
func (c *arrivalClock) arrival(r clockReader, tsNs int64) int64 {
	if !c.measured {
		c.measure(r)
	}
	var a int64
	if tsNs <= 0 {
		_, c.now = r.readClocks()
		a = c.now
	} else {
		a = tsNs - c.offset
		if a > c.now {
			// Stamped after the batch began, or REALTIME stepped forward.
			_, c.now = r.readClocks()
			if a > c.now+stepTolerance {
				c.measure(r)
				a = tsNs - c.offset
			}
		} else if a < c.last-stepTolerance {
			// REALTIME stepped back (frames on one port are stamped in
			// order, give or take the CPUs' skew).
			c.measure(r)
			a = tsNs - c.offset
		}
		if a > c.now {
			a = c.now
		}
	}
	if a < c.last {
		a = c.last
	}
	c.last = a
	return a
}
