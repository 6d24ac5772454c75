package p4rt_test

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"
)

// Meter configurations are read back from the device, not from a copy the
// server keeps: every way of writing one (MeterEntry, DirectMeterEntry, a
// TableEntry's meter_config, a MODIFY that leaves it out) must read back
// through every way of reading it, before and after RECONCILE_AND_COMMIT
// carries it into a new pipeline.
func TestMeterReadWriteSymmetry(t *testing.T) {
	cfgA := &p4v1.MeterConfig{Cir: 10, Cburst: 2, Pir: 20, Pburst: 4}
	cfgB := &p4v1.MeterConfig{Cir: 100, Cburst: 10, Pir: 200, Pburst: 20}
	h := ready(t)
	id := h.ids()
	flow := func() *p4v1.TableEntry { return entry(id.flows, 0, nil, exact(1, mac2...)) }
	withMeter := func(te *p4v1.TableEntry, c *p4v1.MeterConfig) *p4v1.TableEntry { te.MeterConfig = c; return te }

	// what the three reads return for the indirect cell and the entry
	read := func(t *testing.T) (cell, direct, inEntry *p4v1.MeterConfig) {
		t.Helper()
		got, err := h.read(meterEntity(id.portMeter, idx(3), nil))
		if err != nil || len(got) != 1 {
			t.Fatalf("reading the meter cell: %v %v", got, err)
		}
		cell = got[0].GetMeterEntry().GetConfig()
		got, err = h.read(directMeterEntity(flow(), nil))
		if err != nil || len(got) != 1 {
			t.Fatalf("reading the direct meter: %v %v", got, err)
		}
		direct = got[0].GetDirectMeterEntry().GetConfig()
		got, err = h.read(tableEntity(withMeter(flow(), &p4v1.MeterConfig{})))
		if err != nil || len(got) != 1 {
			t.Fatalf("reading the entry: %v %v", got, err)
		}
		return cell, direct, got[0].GetTableEntry().GetMeterConfig()
	}
	for _, tc := range []struct {
		name         string
		write        []*p4v1.Update
		cell, direct *p4v1.MeterConfig
	}{
		{"unconfigured", []*p4v1.Update{insert(withMeter(entry(id.flows, 0, call(id.polic, b(2)), exact(1, mac2...)), nil))}, nil, nil},
		{"MeterEntry and DirectMeterEntry", []*p4v1.Update{
			update(p4v1.Update_MODIFY, meterEntity(id.portMeter, idx(3), cfgA)),
			update(p4v1.Update_MODIFY, directMeterEntity(flow(), cfgB))}, cfgA, cfgB},
		{"TableEntry MODIFY with meter_config", []*p4v1.Update{modify(withMeter(flow(), cfgA))}, cfgA, cfgA},
		{"TableEntry MODIFY without it resets", []*p4v1.Update{modify(flow())}, cfgA, nil},
		{"reset by MeterEntry", []*p4v1.Update{
			update(p4v1.Update_MODIFY, meterEntity(id.portMeter, idx(3), nil)),
			update(p4v1.Update_MODIFY, directMeterEntity(flow(), cfgB))}, nil, cfgB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.mustWrite(tc.write...)
			for _, pass := range []string{"written", "reconciled"} {
				if pass == "reconciled" {
					if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
						t.Fatal(err)
					}
				}
				cell, direct, inEntry := read(t)
				if !proto.Equal(cell, tc.cell) {
					t.Errorf("%s: meter cell reads %v, want %v", pass, cell, tc.cell)
				}
				if !proto.Equal(direct, tc.direct) || !proto.Equal(inEntry, tc.direct) {
					t.Errorf("%s: direct meter reads %v (in the entry %v), want %v", pass, direct, inEntry, tc.direct)
				}
			}
		})
	}
}
