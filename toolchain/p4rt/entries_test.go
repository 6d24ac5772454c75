package p4rt_test

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/engine"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Table entries are read back from the device (the server keeps only
// cookies, metadata and one-shot sets): whatever form a client writes,
// every match kind must read back in P4Runtime's canonical form (values
// without leading zeros, don't-care fields omitted) with its priority,
// action, cookie and metadata, in insertion order, by wildcard and by key,
// before and after RECONCILE_AND_COMMIT carries it into a new pipeline.
func TestEntryReadWriteSymmetry(t *testing.T) {
	withMeta := func(te *p4v1.TableEntry, cookie uint64, meta string) *p4v1.TableEntry {
		te.ControllerMetadata, te.Metadata = cookie, []byte(meta)
		return te
	}
	for _, tc := range []struct {
		name  string
		table func(ids) uint32
		// write is applied in order; want is the table's read back.
		write func(ids) []*p4v1.Update
		want  func(ids) []*p4v1.TableEntry
	}{
		{"exact, padded values and a cookie",
			func(id ids) uint32 { return id.l2 },
			func(id ids) []*p4v1.Update {
				return []*p4v1.Update{
					insert(withMeta(entry(id.l2, 0, call(id.forward, b(0, 2)), exact(1, b(0, 0, 0, 0, 0, 0, 0, 2)...)), 7, "m")),
					insert(entry(id.l2, 0, call(id.toCPU), exact(1, 0, 0, 0, 0, 1, 3))),
				}
			},
			func(id ids) []*p4v1.TableEntry {
				return []*p4v1.TableEntry{
					withMeta(entry(id.l2, 0, call(id.forward, b(2)), exact(1, 2)), 7, "m"),
					entry(id.l2, 0, call(id.toCPU), exact(1, 1, 3)),
				}
			}},
		{"ternary and optional, priorities, all don't care",
			func(id ids) uint32 { return id.acl },
			func(id ids) []*p4v1.Update {
				return []*p4v1.Update{
					insert(withMeta(entry(id.acl, 10, call(id.aclPermit), ternary(1, b(8, 0), b(0xff, 0xff)), optional(2, 0, 3)), 3, "opt")),
					insert(entry(id.acl, 3, call(id.aclPermit))),
					insert(entry(id.acl, 5, call(id.aclPermit), ternary(1, b(0, 0x10), b(0, 0xf0)))),
					insert(entry(id.acl, 6, call(id.aclPermit), ternary(1, b(0, 0x10), b(0, 0xf0)))),
				}
			},
			func(id ids) []*p4v1.TableEntry {
				return []*p4v1.TableEntry{
					withMeta(entry(id.acl, 10, call(id.aclPermit), ternary(1, b(8, 0), b(0xff, 0xff)), optional(2, 3)), 3, "opt"),
					entry(id.acl, 3, call(id.aclPermit)),
					entry(id.acl, 5, call(id.aclPermit), ternary(1, b(0x10), b(0xf0))),
					entry(id.acl, 6, call(id.aclPermit), ternary(1, b(0x10), b(0xf0))),
				}
			}},
		{"lpm",
			func(id ids) uint32 { return id.srcRewrite },
			func(id ids) []*p4v1.Update {
				return []*p4v1.Update{
					insert(entry(id.srcRewrite, 0, call(id.setSrc, mac2), lpm(1, b(0x0a, 0, 0, 0, 0, 0), 8))),
					insert(withMeta(entry(id.srcRewrite, 0, call(id.setSrc, b(0, 0, 0, 0, 0, 0, 0, 9)), lpm(1, b(0, 0, 0, 0, 0, 0, 1, 0), 40)), 0, "lpm")),
				}
			},
			func(id ids) []*p4v1.TableEntry {
				return []*p4v1.TableEntry{
					entry(id.srcRewrite, 0, call(id.setSrc, b(2)), lpm(1, b(0x0a, 0, 0, 0, 0, 0), 8)),
					withMeta(entry(id.srcRewrite, 0, call(id.setSrc, b(9)), lpm(1, b(1, 0), 40)), 0, "lpm"),
				}
			}},
		{"range",
			func(id ids) uint32 { return id.typeRange },
			func(id ids) []*p4v1.Update {
				return []*p4v1.Update{
					insert(withMeta(entry(id.typeRange, 1, call(id.markType, b(1)), rng(1, b(0, 0x10), b(0x20))), 1, "")),
					insert(entry(id.typeRange, 2, call(id.markType, b(0, 2)), rng(1, b(8, 0), b(8, 0)))),
				}
			},
			func(id ids) []*p4v1.TableEntry {
				return []*p4v1.TableEntry{
					withMeta(entry(id.typeRange, 1, call(id.markType, b(1)), rng(1, b(0x10), b(0x20))), 1, ""),
					entry(id.typeRange, 2, call(id.markType, b(2)), rng(1, b(8, 0), b(8, 0))),
				}
			}},
		{"modify replaces action and cookie; without an action keeps the action",
			func(id ids) uint32 { return id.l2 },
			func(id ids) []*p4v1.Update {
				return []*p4v1.Update{
					insert(withMeta(entry(id.l2, 0, call(id.forward, b(2)), exact(1, 1)), 1, "")),
					insert(withMeta(entry(id.l2, 0, call(id.forward, b(2)), exact(1, 2)), 2, "two")),
					modify(withMeta(entry(id.l2, 0, call(id.forward, b(3)), exact(1, 1)), 5, "x")),
					modify(entry(id.l2, 0, nil, exact(1, 2))),
				}
			},
			func(id ids) []*p4v1.TableEntry {
				return []*p4v1.TableEntry{
					withMeta(entry(id.l2, 0, call(id.forward, b(3)), exact(1, 1)), 5, "x"),
					entry(id.l2, 0, call(id.forward, b(2)), exact(1, 2)),
				}
			}},
		{"delete forgets the cookie",
			func(id ids) uint32 { return id.l2 },
			func(id ids) []*p4v1.Update {
				return []*p4v1.Update{
					insert(withMeta(entry(id.l2, 0, call(id.forward, b(2)), exact(1, 1)), 9, "gone")),
					insert(entry(id.l2, 0, call(id.drop), exact(1, 2))),
					remove(entry(id.l2, 0, nil, exact(1, 1))),
					insert(entry(id.l2, 0, call(id.forward, b(4)), exact(1, 1))),
				}
			},
			func(id ids) []*p4v1.TableEntry {
				return []*p4v1.TableEntry{
					entry(id.l2, 0, call(id.drop), exact(1, 2)),
					entry(id.l2, 0, call(id.forward, b(4)), exact(1, 1)),
				}
			}},
		{"declared entries, from the program",
			func(id ids) uint32 { return id.fixed },
			func(ids) []*p4v1.Update { return nil },
			func(id ids) []*p4v1.TableEntry {
				te := entry(id.fixed, 0, call(id.markType, b(8, 1)), exact(1, 8, 0))
				te.IsConst = true
				return []*p4v1.TableEntry{te}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := ready(t)
			id := h.ids()
			if w := tc.write(id); len(w) > 0 {
				h.mustWrite(w...)
			}
			want := tc.want(id)
			for _, pass := range []string{"written", "reconciled"} {
				if pass == "reconciled" {
					if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
						t.Fatal(err)
					}
				}
				got, err := h.read(tableEntity(&p4v1.TableEntry{TableId: tc.table(id)}))
				if err != nil {
					t.Fatalf("%s: wildcard read: %v", pass, err)
				}
				if len(got) != len(want) {
					t.Fatalf("%s: read %d entries, want %d: %v", pass, len(got), len(want), got)
				}
				for i, w := range want {
					if !proto.Equal(got[i].GetTableEntry(), w) {
						t.Errorf("%s: entry %d reads\n  %v\nwant\n  %v", pass, i, got[i].GetTableEntry(), w)
					}
					one, err := h.read(tableEntity(&p4v1.TableEntry{TableId: w.GetTableId(), Match: w.GetMatch(), Priority: w.GetPriority()}))
					if err != nil || len(one) != 1 || !proto.Equal(one[0].GetTableEntry(), w) {
						t.Errorf("%s: entry %d by its key reads %v (%v), want %v", pass, i, one, err, w)
					}
				}
			}
		})
	}
}

// Direct counters and meters attached to entries read back with them
// (when the read asks) and through DirectCounterEntry, for entries the
// device holds and for the program's declared ones, and are carried over
// by RECONCILE_AND_COMMIT.
func TestEntryDirectResourcesReadBack(t *testing.T) {
	h := ready(t)
	id := h.ids()
	aclEntry := func() *p4v1.TableEntry { return entry(id.acl, 4, call(id.aclPermit), optional(2, 1)) }
	flow := func() *p4v1.TableEntry { return entry(id.flows, 0, call(id.polic, b(2)), exact(1, mac2...)) }
	counted := aclEntry()
	counted.CounterData = &p4v1.CounterData{PacketCount: 5, ByteCount: 500}
	metered := flow()
	metered.MeterConfig = &p4v1.MeterConfig{Cir: 10, Cburst: 2, Pir: 20, Pburst: 4}
	h.mustWrite(insert(counted), insert(metered))
	for _, pass := range []string{"written", "reconciled"} {
		if pass == "reconciled" {
			if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name  string
			query *p4v1.Entity
			want  proto.Message
			get   func(*p4v1.Entity) proto.Message
		}{
			{"entry with counter_data", tableEntity(&p4v1.TableEntry{TableId: id.acl, CounterData: &p4v1.CounterData{}}), counted,
				func(e *p4v1.Entity) proto.Message { return e.GetTableEntry() }},
			{"entry without counter_data", tableEntity(&p4v1.TableEntry{TableId: id.acl}), aclEntry(),
				func(e *p4v1.Entity) proto.Message { return e.GetTableEntry() }},
			{"direct counter entry", directCounterEntity(&p4v1.TableEntry{TableId: id.acl}, nil), counted.GetCounterData(),
				func(e *p4v1.Entity) proto.Message { return e.GetDirectCounterEntry().GetData() }},
			{"entry with meter_config", tableEntity(&p4v1.TableEntry{TableId: id.flows, MeterConfig: &p4v1.MeterConfig{}}),
				withMeterConfig(entry(id.flows, 0, call(id.polic, b(2)), exact(1, 2)), metered.GetMeterConfig()),
				func(e *p4v1.Entity) proto.Message { return e.GetTableEntry() }},
		} {
			got, err := h.read(tc.query)
			if err != nil || len(got) != 1 {
				t.Fatalf("%s: %s: read %v, %v", pass, tc.name, got, err)
			}
			if g := tc.get(got[0]); !proto.Equal(g, tc.want) {
				t.Errorf("%s: %s reads %v, want %v", pass, tc.name, g, tc.want)
			}
		}
	}
}

func withMeterConfig(te *p4v1.TableEntry, c *p4v1.MeterConfig) *p4v1.TableEntry {
	te.MeterConfig = c
	return te
}

// The server reads entries from the device, so an entry the device gains
// or loses by other means (here the engine's own control API) shows in
// P4Runtime reads at once, its action named by P4Info id.
func TestEntriesAreReadFromTheDevice(t *testing.T) {
	h := ready(t)
	id := h.ids()
	pl := h.target.Pipeline()
	tid, ok := pl.Lookup(engine.KindTable, "TestIngress.l2")
	aid, ok2 := pl.Lookup(engine.KindAction, "TestIngress.forward")
	if !ok || !ok2 {
		t.Fatal("the engine has no TestIngress.l2 / TestIngress.forward")
	}
	key := []pipeline.Match{{Value: b(0, 0, 0, 0, 0, 3)}}
	if err := pl.AddEntry(tid, pipeline.TableEntry{Match: key, Action: pipeline.ActionCall{ActionID: aid, Params: [][]byte{b(0, 7)}}}); err != nil {
		t.Fatal(err)
	}
	want := entry(id.l2, 0, call(id.forward, b(7)), exact(1, 3))
	got, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2}))
	if err != nil || len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("after adding on the device, the table reads %v (%v), want %v", got, err, want)
	}
	if err := pl.DeleteEntry(tid, key, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := h.read(tableEntity(&p4v1.TableEntry{TableId: id.l2})); err != nil || len(got) != 0 {
		t.Fatalf("after deleting on the device, the table reads %v (%v), want nothing", got, err)
	}
}

// Value set members are read back from the device, expanded from the
// value/mask form it holds into the matches written, in canonical form and
// in the order written, before and after RECONCILE_AND_COMMIT.
func TestValueSetReadWriteSymmetry(t *testing.T) {
	h := readyFor(t, profileProgram)
	id := h.profileIDs()
	for _, tc := range []struct {
		name        string
		write, want [][]*p4v1.FieldMatch
	}{
		{"padded values, in the order written",
			[][]*p4v1.FieldMatch{fields(exact(1, 0, 0, 0x88, 0xb5)), fields(exact(1, 0, 1)), fields(exact(1, 0x12, 0x34))},
			[][]*p4v1.FieldMatch{fields(exact(1, 0x88, 0xb5)), fields(exact(1, 1)), fields(exact(1, 0x12, 0x34))}},
		{"zero", [][]*p4v1.FieldMatch{fields(exact(1, 0, 0))}, [][]*p4v1.FieldMatch{fields(exact(1, 0))}},
		{"emptied", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.mustWrite(update(p4v1.Update_MODIFY, valueSetEntity(id.customTypes, tc.write...)))
			want := valueSetEntity(id.customTypes, tc.want...)
			for _, pass := range []string{"written", "reconciled"} {
				if pass == "reconciled" {
					if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
						t.Fatal(err)
					}
				}
				got, err := h.read(valueSetEntity(id.customTypes))
				if err != nil || len(got) != 1 || !proto.Equal(got[0], want) {
					t.Errorf("%s: the value set reads %v (%v), want %v", pass, got, err, want)
				}
			}
		})
	}
}

// A profile member's action is read back from the device in canonical
// form (padded parameters written, the shortest read), after a MODIFY and
// after RECONCILE_AND_COMMIT.
func TestProfileMemberReadWriteSymmetry(t *testing.T) {
	h := readyFor(t, profileProgram)
	id := h.profileIDs()
	for _, tc := range []struct {
		name        string
		typ         p4v1.Update_Type
		write, want *p4v1.TableAction
	}{
		{"inserted with a padded port", p4v1.Update_INSERT, call(id.forward, b(0, 2)), call(id.forward, b(2))},
		{"modified to another action", p4v1.Update_MODIFY, call(id.drop), call(id.drop)},
		{"modified to port 0", p4v1.Update_MODIFY, call(id.forward, b(0, 0)), call(id.forward, b(0))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.mustWrite(update(tc.typ, memberEntity(id.dstProfile, 1, tc.write)))
			want := memberEntity(id.dstProfile, 1, tc.want)
			for _, pass := range []string{"written", "reconciled"} {
				if pass == "reconciled" {
					if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
						t.Fatal(err)
					}
				}
				got, err := h.read(memberEntity(id.dstProfile, 1, nil))
				if err != nil || len(got) != 1 || !proto.Equal(got[0], want) {
					t.Errorf("%s: the member reads %v (%v), want %v", pass, got, err, want)
				}
			}
		})
	}
}

// A default entry the client sets is read back from the device with the
// cookie and metadata written; the program's (and a const one) from the
// P4Info; before and after RECONCILE_AND_COMMIT.
func TestDefaultEntryReadWriteSymmetry(t *testing.T) {
	h := ready(t)
	id := h.ids()
	noAction := h.actionID("NoAction")
	asDefault := func(te *p4v1.TableEntry, cookie uint64, meta string) *p4v1.TableEntry {
		te.IsDefaultAction, te.ControllerMetadata = true, cookie
		if meta != "" {
			te.Metadata = []byte(meta)
		}
		return te
	}
	for _, tc := range []struct {
		name  string
		write []*p4v1.Update
		table uint32
		want  *p4v1.TableEntry
	}{
		{"the program's", nil, id.l2, asDefault(entry(id.l2, 0, call(id.drop)), 0, "")},
		{"set with a padded parameter and a cookie",
			[]*p4v1.Update{modify(asDefault(entry(id.l2, 0, call(id.forward, b(0, 5))), 3, "d"))},
			id.l2, asDefault(entry(id.l2, 0, call(id.forward, b(5))), 3, "d")},
		{"set again", []*p4v1.Update{modify(asDefault(entry(id.l2, 0, call(id.toCPU)), 0, ""))},
			id.l2, asDefault(entry(id.l2, 0, call(id.toCPU)), 0, "")},
		{"reset to the program's", []*p4v1.Update{modify(asDefault(entry(id.l2, 0, nil), 0, ""))},
			id.l2, asDefault(entry(id.l2, 0, call(id.drop)), 0, "")},
		{"set on a ternary table", []*p4v1.Update{modify(asDefault(entry(id.acl, 0, call(id.aclPermit)), 9, ""))},
			id.acl, asDefault(entry(id.acl, 0, call(id.aclPermit)), 9, "")},
		{"const", nil, id.fixed, func() *p4v1.TableEntry {
			te := asDefault(entry(id.fixed, 0, call(noAction)), 0, "")
			te.IsConst = true
			return te
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.write) > 0 {
				h.mustWrite(tc.write...)
			}
			for _, pass := range []string{"written", "reconciled"} {
				if pass == "reconciled" {
					if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
						t.Fatal(err)
					}
				}
				got, err := h.read(tableEntity(&p4v1.TableEntry{TableId: tc.table, IsDefaultAction: true}))
				if err != nil || len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), tc.want) {
					t.Errorf("%s: the default entry reads %v (%v), want %v", pass, got, err, tc.want)
				}
			}
		})
	}
}
