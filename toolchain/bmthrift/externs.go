package bmthrift

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"math"
	"math/big"

	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/standard"
	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// ---- counters ----

func counterErr(code standard.CounterOperationErrorCode) error {
	return &standard.InvalidCounterOperation{Code: code}
}

func (h *std) counter(name string) (*view, pipeline.CounterInfo, error) {
	bad := counterErr(standard.CounterOperationErrorCode_INVALID_COUNTER_NAME)
	v, err := h.s.current()
	if err != nil {
		return nil, pipeline.CounterInfo{}, bad
	}
	for _, c := range v.pl.Counters() {
		if c.Name == name && !c.Direct {
			return v, c, nil
		}
	}
	return nil, pipeline.CounterInfo{}, bad
}

func counterValue(d pipeline.CounterData) *standard.BmCounterValue {
	return &standard.BmCounterValue{Bytes: int64(d.Bytes), Packets: int64(d.Packets)}
}

func counterData(v *standard.BmCounterValue) pipeline.CounterData {
	if v == nil {
		return pipeline.CounterData{}
	}
	return pipeline.CounterData{Bytes: uint64(v.Bytes), Packets: uint64(v.Packets)}
}

func (h *std) BmCounterRead(_ context.Context, _ int32, name string, index int32) (*standard.BmCounterValue, error) {
	defer h.lock()()
	v, c, err := h.counter(name)
	if err != nil {
		return nil, err
	}
	if index < 0 || int(index) >= c.Size {
		return nil, counterErr(standard.CounterOperationErrorCode_INVALID_INDEX)
	}
	d, err := v.pl.ReadCounter(c.ID, int(index))
	if err != nil {
		return nil, counterErr(standard.CounterOperationErrorCode_ERROR)
	}
	return counterValue(d), nil
}

func (h *std) BmCounterResetAll(_ context.Context, _ int32, name string) error {
	defer h.lock()()
	v, c, err := h.counter(name)
	if err != nil {
		return err
	}
	if err := v.pl.ResetCounters(c.ID); err != nil {
		return counterErr(standard.CounterOperationErrorCode_ERROR)
	}
	return nil
}

func (h *std) BmCounterWrite(_ context.Context, _ int32, name string, index int32, val *standard.BmCounterValue) error {
	defer h.lock()()
	v, c, err := h.counter(name)
	if err != nil {
		return err
	}
	if index < 0 || int(index) >= c.Size {
		return counterErr(standard.CounterOperationErrorCode_INVALID_INDEX)
	}
	if err := v.pl.WriteCounter(c.ID, int(index), counterData(val)); err != nil {
		return counterErr(standard.CounterOperationErrorCode_ERROR)
	}
	return nil
}

// Direct counters, by the entry's handle (its index: BMv2 does not check
// the version).

func (h *std) directEntry(table string, hd standard.BmEntryHandle, need func(pipeline.TableInfo) bool, disabled standard.TableOperationErrorCode) (*tbl, pipeline.TableEntry, error) {
	t, err := h.table(table)
	if err != nil {
		return nil, pipeline.TableEntry{}, err
	}
	if !need(t.info) {
		return nil, pipeline.TableEntry{}, tableErr(disabled)
	}
	// BMv2 checks only the handle's index here, not its version.
	e, err := t.v.pl.EntryAtIndex(t.id, uint32(hd))
	if err != nil {
		return nil, e, tableErrOf(err, standard.TableOperationErrorCode_INVALID_HANDLE)
	}
	return t, e, nil
}

func hasCounter(ti pipeline.TableInfo) bool { return ti.DirectCounter != "" }
func hasMeter(ti pipeline.TableInfo) bool   { return ti.DirectMeter != "" }

func (h *std) BmMtReadCounter(_ context.Context, _ int32, table string, hd standard.BmEntryHandle) (*standard.BmCounterValue, error) {
	defer h.lock()()
	_, e, err := h.directEntry(table, hd, hasCounter, standard.TableOperationErrorCode_COUNTERS_DISABLED)
	if err != nil {
		return nil, err
	}
	return counterValue(e.Counter), nil
}

func (h *std) BmMtWriteCounter(_ context.Context, _ int32, table string, hd standard.BmEntryHandle, val *standard.BmCounterValue) error {
	defer h.lock()()
	t, e, err := h.directEntry(table, hd, hasCounter, standard.TableOperationErrorCode_COUNTERS_DISABLED)
	if err != nil {
		return err
	}
	return tableErrOf(t.v.pl.WriteDirectCounter(t.id, e.Match, e.Priority, counterData(val)), standard.TableOperationErrorCode_ERROR)
}

func (h *std) BmMtResetCounters(_ context.Context, _ int32, table string) error {
	defer h.lock()()
	t, err := h.table(table)
	if err != nil {
		return err
	}
	if !hasCounter(t.info) {
		return tableErr(standard.TableOperationErrorCode_COUNTERS_DISABLED)
	}
	es, err := t.v.pl.ReadEntries(t.id)
	if err != nil {
		return tableErrOf(err, standard.TableOperationErrorCode_ERROR)
	}
	for _, e := range es {
		if err := t.v.pl.WriteDirectCounter(t.id, e.Match, e.Priority, pipeline.CounterData{}); err != nil {
			return tableErrOf(err, standard.TableOperationErrorCode_ERROR)
		}
	}
	return nil
}

// ---- meters ----
//
// BMv2's rates are [committed, peak], each in units (bytes or packets) per
// microsecond with a burst in units; the engine's configuration is
// P4Runtime's, in units per second. PI converts between the two the same
// way, so a meter set on one side reads back on the other.

func meterErr(code standard.MeterOperationErrorCode) error {
	return &standard.InvalidMeterOperation{Code: code}
}

// meterConfig converts BMv2's rates; bad is the error code for a list
// that is not two rates.
func meterConfig(rates []*standard.BmMeterRateConfig) (*pipeline.MeterConfig, standard.MeterOperationErrorCode, bool) {
	if len(rates) != 2 {
		return nil, standard.MeterOperationErrorCode_BAD_RATES_LIST, false
	}
	for _, r := range rates {
		if r == nil || r.UnitsPerMicros < 0 || math.IsNaN(r.UnitsPerMicros) || r.UnitsPerMicros*1e6 > math.MaxUint64/2 {
			return nil, standard.MeterOperationErrorCode_INVALID_INFO_RATE_VALUE, false
		}
		if r.BurstSize < 0 {
			return nil, standard.MeterOperationErrorCode_INVALID_BURST_SIZE_VALUE, false
		}
	}
	if rates[0].UnitsPerMicros > rates[1].UnitsPerMicros {
		// BMv2: each rate at least the one before it.
		return nil, standard.MeterOperationErrorCode_INVALID_INFO_RATE_VALUE, false
	}
	return &pipeline.MeterConfig{
		CIR: uint64(math.Round(rates[0].UnitsPerMicros * 1e6)), CBurst: uint64(rates[0].BurstSize),
		PIR: uint64(math.Round(rates[1].UnitsPerMicros * 1e6)), PBurst: uint64(rates[1].BurstSize),
	}, 0, true
}

func meterRates(c *pipeline.MeterConfig) []*standard.BmMeterRateConfig {
	if c == nil {
		return []*standard.BmMeterRateConfig{}
	}
	return []*standard.BmMeterRateConfig{
		{UnitsPerMicros: float64(c.CIR) / 1e6, BurstSize: int32(min(c.CBurst, math.MaxInt32))},
		{UnitsPerMicros: float64(c.PIR) / 1e6, BurstSize: int32(min(c.PBurst, math.MaxInt32))},
	}
}

func (h *std) meter(name string) (*view, pipeline.MeterInfo, error) {
	bad := meterErr(standard.MeterOperationErrorCode_INVALID_METER_NAME)
	v, err := h.s.current()
	if err != nil {
		return nil, pipeline.MeterInfo{}, bad
	}
	for _, m := range v.pl.Meters() {
		if m.Name == name && !m.Direct {
			return v, m, nil
		}
	}
	return nil, pipeline.MeterInfo{}, bad
}

func (h *std) BmMeterArraySetRates(_ context.Context, _ int32, name string, rates []*standard.BmMeterRateConfig) error {
	defer h.lock()()
	v, m, err := h.meter(name)
	if err != nil {
		return err
	}
	cfg, code, ok := meterConfig(rates)
	if !ok {
		return meterErr(code)
	}
	for i := 0; i < m.Size; i++ {
		if err := v.pl.SetMeter(m.ID, i, cfg); err != nil {
			return meterErr(standard.MeterOperationErrorCode_ERROR)
		}
	}
	return nil
}

func (h *std) BmMeterSetRates(_ context.Context, _ int32, name string, index int32, rates []*standard.BmMeterRateConfig) error {
	defer h.lock()()
	v, m, err := h.meter(name)
	if err != nil {
		return err
	}
	if index < 0 || int(index) >= m.Size {
		return meterErr(standard.MeterOperationErrorCode_INVALID_INDEX)
	}
	cfg, code, ok := meterConfig(rates)
	if !ok {
		return meterErr(code)
	}
	if err := v.pl.SetMeter(m.ID, int(index), cfg); err != nil {
		return meterErr(standard.MeterOperationErrorCode_ERROR)
	}
	return nil
}

func (h *std) BmMeterGetRates(_ context.Context, _ int32, name string, index int32) ([]*standard.BmMeterRateConfig, error) {
	defer h.lock()()
	v, m, err := h.meter(name)
	if err != nil {
		return nil, err
	}
	if index < 0 || int(index) >= m.Size {
		return nil, meterErr(standard.MeterOperationErrorCode_INVALID_INDEX)
	}
	c, err := v.pl.Meter(m.ID, int(index))
	if err != nil {
		return nil, meterErr(standard.MeterOperationErrorCode_ERROR)
	}
	return meterRates(c), nil
}

func (h *std) BmMtSetMeterRates(_ context.Context, _ int32, table string, hd standard.BmEntryHandle, rates []*standard.BmMeterRateConfig) error {
	defer h.lock()()
	t, e, err := h.directEntry(table, hd, hasMeter, standard.TableOperationErrorCode_METERS_DISABLED)
	if err != nil {
		return err
	}
	cfg, _, ok := meterConfig(rates)
	if !ok {
		return tableErr(standard.TableOperationErrorCode_INVALID_METER_OPERATION)
	}
	return tableErrOf(t.v.pl.SetDirectMeter(t.id, e.Match, e.Priority, cfg), standard.TableOperationErrorCode_INVALID_METER_OPERATION)
}

func (h *std) BmMtGetMeterRates(_ context.Context, _ int32, table string, hd standard.BmEntryHandle) ([]*standard.BmMeterRateConfig, error) {
	defer h.lock()()
	_, e, err := h.directEntry(table, hd, hasMeter, standard.TableOperationErrorCode_METERS_DISABLED)
	if err != nil {
		return nil, err
	}
	return meterRates(e.Meter), nil
}

// ---- registers ----

func registerErr(code standard.RegisterOperationErrorCode) error {
	return &standard.InvalidRegisterOperation{Code: code}
}

func (h *std) register(name string) (*view, pipeline.RegisterInfo, error) {
	bad := registerErr(standard.RegisterOperationErrorCode_INVALID_REGISTER_NAME)
	v, err := h.s.current()
	if err != nil {
		return nil, pipeline.RegisterInfo{}, bad
	}
	for _, r := range v.pl.Registers() {
		if r.Name == name {
			return v, r, nil
		}
	}
	return nil, pipeline.RegisterInfo{}, bad
}

// registerValue is a cell as BMv2 answers it: the low 64 bits.
func registerValue(b []byte) standard.BmRegisterValue {
	var buf [8]byte
	if len(b) >= 8 {
		copy(buf[:], b[len(b)-8:])
	} else {
		copy(buf[8-len(b):], b)
	}
	return standard.BmRegisterValue(binary.BigEndian.Uint64(buf[:]))
}

func registerBytes(v standard.BmRegisterValue, width int) []byte {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(v))
	if width > 64 && v < 0 {
		// sign-extended, as BMv2's Data from an int64
		n := new(big.Int).Lsh(big.NewInt(1), uint(width))
		n.Add(n, big.NewInt(int64(v)))
		return fitBytes(n.Bytes(), width)
	}
	return fitBytes(buf[:], width)
}

func (h *std) BmRegisterRead(_ context.Context, _ int32, name string, index int32) (standard.BmRegisterValue, error) {
	defer h.lock()()
	v, r, err := h.register(name)
	if err != nil {
		return 0, err
	}
	if index < 0 || int(index) >= r.Size {
		return 0, registerErr(standard.RegisterOperationErrorCode_INVALID_INDEX)
	}
	b, err := v.pl.ReadRegister(r.ID, int(index))
	if err != nil {
		return 0, registerErr(standard.RegisterOperationErrorCode_ERROR)
	}
	return registerValue(b), nil
}

func (h *std) BmRegisterReadAll(_ context.Context, _ int32, name string) ([]standard.BmRegisterValue, error) {
	defer h.lock()()
	v, r, err := h.register(name)
	if err != nil {
		return nil, err
	}
	out := make([]standard.BmRegisterValue, r.Size)
	for i := range out {
		b, err := v.pl.ReadRegister(r.ID, i)
		if err != nil {
			return nil, registerErr(standard.RegisterOperationErrorCode_ERROR)
		}
		out[i] = registerValue(b)
	}
	return out, nil
}

func (h *std) BmRegisterWrite(_ context.Context, _ int32, name string, index int32, val standard.BmRegisterValue) error {
	defer h.lock()()
	v, r, err := h.register(name)
	if err != nil {
		return err
	}
	if index < 0 || int(index) >= r.Size {
		return registerErr(standard.RegisterOperationErrorCode_INVALID_INDEX)
	}
	if err := v.pl.WriteRegister(r.ID, int(index), registerBytes(val, r.Bitwidth)); err != nil {
		return registerErr(standard.RegisterOperationErrorCode_ERROR)
	}
	return nil
}

// BmRegisterWriteRange writes cells [start, end), as BMv2 does.
func (h *std) BmRegisterWriteRange(_ context.Context, _ int32, name string, start, end int32, val standard.BmRegisterValue) error {
	defer h.lock()()
	v, r, err := h.register(name)
	if err != nil {
		return err
	}
	if start < 0 || end < start || int(end) > r.Size {
		return registerErr(standard.RegisterOperationErrorCode_INVALID_INDEX)
	}
	b := registerBytes(val, r.Bitwidth)
	for i := start; i < end; i++ {
		if err := v.pl.WriteRegister(r.ID, int(i), b); err != nil {
			return registerErr(standard.RegisterOperationErrorCode_ERROR)
		}
	}
	return nil
}

func (h *std) BmRegisterReset(_ context.Context, _ int32, name string) error {
	defer h.lock()()
	v, r, err := h.register(name)
	if err != nil {
		return err
	}
	if err := v.pl.ResetRegister(r.ID); err != nil {
		return registerErr(standard.RegisterOperationErrorCode_ERROR)
	}
	return nil
}

// ---- parser value sets ----

func pvsErr(code standard.ParseVSetOperationErrorCode) error {
	return &standard.InvalidParseVSetOperation{Code: code}
}

func (h *std) valueSet(name string) (*view, pipeline.ValueSetInfo, error) {
	bad := pvsErr(standard.ParseVSetOperationErrorCode_INVALID_PARSE_VSET_NAME)
	v, err := h.s.current()
	if err != nil {
		return nil, pipeline.ValueSetInfo{}, bad
	}
	for _, vs := range v.pl.ValueSets() {
		if vs.Name == name {
			return v, vs, nil
		}
	}
	return nil, pipeline.ValueSetInfo{}, bad
}

// changeValueSet applies change to the set's members (BMv2's are values
// without masks, unordered).
func (h *std) changeValueSet(name string, change func(vs pipeline.ValueSetInfo, ms []pipeline.ValueSetMember) []pipeline.ValueSetMember) error {
	v, vs, err := h.valueSet(name)
	if err != nil {
		return err
	}
	ms, err := v.pl.ValueSet(vs.ID)
	if err != nil {
		return pvsErr(standard.ParseVSetOperationErrorCode_ERROR)
	}
	if err := v.pl.SetValueSet(vs.ID, change(vs, ms)); err != nil {
		return pvsErr(standard.ParseVSetOperationErrorCode_ERROR)
	}
	return nil
}

func sameValue(m pipeline.ValueSetMember, val []byte) bool {
	return m.Mask == nil && string(m.Value) == string(val)
}

func (h *std) BmParseVsetAdd(_ context.Context, _ int32, name string, val standard.BmParseVSetValue) error {
	defer h.lock()()
	return h.changeValueSet(name, func(vs pipeline.ValueSetInfo, ms []pipeline.ValueSetMember) []pipeline.ValueSetMember {
		b := fitBytes(val, vs.Bitwidth)
		for _, m := range ms {
			if sameValue(m, b) {
				return ms // BMv2: adding a value twice is no error
			}
		}
		return append(ms, pipeline.ValueSetMember{Value: b})
	})
}

func (h *std) BmParseVsetRemove(_ context.Context, _ int32, name string, val standard.BmParseVSetValue) error {
	defer h.lock()()
	return h.changeValueSet(name, func(vs pipeline.ValueSetInfo, ms []pipeline.ValueSetMember) []pipeline.ValueSetMember {
		b := fitBytes(val, vs.Bitwidth)
		out := ms[:0:0]
		for _, m := range ms {
			if !sameValue(m, b) {
				out = append(out, m)
			}
		}
		return out
	})
}

func (h *std) BmParseVsetGet(_ context.Context, _ int32, name string) ([]standard.BmParseVSetValue, error) {
	defer h.lock()()
	v, vs, err := h.valueSet(name)
	if err != nil {
		return nil, err
	}
	ms, err := v.pl.ValueSet(vs.ID)
	if err != nil {
		return nil, pvsErr(standard.ParseVSetOperationErrorCode_ERROR)
	}
	out := []standard.BmParseVSetValue{}
	for _, m := range ms {
		out = append(out, standard.BmParseVSetValue(m.Value))
	}
	return out, nil
}

func (h *std) BmParseVsetClear(_ context.Context, _ int32, name string) error {
	defer h.lock()()
	return h.changeValueSet(name, func(pipeline.ValueSetInfo, []pipeline.ValueSetMember) []pipeline.ValueSetMember { return nil })
}

// ---- learning: BMv2's learn lists deliver digests over nanomsg, which
// terrapin-switch does not serve (digests go to P4Runtime). ----

func learnErr() error {
	return &standard.InvalidLearnOperation{Code: standard.LearnOperationErrorCode_ERROR}
}

func (h *std) BmLearningAck(context.Context, int32, standard.BmLearningListId, standard.BmLearningBufferId, []standard.BmLearningSampleId) error {
	return learnErr()
}
func (h *std) BmLearningAckBuffer(context.Context, int32, standard.BmLearningListId, standard.BmLearningBufferId) error {
	return learnErr()
}
func (h *std) BmLearningSetTimeout(context.Context, int32, standard.BmLearningListId, int32) error {
	return learnErr()
}
func (h *std) BmLearningSetBufferSize(context.Context, int32, standard.BmLearningListId, int32) error {
	return learnErr()
}

// ---- custom hash parameters: a crc16_custom or crc32_custom calculation's
// own polynomial, initial remainder, final xor and reflections (the
// engine's SetCustomCRC). Toeplitz hashes are not an algorithm the engine
// has. ----

func (h *std) BmSetCrc16CustomParameters(_ context.Context, _ int32, name string, c *standard.BmCrc16Config) error {
	if c == nil {
		return &standard.InvalidCrcOperation{Code: standard.CrcErrorCode_INVALID_CONFIG}
	}
	return h.setCustomCRC(name, 16, pipeline.CRCParams{
		Polynomial: uint64(uint16(c.Polynomial)), Initial: uint64(uint16(c.InitialRemainder)),
		FinalXor: uint64(uint16(c.FinalXorValue)), ReflectData: c.DataReflected, ReflectRemainder: c.RemainderReflected,
	})
}

func (h *std) BmSetCrc32CustomParameters(_ context.Context, _ int32, name string, c *standard.BmCrc32Config) error {
	if c == nil {
		return &standard.InvalidCrcOperation{Code: standard.CrcErrorCode_INVALID_CONFIG}
	}
	return h.setCustomCRC(name, 32, pipeline.CRCParams{
		Polynomial: uint64(uint32(c.Polynomial)), Initial: uint64(uint32(c.InitialRemainder)),
		FinalXor: uint64(uint32(c.FinalXorValue)), ReflectData: c.DataReflected, ReflectRemainder: c.RemainderReflected,
	})
}

func (h *std) setCustomCRC(name string, width int, p pipeline.CRCParams) error {
	defer h.lock()()
	v, err := h.s.current()
	if err != nil {
		return &standard.InvalidCrcOperation{Code: standard.CrcErrorCode_INVALID_CALCULATION_NAME}
	}
	switch err := v.pl.SetCustomCRC(name, width, p); {
	case errors.Is(err, engine.ErrNoCalculation):
		return &standard.InvalidCrcOperation{Code: standard.CrcErrorCode_INVALID_CALCULATION_NAME}
	case err != nil:
		return &standard.InvalidCrcOperation{Code: standard.CrcErrorCode_WRONG_TYPE_CALCULATION}
	}
	return nil
}

func (h *std) BmSetToeplitzHashKey(context.Context, int32, string, standard.BmToeplitzHashKey) error {
	return &standard.InvalidToeplitzHashOperation{Code: standard.ToeplitzHashErrorCode_INVALID_CALCULATION_NAME}
}

// ---- ids ----

func (h *std) BmGetIDFromName(_ context.Context, _ int32, kind standard.BmResourceType, name string) (int32, error) {
	defer h.lock()()
	v, err := h.s.current()
	if err != nil {
		return 0, &standard.InvalidIdLookup{Code: standard.IdLookupErrorCode_INVALID_RESOURCE_NAME}
	}
	var k engine.ObjectKind
	switch kind {
	case standard.BmResourceType_MATCH_TABLE:
		k = engine.KindTable
	case standard.BmResourceType_ACTION_PROFILE:
		k = engine.KindActionProfile
	case standard.BmResourceType_COUNTER:
		k = engine.KindCounter
	case standard.BmResourceType_METER:
		k = engine.KindMeter
	case standard.BmResourceType_REGISTER:
		k = engine.KindRegister
	default:
		return 0, &standard.InvalidIdLookup{Code: standard.IdLookupErrorCode_INVALID_RESOURCE_TYPE}
	}
	id, ok := v.pl.Lookup(k, name)
	if !ok {
		return 0, &standard.InvalidIdLookup{Code: standard.IdLookupErrorCode_INVALID_RESOURCE_NAME}
	}
	return int32(id), nil
}

// ---- the program ----

func (h *std) BmGetConfig(context.Context) (string, error) {
	defer h.lock()()
	v, err := h.s.current()
	if err != nil {
		return "", nil
	}
	return string(v.json), nil
}

func (h *std) BmGetConfigMd5(context.Context) ([]byte, error) {
	defer h.lock()()
	v, err := h.s.current()
	if err != nil {
		return []byte{}, nil
	}
	sum := md5.Sum(v.json)
	return sum[:], nil
}
