package p4rt

import (
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Action profiles and selectors (spec §9.2). The server keeps members and
// groups as written, for reads and for the reference rules, and applies
// them to the engine with the client's ids: members and groups live in
// separate id spaces per profile, as the engine keeps them.

// profile resolves an action_profile_id of a write.
func (ps *pipelineState) profile(id uint32) (*profileInfo, *profileState, error) {
	if id == 0 {
		return nil, nil, invalid("action profile id 0 is only allowed as a read wildcard")
	}
	p, ok := ps.schema.profiles[id]
	if !ok {
		return nil, nil, errorf(codes.NotFound, "no action profile with id %#x", id)
	}
	if p.missing {
		return nil, nil, errorf(codes.Unimplemented, "action profile %q is not in the device config", p.name)
	}
	return p, ps.profiles[id], nil
}

// memberAction validates a member's action: one of the actions of the
// tables the profile implements (spec §9.2.1), never a @defaultonly one.
func (ps *pipelineState) memberAction(p *profileInfo, a *p4v1.Action) (boundAction, error) {
	if a == nil {
		return boundAction{}, invalid("action profile %q: the member needs an action", p.name)
	}
	if len(p.tables) == 0 {
		return boundAction{}, invalid("action profile %q implements no table, so it has no actions", p.name)
	}
	return ps.schema.parseAction(p.tables[0], a, false)
}

func (ps *pipelineState) writeProfileMember(typ p4v1.Update_Type, m *p4v1.ActionProfileMember) error {
	p, st, err := ps.profile(m.GetActionProfileId())
	if err != nil {
		return err
	}
	if typ == p4v1.Update_INSERT && len(st.internal.groups) > 0 {
		return invalid("action profile %q is programmed with one-shot action sets; it cannot also take members", p.name)
	}
	id := m.GetMemberId()
	if id == 0 {
		return invalid("action profile %q: member id 0 is not allowed", p.name)
	}
	old := st.members[id]
	switch typ {
	case p4v1.Update_INSERT:
		if old != nil {
			return errorf(codes.AlreadyExists, "action profile %q already has member %d", p.name, id)
		}
		act, err := ps.memberAction(p, m.GetAction())
		if err != nil {
			return err
		}
		if p.size > 0 && int64(len(st.members)) >= p.size {
			return errorf(codes.ResourceExhausted, "action profile %q is full (%d members)", p.name, p.size)
		}
		name, args := ps.schema.engineArgs(act)
		if err := ps.ctl.SetProfileMember(p.name, id, name, args); err != nil {
			return engineErr("adding the member", err)
		}
		st.members[id] = &memberState{}
		return nil
	case p4v1.Update_MODIFY:
		if old == nil {
			return errorf(codes.NotFound, "action profile %q has no member %d", p.name, id)
		}
		act, err := ps.memberAction(p, m.GetAction())
		if err != nil {
			return err
		}
		name, args := ps.schema.engineArgs(act)
		if err := ps.ctl.SetProfileMember(p.name, id, name, args); err != nil {
			return engineErr("modifying the member", err)
		}
		return nil
	default: // DELETE
		if old == nil {
			return errorf(codes.NotFound, "action profile %q has no member %d", p.name, id)
		}
		if old.inGroups > 0 {
			return errorf(codes.FailedPrecondition, "action profile %q: member %d is in %d group(s); remove it from them first", p.name, id, old.inGroups)
		}
		if old.inTables > 0 {
			return errorf(codes.FailedPrecondition, "action profile %q: member %d is the action of %d table entr(ies)", p.name, id, old.inTables)
		}
		if err := ps.ctl.DeleteProfileMember(p.name, id); err != nil {
			return engineErr("deleting the member", err)
		}
		delete(st.members, id)
		return nil
	}
}

// groupLimit is the most members group g may hold (spec §9.2.2, rules on
// max_size): its own max_size, else the profile's max_group_size, else
// the profile's size (a group cannot list more distinct members than the
// profile holds); 0 means no limit.
func groupLimit(p *profileInfo, maxSize int32) int64 {
	switch {
	case maxSize > 0:
		return int64(maxSize)
	case p.maxGroupSize > 0:
		return int64(p.maxGroupSize)
	}
	return p.size
}

// checkGroupMembers validates a group's member list. Weights: the engine
// picks a group's members with equal probability, so only weight 1 can be
// honoured; watch ports need port liveness, which the engine does not
// track.
func (ps *pipelineState) checkGroupMembers(p *profileInfo, st *profileState, g *p4v1.ActionProfileGroup) ([]uint32, error) {
	ids := make([]uint32, 0, len(g.GetMembers()))
	seen := map[uint32]bool{}
	for _, m := range g.GetMembers() {
		if m == nil {
			return nil, invalid("action profile %q group %d: empty member", p.name, g.GetGroupId())
		}
		if m.GetWeight() <= 0 {
			return nil, invalid("action profile %q group %d: member %d has weight %d; weights must be positive", p.name, g.GetGroupId(), m.GetMemberId(), m.GetWeight())
		}
		if m.GetWeight() != 1 {
			return nil, errorf(codes.Unimplemented, "action profile %q group %d: member %d has weight %d; terrapin-switch selects members with equal weight, so only weight 1 is supported", p.name, g.GetGroupId(), m.GetMemberId(), m.GetWeight())
		}
		if m.GetWatchKind() != nil {
			return nil, errorf(codes.Unimplemented, "action profile %q group %d: watch ports are not supported by terrapin-switch", p.name, g.GetGroupId())
		}
		if seen[m.GetMemberId()] {
			return nil, invalid("action profile %q group %d lists member %d twice (use weight instead)", p.name, g.GetGroupId(), m.GetMemberId())
		}
		seen[m.GetMemberId()] = true
		ids = append(ids, m.GetMemberId())
	}
	for _, id := range ids {
		if st.members[id] == nil {
			return nil, errorf(codes.NotFound, "action profile %q has no member %d", p.name, id)
		}
	}
	if lim := groupLimit(p, g.GetMaxSize()); lim > 0 && int64(len(ids)) > lim {
		return nil, errorf(codes.ResourceExhausted, "action profile %q group %d: %d members, the group holds at most %d", p.name, g.GetGroupId(), len(ids), lim)
	}
	return ids, nil
}

func (ps *pipelineState) writeProfileGroup(typ p4v1.Update_Type, g *p4v1.ActionProfileGroup) error {
	p, st, err := ps.profile(g.GetActionProfileId())
	if err != nil {
		return err
	}
	if !p.selector {
		return invalid("action profile %q has no selector, so it has no groups", p.name)
	}
	if typ == p4v1.Update_INSERT && len(st.internal.groups) > 0 {
		return invalid("action profile %q is programmed with one-shot action sets; it cannot also take groups", p.name)
	}
	id := g.GetGroupId()
	if id == 0 {
		return invalid("action profile %q: group id 0 is not allowed", p.name)
	}
	old := st.groups[id]
	if typ == p4v1.Update_DELETE {
		if old == nil {
			return errorf(codes.NotFound, "action profile %q has no group %d", p.name, id)
		}
		if old.inTables > 0 {
			return errorf(codes.FailedPrecondition, "action profile %q: group %d is the action of %d table entr(ies)", p.name, id, old.inTables)
		}
		if err := ps.ctl.DeleteProfileGroup(p.name, id); err != nil {
			return engineErr("deleting the group", err)
		}
		st.setGroupMembers(old, nil)
		delete(st.groups, id)
		return nil
	}
	if typ == p4v1.Update_INSERT && old != nil {
		return errorf(codes.AlreadyExists, "action profile %q already has group %d", p.name, id)
	}
	if typ == p4v1.Update_MODIFY {
		if old == nil {
			return errorf(codes.NotFound, "action profile %q has no group %d", p.name, id)
		}
		if g.GetMaxSize() != old.maxSize {
			return invalid("action profile %q group %d: max_size %d differs from the %d it was inserted with", p.name, id, g.GetMaxSize(), old.maxSize)
		}
	}
	if g.GetMaxSize() < 0 {
		return invalid("action profile %q group %d: negative max_size", p.name, id)
	}
	if p.maxGroupSize > 0 && g.GetMaxSize() > p.maxGroupSize {
		return invalid("action profile %q group %d: max_size %d exceeds the profile's max_group_size %d", p.name, id, g.GetMaxSize(), p.maxGroupSize)
	}
	if p.maxGroupSize == 0 && p.size > 0 && int64(g.GetMaxSize()) > p.size {
		return errorf(codes.ResourceExhausted, "action profile %q group %d: max_size %d exceeds the %d members the profile holds", p.name, id, g.GetMaxSize(), p.size)
	}
	ids, err := ps.checkGroupMembers(p, st, g)
	if err != nil {
		return err
	}
	if err := ps.ctl.SetProfileGroup(p.name, id, ids); err != nil {
		return engineErr("setting the group", err)
	}
	gs := old
	if gs == nil {
		gs = &groupState{maxSize: g.GetMaxSize()}
		st.groups[id] = gs
	}
	members := make([]*p4v1.ActionProfileGroup_Member, len(ids))
	for i, m := range g.GetMembers() {
		members[i] = &p4v1.ActionProfileGroup_Member{MemberId: m.GetMemberId(), Weight: m.GetWeight()}
	}
	st.setGroupMembers(gs, members)
	return nil
}

// setGroupMembers replaces g's members, keeping the members' counts of
// the groups that list them.
func (st *profileState) setGroupMembers(g *groupState, members []*p4v1.ActionProfileGroup_Member) {
	for _, m := range g.members {
		if ms := st.members[m.GetMemberId()]; ms != nil {
			ms.inGroups--
		}
	}
	g.members = members
	for _, m := range g.members {
		if ms := st.members[m.GetMemberId()]; ms != nil {
			ms.inGroups++
		}
	}
}

// indirectRef validates the action of an entry of indirect table t: a
// member or a group of its profile (spec §9.1.2, §9.2).
func (ps *pipelineState) indirectRef(t *tableInfo, ta *p4v1.TableAction) (pipeline.IndirectRef, error) {
	p := t.profile
	st := ps.profiles[p.id]
	switch x := ta.GetType().(type) {
	case *p4v1.TableAction_ActionProfileMemberId:
		if x.ActionProfileMemberId == 0 {
			return pipeline.IndirectRef{}, invalid("table %q: member id 0 is not allowed", t.name)
		}
		if st.members[x.ActionProfileMemberId] == nil {
			return pipeline.IndirectRef{}, errorf(codes.NotFound, "table %q: action profile %q has no member %d", t.name, p.name, x.ActionProfileMemberId)
		}
		return pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: x.ActionProfileMemberId}, nil
	case *p4v1.TableAction_ActionProfileGroupId:
		if !p.selector {
			return pipeline.IndirectRef{}, invalid("table %q: action profile %q has no selector, so entries name members, not groups", t.name, p.name)
		}
		if x.ActionProfileGroupId == 0 {
			return pipeline.IndirectRef{}, invalid("table %q: group id 0 is not allowed", t.name)
		}
		if st.groups[x.ActionProfileGroupId] == nil {
			return pipeline.IndirectRef{}, errorf(codes.NotFound, "table %q: action profile %q has no group %d", t.name, p.name, x.ActionProfileGroupId)
		}
		return pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: x.ActionProfileGroupId}, nil
	case *p4v1.TableAction_Action:
		return pipeline.IndirectRef{}, invalid("table %q uses action profile %q: an entry names a member or a group, not an action", t.name, p.name)
	default:
		return pipeline.IndirectRef{}, invalid("table %q: the entry's action is empty", t.name)
	}
}

// resolveIndirect resolves the action of an entry of indirect table t: a
// member or group of its profile, or a one-shot action set, which it
// programs (the caller releases it if the entry is not written).
func (ps *pipelineState) resolveIndirect(t *tableInfo, ta *p4v1.TableAction) (pipeline.IndirectRef, *oneShot, error) {
	if x, ok := ta.GetType().(*p4v1.TableAction_ActionProfileActionSet); ok {
		os, err := ps.buildOneShot(t, x.ActionProfileActionSet)
		if err != nil {
			return pipeline.IndirectRef{}, nil, err
		}
		return pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: os.group}, os, nil
	}
	ref, err := ps.indirectRef(t, ta)
	return ref, nil, err
}

// dropOneShot releases an entry's one-shot members and group, if any.
func (ps *pipelineState) dropOneShot(t *tableInfo, os *oneShot) {
	if os != nil {
		ps.releaseOneShot(t.profile, os)
	}
}

// reference counts an entry's use of a member or group (delta +1, -1).
func (ps *pipelineState) reference(t *tableInfo, ref *pipeline.IndirectRef, delta int) {
	if ref == nil || t.profile == nil {
		return
	}
	st := ps.profiles[t.profile.id]
	switch ref.Kind {
	case pipeline.IndirectMember:
		if m := st.members[ref.ID]; m != nil {
			m.inTables += delta
		}
	case pipeline.IndirectGroup:
		if g := st.groups[ref.ID]; g != nil {
			g.inTables += delta
		}
	}
}

func indirectAction(ref *pipeline.IndirectRef) *p4v1.TableAction {
	if ref.Kind == pipeline.IndirectGroup {
		return &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileGroupId{ActionProfileGroupId: ref.ID}}
	}
	return &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: ref.ID}}
}

// memberActions reads p's members' actions back from the device (one-shot
// sets' members included), as P4Info actions with canonical parameters: a
// member's action is one of the profile's tables' actions, the first
// table's as memberAction checked it.
func (ps *pipelineState) memberActions(p *profileInfo) (map[uint32]boundAction, error) {
	calls, err := ps.ctl.ProfileMembers(p.name)
	if err != nil {
		return nil, engineErr("reading the members", err)
	}
	out := make(map[uint32]boundAction, len(calls))
	for id, call := range calls {
		b, err := ps.schema.actionFrom(p.tables[0], call)
		if err != nil {
			return nil, errorf(codes.Internal, "action profile %q member %d on the device: %v", p.name, id, err)
		}
		out[id] = b
	}
	return out, nil
}

// readProfiles resolves the profile part of a member or group read:
// id 0 is every profile (spec §9.2.1, §9.2.2).
func (ps *pipelineState) readProfiles(id uint32) ([]uint32, error) {
	if id == 0 {
		return ps.schema.profileIDs, nil
	}
	if _, ok := ps.schema.profiles[id]; !ok {
		return nil, errorf(codes.NotFound, "no action profile with id %#x", id)
	}
	return []uint32{id}, nil
}

func (ps *pipelineState) readProfileMembers(q *p4v1.ActionProfileMember) ([]*p4v1.Entity, error) {
	ids, err := ps.readProfiles(q.GetActionProfileId())
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for _, pid := range ids {
		st := ps.profiles[pid]
		if len(st.members) == 0 {
			continue
		}
		acts, err := ps.memberActions(ps.schema.profiles[pid])
		if err != nil {
			return nil, err
		}
		for _, mid := range sortedKeys(st.members) {
			if q.GetMemberId() != 0 && q.GetMemberId() != mid {
				continue
			}
			act, ok := acts[mid]
			if !ok {
				return nil, errorf(codes.Internal, "action profile %q: the device has no member %d", ps.schema.profiles[pid].name, mid)
			}
			a, err := ps.schema.actionProto(act)
			if err != nil {
				return nil, errorf(codeOf(err), "action profile %q member %d: %s", ps.schema.profiles[pid].name, mid, messageOf(err))
			}
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{
				ActionProfileId: pid, MemberId: mid, Action: a}}})
		}
	}
	if q.GetActionProfileId() != 0 && q.GetMemberId() != 0 && len(out) == 0 {
		return nil, errorf(codes.NotFound, "action profile %q has no member %d", ps.schema.profiles[q.GetActionProfileId()].name, q.GetMemberId())
	}
	return out, nil
}

func (ps *pipelineState) readProfileGroups(q *p4v1.ActionProfileGroup) ([]*p4v1.Entity, error) {
	ids, err := ps.readProfiles(q.GetActionProfileId())
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for _, pid := range ids {
		st := ps.profiles[pid]
		for _, gid := range sortedKeys(st.groups) {
			if q.GetGroupId() != 0 && q.GetGroupId() != gid {
				continue
			}
			g := st.groups[gid]
			e := &p4v1.ActionProfileGroup{ActionProfileId: pid, GroupId: gid, MaxSize: g.maxSize}
			for _, m := range g.members {
				e.Members = append(e.Members, proto.Clone(m).(*p4v1.ActionProfileGroup_Member))
			}
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: e}})
		}
	}
	if q.GetActionProfileId() != 0 && q.GetGroupId() != 0 && len(out) == 0 {
		return nil, errorf(codes.NotFound, "action profile %q has no group %d", ps.schema.profiles[q.GetActionProfileId()].name, q.GetGroupId())
	}
	return out, nil
}

// hasAction reports whether the entry runs what a read filters on: the
// same action (any arguments), or the same member or group.
func (e *tableEntry) hasAction(ta *p4v1.TableAction) bool {
	if e.oneShot != nil {
		// Its group and members are the server's, not the client's.
		_, isSet := ta.GetType().(*p4v1.TableAction_ActionProfileActionSet)
		return isSet
	}
	ref := e.ref
	switch x := ta.GetType().(type) {
	case *p4v1.TableAction_Action:
		return x.Action == nil || (ref == nil && x.Action.GetActionId() == e.action.id)
	case *p4v1.TableAction_ActionProfileMemberId:
		return ref != nil && ref.Kind == pipeline.IndirectMember && ref.ID == x.ActionProfileMemberId
	case *p4v1.TableAction_ActionProfileGroupId:
		return ref != nil && ref.Kind == pipeline.IndirectGroup && ref.ID == x.ActionProfileGroupId
	}
	return false
}
