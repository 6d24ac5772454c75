package engine

// The BMv2 JSON input (docs/JSON_format.md, version 2.x) as Go types. Only
// what the engine needs is decoded; "type/value" objects are kept raw and
// turned into a jsonExpr by parseTV, once, at load time.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

type jProgram struct {
	Meta struct {
		Version []int `json:"version"`
	} `json:"__meta__"`
	Program           string            `json:"program"`
	HeaderTypes       []jHeaderType     `json:"header_types"`
	Headers           []jHeader         `json:"headers"`
	HeaderStacks      []jStack          `json:"header_stacks"`
	HeaderUnionTypes  []json.RawMessage `json:"header_union_types"`
	HeaderUnions      []jUnion          `json:"header_unions"`
	HeaderUnionStacks []jUnionStack     `json:"header_union_stacks"`
	FieldLists        []jFieldList      `json:"field_lists"`
	Errors            [][]any           `json:"errors"`
	Parsers           []jParser         `json:"parsers"`
	ParseVsets        []jVset           `json:"parse_vsets"`
	Deparsers         []jDeparser       `json:"deparsers"`
	MeterArrays       []jMeterArray     `json:"meter_arrays"`
	CounterArrays     []jCounterArray   `json:"counter_arrays"`
	RegisterArrays    []jRegisterArray  `json:"register_arrays"`
	Calculations      []jCalculation    `json:"calculations"`
	LearnLists        []jFieldList      `json:"learn_lists"`
	Actions           []jAction         `json:"actions"`
	Pipelines         []jPipeline       `json:"pipelines"`
	Checksums         []jChecksum       `json:"checksums"`
	FieldAliases      [][]any           `json:"field_aliases"`
	ExternInstances   []json.RawMessage `json:"extern_instances"`
}

type jHeaderType struct {
	Name      string          `json:"name"`
	ID        int             `json:"id"`
	Fields    [][]any         `json:"fields"`
	LengthExp json.RawMessage `json:"length_exp"`
	MaxLength *int            `json:"max_length"`
}

type jHeader struct {
	Name       string `json:"name"`
	ID         int    `json:"id"`
	HeaderType string `json:"header_type"`
	Metadata   bool   `json:"metadata"`
}

type jStack struct {
	Name       string `json:"name"`
	ID         int    `json:"id"`
	HeaderType string `json:"header_type"`
	Size       int    `json:"size"`
	HeaderIDs  []int  `json:"header_ids"`
}

type jUnion struct {
	Name      string `json:"name"`
	ID        int    `json:"id"`
	UnionType string `json:"union_type"`
	HeaderIDs []int  `json:"header_ids"`
}

type jUnionStack struct {
	Name           string `json:"name"`
	ID             int    `json:"id"`
	UnionType      string `json:"union_type"`
	HeaderUnionIDs []int  `json:"header_union_ids"`
}

type jFieldList struct {
	Name     string            `json:"name"`
	ID       int               `json:"id"`
	Elements []json.RawMessage `json:"elements"`
}

type jParser struct {
	Name        string        `json:"name"`
	ID          int           `json:"id"`
	InitState   string        `json:"init_state"`
	ParseStates []jParseState `json:"parse_states"`
}

type jParseState struct {
	Name          string            `json:"name"`
	ID            int               `json:"id"`
	ParserOps     []jParserOp       `json:"parser_ops"`
	TransitionKey []json.RawMessage `json:"transition_key"`
	Transitions   []jTransition     `json:"transitions"`
}

type jParserOp struct {
	Op         string            `json:"op"`
	Parameters []json.RawMessage `json:"parameters"`
}

type jTransition struct {
	Type      string          `json:"type"`
	Value     json.RawMessage `json:"value"`
	Mask      json.RawMessage `json:"mask"`
	NextState *string         `json:"next_state"`
}

type jVset struct {
	Name               string `json:"name"`
	ID                 int    `json:"id"`
	CompressedBitwidth int    `json:"compressed_bitwidth"`
	MaxSize            int    `json:"max_size"`
}

type jDeparser struct {
	Name  string   `json:"name"`
	ID    int      `json:"id"`
	Order []string `json:"order"`
}

type jMeterArray struct {
	Name         string   `json:"name"`
	ID           int      `json:"id"`
	Type         string   `json:"type"`
	RateCount    int      `json:"rate_count"`
	Size         int      `json:"size"`
	IsDirect     bool     `json:"is_direct"`
	Binding      string   `json:"binding"`
	ResultTarget []string `json:"result_target"`
}

type jCounterArray struct {
	Name     string `json:"name"`
	ID       int    `json:"id"`
	Size     int    `json:"size"`
	IsDirect bool   `json:"is_direct"`
	Binding  string `json:"binding"`
}

type jRegisterArray struct {
	Name     string `json:"name"`
	ID       int    `json:"id"`
	Size     int    `json:"size"`
	Bitwidth int    `json:"bitwidth"`
}

type jCalculation struct {
	Name  string            `json:"name"`
	ID    int               `json:"id"`
	Algo  string            `json:"algo"`
	Input []json.RawMessage `json:"input"`
}

type jAction struct {
	Name        string `json:"name"`
	ID          int    `json:"id"`
	RuntimeData []struct {
		Name     string `json:"name"`
		Bitwidth int    `json:"bitwidth"`
	} `json:"runtime_data"`
	Primitives []jPrimitive `json:"primitives"`
}

type jPrimitive struct {
	Op         string            `json:"op"`
	Parameters []json.RawMessage `json:"parameters"`
}

type jPipeline struct {
	Name           string           `json:"name"`
	ID             int              `json:"id"`
	InitTable      *string          `json:"init_table"`
	Tables         []jTable         `json:"tables"`
	ActionProfiles []jActionProfile `json:"action_profiles"`
	Conditionals   []jConditional   `json:"conditionals"`
	ActionCalls    []jActionCall    `json:"action_calls"`
}

type jActionProfile struct {
	Name     string     `json:"name"`
	ID       int        `json:"id"`
	MaxSize  int        `json:"max_size"`
	Selector *jSelector `json:"selector"`
}

type jSelector struct {
	Algo  string            `json:"algo"`
	Input []json.RawMessage `json:"input"`
}

type jTable struct {
	Name            string             `json:"name"`
	ID              int                `json:"id"`
	MatchType       string             `json:"match_type"`
	Type            string             `json:"type"`
	ActionProfile   string             `json:"action_profile"`
	ActProfName     string             `json:"act_prof_name"` // older JSON's, with Selector
	Selector        *jSelector         `json:"selector"`
	MaxSize         int                `json:"max_size"`
	WithCounters    bool               `json:"with_counters"`
	SupportTimeout  bool               `json:"support_timeout"`
	Key             []jKey             `json:"key"`
	ActionIDs       []int              `json:"action_ids"`
	Actions         []string           `json:"actions"`
	NextTables      map[string]*string `json:"next_tables"`
	BaseDefaultNext *string            `json:"base_default_next"`
	DirectMeters    *string            `json:"direct_meters"`
	DefaultEntry    *jDefaultEntry     `json:"default_entry"`
	Entries         []jEntry           `json:"entries"`
}

type jKey struct {
	MatchType string          `json:"match_type"`
	Name      string          `json:"name"`
	Target    json.RawMessage `json:"target"`
	Mask      *string         `json:"mask"`
}

type jDefaultEntry struct {
	ActionID         int      `json:"action_id"`
	ActionConst      bool     `json:"action_const"`
	ActionData       []string `json:"action_data"`
	ActionEntryConst bool     `json:"action_entry_const"`
}

type jEntry struct {
	MatchKey []struct {
		MatchType    string          `json:"match_type"`
		Key          json.RawMessage `json:"key"`
		Mask         string          `json:"mask"`
		PrefixLength int             `json:"prefix_length"`
		Start        string          `json:"start"`
		End          string          `json:"end"`
	} `json:"match_key"`
	ActionEntry struct {
		ActionID   int      `json:"action_id"`
		ActionData []string `json:"action_data"`
	} `json:"action_entry"`
	Priority int `json:"priority"`
}

type jConditional struct {
	Name       string          `json:"name"`
	ID         int             `json:"id"`
	Expression json.RawMessage `json:"expression"`
	TrueNext   *string         `json:"true_next"`
	FalseNext  *string         `json:"false_next"`
}

type jActionCall struct {
	Name     string  `json:"name"`
	ID       int     `json:"id"`
	ActionID int     `json:"action_id"`
	NextNode *string `json:"next_node"`
}

type jChecksum struct {
	Name        string          `json:"name"`
	ID          int             `json:"id"`
	Target      []string        `json:"target"`
	Type        string          `json:"type"`
	Calculation string          `json:"calculation"`
	Update      *bool           `json:"update"`
	Verify      *bool           `json:"verify"`
	IfCond      json.RawMessage `json:"if_cond"`
}

// jsonExpr is a decoded BMv2 "type/value" object or expression operator:
// one parameter of a primitive, or one node of an expression tree.
type jsonExpr struct {
	kind string // the JSON "type"; "op" for an operator node
	op   string

	left, right, cond *jsonExpr

	name  string      // header, stack, calculation, extern... name; string value
	names []string    // field: [header, field]; stack_field; union_stack_field
	val   *big.Int    // hexstr
	b     bool        // bool
	idx   int         // runtime_data / local index; access_field offset; lookahead offset
	width int         // lookahead width; hexstr "bitwidth" when given
	list  []*jsonExpr // parameters_vector
}

func (a *jsonExpr) String() string {
	if a == nil {
		return "<nil>"
	}
	switch a.kind {
	case "op":
		return fmt.Sprintf("(%s %v %v)", a.op, a.left, a.right)
	case "field":
		return strings.Join(a.names, ".")
	case "hexstr":
		return a.val.String()
	}
	if a.name != "" {
		return a.kind + ":" + a.name
	}
	return a.kind
}

func parseHexstr(s string) (*big.Int, error) {
	neg := false
	t := s
	if strings.HasPrefix(t, "-") {
		neg = true
		t = t[1:]
	}
	t = strings.TrimPrefix(strings.TrimPrefix(t, "0x"), "0X")
	v, ok := new(big.Int).SetString(t, 16)
	if !ok {
		return nil, fmt.Errorf("bad hexstr %q", s)
	}
	if neg {
		v.Neg(v)
	}
	return v, nil
}

// parseTV decodes a type/value object (or, inside expressions, an operator
// object) into a jsonExpr.
func parseTV(raw json.RawMessage) (*jsonExpr, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("expected a JSON object, got %.60s", string(raw))
	}
	if opRaw, ok := obj["op"]; ok {
		return parseOp(opRaw, obj)
	}
	var typ string
	if err := json.Unmarshal(obj["type"], &typ); err != nil {
		return nil, fmt.Errorf("type/value object without a type: %.60s", string(raw))
	}
	val := obj["value"]
	a := &jsonExpr{kind: typ}
	switch typ {
	case "expression":
		// Either an operator object or another type/value object.
		return parseTV(val)
	case "field", "stack_field", "union_stack_field", "header_union_stack_field":
		if err := json.Unmarshal(val, &a.names); err != nil {
			return nil, fmt.Errorf("bad %s reference: %s", typ, string(val))
		}
	case "hexstr":
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			// Some producers write integers.
			var n json.Number
			if err2 := json.Unmarshal(val, &n); err2 != nil {
				return nil, fmt.Errorf("bad hexstr %s", string(val))
			}
			v, ok := new(big.Int).SetString(n.String(), 10)
			if !ok {
				return nil, fmt.Errorf("bad hexstr %s", string(val))
			}
			a.val = v
		} else {
			v, err := parseHexstr(s)
			if err != nil {
				return nil, err
			}
			a.val = v
		}
		if bw, ok := obj["bitwidth"]; ok {
			_ = json.Unmarshal(bw, &a.width)
		}
	case "bool":
		if err := json.Unmarshal(val, &a.b); err != nil {
			return nil, fmt.Errorf("bad bool %s", string(val))
		}
	case "runtime_data", "local":
		if err := json.Unmarshal(val, &a.idx); err != nil {
			return nil, fmt.Errorf("bad %s index %s", typ, string(val))
		}
	case "lookahead":
		var lw []int
		if err := json.Unmarshal(val, &lw); err != nil || len(lw) != 2 {
			return nil, fmt.Errorf("bad lookahead %s", string(val))
		}
		a.idx, a.width = lw[0], lw[1]
	case "register":
		// [register array name, index expression]
		var parts []json.RawMessage
		if err := json.Unmarshal(val, &parts); err != nil || len(parts) != 2 {
			return nil, fmt.Errorf("bad register reference %s", string(val))
		}
		if err := json.Unmarshal(parts[0], &a.name); err != nil {
			return nil, fmt.Errorf("bad register name %s", string(parts[0]))
		}
		ix, err := parseTV(parts[1])
		if err != nil {
			return nil, err
		}
		a.right = ix
	case "parameters_vector":
		var items []json.RawMessage
		if err := json.Unmarshal(val, &items); err != nil {
			return nil, fmt.Errorf("bad parameters_vector %s", string(val))
		}
		for _, it := range items {
			x, err := parseTV(it)
			if err != nil {
				return nil, err
			}
			a.list = append(a.list, x)
		}
	case "union_stack":
		// [union stack name, member name]
		if err := json.Unmarshal(val, &a.names); err != nil {
			return nil, fmt.Errorf("bad union_stack %s", string(val))
		}
	default:
		// header, header_stack, header_union, header_union_stack, regular,
		// stack, calculation, counter_array, meter_array, register_array,
		// extern, string, parse_vset...
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			// A number (e.g. some producers write ids) or something else:
			// keep the raw text as the name.
			s = string(val)
		}
		a.name = s
	}
	return a, nil
}

func parseOp(opRaw json.RawMessage, obj map[string]json.RawMessage) (*jsonExpr, error) {
	a := &jsonExpr{kind: "op"}
	if err := json.Unmarshal(opRaw, &a.op); err != nil {
		return nil, fmt.Errorf("bad op %s", string(opRaw))
	}
	var err error
	if l, ok := obj["left"]; ok {
		if a.left, err = parseTV(l); err != nil {
			return nil, err
		}
	}
	if r, ok := obj["right"]; ok {
		r = bytes.TrimSpace(r)
		if len(r) > 0 && (r[0] == '-' || (r[0] >= '0' && r[0] <= '9')) {
			// access_field / access_union_header take a plain integer.
			if err := json.Unmarshal(r, &a.idx); err != nil {
				return nil, fmt.Errorf("bad operand %s", string(r))
			}
		} else if a.right, err = parseTV(r); err != nil {
			return nil, err
		}
	}
	if c, ok := obj["cond"]; ok {
		if a.cond, err = parseTV(c); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// checkActionData holds a primitive's parameter to BMv2's rule for action
// data: "runtime_data" names it as a parameter of the primitive itself (or
// of a parameters_vector), "local" only inside an expression. BMv2 refuses
// the other placements when it loads a program (P4Objects:
// "Invalid 'type' in expression"; "Parameter type 'local' not supported"),
// so a compiler that mixes them up must fail here too, not only there.
func checkActionData(raw json.RawMessage, inExpr bool) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil // not an object: parseTV reports it
	}
	if _, ok := obj["op"]; ok {
		for _, k := range []string{"left", "right", "cond"} {
			if err := checkActionData(obj[k], true); err != nil {
				return err
			}
		}
		return nil
	}
	var typ string
	_ = json.Unmarshal(obj["type"], &typ)
	switch typ {
	case "runtime_data":
		if inExpr {
			return errors.New(`action data inside an expression must be "local", not "runtime_data" (BMv2 refuses it)`)
		}
	case "local":
		if !inExpr {
			return errors.New(`a primitive's action-data parameter must be "runtime_data", not "local" (BMv2 refuses it)`)
		}
	case "expression":
		return checkActionData(obj["value"], true)
	case "parameters_vector":
		var items []json.RawMessage
		_ = json.Unmarshal(obj["value"], &items)
		for _, it := range items {
			if err := checkActionData(it, inExpr); err != nil {
				return err
			}
		}
	case "register":
		var parts []json.RawMessage
		if json.Unmarshal(obj["value"], &parts) == nil && len(parts) == 2 {
			return checkActionData(parts[1], true) // the index is an expression
		}
	}
	return nil
}

func parseTVs(raws []json.RawMessage) ([]*jsonExpr, error) {
	out := make([]*jsonExpr, len(raws))
	for i, r := range raws {
		a, err := parseTV(r)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// upgradeLegacy brings BMv2 JSON of the older format (p4c-bm's, for P4_14
// programs; BMv2 still loads it, and its own CLI tests use it) to the
// current one: a table's actions named without "action_ids", and an
// indirect table's action profile declared in the table ("act_prof_name",
// "selector") instead of in the pipeline's "action_profiles".
func upgradeLegacy(jp *jProgram) {
	actionIDs := map[string]int{}
	for _, a := range jp.Actions {
		if _, dup := actionIDs[a.Name]; !dup {
			actionIDs[a.Name] = a.ID
		}
	}
	for pi := range jp.Pipelines {
		jpp := &jp.Pipelines[pi]
		nextID := 0
		have := map[string]bool{}
		for _, ap := range jpp.ActionProfiles {
			have[ap.Name] = true
			nextID = max(nextID, ap.ID+1)
		}
		for ti := range jpp.Tables {
			jt := &jpp.Tables[ti]
			if len(jt.ActionIDs) == 0 {
				for _, name := range jt.Actions {
					if id, ok := actionIDs[name]; ok {
						jt.ActionIDs = append(jt.ActionIDs, id)
					}
				}
			}
			if jt.ActionProfile == "" && jt.ActProfName != "" && (jt.Type == "indirect" || jt.Type == "indirect_ws") {
				jt.ActionProfile = jt.ActProfName
				if !have[jt.ActProfName] {
					have[jt.ActProfName] = true
					jpp.ActionProfiles = append(jpp.ActionProfiles, jActionProfile{Name: jt.ActProfName, ID: nextID,
						MaxSize: jt.MaxSize, Selector: jt.Selector})
					nextID++
				}
			}
		}
	}
}
