package engine

// Action profiles and action selectors (BMv2 "indirect" and "indirect_ws"
// tables). Entries of such tables name a member (an action with data) or
// a group of members; for a group, the selector hashes its input fields
// and the hash modulo the group's size picks the member, in the order the
// group lists them. Contents are copy-on-write snapshots like tables'.

import (
	"sync/atomic"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

type profileMember struct {
	act  *action
	data *actionData
}

type profileState struct {
	members map[uint32]*profileMember
	groups  map[uint32][]uint32
	// one more than the highest member and group id used since the
	// profile was last reset (BMv2's profile sizes: ProfileSlots)
	memberSlots, groupSlots uint32
}

type actionProfile struct {
	name     string
	id       int
	maxSize  int
	selector *calculation
	tables   []*table
	actions  map[int]*action // union of the actions of its tables
	state    atomic.Pointer[profileState]
}

func (c *closureBuilder) compileProfile(jap *jActionProfile) (*actionProfile, error) {
	ap := &actionProfile{name: jap.Name, id: jap.ID, maxSize: jap.MaxSize, actions: map[int]*action{}}
	if jap.Selector != nil {
		calc, err := c.compileCalculation(&jCalculation{Name: jap.Name + "$selector", Algo: jap.Selector.Algo, Input: jap.Selector.Input}, nil)
		if err != nil {
			return nil, err
		}
		calc.max = calc.maxBytes(c.lay)
		ap.selector = calc
	}
	ap.state.Store(&profileState{members: map[uint32]*profileMember{}, groups: map[uint32][]uint32{}})
	return ap, nil
}

func (ps *profileState) clone() *profileState {
	n := &profileState{members: make(map[uint32]*profileMember, len(ps.members)), groups: make(map[uint32][]uint32, len(ps.groups)),
		memberSlots: ps.memberSlots, groupSlots: ps.groupSlots}
	for k, v := range ps.members {
		n.members[k] = v
	}
	for k, v := range ps.groups {
		n.groups[k] = v
	}
	return n
}

// resolve picks the member an entry runs (nil: nothing to run).
func (ap *actionProfile) resolve(p *Packet, ref pipeline.IndirectRef) *profileMember {
	ps := ap.state.Load()
	switch ref.Kind {
	case pipeline.IndirectMember:
		return ps.members[ref.ID]
	case pipeline.IndirectGroup:
		g := ps.groups[ref.ID]
		if len(g) == 0 {
			return nil
		}
		var h uint64
		if ap.selector != nil {
			h = ap.selector.compute(p)
		}
		return ps.members[g[h%uint64(len(g))]]
	}
	return nil
}

func (pl *Pipeline) profile(id int) (*actionProfile, error) {
	ap, ok := pl.profiles.byID[id]
	if !ok {
		return nil, errf(CodeNotFound, "no action profile with id %d", id)
	}
	return ap, nil
}

// ActionProfiles returns the program's action profiles and selectors.
func (pl *Pipeline) ActionProfiles() []pipeline.ActionProfileInfo {
	out := make([]pipeline.ActionProfileInfo, 0, len(pl.profiles.list))
	for _, ap := range pl.profiles.list {
		info := pipeline.ActionProfileInfo{Name: ap.name, ID: ap.id, MaxSize: ap.maxSize, HasSelector: ap.selector != nil}
		for _, t := range ap.tables {
			info.TableIDs = append(info.TableIDs, t.info.ID)
		}
		out = append(out, info)
	}
	return out
}

// SetProfileMember creates or replaces a member of an action profile.
func (pl *Pipeline) SetProfileMember(profileID int, member uint32, a pipeline.ActionCall) error {
	defer pl.writing()()
	ap, err := pl.profile(profileID)
	if err != nil {
		return err
	}
	act, ok := ap.actions[a.ActionID]
	if !ok {
		return errf(CodeInvalidArgument, "action %d is not an action of profile %s", a.ActionID, ap.name)
	}
	ad, err := makeActionData(act.params, a.Params)
	if err != nil {
		return err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	ps := ap.state.Load().clone()
	if _, exists := ps.members[member]; !exists && ap.maxSize > 0 && len(ps.members) >= ap.maxSize {
		return errf(CodeResourceExhausted, "action profile %s is full (%d members)", ap.name, ap.maxSize)
	}
	ps.members[member] = &profileMember{act: act, data: ad}
	ps.memberSlots = max(ps.memberSlots, member+1)
	ap.state.Store(ps)
	return nil
}

// DeleteProfileMember removes a member; it fails while a group or a table
// entry still refers to it.
func (pl *Pipeline) DeleteProfileMember(profileID int, member uint32) error {
	defer pl.writing()()
	ap, err := pl.profile(profileID)
	if err != nil {
		return err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	ps := ap.state.Load()
	if _, ok := ps.members[member]; !ok {
		return errf(CodeNotFound, "action profile %s has no member %d", ap.name, member)
	}
	for g, ms := range ps.groups {
		for _, m := range ms {
			if m == member {
				return errf(CodeFailedPrecondition, "member %d is in group %d", member, g)
			}
		}
	}
	if ap.referenced(pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: member}) {
		return errf(CodeFailedPrecondition, "member %d is used by a table entry", member)
	}
	ps = ps.clone()
	delete(ps.members, member)
	ap.state.Store(ps)
	return nil
}

// ProfileMembers returns the members of an action profile.
func (pl *Pipeline) ProfileMembers(profileID int) (map[uint32]pipeline.ActionCall, error) {
	ap, err := pl.profile(profileID)
	if err != nil {
		return nil, err
	}
	out := map[uint32]pipeline.ActionCall{}
	for id, m := range ap.state.Load().members {
		out[id] = pipeline.ActionCall{ActionID: m.act.id, Params: exportActionData(m.act.params, m.data)}
	}
	return out, nil
}

// SetProfileGroup creates or replaces a group of an action selector; its
// members must exist.
func (pl *Pipeline) SetProfileGroup(profileID int, group uint32, members []uint32) error {
	defer pl.writing()()
	ap, err := pl.profile(profileID)
	if err != nil {
		return err
	}
	if ap.selector == nil {
		return errf(CodeInvalidArgument, "action profile %s has no selector: it has no groups", ap.name)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	ps := ap.state.Load().clone()
	seen := map[uint32]bool{}
	for _, m := range members {
		if _, ok := ps.members[m]; !ok {
			return errf(CodeNotFound, "action profile %s has no member %d", ap.name, m)
		}
		if seen[m] {
			return errf(CodeInvalidArgument, "member %d listed twice", m)
		}
		seen[m] = true
	}
	ps.groups[group] = append([]uint32(nil), members...)
	ps.groupSlots = max(ps.groupSlots, group+1)
	ap.state.Store(ps)
	return nil
}

// DeleteProfileGroup removes a group; it fails while a table entry uses it.
func (pl *Pipeline) DeleteProfileGroup(profileID int, group uint32) error {
	defer pl.writing()()
	ap, err := pl.profile(profileID)
	if err != nil {
		return err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	ps := ap.state.Load()
	if _, ok := ps.groups[group]; !ok {
		return errf(CodeNotFound, "action profile %s has no group %d", ap.name, group)
	}
	if ap.referenced(pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: group}) {
		return errf(CodeFailedPrecondition, "group %d is used by a table entry", group)
	}
	ps = ps.clone()
	delete(ps.groups, group)
	ap.state.Store(ps)
	return nil
}

// ProfileGroups returns the groups of an action selector.
func (pl *Pipeline) ProfileGroups(profileID int) (map[uint32][]uint32, error) {
	ap, err := pl.profile(profileID)
	if err != nil {
		return nil, err
	}
	out := map[uint32][]uint32{}
	for id, ms := range ap.state.Load().groups {
		out[id] = append([]uint32(nil), ms...)
	}
	return out, nil
}

// ProfileSlots returns one more than the highest member id and group id
// an action profile has held since it was last reset (ResetProfile,
// SetProfileSlots): the sizes of BMv2's per-handle arrays of a profile,
// which grow with the handles given out and shrink only on a reset.
func (pl *Pipeline) ProfileSlots(profileID int) (members, groups uint32, err error) {
	ap, err := pl.profile(profileID)
	if err != nil {
		return 0, 0, err
	}
	ps := ap.state.Load()
	return ps.memberSlots, ps.groupSlots, nil
}

// SetProfileSlots sets what ProfileSlots answers (a restored state's),
// at least one more than the highest id the profile holds.
func (pl *Pipeline) SetProfileSlots(profileID int, members, groups uint32) error {
	defer pl.writing()()
	ap, err := pl.profile(profileID)
	if err != nil {
		return err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	ps := ap.state.Load().clone()
	ps.memberSlots, ps.groupSlots = members, groups
	for id := range ps.members {
		ps.memberSlots = max(ps.memberSlots, id+1)
	}
	for id := range ps.groups {
		ps.groupSlots = max(ps.groupSlots, id+1)
	}
	ap.state.Store(ps)
	return nil
}

// ResetProfile empties an action profile (members, groups, ProfileSlots);
// it fails while a table entry or default uses one of its members or
// groups.
func (pl *Pipeline) ResetProfile(profileID int) error {
	defer pl.writing()()
	ap, err := pl.profile(profileID)
	if err != nil {
		return err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, t := range ap.tables {
		st := t.state.Load()
		if st.defRef.Kind != pipeline.IndirectNone || st.byID.n > 0 {
			return errf(CodeFailedPrecondition, "table %s still uses action profile %s", t.info.Name, ap.name)
		}
	}
	ap.state.Store(&profileState{members: map[uint32]*profileMember{}, groups: map[uint32][]uint32{}})
	return nil
}

func (ap *actionProfile) referenced(ref pipeline.IndirectRef) bool {
	for _, t := range ap.tables {
		st := t.state.Load()
		if st.defRef == ref {
			return true
		}
		for _, en := range st.ordered() {
			if en.ref == ref {
				return true
			}
		}
	}
	return false
}

// checkRef validates an entry's reference into the table's profile.
func (t *table) checkRef(ref pipeline.IndirectRef) error {
	ps := t.profile.state.Load()
	switch ref.Kind {
	case pipeline.IndirectMember:
		if _, ok := ps.members[ref.ID]; !ok {
			return errf(CodeNotFound, "action profile %s has no member %d", t.profile.name, ref.ID)
		}
	case pipeline.IndirectGroup:
		if t.profile.selector == nil {
			return errf(CodeInvalidArgument, "table %s has no action selector", t.info.Name)
		}
		if _, ok := ps.groups[ref.ID]; !ok {
			return errf(CodeNotFound, "action profile %s has no group %d", t.profile.name, ref.ID)
		}
	default:
		return errf(CodeInvalidArgument, "table %s is indirect: the entry needs a member or a group", t.info.Name)
	}
	return nil
}
