package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Options configure a pipeline.
type Options struct {
	// Clock returns a monotonic time in nanoseconds. Timestamps the program
	// sees (microseconds, as BMv2's) and meters use it. Nil: time since Load.
	Clock func() int64
	// Log receives log_msg output and failed assertions. Nil: discarded.
	Log func(msg string)
	// DropPort is the egress_spec value meaning "drop" (BMv2 default 511).
	DropPort uint32
	// RandomSeed seeds the per-packet-context generators used by random()
	// and the "random" hash; 0 picks one from the clock.
	RandomSeed uint64
	// DigestBuffer is the capacity of the digest channel (default 1024).
	DigestBuffer int
}

// Pipeline is a loaded, compiled P4 program.
type Pipeline struct {
	opts Options
	lay  *layout
	// reference: no fast paths (in-place deparse, buffer checksums,
	// specialised extraction and actions); for differential tests only.
	reference bool
	mu        sync.Mutex // serializes control-plane writers; see control.go
	// still is held shared by every control-plane write of what a state
	// dump holds (entries, defaults, profiles, meter configurations,
	// timeouts) and exclusively by Still, so a dump sees no write half done.
	still    sync.RWMutex
	pool     sync.Pool
	dropPort uint32
	t0       time.Time
	program  string

	nbig         int
	maxKeyFields int
	maxKeyBytes  int

	actions    []*action
	actionByID map[int]*action
	tables     objects[*table]

	counters   objects[*counterArray]
	meters     objects[*meterArray]
	registers  objects[*registerArray]
	calcByName map[string]*calculation
	calcs      []*calculation // all, selectors' included
	profiles   objects[*actionProfile]
	vsets      objects[*valueSet]
	fieldLists map[int][]fieldRef
	learnByID  map[int]*learnList
	learnLists []*learnList

	parser       *parser
	ingress      cfNode
	egress       cfNode
	deparseOrder []int
	verifyCk     []*checksum
	updateCk     []*checksum
	std          stdFields

	pre            *pre
	digests        chan pipeline.Digest
	digestDrops    atomic.Uint64
	assertFailures atomic.Uint64
	seedCounter    atomic.Uint64

	names map[ObjectKind]map[string]int

	// PHV words some expression, key or calculation reads; timestamps
	// nobody reads are not produced (a clock read costs ~50 ns here).
	readWords    map[int]bool
	hdrPack      []*packPlan    // per header instance: deparse plan, nil if not packable
	emitOrder    []emitInfo     // deparser order, packet headers only, with their sizes
	emitAt       []int32        // per header instance: its index in emitOrder, -1 if none
	lazyEx       []*lazyExtract // per header instance extracted by the parser's fast path
	useIngressTS bool
	useEgressTS  bool
	// egressInfo: the program reads some of the metadata egress provides
	// (egress_port, packet_length, queueing metadata); else it is not
	// written, which saves a store per field per packet.
	egressInfo bool
}

// objects are a program's objects of one kind: in JSON order, by name
// and by id. The zero value is empty and ready to use.
type objects[T any] struct {
	list   []T
	byName map[string]T
	byID   map[int]T
}

func (o *objects[T]) add(name string, id int, x T) {
	if o.byName == nil {
		o.byName, o.byID = map[string]T{}, map[int]T{}
	}
	o.list = append(o.list, x)
	o.byName[name] = x
	o.byID[id] = x
}

// infos describes each of xs as info does, in order.
func infos[T, I any](xs []T, info func(T) I) []I {
	out := make([]I, len(xs))
	for i, x := range xs {
		out[i] = info(x)
	}
	return out
}

// emitInfo is one packet header of the deparser's order, as the in-place
// deparser needs it.
type emitInfo struct {
	hdr    int
	bytes  int32 // fixed size
	varbit bool
	many   bool // more than 64 fields: dirty masks cannot name them all
	fields []fieldPut
	// fast: fields as writeBack's window indexes them (headers of up to
	// 64 bytes), nil otherwise
	fast *[64]fieldPut
}

type learnList struct {
	name   string
	id     int
	fields []fieldRef
}

type checksum struct {
	name   string
	target *lvalue
	calc   *calculation
	cond   boolFn
	// condValid: the condition is this header's validity (-1: see cond)
	condValid int
	// a static narrow target: its PHV word (-1 otherwise), header, dirty
	// bit and width mask
	word int
	hdr  int
	bit  uint64
	mask uint64
}

// stdField is a standard metadata field the architecture reads and
// writes: its PHV word (-1 when the program lacks it) and width mask.
type stdField struct {
	w int
	m uint64
}

// stdFields are the standard metadata fields v1model's architecture uses.
type stdFields struct {
	ingressPort, egressSpec, egressPort, instanceType, packetLength stdField
	enqTimestamp, enqQdepth, deqTimedelta, deqQdepth, qid           stdField
	ingressTS, egressTS, mcastGrp, egressRid                        stdField
	checksumError, parserError, priority                            stdField
}

// BMv2 simple_switch instance types (standard_metadata.instance_type).
const (
	InstanceNormal       = 0
	InstanceIngressClone = 1
	InstanceEgressClone  = 2
	InstanceCoalesced    = 3
	InstanceRecirc       = 4
	InstanceReplication  = 5
	InstanceResubmit     = 6
)

func (c *closureBuilder) fieldListRefs(fl jFieldList) ([]fieldRef, error) {
	els, err := parseTVs(fl.Elements)
	if err != nil {
		return nil, fmt.Errorf("field list %s: %v", fl.Name, err)
	}
	var refs []fieldRef
	for _, e := range els {
		if e == nil {
			continue
		}
		switch e.kind {
		case "field":
			r, ok := c.lay.lookupField(e.names[0], e.names[1])
			if !ok {
				return nil, fmt.Errorf("field list %s: unknown field %s.%s", fl.Name, e.names[0], e.names[1])
			}
			if r.fld >= 0 {
				refs = append(refs, r)
			}
		case "header":
			h, ok := c.lay.hdrByName[e.name]
			if !ok {
				return nil, fmt.Errorf("field list %s: unknown header %s", fl.Name, e.name)
			}
			for i := range c.lay.headers[h].typ.fields {
				refs = append(refs, fieldRef{hdr: h, fld: i})
			}
		default:
			// hexstr constants etc. carry no state to preserve
		}
	}
	return refs, nil
}

func (c *closureBuilder) compileChecksum(jc *jChecksum) (*checksum, error) {
	calc, ok := c.pl.calcByName[jc.Calculation]
	if !ok {
		return nil, fmt.Errorf("checksum %s: unknown calculation %s", jc.Name, jc.Calculation)
	}
	if len(jc.Target) != 2 {
		return nil, fmt.Errorf("checksum %s: bad target", jc.Name)
	}
	c.where = "checksum " + jc.Name
	defer func() { c.where = "" }()
	lv, err := c.lvalue(&jsonExpr{kind: "field", names: jc.Target})
	if err != nil {
		return nil, err
	}
	ck := &checksum{name: jc.Name, target: lv, calc: calc, condValid: -1, word: -1}
	if lv.static >= 0 && lv.fd.narrow && !c.pl.reference {
		h := c.lay.headers[lv.static]
		ck.word, ck.hdr, ck.bit, ck.mask = h.wordBase+lv.fd.slot, h.id, lv.fd.dirtyBit(), mask64(lv.fd.width)
	}
	if len(jc.IfCond) > 0 && string(jc.IfCond) != "null" {
		a, err := parseTV(jc.IfCond)
		if err != nil {
			return nil, err
		}
		if ck.cond, err = c.boolean(a); err != nil {
			return nil, err
		}
		if h := c.validityOf(a); h >= 0 && !c.pl.reference {
			ck.condValid, ck.cond = h, nil
		}
	}
	return ck, nil
}

func resolveStd(l *layout) stdFields {
	var s stdFields
	find := func(names ...string) stdField {
		for _, n := range names {
			hdr, fld := "standard_metadata", n
			for i := 0; i < len(n); i++ {
				if n[i] == '.' {
					hdr, fld = n[:i], n[i+1:]
					break
				}
			}
			r, ok := l.lookupField(hdr, fld)
			if !ok || r.fld < 0 {
				continue
			}
			fd := l.field(r)
			if !fd.narrow {
				continue
			}
			return stdField{w: l.word(r), m: mask64(fd.width)}
		}
		return stdField{w: -1}
	}
	s.ingressPort = find("ingress_port")
	s.egressSpec = find("egress_spec")
	s.egressPort = find("egress_port")
	s.instanceType = find("instance_type")
	s.packetLength = find("packet_length")
	s.enqTimestamp = find("queueing_metadata.enq_timestamp", "enq_timestamp")
	s.enqQdepth = find("queueing_metadata.enq_qdepth", "enq_qdepth")
	s.deqTimedelta = find("queueing_metadata.deq_timedelta", "deq_timedelta")
	s.deqQdepth = find("queueing_metadata.deq_qdepth", "deq_qdepth")
	s.qid = find("queueing_metadata.qid", "qid")
	s.ingressTS = find("intrinsic_metadata.ingress_global_timestamp", "ingress_global_timestamp")
	s.egressTS = find("intrinsic_metadata.egress_global_timestamp", "egress_global_timestamp")
	s.mcastGrp = find("intrinsic_metadata.mcast_grp", "mcast_grp")
	s.egressRid = find("intrinsic_metadata.egress_rid", "egress_rid")
	s.checksumError = find("checksum_error")
	s.parserError = find("parser_error")
	s.priority = find("intrinsic_metadata.priority", "priority")
	return s
}

// dropUnreadStd stops the architecture writing standard metadata fields
// that it never reads itself and the program never reads either: a store
// per field per packet saved, nothing observable lost (every field starts
// at 0 and nothing could see the value).
func (pl *Pipeline) dropUnreadStd() {
	if pl.reference {
		return
	}
	s := &pl.std
	for _, f := range []*stdField{&s.ingressPort, &s.egressPort, &s.instanceType, &s.packetLength,
		&s.enqTimestamp, &s.enqQdepth, &s.deqTimedelta, &s.deqQdepth, &s.qid,
		&s.ingressTS, &s.egressTS, &s.egressRid, &s.checksumError, &s.parserError} {
		if f.w >= 0 && !pl.readWords[f.w] {
			f.w = -1
		}
	}
}

// set writes a standard metadata field (truncated to its width).
func (s *stdFields) set(p *Packet, f stdField, v uint64) {
	if f.w >= 0 {
		p.words[f.w] = v & f.m
	}
}

func (s *stdFields) get(p *Packet, f stdField) uint64 {
	if f.w < 0 {
		return 0
	}
	return p.words[f.w]
}

// ---- control flow ----

type cfNode interface {
	exec(p *Packet) cfNode
}

type tableNode struct{ t *table }

type condNode struct {
	cond        boolFn
	valid       int // the condition is this header's validity (-1: see cond)
	onTrue      cfNode
	onFalse     cfNode
	name        string
	trueN, falN *string
}

type callNode struct {
	a    *action
	next cfNode
}

func (n *tableNode) exec(p *Packet) cfNode {
	t := n.t
	st := t.state.Load()
	en := t.lookup(st, p)
	if en != nil {
		if t.directCounter != nil {
			en.counter.add(uint64(p.ingressLen))
		}
		if en.life != nil {
			en.life.lastHit.Store(p.meterTime())
		}
		if dm := t.directMeter; dm != nil && dm.result != nil && en.meter != nil {
			color := en.meter.execute(dm.input(p), p.meterTime())
			t.writeColor(p, uint64(color))
		}
		act, data := en.act, en.data
		if t.profile != nil {
			m := t.profile.resolve(p, en.ref)
			if m == nil {
				// an empty group: nothing runs
				if t.hasHitMiss {
					return t.hitNext
				}
				return t.baseNext
			}
			act, data = m.act, m.data
		}
		act.run(p, data)
		if t.hasHitMiss {
			return t.hitNext
		}
		return t.nextByIdx[act.idx]
	}
	act := st.defAct
	if st.defRef.Kind != pipeline.IndirectNone {
		// an indirect table's default member or group
		m := t.profile.resolve(p, st.defRef)
		if m == nil {
			if t.hasHitMiss {
				return t.missNext
			}
			return t.baseNext
		}
		m.act.run(p, m.data)
		if t.hasHitMiss {
			return t.missNext
		}
		return t.nextByIdx[m.act.idx]
	}
	if act != nil {
		act.run(p, st.defData)
	}
	if t.hasHitMiss {
		return t.missNext
	}
	if act == nil {
		return t.baseNext
	}
	return t.nextByIdx[act.idx]
}

func (t *table) writeColor(p *Packet, v uint64) {
	lv := t.directMeter.result
	if lv.fd.narrow {
		h := t.pl.lay.headers[lv.hdr(p)]
		p.words[h.wordBase+lv.fd.slot] = v & mask64(lv.fd.width)
		p.hs[h.id].dmask |= lv.fd.dirtyBit()
	}
}

func (n *condNode) exec(p *Packet) cfNode {
	if n.valid >= 0 {
		if p.hs[n.valid].valid {
			return n.onTrue
		}
		return n.onFalse
	}
	if n.cond(p) {
		return n.onTrue
	}
	return n.onFalse
}

func (n *callNode) exec(p *Packet) cfNode {
	n.a.run(p, nil)
	return n.next
}

func runControl(p *Packet, n cfNode) {
	for n != nil && !p.exit && !p.failed {
		n = n.exec(p)
	}
}

func (c *closureBuilder) compileFlow(jpp *jPipeline, jp *jProgram) (cfNode, error) {
	if jpp == nil {
		return nil, nil
	}
	for i := range jpp.ActionProfiles {
		ap, err := c.compileProfile(&jpp.ActionProfiles[i])
		if err != nil {
			return nil, err
		}
		c.pl.profiles.add(ap.name, ap.id, ap)
		c.pl.names[KindActionProfile][ap.name] = ap.id
	}
	nodes := map[string]cfNode{}
	var tables []*table
	var tjs []*jTable
	for i := range jpp.Tables {
		jt := &jpp.Tables[i]
		t, err := c.compileTable(jt)
		if err != nil {
			return nil, err
		}
		if _, dup := c.pl.tables.byID[t.info.ID]; dup {
			return nil, fmt.Errorf("duplicate table id %d", t.info.ID)
		}
		for _, ca := range c.pl.counters.list {
			if ca.direct && ca.table == t.info.Name {
				t.directCounter = ca
				t.info.DirectCounter = ca.name
			}
		}
		if jt.WithCounters && t.directCounter == nil {
			// with_counters without a named counter array: still count.
			t.directCounter = &counterArray{name: t.info.Name + "$counter", direct: true, table: t.info.Name}
		}
		dmName := ""
		if jt.DirectMeters != nil {
			dmName = *jt.DirectMeters
		}
		for _, ma := range c.pl.meters.list {
			if ma.direct && (ma.table == t.info.Name || ma.name == dmName) {
				t.directMeter = ma
				t.info.DirectMeter = ma.name
			}
		}
		if err := t.constEntries(jt); err != nil {
			return nil, err
		}
		nodes[jt.Name] = &tableNode{t: t}
		tables = append(tables, t)
		tjs = append(tjs, jt)
		c.pl.tables.add(t.info.Name, t.info.ID, t)
		c.pl.names[KindTable][t.info.Name] = t.info.ID
	}
	var conds []*condNode
	var cjs []*jConditional
	for i := range jpp.Conditionals {
		jc := &jpp.Conditionals[i]
		c.where = "conditional " + jc.Name
		a, err := parseTV(jc.Expression)
		if err != nil {
			return nil, c.errorf("%v", err)
		}
		b, err := c.boolean(a)
		if err != nil {
			return nil, err
		}
		c.where = ""
		n := &condNode{cond: b, name: jc.Name, valid: -1}
		if h := c.validityOf(a); h >= 0 && !c.pl.reference {
			n.valid = h
		}
		nodes[jc.Name] = n
		conds = append(conds, n)
		cjs = append(cjs, jc)
	}
	var calls []*callNode
	var ajs []*jActionCall
	for i := range jpp.ActionCalls {
		ja := &jpp.ActionCalls[i]
		a, ok := c.pl.actionByID[ja.ActionID]
		if !ok {
			return nil, fmt.Errorf("action call %s: unknown action %d", ja.Name, ja.ActionID)
		}
		n := &callNode{a: a}
		nodes[ja.Name] = n
		calls = append(calls, n)
		ajs = append(ajs, ja)
	}
	ref := func(name *string, what string) (cfNode, error) {
		if name == nil {
			return nil, nil
		}
		n, ok := nodes[*name]
		if !ok {
			return nil, fmt.Errorf("%s: unknown control flow node %s", what, *name)
		}
		return n, nil
	}
	var err error
	for i, t := range tables {
		jt := tjs[i]
		if t.baseNext, err = ref(jt.BaseDefaultNext, "table "+t.info.Name); err != nil {
			return nil, err
		}
		names := map[string]int{}
		for k, aid := range jt.ActionIDs {
			if k < len(jt.Actions) {
				names[jt.Actions[k]] = aid
			}
		}
		for key, nx := range jt.NextTables {
			n, err := ref(nx, "table "+t.info.Name)
			if err != nil {
				return nil, err
			}
			switch key {
			case "__HIT__":
				t.hitNext, t.hasHitMiss = n, true
			case "__MISS__":
				t.missNext, t.hasHitMiss = n, true
			default:
				aid, ok := names[key]
				if !ok {
					// next_tables keyed by a name not in "actions": look up
					// the action by name globally.
					id, ok2 := c.pl.names[KindAction][key]
					if !ok2 {
						return nil, fmt.Errorf("table %s: next_tables names unknown action %s", t.info.Name, key)
					}
					aid = id
				}
				t.nextByAction[aid] = n
			}
		}
		// Actions without a next_tables entry continue at base_default_next.
		for _, aid := range jt.ActionIDs {
			if _, ok := t.nextByAction[aid]; !ok {
				t.nextByAction[aid] = t.baseNext
			}
		}
		t.nextByIdx = make([]cfNode, len(c.pl.actions))
		for i := range t.nextByIdx {
			t.nextByIdx[i] = t.baseNext
		}
		for aid, n := range t.nextByAction {
			if a, ok := c.pl.actionByID[aid]; ok {
				t.nextByIdx[a.idx] = n
			}
		}
	}
	for i, n := range conds {
		if n.onTrue, err = ref(cjs[i].TrueNext, "conditional "+n.name); err != nil {
			return nil, err
		}
		if n.onFalse, err = ref(cjs[i].FalseNext, "conditional "+n.name); err != nil {
			return nil, err
		}
	}
	for i, n := range calls {
		if n.next, err = ref(ajs[i].NextNode, "action call "+ajs[i].Name); err != nil {
			return nil, err
		}
	}
	return ref(jpp.InitTable, "pipeline "+jpp.Name)
}

// ---- clocks, logging, randomness ----

// clock returns nanoseconds since the pipeline's time origin.
func (pl *Pipeline) clock() int64 {
	if pl.opts.Clock != nil {
		return pl.opts.Clock()
	}
	return int64(time.Since(pl.t0))
}

// meterTime is when a meter judges p: its arrival during the ingress pass
// of a received packet (IngressAt), else the current clock.
func (p *Packet) meterTime() int64 {
	if p.atArrival {
		return p.arrivalNs
	}
	return p.pl.clock()
}

// Now returns the pipeline clock in microseconds, the unit of BMv2's
// timestamps (enq_timestamp etc.); the device uses it for queueing metadata.
func (pl *Pipeline) Now() uint64 { return uint64(pl.clock() / 1000) }

func (pl *Pipeline) logf(format string, args ...any) {
	if pl.opts.Log != nil {
		pl.opts.Log(fmt.Sprintf(format, args...))
	}
}

func (pl *Pipeline) seedRNG() uint64 {
	base := pl.opts.RandomSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	s := base + 0x9E3779B97F4A7C15*(pl.seedCounter.Add(1))
	if s == 0 {
		s = 1
	}
	return s
}

// Program returns the program name from the JSON ("program" attribute).
func (pl *Pipeline) Program() string { return pl.program }

// AssertionFailures counts packets dropped by a failed assert/assume.
func (pl *Pipeline) AssertionFailures() uint64 { return pl.assertFailures.Load() }

// ---- info helpers for control.go ----

func (pl *Pipeline) table(id int) (*table, error) {
	t, ok := pl.tables.byID[id]
	if !ok {
		return nil, errf(CodeNotFound, "no table with id %d", id)
	}
	return t, nil
}

func (pl *Pipeline) tableInfos() []pipeline.TableInfo {
	out := make([]pipeline.TableInfo, len(pl.tables.list))
	for i, t := range pl.tables.list {
		out[i] = t.info
		out[i].Keys = append([]pipeline.KeyFieldInfo(nil), t.info.Keys...)
		out[i].ActionIDs = append([]int(nil), t.info.ActionIDs...)
	}
	return out
}

func (pl *Pipeline) actionInfos() []pipeline.ActionInfo {
	out := make([]pipeline.ActionInfo, len(pl.actions))
	for i, a := range pl.actions {
		out[i] = a.info()
	}
	return out
}

func (pl *Pipeline) counterInfos() []pipeline.CounterInfo {
	return infos(pl.counters.list, func(c *counterArray) pipeline.CounterInfo {
		return pipeline.CounterInfo{Name: c.name, ID: c.id, Size: len(c.cells), Direct: c.direct, Table: c.table}
	})
}

func (pl *Pipeline) meterInfos() []pipeline.MeterInfo {
	return infos(pl.meters.list, func(m *meterArray) pipeline.MeterInfo {
		return pipeline.MeterInfo{Name: m.name, ID: m.id, Size: len(m.cells), Direct: m.direct, Table: m.table, Unit: m.unit, RateCount: m.rateCount}
	})
}

func (pl *Pipeline) registerInfos() []pipeline.RegisterInfo {
	return infos(pl.registers.list, func(r *registerArray) pipeline.RegisterInfo {
		return pipeline.RegisterInfo{Name: r.name, ID: r.id, Size: r.size(), Bitwidth: r.width}
	})
}

func (pl *Pipeline) valueSetInfos() []pipeline.ValueSetInfo {
	return infos(pl.vsets.list, func(v *valueSet) pipeline.ValueSetInfo {
		return pipeline.ValueSetInfo{Name: v.name, ID: v.id, Bitwidth: v.width, MaxSize: v.maxSize}
	})
}

func (pl *Pipeline) headerTypeInfos() []pipeline.HeaderTypeInfo {
	out := make([]pipeline.HeaderTypeInfo, len(pl.lay.types))
	for i, ht := range pl.lay.types {
		h := pipeline.HeaderTypeInfo{Name: ht.name, Fields: make([]pipeline.ParamInfo, len(ht.fields))}
		for j, f := range ht.fields {
			h.Fields[j] = pipeline.ParamInfo{Name: f.name}
			if !f.varbit {
				h.Fields[j].Bitwidth = f.width
			}
		}
		out[i] = h
	}
	return out
}

func (pl *Pipeline) digestInfos() []pipeline.DigestInfo {
	out := make([]pipeline.DigestInfo, len(pl.learnLists))
	for i, l := range pl.learnLists {
		d := pipeline.DigestInfo{Name: l.name, ID: l.id}
		for _, r := range l.fields {
			fd := pl.lay.field(r)
			d.Fields = append(d.Fields, pipeline.ParamInfo{Name: pl.lay.headers[r.hdr].name + "." + fd.name, Bitwidth: fd.width})
		}
		out[i] = d
	}
	return out
}

func (pl *Pipeline) counterArray(id, index int) (*counterArray, error) {
	c, ok := pl.counters.byID[id]
	if !ok {
		return nil, errf(CodeNotFound, "no counter with id %d", id)
	}
	if c.direct {
		return nil, errf(CodeInvalidArgument, "counter %s is direct; read it through its table entries", c.name)
	}
	if index < 0 || index >= len(c.cells) {
		return c, errf(CodeOutOfRange, "counter %s index %d out of range 0..%d", c.name, index, len(c.cells)-1)
	}
	return c, nil
}

func (pl *Pipeline) meterArray(id, index int) (*meterArray, error) {
	m, ok := pl.meters.byID[id]
	if !ok {
		return nil, errf(CodeNotFound, "no meter with id %d", id)
	}
	if m.direct {
		return nil, errf(CodeInvalidArgument, "meter %s is direct; configure it through its table entries", m.name)
	}
	if index >= len(m.cells) {
		return nil, errf(CodeOutOfRange, "meter %s index %d out of range 0..%d", m.name, index, len(m.cells)-1)
	}
	return m, nil
}

func (pl *Pipeline) registerArray(id, index int) (*registerArray, error) {
	r, ok := pl.registers.byID[id]
	if !ok {
		return nil, errf(CodeNotFound, "no register with id %d", id)
	}
	if index < 0 || index >= r.size() {
		return r, errf(CodeOutOfRange, "register %s index %d out of range 0..%d", r.name, index, r.size()-1)
	}
	return r, nil
}

// fieldValue reads any field as big-endian bytes of its width (digests).
func (p *Packet) fieldBytes(r fieldRef) []byte {
	l := p.pl.lay
	fd := l.field(r)
	nb := (fd.width + 7) / 8
	out := make([]byte, nb)
	if fd.narrow {
		putUint(out, p.words[l.word(r)])
	} else {
		off := l.wideAt(r)
		copy(out, p.wide[off+fd.wlen-nb:off+fd.wlen])
	}
	return out
}
