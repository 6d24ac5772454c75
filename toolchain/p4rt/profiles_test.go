package p4rt_test

import (
	"bytes"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ids of testdata/p4rt_profiles.p4's objects.
type profileIDs struct {
	byDst, bySrc                         uint32
	forward, drop, setSrc, setTag, noAct uint32
	dstProfile, srcSelector, customTypes uint32
}

func (h *harness) profileIDs() profileIDs {
	return profileIDs{
		byDst: h.tableID("ProfIngress.by_dst"), bySrc: h.tableID("ProfIngress.by_src"),
		forward: h.actionID("ProfIngress.forward"), drop: h.actionID("ProfIngress.drop"),
		setSrc: h.actionID("ProfIngress.set_src"), setTag: h.actionID("ProfIngress.set_tag"),
		noAct:      h.actionID("NoAction"),
		dstProfile: h.objectID("action_profile", "dst_profile"), srcSelector: h.objectID("action_profile", "src_selector"),
		customTypes: h.objectID("value_set", "custom_types"),
	}
}

func memberEntity(profile, member uint32, a *p4v1.TableAction) *p4v1.Entity {
	m := &p4v1.ActionProfileMember{ActionProfileId: profile, MemberId: member}
	if a != nil {
		m.Action = a.GetAction()
	}
	return &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: m}}
}

func gm(member uint32, weight int32) *p4v1.ActionProfileGroup_Member {
	return &p4v1.ActionProfileGroup_Member{MemberId: member, Weight: weight}
}

func groupEntity(profile, group uint32, maxSize int32, ms ...*p4v1.ActionProfileGroup_Member) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: &p4v1.ActionProfileGroup{
		ActionProfileId: profile, GroupId: group, MaxSize: maxSize, Members: ms}}}
}

func toMember(id uint32) *p4v1.TableAction {
	return &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: id}}
}

func toGroup(id uint32) *p4v1.TableAction {
	return &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileGroupId{ActionProfileGroupId: id}}
}

func valueSetEntity(id uint32, members ...[]*p4v1.FieldMatch) *p4v1.Entity {
	v := &p4v1.ValueSetEntry{ValueSetId: id}
	for _, m := range members {
		v.Members = append(v.Members, &p4v1.ValueSetMember{Match: m})
	}
	return &p4v1.Entity{Entity: &p4v1.Entity_ValueSetEntry{ValueSetEntry: v}}
}

func fields(ms ...*p4v1.FieldMatch) []*p4v1.FieldMatch { return ms }

// actionSet is a one-shot action set of the given actions, weight 1.
func actionSet(as ...*p4v1.TableAction) *p4v1.TableAction {
	set := &p4v1.ActionProfileActionSet{}
	for _, a := range as {
		set.ActionProfileActions = append(set.ActionProfileActions, &p4v1.ActionProfileAction{Action: a.GetAction(), Weight: 1})
	}
	return &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileActionSet{ActionProfileActionSet: set}}
}

var (
	mac3    = b(0, 0, 0, 0, 0, 3)
	srcMacA = b(0xaa, 0, 0, 0, 0, 0xa)
	srcMacB = b(0xbb, 0, 0, 0, 0, 0xb)
)

// TestProfileWriteCodes is one table of (setup, update, expected code)
// over action profile members and groups, entries of indirect tables and
// parser value sets: every rejection has the spec's code (§9.1, §9.2,
// §9.11), carried in the update's p4.v1.Error.
func TestProfileWriteCodes(t *testing.T) {
	h0 := readyFor(t, profileProgram)
	id := h0.profileIDs()
	ins := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_INSERT, e) }
	mod := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_MODIFY, e) }
	del := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_DELETE, e) }
	fwd := func(port byte) *p4v1.TableAction { return call(id.forward, b(port)) }
	dstMember := func(m uint32, port byte) *p4v1.Entity { return memberEntity(id.dstProfile, m, fwd(port)) }
	srcMember := func(m uint32, mac []byte) *p4v1.Entity { return memberEntity(id.srcSelector, m, call(id.setSrc, mac)) }
	byDst := func(a *p4v1.TableAction) *p4v1.TableEntry { return entry(id.byDst, 0, a, exact(1, mac2...)) }
	bySrc := func(a *p4v1.TableAction) *p4v1.TableEntry { return entry(id.bySrc, 0, a, exact(1, 7)) }
	twoSrcMembers := []*p4v1.Update{ins(srcMember(1, srcMacA)), ins(srcMember(2, srcMacB))}
	// then is base followed by more, in a new slice (rows must not share
	// a backing array).
	then := func(base []*p4v1.Update, more ...*p4v1.Update) []*p4v1.Update {
		return append(append([]*p4v1.Update{}, base...), more...)
	}
	withGroup := then(twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 0, gm(1, 1), gm(2, 1))))
	watched := gm(1, 1)
	watched.WatchKind = &p4v1.ActionProfileGroup_Member_WatchPort{WatchPort: b(1)}
	etherType := func(v ...byte) []*p4v1.FieldMatch { return fields(exact(1, v...)) }
	oneShotAB := actionSet(call(id.setSrc, srcMacA), call(id.setSrc, srcMacB))
	tags := func(vs ...byte) []*p4v1.TableAction {
		var out []*p4v1.TableAction
		for _, v := range vs {
			out = append(out, call(id.setTag, b(v)))
		}
		return out
	}
	nineActions := actionSet(tags(1, 2, 3, 4, 5, 6, 7, 8, 9)...)
	weighted := func(w int32) *p4v1.TableAction {
		a := actionSet(call(id.setTag, b(1)))
		a.GetActionProfileActionSet().ActionProfileActions[0].Weight = w
		return a
	}
	watchedSet := actionSet(call(id.setTag, b(1)))
	watchedSet.GetActionProfileActionSet().ActionProfileActions[0].WatchKind = &p4v1.ActionProfileAction_WatchPort{WatchPort: b(1)}

	tests := []struct {
		name  string
		setup []*p4v1.Update
		u     *p4v1.Update
		code  codes.Code
	}{
		// Members (§9.2.1).
		{"member insert", nil, ins(dstMember(1, 2)), codes.OK},
		{"member insert twice", []*p4v1.Update{ins(dstMember(1, 2))}, ins(dstMember(1, 3)), codes.AlreadyExists},
		{"member of profile id 0", nil, ins(memberEntity(0, 1, fwd(2))), codes.InvalidArgument},
		{"member of an unknown profile", nil, ins(memberEntity(0x7777, 1, fwd(2))), codes.NotFound},
		{"member id 0", nil, ins(dstMember(0, 2)), codes.InvalidArgument},
		{"member without an action", nil, ins(memberEntity(id.dstProfile, 1, nil)), codes.InvalidArgument},
		{"member with another table's action", nil, ins(memberEntity(id.dstProfile, 1, call(id.setSrc, srcMacA))), codes.InvalidArgument},
		{"member with a @defaultonly action", nil, ins(memberEntity(id.dstProfile, 1, call(id.noAct))), codes.PermissionDenied},
		{"member with a parameter too wide", nil, ins(memberEntity(id.dstProfile, 1, call(id.forward, b(2, 0)))), codes.OutOfRange},
		{"member with a missing parameter", nil, ins(memberEntity(id.dstProfile, 1, call(id.forward))), codes.InvalidArgument},
		{"profile full", []*p4v1.Update{ins(dstMember(1, 1)), ins(dstMember(2, 1)), ins(dstMember(3, 1)), ins(dstMember(4, 1))},
			ins(dstMember(5, 1)), codes.ResourceExhausted},
		{"member modify", []*p4v1.Update{ins(dstMember(1, 2))}, mod(dstMember(1, 3)), codes.OK},
		{"member modify to another action", []*p4v1.Update{ins(dstMember(1, 2))}, mod(memberEntity(id.dstProfile, 1, call(id.drop))), codes.OK},
		{"member modify missing", nil, mod(dstMember(1, 3)), codes.NotFound},
		{"member modify without an action", []*p4v1.Update{ins(dstMember(1, 2))}, mod(memberEntity(id.dstProfile, 1, nil)), codes.InvalidArgument},
		{"member delete", []*p4v1.Update{ins(dstMember(1, 2))}, del(memberEntity(id.dstProfile, 1, nil)), codes.OK},
		{"member delete missing", nil, del(memberEntity(id.dstProfile, 1, nil)), codes.NotFound},
		{"member delete while in a group", withGroup, del(memberEntity(id.srcSelector, 2, nil)), codes.FailedPrecondition},
		{"member delete while an entry uses it", []*p4v1.Update{ins(dstMember(1, 2)), insert(byDst(toMember(1)))},
			del(memberEntity(id.dstProfile, 1, nil)), codes.FailedPrecondition},
		{"member delete after its group shrank", then(withGroup, mod(groupEntity(id.srcSelector, 1, 0, gm(1, 1)))),
			del(memberEntity(id.srcSelector, 2, nil)), codes.OK},
		{"member delete after its entry moved", []*p4v1.Update{ins(dstMember(1, 2)), ins(dstMember(2, 3)), insert(byDst(toMember(1))), modify(byDst(toMember(2)))},
			del(memberEntity(id.dstProfile, 1, nil)), codes.OK},
		{"member delete after its entry went", []*p4v1.Update{ins(dstMember(1, 2)), insert(byDst(toMember(1))), remove(byDst(nil))},
			del(memberEntity(id.dstProfile, 1, nil)), codes.OK},

		// Groups (§9.2.2).
		{"group insert", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 0, gm(1, 1), gm(2, 1))), codes.OK},
		{"empty group", nil, ins(groupEntity(id.srcSelector, 1, 0)), codes.OK},
		{"group insert twice", withGroup, ins(groupEntity(id.srcSelector, 1, 0, gm(1, 1))), codes.AlreadyExists},
		{"group of a profile without selector", []*p4v1.Update{ins(dstMember(1, 2))}, ins(groupEntity(id.dstProfile, 1, 0, gm(1, 1))), codes.InvalidArgument},
		{"group of an unknown profile", nil, ins(groupEntity(0x7777, 1, 0)), codes.NotFound},
		{"group id 0", twoSrcMembers, ins(groupEntity(id.srcSelector, 0, 0, gm(1, 1))), codes.InvalidArgument},
		{"group with an unknown member", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 0, gm(1, 1), gm(9, 1))), codes.NotFound},
		{"group with weight 0", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 0, gm(1, 0))), codes.InvalidArgument},
		{"group with a negative weight", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 0, gm(1, -1))), codes.InvalidArgument},
		{"group with weight 2", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 0, gm(1, 2))), codes.Unimplemented},
		{"group with a watch port", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 0, watched)), codes.Unimplemented},
		{"group lists a member twice", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 0, gm(1, 1), gm(1, 1))), codes.InvalidArgument},
		{"group negative max_size", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, -1, gm(1, 1))), codes.InvalidArgument},
		{"group over its max_size", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 1, gm(1, 1), gm(2, 1))), codes.ResourceExhausted},
		{"group max_size past the profile", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 9, gm(1, 1))), codes.ResourceExhausted},
		{"group max_size at the profile", twoSrcMembers, ins(groupEntity(id.srcSelector, 1, 8, gm(1, 1))), codes.OK},
		{"group modify", withGroup, mod(groupEntity(id.srcSelector, 1, 0, gm(2, 1))), codes.OK},
		{"group modify changes max_size", withGroup, mod(groupEntity(id.srcSelector, 1, 4, gm(2, 1))), codes.InvalidArgument},
		{"group modify missing", twoSrcMembers, mod(groupEntity(id.srcSelector, 1, 0, gm(2, 1))), codes.NotFound},
		{"group modify with an unknown member", withGroup, mod(groupEntity(id.srcSelector, 1, 0, gm(5, 1))), codes.NotFound},
		{"group delete", withGroup, del(groupEntity(id.srcSelector, 1, 0)), codes.OK},
		{"group delete missing", nil, del(groupEntity(id.srcSelector, 1, 0)), codes.NotFound},
		{"group delete while an entry uses it", then(withGroup, insert(bySrc(toGroup(1)))), del(groupEntity(id.srcSelector, 1, 0)), codes.FailedPrecondition},

		// Entries of indirect tables (§9.1.2).
		{"entry to a member", []*p4v1.Update{ins(dstMember(1, 2))}, insert(byDst(toMember(1))), codes.OK},
		{"entry to a group", withGroup, insert(bySrc(toGroup(1))), codes.OK},
		{"selector entry to a member", twoSrcMembers, insert(bySrc(toMember(2))), codes.OK},
		{"entry with a direct action", nil, insert(byDst(fwd(2))), codes.InvalidArgument},
		{"entry to a group without selector", nil, insert(byDst(toGroup(1))), codes.InvalidArgument},
		{"entry to an unknown member", nil, insert(byDst(toMember(3))), codes.NotFound},
		{"entry to member 0", nil, insert(byDst(toMember(0))), codes.InvalidArgument},
		{"entry to an unknown group", twoSrcMembers, insert(bySrc(toGroup(4))), codes.NotFound},
		{"entry to group 0", twoSrcMembers, insert(bySrc(toGroup(0))), codes.InvalidArgument},
		{"entry without action", nil, insert(byDst(nil)), codes.InvalidArgument},

		// One-shot action sets (§9.2.3).
		{"one-shot", nil, insert(bySrc(oneShotAB)), codes.OK},
		{"one-shot modify", []*p4v1.Update{insert(bySrc(oneShotAB))}, modify(bySrc(actionSet(call(id.setTag, b(1))))), codes.OK},
		{"one-shot after manual members", twoSrcMembers, insert(bySrc(oneShotAB)), codes.InvalidArgument},
		{"member after a one-shot", []*p4v1.Update{insert(bySrc(oneShotAB))}, ins(srcMember(1, srcMacA)), codes.InvalidArgument},
		{"group after a one-shot", []*p4v1.Update{insert(bySrc(oneShotAB))}, ins(groupEntity(id.srcSelector, 1, 0)), codes.InvalidArgument},
		{"member once the one-shot entry went", []*p4v1.Update{insert(bySrc(oneShotAB)), remove(bySrc(nil))}, ins(srcMember(1, srcMacA)), codes.OK},
		{"one-shot on a profile without selector", nil, insert(byDst(actionSet(fwd(2)))), codes.InvalidArgument},
		{"one-shot empty", nil, insert(bySrc(actionSet())), codes.InvalidArgument},
		{"one-shot with another table's action", nil, insert(bySrc(actionSet(fwd(2)))), codes.InvalidArgument},
		{"one-shot weight 0", nil, insert(bySrc(weighted(0))), codes.InvalidArgument},
		{"one-shot weight 3", nil, insert(bySrc(weighted(3))), codes.Unimplemented},
		{"one-shot watch port", nil, insert(bySrc(watchedSet)), codes.Unimplemented},
		{"one-shot past the profile size", nil, insert(bySrc(nineActions)), codes.ResourceExhausted},
		{"one-shots past the profile size", []*p4v1.Update{insert(bySrc(actionSet(tags(1, 2, 3, 4, 5)...)))},
			insert(entry(id.bySrc, 0, actionSet(tags(6, 7, 8, 9)...), exact(1, 8))), codes.ResourceExhausted},
		{"entry modify to another member", []*p4v1.Update{ins(dstMember(1, 2)), ins(dstMember(2, 3)), insert(byDst(toMember(1)))},
			modify(byDst(toMember(2))), codes.OK},
		{"entry modify to an unknown member", []*p4v1.Update{ins(dstMember(1, 2)), insert(byDst(toMember(1)))},
			modify(byDst(toMember(2))), codes.NotFound},
		{"entry modify to a direct action", []*p4v1.Update{ins(dstMember(1, 2)), insert(byDst(toMember(1)))},
			modify(byDst(fwd(3))), codes.InvalidArgument},
		{"entry insert twice", []*p4v1.Update{ins(dstMember(1, 2)), insert(byDst(toMember(1)))}, insert(byDst(toMember(1))), codes.AlreadyExists},
		{"default entry of an indirect table", []*p4v1.Update{ins(dstMember(1, 2))},
			modify(&p4v1.TableEntry{TableId: id.byDst, IsDefaultAction: true, Action: toMember(1)}), codes.InvalidArgument},
		{"default entry reset of an indirect table", nil,
			modify(&p4v1.TableEntry{TableId: id.bySrc, IsDefaultAction: true}), codes.InvalidArgument},

		// Parser value sets (§9.11).
		{"value set modify", nil, mod(valueSetEntity(id.customTypes, etherType(0x88, 0xb5), etherType(0x12, 0x34))), codes.OK},
		{"value set emptied", nil, mod(valueSetEntity(id.customTypes)), codes.OK},
		{"value set full", nil, mod(valueSetEntity(id.customTypes, etherType(1), etherType(2), etherType(3), etherType(4), etherType(5))), codes.ResourceExhausted},
		{"value set at its size", nil, mod(valueSetEntity(id.customTypes, etherType(1), etherType(2), etherType(3), etherType(4))), codes.OK},
		{"value set insert", nil, ins(valueSetEntity(id.customTypes, etherType(1))), codes.InvalidArgument},
		{"value set delete", nil, del(valueSetEntity(id.customTypes)), codes.InvalidArgument},
		{"value set id 0", nil, mod(valueSetEntity(0, etherType(1))), codes.InvalidArgument},
		{"unknown value set", nil, mod(valueSetEntity(0x7777, etherType(1))), codes.NotFound},
		{"value set duplicate member", nil, mod(valueSetEntity(id.customTypes, etherType(0x88, 0xb5), etherType(0, 0x88, 0xb5))), codes.AlreadyExists},
		{"value set unknown field", nil, mod(valueSetEntity(id.customTypes, fields(exact(2, 1)))), codes.InvalidArgument},
		{"value set missing exact field", nil, mod(valueSetEntity(id.customTypes, fields())), codes.InvalidArgument},
		{"value set wrong match kind", nil, mod(valueSetEntity(id.customTypes, fields(ternary(1, b(1), b(0xff))))), codes.InvalidArgument},
		{"value set value too wide", nil, mod(valueSetEntity(id.customTypes, etherType(1, 0, 0))), codes.OutOfRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := readyFor(t, profileProgram)
			if len(tc.setup) > 0 {
				h.mustWrite(tc.setup...)
			}
			cs, err := h.write(tc.u)
			if err != nil {
				t.Fatalf("write failed as a whole: %v", err)
			}
			if cs[0] != tc.code {
				t.Fatalf("code %v, want %v", cs[0], tc.code)
			}
		})
	}
}

// A batch mixing good and bad profile updates: one p4.v1.Error per update
// in order, the good ones applied.
func TestProfileBatch(t *testing.T) {
	h := readyFor(t, profileProgram)
	id := h.profileIDs()
	cs, err := h.write(
		update(p4v1.Update_INSERT, memberEntity(id.srcSelector, 1, call(id.setSrc, srcMacA))),
		update(p4v1.Update_INSERT, groupEntity(id.srcSelector, 1, 0, gm(1, 1), gm(2, 1))), // member 2 not yet
		update(p4v1.Update_INSERT, memberEntity(id.srcSelector, 2, call(id.setSrc, srcMacB))),
		update(p4v1.Update_INSERT, groupEntity(id.srcSelector, 1, 0, gm(1, 1), gm(2, 1))),
		update(p4v1.Update_DELETE, memberEntity(id.srcSelector, 1, nil)),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []codes.Code{codes.OK, codes.NotFound, codes.OK, codes.OK, codes.FailedPrecondition}
	for i := range want {
		if cs[i] != want[i] {
			t.Errorf("update %d: %v, want %v", i, cs[i], want[i])
		}
	}
	got, err := h.read(groupEntity(id.srcSelector, 1, 0))
	if err != nil || len(got) != 1 || len(got[0].GetActionProfileGroup().GetMembers()) != 2 {
		t.Fatalf("group read back %v (%v), want group 1 with 2 members", got, err)
	}
}

// Reads return what was written, with the spec's wildcards: every member
// (group) of one profile, of all profiles; entries of indirect tables
// carry their member or group id; value sets their members.
func TestProfileReadBack(t *testing.T) {
	h := readyFor(t, profileProgram)
	id := h.profileIDs()
	ins := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_INSERT, e) }
	dst1 := memberEntity(id.dstProfile, 1, call(id.forward, b(2)))
	dst2 := memberEntity(id.dstProfile, 2, call(id.drop))
	src5 := memberEntity(id.srcSelector, 5, call(id.setSrc, srcMacA))
	src6 := memberEntity(id.srcSelector, 6, call(id.setTag, b(9)))
	grp := groupEntity(id.srcSelector, 3, 4, gm(6, 1), gm(5, 1))
	e1 := entry(id.byDst, 0, toMember(2), exact(1, 2)) // canonical: read back as written
	e2 := entry(id.bySrc, 0, toGroup(3), exact(1, 7))
	e3 := entry(id.bySrc, 0, toMember(5), exact(1, 8))
	vs := valueSetEntity(id.customTypes, fields(exact(1, 0x88, 0xb5)), fields(exact(1, 0x12, 0x34)))
	h.mustWrite(ins(dst1), ins(dst2), ins(src5), ins(src6), ins(grp), insert(e1), insert(e2), insert(e3),
		update(p4v1.Update_MODIFY, vs))

	tests := []struct {
		name  string
		query *p4v1.Entity
		want  []*p4v1.Entity
	}{
		// Profiles in id order: src_selector's id is the smaller.
		{"all members", memberEntity(0, 0, nil), []*p4v1.Entity{src5, src6, dst1, dst2}},
		{"members of one profile", memberEntity(id.srcSelector, 0, nil), []*p4v1.Entity{src5, src6}},
		{"one member", memberEntity(id.dstProfile, 2, nil), []*p4v1.Entity{dst2}},
		{"all groups", groupEntity(0, 0, 0), []*p4v1.Entity{grp}},
		{"groups of a profile without selector", groupEntity(id.dstProfile, 0, 0), nil},
		{"one group", groupEntity(id.srcSelector, 3, 0), []*p4v1.Entity{grp}},
		{"entries of an action profile table", tableEntity(&p4v1.TableEntry{TableId: id.byDst}), []*p4v1.Entity{tableEntity(e1)}},
		{"entries of a selector table", tableEntity(&p4v1.TableEntry{TableId: id.bySrc}), []*p4v1.Entity{tableEntity(e2), tableEntity(e3)}},
		{"entries filtered by group", tableEntity(&p4v1.TableEntry{TableId: id.bySrc, Action: toGroup(3)}), []*p4v1.Entity{tableEntity(e2)}},
		{"one value set", valueSetEntity(id.customTypes), []*p4v1.Entity{vs}},
		{"all value sets", valueSetEntity(0), []*p4v1.Entity{vs}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.read(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("read %d entities, want %d: %v", len(got), len(tc.want), got)
			}
			for i := range got {
				if !proto.Equal(got[i], tc.want[i]) {
					t.Errorf("entity %d:\n got %v\nwant %v", i, got[i], tc.want[i])
				}
			}
		})
	}

	for _, q := range []*p4v1.Entity{
		memberEntity(id.dstProfile, 9, nil), memberEntity(0x7777, 0, nil),
		groupEntity(id.srcSelector, 9, 0), groupEntity(0x7777, 0, 0), valueSetEntity(0x7777),
	} {
		if _, err := h.read(q); codeOfReadError(t, err) != codes.NotFound {
			t.Errorf("read %v: %v, want NOT_FOUND", q, err)
		}
	}
}

// codeOfReadError is the per-entity code of a failed one-entity read.
func codeOfReadError(t *testing.T, err error) codes.Code {
	t.Helper()
	if err == nil {
		return codes.OK
	}
	st := status.Convert(err)
	if st.Code() != codes.Unknown || len(st.Details()) != 1 {
		t.Fatalf("read error %v has no single p4.v1.Error", err)
	}
	pe, ok := st.Details()[0].(*p4v1.Error)
	if !ok {
		t.Fatalf("detail %T is not a p4.v1.Error", st.Details()[0])
	}
	return codes.Code(pe.GetCanonicalCode())
}

// profileFrame is an Ethernet frame to dst with the given EtherType and,
// when flow is set, the test program's custom header (flow, tag 7).
func profileFrame(dst []byte, etherType uint16, flow int) []byte {
	f := append(append([]byte{}, dst...), 0, 0, 0, 0, 0, 1, byte(etherType>>8), byte(etherType))
	if flow >= 0 {
		f = append(f, byte(flow>>8), byte(flow), 7)
	}
	return append(f, make([]byte, 40)...)
}

// TestProfilesForward checks that packets take the member's or group's
// action through the engine: a member sets the port, modifying the member
// moves the traffic, the value set decides whether the custom header is
// parsed, and a group's selector spreads flows over its members.
func TestProfilesForward(t *testing.T) {
	h := readyFor(t, profileProgram)
	id := h.profileIDs()
	ins := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_INSERT, e) }
	mod := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_MODIFY, e) }
	send := func(frame []byte) {
		t.Helper()
		if err := h.target.Send(1, frame); err != nil {
			t.Fatal(err)
		}
	}
	expectOn := func(port uint32) [][]byte {
		t.Helper()
		for _, p := range []uint32{0, 2, 3} {
			got := h.target.Received(p)
			if p == port && len(got) == 0 {
				t.Fatalf("no frame out of port %d", port)
			}
			if p != port && len(got) != 0 {
				t.Fatalf("%d frame(s) out of port %d, want them on %d", len(got), p, port)
			}
			if p == port {
				return got
			}
		}
		return nil
	}

	h.mustWrite(ins(memberEntity(id.dstProfile, 1, call(id.forward, b(2)))),
		ins(memberEntity(id.dstProfile, 2, call(id.forward, b(3)))),
		insert(entry(id.byDst, 0, toMember(1), exact(1, mac2...))))
	send(profileFrame(mac2, 0x0800, -1))
	expectOn(2)
	h.mustWrite(mod(memberEntity(id.dstProfile, 1, call(id.forward, b(3)))))
	send(profileFrame(mac2, 0x0800, -1))
	expectOn(3)
	h.mustWrite(modify(entry(id.byDst, 0, toMember(2), exact(1, mac2...))),
		mod(memberEntity(id.dstProfile, 1, call(id.forward, b(0)))))
	send(profileFrame(mac2, 0x0800, -1))
	expectOn(3)

	// Selector: tag 7 goes to group 1 (set_src A or B by the flow's hash).
	h.mustWrite(ins(memberEntity(id.srcSelector, 1, call(id.setSrc, srcMacA))),
		ins(memberEntity(id.srcSelector, 2, call(id.setSrc, srcMacB))),
		ins(groupEntity(id.srcSelector, 1, 0, gm(1, 1), gm(2, 1))),
		insert(entry(id.bySrc, 0, toGroup(1), exact(1, 7))))
	srcOf := func(frame []byte) []byte { return frame[6:12] }
	// Not in the value set yet: the custom header is not parsed, by_src
	// does not apply, the source stays.
	send(profileFrame(mac2, 0x88b5, 1))
	if got := expectOn(3); !bytes.Equal(srcOf(got[0]), b(0, 0, 0, 0, 0, 1)) {
		t.Fatalf("source %x changed before the value set held the EtherType", srcOf(got[0]))
	}
	h.mustWrite(mod(valueSetEntity(id.customTypes, fields(exact(1, 0x88, 0xb5)))))
	seen := map[string]int{}
	for flow := 0; flow < 32; flow++ {
		send(profileFrame(mac2, 0x88b5, flow))
		got := expectOn(3)
		seen[string(srcOf(got[0]))]++
	}
	if len(seen) != 2 || seen[string(srcMacA)] == 0 || seen[string(srcMacB)] == 0 {
		t.Fatalf("32 flows through a 2-member group set sources %x, want both members used", seen)
	}
	// One member left: every flow takes it.
	h.mustWrite(mod(groupEntity(id.srcSelector, 1, 0, gm(2, 1))))
	for flow := 0; flow < 8; flow++ {
		send(profileFrame(mac2, 0x88b5, flow))
		if got := expectOn(3); !bytes.Equal(srcOf(got[0]), srcMacB) {
			t.Fatalf("flow %d: source %x, want the only member's %x", flow, srcOf(got[0]), srcMacB)
		}
	}
	// Emptying the value set stops the parse again.
	h.mustWrite(mod(valueSetEntity(id.customTypes)))
	send(profileFrame(mac2, 0x88b5, 3))
	if got := expectOn(3); !bytes.Equal(srcOf(got[0]), b(0, 0, 0, 0, 0, 1)) {
		t.Fatalf("source %x changed after the value set was emptied", srcOf(got[0]))
	}
}

// TestOneShot programs a selector table with one-shot action sets: they
// read back as written, hide their members and group, spread flows over
// their actions, and leave nothing behind once the entry is gone.
func TestOneShot(t *testing.T) {
	h := readyFor(t, profileProgram)
	id := h.profileIDs()
	h.mustWrite(update(p4v1.Update_MODIFY, valueSetEntity(id.customTypes, fields(exact(1, 0x88, 0xb5)))),
		update(p4v1.Update_INSERT, memberEntity(id.dstProfile, 1, call(id.forward, b(2)))),
		insert(entry(id.byDst, 0, toMember(1), exact(1, 2))))
	e := entry(id.bySrc, 0, actionSet(call(id.setSrc, srcMacA), call(id.setSrc, srcMacB)), exact(1, 7))
	h.mustWrite(insert(e))

	got, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.bySrc}))
	if err != nil || len(got) != 1 || !proto.Equal(got[0], tableEntity(e)) {
		t.Fatalf("read back %v (%v), want %v", got, err, e)
	}
	if got, err := h.read(memberEntity(id.srcSelector, 0, nil), groupEntity(id.srcSelector, 0, 0)); err != nil || len(got) != 0 {
		t.Fatalf("the one-shot's members and group show in reads: %v (%v)", got, err)
	}

	sources := func(flows int) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for flow := 0; flow < flows; flow++ {
			if err := h.target.Send(1, profileFrame(mac2, 0x88b5, flow)); err != nil {
				t.Fatal(err)
			}
			out := h.target.Received(2)
			if len(out) != 1 {
				t.Fatalf("flow %d: %d frames out of port 2, want 1", flow, len(out))
			}
			seen[string(out[0][6:12])]++
		}
		return seen
	}
	if seen := sources(32); len(seen) != 2 || seen[string(srcMacA)] == 0 || seen[string(srcMacB)] == 0 {
		t.Fatalf("32 flows through a 2-action one-shot set sources %x, want both", seen)
	}
	h.mustWrite(modify(entry(id.bySrc, 0, actionSet(call(id.setSrc, srcMacB)), exact(1, 7))))
	if seen := sources(8); len(seen) != 1 || seen[string(srcMacB)] != 8 {
		t.Fatalf("after MODIFY to one action, sources %x, want all %x", seen, srcMacB)
	}

	// Once the entry is gone the profile is free for members, all 8 of
	// them: the one-shot's members left the engine too.
	h.mustWrite(remove(entry(id.bySrc, 0, nil, exact(1, 7))))
	var ms []*p4v1.Update
	for m := uint32(1); m <= 8; m++ {
		ms = append(ms, update(p4v1.Update_INSERT, memberEntity(id.srcSelector, m, call(id.setTag, b(byte(m))))))
	}
	h.mustWrite(ms...)
}

// TestReconcileKeepsProfiles: RECONCILE_AND_COMMIT with the same program
// keeps members, groups, indirect entries (by id and one-shot) and value
// sets, in reads and in forwarding.
func TestReconcileKeepsProfiles(t *testing.T) {
	h := readyFor(t, profileProgram)
	id := h.profileIDs()
	ins := func(e *p4v1.Entity) *p4v1.Update { return update(p4v1.Update_INSERT, e) }
	h.mustWrite(ins(memberEntity(id.dstProfile, 1, call(id.forward, b(2)))),
		ins(memberEntity(id.dstProfile, 2, call(id.forward, b(3)))),
		ins(memberEntity(id.srcSelector, 4, call(id.setSrc, srcMacA))),
		ins(memberEntity(id.srcSelector, 5, call(id.setSrc, srcMacB))),
		ins(groupEntity(id.srcSelector, 9, 2, gm(5, 1), gm(4, 1))),
		insert(entry(id.byDst, 0, toMember(2), exact(1, 2))),
		insert(entry(id.bySrc, 0, toGroup(9), exact(1, 7))),
		update(p4v1.Update_MODIFY, valueSetEntity(id.customTypes, fields(exact(1, 0x88, 0xb5)))))
	everything := []*p4v1.Entity{memberEntity(0, 0, nil), groupEntity(0, 0, 0),
		tableEntity(&p4v1.TableEntry{}), valueSetEntity(0)}
	reconcileSame := func() {
		t.Helper()
		before, err := h.read(everything...)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
			t.Fatal(err)
		}
		after, err := h.read(everything...)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Fatalf("after reconcile %d entities, before %d:\n%v\n%v", len(after), len(before), after, before)
		}
		for i := range before {
			if !proto.Equal(before[i], after[i]) {
				t.Errorf("entity %d changed:\n got %v\nwant %v", i, after[i], before[i])
			}
		}
	}
	srcs := func() map[string]int {
		t.Helper()
		seen := map[string]int{}
		for flow := 0; flow < 32; flow++ {
			if err := h.target.Send(1, profileFrame(mac2, 0x88b5, flow)); err != nil {
				t.Fatal(err)
			}
			out := h.target.Received(3)
			if len(out) != 1 {
				t.Fatalf("flow %d: %d frames out of port 3 (member 2), want 1", flow, len(out))
			}
			seen[string(out[0][6:12])]++
		}
		return seen
	}
	reconcileSame()
	if seen := srcs(); len(seen) != 2 {
		t.Fatalf("after reconcile the group set sources %x, want both members'", seen)
	}
	// The references survived too: member 4 is still in group 9.
	if cs, err := h.write(update(p4v1.Update_DELETE, memberEntity(id.srcSelector, 4, nil))); err != nil || cs[0] != codes.FailedPrecondition {
		t.Fatalf("deleting a member of a reconciled group: %v %v, want FAILED_PRECONDITION", cs, err)
	}

	// Now with a one-shot set on the selector.
	h.mustWrite(remove(entry(id.bySrc, 0, nil, exact(1, 7))),
		update(p4v1.Update_DELETE, groupEntity(id.srcSelector, 9, 0)),
		update(p4v1.Update_DELETE, memberEntity(id.srcSelector, 4, nil)),
		update(p4v1.Update_DELETE, memberEntity(id.srcSelector, 5, nil)),
		insert(entry(id.bySrc, 0, actionSet(call(id.setSrc, srcMacA), call(id.setSrc, srcMacB)), exact(1, 7))))
	reconcileSame()
	if seen := srcs(); len(seen) != 2 {
		t.Fatalf("after reconcile the one-shot set sources %x, want both actions'", seen)
	}
}
