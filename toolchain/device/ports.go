package device

// Ports added and removed while the switch runs (BMv2's port_add and
// port_remove over its Thrift runtime). A port number's egress port is
// replaced, never changed in place: the forwarding threads read an egress
// port's interface without a lock, so a new one is built aside (taking the
// old one's queue depths and rates, which belong to the number, as in
// BMv2's traffic manager) and published with one atomic store. The old one
// is retired: what it holds, and what a thread that looked it up just
// before the swap queues there, is dropped as for a port without an
// interface, and its pacer, if it has one, ends.

import (
	"errors"
	"fmt"
	"runtime"
)

// AddPort opens iface as port num while the device runs (or before Run).
// The number must not have an interface already, nor the interface a
// port; captures go to pcapDir as --pcap names them ("": none, or the
// device's --pcap directory if it has one).
func (d *Device) AddPort(num uint16, iface, pcapDir string) error {
	if num >= DropPort {
		return fmt.Errorf("port %d: port numbers are 9-bit and %d is the drop port", num, DropPort)
	}
	if int(num) == d.cfg.CPUPort {
		return fmt.Errorf("port %d: the CPU port", num)
	}
	if iface == "" {
		return errors.New("no interface name")
	}
	d.portMu.Lock()
	defer d.portMu.Unlock()
	if old := d.ports[num].Load(); old != nil && !old.noIface {
		return fmt.Errorf("port %d: already on interface %s", num, old.iface)
	}
	for _, in := range d.inputPorts() {
		if in.iface == iface {
			return fmt.Errorf("interface %s: already port %d", iface, in.num)
		}
	}
	if pcapDir == "" {
		pcapDir = d.cfg.PcapDir
	}
	in, eg, err := d.openPort(PortConfig{Num: num, Iface: iface}, pcapDir)
	if err != nil {
		return err
	}
	d.readCarrier(eg)
	d.runMu.Lock()
	defer d.runMu.Unlock()
	if d.runDone {
		// Run ended while the interface opened: its ports are closed.
		err = errors.New("the switch is shutting down")
	} else {
		err = d.replaceEgress(eg)
	}
	if err != nil {
		closeOpened(in, eg)
		return err
	}
	d.inputs = append(d.inputs, in)
	if d.runCtx != nil && !d.runDone {
		d.goReceive(in)
		if want := d.forwardingThreadsLocked() + runtime.NumCPU(); runtime.GOMAXPROCS(0) < want {
			runtime.GOMAXPROCS(want)
		}
	}
	d.log.Info("port added", "port", num, "iface", iface)
	d.portWatchers.tell(PortState{Number: num, Name: iface, Up: !eg.noCarrier.Load()})
	return nil
}

// RemovePort closes the interface of port num: its receive loop ends, what
// its queues hold is dropped, and the number is a port without an
// interface again (its queue settings kept).
func (d *Device) RemovePort(num uint16) error {
	d.portMu.Lock()
	defer d.portMu.Unlock()
	d.runMu.Lock()
	var in *inputPort
	at := -1
	for i, p := range d.inputs {
		if p.num == num {
			in, at = p, i
		}
	}
	if in == nil {
		d.runMu.Unlock()
		return fmt.Errorf("port %d: no interface", num)
	}
	d.inputs = append(d.inputs[:at:at], d.inputs[at+1:]...)
	d.runMu.Unlock()
	if in.stop != nil {
		in.stop()
		<-in.done
	}
	d.runMu.Lock()
	bare := d.newEgressPort(num, "", 0)
	bare.noIface = true
	err := d.replaceEgress(bare)
	d.runMu.Unlock()
	// No thread reads the socket now (the receive loop ended; the retired
	// egress port transmits nothing), so it can go.
	_ = in.pcap.close()
	in.sock.close()
	d.log.Info("port removed", "port", num, "iface", in.iface)
	d.portWatchers.tell(PortState{Number: num, Name: in.iface, Removed: true})
	return err
}

// replaceEgress publishes eg as its number's egress port with the queue
// settings of the one it replaces (if any), and retires that one. Caller
// holds portMu and runMu.
func (d *Device) replaceEgress(eg *egressPort) error {
	old := d.ports[eg.num].Load()
	if old != nil {
		old.mu.Lock()
		for i := range old.queues {
			eg.queues[i].setLimit(old.queues[i].limit)
			if gap := old.queues[i].gapNs; gap > 0 {
				eg.queues[i].gapNs = gap
				eg.limited++
			}
		}
		old.mu.Unlock()
	}
	if eg.limited > 0 && !eg.pacerOn {
		if eg.wakeFd < 0 {
			if err := eg.openWake(); err != nil {
				return err
			}
		}
		eg.pacerOn = true
	}
	eg.shaped.Store(eg.rateBps > 0 || (eg.limited > 0 && eg.pacerOn))
	d.ports[eg.num].Store(eg)
	if eg.pacerOn && d.runCtx != nil && !d.runDone {
		d.goPacer(eg)
	}
	if old != nil {
		d.retire(old)
	}
	return nil
}

// retire drops what old holds and stops its pacer; a job queued there
// later is dropped on arrival (enqueueLocked). Caller holds runMu.
func (d *Device) retire(old *egressPort) {
	old.mu.Lock()
	old.retired.Store(true)
	for old.depth > 0 {
		e := old.dequeue()
		e.pipe.Release(e.job.Pkt)
		d.dropNoPort.Add(1)
	}
	// Its capture is complete: nothing more leaves through it.
	if err := old.pcap.close(); err != nil {
		d.log.Warn("pcap", "port", old.num, "err", err)
	}
	old.pcap = nil
	old.mu.Unlock()
	if old.wakeFd >= 0 {
		old.wakePacer()
	}
	d.retired = append(d.retired, old)
}
