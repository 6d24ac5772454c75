package viap4rt

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// Key is one "field:value" of an STF add command, value as written
// ("0x0a000001", "0x0a000000/8", "0x****0101", "0x10&&&0xf0", "1->5").
type Key struct {
	Field, Value string
}

// Arg is one "name:value" action argument.
type Arg struct {
	Name, Value string
}

func (d *Device) ready() error {
	if d.idx == nil {
		return errors.New("no program loaded")
	}
	return nil
}

func (d *Device) actionCall(t *p4configv1.Table, action string, args []Arg) (*p4v1.Action, error) {
	a, err := d.idx.action(t, action)
	if err != nil {
		return nil, err
	}
	call := &p4v1.Action{ActionId: a.GetPreamble().GetId()}
	for _, arg := range args {
		var p *p4configv1.Action_Param
		for _, cand := range a.GetParams() {
			if cand.GetName() == arg.Name {
				p = cand
			}
		}
		if p == nil {
			return nil, fmt.Errorf("action %s has no parameter %q", a.GetPreamble().GetName(), arg.Name)
		}
		v, err := parseNumber(arg.Value, int(p.GetBitwidth()))
		if err != nil {
			return nil, err
		}
		call.Params = append(call.Params, &p4v1.Action_Param{ParamId: p.GetId(), Value: bytesOf(v.v)})
	}
	return call, nil
}

// needsPriority: ternary, range and optional fields order entries.
func needsPriority(t *p4configv1.Table) bool {
	for _, f := range t.GetMatchFields() {
		switch f.GetMatchType() {
		case p4configv1.MatchField_TERNARY, p4configv1.MatchField_RANGE, p4configv1.MatchField_OPTIONAL:
			return true
		}
	}
	return false
}

// AddEntry is STF "add TABLE [PRIORITY] KEY... ACTION(ARGS)". priority < 0
// means the script gave none. In STF a larger priority wins, as in
// P4Runtime; P4Runtime needs it positive, so it is sent as priority+1.
func (d *Device) AddEntry(ctx context.Context, table string, priority int, keys []Key, action string, args []Arg) error {
	if err := d.ready(); err != nil {
		return err
	}
	t, err := d.idx.table(table)
	if err != nil {
		return err
	}
	te := &p4v1.TableEntry{TableId: t.GetPreamble().GetId()}
	for _, k := range keys {
		f, err := d.idx.field(t, k.Field)
		if err != nil {
			return err
		}
		fm, err := fieldMatch(f, k.Value)
		if err != nil {
			return fmt.Errorf("%s: %v", k.Field, err)
		}
		if fm != nil {
			te.Match = append(te.Match, fm)
		}
	}
	if needsPriority(t) {
		te.Priority = 1
		if priority >= 0 {
			te.Priority = int32(priority) + 1
		}
	}
	call, err := d.actionCall(t, action, args)
	if err != nil {
		return err
	}
	te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: call}}
	return d.Write(ctx, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}})
}

// SetDefault is STF "setdefault TABLE ACTION(ARGS)".
func (d *Device) SetDefault(ctx context.Context, table, action string, args []Arg) error {
	if err := d.ready(); err != nil {
		return err
	}
	t, err := d.idx.table(table)
	if err != nil {
		return err
	}
	call, err := d.actionCall(t, action, args)
	if err != nil {
		return err
	}
	te := &p4v1.TableEntry{TableId: t.GetPreamble().GetId(), IsDefaultAction: true,
		Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: call}}}
	return d.Write(ctx, &p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}})
}

func preEntity(e *p4v1.PacketReplicationEngineEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: e}}
}

// MirroringAdd is STF "mirroring_add SESSION PORT": a clone session with
// one replica.
func (d *Device) MirroringAdd(ctx context.Context, session, port uint32) error {
	if err := d.ready(); err != nil {
		return err
	}
	typ := p4v1.Update_INSERT
	if d.clones[session] {
		typ = p4v1.Update_MODIFY
	}
	e := preEntity(&p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{
		CloneSessionEntry: &p4v1.CloneSessionEntry{SessionId: session,
			Replicas: []*p4v1.Replica{{PortKind: &p4v1.Replica_Port{Port: bytesOf(new(big.Int).SetUint64(uint64(port)))}}}}}})
	if err := d.Write(ctx, &p4v1.Update{Type: typ, Entity: e}); err != nil {
		return err
	}
	d.clones[session] = true
	return nil
}

// McGroupCreate is STF "mc_mgrp_create GROUP".
func (d *Device) McGroupCreate(ctx context.Context, group uint32) error {
	if err := d.ready(); err != nil {
		return err
	}
	if _, ok := d.groups[group]; ok {
		return fmt.Errorf("multicast group %d exists", group)
	}
	if err := d.writeGroup(ctx, p4v1.Update_INSERT, group, nil); err != nil {
		return err
	}
	d.groups[group] = []int{}
	return nil
}

// McNodeCreate is STF "mc_node_create RID PORT...": it returns the node
// handle (0, 1, … in creation order, as BMv2 numbers them).
func (d *Device) McNodeCreate(rid uint32, ports []uint32) int {
	d.nodes = append(d.nodes, mcNode{rid: rid, ports: append([]uint32(nil), ports...)})
	return len(d.nodes) - 1
}

// McNodeAssociate is STF "mc_node_associate GROUP NODE": the group's
// replicas become those of its nodes.
func (d *Device) McNodeAssociate(ctx context.Context, group uint32, node int) error {
	if err := d.ready(); err != nil {
		return err
	}
	nodes, ok := d.groups[group]
	if !ok {
		return fmt.Errorf("no multicast group %d", group)
	}
	if node < 0 || node >= len(d.nodes) {
		return fmt.Errorf("no multicast node %d", node)
	}
	nodes = append(nodes, node)
	if err := d.writeGroup(ctx, p4v1.Update_MODIFY, group, nodes); err != nil {
		return err
	}
	d.groups[group] = nodes
	return nil
}

func (d *Device) writeGroup(ctx context.Context, typ p4v1.Update_Type, group uint32, nodes []int) error {
	g := &p4v1.MulticastGroupEntry{MulticastGroupId: group}
	seen := map[[2]uint32]bool{}
	for _, n := range nodes {
		for _, p := range d.nodes[n].ports {
			k := [2]uint32{p, d.nodes[n].rid}
			if seen[k] {
				continue
			}
			seen[k] = true
			g.Replicas = append(g.Replicas, &p4v1.Replica{
				PortKind: &p4v1.Replica_Port{Port: bytesOf(new(big.Int).SetUint64(uint64(p)))}, Instance: d.nodes[n].rid})
		}
	}
	return d.Write(ctx, &p4v1.Update{Type: typ, Entity: preEntity(&p4v1.PacketReplicationEngineEntry{
		Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: g}})})
}
