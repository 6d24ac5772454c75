// Package bmv2json writes a lowered program as BMv2 JSON (format version
// 2.23, as described by behavioral-model's docs/JSON_format.md), the input
// of simple_switch and of Terrapin's engine.
//
// It reads only the IR. Objects are written with their keys in a fixed,
// documented order so that the output is stable and diffable.
package bmv2json

import (
	"bytes"
	"encoding/json"
	"sort"
)

// object is a JSON object that keeps its keys in insertion order.
type object []member

type member struct {
	key string
	val any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// obj builds an object from alternating keys and values.
func obj(kv ...any) object {
	o := make(object, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		o = append(o, member{key: kv[i].(string), val: kv[i+1]})
	}
	return o
}

func (o *object) add(k string, v any) { *o = append(*o, member{key: k, val: v}) }

// sortedKeys returns a map's keys in order (for next_tables).
func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
