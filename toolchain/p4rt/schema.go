package p4rt

import (
	"fmt"
	"slices"
	"strings"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/grpc/codes"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// schema indexes one P4Info by id and ties each object to the BMv2 JSON
// object of the same name. P4Info and BMv2 JSON written by p4c (and by
// terrapin-p4c) use the same fully qualified names ("ingress.ipv4_lpm",
// "@name" annotations applied, a leading "." dropped), and PI's bmv2 backend
// relies on exactly that: it looks P4Info names up in the switch. Match
// fields map by position in the key, action parameters by name (they are
// also in the same order), direct resources through the table they are
// attached to.
type schema struct {
	info *p4configv1.P4Info

	tables         map[uint32]*tableInfo
	tableIDs       []uint32
	actions        map[uint32]*actionInfo
	counters       map[uint32]*arrayInfo
	counterIDs     []uint32
	meters         map[uint32]*arrayInfo
	meterIDs       []uint32
	registers      map[uint32]*arrayInfo
	registerIDs    []uint32
	directCounters map[uint32]*tableInfo // direct counter id → its table
	directMeters   map[uint32]*tableInfo
	digests        map[uint32]*digestInfo
	digestIDs      []uint32
	digestByName   map[string]*digestInfo
	profiles       map[uint32]*profileInfo
	profileIDs     []uint32
	valueSets      map[uint32]*valueSetInfo
	valueSetIDs    []uint32
	packetIn       *controllerHeader
	packetOut      *controllerHeader
	// translated are the P4Info's @p4runtime_translation types by name
	// (translate.go).
	translated map[string]*translation
}

type matchKind int

const (
	matchExact matchKind = iota
	matchLPM
	matchTernary
	matchRange
	matchOptional
)

func (k matchKind) String() string {
	return [...]string{"exact", "lpm", "ternary", "range", "optional"}[k]
}

type fieldInfo struct {
	id    uint32
	name  string
	width int // on the device (the BMv2 JSON's, for a translated field)
	kind  matchKind
	tr    *translation // the field's type is translated; nil: not
}

type tableInfo struct {
	id                uint32
	name              string // P4Info name == BMv2 JSON name
	fields            []fieldInfo
	fieldIndex        map[uint32]int
	actionScopes      map[uint32]p4configv1.ActionRef_Scope
	constDefaultID    uint32
	initialDefault    *p4configv1.TableActionCall
	directCounter     uint32
	directCounterName string
	directMeter       uint32
	directMeterName   string
	meterType         p4configv1.MeterSpec_Type
	isConst           bool
	missing           bool // in P4Info only: p4c optimized it out of the JSON
	needsPriority     bool
	idleTimeout       bool
	indirect          bool
	implementationID  uint32
	profile           *profileInfo // the action profile of an indirect table
	size              int64
	// constEntries are the program's declared entries; when there are any
	// they are all the table holds (the device refuses writes), and
	// constIndex finds them by entryKey.
	constEntries []constEntry
	constIndex   map[string]int
	// actionOfJSON maps the device's action ids to the table's P4Info
	// actions, by name (p4c may emit one action under several JSON ids).
	actionOfJSON map[int]uint32
}

// profileInfo is an action profile or selector (P4Info action_profiles).
type profileInfo struct {
	id           uint32
	name         string // BMv2 JSON name
	tables       []*tableInfo
	selector     bool
	size         int64 // members across the profile; 0: no limit
	maxGroupSize int32 // 0: no static limit
	missing      bool  // not in the device config
}

// valueSetInfo is a parser value set. Its match fields are kept as a
// tableInfo so that members are checked by the rules of table matches
// (spec §9.11: "the same rules as in a TableEntry").
type valueSetInfo struct {
	id    uint32
	name  string // BMv2 JSON name
	size  int
	match *tableInfo
	// problem, when set, is why the device config cannot hold this value
	// set (not in the JSON, or a width that differs): writes fail with it.
	problem string
}

type paramInfo struct {
	id    uint32
	name  string
	width int // on the device
	pos   int
	tr    *translation // the parameter's type is translated; nil: not
}

type actionInfo struct {
	id         uint32
	name       string
	params     []paramInfo
	paramIndex map[uint32]int
	missing    bool // not in the BMv2 JSON
}

type arrayInfo struct {
	id        uint32
	name      string
	size      int64
	width     int // registers: element width
	meterType p4configv1.MeterSpec_Type
}

type digestInfo struct {
	id     uint32
	name   string
	widths []int // struct members in order, when the type is a flat struct
	// trs are the members' translations (nil entries: not translated), or
	// the one value's when the digest is not a struct; nil when none is.
	trs []*translation
}

type ctrlField struct {
	id    uint32
	name  string
	width int          // on the wire: the device's width
	tr    *translation // the field's type is translated; nil: not
}

// controllerHeader is a @controller_header header: its fields in
// declaration order, which is the order they sit on the wire.
type controllerHeader struct {
	fields []ctrlField
	bits   int // on the wire
}

// constEntry is an entry from the program's "entries" table property, in
// the server's canonical form (addConstEntries); it is read back to clients
// like any entry.
type constEntry struct {
	match    []fieldValue
	priority int32
	action   boundAction
}

func invalid(format string, args ...any) error {
	return errorf(codes.InvalidArgument, format, args...)
}

// jsonName finds the BMv2 JSON name for a P4Info name among names.
func jsonName(p4infoName string, names map[string]bool) (string, bool) {
	if names[p4infoName] {
		return p4infoName, true
	}
	if names["."+p4infoName] {
		return "." + p4infoName, true
	}
	return "", false
}

// newSchema checks that info describes dev, the program the device loaded
// from the device config, and indexes it, with the translation file's
// mappings (nil: none) for its translated types. Any mismatch is
// INVALID_ARGUMENT: the config "cannot be realized" (spec §14).
func newSchema(info *p4configv1.P4Info, dev pipeline.Schema, file *Translations) (*schema, error) {
	if info == nil {
		return nil, invalid("config has no p4info")
	}
	translated, err := newTranslations(info, file)
	if err != nil {
		return nil, err
	}
	b := &schemaBuilder{
		schema: &schema{
			info:           info,
			tables:         map[uint32]*tableInfo{},
			actions:        map[uint32]*actionInfo{},
			counters:       map[uint32]*arrayInfo{},
			meters:         map[uint32]*arrayInfo{},
			registers:      map[uint32]*arrayInfo{},
			directCounters: map[uint32]*tableInfo{},
			directMeters:   map[uint32]*tableInfo{},
			digests:        map[uint32]*digestInfo{},
			digestByName:   map[string]*digestInfo{},
			profiles:       map[uint32]*profileInfo{},
			valueSets:      map[uint32]*valueSetInfo{},
			translated:     translated,
		},
		dev:       indexDevice(dev),
		seen:      map[uint32]string{},
		typeWidth: map[string]int{},
	}
	for _, step := range schemaSteps {
		if err := step(b); err != nil {
			return nil, err
		}
	}
	return b.schema, nil
}

// schemaSteps index the P4Info kind by kind. Actions come before the
// tables that refer to them, direct resources before the tables that
// attach them, tables before the profiles that implement them (in id
// order, which names a profile's first table). The order is also the order
// ids are claimed in, which decides the names a duplicate id error gives.
var schemaSteps = []func(b *schemaBuilder) error{
	(*schemaBuilder).addActions,
	(*schemaBuilder).addDirectResources,
	(*schemaBuilder).addTables,
	(*schemaBuilder).checkSameProgram,
	(*schemaBuilder).addCounters,
	(*schemaBuilder).addMeters,
	(*schemaBuilder).addRegisters,
	(*schemaBuilder).addDigests,
	(*schemaBuilder).addControllerHeaders,
	(*schemaBuilder).addProfiles,
	(*schemaBuilder).addValueSets,
}

// schemaBuilder is newSchema's working state: the schema so far, the
// device's objects by name, and the ids claimed so far (P4Info ids are
// unique across every kind of object).
type schemaBuilder struct {
	*schema
	dev  deviceNames
	seen map[uint32]string
	// The P4Info's direct counters and meters by id, claimed before the
	// tables that attach them.
	directCounterIDs map[uint32]*p4configv1.DirectCounter
	directMeterIDs   map[uint32]*p4configv1.DirectMeter
	// typeWidth is the device width of each translated type seen so far
	// on a table key, action parameter or controller header, for the value
	// sets (whose fields the device config gives only as a total).
	typeWidth map[string]int
}

// translationOf is the translation of a P4Info field, parameter or
// metadata of type tn (nil when it has none), checked against the P4Info
// width of what (the controller's width, unset for a string).
func (b *schemaBuilder) translationOf(what string, tn *p4configv1.P4NamedType, width int32) (*translation, error) {
	tr := b.translated[tn.GetName()]
	if tr == nil {
		return nil, nil
	}
	if err := translatedWidthProblem(what, width, tr); err != nil {
		return nil, err
	}
	return tr, nil
}

// deviceWidthOf records the device width of a translated type found on the
// device, or falls back (an object the device does not have: nothing is
// ever translated for it) to the controller's width.
func (b *schemaBuilder) deviceWidthOf(tr *translation, width int, onDevice bool) int {
	if onDevice {
		if _, ok := b.typeWidth[tr.typeName]; !ok {
			b.typeWidth[tr.typeName] = width
		}
		return width
	}
	if tr.sdnWidth > 0 {
		return tr.sdnWidth
	}
	return errorWidth
}

// deviceNames is the loaded program's objects by JSON name, for looking
// P4Info names up (jsonName).
type deviceNames struct {
	schema          pipeline.Schema
	actions         map[string]bool
	actionWidths    map[string]map[string]int // parameter widths by action
	actionByID      map[int]string
	tables          map[string]bool
	counters        map[string]bool // indexed arrays; direct ones are by table
	meters          map[string]bool
	registers       map[string]bool
	registerWidth   map[string]int
	directCounterOf map[string]string // table → its direct counter
	directMeterOf   map[string]string
	profiles        map[string]bool
	valueSets       map[string]bool
	valueSetWidth   map[string]int
}

func indexDevice(dev pipeline.Schema) deviceNames {
	d := deviceNames{schema: dev,
		actions: map[string]bool{}, actionWidths: map[string]map[string]int{}, actionByID: map[int]string{},
		tables: map[string]bool{}, counters: map[string]bool{}, meters: map[string]bool{},
		registers: map[string]bool{}, registerWidth: map[string]int{},
		directCounterOf: map[string]string{}, directMeterOf: map[string]string{},
		profiles: map[string]bool{}, valueSets: map[string]bool{}, valueSetWidth: map[string]int{}}
	for _, a := range dev.Actions {
		d.actions[a.Name] = true
		d.actionByID[a.ID] = a.Name
		w := map[string]int{}
		for _, p := range a.Params {
			w[p.Name] = p.Bitwidth
		}
		d.actionWidths[a.Name] = w
	}
	for _, t := range dev.Tables {
		d.tables[t.Name] = true
	}
	for _, c := range dev.Counters {
		if c.Direct {
			d.directCounterOf[c.Table] = c.Name
		} else {
			d.counters[c.Name] = true
		}
	}
	for _, m := range dev.Meters {
		if m.Direct {
			d.directMeterOf[m.Table] = m.Name
		} else {
			d.meters[m.Name] = true
		}
	}
	for _, r := range dev.Registers {
		d.registers[r.Name], d.registerWidth[r.Name] = true, r.Bitwidth
	}
	for _, ap := range dev.ActionProfiles {
		d.profiles[ap.Name] = true
	}
	for _, v := range dev.ValueSets {
		d.valueSets[v.Name], d.valueSetWidth[v.Name] = true, v.Bitwidth
	}
	return d
}

// claim records pre's id, refusing 0 and an id another object has.
func (b *schemaBuilder) claim(pre *p4configv1.Preamble) error {
	id, name := pre.GetId(), pre.GetName()
	if id == 0 {
		return invalid("P4Info object %q has id 0", name)
	}
	if other, dup := b.seen[id]; dup {
		return invalid("P4Info id %#x used by both %q and %q", id, other, name)
	}
	b.seen[id] = name
	return nil
}

func (b *schemaBuilder) addActions() error {
	for _, a := range b.info.GetActions() {
		pre := a.GetPreamble()
		if err := b.claim(pre); err != nil {
			return err
		}
		// p4c lists actions no table uses in P4Info but not in the JSON;
		// only the actions of tables must exist there (addTables).
		jn, ok := jsonName(pre.GetName(), b.dev.actions)
		if !ok {
			jn = pre.GetName()
		}
		ai := &actionInfo{id: pre.GetId(), name: jn, paramIndex: map[uint32]int{}, missing: !ok}
		for i, p := range a.GetParams() {
			what := fmt.Sprintf("action %q parameter %q", pre.GetName(), p.GetName())
			tr, err := b.translationOf(what, p.GetTypeName(), p.GetBitwidth())
			if err != nil {
				return err
			}
			if p.GetBitwidth() <= 0 && tr == nil {
				return invalid("%s has no bitwidth", what)
			}
			if _, dup := ai.paramIndex[p.GetId()]; dup {
				return invalid("action %q has two parameters with id %d", pre.GetName(), p.GetId())
			}
			width := int(p.GetBitwidth())
			w, onDevice := b.dev.actionWidths[jn][p.GetName()]
			switch {
			case tr != nil:
				// P4Info gives the controller's width; the device's is the JSON's.
				width = b.deviceWidthOf(tr, w, onDevice)
			case onDevice && w != width:
				return invalid("%s is %d bits in P4Info, %d in the device config", what, p.GetBitwidth(), w)
			}
			ai.paramIndex[p.GetId()] = i
			ai.params = append(ai.params, paramInfo{id: p.GetId(), name: p.GetName(), width: width, pos: i, tr: tr})
		}
		b.actions[ai.id] = ai
	}
	return nil
}

func (b *schemaBuilder) addDirectResources() error {
	b.directCounterIDs = map[uint32]*p4configv1.DirectCounter{}
	for _, c := range b.info.GetDirectCounters() {
		if err := b.claim(c.GetPreamble()); err != nil {
			return err
		}
		b.directCounterIDs[c.GetPreamble().GetId()] = c
	}
	b.directMeterIDs = map[uint32]*p4configv1.DirectMeter{}
	for _, m := range b.info.GetDirectMeters() {
		if err := b.claim(m.GetPreamble()); err != nil {
			return err
		}
		b.directMeterIDs[m.GetPreamble().GetId()] = m
	}
	return nil
}

func (b *schemaBuilder) addTables() error {
	jsonTableOf := map[string]pipeline.TableInfo{}
	for _, t := range b.dev.schema.Tables {
		jsonTableOf[t.Name] = t
	}
	for _, t := range b.info.GetTables() {
		pre := t.GetPreamble()
		if err := b.claim(pre); err != nil {
			return err
		}
		// p4c keeps tables it optimized away in P4Info; they exist for
		// reads (always empty) but cannot take entries.
		jn, inJSON := jsonName(pre.GetName(), b.dev.tables)
		if !inJSON {
			jn = pre.GetName()
		}
		ti := &tableInfo{
			missing:          !inJSON,
			id:               pre.GetId(),
			name:             jn,
			fieldIndex:       map[uint32]int{},
			actionScopes:     map[uint32]p4configv1.ActionRef_Scope{},
			constDefaultID:   t.GetConstDefaultActionId(),
			initialDefault:   t.GetInitialDefaultAction(),
			isConst:          t.GetIsConstTable(),
			idleTimeout:      t.GetIdleTimeoutBehavior() != p4configv1.Table_NO_TIMEOUT,
			indirect:         t.GetImplementationId() != 0,
			implementationID: t.GetImplementationId(),
			size:             t.GetSize(),
		}
		if jt := jsonTableOf[jn]; inJSON && len(jt.Keys) != len(t.GetMatchFields()) {
			return invalid("table %q has %d match fields in P4Info, %d in the device config",
				pre.GetName(), len(t.GetMatchFields()), len(jt.Keys))
		}
		var deviceKeys []pipeline.KeyFieldInfo
		if inJSON {
			deviceKeys = jsonTableOf[jn].Keys
		}
		if err := b.addMatchFields(ti, t, deviceKeys); err != nil {
			return err
		}
		for _, ref := range t.GetActionRefs() {
			ai, ok := b.actions[ref.GetId()]
			if !ok {
				return invalid("table %q refers to unknown action id %#x", pre.GetName(), ref.GetId())
			}
			if ai.missing && inJSON {
				return invalid("P4Info action %q (of table %q) is not in the device config", ai.name, pre.GetName())
			}
			ti.actionScopes[ref.GetId()] = ref.GetScope()
		}
		if err := b.attachDirect(ti, t); err != nil {
			return err
		}
		// Entries the program declares: read back like any entry.
		ti.actionOfJSON = b.tableActionsByJSONID(ti, b.dev.actionByID)
		if inJSON {
			if err := b.addConstEntries(ti, b.dev.schema.ConstEntries[jn]); err != nil {
				return invalid("table %q: initial entry: %v", pre.GetName(), err)
			}
		}
		b.tables[ti.id] = ti
		b.tableIDs = append(b.tableIDs, ti.id)
	}
	slices.Sort(b.tableIDs)
	return nil
}

// addMatchFields indexes t's match fields in key order. deviceKeys are
// the device's key fields of the table (nil when it has none).
//
// p4c gives a key of type error no bitwidth in P4Info (the type has no
// width in P4); BMv2 matches it as its 32-bit error number, the JSON's
// "errors" list giving each name its number. Such a field takes the
// device's width, and its values are those numbers (simple_switch_grpc
// takes p4c's P4Info the same way).
const errorWidth = 32

func (b *schemaBuilder) addMatchFields(ti *tableInfo, t *p4configv1.Table, deviceKeys []pipeline.KeyFieldInfo) error {
	name := t.GetPreamble().GetName()
	for i, f := range t.GetMatchFields() {
		kind, ok := matchKindOf(f)
		if !ok {
			return invalid("table %q field %q: match kind %v is not supported",
				name, f.GetName(), f.GetMatchType())
		}
		if kind != matchExact && kind != matchLPM {
			ti.needsPriority = true
		}
		tr, err := b.translationOf(fmt.Sprintf("table %q field %q", name, f.GetName()), f.GetTypeName(), f.GetBitwidth())
		if err != nil {
			return err
		}
		width := int(f.GetBitwidth())
		if tr != nil {
			// P4Info gives the controller's width; the device's is the JSON's.
			onDevice := i < len(deviceKeys)
			w := 0
			if onDevice {
				w = deviceKeys[i].Bitwidth
			}
			width = b.deviceWidthOf(tr, w, onDevice)
		} else if width == 0 && f.GetTypeName().GetName() == "" {
			switch {
			case i < len(deviceKeys):
				width = deviceKeys[i].Bitwidth
			case deviceKeys == nil:
				width = errorWidth // a table the device does not have
			}
		}
		if width <= 0 {
			return invalid("table %q field %q has no bitwidth", name, f.GetName())
		}
		if _, dup := ti.fieldIndex[f.GetId()]; dup || f.GetId() == 0 {
			return invalid("table %q has a duplicate or zero match field id %d", name, f.GetId())
		}
		ti.fieldIndex[f.GetId()] = i
		ti.fields = append(ti.fields, fieldInfo{id: f.GetId(), name: f.GetName(), width: width, kind: kind, tr: tr})
	}
	return nil
}

// attachDirect ties t's direct counter and meter to it; on the device they
// are found through the table's JSON name.
func (b *schemaBuilder) attachDirect(ti *tableInfo, t *p4configv1.Table) error {
	for _, rid := range t.GetDirectResourceIds() {
		if _, ok := b.directCounterIDs[rid]; ok {
			ti.directCounter = rid
			ti.directCounterName = b.dev.directCounterOf[ti.name]
			b.directCounters[rid] = ti
			continue
		}
		if m, ok := b.directMeterIDs[rid]; ok {
			ti.directMeter = rid
			ti.directMeterName = b.dev.directMeterOf[ti.name]
			ti.meterType = m.GetSpec().GetType()
			b.directMeters[rid] = ti
			continue
		}
		return invalid("table %q has unknown direct resource %#x", t.GetPreamble().GetName(), rid)
	}
	return nil
}

// checkSameProgram refuses a P4Info none of whose tables and actions the
// device has (P4Info may name objects p4c left out of the JSON, but not
// all of them), and direct resources no table attaches.
func (b *schemaBuilder) checkSameProgram() error {
	mapped := 0
	for _, t := range b.tables {
		if !t.missing {
			mapped++
		}
	}
	for _, a := range b.actions {
		if !a.missing && a.name != "NoAction" {
			mapped++
		}
	}
	if len(b.tables) > 0 && mapped == 0 {
		return invalid("none of the P4Info tables and actions is in the device config: P4Info and BMv2 JSON are from different programs")
	}
	for id := range b.directCounterIDs {
		if _, ok := b.directCounters[id]; !ok {
			return invalid("direct counter %#x is attached to no table", id)
		}
	}
	for id := range b.directMeterIDs {
		if _, ok := b.directMeters[id]; !ok {
			return invalid("direct meter %#x is attached to no table", id)
		}
	}
	return nil
}

// deviceArray claims an indexed extern's id and finds the device's array
// of its name, which must be there: only tables and actions may be in
// P4Info alone (p4c keeps those it optimized out of the JSON).
func (b *schemaBuilder) deviceArray(kind string, pre *p4configv1.Preamble, names map[string]bool) (string, error) {
	if err := b.claim(pre); err != nil {
		return "", err
	}
	jn, ok := jsonName(pre.GetName(), names)
	if !ok {
		return "", invalid("P4Info %s %q is not in the device config", kind, pre.GetName())
	}
	return jn, nil
}

func (b *schemaBuilder) addCounters() error {
	for _, c := range b.info.GetCounters() {
		jn, err := b.deviceArray("counter", c.GetPreamble(), b.dev.counters)
		if err != nil {
			return err
		}
		id := c.GetPreamble().GetId()
		b.counters[id] = &arrayInfo{id: id, name: jn, size: c.GetSize()}
		b.counterIDs = append(b.counterIDs, id)
	}
	slices.Sort(b.counterIDs)
	return nil
}

func (b *schemaBuilder) addMeters() error {
	for _, m := range b.info.GetMeters() {
		jn, err := b.deviceArray("meter", m.GetPreamble(), b.dev.meters)
		if err != nil {
			return err
		}
		id := m.GetPreamble().GetId()
		b.meters[id] = &arrayInfo{id: id, name: jn, size: m.GetSize(), meterType: m.GetSpec().GetType()}
		b.meterIDs = append(b.meterIDs, id)
	}
	slices.Sort(b.meterIDs)
	return nil
}

func (b *schemaBuilder) addRegisters() error {
	for _, r := range b.info.GetRegisters() {
		pre := r.GetPreamble()
		jn, err := b.deviceArray("register", pre, b.dev.registers)
		if err != nil {
			return err
		}
		w := bitstringWidth(r.GetTypeSpec())
		if w == 0 {
			w = b.dev.registerWidth[jn]
		}
		if w <= 0 {
			return invalid("register %q: only bit<W> registers are supported", pre.GetName())
		}
		b.registers[pre.GetId()] = &arrayInfo{id: pre.GetId(), name: jn, size: int64(r.GetSize()), width: w}
		b.registerIDs = append(b.registerIDs, pre.GetId())
	}
	slices.Sort(b.registerIDs)
	return nil
}

// bitstringWidth is the width of a bit<W> or int<W> type, else 0.
func bitstringWidth(ts *p4configv1.P4DataTypeSpec) int {
	bs := ts.GetBitstring()
	switch {
	case bs.GetBit() != nil:
		return int(bs.GetBit().GetBitwidth())
	case bs.GetInt() != nil:
		return int(bs.GetInt().GetBitwidth())
	}
	return 0
}

func (b *schemaBuilder) addDigests() error {
	for _, d := range b.info.GetDigests() {
		pre := d.GetPreamble()
		if err := b.claim(pre); err != nil {
			return err
		}
		di := &digestInfo{id: pre.GetId(), name: pre.GetName()}
		if st := d.GetTypeSpec().GetStruct(); st != nil {
			if def, ok := b.info.GetTypeInfo().GetStructs()[st.GetName()]; ok {
				trs := make([]*translation, len(def.GetMembers()))
				for i, m := range def.GetMembers() {
					di.widths = append(di.widths, bitstringWidth(m.GetTypeSpec()))
					if trs[i] = b.translated[m.GetTypeSpec().GetNewType().GetName()]; trs[i] != nil {
						di.trs = trs
					}
				}
			}
		} else if tr := b.translated[d.GetTypeSpec().GetNewType().GetName()]; tr != nil {
			di.trs = []*translation{tr}
		}
		b.digests[di.id] = di
		b.digestIDs = append(b.digestIDs, di.id)
		b.digestByName[di.name] = di
	}
	slices.Sort(b.digestIDs)
	return nil
}

func (b *schemaBuilder) addControllerHeaders() error {
	for _, cpm := range b.info.GetControllerPacketMetadata() {
		pre := cpm.GetPreamble()
		if err := b.claim(pre); err != nil {
			return err
		}
		h := &controllerHeader{}
		ids := map[uint32]bool{}
		translated := false
		for _, m := range cpm.GetMetadata() {
			what := fmt.Sprintf("controller header %q field %q", pre.GetName(), m.GetName())
			tr, err := b.translationOf(what, m.GetTypeName(), m.GetBitwidth())
			if err != nil {
				return err
			}
			if m.GetBitwidth() <= 0 && tr == nil {
				return invalid("%s has no bitwidth", what)
			}
			if ids[m.GetId()] {
				return invalid("controller header %q has two fields with id %d", pre.GetName(), m.GetId())
			}
			ids[m.GetId()] = true
			translated = translated || tr != nil
			h.fields = append(h.fields, ctrlField{id: m.GetId(), name: m.GetName(), width: int(m.GetBitwidth()), tr: tr})
		}
		if translated {
			// The header on the wire has the device's widths, which only
			// the device config has.
			if err := b.deviceHeaderWidths(pre.GetName(), h); err != nil {
				return err
			}
		}
		for _, f := range h.fields {
			h.bits += f.width
		}
		switch pre.GetName() {
		case "packet_in":
			b.packetIn = h
		case "packet_out":
			b.packetOut = h
		}
	}
	return nil
}

// deviceHeaderWidths sets the device widths of h's translated fields from
// the device config's header type of h's fields: the one whose fields have
// the P4Info names, in order (p4c may pad it at the end), and the P4Info
// widths where not translated. Header types that fit but disagree on a
// translated width make the layout ambiguous.
func (b *schemaBuilder) deviceHeaderWidths(name string, h *controllerHeader) error {
	var widths []int
	var from string
	for _, ht := range b.dev.schema.HeaderTypes {
		if len(ht.Fields) < len(h.fields) {
			continue
		}
		fits := true
		for i, f := range ht.Fields {
			switch {
			case i >= len(h.fields):
				fits = fits && strings.HasPrefix(f.Name, "_padding")
			case f.Name != h.fields[i].name || f.Bitwidth <= 0:
				fits = false
			case h.fields[i].tr == nil && f.Bitwidth != h.fields[i].width:
				fits = false
			}
		}
		if !fits {
			continue
		}
		w := make([]int, len(h.fields))
		for i := range h.fields {
			w[i] = ht.Fields[i].Bitwidth
		}
		if widths != nil && !slices.Equal(w, widths) {
			return invalid("controller header %q has translated fields, and the device config's header types %q and %q both have its fields, "+
				"with different widths: the header's layout on the wire is ambiguous", name, from, ht.Name)
		}
		widths, from = w, ht.Name
	}
	if widths == nil {
		return invalid("controller header %q has translated fields, whose widths on the wire only the device config has, "+
			"but none of its header types has the fields %s", name, ctrlFieldNames(h))
	}
	for i := range h.fields {
		if tr := h.fields[i].tr; tr != nil {
			h.fields[i].width = b.deviceWidthOf(tr, widths[i], true)
		}
	}
	return nil
}

func ctrlFieldNames(h *controllerHeader) string {
	names := make([]string, len(h.fields))
	for i, f := range h.fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// addProfiles indexes the action profiles and ties each indirect table to
// its profile (spec §9.2).
func (b *schemaBuilder) addProfiles() error {
	for _, ap := range b.info.GetActionProfiles() {
		pre := ap.GetPreamble()
		if err := b.claim(pre); err != nil {
			return err
		}
		jn, ok := jsonName(pre.GetName(), b.dev.profiles)
		if !ok {
			jn = pre.GetName()
		}
		if ap.GetSize() < 0 || ap.GetMaxGroupSize() < 0 {
			return invalid("action profile %q has a negative size", pre.GetName())
		}
		pi := &profileInfo{id: pre.GetId(), name: jn, selector: ap.GetWithSelector(), size: ap.GetSize(),
			maxGroupSize: ap.GetMaxGroupSize(), missing: !ok}
		for _, tid := range ap.GetTableIds() {
			t, ok := b.tables[tid]
			if !ok {
				return invalid("action profile %q names unknown table %#x", pre.GetName(), tid)
			}
			if t.implementationID != pi.id {
				return invalid("action profile %q names table %q, whose implementation is %#x", pre.GetName(), t.name, t.implementationID)
			}
		}
		b.profiles[pi.id] = pi
		b.profileIDs = append(b.profileIDs, pi.id)
	}
	// A table's own implementation_id is what ties it to its profile.
	for _, id := range b.tableIDs {
		t := b.tables[id]
		if !t.indirect {
			continue
		}
		if t.profile = b.profiles[t.implementationID]; t.profile == nil {
			return invalid("table %q has implementation %#x, which is not one of the P4Info action profiles", t.name, t.implementationID)
		}
		t.profile.tables = append(t.profile.tables, t)
	}
	slices.Sort(b.profileIDs)
	return nil
}

// addValueSets indexes the parser value sets (spec §9.11).
func (b *schemaBuilder) addValueSets() error {
	for _, v := range b.info.GetValueSets() {
		pre := v.GetPreamble()
		if err := b.claim(pre); err != nil {
			return err
		}
		jn, ok := jsonName(pre.GetName(), b.dev.valueSets)
		if !ok {
			jn = pre.GetName()
		}
		vi := &valueSetInfo{id: pre.GetId(), name: jn, size: int(v.GetSize()),
			match: &tableInfo{id: pre.GetId(), name: pre.GetName(), fieldIndex: map[uint32]int{}}}
		for i, f := range v.GetMatch() {
			kind, ok := matchKindOf(f)
			if !ok {
				// The program still loads; only this value set is unusable.
				vi.problem = fmt.Sprintf("value set %q field %q: match kind %q is not supported", pre.GetName(), f.GetName(), f.GetOtherMatchType())
			}
			tr, err := b.translationOf(fmt.Sprintf("value set %q field %q", pre.GetName(), f.GetName()), f.GetTypeName(), f.GetBitwidth())
			if err != nil {
				return err
			}
			if f.GetBitwidth() <= 0 && tr == nil {
				return invalid("value set %q field %q has no bitwidth", pre.GetName(), f.GetName())
			}
			if _, dup := vi.match.fieldIndex[f.GetId()]; dup || f.GetId() == 0 {
				return invalid("value set %q has a duplicate or zero match field id %d", pre.GetName(), f.GetId())
			}
			vi.match.fieldIndex[f.GetId()] = i
			vi.match.fields = append(vi.match.fields, fieldInfo{id: f.GetId(), name: f.GetName(), width: int(f.GetBitwidth()), kind: kind, tr: tr})
		}
		if problem := b.valueSetDeviceWidths(vi, ok, b.dev.valueSetWidth[jn]); problem != "" && vi.problem == "" {
			vi.problem = problem
		}
		total := 0
		for _, f := range vi.match.fields {
			total += f.width
		}
		switch {
		case vi.problem != "":
		case !ok:
			vi.problem = fmt.Sprintf("value set %q is not in the device config", pre.GetName())
		case b.dev.valueSetWidth[jn] != total:
			vi.problem = fmt.Sprintf("value set %q is %d bits wide in P4Info, %d in the device config", pre.GetName(), total, b.dev.valueSetWidth[jn])
		}
		b.valueSets[vi.id] = vi
		b.valueSetIDs = append(b.valueSetIDs, vi.id)
	}
	slices.Sort(b.valueSetIDs)
	return nil
}

// valueSetDeviceWidths sets the device widths of a value set's translated
// fields. The device config gives only the member's total width, so a
// translated type's width comes from where the schema met the type on the
// device (a table key, an action parameter, a controller header), or else
// from the total when all such fields have one type. A non-empty result is
// why the widths cannot be told.
func (b *schemaBuilder) valueSetDeviceWidths(vi *valueSetInfo, onDevice bool, deviceTotal int) string {
	rest, unknown := deviceTotal, map[string][]int{}
	for i, f := range vi.match.fields {
		if f.tr == nil {
			rest -= f.width
		} else if w, ok := b.typeWidth[f.tr.typeName]; ok {
			vi.match.fields[i].width = w
			rest -= w
		} else {
			unknown[f.tr.typeName] = append(unknown[f.tr.typeName], i)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	for typ, fields := range unknown {
		w := 0
		if onDevice && len(unknown) == 1 && rest > 0 && rest%len(fields) == 0 {
			w = rest / len(fields)
			b.typeWidth[typ] = w
		}
		for _, i := range fields {
			f := &vi.match.fields[i]
			if w > 0 {
				f.width = w
			} else {
				f.width = b.deviceWidthOf(f.tr, 0, false)
			}
		}
		if w == 0 && onDevice {
			return fmt.Sprintf("value set %q: the device widths of its translated fields cannot be told from the device config", vi.name)
		}
	}
	return ""
}

// tableActionsByJSONID maps every JSON action id whose name is one of
// ti's actions to that action's P4Info id.
func (s *schema) tableActionsByJSONID(ti *tableInfo, jsonActionByID map[int]string) map[int]uint32 {
	byName := map[string]uint32{}
	for id := range ti.actionScopes {
		if a := s.actions[id]; a != nil {
			byName[a.name] = id
		}
	}
	out := map[int]uint32{}
	for jid, name := range jsonActionByID {
		if id, ok := byName[name]; ok {
			out[jid] = id
		}
	}
	return out
}

// addConstEntries converts the table's declared entries, as the device
// loaded them, into the form the server reads back. This is the one place
// their priorities are renumbered: BMv2 JSON numbers them 1..N with 1 the
// most urgent; P4Runtime wants the larger number to win, and p4c's
// P4Runtime view gives N..1 (spec §9.1.4), i.e. max+1−p. The device keeps
// p as pipeline.ConstPriorityBase − stored.
func (s *schema) addConstEntries(ti *tableInfo, entries []pipeline.TableEntry) error {
	maxPrio := int32(0)
	for _, e := range entries {
		maxPrio = max(maxPrio, pipeline.ConstPriorityBase-e.Priority)
	}
	ti.constIndex = map[string]int{}
	for _, e := range entries {
		var ce constEntry
		var err error
		if ce.match, err = matchFrom(ti, e.Match); err != nil {
			return err
		}
		if ce.action, err = s.actionFrom(ti, e.Action); err != nil {
			return err
		}
		if ti.needsPriority {
			ce.priority = maxPrio + 1 - (pipeline.ConstPriorityBase - e.Priority)
		}
		ti.constIndex[entryKey(ce.match, ce.priority)] = len(ti.constEntries)
		ti.constEntries = append(ti.constEntries, ce)
	}
	return nil
}

// matchFrom converts a key as the device holds it (fixed-width values,
// normalised for matching) to the canonical form a P4Runtime write of it
// parses to, so that entryKey agrees and a read returns what was written:
// values of the P4Info widths, don't-care fields omitted.
func matchFrom(ti *tableInfo, key []pipeline.Match) ([]fieldValue, error) {
	if len(key) != len(ti.fields) {
		return nil, fmt.Errorf("%d match values for %d fields", len(key), len(ti.fields))
	}
	out := make([]fieldValue, len(key))
	for i, m := range key {
		f := ti.fields[i]
		num := func(v []byte) []byte { return andBytes(v, allOnes(f.width), f.width) }
		fv := fieldValue{present: !m.Wildcard, value: num(m.Value)}
		switch f.kind {
		case matchLPM:
			fv.prefixLen = m.PrefixLen
			fv.present = m.PrefixLen > 0
		case matchTernary, matchOptional:
			// The device keeps no mask for an exact-matched field.
			fv.mask = allOnes(f.width)
			if m.Mask != nil {
				fv.mask = num(m.Mask)
			}
			fv.value = andBytes(fv.value, fv.mask, f.width)
			fv.present = fv.present && !isZero(fv.mask)
			if f.kind == matchOptional {
				if fv.present && !equalValue(fv.mask, allOnes(f.width)) {
					return nil, fmt.Errorf("optional field %q with a partial mask", f.name)
				}
				fv.mask = nil // a written optional field has none (parseField)
			}
		case matchRange:
			fv.high = num(m.High)
			fv.present = fv.present && !(isZero(fv.value) && equalValue(fv.high, allOnes(f.width)))
		}
		if fv.present {
			out[i] = fv
		}
	}
	return out, nil
}

// actionFrom converts an action call as the device holds it (JSON id,
// fixed-width arguments) to the table's P4Info action with canonical
// params.
func (s *schema) actionFrom(ti *tableInfo, a pipeline.ActionCall) (boundAction, error) {
	id, ok := ti.actionOfJSON[a.ActionID]
	if !ok {
		return boundAction{}, fmt.Errorf("JSON action %d is not one of the table's actions in P4Info", a.ActionID)
	}
	ai := s.actions[id]
	if len(a.Params) != len(ai.params) {
		return boundAction{}, fmt.Errorf("action %q: %d arguments for %d parameters", ai.name, len(a.Params), len(ai.params))
	}
	b := boundAction{id: id, params: make([][]byte, len(a.Params))}
	for i, v := range a.Params {
		b.params[i] = andBytes(v, allOnes(ai.params[i].width), ai.params[i].width)
	}
	return b, nil
}

// matchKindOf maps a P4Info match field's standard match kind onto the
// server's; ok is false for kinds it does not know (other_match_type).
func matchKindOf(f *p4configv1.MatchField) (kind matchKind, ok bool) {
	switch f.GetMatchType() {
	case p4configv1.MatchField_EXACT:
		return matchExact, true
	case p4configv1.MatchField_LPM:
		return matchLPM, true
	case p4configv1.MatchField_TERNARY:
		return matchTernary, true
	case p4configv1.MatchField_RANGE:
		return matchRange, true
	case p4configv1.MatchField_OPTIONAL:
		return matchOptional, true
	}
	return 0, false
}
