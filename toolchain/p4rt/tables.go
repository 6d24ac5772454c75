package p4rt

import (
	"strconv"
	"strings"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// fieldValue is one validated key field in canonical form. present is
// false for a "don't care" field (omitted from the P4Runtime match).
type fieldValue struct {
	present   bool
	value     []byte // exact, lpm, ternary value, optional value, range low
	mask      []byte // ternary
	prefixLen int    // lpm
	high      []byte // range
}

// entryKey is the identity of an entry: its canonical match and priority
// (spec §9.1: "match and priority uniquely identify an entry").
func entryKey(match []fieldValue, priority int32) string {
	var b strings.Builder
	for _, f := range match {
		if !f.present {
			b.WriteString("*|")
			continue
		}
		b.WriteString(string(f.value))
		b.WriteByte('/')
		b.WriteString(string(f.mask))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(f.prefixLen))
		b.WriteByte('/')
		b.WriteString(string(f.high))
		b.WriteByte('|')
	}
	b.WriteString(strconv.Itoa(int(priority)))
	return b.String()
}

// parseMatch validates a P4Runtime match against the table (spec §9.1.1).
func parseMatch(t *tableInfo, fms []*p4v1.FieldMatch) ([]fieldValue, error) {
	out := make([]fieldValue, len(t.fields))
	for _, fm := range fms {
		if fm == nil {
			return nil, invalid("table %q: empty match element", t.name)
		}
		i, ok := t.fieldIndex[fm.GetFieldId()]
		if !ok {
			return nil, invalid("table %q has no match field with id %d", t.name, fm.GetFieldId())
		}
		f := t.fields[i]
		if out[i].present {
			return nil, invalid("table %q: match field %q given twice", t.name, f.name)
		}
		fv, err := parseField(t, f, fm)
		if err != nil {
			return nil, err
		}
		out[i] = fv
	}
	for i, f := range t.fields {
		if f.kind == matchExact && !out[i].present {
			return nil, invalid("table %q: exact match field %q is missing", t.name, f.name)
		}
	}
	return out, nil
}

func parseField(t *tableInfo, f fieldInfo, fm *p4v1.FieldMatch) (fieldValue, error) {
	if f.tr != nil {
		return parseTranslatedField(t, f, fm)
	}
	fv := fieldValue{present: true}
	wrongKind := func() (fieldValue, error) {
		return fieldValue{}, invalid("table %q: field %q is %s, the request gives another match kind", t.name, f.name, f.kind)
	}
	where := func(err error) error {
		return errorf(codeOf(err), "table %q field %q: %s", t.name, f.name, messageOf(err))
	}
	var err error
	switch f.kind {
	case matchExact:
		m := fm.GetExact()
		if m == nil {
			return wrongKind()
		}
		if fv.value, err = canonical(m.GetValue(), f.width); err != nil {
			return fv, where(err)
		}
	case matchLPM:
		m := fm.GetLpm()
		if m == nil {
			return wrongKind()
		}
		if fv.value, err = canonical(m.GetValue(), f.width); err != nil {
			return fv, where(err)
		}
		p := int(m.GetPrefixLen())
		if p <= 0 || p > f.width {
			// A zero prefix is "don't care", which must be omitted.
			return fv, invalid("table %q field %q: prefix length %d out of (0, %d]", t.name, f.name, m.GetPrefixLen(), f.width)
		}
		if trailingZeros(fv.value, f.width) < f.width-p {
			return fv, invalid("table %q field %q: value 0x%x has bits set past its /%d prefix", t.name, f.name, fv.value, p)
		}
		fv.prefixLen = p
	case matchTernary:
		m := fm.GetTernary()
		if m == nil {
			return wrongKind()
		}
		if fv.value, err = canonical(m.GetValue(), f.width); err != nil {
			return fv, where(err)
		}
		if fv.mask, err = canonical(m.GetMask(), f.width); err != nil {
			return fv, where(err)
		}
		if isZero(fv.mask) {
			return fv, invalid("table %q field %q: zero mask (don't care must be omitted)", t.name, f.name)
		}
		if !equalValue(andBytes(fv.value, fv.mask, f.width), fv.value) {
			return fv, invalid("table %q field %q: value 0x%x has bits outside mask 0x%x", t.name, f.name, fv.value, fv.mask)
		}
	case matchRange:
		m := fm.GetRange()
		if m == nil {
			return wrongKind()
		}
		if fv.value, err = canonical(m.GetLow(), f.width); err != nil {
			return fv, where(err)
		}
		if fv.high, err = canonical(m.GetHigh(), f.width); err != nil {
			return fv, where(err)
		}
		if compareValue(fv.value, fv.high) > 0 {
			return fv, invalid("table %q field %q: range low 0x%x > high 0x%x", t.name, f.name, fv.value, fv.high)
		}
		if isZero(fv.value) && equalValue(fv.high, allOnes(f.width)) {
			return fv, invalid("table %q field %q: full range (don't care must be omitted)", t.name, f.name)
		}
	case matchOptional:
		m := fm.GetOptional()
		if m == nil {
			return wrongKind()
		}
		if fv.value, err = canonical(m.GetValue(), f.width); err != nil {
			return fv, where(err)
		}
	}
	return fv, nil
}

// keyFields converts a canonical match to the engine's fixed-width form.
func keyFields(t *tableInfo, match []fieldValue) []pipeline.Match {
	out := make([]pipeline.Match, len(t.fields))
	for i, f := range t.fields {
		v := match[i]
		k := pipeline.Match{}
		switch f.kind {
		case matchExact:
			k = pipeline.Match{Value: padded(v.value, f.width)}
		case matchLPM:
			k = pipeline.Match{Value: padded(v.value, f.width), PrefixLen: v.prefixLen}
			if !v.present {
				k.Value, k.PrefixLen = padded(nil, f.width), 0
			}
		case matchTernary:
			k = pipeline.Match{Value: padded(v.value, f.width), Mask: padded(v.mask, f.width)}
		case matchOptional:
			k = pipeline.Match{Value: padded(v.value, f.width), Mask: padded(nil, f.width)}
			if v.present {
				k.Mask = padded(allOnes(f.width), f.width)
			}
		case matchRange:
			k = pipeline.Match{Value: padded(v.value, f.width), High: padded(v.high, f.width)}
			if !v.present {
				k.Value, k.High = padded(nil, f.width), padded(allOnes(f.width), f.width)
			}
		}
		// an exact field is never "don't care" (P4Runtime requires it)
		k.Wildcard = !v.present && f.kind != matchExact
		out[i] = k
	}
	return out
}

// matchProto renders a canonical match for a read response; don't-care
// fields are omitted, as they must be in writes (read-write symmetry).
// Translated fields are translated back to the controller's values, which
// fails only when the switch's translation cannot express what the device
// holds.
func matchProto(t *tableInfo, match []fieldValue) ([]*p4v1.FieldMatch, error) {
	var out []*p4v1.FieldMatch
	for i, f := range t.fields {
		v := match[i]
		if !v.present {
			continue
		}
		fm := &p4v1.FieldMatch{FieldId: f.id}
		if f.tr != nil {
			if err := sdnMatch(t, f, v, fm); err != nil {
				return nil, err
			}
			out = append(out, fm)
			continue
		}
		switch f.kind {
		case matchExact:
			fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: clone(v.value)}}
		case matchLPM:
			fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: clone(v.value), PrefixLen: int32(v.prefixLen)}}
		case matchTernary:
			fm.FieldMatchType = &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: clone(v.value), Mask: clone(v.mask)}}
		case matchRange:
			fm.FieldMatchType = &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: clone(v.value), High: clone(v.high)}}
		case matchOptional:
			fm.FieldMatchType = &p4v1.FieldMatch_Optional_{Optional: &p4v1.FieldMatch_Optional{Value: clone(v.value)}}
		}
		out = append(out, fm)
	}
	return out, nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// boundAction is a validated action call: canonical params in the order
// of the action's declaration, as the device takes them (translated
// parameters hold the device's values).
type boundAction struct {
	id     uint32
	params [][]byte
}

// parseAction validates an action call for table t (spec §9.1.2).
func (s *schema) parseAction(t *tableInfo, a *p4v1.Action, asDefault bool) (boundAction, error) {
	if a == nil {
		return boundAction{}, invalid("table %q: action is missing", t.name)
	}
	scope, ok := t.actionScopes[a.GetActionId()]
	if !ok {
		return boundAction{}, invalid("action id %#x is not an action of table %q", a.GetActionId(), t.name)
	}
	ai := s.actions[a.GetActionId()]
	if asDefault && scope == p4configv1.ActionRef_TABLE_ONLY {
		return boundAction{}, errorf(codes.PermissionDenied, "action %q is @tableonly in table %q", ai.name, t.name)
	}
	if !asDefault && scope == p4configv1.ActionRef_DEFAULT_ONLY {
		return boundAction{}, errorf(codes.PermissionDenied, "action %q is @defaultonly in table %q", ai.name, t.name)
	}
	return s.bindParams(ai, a.GetParams(), false)
}

// bindParams checks an action's parameters and puts them in canonical
// order. Values are the controller's, translated for translated
// parameters, unless deviceValues (the program's own calls, as P4Info's
// initial_default_action gives them: a P4 program can name only the
// device's values).
func (s *schema) bindParams(ai *actionInfo, ps []*p4v1.Action_Param, deviceValues bool) (boundAction, error) {
	out := boundAction{id: ai.id, params: make([][]byte, len(ai.params))}
	for _, p := range ps {
		if p == nil {
			return boundAction{}, invalid("action %q: empty parameter", ai.name)
		}
		i, ok := ai.paramIndex[p.GetParamId()]
		if !ok {
			return boundAction{}, invalid("action %q has no parameter with id %d", ai.name, p.GetParamId())
		}
		if out.params[i] != nil {
			return boundAction{}, invalid("action %q: parameter %q given twice", ai.name, ai.params[i].name)
		}
		pi := ai.params[i]
		var v []byte
		var err error
		if pi.tr != nil && !deviceValues {
			v, err = pi.tr.toDevice(p.GetValue(), pi.width)
		} else {
			v, err = canonical(p.GetValue(), pi.width)
		}
		if err != nil {
			return boundAction{}, errorf(codeOf(err), "action %q parameter %q: %s", ai.name, ai.params[i].name, messageOf(err))
		}
		out.params[i] = v
	}
	for i, v := range out.params {
		if v == nil {
			return boundAction{}, invalid("action %q: parameter %q is missing", ai.name, ai.params[i].name)
		}
	}
	return out, nil
}

// engineArgs widens canonical params for the engine.
func (s *schema) engineArgs(b boundAction) (string, [][]byte) {
	ai := s.actions[b.id]
	args := make([][]byte, len(b.params))
	for i, v := range b.params {
		args[i] = padded(v, ai.params[i].width)
	}
	return ai.name, args
}

// actionProto renders a bound action for the controller, translating
// translated parameters back (which fails only when the switch's
// translation cannot express the device's value).
func (s *schema) actionProto(b boundAction) (*p4v1.Action, error) {
	ai := s.actions[b.id]
	a := &p4v1.Action{ActionId: b.id}
	for i, v := range b.params {
		pi := ai.params[i]
		v = clone(v)
		if pi.tr != nil {
			var err error
			if v, err = pi.tr.toSDN(v); err != nil {
				return nil, errorf(codeOf(err), "action %q parameter %q: %s", ai.name, pi.name, messageOf(err))
			}
		}
		a.Params = append(a.Params, &p4v1.Action_Param{ParamId: pi.id, Value: v})
	}
	return a, nil
}

// tableAction is actionProto as a direct table action.
func (s *schema) tableAction(b boundAction) (*p4v1.TableAction, error) {
	a, err := s.actionProto(b)
	if err != nil {
		return nil, err
	}
	return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: a}}, nil
}

// tableEntry is an entry as a read returns it (spec §8.2 read-write
// symmetry): its key, priority and action as the device holds them (or as
// the program declares them), with what only P4Runtime has.
type tableEntry struct {
	match    []fieldValue
	priority int32
	action   boundAction           // direct tables
	ref      *pipeline.IndirectRef // indirect tables: the member or group
	entryMeta
	isConst bool // declared by a const table: only direct resources change
	// ageing is the device's idle state of the entry (tables that
	// support idle timeout; nil for entries read from the schema).
	ageing *pipeline.EntryAgeing
}

// entryMeta is what P4Runtime keeps of an entry that the device does not:
// the client's cookie and metadata, the idle timeout exactly as written
// (the device keeps it rounded), and the action set a one-shot group
// stands for.
type entryMeta struct {
	controllerMetadata uint64
	metadata           []byte
	idleTimeoutNs      int64
	oneShot            *oneShot // set when the entry's group is a one-shot action set's
}

func (m entryMeta) empty() bool {
	return m.controllerMetadata == 0 && len(m.metadata) == 0 && m.idleTimeoutNs == 0 && m.oneShot == nil
}

// tableState is what P4Runtime alone knows of one table; the entries
// themselves are on the device.
type tableState struct {
	// meta holds, by entryKey, the entries whose entryMeta is not empty.
	meta map[string]entryMeta
	// count is how many entries the client has written, for the P4Info
	// size limit (checked before anything is programmed).
	count int64
	// clientDefault is set while the default action is one the client
	// wrote (read from the device, with the cookie and metadata written);
	// otherwise it is the program's.
	clientDefault bool
	defaultCookie uint64
	defaultMeta   []byte
}

func (ts *tableState) setMeta(key string, m entryMeta) {
	if m.empty() {
		delete(ts.meta, key)
	} else {
		ts.meta[key] = m
	}
}

// entries returns t's entries in the order they were added. A table with
// declared entries holds only those, read back from the schema as the
// program wrote them (the device keeps them normalised for matching).
func (ps *pipelineState) entries(t *tableInfo) ([]*tableEntry, error) {
	if len(t.constEntries) > 0 {
		out := make([]*tableEntry, len(t.constEntries))
		for i := range t.constEntries {
			out[i] = ps.declaredEntry(t, i)
		}
		return out, nil
	}
	if t.missing {
		return nil, nil
	}
	des, err := ps.ctl.Entries(t.name)
	if err != nil {
		return nil, engineErr("reading the entries", err)
	}
	out := make([]*tableEntry, len(des))
	for i, de := range des {
		match, err := matchFrom(t, de.Match)
		if err != nil {
			return nil, errorf(codes.Internal, "table %q: the device holds an entry P4Runtime cannot express: %v", t.name, err)
		}
		if out[i], err = ps.fromDevice(t, de, match); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// entry returns t's entry with this canonical match and priority, nil
// when there is none.
func (ps *pipelineState) entry(t *tableInfo, match []fieldValue, priority int32) (*tableEntry, error) {
	if len(t.constEntries) > 0 {
		if i, ok := t.constIndex[entryKey(match, priority)]; ok {
			return ps.declaredEntry(t, i), nil
		}
		return nil, nil
	}
	if t.missing {
		return nil, nil
	}
	de, ok, err := ps.ctl.Entry(t.name, keyFields(t, match), priority)
	if err != nil {
		return nil, engineErr("reading the entry", err)
	}
	if !ok || de.Priority != priority {
		return nil, nil // (a table without priorities ignores the one asked)
	}
	// The device found it by this key, so match is its canonical form.
	return ps.fromDevice(t, de, match)
}

// lookup parses te's match for t and finds the entry with it and te's
// priority (nil when there is none).
func (ps *pipelineState) lookup(t *tableInfo, te *p4v1.TableEntry) ([]fieldValue, *tableEntry, error) {
	match, err := parseMatch(t, te.GetMatch())
	if err != nil {
		return nil, nil, err
	}
	e, err := ps.entry(t, match, te.GetPriority())
	return match, e, err
}

func (ps *pipelineState) declaredEntry(t *tableInfo, i int) *tableEntry {
	ce := t.constEntries[i]
	return &tableEntry{match: ce.match, priority: ce.priority, action: ce.action, isConst: t.isConst,
		entryMeta: ps.tables[t.id].meta[entryKey(ce.match, ce.priority)]}
}

// fromDevice converts an entry the device holds, whose key is match in
// canonical form, to the form a read returns, joined with its entryMeta.
func (ps *pipelineState) fromDevice(t *tableInfo, de pipeline.TableEntry, match []fieldValue) (*tableEntry, error) {
	e := &tableEntry{match: match, priority: de.Priority, ageing: de.Ageing}
	if de.Indirect.Kind != pipeline.IndirectNone {
		ref := de.Indirect
		e.ref = &ref
	} else if a, err := ps.schema.actionFrom(t, de.Action); err == nil {
		e.action = a
	} else {
		return nil, errorf(codes.Internal, "table %q: the device holds an entry P4Runtime cannot express: %v", t.name, err)
	}
	e.entryMeta = ps.tables[t.id].meta[entryKey(match, de.Priority)]
	return e, nil
}

// parseMeterConfig validates a MeterConfig for a meter of type mt
// (spec §9.6, v1.4 meter types).
func parseMeterConfig(mc *p4v1.MeterConfig, mt p4configv1.MeterSpec_Type) (*pipeline.MeterConfig, error) {
	if mc == nil {
		return nil, nil
	}
	if mc.GetCir() < 0 || mc.GetCburst() < 0 || mc.GetPir() < 0 || mc.GetPburst() < 0 || mc.GetEburst() < 0 {
		return nil, invalid("meter config has a negative rate or burst")
	}
	switch mt {
	case p4configv1.MeterSpec_TWO_RATE_THREE_COLOR:
		if mc.GetEburst() != 0 {
			return nil, invalid("eburst must be unset for a two-rate three-colour meter")
		}
		if mc.GetCir() > mc.GetPir() {
			// RFC 2698 requires PIR >= CIR.
			return nil, invalid("cir %d exceeds pir %d (RFC 2698 needs pir >= cir)", mc.GetCir(), mc.GetPir())
		}
	case p4configv1.MeterSpec_SINGLE_RATE_THREE_COLOR, p4configv1.MeterSpec_SINGLE_RATE_TWO_COLOR:
		if mc.GetCir() != mc.GetPir() || mc.GetCburst() != mc.GetPburst() {
			return nil, invalid("a single-rate meter needs pir == cir and pburst == cburst")
		}
		if mt == p4configv1.MeterSpec_SINGLE_RATE_TWO_COLOR && mc.GetEburst() != 0 {
			return nil, invalid("eburst must be unset for a single-rate two-colour meter")
		}
		if mt == p4configv1.MeterSpec_SINGLE_RATE_THREE_COLOR && mc.GetEburst() != 0 {
			return nil, errorf(codes.Unimplemented, "single-rate three-colour meters (eburst) are not supported by the v1model engine")
		}
	}
	return &pipeline.MeterConfig{CIR: uint64(mc.GetCir()), CBurst: uint64(mc.GetCburst()), PIR: uint64(mc.GetPir()), PBurst: uint64(mc.GetPburst())}, nil
}

func meterProto(c *pipeline.MeterConfig) *p4v1.MeterConfig {
	if c == nil {
		return nil
	}
	return &p4v1.MeterConfig{Cir: int64(c.CIR), Cburst: int64(c.CBurst), Pir: int64(c.PIR), Pburst: int64(c.PBurst)}
}

func counterValue(d *p4v1.CounterData) (pipeline.CounterData, error) {
	if d.GetByteCount() < 0 || d.GetPacketCount() < 0 {
		return pipeline.CounterData{}, invalid("negative counter value")
	}
	return pipeline.CounterData{Bytes: uint64(d.GetByteCount()), Packets: uint64(d.GetPacketCount())}, nil
}
