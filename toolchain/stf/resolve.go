package stf

// Name and value resolution, after p4c's backends/bmv2/bmv2stf.py: tables
// and actions are found by full name or by a unique suffix; key fields by
// full name, by "name$N" meaning "name[N]", or by a suffix after a dot;
// action parameters by exact name. Ternary values written in hex with '*'
// nibbles become value&&&mask with a mask covering exactly the digits
// written; lpm values without "/len" get a prefix covering the digits
// written.

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// lookupTable finds a table by the STF's name for it.
func lookupTable(tables []pipeline.TableInfo, name string) (pipeline.TableInfo, error) {
	for _, t := range tables {
		if t.Name == name {
			return t, nil
		}
	}
	// A unique suffix: prefer visible tables and dot boundaries.
	for _, pass := range []func(t pipeline.TableInfo) bool{
		func(t pipeline.TableInfo) bool { return !t.Hidden && strings.HasSuffix(t.Name, "."+name) },
		func(t pipeline.TableInfo) bool { return !t.Hidden && strings.HasSuffix(t.Name, name) },
		func(t pipeline.TableInfo) bool { return strings.HasSuffix(t.Name, name) },
	} {
		var found []pipeline.TableInfo
		for _, t := range tables {
			if pass(t) {
				found = append(found, t)
			}
		}
		if len(found) == 1 {
			return found[0], nil
		}
		if len(found) > 1 {
			return pipeline.TableInfo{}, fmt.Errorf("table name %s is ambiguous between %s and %s", name, found[0].Name, found[1].Name)
		}
	}
	return pipeline.TableInfo{}, fmt.Errorf("no table %s", name)
}

// lookupAction finds one of the table's actions by the STF's name for it.
func lookupAction(pl *engine.Pipeline, t pipeline.TableInfo, name string) (pipeline.ActionInfo, error) {
	var acts []pipeline.ActionInfo
	for _, id := range t.ActionIDs {
		a, err := pl.Action(id)
		if err == nil {
			acts = append(acts, a)
		}
	}
	for _, a := range acts {
		if a.Name == name {
			return a, nil
		}
	}
	for _, pass := range []func(a pipeline.ActionInfo) bool{
		func(a pipeline.ActionInfo) bool { return strings.HasSuffix(a.Name, "."+name) },
		func(a pipeline.ActionInfo) bool { return strings.HasSuffix(a.Name, name) },
	} {
		var found []pipeline.ActionInfo
		for _, a := range acts {
			if pass(a) {
				found = append(found, a)
			}
		}
		if len(found) == 1 {
			return found[0], nil
		}
		if len(found) > 1 {
			return pipeline.ActionInfo{}, fmt.Errorf("action name %s is ambiguous in table %s", name, t.Name)
		}
	}
	return pipeline.ActionInfo{}, fmt.Errorf("no action %s in table %s", name, t.Name)
}

var stackIndexRE = regexp.MustCompile(`^(.*)\$([0-9]+)(.*)$`)

// lookupKey returns the index of the key field the STF names.
func lookupKey(t pipeline.TableInfo, name string) (int, error) {
	if m := stackIndexRE.FindStringSubmatch(name); m != nil {
		name = m[1] + "[" + m[2] + "]" + m[3]
	}
	names := func(k pipeline.KeyFieldInfo) []string {
		if k.Name == k.Target {
			return []string{k.Name}
		}
		return []string{k.Name, k.Target}
	}
	try := func(pred func(n string) bool) (int, bool) {
		for i, k := range t.Keys {
			for _, n := range names(k) {
				if pred(n) {
					return i, true
				}
			}
		}
		return 0, false
	}
	alts := []string{name, name + "$", name + ".$valid$"}
	if strings.HasSuffix(name, ".valid") {
		alts = append(alts, strings.TrimSuffix(name, "valid")+"$valid$")
	}
	for _, a := range alts {
		if i, ok := try(func(n string) bool { return n == a }); ok {
			return i, nil
		}
	}
	if i, ok := try(func(n string) bool {
		return strings.HasSuffix(n, "."+name) || strings.HasSuffix(n, "."+name+"$")
	}); ok {
		return i, nil
	}
	if name == "valid" {
		if i, ok := try(func(n string) bool { return strings.HasSuffix(n, "$valid$") }); ok {
			return i, nil
		}
	}
	return 0, fmt.Errorf("table %s has no key field %s", t.Name, name)
}

// parseNumber parses an STF number: decimal (optionally negative), 0x hex,
// 0b binary or 0o octal; '*' digits count as 0. The result is reduced
// modulo 2^width (two's complement for negatives).
func parseNumber(s string, width int) ([]byte, error) {
	v, _, err := parseDigits(s)
	if err != nil {
		return nil, err
	}
	return toWidth(v, width), nil
}

func toWidth(v *big.Int, width int) []byte {
	m := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(width)), big.NewInt(1))
	v = new(big.Int).And(v, m)
	out := make([]byte, (width+7)/8)
	v.FillBytes(out)
	return out
}

// parseDigits returns the value and, for hex/bin/oct, the wildcard-aware
// mask covering the digits written (nil for decimal).
func parseDigits(s string) (val, mask *big.Int, err error) {
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg = true
		s = s[1:]
	}
	switch {
	case s == "true":
		return big.NewInt(1), nil, nil
	case s == "false":
		return big.NewInt(0), nil, nil
	}
	base, bitsPer := 10, 0
	ls := strings.ToLower(s)
	switch {
	case strings.HasPrefix(ls, "0x"):
		base, bitsPer, s = 16, 4, s[2:]
	case strings.HasPrefix(ls, "0b"):
		base, bitsPer, s = 2, 1, s[2:]
	case strings.HasPrefix(ls, "0o"):
		base, bitsPer, s = 8, 3, s[2:]
	}
	s = strings.ReplaceAll(s, "_", "")
	if s == "" {
		return nil, nil, fmt.Errorf("empty number")
	}
	if base == 10 {
		v, ok := new(big.Int).SetString(strings.ReplaceAll(s, "*", "0"), 10)
		if !ok {
			return nil, nil, fmt.Errorf("bad number %q", s)
		}
		if neg {
			v.Neg(v)
		}
		return v, nil, nil
	}
	val = new(big.Int)
	mask = new(big.Int)
	digit := big.NewInt(0)
	full := int64(1)<<uint(bitsPer) - 1
	for _, c := range s {
		val.Lsh(val, uint(bitsPer))
		mask.Lsh(mask, uint(bitsPer))
		if c == '*' {
			continue
		}
		d := hexVal(c)
		if d < 0 || d >= base {
			return nil, nil, fmt.Errorf("bad digit %q in %q", c, s)
		}
		digit.SetInt64(int64(d))
		val.Or(val, digit)
		mask.Or(mask, big.NewInt(full))
	}
	if neg {
		val.Neg(val)
	}
	return val, mask, nil
}

func hexVal(c rune) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// keyMatch converts an STF key value for key field k.
func keyMatch(k pipeline.KeyFieldInfo, value string) (pipeline.Match, error) {
	w := k.Bitwidth
	if value == "*" && k.Kind != pipeline.MatchExact {
		return pipeline.Match{Wildcard: true}, nil
	}
	switch k.Kind {
	case pipeline.MatchTernary:
		if i := strings.Index(value, "&&&"); i >= 0 {
			v, err := parseNumber(value[:i], w)
			if err != nil {
				return pipeline.Match{}, err
			}
			m, err := parseNumber(value[i+3:], w)
			if err != nil {
				return pipeline.Match{}, err
			}
			return pipeline.Match{Value: v, Mask: m}, nil
		}
		v, m, err := parseDigits(value)
		if err != nil {
			return pipeline.Match{}, err
		}
		if m == nil { // decimal: exact
			return pipeline.Match{Value: toWidth(v, w), Mask: toWidth(big.NewInt(-1), w)}, nil
		}
		return pipeline.Match{Value: toWidth(v, w), Mask: toWidth(m, w)}, nil
	case pipeline.MatchLPM:
		if i := strings.IndexByte(value, '/'); i >= 0 {
			v, err := parseNumber(value[:i], w)
			if err != nil {
				return pipeline.Match{}, err
			}
			var plen int
			if _, err := fmt.Sscanf(value[i+1:], "%d", &plen); err != nil {
				return pipeline.Match{}, fmt.Errorf("bad prefix length in %q", value)
			}
			return pipeline.Match{Value: v, PrefixLen: plen}, nil
		}
		v, m, err := parseDigits(value)
		if err != nil {
			return pipeline.Match{}, err
		}
		plen := w
		if m != nil {
			// bmv2stf.py: the prefix covers the digits written, '*' excluded.
			digits := 0
			ls := strings.ToLower(strings.TrimPrefix(value, "-"))
			body := ls[2:]
			bitsPer := map[byte]int{'x': 4, 'b': 1, 'o': 3}[ls[1]]
			for _, c := range body {
				if c != '*' && c != '_' {
					digits++
				}
			}
			plen = digits * bitsPer
			if plen > w {
				plen = w
			}
		}
		return pipeline.Match{Value: toWidth(v, w), PrefixLen: plen}, nil
	case pipeline.MatchRange:
		if i := strings.Index(value, "->"); i >= 0 {
			lo, err := parseNumber(value[:i], w)
			if err != nil {
				return pipeline.Match{}, err
			}
			hi, err := parseNumber(value[i+2:], w)
			if err != nil {
				return pipeline.Match{}, err
			}
			return pipeline.Match{Value: lo, High: hi}, nil
		}
		v, err := parseNumber(value, w)
		if err != nil {
			return pipeline.Match{}, err
		}
		return pipeline.Match{Value: v, High: v}, nil
	default: // exact, optional, valid
		v, err := parseNumber(value, w)
		if err != nil {
			return pipeline.Match{}, err
		}
		return pipeline.Match{Value: v}, nil
	}
}
