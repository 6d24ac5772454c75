package p4rt

import (
	"math/big"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Parser value sets (spec §9.11): a ValueSetEntry is written whole with
// MODIFY; its members are matches checked by the rules of table matches,
// and reach the engine in BMv2's compressed value/mask form. Reads expand
// the device's members back into matches (expanded), so the server keeps
// no copy of them.

func (ps *pipelineState) writeValueSet(typ p4v1.Update_Type, v *p4v1.ValueSetEntry) error {
	if typ != p4v1.Update_MODIFY {
		return invalid("ValueSetEntry supports MODIFY only (the whole set is written at once)")
	}
	if v.GetValueSetId() == 0 {
		return invalid("value set id 0 is only allowed as a read wildcard")
	}
	vi, ok := ps.schema.valueSets[v.GetValueSetId()]
	if !ok {
		return errorf(codes.NotFound, "no value set with id %#x", v.GetValueSetId())
	}
	if vi.problem != "" {
		return errorf(codes.Unimplemented, "%s", vi.problem)
	}
	if vi.size > 0 && len(v.GetMembers()) > vi.size {
		return errorf(codes.ResourceExhausted, "value set %q holds at most %d members, %d given", vi.match.name, vi.size, len(v.GetMembers()))
	}
	engineMembers := make([]pipeline.ValueSetMember, 0, len(v.GetMembers()))
	seen := map[string]bool{}
	for i, m := range v.GetMembers() {
		if m == nil {
			return invalid("value set %q: member %d is empty", vi.match.name, i)
		}
		match, err := parseMatch(vi.match, m.GetMatch())
		if err != nil {
			return errorf(codeOf(err), "value set member %d: %s", i, messageOf(err))
		}
		key := entryKey(match, 0)
		if seen[key] {
			// Read-write symmetry needs every member to be distinct.
			return errorf(codes.AlreadyExists, "value set %q: member %d repeats an earlier member", vi.match.name, i)
		}
		seen[key] = true
		em, err := compressed(vi.match, match)
		if err != nil {
			return err
		}
		engineMembers = append(engineMembers, em)
	}
	if err := ps.ctl.SetValueSet(vi.name, engineMembers); err != nil {
		return engineErr("setting the value set", err)
	}
	return nil
}

// members reads a value set's members from the device, as matches in the
// canonical form they were written in (a set the device cannot hold has
// none).
func (ps *pipelineState) members(vi *valueSetInfo) ([][]fieldValue, error) {
	if vi.problem != "" {
		return nil, nil
	}
	ems, err := ps.ctl.ValueSet(vi.name)
	if err != nil {
		return nil, engineErr("reading the value set", err)
	}
	out := make([][]fieldValue, len(ems))
	for i, em := range ems {
		if out[i], err = expanded(vi.match, em); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// compressed concatenates a member's fields, first field most significant,
// into one value and mask (BMv2 parse_vsets take a single value/mask over
// the compressed bit width). Omitted fields match anything: mask 0.
func compressed(t *tableInfo, match []fieldValue) (pipeline.ValueSetMember, error) {
	value, mask := new(big.Int), new(big.Int)
	total := 0
	for i, f := range t.fields {
		fv := match[i]
		v, m := new(big.Int), new(big.Int)
		ones := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(f.width)), big.NewInt(1))
		if fv.present {
			v.SetBytes(fv.value)
			switch f.kind {
			case matchExact, matchOptional:
				m.Set(ones)
			case matchTernary:
				m.SetBytes(fv.mask)
			case matchLPM:
				m.Rsh(ones, uint(f.width-fv.prefixLen))
				m.Lsh(m, uint(f.width-fv.prefixLen))
			case matchRange:
				return pipeline.ValueSetMember{}, errorf(codes.Unimplemented, "value set %q field %q: range matches are not supported in value sets (BMv2 matches them by value and mask)", t.name, f.name)
			}
		}
		value.Lsh(value, uint(f.width)).Or(value, v)
		mask.Lsh(mask, uint(f.width)).Or(mask, m)
		total += f.width
	}
	n := (total + 7) / 8
	return pipeline.ValueSetMember{Value: value.FillBytes(make([]byte, n)), Mask: mask.FillBytes(make([]byte, n))}, nil
}

// expanded is compressed's inverse: it splits a member the device holds
// into the value set's fields, in the canonical form a write of it parses
// to (parseMatch), so a read returns what was written.
func expanded(t *tableInfo, em pipeline.ValueSetMember) ([]fieldValue, error) {
	total := 0
	for _, f := range t.fields {
		total += f.width
	}
	ones := func(w int) *big.Int { return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1)) }
	value, mask := new(big.Int).SetBytes(em.Value), ones(total)
	if em.Mask != nil {
		mask.SetBytes(em.Mask)
	}
	out := make([]fieldValue, len(t.fields))
	shift := total
	for i, f := range t.fields {
		shift -= f.width
		all := ones(f.width)
		m := new(big.Int).And(new(big.Int).Rsh(mask, uint(shift)), all)
		v := new(big.Int).And(new(big.Int).Rsh(value, uint(shift)), m)
		cannot := func() ([]fieldValue, error) {
			return nil, errorf(codes.Internal, "value set %q field %q: the device holds mask %#x, which a %s match cannot give", t.name, f.name, m, f.kind)
		}
		if m.Sign() == 0 {
			if f.kind == matchExact {
				return cannot()
			}
			continue // don't care: omitted
		}
		fv := fieldValue{present: true, value: trimmed(v.Bytes())}
		switch f.kind {
		case matchExact, matchOptional:
			if m.Cmp(all) != 0 {
				return cannot()
			}
		case matchTernary:
			fv.mask = trimmed(m.Bytes())
		case matchLPM:
			fv.prefixLen = f.width - int(m.TrailingZeroBits())
			if new(big.Int).Add(m, new(big.Int).Lsh(big.NewInt(1), m.TrailingZeroBits())).BitLen() != f.width+1 {
				return cannot() // not ones followed by zeros
			}
		default:
			return cannot()
		}
		out[i] = fv
	}
	return out, nil
}

func (ps *pipelineState) readValueSets(q *p4v1.ValueSetEntry) ([]*p4v1.Entity, error) {
	if len(q.GetMembers()) != 0 {
		return nil, invalid("a ValueSetEntry read must not give members")
	}
	ids := ps.schema.valueSetIDs
	if q.GetValueSetId() != 0 {
		if _, ok := ps.schema.valueSets[q.GetValueSetId()]; !ok {
			return nil, errorf(codes.NotFound, "no value set with id %#x", q.GetValueSetId())
		}
		ids = []uint32{q.GetValueSetId()}
	}
	var out []*p4v1.Entity
	for _, id := range ids {
		vi := ps.schema.valueSets[id]
		e := &p4v1.ValueSetEntry{ValueSetId: id}
		members, err := ps.members(vi)
		if err != nil {
			return nil, err
		}
		for _, match := range members {
			m, err := matchProto(vi.match, match)
			if err != nil {
				return nil, err
			}
			e.Members = append(e.Members, &p4v1.ValueSetMember{Match: m})
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_ValueSetEntry{ValueSetEntry: e}})
	}
	return out, nil
}
