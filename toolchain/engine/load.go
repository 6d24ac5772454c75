package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Load compiles a BMv2 JSON program. All per-packet work is decided here:
// field references become PHV indices, expressions closures.
func Load(jsonText []byte, opts Options) (*Pipeline, error) {
	return load(jsonText, opts, false)
}

// load compiles a program; reference selects the plain, unspecialised
// code paths everywhere a fast path exists (tests compare the two).
func load(jsonText []byte, opts Options, reference bool) (pl *Pipeline, err error) {
	defer func() {
		// Load must never take the process down on hostile JSON.
		if r := recover(); r != nil {
			pl, err = nil, fmt.Errorf("invalid BMv2 JSON: %v", r)
		}
	}()
	jp, err := decodeProgram(jsonText)
	if err != nil {
		return nil, err
	}
	lay, err := buildLayout(jp)
	if err != nil {
		return nil, err
	}
	pl = newPipeline(jp.Program, lay, opts, reference)
	c := &closureBuilder{pl: pl, lay: lay}
	for _, build := range loadSteps {
		if err := build(c, jp); err != nil {
			return nil, err
		}
	}
	// The rest is decided from the whole program: which headers the fast
	// deparser emits in place, which fields something reads (so the parser
	// extracts only those, and the architecture writes only the metadata
	// someone reads).
	pl.std = resolveStd(lay)
	pl.planDeparse()
	if !reference {
		for _, calc := range pl.calcByName {
			calc.prepareFast(lay)
		}
	}
	c.markCopiedFields()
	pl.finishLazy()
	pl.lazyCalcHeaders()
	pl.skipUnreadMetadata()
	return pl, nil
}

// decodeProgram parses the JSON and refuses a format version the engine
// does not read.
func decodeProgram(jsonText []byte) (*jProgram, error) {
	var jp jProgram
	if err := json.Unmarshal(jsonText, &jp); err != nil {
		return nil, fmt.Errorf("invalid BMv2 JSON: %v", err)
	}
	if len(jp.Meta.Version) >= 1 && jp.Meta.Version[0] != 2 {
		return nil, fmt.Errorf("unsupported BMv2 JSON version %v (want 2.x)", jp.Meta.Version)
	}
	upgradeLegacy(&jp)
	return &jp, nil
}

// newPipeline is an empty pipeline over lay, with opts' defaults applied.
func newPipeline(program string, lay *layout, opts Options, reference bool) *Pipeline {
	pl := &Pipeline{
		opts:       opts,
		reference:  reference,
		lay:        lay,
		dropPort:   511,
		t0:         time.Now(),
		program:    program,
		actionByID: map[int]*action{},
		calcByName: map[string]*calculation{},
		fieldLists: map[int][]fieldRef{},
		learnByID:  map[int]*learnList{},
		pre:        newPRE(),
		names:      map[ObjectKind]map[string]int{},
		lazyEx:     make([]*lazyExtract, len(lay.headers)),
	}
	if opts.DropPort != 0 {
		pl.dropPort = opts.DropPort
	}
	nd := opts.DigestBuffer
	if nd <= 0 {
		nd = 1024
	}
	pl.digests = make(chan pipeline.Digest, nd)
	for k := KindTable; k <= KindActionProfile; k++ {
		pl.names[k] = map[string]int{}
	}
	for _, h := range lay.headers {
		if !h.hidden {
			pl.names[KindHeader][h.name] = h.id
		}
	}
	return pl
}

// loadSteps build the program's objects in an order where each finds what
// it refers to already built: extern arrays and field lists before the
// actions that use them, the deparser's order before the calculations
// whose payload follows it, actions before the parser and the controls
// that call them, calculations before the checksums that name them.
var loadSteps = []func(c *closureBuilder, jp *jProgram) error{
	(*closureBuilder).loadRegisters,
	(*closureBuilder).loadCounters,
	(*closureBuilder).loadMeters,
	(*closureBuilder).loadValueSets,
	(*closureBuilder).loadFieldLists,
	(*closureBuilder).loadLearnLists,
	(*closureBuilder).loadDeparseOrder,
	(*closureBuilder).loadCalculations,
	(*closureBuilder).loadActions,
	(*closureBuilder).loadParser,
	(*closureBuilder).loadControls,
	(*closureBuilder).loadChecksums,
}

func (c *closureBuilder) loadRegisters(jp *jProgram) error {
	for _, jr := range jp.RegisterArrays {
		if jr.Size < 0 || jr.Size > 1<<20 || jr.Bitwidth <= 0 || jr.Bitwidth > 1<<12 {
			return fmt.Errorf("register %s: bad size %d or width %d", jr.Name, jr.Size, jr.Bitwidth)
		}
		r := newRegisterArray(jr.Name, jr.ID, jr.Size, jr.Bitwidth)
		c.pl.registers.add(r.name, r.id, r)
		c.pl.names[KindRegister][r.name] = r.id
	}
	return nil
}

func (c *closureBuilder) loadCounters(jp *jProgram) error {
	for _, jc := range jp.CounterArrays {
		if jc.Size < 0 || jc.Size > 1<<20 {
			return fmt.Errorf("counter %s: bad size %d", jc.Name, jc.Size)
		}
		ca := &counterArray{name: jc.Name, id: jc.ID, direct: jc.IsDirect, table: jc.Binding}
		if !jc.IsDirect {
			ca.cells = make([]counterCell, jc.Size)
		}
		c.pl.counters.add(ca.name, ca.id, ca)
		c.pl.names[KindCounter][ca.name] = ca.id
	}
	return nil
}

func (c *closureBuilder) loadMeters(jp *jProgram) error {
	for _, jm := range jp.MeterArrays {
		if jm.Size < 0 || jm.Size > 1<<20 {
			return fmt.Errorf("meter %s: bad size %d", jm.Name, jm.Size)
		}
		ma := &meterArray{name: jm.Name, id: jm.ID, direct: jm.IsDirect, table: jm.Binding, rateCount: jm.RateCount}
		if jm.Type == "packets" {
			ma.unit = pipeline.MeterPackets
		}
		if !jm.IsDirect {
			ma.cells = make([]meterCell, jm.Size)
		}
		if jm.IsDirect && len(jm.ResultTarget) == 2 {
			lv, err := c.lvalue(&jsonExpr{kind: "field", names: jm.ResultTarget})
			if err != nil {
				return fmt.Errorf("meter %s result: %v", jm.Name, err)
			}
			ma.result = lv
		}
		c.pl.meters.add(ma.name, ma.id, ma)
		c.pl.names[KindMeter][ma.name] = ma.id
	}
	return nil
}

func (c *closureBuilder) loadValueSets(jp *jProgram) error {
	for _, jv := range jp.ParseVsets {
		vs := &valueSet{name: jv.Name, id: jv.ID, width: jv.CompressedBitwidth, maxSize: jv.MaxSize}
		c.pl.vsets.add(vs.name, vs.id, vs)
		c.pl.names[KindValueSet][vs.name] = vs.id
	}
	return nil
}

func (c *closureBuilder) loadFieldLists(jp *jProgram) error {
	for _, fl := range jp.FieldLists {
		refs, err := c.fieldListRefs(fl)
		if err != nil {
			return err
		}
		c.pl.fieldLists[fl.ID] = refs
	}
	return nil
}

func (c *closureBuilder) loadLearnLists(jp *jProgram) error {
	pl := c.pl
	for _, ll := range jp.LearnLists {
		refs, err := c.fieldListRefs(ll)
		if err != nil {
			return err
		}
		l := &learnList{name: ll.Name, id: ll.ID, fields: refs}
		pl.learnByID[l.id] = l
		pl.learnLists = append(pl.learnLists, l)
		pl.names[KindDigest][l.name] = l.id
	}
	return nil
}

func (c *closureBuilder) loadDeparseOrder(jp *jProgram) error {
	if len(jp.Deparsers) == 0 {
		return nil
	}
	for _, name := range jp.Deparsers[0].Order {
		h, ok := c.lay.hdrByName[name]
		if !ok {
			return fmt.Errorf("deparser: unknown header %s", name)
		}
		c.pl.deparseOrder = append(c.pl.deparseOrder, h)
	}
	return nil
}

func (c *closureBuilder) loadCalculations(jp *jProgram) error {
	for i := range jp.Calculations {
		calc, err := c.compileCalculation(&jp.Calculations[i], c.pl.deparseOrder)
		if err != nil {
			return err
		}
		c.pl.calcByName[calc.name] = calc
	}
	return nil
}

func (c *closureBuilder) loadActions(jp *jProgram) error {
	pl := c.pl
	for i := range jp.Actions {
		a, err := c.compileAction(&jp.Actions[i])
		if err != nil {
			return err
		}
		a.idx = len(pl.actions)
		pl.actions = append(pl.actions, a)
		if _, dup := pl.actionByID[a.id]; dup {
			return fmt.Errorf("duplicate action id %d", a.id)
		}
		pl.actionByID[a.id] = a
		pl.names[KindAction][a.name] = a.id
	}
	return nil
}

// loadParser compiles the first parser (v1model has one); a program
// without one parses nothing and hands the whole frame on as payload.
func (c *closureBuilder) loadParser(jp *jProgram) error {
	if len(jp.Parsers) == 0 {
		c.pl.parser = &parser{}
		return nil
	}
	ps, err := c.compileParser(&jp.Parsers[0], jp.Errors)
	if err != nil {
		return err
	}
	c.pl.parser = ps
	return nil
}

// loadControls compiles ingress and egress, found by name, or else by
// position as the JSON lists them.
func (c *closureBuilder) loadControls(jp *jProgram) error {
	var ingressJP, egressJP *jPipeline
	for i := range jp.Pipelines {
		switch jp.Pipelines[i].Name {
		case "ingress":
			ingressJP = &jp.Pipelines[i]
		case "egress":
			egressJP = &jp.Pipelines[i]
		}
	}
	if ingressJP == nil && len(jp.Pipelines) > 0 {
		ingressJP = &jp.Pipelines[0]
	}
	if egressJP == nil && len(jp.Pipelines) > 1 {
		egressJP = &jp.Pipelines[1]
	}
	var err error
	if c.pl.ingress, err = c.compileFlow(ingressJP, jp); err != nil {
		return err
	}
	c.pl.egress, err = c.compileFlow(egressJP, jp)
	return err
}

func (c *closureBuilder) loadChecksums(jp *jProgram) error {
	pl := c.pl
	for i := range jp.Checksums {
		jc := &jp.Checksums[i]
		ck, err := c.compileChecksum(jc)
		if err != nil {
			return err
		}
		if jc.Verify == nil || *jc.Verify {
			pl.verifyCk = append(pl.verifyCk, ck)
		}
		if jc.Update == nil || *jc.Update {
			pl.updateCk = append(pl.updateCk, ck)
		}
	}
	return nil
}

// planDeparse gives every packable header instance its pack plan (word
// indices absolute) and lists the deparser's packet headers in emit order
// with what the in-place deparser needs of each.
func (pl *Pipeline) planDeparse() {
	lay := pl.lay
	pl.hdrPack = make([]*packPlan, len(lay.headers))
	for _, h := range lay.headers {
		if h.typ.plan != nil && h.typ.fixedBits%8 == 0 && h.typ.fixedBits > 0 {
			var fs []packField
			for _, fd := range h.typ.fields {
				fs = append(fs, packField{word: h.wordBase + fd.slot, width: fd.width})
			}
			pl.hdrPack[h.id] = makePackPlan(fs)
		}
	}
	pl.emitAt = make([]int32, len(lay.headers))
	for i := range pl.emitAt {
		pl.emitAt[i] = -1
	}
	for _, h := range pl.deparseOrder {
		hi := lay.headers[h]
		if hi.metadata || pl.emitAt[h] >= 0 {
			continue
		}
		e := emitInfo{hdr: h, bytes: int32((hi.typ.fixedBits + 7) / 8),
			varbit: hi.typ.vlField >= 0, many: len(hi.typ.fields) > 64}
		for i := range hi.typ.fields {
			e.fields = append(e.fields, makeFieldPut(hi, &hi.typ.fields[i]))
		}
		if e.bytes <= 64 && !e.many {
			e.fast = new([64]fieldPut)
			copy(e.fast[:], e.fields)
		}
		pl.emitAt[h] = int32(len(pl.emitOrder))
		pl.emitOrder = append(pl.emitOrder, e)
	}
}

// markCopiedFields counts as read the fields that are copied out rather
// than read by an expression: digests and field lists (resubmit,
// recirculate, clones) copy them field by field, and checksum
// verification compares the target's value.
func (c *closureBuilder) markCopiedFields() {
	pl, lay := c.pl, c.lay
	for _, l := range pl.learnLists {
		for _, r := range l.fields {
			if lay.field(r).narrow {
				c.markRead(lay.word(r))
			}
		}
	}
	for _, refs := range pl.fieldLists {
		for _, r := range refs {
			if lay.field(r).narrow {
				c.markRead(lay.word(r))
			}
		}
	}
	for _, ck := range pl.verifyCk {
		if lv := ck.target; lv.static >= 0 && lv.fd.narrow {
			c.markRead(lay.headers[lv.static].wordBase + lv.fd.slot)
		}
	}
}

// lazyCalcHeaders lists, per calculation, the headers it reads that the
// parser's fast path may have left in the buffer (its inputs and what is
// deparsed into its payload), so they are loaded before it runs.
func (pl *Pipeline) lazyCalcHeaders() {
	for _, calc := range pl.calcs {
		seen := map[int]bool{}
		hdrs := append([]int(nil), calc.afterHdrs...) // deparsed into the payload part
		for _, in := range calc.inputs {
			if in.kind == ciField || in.kind == ciHeader {
				hdrs = append(hdrs, in.hdr)
			}
		}
		for _, h := range hdrs {
			if pl.lazyEx[h] != nil && !seen[h] {
				seen[h] = true
				calc.lazyHdrs = append(calc.lazyHdrs, h)
			}
		}
	}
}

// skipUnreadMetadata decides which metadata the architecture provides per
// packet from what the program reads: timestamps (a clock read costs
// ~50 ns), egress's port, length and queueing metadata, and the standard
// fields dropUnreadStd leaves out. Field lists (clones, resubmit,
// recirculate) and digests may carry these fields to a later pass that
// reads them: covered by readWords, which is global to the program.
func (pl *Pipeline) skipUnreadMetadata() {
	pl.useIngressTS = pl.std.ingressTS.w >= 0 && pl.readWords[pl.std.ingressTS.w]
	pl.useEgressTS = pl.std.egressTS.w >= 0 && pl.readWords[pl.std.egressTS.w]
	for _, f := range []stdField{pl.std.egressPort, pl.std.packetLength, pl.std.enqTimestamp, pl.std.enqQdepth, pl.std.deqTimedelta, pl.std.deqQdepth, pl.std.qid} {
		if f.w >= 0 && pl.readWords[f.w] {
			pl.egressInfo = true
		}
	}
	pl.dropUnreadStd()
}
