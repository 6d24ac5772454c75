package p4rt_test

import (
	"strings"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestPipelineConfigRefusesP4Info: a P4Info that does not describe the
// device config is INVALID_ARGUMENT (spec §14), with a message naming what
// differs. One row per check the schema makes, so its steps can move
// without a refusal changing.
func TestPipelineConfigRefusesP4Info(t *testing.T) {
	h := newHarness(t)
	h.becomePrimary()
	table := func(info *p4configv1.P4Info, name string) *p4configv1.Table { return named(t, info.GetTables(), name) }
	action := func(info *p4configv1.P4Info, name string) *p4configv1.Action {
		return named(t, info.GetActions(), name)
	}
	cases := []struct {
		name   string
		change func(info *p4configv1.P4Info)
		want   string
	}{
		{"id 0", func(i *p4configv1.P4Info) { table(i, "TestIngress.l2").Preamble.Id = 0 },
			`P4Info object "TestIngress.l2" has id 0`},
		{"id twice", func(i *p4configv1.P4Info) {
			i.Counters[0].Preamble.Id = table(i, "TestIngress.l2").GetPreamble().GetId()
		}, `used by both "TestIngress.l2" and "TestIngress.port_counter"`},
		{"parameter width", func(i *p4configv1.P4Info) { action(i, "TestIngress.forward").Params[0].Bitwidth = 7 },
			`action "TestIngress.forward" parameter "port" is 7 bits in P4Info`},
		{"parameter without width", func(i *p4configv1.P4Info) { action(i, "TestIngress.forward").Params[0].Bitwidth = 0 },
			`action "TestIngress.forward" parameter "port" has no bitwidth`},
		{"match fields", func(i *p4configv1.P4Info) {
			l2 := table(i, "TestIngress.l2")
			l2.MatchFields = append(l2.MatchFields, &p4configv1.MatchField{Id: 9, Name: "x", Bitwidth: 8,
				Match: &p4configv1.MatchField_MatchType_{MatchType: p4configv1.MatchField_EXACT}})
		}, `table "TestIngress.l2" has 2 match fields in P4Info, 1 in the device config`},
		{"match field id", func(i *p4configv1.P4Info) { table(i, "TestIngress.l2").MatchFields[0].Id = 0 },
			`table "TestIngress.l2" has a duplicate or zero match field id 0`},
		{"unknown action", func(i *p4configv1.P4Info) { table(i, "TestIngress.l2").ActionRefs[0].Id = 0x01abcdef },
			`table "TestIngress.l2" refers to unknown action id 0x1abcdef`},
		{"unknown direct resource", func(i *p4configv1.P4Info) {
			l2 := table(i, "TestIngress.l2")
			l2.DirectResourceIds = append(l2.DirectResourceIds, 0x01abcdef)
		}, `table "TestIngress.l2" has unknown direct resource 0x1abcdef`},
		{"direct counter of no table", func(i *p4configv1.P4Info) { table(i, "TestIngress.acl").DirectResourceIds = nil },
			`is attached to no table`},
		{"counter", func(i *p4configv1.P4Info) { i.Counters[0].Preamble.Name = "TestIngress.nope" },
			`P4Info counter "TestIngress.nope" is not in the device config`},
		{"meter", func(i *p4configv1.P4Info) { i.Meters[0].Preamble.Name = "TestIngress.nope" },
			`P4Info meter "TestIngress.nope" is not in the device config`},
		{"register", func(i *p4configv1.P4Info) { i.Registers[0].Preamble.Name = "TestIngress.nope" },
			`P4Info register "TestIngress.nope" is not in the device config`},
		{"controller header", func(i *p4configv1.P4Info) { i.ControllerPacketMetadata[0].Metadata[0].Bitwidth = 0 },
			`controller header "packet_in" field "ingress_port" has no bitwidth`},
		{"another program", func(i *p4configv1.P4Info) {
			for _, x := range i.Tables {
				x.Preamble.Name += "_elsewhere"
			}
			for _, x := range i.Actions {
				x.Preamble.Name += "_elsewhere"
			}
			i.Counters, i.Meters, i.Registers, i.DirectCounters, i.DirectMeters = nil, nil, nil, nil, nil
			for _, x := range i.Tables {
				x.DirectResourceIds = nil
			}
		}, `none of the P4Info tables and actions is in the device config`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := h.config()
			cfg.P4Info = proto.Clone(cfg.P4Info).(*p4configv1.P4Info)
			tc.change(cfg.P4Info)
			err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY, cfg)
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want INVALID_ARGUMENT containing %q", err, tc.want)
			}
		})
	}
}

// named is the P4Info object of that name among xs.
func named[T interface{ GetPreamble() *p4configv1.Preamble }](t *testing.T, xs []T, name string) T {
	t.Helper()
	for _, x := range xs {
		if x.GetPreamble().GetName() == name {
			return x
		}
	}
	t.Fatalf("no P4Info object %s", name)
	var none T
	return none
}
