package stf

import (
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Run executes an STF script on a started backend and compares the output
// the way bmv2stf.py does: per port, the frames received must be exactly
// the frames expected, in order; ports the script never mentions are not
// observed; "expect PORT" without data accepts any number of frames.
// It returns nil when the test passes, otherwise the first failure.
func Run(b Backend, prog *Program, cmds []Command, log io.Writer) error {
	st := &runState{b: b, prog: prog, pl: prog.Model, handles: map[string]entryRef{}, log: log}
	if log == nil {
		st.log = io.Discard
	}
	ports := map[uint32]bool{}
	expected := map[uint32][]string{}
	anyPorts := map[uint32]bool{}
	for _, c := range cmds {
		switch c.Op {
		case "packet", "expect":
			ports[c.Port] = true
		}
	}
	for _, c := range cmds {
		fmt.Fprintf(st.log, "  %d: %s\n", c.Line, c.Text)
		switch c.Op {
		case "packet":
			if err := b.Send(c.Port, hexBytes(c.Data)); err != nil {
				return fmt.Errorf("line %d: send: %v", c.Line, err)
			}
		case "expect":
			if c.AnyLen {
				anyPorts[c.Port] = true
			} else {
				expected[c.Port] = append(expected[c.Port], c.Data)
			}
		case "wait":
			if err := b.Wait(); err != nil {
				return fmt.Errorf("line %d: wait: %v", c.Line, err)
			}
		default:
			if err := st.control(c); err != nil {
				return fmt.Errorf("line %d: %s: %v", c.Line, c.Op, err)
			}
		}
	}
	if err := b.Wait(); err != nil {
		return fmt.Errorf("wait: %v", err)
	}
	outs, err := b.Outputs()
	if err != nil {
		return err
	}
	got := map[uint32][][]byte{}
	for _, o := range outs {
		fmt.Fprintf(st.log, "  out %d: %X\n", o.Port, o.Data)
		if ports[o.Port] {
			got[o.Port] = append(got[o.Port], o.Data)
		}
	}
	var portList []uint32
	for p := range ports {
		portList = append(portList, p)
	}
	sort.Slice(portList, func(i, j int) bool { return portList[i] < portList[j] })
	for _, p := range portList {
		if anyPorts[p] {
			continue
		}
		exp, rcv := expected[p], got[p]
		if len(exp) != len(rcv) {
			return fmt.Errorf("expected %d packets on port %d, got %d%s", len(exp), p, len(rcv), firstDiff(exp, rcv))
		}
		for i := range exp {
			if err := comparePacket(exp[i], rcv[i]); err != nil {
				return fmt.Errorf("packet %d on port %d: %v", i, p, err)
			}
		}
	}
	return nil
}

func firstDiff(exp []string, rcv [][]byte) string {
	var sb strings.Builder
	if len(rcv) > 0 {
		fmt.Fprintf(&sb, "; first received %X", rcv[0])
	}
	// The frames past the expected count are the surprise: show them.
	for i := len(exp); i < len(rcv) && i < len(exp)+3; i++ {
		if i > 0 {
			fmt.Fprintf(&sb, "; received #%d %X", i+1, rcv[i])
		}
	}
	if len(exp) > 0 {
		fmt.Fprintf(&sb, "; first expected %s", strings.ToUpper(exp[0]))
	}
	return sb.String()
}

// comparePacket follows bmv2stf.py's comparePacket: hex digit by hex digit,
// '*' matches anything, a received packet may be longer unless the
// expectation ends with '$'.
func comparePacket(expected string, received []byte) error {
	rcv := strings.ToUpper(hex.EncodeToString(received))
	exp := strings.ToUpper(expected)
	strict := strings.HasSuffix(exp, "$")
	exp = strings.TrimSuffix(exp, "$")
	if len(rcv) < len(exp) {
		return fmt.Errorf("received packet too short (%d vs %d hex digits): got %s, want %s", len(rcv), len(exp), rcv, exp)
	}
	for i := 0; i < len(exp); i++ {
		if exp[i] == '*' {
			continue
		}
		if exp[i] != rcv[i] {
			return fmt.Errorf("differs at hex digit %d: got %s, want %s", i, rcv, exp)
		}
	}
	if strict && len(rcv) > len(exp) {
		return fmt.Errorf("received packet too long (%d vs %d hex digits): got %s, want %s", len(rcv), len(exp), rcv, exp)
	}
	return nil
}

// hexBytes converts STF packet hex (validated by the parser) to bytes; an
// odd trailing digit becomes a byte of its own, as bmv2stf.py's HexToByte
// does.
func hexBytes(s string) []byte {
	out := make([]byte, 0, (len(s)+1)/2)
	for i := 0; i < len(s); i += 2 {
		j := min(i+2, len(s))
		v, _ := strconv.ParseUint(s[i:j], 16, 8)
		out = append(out, byte(v))
	}
	return out
}

type entryRef struct {
	table pipeline.TableInfo
	match []pipeline.Match
	prio  int32
}

type runState struct {
	b       Backend
	prog    *Program
	pl      *engine.Pipeline
	handles map[string]entryRef
	added   []entryRef
	nodes   []mcNode
	groups  map[uint32][]pipeline.Replica
	log     io.Writer
}

type mcNode struct {
	rid   uint32
	ports []uint32
}

func (st *runState) control(c Command) error {
	switch c.Op {
	case "add":
		t, err := lookupTable(st.pl.Tables(), c.Table)
		if err != nil {
			return err
		}
		match, err := st.matchOf(t, c.Keys)
		if err != nil {
			return err
		}
		act, err := st.actionCall(t, c.Action, c.Params)
		if err != nil {
			return err
		}
		var prio int32
		if c.Priority != nil {
			prio = *c.Priority
		}
		e := pipeline.TableEntry{Match: match, Priority: prio, Action: act}
		if err := st.b.AddEntry(t, e); err != nil {
			return err
		}
		ref := entryRef{table: t, match: match, prio: prio}
		st.added = append(st.added, ref)
		if c.Handle != "" {
			st.handles[c.Handle] = ref
		}
		return nil
	case "setdefault":
		t, err := lookupTable(st.pl.Tables(), c.Table)
		if err != nil {
			return err
		}
		act, err := st.actionCall(t, c.Action, c.Params)
		if err != nil {
			return err
		}
		return st.b.SetDefault(t, act)
	case "remove":
		if len(c.Args) == 0 {
			return fmt.Errorf("remove what?")
		}
		if strings.EqualFold(c.Args[0], "all") {
			for _, ref := range st.added {
				if err := st.b.DeleteEntry(ref.table, ref.match, ref.prio); err != nil && engine.ErrorCodeOf(err) != engine.CodeNotFound {
					return err
				}
			}
			st.added = nil
			return nil
		}
		t, err := lookupTable(st.pl.Tables(), c.Args[0])
		if err != nil {
			return err
		}
		var keys []KeyArg
		var prio int32
		for _, a := range c.Args[1:] {
			if isAllDigits(a) {
				v, _ := strconv.ParseInt(a, 10, 32)
				prio = int32(v)
				continue
			}
			i := strings.IndexByte(a, ':')
			if i <= 0 {
				return fmt.Errorf("bad key %q", a)
			}
			keys = append(keys, KeyArg{Name: a[:i], Value: a[i+1:]})
		}
		match, err := st.matchOf(t, keys)
		if err != nil {
			return err
		}
		return st.b.DeleteEntry(t, match, prio)
	case "mirroring_add":
		if len(c.Args) < 2 {
			return fmt.Errorf("usage: mirroring_add SESSION PORT")
		}
		id, err1 := strconv.ParseUint(c.Args[0], 0, 32)
		port, err2 := strconv.ParseUint(c.Args[1], 0, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad session or port")
		}
		return st.b.SetCloneSession(uint32(id), pipeline.CloneSession{Replicas: []pipeline.Replica{{Port: uint32(port)}}})
	case "mc_mgrp_create":
		if len(c.Args) < 1 {
			return fmt.Errorf("usage: mc_mgrp_create GROUP")
		}
		g, err := strconv.ParseUint(c.Args[0], 0, 32)
		if err != nil {
			return fmt.Errorf("bad group %q", c.Args[0])
		}
		if st.groups == nil {
			st.groups = map[uint32][]pipeline.Replica{}
		}
		st.groups[uint32(g)] = nil
		return st.b.SetMulticastGroup(uint32(g), nil)
	case "mc_node_create":
		if len(c.Args) < 1 {
			return fmt.Errorf("usage: mc_node_create RID PORT...")
		}
		rid, err := strconv.ParseUint(c.Args[0], 0, 32)
		if err != nil {
			return fmt.Errorf("bad rid %q", c.Args[0])
		}
		n := mcNode{rid: uint32(rid)}
		for _, a := range c.Args[1:] {
			p, err := strconv.ParseUint(a, 0, 32)
			if err != nil {
				return fmt.Errorf("bad port %q", a)
			}
			n.ports = append(n.ports, uint32(p))
		}
		// BMv2 keeps a node's ports in a bitmap: replicas go out in
		// ascending port order.
		sort.Slice(n.ports, func(i, j int) bool { return n.ports[i] < n.ports[j] })
		st.nodes = append(st.nodes, n)
		return nil
	case "mc_node_associate":
		if len(c.Args) < 2 {
			return fmt.Errorf("usage: mc_node_associate GROUP NODE")
		}
		g, err1 := strconv.ParseUint(c.Args[0], 0, 32)
		h, err2 := strconv.ParseUint(c.Args[1], 0, 32)
		if err1 != nil || err2 != nil || int(h) >= len(st.nodes) {
			return fmt.Errorf("bad group or node handle")
		}
		if st.groups == nil {
			st.groups = map[uint32][]pipeline.Replica{}
		}
		for _, p := range st.nodes[h].ports {
			st.groups[uint32(g)] = append(st.groups[uint32(g)], pipeline.Replica{Port: p, Rid: st.nodes[h].rid})
		}
		return st.b.SetMulticastGroup(uint32(g), st.groups[uint32(g)])
	case "check_counter":
		return st.checkCounter(c)
	case "no_packet":
		return nil
	}
	return fmt.Errorf("unsupported STF command %q", c.Op)
}

func (st *runState) matchOf(t pipeline.TableInfo, keys []KeyArg) ([]pipeline.Match, error) {
	match := make([]pipeline.Match, len(t.Keys))
	set := make([]bool, len(t.Keys))
	for _, k := range keys {
		i, err := lookupKey(t, k.Name)
		if err != nil {
			return nil, err
		}
		m, err := keyMatch(t.Keys[i], k.Value)
		if err != nil {
			return nil, fmt.Errorf("key %s: %v", k.Name, err)
		}
		match[i] = m
		set[i] = true
	}
	// Unspecified fields: bmv2stf.py uses 0&&&0 (ternary), 0/0 (lpm) and 0
	// (exact).
	for i, k := range t.Keys {
		if set[i] {
			continue
		}
		switch k.Kind {
		case pipeline.MatchExact, pipeline.MatchValid:
			match[i] = pipeline.Match{Value: []byte{0}}
		default:
			match[i] = pipeline.Match{Wildcard: true}
		}
	}
	return match, nil
}

func (st *runState) actionCall(t pipeline.TableInfo, name string, params []ParamArg) (pipeline.ActionCall, error) {
	a, err := lookupAction(st.pl, t, name)
	if err != nil {
		return pipeline.ActionCall{}, err
	}
	vals := make([][]byte, len(a.Params))
	given := map[string]string{}
	for _, p := range params {
		given[p.Name] = p.Value
	}
	for _, p := range params {
		ok := false
		for _, ap := range a.Params {
			if ap.Name == p.Name {
				ok = true
			}
		}
		if !ok {
			return pipeline.ActionCall{}, fmt.Errorf("action %s has no parameter %s", a.Name, p.Name)
		}
	}
	for i, ap := range a.Params {
		v, ok := given[ap.Name]
		if !ok {
			return pipeline.ActionCall{}, fmt.Errorf("action %s: missing parameter %s", a.Name, ap.Name)
		}
		b, err := parseNumber(v, ap.Bitwidth)
		if err != nil {
			return pipeline.ActionCall{}, fmt.Errorf("parameter %s: %v", ap.Name, err)
		}
		vals[i] = b
	}
	return pipeline.ActionCall{ActionID: a.ID, Params: vals}, nil
}

func (st *runState) checkCounter(c Command) error {
	var d pipeline.CounterData
	if strings.HasPrefix(c.Index, "$") {
		ref, ok := st.handles[c.Index[1:]]
		if !ok {
			return fmt.Errorf("unknown entry handle %s", c.Index)
		}
		var err error
		d, err = st.b.ReadDirectCounter(ref.table, ref.match, ref.prio)
		if err != nil {
			return err
		}
	} else {
		var ci *pipeline.CounterInfo
		cs := st.pl.Counters()
		for i := range cs {
			if cs[i].Name == c.Counter {
				ci = &cs[i]
			}
		}
		if ci == nil {
			for i := range cs {
				if strings.HasSuffix(cs[i].Name, "."+c.Counter) || strings.HasSuffix(cs[i].Name, c.Counter) {
					if ci != nil {
						return fmt.Errorf("counter name %s is ambiguous", c.Counter)
					}
					ci = &cs[i]
				}
			}
		}
		if ci == nil {
			return fmt.Errorf("no counter %s", c.Counter)
		}
		idx, err := strconv.Atoi(c.Index)
		if err != nil {
			return fmt.Errorf("bad counter index %q", c.Index)
		}
		if err := st.b.Wait(); err != nil {
			return err
		}
		d, err = st.b.ReadCounter(*ci, idx)
		if err != nil {
			return err
		}
	}
	v := d.Packets
	if c.CountTy == "bytes" {
		v = d.Bytes
	}
	ok := false
	switch c.Relation {
	case "==":
		ok = v == c.Value
	case "!=":
		ok = v != c.Value
	case "<":
		ok = v < c.Value
	case "<=":
		ok = v <= c.Value
	case ">":
		ok = v > c.Value
	case ">=":
		ok = v >= c.Value
	default:
		return fmt.Errorf("bad relation %q", c.Relation)
	}
	if !ok {
		ty := c.CountTy
		if ty == "" {
			ty = "packets"
		}
		return fmt.Errorf("counter %s(%s) %s is %d, want %s %d", c.Counter, c.Index, ty, v, c.Relation, c.Value)
	}
	return nil
}
