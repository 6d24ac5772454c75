package p4rt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"slices"
	"sync/atomic"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

// P4Runtime type translation (spec sections "User-defined types" and "PSA
// Metadata Translation"). A P4 `type` annotated
// @p4runtime_translation(URI, W) is seen by the controller as a W-bit
// number (sdn_bitwidth) or a string (sdn_string) while the device holds
// its own value: P4Info gives such match fields, action parameters and
// controller packet metadata a type_name whose type_info.new_types entry
// has a translated_type, and the bitwidth of the controller's
// representation, not the device's. The device width is the BMv2 JSON's.
//
// The server keeps every value in the device's domain (the canonical form
// entries are keyed by is the device's) and translates at the P4Runtime
// boundary: controller → device when it parses a request (table entries'
// matches and action parameters, action profile members, one-shot action
// sets, default actions, value set members, PacketOut metadata), device →
// controller when it renders a reply (reads of all of those, PacketIn
// metadata, digests).
//
// The mapping of one URI is the identity on the number unless the
// translation file (--translation-file) names the URI, in which case its
// list is the whole mapping: a controller value it does not list is
// refused. An sdn_string type has no identity; the file must map it.

// Translations holds the mappings of a translation file, by URI.
type Translations struct {
	uris map[string]*uriMapping
}

// uriMapping is one URI's one-to-one mapping.
type uriMapping struct {
	uri     string
	strings bool              // the controller's values are strings
	toDev   map[string][]byte // controller value (canonical bytes, or the string) → device value, canonical
	toSDN   map[string][]byte // device value, canonical → controller value
	maxSDN  int               // widest controller number, in bits
}

// LoadTranslationFile reads a translation file (docs/switch.md,
// "P4Runtime type translation").
func LoadTranslationFile(path string) (*Translations, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := ParseTranslations(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTranslations parses a translation file: a JSON object whose keys are
// translation URIs and whose values are lists of {"sdn": S, "device": D}
// pairs. D is a non-negative integer; S is one too for a type translated to
// a number (sdn_bitwidth), a string for one translated to a string
// (sdn_string). Neither side may repeat within a URI.
func ParseTranslations(data []byte) (*Translations, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a JSON object of translation URIs: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("text after the JSON object")
	}
	t := &Translations{uris: map[string]*uriMapping{}}
	uris := make([]string, 0, len(raw))
	for uri := range raw {
		uris = append(uris, uri)
	}
	slices.Sort(uris)
	for _, uri := range uris {
		if uri == "" {
			return nil, fmt.Errorf("an empty translation URI")
		}
		m, err := parseMapping(uri, raw[uri])
		if err != nil {
			return nil, fmt.Errorf("%q: %v", uri, err)
		}
		t.uris[uri] = m
	}
	return t, nil
}

// URIs are the translation URIs the file maps, sorted.
func (t *Translations) URIs() []string {
	if t == nil {
		return nil
	}
	out := make([]string, 0, len(t.uris))
	for uri := range t.uris {
		out = append(out, uri)
	}
	slices.Sort(out)
	return out
}

type rawPair struct {
	SDN    any `json:"sdn"`
	Device any `json:"device"`
}

func parseMapping(uri string, raw json.RawMessage) (*uriMapping, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var pairs []rawPair
	if err := dec.Decode(&pairs); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, fmt.Errorf(`want a list of {"sdn": ..., "device": ...} pairs, not a JSON %s`, typeErr.Value)
		}
		return nil, fmt.Errorf(`want a list of {"sdn": ..., "device": ...} pairs: %v`, err)
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no pairs")
	}
	m := &uriMapping{uri: uri, toDev: map[string][]byte{}, toSDN: map[string][]byte{}}
	for i, p := range pairs {
		if p.SDN == nil || p.Device == nil {
			return nil, fmt.Errorf(`pair %d: needs both "sdn" and "device"`, i+1)
		}
		dev, err := fileNumber(p.Device)
		if err != nil {
			return nil, fmt.Errorf("pair %d: device value: %v", i+1, err)
		}
		var sdn []byte
		isString := false
		switch v := p.SDN.(type) {
		case string:
			if v == "" {
				return nil, fmt.Errorf("pair %d: empty SDN string", i+1)
			}
			sdn, isString = []byte(v), true
		default:
			if sdn, err = fileNumber(v); err != nil {
				return nil, fmt.Errorf("pair %d: SDN value: %v", i+1, err)
			}
			m.maxSDN = max(m.maxSDN, bitLen(sdn))
		}
		if i == 0 {
			m.strings = isString
		} else if m.strings != isString {
			return nil, fmt.Errorf("pair %d: SDN values must be all numbers (an sdn_bitwidth type) or all strings (an sdn_string type)", i+1)
		}
		if _, dup := m.toDev[string(sdn)]; dup {
			return nil, fmt.Errorf("pair %d: SDN value %s is mapped twice", i+1, showSDN(sdn, isString))
		}
		if _, dup := m.toSDN[string(dev)]; dup {
			return nil, fmt.Errorf("pair %d: device value %s is mapped twice (the mapping must be one-to-one)", i+1, showNumber(dev))
		}
		m.toDev[string(sdn)] = dev
		m.toSDN[string(dev)] = sdn
	}
	return m, nil
}

// fileNumber reads a non-negative JSON integer of any size as a canonical
// bytestring.
func fileNumber(v any) ([]byte, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf("%v is not a number", v)
	}
	z, ok := new(big.Int).SetString(n.String(), 10)
	if !ok || z.Sign() < 0 {
		return nil, fmt.Errorf("%s is not a non-negative integer", n)
	}
	return trimmed(z.Bytes()), nil
}

func showNumber(v []byte) string { return new(big.Int).SetBytes(v).String() }

func showSDN(v []byte, isString bool) string {
	if isString {
		return fmt.Sprintf("%q", v)
	}
	return showNumber(v)
}

// translation is how the values of one translated type cross between the
// controller and the device.
type translation struct {
	typeName string
	uri      string
	sdnWidth int         // the controller's width; 0 for an sdn_string type
	m        *uriMapping // nil: the identity on the number
}

func (tr *translation) String() string {
	return fmt.Sprintf("%s (%q)", tr.typeName, tr.uri)
}

// how names the mapping in messages.
func (tr *translation) how() string {
	if tr.m == nil {
		return "the default translation, the identity on the number; --translation-file can map it"
	}
	return fmt.Sprintf("the translation file's mapping of %q", tr.uri)
}

// newTranslations indexes the P4Info's translated types with their
// mappings. An sdn_string type must have one in the file, of strings; a
// numeric type's mapping, if any, must be of numbers that fit its width.
func newTranslations(info *p4configv1.P4Info, file *Translations) (map[string]*translation, error) {
	out := map[string]*translation{}
	types := info.GetTypeInfo().GetNewTypes()
	names := make([]string, 0, len(types))
	for name := range types {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		tt := types[name].GetTranslatedType()
		if tt == nil {
			continue // original_type: the controller sees the device's value
		}
		tr := &translation{typeName: name, uri: tt.GetUri()}
		var m *uriMapping
		if file != nil {
			m = file.uris[tt.GetUri()]
		}
		switch {
		case tt.GetSdnString() != nil:
			if m == nil {
				return nil, invalid("P4Info type %s is translated to a string (@p4runtime_translation(%q, string)), "+
					"which has no default mapping: give the switch a --translation-file that maps %q", name, tt.GetUri(), tt.GetUri())
			}
			if !m.strings {
				return nil, invalid("P4Info type %s is translated to a string, but the translation file maps %q from numbers", name, tt.GetUri())
			}
		case tt.GetSdnBitwidth() > 0:
			tr.sdnWidth = int(tt.GetSdnBitwidth())
			if m != nil && m.strings {
				return nil, invalid("P4Info type %s is translated to bit<%d>, but the translation file maps %q from strings", name, tr.sdnWidth, tt.GetUri())
			}
			if m != nil && m.maxSDN > tr.sdnWidth {
				return nil, invalid("the translation file maps %q from a value wider than the %d bits of P4Info type %s", tt.GetUri(), tr.sdnWidth, name)
			}
		default:
			return nil, invalid("P4Info type %s is translated (%q) to neither a bitwidth nor a string", name, tt.GetUri())
		}
		tr.m = m
		out[name] = tr
	}
	return out, nil
}

// toDevice translates a controller value of the type to the device's, in
// canonical form, refusing one that does not fit the device's devWidth
// bits. A number wider than the type's SDN width is OUT_OF_RANGE (spec
// "Bytestrings", as for any bytestring); one the mapping does not give, or gives a
// device value too wide for, is INVALID_ARGUMENT.
func (tr *translation) toDevice(v []byte, devWidth int) ([]byte, error) {
	var key []byte
	if tr.sdnWidth == 0 {
		if len(v) == 0 {
			return nil, invalid("empty string for translated type %s", tr)
		}
		key = v
	} else {
		c, err := canonical(v, tr.sdnWidth)
		if err != nil {
			return nil, err
		}
		key = c
	}
	dev := key
	if tr.m != nil {
		d, ok := tr.m.toDev[string(key)]
		if !ok {
			return nil, invalid("value %s of translated type %s is not in the translation file's mapping of %q",
				showSDN(key, tr.sdnWidth == 0), tr, tr.uri)
		}
		dev = d
	}
	if bitLen(dev) > devWidth {
		if tr.m == nil {
			return nil, invalid("value %s of translated type %s does not fit the device's %d bits (%s)",
				showNumber(key), tr, devWidth, tr.how())
		}
		return nil, invalid("value %s of translated type %s maps to device value %s, which does not fit the device's %d bits",
			showSDN(key, tr.sdnWidth == 0), tr, showNumber(dev), devWidth)
	}
	return clone(dev), nil
}

// toSDN translates a device value (canonical) to the controller's. A value
// the mapping does not give is FAILED_PRECONDITION: the switch's
// configuration cannot express what the device holds.
func (tr *translation) toSDN(v []byte) ([]byte, error) {
	if tr.m == nil {
		if bitLen(v) > tr.sdnWidth {
			return nil, errorf(codes.FailedPrecondition, "device value %s of translated type %s does not fit its %d SDN bits (%s)",
				showNumber(v), tr, tr.sdnWidth, tr.how())
		}
		return clone(v), nil
	}
	s, ok := tr.m.toSDN[string(v)]
	if !ok {
		return nil, errorf(codes.FailedPrecondition, "device value %s of translated type %s is not in the translation file's mapping of %q",
			showNumber(v), tr, tr.uri)
	}
	return clone(s), nil
}

// sdnOnes is the all-ones mask of a numeric translated type.
func (tr *translation) sdnOnes() []byte { return allOnes(tr.sdnWidth) }

// parseTranslatedField is parseField for a field of a translated type. The
// spec ("Translation of Match Fields") lets a server require such a match to be one value: a
// ternary match must have the all-ones mask, an LPM match the full prefix,
// a range equal bounds (anything else is "don't care", omitted). The value
// is translated and the match kept in the device's terms: the full device
// mask or prefix, or the one value as both bounds.
func parseTranslatedField(t *tableInfo, f fieldInfo, fm *p4v1.FieldMatch) (fieldValue, error) {
	tr := f.tr
	where := func(err error) error {
		return errorf(codeOf(err), "table %q field %q: %s", t.name, f.name, messageOf(err))
	}
	wrongKind := func() (fieldValue, error) {
		return fieldValue{}, invalid("table %q: field %q is %s, the request gives another match kind", t.name, f.name, f.kind)
	}
	notOne := func(what string) (fieldValue, error) {
		return fieldValue{}, invalid("table %q field %q: %s; the field has translated type %s, so a %s match must name one value "+
			"(or the field be omitted as don't care)", t.name, f.name, what, tr, f.kind)
	}
	dev := func(v []byte) ([]byte, error) {
		d, err := tr.toDevice(v, f.width)
		if err != nil {
			return nil, where(err)
		}
		return d, nil
	}
	sdn := func(v []byte) ([]byte, error) { // a number of the controller's width
		c, err := canonical(v, tr.sdnWidth)
		if err != nil {
			return nil, where(err)
		}
		return c, nil
	}
	fv := fieldValue{present: true}
	var err error
	switch f.kind {
	case matchExact, matchOptional:
		var v []byte
		if f.kind == matchExact {
			m := fm.GetExact()
			if m == nil {
				return wrongKind()
			}
			v = m.GetValue()
		} else {
			m := fm.GetOptional()
			if m == nil {
				return wrongKind()
			}
			v = m.GetValue()
		}
		if fv.value, err = dev(v); err != nil {
			return fv, err
		}
	case matchTernary:
		m := fm.GetTernary()
		if m == nil {
			return wrongKind()
		}
		if tr.sdnWidth == 0 {
			return notOne("a ternary match on a string")
		}
		mask, err := sdn(m.GetMask())
		if err != nil {
			return fv, err
		}
		if isZero(mask) {
			return fv, invalid("table %q field %q: zero mask (don't care must be omitted)", t.name, f.name)
		}
		if !equalValue(mask, tr.sdnOnes()) {
			return notOne(fmt.Sprintf("mask 0x%x is not all ones", mask))
		}
		if fv.value, err = dev(m.GetValue()); err != nil {
			return fv, err
		}
		fv.mask = allOnes(f.width)
	case matchLPM:
		m := fm.GetLpm()
		if m == nil {
			return wrongKind()
		}
		if tr.sdnWidth == 0 {
			return notOne("an LPM match on a string")
		}
		if p := int(m.GetPrefixLen()); p <= 0 || p > tr.sdnWidth {
			return fv, invalid("table %q field %q: prefix length %d out of (0, %d]", t.name, f.name, p, tr.sdnWidth)
		} else if p != tr.sdnWidth {
			return notOne(fmt.Sprintf("prefix length %d is not the full %d", p, tr.sdnWidth))
		}
		if fv.value, err = dev(m.GetValue()); err != nil {
			return fv, err
		}
		fv.prefixLen = f.width
	case matchRange:
		m := fm.GetRange()
		if m == nil {
			return wrongKind()
		}
		lo, hi := m.GetLow(), m.GetHigh()
		if tr.sdnWidth != 0 {
			if lo, err = sdn(lo); err != nil {
				return fv, err
			}
			if hi, err = sdn(hi); err != nil {
				return fv, err
			}
			if compareValue(lo, hi) > 0 {
				return fv, invalid("table %q field %q: range low 0x%x > high 0x%x", t.name, f.name, lo, hi)
			}
			if isZero(lo) && equalValue(hi, tr.sdnOnes()) {
				return fv, invalid("table %q field %q: full range (don't care must be omitted)", t.name, f.name)
			}
		}
		if !bytes.Equal(lo, hi) {
			return notOne("the bounds differ")
		}
		if fv.value, err = dev(lo); err != nil {
			return fv, err
		}
		fv.high = fv.value
	}
	return fv, nil
}

// sdnMatch renders a translated field's canonical (device) match for the
// controller: parseTranslatedField's inverse. A match the device holds
// that names more than one value (a program's declared entry) cannot be
// expressed: FAILED_PRECONDITION.
func sdnMatch(t *tableInfo, f fieldInfo, v fieldValue, fm *p4v1.FieldMatch) error {
	tr := f.tr
	cannot := func(what string) error {
		return errorf(codes.FailedPrecondition, "table %q field %q: the device holds %s, which translated type %s cannot express (one value only)",
			t.name, f.name, what, tr)
	}
	s, err := tr.toSDN(v.value)
	if err != nil {
		return errorf(codeOf(err), "table %q field %q: %s", t.name, f.name, messageOf(err))
	}
	switch f.kind {
	case matchExact:
		fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: s}}
	case matchOptional:
		fm.FieldMatchType = &p4v1.FieldMatch_Optional_{Optional: &p4v1.FieldMatch_Optional{Value: s}}
	case matchTernary:
		if !equalValue(v.mask, allOnes(f.width)) || tr.sdnWidth == 0 {
			return cannot(fmt.Sprintf("a ternary match with mask 0x%x", v.mask))
		}
		fm.FieldMatchType = &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: s, Mask: tr.sdnOnes()}}
	case matchLPM:
		if v.prefixLen != f.width || tr.sdnWidth == 0 {
			return cannot(fmt.Sprintf("an LPM match of prefix length %d", v.prefixLen))
		}
		fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: s, PrefixLen: int32(tr.sdnWidth)}}
	case matchRange:
		if !equalValue(v.value, v.high) {
			return cannot(fmt.Sprintf("the range 0x%x..0x%x", v.value, v.high))
		}
		fm.FieldMatchType = &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: s, High: clone(s)}}
	}
	return nil
}

// translatedWidthProblem checks a P4Info bitwidth against the type's
// translation (spec "Trade-off for v1.x Releases": the controller's
// width, unset for a string).
func translatedWidthProblem(what string, width int32, tr *translation) error {
	if tr.sdnWidth > 0 && width != 0 && int(width) != tr.sdnWidth {
		return invalid("%s has bitwidth %d in P4Info, but its type %s is translated to %d bits", what, width, tr, tr.sdnWidth)
	}
	return nil
}

// untranslatableError is a PacketIn the translation cannot express.
type untranslatableError struct{ msg string }

func (e *untranslatableError) Error() string { return e.msg }

// warnLimiter logs at most one warning a second: PacketIns and digests
// arrive at packet rates, and one message names the problem.
type warnLimiter struct {
	last    atomic.Int64 // unix ns of the last warning
	dropped atomic.Int64 // warnings not logged since
}

func (w *warnLimiter) warn(log *slog.Logger, msg string, args ...any) {
	now, last := time.Now().UnixNano(), w.last.Load()
	if now-last < int64(time.Second) || !w.last.CompareAndSwap(last, now) {
		w.dropped.Add(1)
		return
	}
	if n := w.dropped.Swap(0); n > 0 {
		args = append(args, "more_since_last_warning", n)
	}
	log.Warn(msg, args...)
}
