// Package nanomsg is the publishing side of nanomsg's pub/sub scalability
// protocol (SP), over its IPC and TCP transports: what BMv2 publishes its
// notifications on, and what nanomsg's and NNG's SUB sockets (BMv2's
// NotificationsListener, PI, nnpy, pynng) subscribe to.
//
// The wire protocol is small: on connecting, each side sends an 8-byte
// header (0x00 'S' 'P' 0x00, its protocol id as a big-endian 16-bit
// number, two zero bytes); then each message is its length as a big-endian
// 64-bit number followed by its bytes, preceded on IPC by one byte saying
// it is a message (1). A publisher sends every message to every
// subscriber (topics are filtered by the subscriber) and never waits for
// one: a subscriber that falls behind loses messages, as with nanomsg.
package nanomsg

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SP protocol ids.
const (
	protoPub = 0x20
	protoSub = 0x21
)

// queued is how many messages wait for one subscriber before more are
// dropped.
const queued = 1024

// Pub is a bound PUB socket.
type Pub struct {
	addr  string
	ipc   bool
	lis   net.Listener
	mu    sync.Mutex
	peers map[*peer]struct{}
	// Dropped counts messages a subscriber lost because it fell behind.
	Dropped atomic.Uint64
	closed  atomic.Bool
	wg      sync.WaitGroup
}

type peer struct {
	conn net.Conn
	out  chan []byte
}

// ListenPub binds a PUB socket to addr: "ipc:///path" (a Unix socket; a
// stale one left by a process that died is replaced) or "tcp://host:port".
func ListenPub(addr string) (*Pub, error) {
	p := &Pub{addr: addr, peers: map[*peer]struct{}{}}
	var err error
	switch {
	case strings.HasPrefix(addr, "ipc://"):
		path := strings.TrimPrefix(addr, "ipc://")
		if path == "" {
			return nil, fmt.Errorf("%s: no path", addr)
		}
		p.ipc = true
		removeStale(path)
		p.lis, err = net.Listen("unix", path)
	case strings.HasPrefix(addr, "tcp://"):
		p.lis, err = net.Listen("tcp", strings.TrimPrefix(addr, "tcp://"))
	default:
		return nil, fmt.Errorf("%s: not an ipc:// or tcp:// address", addr)
	}
	if err != nil {
		return nil, err
	}
	if ul, ok := p.lis.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true)
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// removeStale removes a Unix socket at path that nothing listens on.
func removeStale(path string) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close() // alive: Listen will say it is in use
		return
	}
	_ = os.Remove(path)
}

// Addr is the address the socket is bound to.
func (p *Pub) Addr() string {
	if !p.ipc {
		return "tcp://" + p.lis.Addr().String()
	}
	return p.addr
}

func (p *Pub) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			if p.closed.Load() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve exchanges the SP headers with a subscriber, then sends it what is
// published until it goes away.
func (p *Pub) serve(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	hdr := [8]byte{0, 'S', 'P', 0, 0, protoPub, 0, 0}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(hdr[:]); err != nil {
		return
	}
	var theirs [8]byte
	if _, err := io.ReadFull(c, theirs[:]); err != nil {
		return
	}
	if theirs[0] != 0 || theirs[1] != 'S' || theirs[2] != 'P' || theirs[3] != 0 ||
		binary.BigEndian.Uint16(theirs[4:6]) != protoSub {
		return // not a SUB socket
	}
	_ = c.SetDeadline(time.Time{})
	pe := &peer{conn: c, out: make(chan []byte, queued)}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return
	}
	p.peers[pe] = struct{}{}
	p.mu.Unlock()
	gone := make(chan struct{})
	go func() {
		// A SUB socket sends nothing more; reading tells when it leaves.
		_, _ = io.Copy(io.Discard, c)
		close(gone)
	}()
	w := bufio.NewWriter(c)
	defer func() {
		p.mu.Lock()
		delete(p.peers, pe)
		p.mu.Unlock()
	}()
	for {
		select {
		case <-gone:
			return
		case m := <-pe.out:
			if err := p.writeFrame(w, m); err != nil {
				return
			}
			// Send what else waits in the same write.
			for more := len(pe.out); more > 0; more-- {
				if err := p.writeFrame(w, <-pe.out); err != nil {
					return
				}
			}
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

func (p *Pub) writeFrame(w *bufio.Writer, m []byte) error {
	var h [9]byte
	b := h[:]
	if p.ipc {
		h[0] = 1 // a message
	} else {
		b = h[1:]
	}
	binary.BigEndian.PutUint64(h[1:], uint64(len(m)))
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err := w.Write(m)
	return err
}

// Send publishes one message made of parts, to every subscriber connected
// now. It never blocks.
func (p *Pub) Send(parts ...[]byte) {
	n := 0
	for _, part := range parts {
		n += len(part)
	}
	m := make([]byte, 0, n)
	for _, part := range parts {
		m = append(m, part...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for pe := range p.peers {
		select {
		case pe.out <- m:
		default:
			p.Dropped.Add(1)
		}
	}
}

// Subscribers is how many subscribers are connected.
func (p *Pub) Subscribers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.peers)
}

// Close unbinds the socket and disconnects the subscribers.
func (p *Pub) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	err := p.lis.Close()
	p.mu.Lock()
	for pe := range p.peers {
		pe.conn.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
