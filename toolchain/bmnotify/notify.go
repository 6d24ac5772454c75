// Package bmnotify publishes what BMv2's simple_switch publishes on its
// notifications socket (--notifications-addr), in BMv2's formats: the
// entries of tables with support_timeout that sat idle past their ageing
// timeout ("AGE|") and the ports' link changes ("PRT|"). BMv2's own
// NotificationsListener and nnpy or pynng subscribers read them.
// simple_switch_grpc publishes nothing there (it hands its notifications
// to PI); terrapin-switch publishes when given the option. Learned digests
// ("LEA|") are not published: they go to P4Runtime.
package bmnotify

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/engine"
)

// SweepInterval is how often idle entries are looked for (BMv2's ageing
// monitor's default).
const SweepInterval = time.Second

// Publisher is where the messages go (nanomsg.Pub).
type Publisher interface {
	Send(parts ...[]byte)
}

// Source gives the pipeline in force (nil: none) and follows the ports.
type Source struct {
	Pipeline func() *engine.Pipeline
	// WatchPorts is device.Device.WatchPorts; nil: no port events.
	WatchPorts func(fn func(device.PortState)) (cancel func())
}

// Run publishes until ctx ends.
func Run(ctx context.Context, pub Publisher, deviceID uint64, src Source) {
	if src.WatchPorts != nil {
		cancel := src.WatchPorts(func(p device.PortState) {
			if p.Removed {
				return // BMv2 tells a port's link going up or down, not its removal
			}
			pub.Send(portMessage(deviceID, int32(p.Number), p.Up))
		})
		defer cancel()
	}
	a := &ageing{pub: pub, deviceID: deviceID}
	tick := time.NewTicker(SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			a.sweep(src.Pipeline())
		}
	}
}

// portMessage is BMv2's port event: a 32-byte header ("PRT|", the switch
// id, the number of statuses, padding), then per status the port and 1 for
// up, 0 for down (little-endian, as BMv2 writes its structs on x86).
func portMessage(deviceID uint64, port int32, up bool) []byte {
	m := make([]byte, 32+8)
	copy(m, "PRT|")
	binary.LittleEndian.PutUint64(m[4:], deviceID)
	binary.LittleEndian.PutUint32(m[12:], 1)
	binary.LittleEndian.PutUint32(m[32:], uint32(port))
	if up {
		binary.LittleEndian.PutUint32(m[36:], 1)
	}
	return m
}

// ageing finds idle entries as BMv2's ageing monitor does: each sweep, per
// table, the entries whose time since their last hit has reached their
// timeout, less those the previous sweep reported; what is reported is
// what the next sweep leaves out. An entry that stays idle is so reported
// every other sweep, as by BMv2.
type ageing struct {
	pub      Publisher
	deviceID uint64
	pl       *engine.Pipeline
	prev     map[int]map[uint32]bool // table id: handles the last sweep reported
	bufferID uint64
}

func (a *ageing) sweep(pl *engine.Pipeline) {
	if pl != a.pl {
		a.pl, a.prev = pl, map[int]map[uint32]bool{}
	}
	if pl == nil {
		return
	}
	for _, t := range pl.Tables() {
		if !t.SupportTimeout {
			continue
		}
		idle := idleHandles(pl, t.ID)
		prev := a.prev[t.ID]
		var fresh []uint32
		for _, h := range idle {
			if !prev[h] {
				fresh = append(fresh, h)
			}
		}
		next := map[uint32]bool{}
		for _, h := range fresh {
			next[h] = true
		}
		a.prev[t.ID] = next
		if len(fresh) == 0 {
			continue
		}
		a.pub.Send(ageingMessage(a.deviceID, a.bufferID, int32(t.ID), fresh))
		a.bufferID++
	}
}

// idleHandles are the handles of the table's entries idle past their
// timeout, in handle order.
func idleHandles(pl *engine.Pipeline, tableID int) []uint32 {
	es, err := pl.EntriesByHandle(tableID)
	if err != nil {
		return nil
	}
	var out []uint32
	for _, e := range es {
		timeout, since, err := pl.EntryTimeout(tableID, e.Handle)
		if err == nil && timeout > 0 && since >= uint64(timeout) {
			out = append(out, e.Handle)
		}
	}
	return out
}

// ageingMessage is BMv2's ageing notification: a 32-byte header ("AGE|",
// the switch id, the context 0, a buffer id counting the messages, the
// table's id, the number of entries), then the entries' handles.
func ageingMessage(deviceID, bufferID uint64, tableID int32, handles []uint32) []byte {
	m := make([]byte, 32+4*len(handles))
	copy(m, "AGE|")
	binary.LittleEndian.PutUint64(m[4:], deviceID)
	binary.LittleEndian.PutUint32(m[12:], 0)
	binary.LittleEndian.PutUint64(m[16:], bufferID)
	binary.LittleEndian.PutUint32(m[24:], uint32(tableID))
	binary.LittleEndian.PutUint32(m[28:], uint32(len(handles)))
	for i, h := range handles {
		binary.LittleEndian.PutUint32(m[32+4*i:], h)
	}
	return m
}
