package bmthrift

import (
	"context"
	"slices"
	"sort"

	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/standard"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Action profiles and selectors. A member or group handle is the engine's
// member or group id, shared with P4Runtime: a member P4Runtime wrote as
// id 7 is member handle 7 here; a new member or group gets the lowest id
// free in the profile, as BMv2 gives handles.

type prof struct {
	v    *view
	id   int
	info pipeline.ActionProfileInfo
}

func (h *std) profile(name string) (*prof, error) {
	bad := tableErr(standard.TableOperationErrorCode_INVALID_ACTION_PROFILE_NAME)
	v, err := h.s.current()
	if err != nil {
		return nil, bad
	}
	id, ok := v.pl.Lookup(engine.KindActionProfile, name)
	if !ok {
		return nil, bad
	}
	for _, ap := range v.pl.ActionProfiles() {
		if ap.ID == id {
			return &prof{v: v, id: id, info: ap}, nil
		}
	}
	return nil, bad
}

// action resolves an action of the profile's tables by name.
func (p *prof) action(name string) (pipeline.ActionInfo, error) {
	for _, tid := range p.info.TableIDs {
		ti, err := p.v.pl.Table(tid)
		if err != nil {
			continue
		}
		t := &tbl{v: p.v, id: tid, info: ti}
		if a, err := t.action(name); err == nil {
			return a, nil
		}
	}
	return pipeline.ActionInfo{}, tableErr(standard.TableOperationErrorCode_INVALID_ACTION_NAME)
}

func (p *prof) members() map[uint32]pipeline.ActionCall {
	ms, _ := p.v.pl.ProfileMembers(p.id)
	return ms
}

func (p *prof) groups() map[uint32][]uint32 {
	if !p.info.HasSelector {
		return nil
	}
	gs, _ := p.v.pl.ProfileGroups(p.id)
	return gs
}

func lowestFree[T any](used map[uint32]T) uint32 {
	for i := uint32(0); ; i++ {
		if _, ok := used[i]; !ok {
			return i
		}
	}
}

func (h *std) BmMtActProfAddMember(_ context.Context, _ int32, name string, action string, data standard.BmActionData) (standard.BmMemberHandle, error) {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return 0, err
	}
	a, err := p.action(action)
	if err != nil {
		return 0, err
	}
	args, err := actionData(a, data)
	if err != nil {
		return 0, err
	}
	mbr := lowestFree(p.members())
	if err := p.v.pl.SetProfileMember(p.id, mbr, pipeline.ActionCall{ActionID: a.ID, Params: args}); err != nil {
		return 0, tableErrOf(err, standard.TableOperationErrorCode_BAD_ACTION_DATA)
	}
	return standard.BmMemberHandle(mbr), nil
}

func (h *std) BmMtActProfDeleteMember(_ context.Context, _ int32, name string, mbr standard.BmMemberHandle) error {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return err
	}
	if _, ok := p.members()[uint32(mbr)]; !ok {
		return tableErr(standard.TableOperationErrorCode_INVALID_MBR_HANDLE)
	}
	if err := p.v.pl.DeleteProfileMember(p.id, uint32(mbr)); err != nil {
		return tableErr(standard.TableOperationErrorCode_MBR_STILL_USED)
	}
	return nil
}

func (h *std) BmMtActProfModifyMember(_ context.Context, _ int32, name string, mbr standard.BmMemberHandle, action string, data standard.BmActionData) error {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return err
	}
	if _, ok := p.members()[uint32(mbr)]; !ok {
		return tableErr(standard.TableOperationErrorCode_INVALID_MBR_HANDLE)
	}
	a, err := p.action(action)
	if err != nil {
		return err
	}
	args, err := actionData(a, data)
	if err != nil {
		return err
	}
	return tableErrOf(p.v.pl.SetProfileMember(p.id, uint32(mbr), pipeline.ActionCall{ActionID: a.ID, Params: args}),
		standard.TableOperationErrorCode_BAD_ACTION_DATA)
}

func (h *std) BmMtActProfCreateGroup(_ context.Context, _ int32, name string) (standard.BmGroupHandle, error) {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return 0, err
	}
	if !p.info.HasSelector {
		return 0, tableErr(standard.TableOperationErrorCode_NO_ACTION_PROFILE_SELECTION)
	}
	g := lowestFree(p.groups())
	if err := p.v.pl.SetProfileGroup(p.id, g, nil); err != nil {
		return 0, tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	return standard.BmGroupHandle(g), nil
}

func (h *std) BmMtActProfDeleteGroup(_ context.Context, _ int32, name string, grp standard.BmGroupHandle) error {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return err
	}
	if _, ok := p.groups()[uint32(grp)]; !ok {
		return tableErr(standard.TableOperationErrorCode_INVALID_GRP_HANDLE)
	}
	if err := p.v.pl.DeleteProfileGroup(p.id, uint32(grp)); err != nil {
		return tableErr(standard.TableOperationErrorCode_GRP_STILL_USED)
	}
	return nil
}

// setGroupMembers changes one group's member list with change.
func (h *std) setGroupMembers(name string, mbr standard.BmMemberHandle, grp standard.BmGroupHandle,
	change func(ms []uint32, m uint32) ([]uint32, error)) error {
	p, err := h.profile(name)
	if err != nil {
		return err
	}
	if !p.info.HasSelector {
		return tableErr(standard.TableOperationErrorCode_NO_ACTION_PROFILE_SELECTION)
	}
	if _, ok := p.members()[uint32(mbr)]; !ok {
		return tableErr(standard.TableOperationErrorCode_INVALID_MBR_HANDLE)
	}
	ms, ok := p.groups()[uint32(grp)]
	if !ok {
		return tableErr(standard.TableOperationErrorCode_INVALID_GRP_HANDLE)
	}
	nms, err := change(ms, uint32(mbr))
	if err != nil {
		return err
	}
	return tableErrOf(p.v.pl.SetProfileGroup(p.id, uint32(grp), nms), standard.TableOperationErrorCode_ERROR)
}

func (h *std) BmMtActProfAddMemberToGroup(_ context.Context, _ int32, name string, mbr standard.BmMemberHandle, grp standard.BmGroupHandle) error {
	defer h.lock()()
	return h.setGroupMembers(name, mbr, grp, func(ms []uint32, m uint32) ([]uint32, error) {
		if slices.Contains(ms, m) {
			return nil, tableErr(standard.TableOperationErrorCode_MBR_ALREADY_IN_GRP)
		}
		return append(slices.Clone(ms), m), nil
	})
}

func (h *std) BmMtActProfRemoveMemberFromGroup(_ context.Context, _ int32, name string, mbr standard.BmMemberHandle, grp standard.BmGroupHandle) error {
	defer h.lock()()
	return h.setGroupMembers(name, mbr, grp, func(ms []uint32, m uint32) ([]uint32, error) {
		i := slices.Index(ms, m)
		if i < 0 {
			return nil, tableErr(standard.TableOperationErrorCode_MBR_NOT_IN_GRP)
		}
		return slices.Delete(slices.Clone(ms), i, i+1), nil
	})
}

func (p *prof) member(id uint32, a pipeline.ActionCall) *standard.BmMtActProfMember {
	m := &standard.BmMtActProfMember{MbrHandle: standard.BmMemberHandle(id), ActionData: readData(a.Params)}
	if ai, err := p.v.pl.Action(a.ActionID); err == nil {
		m.ActionName = ai.Name
	}
	return m
}

func sortedIDs[T any](m map[uint32]T) []uint32 {
	ids := make([]uint32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func (h *std) BmMtActProfGetMembers(_ context.Context, _ int32, name string) ([]*standard.BmMtActProfMember, error) {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return nil, err
	}
	ms := p.members()
	out := []*standard.BmMtActProfMember{}
	for _, id := range sortedIDs(ms) {
		out = append(out, p.member(id, ms[id]))
	}
	return out, nil
}

func (h *std) BmMtActProfGetMember(_ context.Context, _ int32, name string, mbr standard.BmMemberHandle) (*standard.BmMtActProfMember, error) {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return nil, err
	}
	a, ok := p.members()[uint32(mbr)]
	if !ok {
		return nil, tableErr(standard.TableOperationErrorCode_INVALID_MBR_HANDLE)
	}
	return p.member(uint32(mbr), a), nil
}

func group(id uint32, ms []uint32) *standard.BmMtActProfGroup {
	g := &standard.BmMtActProfGroup{GrpHandle: standard.BmGroupHandle(id), MbrHandles: []standard.BmMemberHandle{}}
	// BMv2 lists a group's members by handle.
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	for _, m := range sorted {
		g.MbrHandles = append(g.MbrHandles, standard.BmMemberHandle(m))
	}
	return g
}

func (h *std) BmMtActProfGetGroups(_ context.Context, _ int32, name string) ([]*standard.BmMtActProfGroup, error) {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return nil, err
	}
	gs := p.groups()
	out := []*standard.BmMtActProfGroup{}
	for _, id := range sortedIDs(gs) {
		out = append(out, group(id, gs[id]))
	}
	return out, nil
}

func (h *std) BmMtActProfGetGroup(_ context.Context, _ int32, name string, grp standard.BmGroupHandle) (*standard.BmMtActProfGroup, error) {
	defer h.lock()()
	p, err := h.profile(name)
	if err != nil {
		return nil, err
	}
	ms, ok := p.groups()[uint32(grp)]
	if !ok {
		return nil, tableErr(standard.TableOperationErrorCode_INVALID_GRP_HANDLE)
	}
	return group(uint32(grp), ms), nil
}

// indirectAdd adds an entry of an indirect table naming ref.
func (h *std) indirectAdd(table string, params standard.BmMatchParams, ref pipeline.IndirectRef, opts *standard.BmAddEntryOptions) (standard.BmEntryHandle, error) {
	t, err := h.table(table)
	if err != nil {
		return 0, err
	}
	if err := t.checkRef(ref); err != nil {
		return 0, err
	}
	e, err := t.newEntry(params, opts)
	if err != nil {
		return 0, err
	}
	e.Indirect = ref
	return h.add(t, params, e)
}

// checkRef checks that t is indirect (with a selector for a group) and
// that ref names a member or a non-empty group of its profile.
func (t *tbl) checkRef(ref pipeline.IndirectRef) error {
	if !t.indirect() || (ref.Kind == pipeline.IndirectGroup && !t.withGroups()) {
		return tableErr(standard.TableOperationErrorCode_WRONG_TABLE_TYPE)
	}
	p := &prof{v: t.v, info: *t.prof, id: t.prof.ID}
	if ref.Kind == pipeline.IndirectMember {
		if _, ok := p.members()[ref.ID]; !ok {
			return tableErr(standard.TableOperationErrorCode_INVALID_MBR_HANDLE)
		}
		return nil
	}
	ms, ok := p.groups()[ref.ID]
	if !ok {
		return tableErr(standard.TableOperationErrorCode_INVALID_GRP_HANDLE)
	}
	if len(ms) == 0 {
		return tableErr(standard.TableOperationErrorCode_EMPTY_GRP)
	}
	return nil
}

func (h *std) BmMtIndirectAddEntry(_ context.Context, _ int32, table string, params standard.BmMatchParams, mbr standard.BmMemberHandle, opts *standard.BmAddEntryOptions) (standard.BmEntryHandle, error) {
	defer h.lock()()
	return h.indirectAdd(table, params, pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: uint32(mbr)}, opts)
}

func (h *std) BmMtIndirectWsAddEntry(_ context.Context, _ int32, table string, params standard.BmMatchParams, grp standard.BmGroupHandle, opts *standard.BmAddEntryOptions) (standard.BmEntryHandle, error) {
	defer h.lock()()
	return h.indirectAdd(table, params, pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: uint32(grp)}, opts)
}

func (h *std) indirectModify(table string, hd standard.BmEntryHandle, ref pipeline.IndirectRef) error {
	t, err := h.table(table)
	if err != nil {
		return err
	}
	if err := t.checkRef(ref); err != nil {
		return err
	}
	e, err := t.byHandle(hd)
	if err != nil {
		return err
	}
	e.Indirect = ref
	return tableErrOf(t.v.pl.ModifyEntry(t.id, e), standard.TableOperationErrorCode_ERROR)
}

func (h *std) BmMtIndirectModifyEntry(_ context.Context, _ int32, table string, hd standard.BmEntryHandle, mbr standard.BmMemberHandle) error {
	defer h.lock()()
	return h.indirectModify(table, hd, pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: uint32(mbr)})
}

func (h *std) BmMtIndirectWsModifyEntry(_ context.Context, _ int32, table string, hd standard.BmEntryHandle, grp standard.BmGroupHandle) error {
	defer h.lock()()
	return h.indirectModify(table, hd, pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: uint32(grp)})
}

func (h *std) BmMtIndirectDeleteEntry(_ context.Context, _ int32, table string, hd standard.BmEntryHandle) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	if !t.indirect() {
		return tableErr(standard.TableOperationErrorCode_WRONG_TABLE_TYPE)
	}
	return h.delete(t, hd)
}

// indirectSetDefault makes a member or group of an indirect table's
// profile its default entry, as BMv2's set_default_member and
// set_default_group: the member or group must exist (an empty group is
// taken; a miss then runs nothing), and is then in use (not deletable)
// until the default is reset or set again.
func (h *std) indirectSetDefault(table string, ref pipeline.IndirectRef) error {
	t, err := h.table(table)
	if err != nil {
		return err
	}
	if !t.indirect() || (ref.Kind == pipeline.IndirectGroup && !t.withGroups()) {
		return tableErr(standard.TableOperationErrorCode_WRONG_TABLE_TYPE)
	}
	if t.info.ConstDefaultEntry {
		return tableErr(standard.TableOperationErrorCode_DEFAULT_ENTRY_IS_CONST)
	}
	p := &prof{v: t.v, info: *t.prof, id: t.prof.ID}
	if ref.Kind == pipeline.IndirectMember {
		if _, ok := p.members()[ref.ID]; !ok {
			return tableErr(standard.TableOperationErrorCode_INVALID_MBR_HANDLE)
		}
	} else if _, ok := p.groups()[ref.ID]; !ok {
		return tableErr(standard.TableOperationErrorCode_INVALID_GRP_HANDLE)
	}
	if err := t.v.pl.SetDefaultIndirect(t.id, ref); err != nil {
		if engine.ErrorCodeOf(err) == engine.CodePermissionDenied {
			return tableErr(standard.TableOperationErrorCode_DEFAULT_ENTRY_IS_CONST)
		}
		return tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	return nil
}

func (h *std) BmMtIndirectSetDefaultMember(_ context.Context, _ int32, table string, mbr standard.BmMemberHandle) error {
	defer h.lock()()
	return h.indirectSetDefault(table, pipeline.IndirectRef{Kind: pipeline.IndirectMember, ID: uint32(mbr)})
}

func (h *std) BmMtIndirectWsSetDefaultGroup(_ context.Context, _ int32, table string, grp standard.BmGroupHandle) error {
	defer h.lock()()
	return h.indirectSetDefault(table, pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: uint32(grp)})
}

func (h *std) BmMtIndirectResetDefaultEntry(_ context.Context, _ int32, table string) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	return tableErrOf(t.v.pl.ResetDefaultAction(t.id), standard.TableOperationErrorCode_ERROR)
}
