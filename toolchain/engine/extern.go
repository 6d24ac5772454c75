package engine

// Stateful externs: counters, meters, registers, parser value sets.

import (
	"math"
	"math/big"
	"sync"
	"sync/atomic"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// ---- counters ----

type counterCell struct {
	packets atomic.Uint64
	bytes   atomic.Uint64
}

func (c *counterCell) add(nbytes uint64) {
	c.packets.Add(1)
	c.bytes.Add(nbytes)
}

func (c *counterCell) load() pipeline.CounterData {
	return pipeline.CounterData{Packets: c.packets.Load(), Bytes: c.bytes.Load()}
}

func (c *counterCell) store(d pipeline.CounterData) {
	c.packets.Store(d.Packets)
	c.bytes.Store(d.Bytes)
}

type counterArray struct {
	name   string
	id     int
	cells  []counterCell
	direct bool
	table  string
}

// ---- meters ----

// meterCell is one two-rate three-colour meter, implemented exactly as
// BMv2's Meter::execute (src/bm_sim/meters.cpp): token buckets refilled
// from a single time origin in whole microseconds, the peak bucket checked
// first (red), then the committed one (yellow); a packet that passes the
// peak bucket but not the committed one still consumes peak tokens. Rates
// are kept per microsecond as BMv2 does.
type meterCell struct {
	mu         sync.Mutex
	configured bool
	cfg        pipeline.MeterConfig
	origin     int64 // ns, the meter's time origin (BMv2 time_init)
	// rates[0] is the peak rate (colour red on exhaustion), rates[1] the
	// committed rate (yellow).
	rates [2]meterRate
}

type meterRate struct {
	infoRate   float64 // units per microsecond
	burst      uint64
	tokens     uint64
	tokensLast uint64
	color      uint8
}

// Colours as BMv2 returns them.
const (
	ColorGreen  = 0
	ColorYellow = 1
	ColorRed    = 2
)

func (m *meterCell) configure(cfg *pipeline.MeterConfig, nowNs int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cfg == nil {
		m.configured = false
		m.cfg = pipeline.MeterConfig{}
		return nil
	}
	if cfg.PIR < cfg.CIR {
		// BMv2 set_rates: rates must be sorted, CIR <= PIR.
		return errf(CodeInvalidArgument, "meter peak rate %d is below the committed rate %d", cfg.PIR, cfg.CIR)
	}
	m.cfg = *cfg
	m.rates[0] = meterRate{infoRate: float64(cfg.PIR) / 1e6, burst: cfg.PBurst, tokens: cfg.PBurst, color: ColorRed}
	m.rates[1] = meterRate{infoRate: float64(cfg.CIR) / 1e6, burst: cfg.CBurst, tokens: cfg.CBurst, color: ColorYellow}
	m.configured = true
	return nil
}

func (m *meterCell) config() *pipeline.MeterConfig {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.configured {
		return nil
	}
	c := m.cfg
	return &c
}

// execute meters one packet of size input (bytes or 1) at time nowNs.
func (m *meterCell) execute(input uint64, nowNs int64) uint8 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.configured {
		return ColorGreen
	}
	micros := (nowNs - m.origin) / 1000
	if micros < 0 {
		micros = 0
	}
	var color uint8
	for i := range m.rates {
		r := &m.rates[i]
		f := float64(micros) * r.infoRate
		var since uint64
		if f >= math.MaxUint64 {
			since = math.MaxUint64
		} else {
			since = uint64(f)
		}
		if since >= r.tokensLast {
			newTokens := since - r.tokensLast
			r.tokensLast = since
			if r.tokens+newTokens < r.tokens || r.tokens+newTokens > r.burst {
				r.tokens = r.burst
			} else {
				r.tokens += newTokens
			}
		}
		if r.tokens < input {
			color = r.color
			break
		}
		r.tokens -= input
	}
	return color
}

type meterArray struct {
	name      string
	id        int
	cells     []meterCell
	direct    bool
	table     string
	unit      pipeline.MeterUnit
	rateCount int
	// direct meters write their colour here on a hit
	result *lvalue
}

func (m *meterArray) input(p *Packet) uint64 {
	if m.unit == pipeline.MeterPackets {
		return 1
	}
	return uint64(p.ingressLen)
}

// ---- registers ----

type registerArray struct {
	name  string
	id    int
	width int
	mu    sync.Mutex // held by actions that use the array (see action.locks)
	cells []uint64   // width <= 64: one word per cell
	wide  [][]byte   // width > 64
	mask  uint64
}

func newRegisterArray(name string, id, size, width int) *registerArray {
	r := &registerArray{name: name, id: id, width: width, mask: mask64(width)}
	if width <= 64 {
		r.cells = make([]uint64, size)
	} else {
		r.wide = make([][]byte, size)
		for i := range r.wide {
			r.wide[i] = make([]byte, (width+7)/8)
		}
	}
	return r
}

func (r *registerArray) size() int {
	if r.width <= 64 {
		return len(r.cells)
	}
	return len(r.wide)
}

// load and store are called by packet processing with r.mu held by the
// enclosing action; atomics keep control-plane reads race-free.
func (r *registerArray) load(i uint64) uint64 {
	if i >= uint64(len(r.cells)) {
		return 0
	}
	return atomic.LoadUint64(&r.cells[i])
}

func (r *registerArray) store(i, v uint64) {
	if i >= uint64(len(r.cells)) {
		return
	}
	atomic.StoreUint64(&r.cells[i], v&r.mask)
}

func (r *registerArray) loadBig(z *big.Int, i uint64) *big.Int {
	if i >= uint64(len(r.wide)) {
		return z.SetInt64(0)
	}
	return z.SetBytes(r.wide[i])
}

func (r *registerArray) storeBig(i uint64, v *big.Int) {
	if i >= uint64(len(r.wide)) {
		return
	}
	m := new(big.Int).Sub(bigPow2(r.width), big.NewInt(1))
	new(big.Int).And(v, m).FillBytes(r.wide[i])
}

func (r *registerArray) read(i int) []byte {
	nb := (r.width + 7) / 8
	out := make([]byte, nb)
	if r.width <= 64 {
		putUint(out, atomic.LoadUint64(&r.cells[i]))
		return out
	}
	r.mu.Lock()
	copy(out, r.wide[i])
	r.mu.Unlock()
	return out
}

func (r *registerArray) write(i int, v []byte) error {
	if !fitsWidth(v, r.width) {
		return errf(CodeInvalidArgument, "value does not fit register %s (%d bits)", r.name, r.width)
	}
	if r.width <= 64 {
		b := v
		if len(b) > 8 {
			b = b[len(b)-8:]
		}
		atomic.StoreUint64(&r.cells[i], getUint(b))
		return nil
	}
	r.mu.Lock()
	copy(r.wide[i], normBytes(v, len(r.wide[i])))
	r.mu.Unlock()
	return nil
}

func (r *registerArray) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.cells {
		atomic.StoreUint64(&r.cells[i], 0)
	}
	for i := range r.wide {
		clear(r.wide[i])
	}
}

// ---- parser value sets ----

type valueSet struct {
	name    string
	id      int
	width   int // compressed bit width
	maxSize int
	mu      sync.Mutex                 // serializes writers
	cur     atomic.Pointer[[]vsMember] // read by the parser without locks
}

func (v *valueSet) members() []vsMember {
	if m := v.cur.Load(); m != nil {
		return *m
	}
	return nil
}

type vsMember struct {
	v64, m64 uint64 // members of value sets up to 64 bits wide
	vb, mb   []byte // right-aligned, ceil(width/8) bytes
	raw      pipeline.ValueSetMember
}

func (v *valueSet) set(ms []pipeline.ValueSetMember) error {
	if v.maxSize > 0 && len(ms) > v.maxSize {
		return errf(CodeResourceExhausted, "value set %s holds at most %d members", v.name, v.maxSize)
	}
	nb := (v.width + 7) / 8
	out := make([]vsMember, 0, len(ms))
	for _, m := range ms {
		if !fitsWidth(m.Value, v.width) || (m.Mask != nil && !fitsWidth(m.Mask, v.width)) {
			return errf(CodeInvalidArgument, "value set %s member does not fit %d bits", v.name, v.width)
		}
		vm := vsMember{vb: normBytes(m.Value, nb), raw: pipeline.ValueSetMember{Value: append([]byte(nil), m.Value...)}}
		if m.Mask != nil {
			vm.mb = normBytes(m.Mask, nb)
			vm.raw.Mask = append([]byte(nil), m.Mask...)
		} else {
			vm.mb = make([]byte, nb)
			for i := range vm.mb {
				vm.mb[i] = 0xff
			}
			maskTop(vm.mb, v.width)
		}
		for i := range vm.vb {
			vm.vb[i] &= vm.mb[i]
		}
		if v.width <= 64 {
			vm.v64, vm.m64 = getUint(vm.vb), getUint(vm.mb)
		}
		out = append(out, vm)
	}
	v.mu.Lock()
	v.cur.Store(&out)
	v.mu.Unlock()
	return nil
}

func (v *valueSet) get() []pipeline.ValueSetMember {
	ms := v.members()
	out := make([]pipeline.ValueSetMember, len(ms))
	for i, m := range ms {
		out[i] = pipeline.ValueSetMember{Value: append([]byte(nil), m.raw.Value...)}
		if m.raw.Mask != nil {
			out[i].Mask = append([]byte(nil), m.raw.Mask...)
		}
	}
	return out
}
