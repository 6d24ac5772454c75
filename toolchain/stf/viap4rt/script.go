package viap4rt

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxSettle bounds how long one batch of packets may take to come out.
const maxSettle = 3 * time.Second

// expectation is one "expect PORT HEX" line: nibbles with '*' wildcards,
// exact end when the line ends in '$'.
type expectation struct {
	line   int
	port   uint32
	nibble string
	exact  bool
}

func (e expectation) matches(frame []byte) bool {
	got := hex.EncodeToString(frame)
	if len(got) < len(e.nibble) || e.exact && len(got) != len(e.nibble) {
		return false
	}
	for i := 0; i < len(e.nibble); i++ {
		if e.nibble[i] != '*' && e.nibble[i] != got[i] {
			return false
		}
	}
	return true
}

// RunScript runs an STF script against the loaded program: packets go in
// on the veths, control-plane commands become P4Runtime writes, and the
// frames that come out must be exactly the expected ones, in order per
// port. Outputs are checked whenever the script changes the control plane,
// at "wait", and at the end (each time after the settle time). The error
// says which line failed and why.
func (d *Device) RunScript(ctx context.Context, script string) error {
	var pending []expectation
	sent := 0
	check := func() error {
		if sent == 0 && len(pending) == 0 {
			return nil
		}
		got := d.Collect(maxSettle)
		sent = 0
		err := compare(pending, got)
		pending = nil
		return err
	}
	for n, raw := range strings.Split(script, "\n") {
		line := n + 1
		text := strings.TrimSpace(raw)
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		if text == "" {
			continue
		}
		cmd, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		fail := func(err error) error { return fmt.Errorf("line %d (%s): %v", line, cmd, err) }
		switch cmd {
		case "packet":
			port, data, err := portAndHex(rest)
			if err != nil {
				return fail(err)
			}
			frame, err := hex.DecodeString(data)
			if err != nil {
				return fail(err)
			}
			if err := d.Send(port, frame); err != nil {
				return fail(err)
			}
			sent++
		case "expect":
			port, data, err := portAndHex(rest)
			if err != nil {
				return fail(err)
			}
			e := expectation{line: line, port: port, nibble: strings.ToLower(data)}
			if strings.HasSuffix(e.nibble, "$") {
				e.exact, e.nibble = true, strings.TrimSuffix(e.nibble, "$")
			}
			pending = append(pending, e)
		case "wait":
			if err := check(); err != nil {
				return err
			}
		default:
			// Control-plane changes apply to the packets after them.
			if err := check(); err != nil {
				return err
			}
			if err := d.command(ctx, cmd, rest); err != nil {
				return fail(err)
			}
		}
	}
	return check()
}

func portAndHex(rest string) (uint32, string, error) {
	f := strings.Fields(rest)
	if len(f) < 1 {
		return 0, "", fmt.Errorf("missing port")
	}
	p, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil {
		return 0, "", fmt.Errorf("bad port %q", f[0])
	}
	return uint32(p), strings.Join(f[1:], ""), nil
}

// compare matches expectations to outputs, per port, in order.
func compare(want []expectation, got map[uint32][][]byte) error {
	byPort := map[uint32][]expectation{}
	for _, e := range want {
		byPort[e.port] = append(byPort[e.port], e)
	}
	var ports []uint32
	for p := range byPort {
		ports = append(ports, p)
	}
	for p := range got {
		if _, ok := byPort[p]; !ok {
			ports = append(ports, p)
		}
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	for _, p := range ports {
		es, fs := byPort[p], got[p]
		for i, e := range es {
			if i >= len(fs) {
				return fmt.Errorf("line %d: expected packet on port %d did not come out", e.line, p)
			}
			if !e.matches(fs[i]) {
				return fmt.Errorf("line %d: port %d got %x, want %s", e.line, p, fs[i], e.nibble)
			}
		}
		if len(fs) > len(es) {
			return fmt.Errorf("unexpected packet on port %d: %x", p, fs[len(es)])
		}
	}
	return nil
}

// command runs one control-plane command.
func (d *Device) command(ctx context.Context, cmd, rest string) error {
	f := strings.Fields(rest)
	num := func(i int) (uint32, error) {
		if i >= len(f) {
			return 0, fmt.Errorf("missing argument %d", i+1)
		}
		v, err := strconv.ParseUint(f[i], 0, 32)
		return uint32(v), err
	}
	switch cmd {
	case "add":
		table, prio, keys, action, args, err := parseAdd(rest)
		if err != nil {
			return err
		}
		return d.AddEntry(ctx, table, prio, keys, action, args)
	case "setdefault":
		table, call, ok := strings.Cut(rest, " ")
		if !ok {
			return fmt.Errorf("want: setdefault TABLE ACTION(ARGS)")
		}
		action, args, err := parseCall(strings.TrimSpace(call))
		if err != nil {
			return err
		}
		return d.SetDefault(ctx, table, action, args)
	case "mirroring_add":
		s, err := num(0)
		if err != nil {
			return err
		}
		p, err := num(1)
		if err != nil {
			return err
		}
		return d.MirroringAdd(ctx, s, p)
	case "mc_mgrp_create":
		g, err := num(0)
		if err != nil {
			return err
		}
		return d.McGroupCreate(ctx, g)
	case "mc_node_create":
		rid, err := num(0)
		if err != nil {
			return err
		}
		var ports []uint32
		for i := 1; i < len(f); i++ {
			p, err := num(i)
			if err != nil {
				return err
			}
			ports = append(ports, p)
		}
		d.McNodeCreate(rid, ports)
		return nil
	case "mc_node_associate":
		g, err := num(0)
		if err != nil {
			return err
		}
		node, err := num(1)
		if err != nil {
			return err
		}
		return d.McNodeAssociate(ctx, g, int(node))
	default:
		return fmt.Errorf("command %q is not supported by the P4Runtime path", cmd)
	}
}

// parseAdd splits "TABLE [PRIO] k:v ... ACTION(a:v, ...)".
func parseAdd(rest string) (table string, prio int, keys []Key, action string, args []Arg, err error) {
	open := strings.IndexByte(rest, '(')
	if open < 0 {
		return "", 0, nil, "", nil, fmt.Errorf("no action call")
	}
	head := strings.Fields(rest[:open])
	if len(head) < 2 {
		return "", 0, nil, "", nil, fmt.Errorf("want: add TABLE [PRIORITY] KEY... ACTION(ARGS)")
	}
	table, action = head[0], head[len(head)-1]
	prio = -1
	ks := head[1 : len(head)-1]
	if len(ks) > 0 && !strings.Contains(ks[0], ":") {
		if prio, err = strconv.Atoi(ks[0]); err != nil {
			return "", 0, nil, "", nil, fmt.Errorf("bad priority %q", ks[0])
		}
		ks = ks[1:]
	}
	for _, k := range ks {
		name, v, ok := strings.Cut(k, ":")
		if !ok {
			return "", 0, nil, "", nil, fmt.Errorf("bad key %q", k)
		}
		keys = append(keys, Key{Field: name, Value: v})
	}
	_, args, err = parseCall(action + rest[open:])
	return table, prio, keys, action, args, err
}

// parseCall splits "ACTION(a:v, b:w)".
func parseCall(s string) (string, []Arg, error) {
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return "", nil, fmt.Errorf("bad action call %q", s)
	}
	var args []Arg
	for _, a := range strings.Split(s[open+1:close], ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		name, v, ok := strings.Cut(a, ":")
		if !ok {
			return "", nil, fmt.Errorf("bad argument %q", a)
		}
		args = append(args, Arg{Name: strings.TrimSpace(name), Value: strings.TrimSpace(v)})
	}
	return strings.TrimSpace(s[:open]), args, nil
}
