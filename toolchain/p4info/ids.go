package p4info

import (
	"errors"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
)

// IDs allocates P4Runtime ids and aliases for a program known only by its
// objects' names, by the rules Build uses (p4c's: prefix byte, hash of the
// name, collisions moved on; aliases the shortest unique dotted suffix).
// The STF runner uses it to make a P4Info for a corpus program that comes
// without one, so that its ids are the ones p4c would have given.
type IDs struct {
	syms     *symbolTable
	assigned bool
}

// NewIDs returns an empty allocation.
func NewIDs() *IDs { return &IDs{syms: newSymbolTable()} }

// Add records an object of the given kind. Call it for every object before
// Assign; adding a name twice is harmless.
func (x *IDs) Add(kind p4v1.P4Ids_Prefix, name string) { x.syms.add(kind, name, 0) }

// Assign gives every object added so far its id.
func (x *IDs) Assign() error {
	x.syms.computeIDs()
	x.assigned = true
	return errors.Join(x.syms.errs...)
}

// ID is the id of an object added before Assign (0: unknown, or Assign not
// called yet).
func (x *IDs) ID(kind p4v1.P4Ids_Prefix, name string) uint32 {
	if !x.assigned {
		return 0
	}
	return x.syms.id(kind, name)
}

// Alias is name's P4Info alias among every name added.
func (x *IDs) Alias(name string) string { return x.syms.alias(name) }
