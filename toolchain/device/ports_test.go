package device

import (
	"testing"
	"time"
)

// TestAddAndRemovePorts: a port added while the switch runs receives and
// transmits, keeps the queue settings its number had without an interface,
// and stops both when removed; numbers and interfaces in use are refused;
// a removed port can be added again; the replaced ports' pacers end (the
// device stops within start's 5 s).
func TestAddAndRemovePorts(t *testing.T) {
	tn := newTestNet(t, 3, 1500)
	d := tn.newDevice(t, Config{Ports: []PortConfig{{Num: 1, Iface: tn.sw(1)}, {Num: 2, Iface: tn.sw(2)}}})
	m := NewPortMap()
	m.Connect(1, 3)
	m.Connect(3, 1)
	d.SetPipeline(m)
	h1, h3 := tn.hostSocket(t, 1), tn.hostSocket(t, 3)
	start(t, d)
	// Settings of the number, which its pacer (started here) serves.
	if err := d.SetQueueDepth(3, -1, 5); err != nil {
		t.Fatal(err)
	}
	if err := d.SetQueueRate(3, 0, 1_000_000); err != nil {
		t.Fatal(err)
	}
	settingsKept := func(when string) {
		t.Helper()
		if n, ok := d.QueueDepth(3, 0); !ok || n != 5 {
			t.Errorf("%s: port 3's queue depth %d (%v), want the 5 set before", when, n, ok)
		}
		if gap, ok := d.QueueRate(3, 0); !ok || gap != 1000 {
			t.Errorf("%s: port 3's queue rate %d ns apart (%v), want 1000", when, gap, ok)
		}
	}
	seq := uint32(0)
	through := func(from, to *hostSock) bool {
		t.Helper()
		seq++
		from.send(t, testFrame(100, seq, 0))
		for {
			got, _ := to.recv(t, 300*time.Millisecond)
			if got == nil {
				return false
			}
			if frameSeq(got) == seq {
				return true
			}
		}
	}
	add := func(num uint16, iface string) error {
		var err error
		tn.do(t, func() error { err = d.AddPort(num, iface, ""); return nil })
		return err
	}
	hasPort := func(num uint16) bool {
		for _, p := range d.Ports() {
			if p.Number == num {
				return true
			}
		}
		return false
	}

	if through(h1, h3) {
		t.Fatal("a frame reached port 3 before it had an interface")
	}
	for round := 1; round <= 2; round++ {
		if err := add(3, tn.sw(3)); err != nil {
			t.Fatalf("round %d: AddPort: %v", round, err)
		}
		if !hasPort(3) {
			t.Errorf("round %d: port 3 not listed after AddPort: %v", round, d.Ports())
		}
		if !through(h1, h3) || !through(h3, h1) {
			t.Fatalf("round %d: the added port does not forward both ways", round)
		}
		settingsKept("added")
		for _, bad := range []struct {
			num   uint16
			iface string
		}{{3, tn.sw(3)}, {4, tn.sw(1)}, {DropPort, tn.sw(3)}, {5, "trptnosuch0"}} {
			if err := add(bad.num, bad.iface); err == nil {
				t.Errorf("round %d: AddPort(%d, %s) accepted", round, bad.num, bad.iface)
			}
		}
		if err := d.RemovePort(3); err != nil {
			t.Fatalf("round %d: RemovePort: %v", round, err)
		}
		if hasPort(3) {
			t.Errorf("round %d: port 3 still listed after RemovePort", round)
		}
		if through(h1, h3) || through(h3, h1) {
			t.Errorf("round %d: the removed port still forwards", round)
		}
		settingsKept("removed")
	}
	if err := d.RemovePort(3); err == nil {
		t.Error("RemovePort of a number without an interface accepted")
	}
}
