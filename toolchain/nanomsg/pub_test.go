package nanomsg

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sub is a SUB socket's side of the wire protocol, written from the SP
// specification (the interoperation with nanomsg's own library is tested
// by scripts/thrift-cli with pynng).
type sub struct {
	c   net.Conn
	ipc bool
}

func dial(t *testing.T, p *Pub, proto uint16) *sub {
	t.Helper()
	network, addr := "tcp", strings.TrimPrefix(p.Addr(), "tcp://")
	if p.ipc {
		network, addr = "unix", strings.TrimPrefix(p.Addr(), "ipc://")
	}
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	hdr := [8]byte{0, 'S', 'P', 0}
	binary.BigEndian.PutUint16(hdr[4:], proto)
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	var theirs [8]byte
	if _, err := io.ReadFull(c, theirs[:]); err != nil {
		t.Fatal(err)
	}
	if want := [8]byte{0, 'S', 'P', 0, 0, 0x20, 0, 0}; theirs != want {
		t.Fatalf("publisher's header % x, want % x", theirs, want)
	}
	return &sub{c: c, ipc: p.ipc}
}

func (s *sub) recv(t *testing.T) []byte {
	t.Helper()
	if s.ipc {
		var kind [1]byte
		if _, err := io.ReadFull(s.c, kind[:]); err != nil {
			t.Fatal(err)
		}
		if kind[0] != 1 {
			t.Fatalf("IPC message type %d, want 1", kind[0])
		}
	}
	var n [8]byte
	if _, err := io.ReadFull(s.c, n[:]); err != nil {
		t.Fatal(err)
	}
	m := make([]byte, binary.BigEndian.Uint64(n[:]))
	if _, err := io.ReadFull(s.c, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitSubscribers waits until the publisher has n subscribers (a
// connection is one once the headers are exchanged).
func waitSubscribers(t *testing.T, p *Pub, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Subscribers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers, want %d", p.Subscribers(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPubSub: every subscriber gets every message after it connected,
// whole and in order, on both transports; a peer that is not a SUB socket
// is let go.
func TestPubSub(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr string
	}{
		{"ipc", "ipc://" + filepath.Join(t.TempDir(), "notify.ipc")},
		{"tcp", "tcp://127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ListenPub(tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			a, b := dial(t, p, 0x21), dial(t, p, 0x21)
			bad := dial(t, p, 0x10) // a PAIR socket
			waitSubscribers(t, p, 2)
			msgs := [][]byte{[]byte("AGE|first"), bytes.Repeat([]byte{7}, 70000), {}}
			for _, m := range msgs {
				p.Send(m[:len(m)/2], m[len(m)/2:])
			}
			for _, s := range []*sub{a, b} {
				for i, want := range msgs {
					if got := s.recv(t); !bytes.Equal(got, want) {
						t.Fatalf("message %d: %d bytes, want %d", i, len(got), len(want))
					}
				}
			}
			if _, err := bad.c.Read(make([]byte, 1)); err == nil {
				t.Error("a PAIR peer was sent something")
			}
			a.c.Close()
			waitSubscribers(t, p, 1)
		})
	}
}

// TestStaleIPCSocket: a socket file left by a publisher that died is
// replaced; one a live publisher holds is not.
func TestStaleIPCSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stale.ipc")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the file stays, nothing listens
	p, err := ListenPub("ipc://" + path)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	defer p.Close()
	if _, err := ListenPub("ipc://" + path); err == nil {
		t.Error("a second publisher took a live publisher's socket")
	}
	for _, bad := range []string{"ipc://", "inproc://x", "/tmp/x"} {
		if _, err := ListenPub(bad); err == nil {
			t.Errorf("ListenPub(%q) accepted", bad)
		}
	}
}
