// Package p4info builds the P4Runtime P4Info of a lowered program (P4Runtime
// v1.4 protos) and writes it as text, JSON or binary protobuf.
//
// Ids are assigned exactly as p4c assigns them, so that controllers and
// P4Info files are interchangeable with p4c's: the most significant byte is
// the resource type (P4Ids prefix), the low 24 bits a Jenkins one-at-a-time
// hash of the fully qualified name; names are hashed in sorted order and a
// collision moves on to the next hash value; @id annotations are honoured
// first. Aliases are the shortest dotted suffix unique among all names.
package p4info

import (
	"fmt"
	"sort"
	"strings"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
)

// symbolTable assigns P4Runtime ids.
type symbolTable struct {
	byType   map[p4v1.P4Ids_Prefix]map[string]uint32
	assigned map[uint32]bool
	suffixes *suffixNode
	seen     map[string]bool
	errs     []error
}

type suffixNode struct {
	instances int
	edges     map[string]*suffixNode
}

func newSymbolTable() *symbolTable {
	return &symbolTable{
		byType:   map[p4v1.P4Ids_Prefix]map[string]uint32{},
		assigned: map[uint32]bool{},
		suffixes: &suffixNode{edges: map[string]*suffixNode{}},
		seen:     map[string]bool{},
	}
}

// add records a symbol with an optional explicit id (0: none).
func (s *symbolTable) add(kind p4v1.P4Ids_Prefix, name string, explicit uint32) {
	m := s.byType[kind]
	if m == nil {
		m = map[string]uint32{}
		s.byType[kind] = m
	}
	if _, dup := m[name]; dup {
		return
	}
	id := uint32(0)
	if explicit != 0 {
		prefix := uint32(kind) << 24
		if explicit&0xff000000 != 0 && explicit&0xff000000 != prefix {
			s.errs = append(s.errs, fmt.Errorf("%s: @id 0x%x has the wrong 8-bit prefix", name, explicit))
		} else {
			explicit |= prefix
			if s.assigned[explicit] {
				s.errs = append(s.errs, fmt.Errorf("@id 0x%x is assigned to multiple declarations", explicit))
			} else {
				s.assigned[explicit] = true
				id = explicit
			}
		}
	}
	m[name] = id
	s.addSuffix(name)
}

func (s *symbolTable) addSuffix(name string) {
	if s.seen[name] {
		return
	}
	s.seen[name] = true
	parts := strings.Split(name, ".")
	n := s.suffixes
	for i := len(parts) - 1; i >= 0; i-- {
		next := n.edges[parts[i]]
		if next == nil {
			next = &suffixNode{edges: map[string]*suffixNode{}}
			n.edges[parts[i]] = next
		}
		next.instances++
		n = next
	}
}

// alias is the shortest suffix of name's dotted components that no other
// symbol shares.
func (s *symbolTable) alias(name string) string {
	parts := strings.Split(name, ".")
	n := s.suffixes
	needed := 0
	for i := len(parts) - 1; i >= 0; i-- {
		next := n.edges[parts[i]]
		if next == nil {
			break
		}
		n = next
		needed++
		if n.instances < 2 {
			break
		}
	}
	return strings.Join(parts[len(parts)-needed:], ".")
}

// jenkinsOneAtATime is the hash p4c uses for resource names.
func jenkinsOneAtATime(key string) uint32 {
	var h uint32
	for i := 0; i < len(key); i++ {
		h += uint32(key[i])
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return h
}

// computeIDs gives every symbol without an explicit id one, resource type
// by resource type in increasing type order, names in sorted order.
func (s *symbolTable) computeIDs() {
	kinds := make([]int, 0, len(s.byType))
	for k := range s.byType {
		kinds = append(kinds, int(k))
	}
	sort.Ints(kinds)
	for _, k := range kinds {
		kind := p4v1.P4Ids_Prefix(k)
		m := s.byType[kind]
		var names []string
		for n, id := range m {
			if id == 0 {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		prefix := uint32(kind) << 24
		for _, n := range names {
			h := jenkinsOneAtATime(n)
			v := h
			for s.assigned[prefix|(v&0xffffff)] {
				v++
				if v == h {
					s.errs = append(s.errs, fmt.Errorf("no available id for %s", n))
					break
				}
			}
			id := prefix | (v & 0xffffff)
			s.assigned[id] = true
			m[n] = id
		}
	}
}

func (s *symbolTable) id(kind p4v1.P4Ids_Prefix, name string) uint32 {
	return s.byType[kind][name]
}
