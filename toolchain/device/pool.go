package device

import (
	"sync"
	"sync/atomic"
)

// frameBuf holds one frame's bytes. Multicast replicas and clones share the
// buffer of the packet they were copied from, hence the reference count.
type frameBuf struct {
	data []byte // capacity bufSize, a window into the pool's slab
	n    int
	refs atomic.Int32
}

func (b *frameBuf) bytes() []byte { return b.data[:b.n] }

// packet is one packet instance on its way through the device.
type packet struct {
	buf      *frameBuf
	st       PacketState
	pipe     Pipeline // the pipeline st belongs to
	inPort   uint16
	outPort  uint16
	rid      uint16
	prio     uint8
	instance InstanceType
	hops     uint8 // resubmits/recirculations so far: a bound against loops
	enqNs    int64
	enqDepth uint32
}

// pool hands out packets and buffers without allocating: both are created
// when the device starts (buffers as one slab), and states when a pipeline
// is loaded.
type pool struct {
	mu      sync.Mutex
	pkts    []*packet
	bufs    []*frameBuf
	all     []*packet
	bufSize int
	misses  atomic.Uint64 // requests refused because the pool was empty
}

func newPool(count, bufSize int) *pool {
	p := &pool{bufSize: bufSize}
	slab := make([]byte, count*bufSize)
	bufs := make([]frameBuf, count)
	pkts := make([]packet, count)
	p.pkts = make([]*packet, 0, count)
	p.bufs = make([]*frameBuf, 0, count)
	p.all = make([]*packet, 0, count)
	for i := 0; i < count; i++ {
		bufs[i].data = slab[i*bufSize : (i+1)*bufSize : (i+1)*bufSize]
		p.bufs = append(p.bufs, &bufs[i])
		p.pkts = append(p.pkts, &pkts[i])
		p.all = append(p.all, &pkts[i])
	}
	return p
}

// getPacket returns a free packet with no buffer attached, or nil.
func (p *pool) getPacket() *packet {
	p.mu.Lock()
	n := len(p.pkts)
	if n == 0 {
		p.mu.Unlock()
		p.misses.Add(1)
		return nil
	}
	pk := p.pkts[n-1]
	p.pkts = p.pkts[:n-1]
	p.mu.Unlock()
	return pk
}

// getBuf returns a free buffer with one reference, or nil.
func (p *pool) getBuf() *frameBuf {
	p.mu.Lock()
	n := len(p.bufs)
	if n == 0 {
		p.mu.Unlock()
		p.misses.Add(1)
		return nil
	}
	b := p.bufs[n-1]
	p.bufs = p.bufs[:n-1]
	p.mu.Unlock()
	b.refs.Store(1)
	b.n = 0
	return b
}

// get returns a packet with a fresh buffer, or nil when either runs out.
func (p *pool) get() *packet {
	pk := p.getPacket()
	if pk == nil {
		return nil
	}
	b := p.getBuf()
	if b == nil {
		p.putPacketOnly(pk)
		return nil
	}
	pk.buf = b
	return pk
}

func (p *pool) putPacketOnly(pk *packet) {
	pk.buf = nil
	pk.hops = 0
	p.mu.Lock()
	p.pkts = append(p.pkts, pk)
	p.mu.Unlock()
}

// put returns pk and drops its buffer reference.
func (p *pool) put(pk *packet) {
	b := pk.buf
	pk.buf = nil
	pk.hops = 0
	p.mu.Lock()
	p.pkts = append(p.pkts, pk)
	if b != nil && b.refs.Add(-1) == 0 {
		p.bufs = append(p.bufs, b)
	}
	p.mu.Unlock()
}

// free reports how many packets are free (for metrics and tests).
func (p *pool) free() (pkts, bufs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pkts), len(p.bufs)
}
