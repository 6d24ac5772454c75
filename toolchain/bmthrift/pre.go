package bmthrift

import (
	"context"
	"encoding/json"
	"slices"
	"sort"

	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/simple_pre_lag"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// The multicast engine (simple_pre_lag.thrift). BMv2's PRE has nodes (an
// L1 handle: a rid and a set of ports and LAGs) associated to groups; the
// engine has groups of replicas (port, rid). This server keeps the nodes
// and writes each group through to the engine as the replicas BMv2 makes
// for it: its nodes in the order they were associated, each node's ports
// ascending. A group P4Runtime wrote (or changed) is read as nodes the way
// PI writes one: a node per run of replicas with the same rid; they get
// handles when first seen.
//
// A LAG in a node: BMv2 replicates to one member port chosen by hashing
// the packet; the engine's replica lists are fixed, so a LAG stands for
// its lowest member port (docs/bmv2.md).

type mcNode struct {
	rid     uint32
	ports   []uint32 // ascending
	lags    []uint32 // ascending
	group   uint32
	assoc   bool
	adopted bool // made from a group P4Runtime wrote
}

type mcState struct {
	groups map[uint32][]uint32 // mgid -> L1 handles, in association order
	nodes  map[uint32]*mcNode
	lags   map[uint32][]uint32           // LAG index -> ports
	wrote  map[uint32][]pipeline.Replica // what was last written for each group
	// mirrors: mirroring sessions to a group (mirroring_add_mc), by
	// session id; rewritten with the group's replicas when this server
	// changes the group.
	mirrors map[uint32]uint32
}

func newMCState() *mcState {
	return &mcState{groups: map[uint32][]uint32{}, nodes: map[uint32]*mcNode{}, lags: map[uint32][]uint32{},
		wrote: map[uint32][]pipeline.Replica{}, mirrors: map[uint32]uint32{}}
}

// pre implements simple_pre_lag.thrift's SimplePreLAG service.
type pre struct{ s *Server }

var _ simple_pre_lag.SimplePreLAG = (*pre)(nil)

func mcErr(code simple_pre_lag.McOperationErrorCode) error {
	return &simple_pre_lag.InvalidMcOperation{Code: code}
}

// state returns the pipeline and the nodes, brought in line with the
// groups the engine holds. Callers hold s.mu.
func (h *pre) state() (*engine.Pipeline, *mcState, error) {
	v, err := h.s.current()
	if err != nil {
		return nil, nil, mcErr(simple_pre_lag.McOperationErrorCode_ERROR)
	}
	mc := v.mc
	have := map[uint32]bool{}
	for _, g := range v.pl.MulticastGroups() {
		have[g] = true
		reps, _ := v.pl.MulticastGroup(g)
		if w, ok := mc.wrote[g]; ok && slices.Equal(w, reps) {
			continue
		}
		mc.adopt(g, reps)
	}
	for g := range mc.groups {
		if !have[g] {
			mc.forget(g)
		}
	}
	return v.pl, mc, nil
}

func (mc *mcState) newHandle() uint32 { return lowestFree(mc.nodes) }

// adopt replaces group g's nodes by nodes read from the replicas another
// control plane wrote.
func (mc *mcState) adopt(g uint32, reps []pipeline.Replica) {
	mc.forget(g)
	var l1s []uint32
	for i := 0; i < len(reps); {
		j := i
		n := &mcNode{rid: reps[i].Rid, group: g, assoc: true, adopted: true}
		for ; j < len(reps) && reps[j].Rid == reps[i].Rid; j++ {
			if !slices.Contains(n.ports, reps[j].Port) {
				n.ports = append(n.ports, reps[j].Port)
			}
		}
		slices.Sort(n.ports)
		hd := mc.newHandle()
		mc.nodes[hd] = n
		l1s = append(l1s, hd)
		i = j
	}
	mc.groups[g] = l1s
	mc.wrote[g] = slices.Clone(reps)
}

// forget drops group g: nodes made from it go, the others are no longer
// associated.
func (mc *mcState) forget(g uint32) {
	for _, hd := range mc.groups[g] {
		if n := mc.nodes[hd]; n != nil {
			if n.adopted {
				delete(mc.nodes, hd)
			} else {
				n.assoc = false
			}
		}
	}
	delete(mc.groups, g)
	delete(mc.wrote, g)
}

// replicas is what group g replicates to.
func (mc *mcState) replicas(g uint32) []pipeline.Replica {
	out := []pipeline.Replica{}
	seen := map[pipeline.Replica]bool{}
	add := func(r pipeline.Replica) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, hd := range mc.groups[g] {
		n := mc.nodes[hd]
		for _, p := range n.ports {
			add(pipeline.Replica{Port: p, Rid: n.rid})
		}
		for _, l := range n.lags {
			if ps := mc.lags[l]; len(ps) > 0 {
				add(pipeline.Replica{Port: ps[0], Rid: n.rid})
			}
		}
	}
	return out
}

// write sends group g's replicas to the engine.
func (mc *mcState) write(pl *engine.Pipeline, g uint32) error {
	reps := mc.replicas(g)
	if err := pl.SetMulticastGroup(g, reps); err != nil {
		return mcErr(simple_pre_lag.McOperationErrorCode_ERROR)
	}
	mc.wrote[g] = reps
	for id, mg := range mc.mirrors {
		if mg == g {
			if cs, ok := pl.CloneSessionConfig(id); ok {
				cs.Replicas = append([]pipeline.Replica(nil), reps...)
				_ = pl.SetCloneSession(id, cs)
			}
		}
	}
	return nil
}

// bitmap reads BMv2's port and LAG maps: a string of 0s and 1s whose last
// character is port 0.
func bitmap(s string) []uint32 {
	var out []uint32
	for i := 0; i < len(s); i++ {
		if s[len(s)-1-i] == '1' {
			out = append(out, uint32(i))
		}
	}
	return out
}

func (h *pre) lock() func() {
	h.s.mu.Lock()
	return h.s.mu.Unlock
}

func (h *pre) BmMcMgrpCreate(_ context.Context, _ int32, mgrp simple_pre_lag.BmMcMgrp) (simple_pre_lag.BmMcMgrpHandle, error) {
	defer h.lock()()
	pl, mc, err := h.state()
	if err != nil {
		return 0, err
	}
	g := uint32(mgrp)
	if mgrp <= 0 {
		// the engine's group 0 is "no multicast" (mcast_grp 0), as in P4Runtime
		return 0, mcErr(simple_pre_lag.McOperationErrorCode_INVALID_MGID)
	}
	if _, ok := mc.groups[g]; !ok {
		// BMv2 keeps an existing group as it is
		mc.groups[g] = nil
		if err := mc.write(pl, g); err != nil {
			delete(mc.groups, g)
			return 0, err
		}
	}
	return simple_pre_lag.BmMcMgrpHandle(g), nil
}

func (h *pre) BmMcMgrpDestroy(_ context.Context, _ int32, mgrp simple_pre_lag.BmMcMgrpHandle) error {
	defer h.lock()()
	pl, mc, err := h.state()
	if err != nil {
		return err
	}
	g := uint32(mgrp)
	if _, ok := mc.groups[g]; !ok {
		return nil // as BMv2: destroying an unknown group is no error
	}
	mc.forget(g)
	_ = pl.DeleteMulticastGroup(g)
	return nil
}

func (h *pre) BmMcNodeCreate(_ context.Context, _ int32, rid simple_pre_lag.BmMcRid, ports simple_pre_lag.BmMcPortMap, lags simple_pre_lag.BmMcLagMap) (simple_pre_lag.BmMcL1Handle, error) {
	defer h.lock()()
	_, mc, err := h.state()
	if err != nil {
		return 0, err
	}
	hd := mc.newHandle()
	mc.nodes[hd] = &mcNode{rid: uint32(rid), ports: bitmap(string(ports)), lags: bitmap(string(lags))}
	return simple_pre_lag.BmMcL1Handle(hd), nil
}

func (h *pre) node(mc *mcState, l1 simple_pre_lag.BmMcL1Handle) (uint32, *mcNode, error) {
	n, ok := mc.nodes[uint32(l1)]
	if !ok || l1 < 0 {
		return 0, nil, mcErr(simple_pre_lag.McOperationErrorCode_INVALID_L1_HANDLE)
	}
	return uint32(l1), n, nil
}

func (h *pre) BmMcNodeAssociate(_ context.Context, _ int32, mgrp simple_pre_lag.BmMcMgrpHandle, l1 simple_pre_lag.BmMcL1Handle) error {
	defer h.lock()()
	pl, mc, err := h.state()
	if err != nil {
		return err
	}
	hd, n, err := h.node(mc, l1)
	if err != nil {
		return err
	}
	g := uint32(mgrp)
	if _, ok := mc.groups[g]; !ok {
		return mcErr(simple_pre_lag.McOperationErrorCode_INVALID_MGRP_HANDLE)
	}
	if n.assoc {
		return mcErr(simple_pre_lag.McOperationErrorCode_ERROR)
	}
	n.assoc, n.group = true, g
	mc.groups[g] = append(mc.groups[g], hd)
	return mc.write(pl, g)
}

// dissociate removes node hd from its group and rewrites the group.
func (mc *mcState) dissociate(pl *engine.Pipeline, hd uint32, n *mcNode) error {
	g := n.group
	mc.groups[g] = slices.DeleteFunc(mc.groups[g], func(x uint32) bool { return x == hd })
	n.assoc = false
	return mc.write(pl, g)
}

func (h *pre) BmMcNodeDissociate(_ context.Context, _ int32, mgrp simple_pre_lag.BmMcMgrpHandle, l1 simple_pre_lag.BmMcL1Handle) error {
	defer h.lock()()
	pl, mc, err := h.state()
	if err != nil {
		return err
	}
	hd, n, err := h.node(mc, l1)
	if err != nil {
		return err
	}
	if _, ok := mc.groups[uint32(mgrp)]; !ok {
		return mcErr(simple_pre_lag.McOperationErrorCode_INVALID_MGRP_HANDLE)
	}
	if !n.assoc || n.group != uint32(mgrp) {
		return mcErr(simple_pre_lag.McOperationErrorCode_ERROR)
	}
	return mc.dissociate(pl, hd, n)
}

func (h *pre) BmMcNodeDestroy(_ context.Context, _ int32, l1 simple_pre_lag.BmMcL1Handle) error {
	defer h.lock()()
	pl, mc, err := h.state()
	if err != nil {
		return err
	}
	hd, n, err := h.node(mc, l1)
	if err != nil {
		return err
	}
	if n.assoc {
		// BMv2 lets a node be destroyed without dissociating it first
		if err := mc.dissociate(pl, hd, n); err != nil {
			return err
		}
	}
	delete(mc.nodes, hd)
	return nil
}

func (h *pre) BmMcNodeUpdate(_ context.Context, _ int32, l1 simple_pre_lag.BmMcL1Handle, ports simple_pre_lag.BmMcPortMap, lags simple_pre_lag.BmMcLagMap) error {
	defer h.lock()()
	pl, mc, err := h.state()
	if err != nil {
		return err
	}
	_, n, err := h.node(mc, l1)
	if err != nil {
		return err
	}
	n.ports, n.lags = bitmap(string(ports)), bitmap(string(lags))
	if n.assoc {
		return mc.write(pl, n.group)
	}
	return nil
}

func (h *pre) BmMcSetLagMembership(_ context.Context, _ int32, lag simple_pre_lag.BmMcLagIndex, ports simple_pre_lag.BmMcPortMap) error {
	defer h.lock()()
	pl, mc, err := h.state()
	if err != nil {
		return err
	}
	if lag < 0 {
		return mcErr(simple_pre_lag.McOperationErrorCode_ERROR)
	}
	mc.lags[uint32(lag)] = bitmap(string(ports))
	for g := range mc.groups {
		if err := mc.write(pl, g); err != nil {
			return err
		}
	}
	return nil
}

type mcJSON struct {
	Mgrps []struct {
		ID        uint32   `json:"id"`
		L1Handles []uint32 `json:"l1_handles"`
	} `json:"mgrps"`
	L1Handles []struct {
		Handle   uint32 `json:"handle"`
		Rid      uint32 `json:"rid"`
		L2Handle uint32 `json:"l2_handle"`
	} `json:"l1_handles"`
	L2Handles []struct {
		Handle uint32   `json:"handle"`
		Ports  []uint32 `json:"ports"`
		Lags   []uint32 `json:"lags"`
	} `json:"l2_handles"`
	Lags []struct {
		ID    uint32   `json:"id"`
		Ports []uint32 `json:"ports"`
	} `json:"lags"`
}

// BmMcGetEntries answers in the JSON BMv2 answers with (the CLI's
// mc_dump reads it), each list sorted by id or handle as BMv2's maps are.
func (h *pre) BmMcGetEntries(_ context.Context, _ int32) (string, error) {
	defer h.lock()()
	_, mc, err := h.state()
	if err != nil {
		return "", err
	}
	var out mcJSON
	// empty lists, not null: the CLI iterates them
	_ = json.Unmarshal([]byte(`{"mgrps":[],"l1_handles":[],"l2_handles":[],"lags":[]}`), &out)
	nz := func(s []uint32) []uint32 {
		if s == nil {
			return []uint32{}
		}
		return s
	}
	for _, g := range sortedIDs(mc.groups) {
		out.Mgrps = append(out.Mgrps, struct {
			ID        uint32   `json:"id"`
			L1Handles []uint32 `json:"l1_handles"`
		}{g, nz(mc.groups[g])})
	}
	for _, hd := range sortedIDs(mc.nodes) {
		n := mc.nodes[hd]
		out.L1Handles = append(out.L1Handles, struct {
			Handle   uint32 `json:"handle"`
			Rid      uint32 `json:"rid"`
			L2Handle uint32 `json:"l2_handle"`
		}{hd, n.rid, hd})
		out.L2Handles = append(out.L2Handles, struct {
			Handle uint32   `json:"handle"`
			Ports  []uint32 `json:"ports"`
			Lags   []uint32 `json:"lags"`
		}{hd, nz(n.ports), nz(n.lags)})
	}
	lags := make([]uint32, 0, len(mc.lags))
	for l := range mc.lags {
		lags = append(lags, l)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	for _, l := range lags {
		out.Lags = append(out.Lags, struct {
			ID    uint32   `json:"id"`
			Ports []uint32 `json:"ports"`
		}{l, nz(mc.lags[l])})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", mcErr(simple_pre_lag.McOperationErrorCode_ERROR)
	}
	return string(b), nil
}
