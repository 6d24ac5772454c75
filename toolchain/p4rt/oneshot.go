package p4rt

import (
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

// One-shot action selector programming (spec §9.2.3): an entry's
// action_profile_action_set stands for a group of members the server
// creates under ids of its own, and is read back as written. A profile is
// programmed either with one-shots or with ActionProfileMember/Group
// messages, never both (INVALID_ARGUMENT), so the server's ids cannot
// clash with the client's.

// oneShot is what an entry's action set became in the engine.
type oneShot struct {
	actions []boundAction
	weights []int32
	group   uint32
	members []uint32
}

// internalIDs hands out the server's member and group ids of a profile in
// one-shot mode.
type internalIDs struct {
	next    uint32
	members map[uint32]bool
	groups  map[uint32]bool
}

func (ids *internalIDs) take(used map[uint32]bool) uint32 {
	for {
		ids.next++
		if ids.next != 0 && !used[ids.next] {
			used[ids.next] = true
			return ids.next
		}
	}
}

// manual reports whether the profile holds client-programmed members or
// groups.
func (st *profileState) manual() bool { return len(st.members) > 0 || len(st.groups) > 0 }

// buildOneShot validates an action set for indirect table t and programs
// its members and group; nothing is left behind on failure.
func (ps *pipelineState) buildOneShot(t *tableInfo, set *p4v1.ActionProfileActionSet) (*oneShot, error) {
	p := t.profile
	st := ps.profiles[p.id]
	if !p.selector {
		return nil, invalid("table %q: action profile %q has no selector; one-shot action sets need one", t.name, p.name)
	}
	if st.manual() {
		return nil, invalid("table %q: action profile %q is programmed with members and groups; it cannot also take one-shot action sets", t.name, p.name)
	}
	acts := set.GetActionProfileActions()
	if len(acts) == 0 {
		return nil, invalid("table %q: the one-shot action set is empty", t.name)
	}
	if p.maxGroupSize > 0 && len(acts) > int(p.maxGroupSize) {
		return nil, invalid("table %q: %d actions in the one-shot set, action profile %q groups hold at most %d", t.name, len(acts), p.name, p.maxGroupSize)
	}
	os := &oneShot{}
	for _, a := range acts {
		if a == nil {
			return nil, invalid("table %q: empty action in the one-shot set", t.name)
		}
		if a.GetWeight() <= 0 {
			return nil, invalid("table %q: one-shot action weight %d; weights must be positive", t.name, a.GetWeight())
		}
		if a.GetWeight() != 1 {
			return nil, errorf(codes.Unimplemented, "table %q: one-shot action weight %d; terrapin-switch selects with equal weight, so only weight 1 is supported", t.name, a.GetWeight())
		}
		if a.GetWatchKind() != nil {
			return nil, errorf(codes.Unimplemented, "table %q: watch ports are not supported by terrapin-switch", t.name)
		}
		b, err := ps.schema.parseAction(t, a.GetAction(), false)
		if err != nil {
			return nil, err
		}
		os.actions = append(os.actions, b)
		os.weights = append(os.weights, a.GetWeight())
	}
	if p.size > 0 && int64(len(st.internal.members)+len(acts)) > p.size {
		return nil, errorf(codes.ResourceExhausted, "action profile %q is full: %d members, %d more do not fit in %d", p.name, len(st.internal.members), len(acts), p.size)
	}
	for _, b := range os.actions {
		id := st.internal.take(st.internal.members)
		os.members = append(os.members, id)
		name, args := ps.schema.engineArgs(b)
		if err := ps.ctl.SetProfileMember(p.name, id, name, args); err != nil {
			ps.releaseOneShot(p, os)
			return nil, engineErr("adding a one-shot member", err)
		}
	}
	os.group = st.internal.take(st.internal.groups)
	if err := ps.ctl.SetProfileGroup(p.name, os.group, os.members); err != nil {
		ps.releaseOneShot(p, os)
		return nil, engineErr("adding the one-shot group", err)
	}
	return os, nil
}

// releaseOneShot removes what buildOneShot programmed (the entry no longer
// names the group).
func (ps *pipelineState) releaseOneShot(p *profileInfo, os *oneShot) {
	st := ps.profiles[p.id]
	if os.group != 0 && st.internal.groups[os.group] {
		_ = ps.ctl.DeleteProfileGroup(p.name, os.group)
		delete(st.internal.groups, os.group)
	}
	for _, m := range os.members {
		_ = ps.ctl.DeleteProfileMember(p.name, m)
		delete(st.internal.members, m)
	}
}

// proto renders the action set as the client wrote it (canonical values).
func (os *oneShot) proto(s *schema) (*p4v1.TableAction, error) {
	set := &p4v1.ActionProfileActionSet{}
	for i, b := range os.actions {
		a, err := s.actionProto(b)
		if err != nil {
			return nil, err
		}
		set.ActionProfileActions = append(set.ActionProfileActions, &p4v1.ActionProfileAction{Action: a, Weight: os.weights[i]})
	}
	return &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileActionSet{ActionProfileActionSet: set}}, nil
}
