// Package stf runs p4lang STF packet test scripts (NAME.stf beside
// NAME.p4) against a P4 switch, the way p4c's backends/bmv2 test driver
// does against BMv2: the same commands, the same name matching rules, the
// same packet comparison (wildcard nibbles, "$" for an exact length).
//
// The switch is reached through a Backend; EngineBackend runs the program
// in-process on the toolchain's engine. Other backends (P4Runtime plus
// real interfaces) implement the same interface.
package stf

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Command is one STF line.
type Command struct {
	Line int
	Op   string // lower-case command word
	Args []string
	Text string // the line without comment

	// packet / expect
	Port   uint32
	Data   string // hex digits (expect: may contain '*' and end in '$')
	AnyLen bool   // expect with no data: any number of packets

	// add / setdefault / remove
	Table    string
	Priority *int32
	Keys     []KeyArg
	Action   string
	Params   []ParamArg
	Handle   string // "= ID" after an add

	// check_counter
	Counter  string
	Index    string // number or $handle
	CountTy  string // packets | bytes ("" = packets)
	Relation string
	Value    uint64
}

// KeyArg is "name:value" in an add command.
type KeyArg struct{ Name, Value string }

// ParamArg is "name:value" in an action call.
type ParamArg struct{ Name, Value string }

// ParseScript reads an STF file.
func ParseScript(r io.Reader) ([]Command, error) {
	var out []Command
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	ln := 0
	for sc.Scan() {
		ln++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		cmd, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", ln, err)
		}
		cmd.Line = ln
		cmd.Text = line
		out = append(out, cmd)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func parseLine(line string) (Command, error) {
	word, rest := nextWord(line)
	cmd := Command{Op: strings.ToLower(word)}
	switch cmd.Op {
	case "packet", "expect":
		port, data := nextWord(rest)
		if port == "" {
			if cmd.Op == "expect" {
				return cmd, fmt.Errorf("expect without a port")
			}
			return cmd, fmt.Errorf("packet without a port")
		}
		p, err := strconv.ParseUint(port, 10, 32)
		if err != nil {
			return cmd, fmt.Errorf("bad port %q", port)
		}
		cmd.Port = uint32(p)
		cmd.Data = strings.Join(strings.Fields(data), "")
		if cmd.Op == "expect" && cmd.Data == "" {
			cmd.AnyLen = true
		}
		if cmd.Op == "packet" {
			if err := checkHex(cmd.Data, false); err != nil {
				return cmd, err
			}
		} else if err := checkHex(strings.TrimSuffix(cmd.Data, "$"), true); err != nil {
			return cmd, err
		}
		return cmd, nil
	case "add":
		return parseAdd(cmd, rest)
	case "setdefault":
		t, r := nextWord(rest)
		if t == "" {
			return cmd, fmt.Errorf("setdefault without a table")
		}
		cmd.Table = t
		act, params, _, err := parseActionCall(r)
		if err != nil {
			return cmd, err
		}
		cmd.Action, cmd.Params = act, params
		return cmd, nil
	case "remove":
		// "remove all" or "remove TABLE key:value ... [priority]"
		cmd.Args = strings.Fields(rest)
		return cmd, nil
	case "check_counter":
		// check_counter NAME(INDEX) [packets|bytes OP VALUE]
		open := strings.IndexByte(rest, '(')
		close := strings.IndexByte(rest, ')')
		if open < 0 || close < open {
			return cmd, fmt.Errorf("check_counter needs NAME(INDEX)")
		}
		cmd.Counter = strings.TrimSpace(rest[:open])
		cmd.Index = strings.TrimSpace(rest[open+1 : close])
		f := strings.Fields(rest[close+1:])
		cmd.Relation = "=="
		switch len(f) {
		case 0:
		case 3:
			cmd.CountTy = strings.ToLower(f[0])
			cmd.Relation = f[1]
			v, err := parseUint(f[2])
			if err != nil {
				return cmd, fmt.Errorf("check_counter value: %v", err)
			}
			cmd.Value = v
		default:
			return cmd, fmt.Errorf("check_counter: expected '[packets|bytes] OP VALUE'")
		}
		return cmd, nil
	default:
		cmd.Args = strings.Fields(rest)
		return cmd, nil
	}
}

func parseAdd(cmd Command, rest string) (Command, error) {
	t, r := nextWord(rest)
	if t == "" {
		return cmd, fmt.Errorf("add without a table")
	}
	cmd.Table = t
	open := strings.IndexByte(r, '(')
	if open < 0 {
		return cmd, fmt.Errorf("add without an action call")
	}
	before := strings.Fields(r[:open])
	if len(before) == 0 {
		return cmd, fmt.Errorf("add without an action name")
	}
	act, params, after, err := parseActionCall(strings.Join(before[len(before)-1:], "") + r[open:])
	if err != nil {
		return cmd, err
	}
	cmd.Action, cmd.Params = act, params
	before = before[:len(before)-1]
	if len(before) > 0 && isAllDigits(before[0]) {
		v, err := strconv.ParseInt(before[0], 10, 32)
		if err != nil {
			return cmd, fmt.Errorf("bad priority %q", before[0])
		}
		p := int32(v)
		cmd.Priority = &p
		before = before[1:]
	}
	for _, kv := range before {
		i := strings.IndexByte(kv, ':')
		if i <= 0 {
			return cmd, fmt.Errorf("bad key %q (want name:value)", kv)
		}
		cmd.Keys = append(cmd.Keys, KeyArg{Name: kv[:i], Value: kv[i+1:]})
	}
	after = strings.TrimSpace(after)
	if strings.HasPrefix(after, "=") {
		cmd.Handle = strings.TrimSpace(after[1:])
	}
	return cmd, nil
}

// parseActionCall parses "name(p:v, ...)" and returns what follows ')'.
func parseActionCall(s string) (string, []ParamArg, string, error) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	if open <= 0 {
		return "", nil, "", fmt.Errorf("bad action call %q", s)
	}
	close := strings.IndexByte(s[open:], ')')
	if close < 0 {
		return "", nil, "", fmt.Errorf("action call %q lacks ')'", s)
	}
	close += open
	name := strings.TrimSpace(s[:open])
	var params []ParamArg
	for _, a := range strings.Split(s[open+1:close], ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		i := strings.IndexByte(a, ':')
		if i <= 0 {
			return "", nil, "", fmt.Errorf("bad action argument %q (want name:value)", a)
		}
		params = append(params, ParamArg{Name: strings.TrimSpace(a[:i]), Value: strings.TrimSpace(a[i+1:])})
	}
	return name, params, s[close+1:], nil
}

func nextWord(s string) (string, string) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i+1:])
}

func isAllDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func checkHex(s string, wild bool) error {
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		case wild && c == '*':
		default:
			return fmt.Errorf("bad character %q in packet data", c)
		}
	}
	return nil
}

func parseUint(s string) (uint64, error) {
	return strconv.ParseUint(s, 0, 64)
}
