package p4rt

import (
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// reconcile carries the forwarding state of old into the prepared (not
// yet forwarding) pipeline next, for RECONCILE_AND_COMMIT. It keeps what
// the new program can still express, object by object, matched by name as
// PI does for BMv2: table entries whose table still has a compatible key
// and whose action (by name, parameters by name, values fitting) is still
// one of the table's actions, with their direct counter values and meter
// configs; client default actions; multicast groups; clone sessions;
// indirect meter configs within the new size; digest configs; action
// profile members and groups (profile by name, actions as for entries) and
// the entries of indirect tables that name them or carry one-shot sets;
// value sets whose fields are unchanged. Anything
// else is dropped, and the count is logged. Indexed counter and register
// cells are data, not forwarding state, and start from zero as in a fresh
// pipeline.
func (s *Server) reconcile(old, next *pipelineState) {
	dropped := 0
	byName := func(sch *schema) map[string]*tableInfo {
		m := map[string]*tableInfo{}
		for _, t := range sch.tables {
			m[t.name] = t
		}
		return m
	}
	newTables := byName(next.schema)
	dropped += reconcileProfiles(old, next)
	dropped += reconcileValueSets(old, next)
	for _, oid := range old.schema.tableIDs {
		ot, ots := old.schema.tables[oid], old.tables[oid]
		entries, err := old.entries(ot)
		if err != nil {
			s.log.Warn("RECONCILE_AND_COMMIT could not read the old entries", "table", ot.name, "error", messageOf(err))
			continue
		}
		nt := newTables[ot.name]
		if nt == nil || !sameKey(ot, nt) || nt.isConst || nt.indirect != ot.indirect ||
			(nt.indirect && (nt.profile.name != ot.profile.name || nt.profile.missing)) {
			for _, e := range entries {
				if !e.isConst {
					dropped++
				}
			}
			continue
		}
		nts := next.tables[nt.id]
		if ots.clientDefault && nt.constDefaultID == 0 {
			if oa, ok, err := old.deviceDefault(ot); err == nil && ok {
				if act, ok := translateAction(old.schema, next.schema, nt, oa, true); ok {
					name, args := next.schema.engineArgs(act)
					if next.ctl.SetDefaultAction(nt.name, name, args) == nil {
						nts.clientDefault = true
						nts.defaultCookie, nts.defaultMeta = ots.defaultCookie, clone(ots.defaultMeta)
					}
				}
			}
		}
		for _, e := range entries {
			if _, declared := nt.constIndex[entryKey(e.match, e.priority)]; e.isConst || declared {
				continue // the program's own entries come with the program
			}
			key := keyFields(nt, e.match)
			meta := entryMeta{controllerMetadata: e.controllerMetadata, metadata: clone(e.metadata)}
			if nt.idleTimeout {
				meta.idleTimeoutNs = e.idleTimeoutNs
			}
			if nt.indirect {
				os, ok := reconcileIndirectEntry(old, next, nt, e, key)
				if !ok {
					dropped++
					continue
				}
				meta.oneShot = os
			} else {
				act, ok := translateAction(old.schema, next.schema, nt, e.action, false)
				if !ok {
					dropped++
					continue
				}
				name, args := next.schema.engineArgs(act)
				if err := next.ctl.AddEntry(nt.name, key, e.priority, name, args); err != nil {
					dropped++
					continue
				}
			}
			if ot.directMeter != 0 && nt.directMeter != 0 {
				if m, err := old.ctl.DirectMeter(ot.name, keyFields(ot, e.match), e.priority); err == nil && m != nil {
					_ = next.ctl.SetDirectMeter(nt.name, key, e.priority, m)
				}
			}
			if ot.directCounter != 0 && nt.directCounter != 0 {
				if v, err := old.ctl.ReadDirectCounter(ot.name, keyFields(ot, e.match), e.priority); err == nil {
					_ = next.ctl.WriteDirectCounter(nt.name, key, e.priority, v)
				}
			}
			if meta.idleTimeoutNs != 0 {
				_ = next.ctl.SetEntryTimeout(nt.name, key, e.priority, time.Duration(meta.idleTimeoutNs))
			}
			nts.setMeta(entryKey(e.match, e.priority), meta)
			nts.count++
		}
	}
	for _, id := range old.ctl.MulticastGroups() {
		if reps, ok := old.ctl.MulticastGroup(id); ok && next.ctl.SetMulticastGroup(id, reps) == nil {
			next.mcastAs[id] = old.mcastAs[id]
		} else {
			dropped++
		}
	}
	for _, id := range old.ctl.CloneSessions() {
		if sess, ok := old.ctl.CloneSession(id); ok && next.ctl.SetCloneSession(id, sess) == nil {
			next.clonesAs[id] = old.clonesAs[id]
		} else {
			dropped++
		}
	}
	newMeters := map[string]*arrayInfo{}
	for _, m := range next.schema.meters {
		newMeters[m.name] = m
	}
	for _, id := range old.schema.meterIDs {
		om := old.schema.meters[id]
		nm := newMeters[om.name]
		for i := range om.size {
			c, err := old.ctl.Meter(om.name, i)
			if err != nil || c == nil {
				continue // unconfigured cells are the new pipeline's default too
			}
			if nm == nil || i >= nm.size || next.ctl.SetMeter(nm.name, i, c) != nil {
				dropped++
			}
		}
	}
	for id, c := range old.digestCfg {
		if nd := next.schema.digestByName[old.schema.digests[id].name]; nd != nil {
			next.digestCfg[nd.id] = proto.Clone(c).(*p4v1.DigestEntry_Config)
		} else {
			dropped++
		}
	}
	if dropped > 0 {
		s.log.Warn("RECONCILE_AND_COMMIT dropped state the new program cannot hold", "objects", dropped)
	}
}

// sameKey reports whether entries of table a can be installed in b: the
// same match kinds in the same order, and fields no narrower.
func sameKey(a, b *tableInfo) bool {
	if len(a.fields) != len(b.fields) || a.needsPriority != b.needsPriority {
		return false
	}
	for i := range a.fields {
		if a.fields[i].kind != b.fields[i].kind || b.fields[i].width < a.fields[i].width {
			return false
		}
	}
	return true
}

// translateAction rebinds an action call to the new schema by names. The
// values cross as the controller sees them (translated parameters
// translated back with the old schema, and again with the new).
func translateAction(from, to *schema, nt *tableInfo, b boundAction, asDefault bool) (boundAction, bool) {
	oa := from.actions[b.id]
	written, err := from.actionProto(b)
	if err != nil {
		return boundAction{}, false
	}
	for id := range nt.actionScopes {
		na := to.actions[id]
		if na.name != oa.name {
			continue
		}
		call := &p4v1.Action{ActionId: id}
		for i, p := range oa.params {
			for _, np := range na.params {
				if np.name == p.name {
					call.Params = append(call.Params, &p4v1.Action_Param{ParamId: np.id, Value: written.Params[i].GetValue()})
				}
			}
		}
		out, err := to.parseAction(nt, call, asDefault)
		return out, err == nil
	}
	return boundAction{}, false
}

// reconcileProfiles carries action profile members and groups into next,
// profile by name, with the client's ids; it returns how many it dropped.
func reconcileProfiles(old, next *pipelineState) int {
	dropped := 0
	newProfiles := map[string]*profileInfo{}
	for _, p := range next.schema.profiles {
		newProfiles[p.name] = p
	}
	for _, pid := range old.schema.profileIDs {
		ost := old.profiles[pid]
		np := newProfiles[old.schema.profiles[pid].name]
		if np == nil || np.missing || len(np.tables) == 0 {
			dropped += len(ost.members) + len(ost.groups)
			continue
		}
		nst := next.profiles[np.id]
		var acts map[uint32]boundAction
		if len(ost.members) > 0 {
			acts, _ = old.memberActions(old.schema.profiles[pid]) // none read: every member is dropped
		}
		for _, mid := range sortedKeys(ost.members) {
			oa, read := acts[mid]
			if !read {
				dropped++
				continue
			}
			act, ok := translateAction(old.schema, next.schema, np.tables[0], oa, false)
			full := np.size > 0 && int64(len(nst.members)) >= np.size
			if !ok || full {
				dropped++
				continue
			}
			name, args := next.schema.engineArgs(act)
			if next.ctl.SetProfileMember(np.name, mid, name, args) != nil {
				dropped++
				continue
			}
			nst.members[mid] = &memberState{}
		}
		for _, gid := range sortedKeys(ost.groups) {
			og := ost.groups[gid]
			g := &p4v1.ActionProfileGroup{ActionProfileId: np.id, GroupId: gid, MaxSize: og.maxSize, Members: og.members}
			if !np.selector || (np.maxGroupSize > 0 && og.maxSize > np.maxGroupSize) {
				dropped++
				continue
			}
			ids, err := next.checkGroupMembers(np, nst, g)
			if err != nil || next.ctl.SetProfileGroup(np.name, gid, ids) != nil {
				dropped++
				continue
			}
			gs := &groupState{maxSize: og.maxSize}
			nst.groups[gid] = gs
			members := make([]*p4v1.ActionProfileGroup_Member, len(og.members))
			for i, m := range og.members {
				members[i] = proto.Clone(m).(*p4v1.ActionProfileGroup_Member)
			}
			nst.setGroupMembers(gs, members)
		}
	}
	return dropped
}

// reconcileIndirectEntry installs old entry e of an indirect table in nt
// (whose profile has been reconciled), with the one-shot set it carries
// rebuilt; ok is false if it cannot be.
func reconcileIndirectEntry(old, next *pipelineState, nt *tableInfo, e *tableEntry, key []pipeline.Match) (os *oneShot, ok bool) {
	var ref pipeline.IndirectRef
	if e.oneShot != nil {
		set := &p4v1.ActionProfileActionSet{}
		for i, b := range e.oneShot.actions {
			act, ok := translateAction(old.schema, next.schema, nt, b, false)
			if !ok {
				return nil, false
			}
			a, err := next.schema.actionProto(act)
			if err != nil {
				return nil, false
			}
			set.ActionProfileActions = append(set.ActionProfileActions, &p4v1.ActionProfileAction{Action: a, Weight: e.oneShot.weights[i]})
		}
		var err error
		if os, err = next.buildOneShot(nt, set); err != nil {
			return nil, false
		}
		ref = pipeline.IndirectRef{Kind: pipeline.IndirectGroup, ID: os.group}
	} else {
		var err error
		if ref, err = next.indirectRef(nt, indirectAction(e.ref)); err != nil {
			return nil, false
		}
	}
	if next.ctl.AddIndirectEntry(nt.name, key, e.priority, ref) != nil {
		next.dropOneShot(nt, os)
		return nil, false
	}
	next.reference(nt, &ref, +1)
	return os, true
}

// reconcileValueSets carries value sets into next by name when their
// fields are unchanged; it returns how many non-empty sets it dropped.
func reconcileValueSets(old, next *pipelineState) int {
	dropped := 0
	newSets := map[string]*valueSetInfo{}
	for _, v := range next.schema.valueSets {
		newSets[v.name] = v
	}
	for _, id := range old.schema.valueSetIDs {
		ov := old.schema.valueSets[id]
		members, err := old.members(ov)
		if err != nil {
			dropped++
			continue
		}
		if len(members) == 0 {
			continue
		}
		nv := newSets[ov.name]
		if nv == nil || nv.problem != "" || !sameKey(ov.match, nv.match) || (nv.size > 0 && len(members) > nv.size) {
			dropped++
			continue
		}
		ems := make([]pipeline.ValueSetMember, 0, len(members))
		for _, m := range members {
			em, err := compressed(nv.match, m)
			if err != nil {
				break
			}
			ems = append(ems, em)
		}
		if len(ems) != len(members) || next.ctl.SetValueSet(nv.name, ems) != nil {
			dropped++
			continue
		}
	}
	return dropped
}
