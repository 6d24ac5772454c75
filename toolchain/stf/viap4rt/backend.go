package viap4rt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"sort"
	"sync"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/terrapin/terrapin/toolchain/pipeline"
	"github.com/terrapin/terrapin/toolchain/stf"
)

// maxSettle bounds how long one batch of packets may take to come out.
const maxSettle = 3 * time.Second

// stfPorts are the switch ports every device gets: p4c's STF corpus uses
// ports 0..13.
var stfPorts = func() []uint32 {
	p := make([]uint32, 16)
	for i := range p {
		p[i] = uint32(i)
	}
	return p
}()

// Pool hands out running switches to STF backends and reuses them from one
// program to the next (each program starts with VERIFY_AND_COMMIT, which
// clears all forwarding state), so a corpus run starts a switch per
// parallel job, not per program.
type Pool struct {
	// Switch is the terrapin-switch binary.
	Switch string
	// Log receives the switches' output (nil: discarded).
	Log io.Writer

	mu   sync.Mutex
	idle []*Device
	all  []*Device
	n    int
}

// NewBackend returns a backend for one program (stf.CorpusOptions.NewBackend).
func (p *Pool) NewBackend() stf.Backend { return &Backend{pool: p} }

func (p *Pool) get() (*Device, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		d := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if d.Alive() {
			return d, nil
		}
		d.Close()
		p.mu.Lock()
	}
	p.n++
	name := fmt.Sprintf("trptp4rt%dx%d", os.Getpid(), p.n)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := Start(ctx, Options{Switch: p.Switch, Ports: stfPorts, Namespace: name, Log: p.Log})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.all = append(p.all, d)
	p.mu.Unlock()
	return d, nil
}

func (p *Pool) put(d *Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, d)
}

// Close stops every switch and removes their namespaces.
func (p *Pool) Close() {
	p.mu.Lock()
	all := p.all
	p.all, p.idle = nil, nil
	p.mu.Unlock()
	for _, d := range all {
		d.Close()
	}
}

// Backend implements stf.Backend over P4Runtime and veths.
type Backend struct {
	pool     *Pool
	dev      *Device
	prog     *stf.Program
	info     *p4configv1.P4Info
	pending  bool // packets sent since the last settle
	burst    int  // frames sent since the last settle
	lastPort uint32
}

var _ stf.Backend = (*Backend)(nil)

func rpcCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// Start implements stf.Backend: a switch from the pool, the program pushed
// with its P4Info.
func (b *Backend) Start(prog *stf.Program) error {
	if b.pool == nil && b.dev != nil {
		return nil // RunScript: the device has the program already
	}
	if prog.P4InfoPath == "" {
		return errors.New("the P4Runtime path needs the program's P4Info")
	}
	txt, err := os.ReadFile(prog.P4InfoPath)
	if err != nil {
		return err
	}
	info := &p4configv1.P4Info{}
	if err := prototext.Unmarshal(txt, info); err != nil {
		return fmt.Errorf("%s: %v", prog.P4InfoPath, err)
	}
	d, err := b.pool.get()
	if err != nil {
		return err
	}
	ctx, cancel := rpcCtx()
	defer cancel()
	if err := d.Load(ctx, info, prog.JSON); err != nil {
		b.pool.put(d)
		return err
	}
	b.dev, b.prog, b.info = d, prog, info
	return nil
}

// Stop implements stf.Backend: the switch goes back to the pool.
func (b *Backend) Stop() error {
	if b.dev != nil {
		b.dev.Collect(maxSettle) // leave no stray frames for the next program
		if b.pool != nil {
			b.pool.put(b.dev)
		}
		b.dev = nil
	}
	return nil
}

// settle makes control-plane changes apply after the packets sent before
// them, as they do on the in-process engine.
func (b *Backend) settle() {
	if b.pending {
		b.dev.waitQuiet(maxSettle)
		b.pending = false
	}
	b.burst = 0
}

func (b *Backend) table(t pipeline.TableInfo) (*p4configv1.Table, error) {
	for _, pt := range b.info.GetTables() {
		if n := pt.GetPreamble().GetName(); n == t.Name || "."+n == t.Name {
			return pt, nil
		}
	}
	return nil, fmt.Errorf("table %s is not in the P4Info", t.Name)
}

func canonicalBytes(v []byte) []byte {
	return bytesOf(new(big.Int).SetBytes(v))
}

// match converts the engine form of a key to P4Runtime's (don't-care
// fields omitted). keys are the device's key fields: a match field P4Info
// gives no bitwidth (p4c's for a key of type error) has the device's.
func (b *Backend) match(pt *p4configv1.Table, keys []pipeline.KeyFieldInfo, ms []pipeline.Match) ([]*p4v1.FieldMatch, error) {
	fs := pt.GetMatchFields()
	if len(ms) != len(fs) {
		return nil, fmt.Errorf("table %s: %d key values for %d fields", pt.GetPreamble().GetName(), len(ms), len(fs))
	}
	var out []*p4v1.FieldMatch
	for i, m := range ms {
		f := fs[i]
		w := uint(f.GetBitwidth())
		if w == 0 && i < len(keys) {
			w = uint(keys[i].Bitwidth)
		}
		full := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), w), big.NewInt(1))
		fm := &p4v1.FieldMatch{FieldId: f.GetId()}
		v := new(big.Int).SetBytes(m.Value)
		switch f.GetMatchType() {
		case p4configv1.MatchField_EXACT:
			fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: canonicalBytes(m.Value)}}
		case p4configv1.MatchField_LPM:
			if m.Wildcard || m.PrefixLen == 0 {
				continue
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: canonicalBytes(m.Value), PrefixLen: int32(m.PrefixLen)}}
		case p4configv1.MatchField_TERNARY:
			mask := full
			if m.Mask != nil {
				mask = new(big.Int).SetBytes(m.Mask)
			}
			if m.Wildcard || mask.Sign() == 0 {
				continue
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{
				Value: bytesOf(new(big.Int).And(v, mask)), Mask: bytesOf(mask)}}
		case p4configv1.MatchField_RANGE:
			hi := new(big.Int).SetBytes(m.High)
			if m.High == nil {
				hi = v
			}
			if m.Wildcard || v.Sign() == 0 && hi.Cmp(full) == 0 {
				continue
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: bytesOf(v), High: bytesOf(hi)}}
		case p4configv1.MatchField_OPTIONAL:
			if m.Wildcard || m.Mask != nil && new(big.Int).SetBytes(m.Mask).Sign() == 0 {
				continue
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Optional_{Optional: &p4v1.FieldMatch_Optional{Value: canonicalBytes(m.Value)}}
		default:
			return nil, fmt.Errorf("field %s: match kind %v", f.GetName(), f.GetMatchType())
		}
		out = append(out, fm)
	}
	return out, nil
}

// priority maps the engine's (STF's) priority, where larger wins and 0 is
// allowed, to P4Runtime's, where larger wins and 0 is not.
func priority(pt *p4configv1.Table, p int32) int32 {
	if !needsPriority(pt) {
		return 0
	}
	if p < 0 {
		return 1
	}
	return p + 1
}

func (b *Backend) action(pt *p4configv1.Table, a pipeline.ActionCall) (*p4v1.TableAction, error) {
	ai, err := b.prog.Model.Action(a.ActionID)
	if err != nil {
		return nil, err
	}
	for _, ref := range pt.GetActionRefs() {
		for _, pa := range b.info.GetActions() {
			if pa.GetPreamble().GetId() != ref.GetId() {
				continue
			}
			if n := pa.GetPreamble().GetName(); n != ai.Name && "."+n != ai.Name {
				continue
			}
			if len(pa.GetParams()) != len(a.Params) {
				return nil, fmt.Errorf("action %s: %d arguments for %d parameters", n(pa), len(a.Params), len(pa.GetParams()))
			}
			call := &p4v1.Action{ActionId: ref.GetId()}
			for i, p := range pa.GetParams() {
				call.Params = append(call.Params, &p4v1.Action_Param{ParamId: p.GetId(), Value: canonicalBytes(a.Params[i])})
			}
			return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: call}}, nil
		}
	}
	return nil, fmt.Errorf("action %s is not an action of table %s in the P4Info", ai.Name, pt.GetPreamble().GetName())
}

func n(a *p4configv1.Action) string { return a.GetPreamble().GetName() }

// needsPriority: ternary, range and optional fields order entries.
func needsPriority(t *p4configv1.Table) bool {
	for _, f := range t.GetMatchFields() {
		switch f.GetMatchType() {
		case p4configv1.MatchField_TERNARY, p4configv1.MatchField_RANGE, p4configv1.MatchField_OPTIONAL:
			return true
		}
	}
	return false
}

func bytesOf(v *big.Int) []byte {
	b := v.Bytes()
	if len(b) == 0 {
		return []byte{0}
	}
	return b
}

func preEntity(e *p4v1.PacketReplicationEngineEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: e}}
}

func (b *Backend) write(typ p4v1.Update_Type, e *p4v1.Entity) error {
	b.settle()
	ctx, cancel := rpcCtx()
	defer cancel()
	return b.dev.Write(ctx, &p4v1.Update{Type: typ, Entity: e})
}

func tableEntity(te *p4v1.TableEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}
}

// AddEntry implements stf.Backend.
func (b *Backend) AddEntry(t pipeline.TableInfo, e pipeline.TableEntry) error {
	pt, err := b.table(t)
	if err != nil {
		return err
	}
	m, err := b.match(pt, t.Keys, e.Match)
	if err != nil {
		return err
	}
	a, err := b.action(pt, e.Action)
	if err != nil {
		return err
	}
	return b.write(p4v1.Update_INSERT, tableEntity(&p4v1.TableEntry{
		TableId: pt.GetPreamble().GetId(), Match: m, Priority: priority(pt, e.Priority), Action: a}))
}

// DeleteEntry implements stf.Backend.
func (b *Backend) DeleteEntry(t pipeline.TableInfo, match []pipeline.Match, prio int32) error {
	pt, err := b.table(t)
	if err != nil {
		return err
	}
	m, err := b.match(pt, t.Keys, match)
	if err != nil {
		return err
	}
	return b.write(p4v1.Update_DELETE, tableEntity(&p4v1.TableEntry{
		TableId: pt.GetPreamble().GetId(), Match: m, Priority: priority(pt, prio)}))
}

// SetDefault implements stf.Backend.
func (b *Backend) SetDefault(t pipeline.TableInfo, call pipeline.ActionCall) error {
	pt, err := b.table(t)
	if err != nil {
		return err
	}
	a, err := b.action(pt, call)
	if err != nil {
		return err
	}
	return b.write(p4v1.Update_MODIFY, tableEntity(&p4v1.TableEntry{
		TableId: pt.GetPreamble().GetId(), IsDefaultAction: true, Action: a}))
}

func replicas(rs []pipeline.Replica) []*p4v1.Replica {
	out := make([]*p4v1.Replica, len(rs))
	for i, r := range rs {
		out[i] = &p4v1.Replica{PortKind: &p4v1.Replica_Port{Port: bytesOf(new(big.Int).SetUint64(uint64(r.Port)))}, Instance: r.Rid}
	}
	return out
}

// SetCloneSession implements stf.Backend (INSERT, or MODIFY when the
// session exists).
func (b *Backend) SetCloneSession(id uint32, s pipeline.CloneSession) error {
	typ := p4v1.Update_INSERT
	if b.dev.clones[id] {
		typ = p4v1.Update_MODIFY
	}
	err := b.write(typ, preEntity(&p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{
		CloneSessionEntry: &p4v1.CloneSessionEntry{SessionId: id, Replicas: replicas(s.Replicas),
			ClassOfService: s.ClassOfService, PacketLengthBytes: int32(s.TruncateLength)}}}))
	if err == nil {
		b.dev.clones[id] = true
	}
	return err
}

// SetMulticastGroup implements stf.Backend (INSERT, or MODIFY when the
// group exists).
func (b *Backend) SetMulticastGroup(group uint32, rs []pipeline.Replica) error {
	typ := p4v1.Update_INSERT
	if _, ok := b.dev.groups[group]; ok {
		typ = p4v1.Update_MODIFY
	}
	err := b.write(typ, preEntity(&p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{
		MulticastGroupEntry: &p4v1.MulticastGroupEntry{MulticastGroupId: group, Replicas: replicas(rs)}}}))
	if err == nil {
		b.dev.groups[group] = []int{}
	}
	return err
}

func (b *Backend) readOne(e *p4v1.Entity) (*p4v1.Entity, error) {
	b.settle()
	ctx, cancel := rpcCtx()
	defer cancel()
	got, err := b.dev.Read(ctx, e)
	if err != nil {
		return nil, err
	}
	if len(got) != 1 {
		return nil, fmt.Errorf("read returned %d entities, want 1", len(got))
	}
	return got[0], nil
}

// ReadCounter implements stf.Backend.
func (b *Backend) ReadCounter(c pipeline.CounterInfo, index int) (pipeline.CounterData, error) {
	var id uint32
	for _, pc := range b.info.GetCounters() {
		if n := pc.GetPreamble().GetName(); n == c.Name || "."+n == c.Name {
			id = pc.GetPreamble().GetId()
		}
	}
	if id == 0 {
		return pipeline.CounterData{}, fmt.Errorf("counter %s is not in the P4Info", c.Name)
	}
	got, err := b.readOne(&p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
		CounterId: id, Index: &p4v1.Index{Index: int64(index)}}}})
	if err != nil {
		return pipeline.CounterData{}, err
	}
	d := got.GetCounterEntry().GetData()
	return pipeline.CounterData{Packets: uint64(d.GetPacketCount()), Bytes: uint64(d.GetByteCount())}, nil
}

// ReadDirectCounter implements stf.Backend.
func (b *Backend) ReadDirectCounter(t pipeline.TableInfo, match []pipeline.Match, prio int32) (pipeline.CounterData, error) {
	pt, err := b.table(t)
	if err != nil {
		return pipeline.CounterData{}, err
	}
	m, err := b.match(pt, t.Keys, match)
	if err != nil {
		return pipeline.CounterData{}, err
	}
	got, err := b.readOne(&p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
		TableEntry: &p4v1.TableEntry{TableId: pt.GetPreamble().GetId(), Match: m, Priority: priority(pt, prio)}}}})
	if err != nil {
		return pipeline.CounterData{}, err
	}
	d := got.GetDirectCounterEntry().GetData()
	return pipeline.CounterData{Packets: uint64(d.GetPacketCount()), Bytes: uint64(d.GetByteCount())}, nil
}

// maxBurst is how many frames the runner sends before it lets the switch
// go quiet. p4lang's simple_switch_grpc reads each port through libpcap,
// whose receive ring (4 MiB here, in slots sized for the largest packet
// the port may deliver: 512 KiB on a TUN device, so 8 of them; 128 KiB on
// a veth, 32) fills when frames arrive faster than BMv2 takes them, one
// per wake-up, and the kernel drops what does not fit. Sent back to back,
// a script's 9th and later frames on a port were lost (p4c's own runner
// feeds BMv2 from pcap files, where this cannot happen). terrapin-switch's
// 16 MiB rings hold thousands; the bound costs it a settle per 4 frames.
const maxBurst = 4

// Send implements stf.Backend. The switch keeps the order of frames from
// one port, but serves ports concurrently, while an STF script expects the
// outputs in the order it sent the inputs: so before a frame on another
// port than the last one, the earlier frames are let out first.
func (b *Backend) Send(port uint32, frame []byte) error {
	if b.pending && (port != b.lastPort || b.burst >= maxBurst) {
		b.settle()
	}
	b.pending, b.lastPort = true, port
	b.burst++
	return b.dev.Send(port, frame)
}

// Wait implements stf.Backend: the ports have been quiet for the settle
// time.
func (b *Backend) Wait() error {
	b.settle()
	if !b.dev.Alive() {
		return errors.New("the switch exited")
	}
	return nil
}

// portOrder lists the frames of every port that received some, ports in
// ascending order. Every port counts: a device made for a script's ports
// (Device.RunScript, terrapin-stf --via p4runtime) may have ports beyond
// the pool's 0..15 (p4c's table-entries programs send to ports 21..24).
func portOrder(got map[uint32][][]byte) []stf.OutPacket {
	ports := make([]uint32, 0, len(got))
	for p := range got {
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	var out []stf.OutPacket
	for _, p := range ports {
		for _, f := range got[p] {
			out = append(out, stf.OutPacket{Port: p, Data: f})
		}
	}
	return out
}

// Outputs implements stf.Backend.
func (b *Backend) Outputs() ([]stf.OutPacket, error) {
	got := b.dev.Collect(maxSettle)
	b.pending, b.burst = false, 0
	out := portOrder(got)
	if !b.dev.Alive() {
		return out, errors.New("the switch exited")
	}
	return out, nil
}
