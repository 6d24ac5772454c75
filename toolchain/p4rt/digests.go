package p4rt

import (
	"context"
	"strings"
	"sync"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// digestEngine buffers, deduplicates and sends DigestList messages as the
// spec's §9.10 pseudo-code describes, and handles DigestListAck.
type digestEngine struct {
	srv *Server
	in  chan pipeline.Digest
	// poke makes run recompute its next deadline (the configuration
	// changed).
	poke chan struct{}

	mu      sync.Mutex
	sch     *schema
	cfg     map[uint32]*p4v1.DigestEntry_Config
	pending map[uint32]*digestBuffer
	cache   map[uint32]map[string]sentList // digest id → message key → list
	listSeq map[uint32]uint64
}

type digestBuffer struct {
	first time.Time
	keys  map[string]bool
	data  []*p4v1.P4Data
}

type sentList struct {
	listID uint64
	sent   time.Time
}

func newDigestEngine(s *Server) *digestEngine {
	return &digestEngine{srv: s, in: make(chan pipeline.Digest, 4096), poke: make(chan struct{}, 1), listSeq: map[uint32]uint64{}}
}

// receive is the Target's digest sink; it never blocks (drops on overload,
// which §9.10 allows).
func (d *digestEngine) receive(m pipeline.Digest) {
	select {
	case d.in <- pipeline.Digest{Name: m.Name, Fields: cloneFields(m.Fields)}:
	default:
	}
}

func cloneFields(fs [][]byte) [][]byte {
	out := make([][]byte, len(fs))
	for i, f := range fs {
		out[i] = clone(f)
	}
	return out
}

// forget drops the configuration and what is buffered: the pipeline was
// replaced by one the server has no P4Info for (Server.PipelineReplaced).
func (d *digestEngine) forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sch, d.pending, d.cache = nil, nil, nil
	d.cfg = map[uint32]*p4v1.DigestEntry_Config{}
}

// reset adopts ps's digest configuration; buffers and caches of digests
// no longer enabled are dropped.
func (d *digestEngine) reset(ps *pipelineState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sch != ps.schema {
		d.pending, d.cache = nil, nil
	}
	d.sch = ps.schema
	d.cfg = map[uint32]*p4v1.DigestEntry_Config{}
	for id, c := range ps.digestCfg {
		d.cfg[id] = proto.Clone(c).(*p4v1.DigestEntry_Config)
	}
	if d.pending == nil {
		d.pending = map[uint32]*digestBuffer{}
		d.cache = map[uint32]map[string]sentList{}
	}
	for id := range d.pending {
		if d.cfg[id] == nil {
			delete(d.pending, id)
			delete(d.cache, id)
		}
	}
	select {
	case d.poke <- struct{}{}:
	default:
	}
}

// run buffers digests and sends their lists when due. It sleeps until the
// next deadline (a buffer's max_timeout_ns, a cached list's
// ack_timeout_ns) and has no timer at all while nothing is pending: a
// ticker here woke three of the switch's threads a thousand times a second
// even with no digest configured, and on a 2-vCPU VM every such wake-up of
// an idle vCPU costs the hypervisor's wake-up latency, which delayed the
// forwarding threads (docs/performance.md, terrapin-switch latency).
func (d *digestEngine) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var due <-chan time.Time
		if at, ok := d.nextDeadline(); ok {
			timer.Reset(time.Until(at))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case m := <-d.in:
			d.add(m, time.Now())
		case <-d.poke:
		case now := <-due:
			d.flushDue(now)
		}
	}
}

// nextDeadline is the earliest moment a pending buffer times out or a
// cached list's acknowledgement deadline passes; ok is false when there is
// none.
func (d *digestEngine) nextDeadline() (at time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	consider := func(t time.Time) {
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	for id, b := range d.pending {
		consider(b.first.Add(time.Duration(d.cfg[id].GetMaxTimeoutNs())))
	}
	for id, c := range d.cache {
		ttl := time.Duration(d.cfg[id].GetAckTimeoutNs())
		for _, l := range c {
			consider(l.sent.Add(ttl))
		}
	}
	return at, ok
}

func (d *digestEngine) lookup(name string) *digestInfo {
	if d.sch == nil {
		return nil
	}
	if di, ok := d.sch.digestByName[name]; ok {
		return di
	}
	// A learn list named otherwise still maps when it is the only digest.
	if len(d.sch.digestIDs) == 1 {
		return d.sch.digests[d.sch.digestIDs[0]]
	}
	return nil
}

// digestData renders one digest for the controller, with its
// deduplication key. Members of translated types are translated to the
// controller's values; one the translation cannot express fails the
// digest.
func digestData(di *digestInfo, fields [][]byte) (*p4v1.P4Data, string, error) {
	var key strings.Builder
	members := make([]*p4v1.P4Data, len(fields))
	for i, f := range fields {
		v := trimmed(f)
		if i < len(di.trs) && di.trs[i] != nil {
			var err error
			if v, err = di.trs[i].toSDN(v); err != nil {
				return nil, "", err
			}
		}
		members[i] = &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: v}}
		key.Write(v)
		key.WriteByte(0xff)
		key.WriteByte(byte(len(v)))
	}
	if len(di.widths) == 0 && len(fields) == 1 {
		return members[0], key.String(), nil
	}
	return &p4v1.P4Data{Data: &p4v1.P4Data_Struct{Struct: &p4v1.P4StructLike{Members: members}}}, key.String(), nil
}

func (d *digestEngine) add(m pipeline.Digest, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	di := d.lookup(m.Name)
	if di == nil || d.cfg[di.id] == nil {
		return // not enabled: the spec sends nothing until a DigestEntry INSERT
	}
	cfg := d.cfg[di.id]
	data, key, err := digestData(di, m.Fields)
	if err != nil {
		d.srv.untranslatable.warn(d.srv.log, "dropping a digest", "digest", di.name, "err", messageOf(err))
		return
	}
	if _, dup := d.cache[di.id][key]; dup {
		return
	}
	b := d.pending[di.id]
	if b == nil {
		b = &digestBuffer{first: now, keys: map[string]bool{}}
		d.pending[di.id] = b
	}
	if b.keys[key] {
		return
	}
	b.keys[key] = true
	b.data = append(b.data, data)
	if cfg.GetMaxListSize() <= 1 && cfg.GetMaxTimeoutNs() == 0 || cfg.GetMaxListSize() > 0 && int32(len(b.data)) >= cfg.GetMaxListSize() {
		d.sendLocked(di.id, now)
	}
}

func (d *digestEngine) flushDue(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, b := range d.pending {
		if now.Sub(b.first) >= time.Duration(d.cfg[id].GetMaxTimeoutNs()) {
			d.sendLocked(id, now)
		}
	}
	for id, c := range d.cache {
		ttl := time.Duration(d.cfg[id].GetAckTimeoutNs())
		for k, l := range c {
			if now.Sub(l.sent) >= ttl {
				delete(c, k)
			}
		}
	}
}

func (d *digestEngine) sendLocked(id uint32, now time.Time) {
	b := d.pending[id]
	delete(d.pending, id)
	if b == nil || len(b.data) == 0 {
		return
	}
	d.listSeq[id]++
	list := d.listSeq[id]
	if d.cfg[id].GetAckTimeoutNs() > 0 {
		c := d.cache[id]
		if c == nil {
			c = map[string]sentList{}
			d.cache[id] = c
		}
		for k := range b.keys {
			c[k] = sentList{listID: list, sent: now}
		}
	}
	m := &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Digest{Digest: &p4v1.DigestList{
		DigestId: id, ListId: list, Data: b.data, Timestamp: now.UnixNano(),
	}}}
	for _, o := range d.srv.arb.primaries() {
		o.send(m, true)
	}
}

// ack clears the cache entries of an acknowledged list (§9.10).
func (d *digestEngine) ack(a *p4v1.DigestListAck) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sch == nil || d.sch.digests[a.GetDigestId()] == nil {
		return errorf(codes.InvalidArgument, "no digest with id %#x", a.GetDigestId())
	}
	for k, l := range d.cache[a.GetDigestId()] {
		if l.listID == a.GetListId() {
			delete(d.cache[a.GetDigestId()], k)
		}
	}
	return nil
}
