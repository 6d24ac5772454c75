package bmthrift

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/standard"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// std implements standard.thrift's Standard service.
type std struct{ s *Server }

var _ standard.Standard = (*std)(nil)

// bmMaxPriority is the pivot between BMv2's priorities (the smaller wins)
// and the engine's (P4Runtime's: the larger wins), the one PI uses, so an
// entry written over P4Runtime with priority p shows as 2^31-1-p here as
// on simple_switch_grpc.
const bmMaxPriority = math.MaxInt32

func tableErr(code standard.TableOperationErrorCode) error {
	return &standard.InvalidTableOperation{Code: code}
}

// tableErrOf maps an engine error to BMv2's table error code; what is
// the caller's context (a key, action data) is given as invalidArg.
func tableErrOf(err error, invalidArg standard.TableOperationErrorCode) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, engine.ErrInvalidHandle):
		return tableErr(standard.TableOperationErrorCode_INVALID_HANDLE)
	case errors.Is(err, engine.ErrExpiredHandle):
		return tableErr(standard.TableOperationErrorCode_EXPIRED_HANDLE)
	}
	switch engine.ErrorCodeOf(err) {
	case engine.CodeAlreadyExists:
		return tableErr(standard.TableOperationErrorCode_DUPLICATE_ENTRY)
	case engine.CodeResourceExhausted:
		return tableErr(standard.TableOperationErrorCode_TABLE_FULL)
	case engine.CodeNotFound:
		return tableErr(standard.TableOperationErrorCode_INVALID_HANDLE)
	case engine.CodePermissionDenied:
		return tableErr(standard.TableOperationErrorCode_IMMUTABLE_TABLE_ENTRIES)
	case engine.CodeInvalidArgument, engine.CodeOutOfRange:
		return tableErr(invalidArg)
	}
	return tableErr(standard.TableOperationErrorCode_ERROR)
}

// tbl is a table resolved by name.
type tbl struct {
	v    *view
	id   int
	info pipeline.TableInfo
	prof *pipeline.ActionProfileInfo
}

func (t *tbl) indirect() bool   { return t.prof != nil }
func (t *tbl) withGroups() bool { return t.prof != nil && t.prof.HasSelector }

// table resolves a table under s.mu.
func (h *std) table(name string) (*tbl, error) {
	v, err := h.s.current()
	if err != nil {
		return nil, tableErr(standard.TableOperationErrorCode_INVALID_TABLE_NAME)
	}
	return v.table(name)
}

// table resolves a table of v by name.
func (v *view) table(name string) (*tbl, error) {
	id, ok := v.pl.Lookup(engine.KindTable, name)
	if !ok {
		return nil, tableErr(standard.TableOperationErrorCode_INVALID_TABLE_NAME)
	}
	info, err := v.pl.Table(id)
	if err != nil {
		return nil, tableErr(standard.TableOperationErrorCode_INVALID_TABLE_NAME)
	}
	t := &tbl{v: v, id: id, info: info}
	if info.ActionProfile != "" {
		for _, ap := range v.pl.ActionProfiles() {
			if ap.Name == info.ActionProfile {
				t.prof = &ap
			}
		}
	}
	return t, nil
}

// action resolves an action of the table by its JSON name (p4c may emit
// one name for several JSON actions: the table's list says which).
func (t *tbl) action(name string) (pipeline.ActionInfo, error) {
	for _, aid := range t.info.ActionIDs {
		ai, err := t.v.pl.Action(aid)
		if err == nil && ai.Name == name {
			return ai, nil
		}
	}
	return pipeline.ActionInfo{}, tableErr(standard.TableOperationErrorCode_INVALID_ACTION_NAME)
}

// actionData checks data against a's parameters and fits each value to
// its width, as BMv2 does (it masks the first byte).
func actionData(a pipeline.ActionInfo, data standard.BmActionData) ([][]byte, error) {
	if len(data) != len(a.Params) {
		return nil, tableErr(standard.TableOperationErrorCode_BAD_ACTION_DATA)
	}
	out := make([][]byte, len(data))
	for i, d := range data {
		out[i] = fitBytes(d, a.Params[i].Bitwidth)
	}
	return out, nil
}

// fitBytes returns v as exactly (w+7)/8 bytes, big-endian, masked to w
// bits: longer values lose their high bytes, shorter ones are padded.
func fitBytes(v []byte, w int) []byte {
	n := (w + 7) / 8
	out := make([]byte, n)
	if len(v) >= n {
		copy(out, v[len(v)-n:])
	} else {
		copy(out[n-len(v):], v)
	}
	if r := w % 8; r != 0 && n > 0 {
		out[0] &= byte(1<<r - 1)
	}
	return out
}

// key converts a Thrift match key to the engine's, checking each
// parameter's type against the table's key.
func (t *tbl) key(params standard.BmMatchParams) ([]pipeline.Match, error) {
	bad := tableErr(standard.TableOperationErrorCode_BAD_MATCH_KEY)
	if len(params) != len(t.info.Keys) {
		return nil, bad
	}
	out := make([]pipeline.Match, len(params))
	for i, p := range params {
		kf := t.info.Keys[i]
		w := kf.Bitwidth
		var m pipeline.Match
		switch kf.Kind {
		case pipeline.MatchExact:
			if p.Type != standard.BmMatchParamType_EXACT || p.Exact == nil {
				return nil, bad
			}
			m.Value = fitBytes(p.Exact.Key, w)
		case pipeline.MatchLPM:
			if p.Type != standard.BmMatchParamType_LPM || p.Lpm == nil {
				return nil, bad
			}
			if p.Lpm.PrefixLength < 0 || int(p.Lpm.PrefixLength) > w {
				return nil, bad
			}
			m.Value, m.PrefixLen = fitBytes(p.Lpm.Key, w), int(p.Lpm.PrefixLength)
			m.Value = maskPrefix(m.Value, w, m.PrefixLen)
		case pipeline.MatchTernary, pipeline.MatchOptional:
			if p.Type != standard.BmMatchParamType_TERNARY || p.Ternary == nil {
				return nil, bad
			}
			m.Value, m.Mask = fitBytes(p.Ternary.Key, w), fitBytes(p.Ternary.Mask, w)
			for j := range m.Value {
				m.Value[j] &= m.Mask[j]
			}
			if kf.Kind == pipeline.MatchOptional && allZero(m.Mask) {
				m = pipeline.Match{Value: make([]byte, len(m.Value)), Wildcard: true}
			}
		case pipeline.MatchRange:
			if p.Type != standard.BmMatchParamType_RANGE || p.Range == nil {
				return nil, bad
			}
			m.Value, m.High = fitBytes(p.Range.Start, w), fitBytes(p.Range.End_, w)
		case pipeline.MatchValid:
			if p.Type != standard.BmMatchParamType_VALID || p.Valid == nil {
				return nil, bad
			}
			m.Value = []byte{0}
			if p.Valid.Key {
				m.Value[0] = 1
			}
		default:
			return nil, bad
		}
		if kf.Mask != nil && m.Value != nil {
			// BMv2 masks the key with the program's static masks
			m.Value = andBytes(m.Value, kf.Mask)
		}
		out[i] = m
	}
	return out, nil
}

// andBytes is a & b (of one length).
func andBytes(a, b []byte) []byte {
	out := append([]byte(nil), a...)
	for i := range out {
		if i < len(b) {
			out[i] &= b[i]
		}
	}
	return out
}

// storedKey is params as BMv2 keeps and reads back a key: each value in
// its field's width (the first byte masked to it), masked by the program's
// static mask, a ternary value by its mask too; an lpm value keeps its bits
// past the prefix.
func (t *tbl) storedKey(params standard.BmMatchParams) standard.BmMatchParams {
	out := make(standard.BmMatchParams, len(params))
	for i, p := range params {
		kf := t.info.Keys[i]
		w := kf.Bitwidth
		static := func(v []byte) []byte {
			v = fitBytes(v, w)
			if kf.Mask != nil {
				v = andBytes(v, kf.Mask)
			}
			return v
		}
		q := &standard.BmMatchParam{Type: p.Type}
		switch {
		case p.Exact != nil:
			q.Exact = &standard.BmMatchParamExact{Key: static(p.Exact.Key)}
		case p.Lpm != nil:
			q.Lpm = &standard.BmMatchParamLPM{Key: static(p.Lpm.Key), PrefixLength: p.Lpm.PrefixLength}
		case p.Ternary != nil:
			m := fitBytes(p.Ternary.Mask, w)
			q.Ternary = &standard.BmMatchParamTernary{Key: andBytes(static(p.Ternary.Key), m), Mask: m}
		case p.Range != nil:
			q.Range = &standard.BmMatchParamRange{Start: static(p.Range.Start), End_: fitBytes(p.Range.End_, w)}
		case p.Valid != nil:
			q.Valid = &standard.BmMatchParamValid{Key: p.Valid.Key}
		}
		out[i] = q
	}
	return out
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// maskPrefix clears the bits of v (w bits wide) past the first plen.
func maskPrefix(v []byte, w, plen int) []byte {
	out := append([]byte(nil), v...)
	pad := len(out)*8 - w
	for bit := pad + plen; bit < len(out)*8; bit++ {
		out[bit/8] &^= 0x80 >> (bit % 8)
	}
	return out
}

// priority converts a Thrift entry's priority to the engine's.
func (t *tbl) priority(opts *standard.BmAddEntryOptions) (int32, error) {
	if !t.info.NeedsPriority {
		return 0, nil
	}
	p := int32(0)
	if opts != nil && opts.Priority != nil {
		p = *opts.Priority
	}
	if p < 0 {
		return 0, tableErr(standard.TableOperationErrorCode_BAD_MATCH_KEY)
	}
	return bmMaxPriority - p, nil
}

// bmPriority is the priority a Thrift client reads for e (-1: none, as
// BMv2 answers for tables without priorities).
func (t *tbl) bmPriority(e pipeline.TableEntry) int32 {
	if !t.info.NeedsPriority {
		return -1
	}
	if e.Const {
		return int32(pipeline.ConstPriorityBase) - e.Priority
	}
	return bmMaxPriority - e.Priority
}

// thriftKey is the engine's key as BMv2 reads it back.
func (t *tbl) thriftKey(ms []pipeline.Match) standard.BmMatchParams {
	out := make(standard.BmMatchParams, len(ms))
	for i, m := range ms {
		kf := t.info.Keys[i]
		nb := (kf.Bitwidth + 7) / 8
		val := m.Value
		if m.Wildcard || val == nil {
			val = make([]byte, nb)
		}
		p := &standard.BmMatchParam{}
		switch kf.Kind {
		case pipeline.MatchExact:
			p.Type, p.Exact = standard.BmMatchParamType_EXACT, &standard.BmMatchParamExact{Key: val}
		case pipeline.MatchLPM:
			p.Type, p.Lpm = standard.BmMatchParamType_LPM, &standard.BmMatchParamLPM{Key: val, PrefixLength: int32(m.PrefixLen)}
		case pipeline.MatchTernary, pipeline.MatchOptional:
			mask := m.Mask
			if m.Wildcard {
				mask = make([]byte, nb)
			} else if mask == nil {
				mask = fullMask(kf.Bitwidth)
			}
			p.Type, p.Ternary = standard.BmMatchParamType_TERNARY, &standard.BmMatchParamTernary{Key: val, Mask: mask}
		case pipeline.MatchRange:
			p.Type, p.Range = standard.BmMatchParamType_RANGE, &standard.BmMatchParamRange{Start: val, End_: m.High}
		case pipeline.MatchValid:
			p.Type, p.Valid = standard.BmMatchParamType_VALID, &standard.BmMatchParamValid{Key: len(val) > 0 && val[len(val)-1] != 0}
		}
		out[i] = p
	}
	return out
}

func fullMask(w int) []byte {
	b := make([]byte, (w+7)/8)
	for i := range b {
		b[i] = 0xff
	}
	return fitBytes(b, w)
}

func keyString(ms []pipeline.Match) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%x/%x/%x/%d/%t;", m.Value, m.Mask, m.High, m.PrefixLen, m.Wildcard)
	}
	return b.String()
}

// entry converts an engine entry to BMv2's.
func (t *tbl) entry(e pipeline.TableEntry) (*standard.BmMtEntry, error) {
	key := t.thriftKey(e.Match)
	if w, ok := t.v.written[t.id][e.Handle]; ok && w.norm == keyString(e.Match) {
		key = w.params
	} else if e.Const {
		t.declaredKey(e, key)
	}
	ae, err := t.actionEntry(e.Action, e.Indirect, true)
	if err != nil {
		return nil, err
	}
	prio := t.bmPriority(e)
	be := &standard.BmMtEntry{MatchKey: key, Options: &standard.BmAddEntryOptions{Priority: &prio},
		EntryHandle: standard.BmEntryHandle(e.Handle), ActionEntry: ae}
	if t.info.SupportTimeout {
		// as BMv2: the entry's life is shown once it has a timeout
		if ms, since, err := t.v.pl.EntryTimeout(t.id, e.Handle); err == nil && ms != 0 {
			be.Life = &standard.BmMtEntryLife{TimeoutMs: int32(ms), TimeSinceHitMs: int32(min(since, math.MaxInt32))}
		}
	}
	return be, nil
}

// declaredKey puts into key, the Thrift key of e (one of the program's
// const entries), the lpm values as the JSON gives them: BMv2 keeps an lpm
// key's bits past its prefix, the engine clears them. The program's
// entries have handles 0, 1, ... in the JSON's order.
func (t *tbl) declaredKey(e pipeline.TableEntry, key standard.BmMatchParams) {
	if t.v.declared == nil {
		t.v.declared = t.v.pl.Schema().ConstEntries
	}
	decl := t.v.declared[t.info.Name]
	i := int(e.Handle & 0xffffff)
	if i >= len(decl) || len(decl[i].Match) != len(key) {
		return
	}
	for j, p := range key {
		if p.Lpm != nil {
			p.Lpm.Key = fitBytes(decl[i].Match[j].Value, t.info.Keys[j].Bitwidth)
			if m := t.info.Keys[j].Mask; m != nil {
				p.Lpm.Key = andBytes(p.Lpm.Key, m)
			}
		}
	}
}

func (t *tbl) actionEntry(a pipeline.ActionCall, ref pipeline.IndirectRef, ok bool) (*standard.BmActionEntry, error) {
	if !ok {
		return &standard.BmActionEntry{ActionType: standard.BmActionEntryType_NONE}, nil
	}
	switch ref.Kind {
	case pipeline.IndirectMember:
		h := standard.BmMemberHandle(ref.ID)
		return &standard.BmActionEntry{ActionType: standard.BmActionEntryType_MBR_HANDLE, MbrHandle: &h}, nil
	case pipeline.IndirectGroup:
		h := standard.BmGroupHandle(ref.ID)
		return &standard.BmActionEntry{ActionType: standard.BmActionEntryType_GRP_HANDLE, GrpHandle: &h}, nil
	}
	ai, err := t.v.pl.Action(a.ActionID)
	if err != nil {
		return nil, tableErr(standard.TableOperationErrorCode_ERROR)
	}
	name := ai.Name
	return &standard.BmActionEntry{ActionType: standard.BmActionEntryType_ACTION_DATA, ActionName: &name,
		ActionData: readData(a.Params)}, nil
}

// readData is action data as BMv2 reads it back: each value in as few
// bytes as hold it (one for 0), not in its parameter's width.
func readData(params [][]byte) standard.BmActionData {
	out := make(standard.BmActionData, len(params))
	for i, p := range params {
		j := 0
		for j < len(p)-1 && p[j] == 0 {
			j++
		}
		out[i] = append([]byte{}, p[j:]...)
		if len(out[i]) == 0 {
			out[i] = []byte{0}
		}
	}
	return out
}

func (h *std) lock() func() {
	h.s.mu.Lock()
	return h.s.mu.Unlock
}

func (h *std) BmMtGetNumEntries(_ context.Context, _ int32, table string) (int64, error) {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return 0, err
	}
	es, err := t.v.pl.ReadEntries(t.id)
	if err != nil {
		return 0, tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	return int64(len(es)), nil
}

func (h *std) BmMtClearEntries(_ context.Context, _ int32, table string, resetDefault bool) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	def, hasDef, _ := t.v.pl.DefaultAction(t.id)
	ref, _ := t.v.pl.DefaultIndirect(t.id)
	if err := t.v.pl.ClearTable(t.id); err != nil {
		return tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	delete(t.v.written, t.id)
	if !resetDefault {
		// BMv2 keeps the default entry (an indirect table's default
		// member or group too) unless told to reset it; the engine's
		// clear restores the program's.
		if ref.Kind != pipeline.IndirectNone {
			_ = t.v.pl.SetDefaultIndirect(t.id, ref)
		} else if hasDef {
			_ = t.v.pl.SetDefaultAction(t.id, def)
		}
	}
	return nil
}

// add adds e to t and remembers the key as written.
func (h *std) add(t *tbl, params standard.BmMatchParams, e pipeline.TableEntry) (standard.BmEntryHandle, error) {
	if len(t.info.Keys) == 0 {
		return 0, tableErr(standard.TableOperationErrorCode_NO_TABLE_KEY)
	}
	if err := t.v.pl.AddEntry(t.id, e); err != nil {
		return 0, tableErrOf(err, standard.TableOperationErrorCode_BAD_MATCH_KEY)
	}
	hd, err := t.remember(params, e)
	return hd, tableErrOf(err, standard.TableOperationErrorCode_ERROR)
}

// remember keeps the key of the entry just added as written, where it
// differs from the engine's, and returns the entry's handle.
func (t *tbl) remember(params standard.BmMatchParams, e pipeline.TableEntry) (standard.BmEntryHandle, error) {
	got, err := t.v.pl.ReadEntry(t.id, e.Match, e.Priority)
	if err != nil {
		return 0, err
	}
	params = t.storedKey(params)
	if !keyEqual(t.thriftKey(got.Match), params) {
		if t.v.written[t.id] == nil {
			t.v.written[t.id] = map[uint32]writtenKey{}
		}
		t.v.written[t.id][got.Handle] = writtenKey{params: params, norm: keyString(got.Match)}
	}
	return standard.BmEntryHandle(got.Handle), nil
}

func keyEqual(a, b standard.BmMatchParams) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equals(b[i]) {
			return false
		}
	}
	return true
}

func (h *std) BmMtAddEntry(_ context.Context, _ int32, table string, params standard.BmMatchParams, action string, data standard.BmActionData, opts *standard.BmAddEntryOptions) (standard.BmEntryHandle, error) {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return 0, err
	}
	if t.indirect() {
		return 0, tableErr(standard.TableOperationErrorCode_WRONG_TABLE_TYPE)
	}
	a, err := t.action(action)
	if err != nil {
		return 0, err
	}
	args, err := actionData(a, data)
	if err != nil {
		return 0, err
	}
	e, err := t.newEntry(params, opts)
	if err != nil {
		return 0, err
	}
	e.Action = pipeline.ActionCall{ActionID: a.ID, Params: args}
	return h.add(t, params, e)
}

func (t *tbl) newEntry(params standard.BmMatchParams, opts *standard.BmAddEntryOptions) (pipeline.TableEntry, error) {
	key, err := t.key(params)
	if err != nil {
		return pipeline.TableEntry{}, err
	}
	prio, err := t.priority(opts)
	if err != nil {
		return pipeline.TableEntry{}, err
	}
	return pipeline.TableEntry{Match: key, Priority: prio}, nil
}

func (h *std) BmMtSetDefaultAction(_ context.Context, _ int32, table string, action string, data standard.BmActionData) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	if t.indirect() {
		return tableErr(standard.TableOperationErrorCode_WRONG_TABLE_TYPE)
	}
	a, err := t.action(action)
	if err != nil {
		return err
	}
	args, err := actionData(a, data)
	if err != nil {
		return err
	}
	if t.info.ConstDefaultEntry {
		return tableErr(standard.TableOperationErrorCode_DEFAULT_ENTRY_IS_CONST)
	}
	if err := t.v.pl.SetDefaultAction(t.id, pipeline.ActionCall{ActionID: a.ID, Params: args}); err != nil {
		if engine.ErrorCodeOf(err) == engine.CodePermissionDenied {
			return tableErr(standard.TableOperationErrorCode_DEFAULT_ACTION_IS_CONST)
		}
		return tableErrOf(err, standard.TableOperationErrorCode_BAD_ACTION_DATA)
	}
	return nil
}

func (h *std) BmMtResetDefaultEntry(_ context.Context, _ int32, table string) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	return tableErrOf(t.v.pl.ResetDefaultAction(t.id), standard.TableOperationErrorCode_ERROR)
}

// byHandle returns the entry a handle names.
func (t *tbl) byHandle(hd standard.BmEntryHandle) (pipeline.TableEntry, error) {
	e, err := t.v.pl.EntryByHandle(t.id, uint32(hd))
	if err != nil {
		return e, tableErrOf(err, standard.TableOperationErrorCode_INVALID_HANDLE)
	}
	return e, nil
}

func (h *std) BmMtDeleteEntry(_ context.Context, _ int32, table string, hd standard.BmEntryHandle) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	if t.indirect() {
		return tableErr(standard.TableOperationErrorCode_WRONG_TABLE_TYPE)
	}
	return h.delete(t, hd)
}

func (h *std) delete(t *tbl, hd standard.BmEntryHandle) error {
	e, err := t.byHandle(hd)
	if err != nil {
		return err
	}
	if err := t.v.pl.DeleteEntry(t.id, e.Match, e.Priority); err != nil {
		return tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	delete(t.v.written[t.id], uint32(hd))
	return nil
}

func (h *std) BmMtModifyEntry(_ context.Context, _ int32, table string, hd standard.BmEntryHandle, action string, data standard.BmActionData) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	if t.indirect() {
		return tableErr(standard.TableOperationErrorCode_WRONG_TABLE_TYPE)
	}
	a, err := t.action(action)
	if err != nil {
		return err
	}
	args, err := actionData(a, data)
	if err != nil {
		return err
	}
	e, err := t.byHandle(hd)
	if err != nil {
		return err
	}
	e.Action = pipeline.ActionCall{ActionID: a.ID, Params: args}
	return tableErrOf(t.v.pl.ModifyEntry(t.id, e), standard.TableOperationErrorCode_BAD_ACTION_DATA)
}

// BmMtSetEntryTTL sets an entry's ageing timeout (table_set_timeout), in
// tables that support timeouts (support_timeout; others: AGEING_DISABLED),
// naming the entry by its handle's index as BMv2 does. The timeout is
// kept, shown (table_dump's "Life") and dumped; BMv2 reports entries idle
// past it on its nanomsg notifications socket, which terrapin-switch does
// not serve, and deletes nothing: nor does terrapin-switch.
func (h *std) BmMtSetEntryTTL(_ context.Context, _ int32, table string, hd standard.BmEntryHandle, ms int32) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	if !t.info.SupportTimeout {
		return tableErr(standard.TableOperationErrorCode_AGEING_DISABLED)
	}
	if err := t.v.pl.SetEntryTimeout(t.id, uint32(hd), uint32(ms)); err != nil {
		return tableErr(standard.TableOperationErrorCode_INVALID_HANDLE)
	}
	return nil
}

func (h *std) BmMtIndirectSetEntryTTL(ctx context.Context, cxt int32, table string, hd standard.BmEntryHandle, ms int32) error {
	return h.BmMtSetEntryTTL(ctx, cxt, table, hd, ms)
}

func (h *std) BmMtGetEntries(_ context.Context, _ int32, table string) ([]*standard.BmMtEntry, error) {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return nil, err
	}
	es, err := t.v.pl.EntriesByHandle(t.id)
	if err != nil {
		return nil, tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	out := make([]*standard.BmMtEntry, 0, len(es))
	for _, e := range es {
		be, err := t.entry(e)
		if err != nil {
			return nil, err
		}
		out = append(out, be)
	}
	return out, nil
}

func (h *std) BmMtGetEntry(_ context.Context, _ int32, table string, hd standard.BmEntryHandle) (*standard.BmMtEntry, error) {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return nil, err
	}
	e, err := t.byHandle(hd)
	if err != nil {
		return nil, err
	}
	return t.entry(e)
}

func (h *std) BmMtGetDefaultEntry(_ context.Context, _ int32, table string) (*standard.BmActionEntry, error) {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return nil, err
	}
	a, ok, err := t.v.pl.DefaultAction(t.id)
	if err != nil {
		return nil, tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	// an indirect table's default member or group (table_indirect_set_default)
	ref, err := t.v.pl.DefaultIndirect(t.id)
	if err != nil {
		return nil, tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	if ref.Kind != pipeline.IndirectNone {
		ok = true
	}
	return t.actionEntry(a, ref, ok)
}

func (h *std) BmMtGetEntryFromKey(_ context.Context, _ int32, table string, params standard.BmMatchParams, opts *standard.BmAddEntryOptions) (*standard.BmMtEntry, error) {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return nil, err
	}
	e, err := t.newEntry(params, opts)
	if err != nil {
		return nil, err
	}
	got, err := t.v.pl.ReadEntry(t.id, e.Match, e.Priority)
	if err != nil {
		// BMv2 answers a key with no entry as a bad key
		return nil, tableErr(standard.TableOperationErrorCode_BAD_MATCH_KEY)
	}
	return t.entry(got)
}
