package device

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"testing"
	"time"
)

// TestTxRingFramesIntact: frames sent through the TX ring stay intact while
// they wait, unread, in a receiver's socket queue after their ring slots
// have been reused several times over: no skb refers to ring memory once
// its slot is free.
func TestTxRingFramesIntact(t *testing.T) {
	tn := newTestNet(t, 1, 1500)
	var p *RawPort
	tn.do(t, func() error {
		var err error
		p, err = OpenRawPort(tn.sw(1), RawPortConfig{})
		return err
	})
	t.Cleanup(p.Close)
	if !p.TxRing() {
		t.Skip("the kernel refused PACKET_TX_RING")
	}
	// The receiver sits in another namespace, as Mininet's hosts do: a veth
	// crossing namespaces orphans each skb at transmit, which frees its
	// ring slot at once.
	far := newTestNet(t, 0, 1500)
	run(t, "ip", "-n", tn.name, "link", "set", tn.host(1), "netns", far.name)
	run(t, "ip", "-n", far.name, "link", "set", tn.host(1), "up")
	h := far.hostSocket(t, 1) // not read until everything is sent
	const n = 4 * txSlots
	rng := rand.New(rand.NewSource(3))
	frames := make([][]byte, n)
	for i := range frames {
		f := make([]byte, 60+rng.Intn(1400))
		rng.Read(f)
		copy(f[0:12], []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
		f[12], f[13] = 0x88, 0xb5
		binary.BigEndian.PutUint32(f[14:], uint32(i))
		frames[i] = f
	}
	deadline := time.Now().Add(10 * time.Second)
	for sent := 0; sent < n; {
		end := min(sent+48, n)
		k, err := p.Send(frames[sent:end])
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("sent %d of %d frames: %v", sent, n, err)
			}
			time.Sleep(time.Millisecond) // slots still in flight
		}
		sent += k
	}
	got := 0
	for got < n {
		f, _ := h.recv(t, 2*time.Second)
		if f == nil {
			t.Fatalf("received %d of %d frames", got, n)
		}
		i := frameSeq(f)
		if int(i) >= n || !bytes.Equal(f, frames[i]) {
			t.Fatalf("frame %d (seq %d) differs from what was sent", got, i)
		}
		got++
	}
}

// TestTxShortFrames: an Ethernet port refuses frames shorter than its
// 14-byte header before they reach the kernel (which would refuse them:
// counted as transmit errors); a 14-byte frame leaves through either
// transmit path. (TUN ports carry any length: the STF corpus via P4Runtime
// exercises that.)
func TestTxShortFrames(t *testing.T) {
	for _, mode := range []TxMode{TxRing, TxSendmmsg} {
		tn := newTestNet(t, 1, 1500)
		var p *RawPort
		tn.do(t, func() error {
			var err error
			p, err = OpenRawPort(tn.sw(1), RawPortConfig{Tx: mode})
			return err
		})
		h := tn.hostSocket(t, 1)
		if p.Sendable(13) || !p.Sendable(14) || !p.Sendable(1518) || p.Sendable(1519) {
			t.Errorf("mode %d: Sendable(13, 14, 1518, 1519) = %v %v %v %v, want false true true false",
				mode, p.Sendable(13), p.Sendable(14), p.Sendable(1518), p.Sendable(1519))
		}
		f14 := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5}
		if k, err := p.Send([][]byte{f14}); k != 1 {
			t.Fatalf("mode %d: sent %d: %v", mode, k, err)
		}
		if f, _ := h.recv(t, 2*time.Second); !bytes.Equal(f, f14) {
			t.Errorf("mode %d: received % x, want % x", mode, f, f14)
		}
		p.Close()
	}
}

// TestReceiveVLANTag: the kernel moves an 802.1Q tag out of a received
// frame into the ring header; the port puts it back, so a program parses
// the frame as it was on the wire (both ring layouts, two TPIDs).
func TestReceiveVLANTag(t *testing.T) {
	for _, ring := range []RingVersion{RingV2, RingV3} {
		for _, tpid := range []uint16{0x8100, 0x88a8} {
			tn := newTestNet(t, 1, 1500)
			var p *RawPort
			tn.do(t, func() error {
				var err error
				p, err = OpenRawPort(tn.sw(1), RawPortConfig{Ring: ring})
				return err
			})
			h := tn.hostSocket(t, 1)
			f := testFrame(80, 7, 0)
			tagged := append(append(append([]byte{}, f[:12]...), byte(tpid>>8), byte(tpid), 0x20, 42), f[12:]...)
			h.send(t, tagged)
			deadline := time.Now().Add(3 * time.Second)
			var got []byte
			for got == nil && time.Now().Before(deadline) {
				if fr, _, ok := p.Next(); ok {
					got = append([]byte(nil), fr...)
					p.Release()
				} else {
					p.Wait(100)
				}
			}
			if !bytes.Equal(got, tagged) {
				t.Errorf("ring v%d, TPID %#x: received % x, want % x", ring, tpid, got, tagged)
			}
			p.Close()
		}
	}
}
