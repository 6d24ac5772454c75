package p4rt_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/terrapin/terrapin/toolchain/p4rt"
	"github.com/terrapin/terrapin/toolchain/p4rt/enginetarget"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// P4Runtime type translation (spec "User-defined types", "PSA Metadata
// Translation") end to end, over
// testdata/p4rt_translation.p4, whose 9-bit values are all ports.

const (
	translationProgram = "testdata/p4rt_translation.p4"
	portURI            = "tna/PortId_t"
	portType           = "PortId_t"
)

// translatedProgram is the translation test program with the P4Info p4c
// writes when every port has type PortId_t declared
// @p4runtime_translation("tna/PortId_t", sdnWidth) (sdnWidth 0: string):
// each 9-bit match field, parameter, controller header field, value set
// field and digest member gets type_name PortId_t and the controller's
// bitwidth (unset for a string), and type_info the translated type. The
// BMv2 JSON is the device's, with its 9-bit ports.
func translatedProgram(tb testing.TB, sdnWidth int32) program {
	tb.Helper()
	p := testProgramFile(tb, translationProgram)
	info := proto.Clone(p.info).(*p4configv1.P4Info)
	mark := func(width *int32, tn **p4configv1.P4NamedType) {
		if *width == 9 {
			*width, *tn = sdnWidth, &p4configv1.P4NamedType{Name: portType}
		}
	}
	for _, t := range info.GetTables() {
		for _, f := range t.GetMatchFields() {
			mark(&f.Bitwidth, &f.TypeName)
		}
	}
	for _, a := range info.GetActions() {
		for _, p := range a.GetParams() {
			mark(&p.Bitwidth, &p.TypeName)
		}
	}
	for _, c := range info.GetControllerPacketMetadata() {
		for _, m := range c.GetMetadata() {
			mark(&m.Bitwidth, &m.TypeName)
		}
	}
	for _, v := range info.GetValueSets() {
		for _, f := range v.GetMatch() {
			mark(&f.Bitwidth, &f.TypeName)
		}
	}
	for _, st := range info.GetTypeInfo().GetStructs() {
		for _, m := range st.GetMembers() {
			if m.GetTypeSpec().GetBitstring().GetBit().GetBitwidth() == 9 {
				m.TypeSpec = &p4configv1.P4DataTypeSpec{TypeSpec: &p4configv1.P4DataTypeSpec_NewType{NewType: &p4configv1.P4NamedType{Name: portType}}}
			}
		}
	}
	tt := &p4configv1.P4NewTypeTranslation{Uri: portURI}
	if sdnWidth > 0 {
		tt.SdnType = &p4configv1.P4NewTypeTranslation_SdnBitwidth{SdnBitwidth: sdnWidth}
	} else {
		tt.SdnType = &p4configv1.P4NewTypeTranslation_SdnString_{SdnString: &p4configv1.P4NewTypeTranslation_SdnString{}}
	}
	if info.TypeInfo == nil {
		info.TypeInfo = &p4configv1.P4TypeInfo{}
	}
	if info.TypeInfo.NewTypes == nil {
		info.TypeInfo.NewTypes = map[string]*p4configv1.P4NewTypeSpec{}
	}
	info.TypeInfo.NewTypes[portType] = &p4configv1.P4NewTypeSpec{Representation: &p4configv1.P4NewTypeSpec_TranslatedType{TranslatedType: tt}}
	return program{json: p.json, info: info}
}

// trHarness is a harness over prog whose server has the translation file
// file ("": none); its stream is primary and the pipeline set, unless
// that fails, when setErr is the error.
func trHarness(tb testing.TB, prog program, file string) (h *harness, s *session, setErr error) {
	tb.Helper()
	var tr *p4rt.Translations
	if file != "" {
		var err error
		if tr, err = p4rt.ParseTranslations([]byte(file)); err != nil {
			tb.Fatalf("translation file: %v", err)
		}
	}
	h = newHarnessConfig(tb, prog, func(c *p4rt.Config) { c.Translations = tr })
	h.primary = &p4v1.Uint128{High: 1}
	s, a := h.open(h.primary, "")
	if codes.Code(a.GetStatus().GetCode()) != codes.OK {
		tb.Fatalf("not primary: %v", a)
	}
	return h, s, h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config())
}

// trIDs are the translation program's ids.
type trIDs struct {
	fwd, acl, lpmT, rangeT, opt, fixed, ecmp uint32
	forward, toCPU, noAction                 uint32
	selector, trusted, learn                 uint32
}

func (h *harness) trIDs() trIDs {
	return trIDs{
		fwd: h.tableID("TrIngress.port_fwd"), acl: h.tableID("TrIngress.port_acl"), lpmT: h.tableID("TrIngress.port_lpm"),
		rangeT: h.tableID("TrIngress.port_range"), opt: h.tableID("TrIngress.port_opt"), fixed: h.tableID("TrIngress.port_fixed"),
		ecmp: h.tableID("TrIngress.ecmp"), forward: h.actionID("TrIngress.forward"), toCPU: h.actionID("TrIngress.to_cpu"),
		noAction: h.actionID("NoAction"), selector: h.objectID("action_profile", "port_selector"),
		trusted: h.objectID("value_set", "trusted_ports"), learn: h.objectID("digest", "learn_t"),
	}
}

// sdn32 is a 32-bit SDN value as a controller may send it: all four bytes.
func sdn32(v uint32) []byte { return b(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)) }

// device is the engine's control API of the committed pipeline: what the
// device holds, not what the server says it does.
func (h *harness) device() p4rt.PipelineControl { return enginetarget.Control(h.target.Pipeline()) }

// deviceEntries is table's entries on the device.
func (h *harness) deviceEntries(table string) []pipeline.TableEntry {
	h.t.Helper()
	es, err := h.device().Entries(table)
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}

// writeOne sends one update and returns its code and message.
func (h *harness) writeOne(u *p4v1.Update) (codes.Code, string) {
	_, err := h.client.Write(h.ctx, &p4v1.WriteRequest{DeviceId: deviceID, ElectionId: h.primary, Updates: []*p4v1.Update{u}})
	if err == nil {
		return codes.OK, ""
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		if pe, ok := d.(*p4v1.Error); ok {
			return codes.Code(pe.GetCanonicalCode()), pe.GetMessage()
		}
	}
	return st.Code(), st.Message()
}

func readOne(h *harness, e *p4v1.Entity) []*p4v1.Entity {
	h.t.Helper()
	got, err := h.read(e)
	if err != nil {
		h.t.Fatalf("read %v: %v", e, err)
	}
	return got
}

// TestTranslationWritesAndReads: controller values are translated to the
// device's on every entity that carries them, and back on reads, with the
// default mapping, the identity on the number: SDN port N is device port
// N. Each case writes with four-byte SDN values, checks what the device
// holds, and reads back the canonical SDN values.
func TestTranslationWritesAndReads(t *testing.T) {
	h, _, err := trHarness(t, translatedProgram(t, 32), "")
	if err != nil {
		t.Fatalf("SetForwardingPipelineConfig: %v", err)
	}
	id := h.trIDs()
	ones32 := b(0xff, 0xff, 0xff, 0xff)
	tests := []struct {
		name   string
		write  *p4v1.Update
		read   *p4v1.Entity
		want   proto.Message // what the read returns
		device func(t *testing.T)
	}{
		{
			name:  "exact key and direct action parameter",
			write: insert(entry(id.fwd, 0, call(id.forward, sdn32(6)), exact(1, sdn32(5)...))),
			read:  tableEntity(&p4v1.TableEntry{TableId: id.fwd}),
			want:  entry(id.fwd, 0, call(id.forward, b(6)), exact(1, 5)),
			device: func(t *testing.T) {
				es := h.deviceEntries("TrIngress.port_fwd")
				if len(es) != 1 || !bytes.Equal(es[0].Match[0].Value, b(0, 5)) || !bytes.Equal(es[0].Action.Params[0], b(0, 6)) {
					t.Fatalf("device holds %+v, want key 5 and forward(6) in 9 bits", es)
				}
			},
		},
		{
			name: "ternary key with the all-ones mask",
			write: insert(entry(id.acl, 10, call(id.forward, sdn32(2)),
				ternary(1, sdn32(5), ones32), ternary(2, b(0x08, 0x00), b(0xff, 0xff)))),
			read: tableEntity(&p4v1.TableEntry{TableId: id.acl}),
			want: entry(id.acl, 10, call(id.forward, b(2)), ternary(1, b(5), ones32), ternary(2, b(0x08, 0x00), b(0xff, 0xff))),
			device: func(t *testing.T) {
				es := h.deviceEntries("TrIngress.port_acl")
				if len(es) != 1 || !bytes.Equal(es[0].Match[0].Value, b(0, 5)) || !bytes.Equal(es[0].Match[0].Mask, b(1, 0xff)) {
					t.Fatalf("device holds %+v, want 5 &&& 0x1ff", es)
				}
			},
		},
		{
			name:  "lpm key with the full prefix",
			write: insert(entry(id.lpmT, 0, call(id.noAction), lpm(1, sdn32(5), 32))),
			read:  tableEntity(&p4v1.TableEntry{TableId: id.lpmT}),
			want:  entry(id.lpmT, 0, call(id.noAction), lpm(1, b(5), 32)),
			device: func(t *testing.T) {
				es := h.deviceEntries("TrIngress.port_lpm")
				if len(es) != 1 || es[0].Match[0].PrefixLen != 9 || !bytes.Equal(es[0].Match[0].Value, b(0, 5)) {
					t.Fatalf("device holds %+v, want 5/9", es)
				}
			},
		},
		{
			name:  "range key of one value",
			write: insert(entry(id.rangeT, 3, call(id.noAction), rng(1, sdn32(5), sdn32(5)))),
			read:  tableEntity(&p4v1.TableEntry{TableId: id.rangeT}),
			want:  entry(id.rangeT, 3, call(id.noAction), rng(1, b(5), b(5))),
			device: func(t *testing.T) {
				es := h.deviceEntries("TrIngress.port_range")
				if len(es) != 1 || !bytes.Equal(es[0].Match[0].Value, b(0, 5)) || !bytes.Equal(es[0].Match[0].High, b(0, 5)) {
					t.Fatalf("device holds %+v, want 5..5", es)
				}
			},
		},
		{
			name:  "optional key",
			write: insert(entry(id.opt, 4, call(id.noAction), optional(1, sdn32(5)...), exact(2, 0, 0, 0, 0, 0, 1))),
			read:  tableEntity(&p4v1.TableEntry{TableId: id.opt}),
			want:  entry(id.opt, 4, call(id.noAction), optional(1, 5), exact(2, 1)),
			device: func(t *testing.T) {
				es := h.deviceEntries("TrIngress.port_opt")
				if len(es) != 1 || !bytes.Equal(es[0].Match[0].Value, b(0, 5)) {
					t.Fatalf("device holds %+v, want 5", es)
				}
			},
		},
		{
			name:  "default action parameter",
			write: modify(&p4v1.TableEntry{TableId: id.fwd, IsDefaultAction: true, Action: call(id.forward, sdn32(8))}),
			read:  tableEntity(&p4v1.TableEntry{TableId: id.fwd, IsDefaultAction: true}),
			want:  &p4v1.TableEntry{TableId: id.fwd, IsDefaultAction: true, Action: call(id.forward, b(8))},
			device: func(t *testing.T) {
				a, ok, err := h.device().DefaultAction("TrIngress.port_fwd")
				if err != nil || !ok || !bytes.Equal(a.Params[0], b(0, 8)) {
					t.Fatalf("device default %+v %v %v, want forward(8)", a, ok, err)
				}
			},
		},
		{
			name:  "action profile member",
			write: update(p4v1.Update_INSERT, memberEntity(id.selector, 1, call(id.forward, sdn32(9)))),
			read:  memberEntity(id.selector, 0, nil),
			want:  &p4v1.ActionProfileMember{ActionProfileId: id.selector, MemberId: 1, Action: call(id.forward, b(9)).GetAction()},
			device: func(t *testing.T) {
				ms, err := h.device().ProfileMembers("TrIngress.port_selector")
				if err != nil || len(ms) != 1 || !bytes.Equal(ms[1].Params[0], b(0, 9)) {
					t.Fatalf("device members %+v %v, want forward(9)", ms, err)
				}
			},
		},
		{
			name:  "parser value set member",
			write: update(p4v1.Update_MODIFY, valueSetEntity(id.trusted, fields(exact(1, sdn32(5)...)))),
			read:  valueSetEntity(id.trusted),
			want:  valueSetEntity(id.trusted, fields(exact(1, 5))).GetValueSetEntry(),
			device: func(t *testing.T) {
				ms, err := h.device().ValueSet("TrParser.trusted_ports")
				if err != nil || len(ms) != 1 || !bytes.Equal(ms[0].Value, b(0, 5)) {
					t.Fatalf("device value set %+v %v, want 5", ms, err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			h.mustWrite(tc.write)
			tc.device(t)
			got := readOne(h, tc.read)
			if len(got) != 1 {
				t.Fatalf("read %d entities: %v", len(got), got)
			}
			var msg proto.Message
			switch {
			case got[0].GetTableEntry() != nil:
				msg = got[0].GetTableEntry()
			case got[0].GetActionProfileMember() != nil:
				msg = got[0].GetActionProfileMember()
			default:
				msg = got[0].GetValueSetEntry()
			}
			if !proto.Equal(msg, tc.want) {
				t.Fatalf("read\n%v\nwant\n%v", msg, tc.want)
			}
		})
	}
	h.t = t

	// A one-shot action set on the selector's table (a profile takes
	// either members or one-shots: a fresh switch).
	h2, _, err := trHarness(t, translatedProgram(t, 32), "")
	if err != nil {
		t.Fatal(err)
	}
	mac := b(0, 0, 0, 0, 0, 1)
	h2.mustWrite(insert(entry(id.ecmp, 0, actionSet(call(id.forward, sdn32(2)), call(id.forward, sdn32(3))), exact(1, mac...))))
	got := readOne(h2, tableEntity(&p4v1.TableEntry{TableId: id.ecmp}))
	want := entry(id.ecmp, 0, actionSet(call(id.forward, b(2)), call(id.forward, b(3))), exact(1, 1))
	if len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("one-shot read %v, want %v", got, want)
	}
	ms, err := h2.device().ProfileMembers("TrIngress.port_selector")
	if err != nil || len(ms) != 2 {
		t.Fatalf("device members %v %v", ms, err)
	}
	for _, m := range ms {
		if len(m.Params[0]) != 2 {
			t.Fatalf("device member %+v: want a 9-bit port", m)
		}
	}

	// The program's own values, device values, read back translated: the
	// declared entry 3 : forward(4), the initial default forward(7).
	got = readOne(h2, tableEntity(&p4v1.TableEntry{TableId: id.fixed}))
	if want := constEntry(entry(id.fixed, 0, call(id.forward, b(4)), exact(1, 3))); len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("declared entry read %v, want %v", got, want)
	}
	got = readOne(h2, tableEntity(&p4v1.TableEntry{TableId: id.fwd, IsDefaultAction: true}))
	if want := (&p4v1.TableEntry{TableId: id.fwd, IsDefaultAction: true, Action: call(id.forward, b(7))}); len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("initial default read %v, want %v", got, want)
	}
}

// TestTranslationForwards: the translated entries forward as the device
// values say (SDN 5 is device port 5, identity).
func TestTranslationForwards(t *testing.T) {
	h, _, err := trHarness(t, translatedProgram(t, 32), "")
	if err != nil {
		t.Fatal(err)
	}
	id := h.trIDs()
	h.mustWrite(insert(entry(id.fwd, 0, call(id.forward, sdn32(6)), exact(1, sdn32(5)...))))
	frame := ethFrame(b(0, 0, 0, 0, 0, 0xaa), 64)
	if err := h.target.Send(5, frame); err != nil {
		t.Fatal(err)
	}
	if got := h.target.Received(6); len(got) != 1 {
		t.Fatalf("frame in on port 5: out on port 6 %d times, want once", len(got))
	}
}

// TestTranslationRefusals: a value that does not fit the device, or a
// match that names more than one value, is refused, and nothing of the
// update is applied.
func TestTranslationRefusals(t *testing.T) {
	h, _, err := trHarness(t, translatedProgram(t, 32), "")
	if err != nil {
		t.Fatal(err)
	}
	id := h.trIDs()
	ones32 := b(0xff, 0xff, 0xff, 0xff)
	mac := b(0, 0, 0, 0, 0, 2)
	tooWide := sdn32(512) // fits the SDN 32 bits, not the device's 9
	tests := []struct {
		name  string
		u     *p4v1.Update
		code  codes.Code
		msg   string
		table string // nothing may be left in it
	}{
		{"exact key too wide for the device", insert(entry(id.fwd, 0, call(id.forward, b(1)), exact(1, tooWide...))),
			codes.InvalidArgument, "value 512 of translated type PortId_t", "TrIngress.port_fwd"},
		{"key wider than the SDN width", insert(entry(id.fwd, 0, call(id.forward, b(1)), exact(1, 1, 0, 0, 0, 5))),
			codes.OutOfRange, "does not fit in 32 bits", "TrIngress.port_fwd"},
		{"action parameter too wide", insert(entry(id.fwd, 0, call(id.forward, tooWide), exact(1, 1))),
			codes.InvalidArgument, "does not fit the device's 9 bits", "TrIngress.port_fwd"},
		{"ternary mask not all ones", insert(entry(id.acl, 1, call(id.noAction), ternary(1, b(5), b(0xff)))),
			codes.InvalidArgument, "mask 0xff is not all ones", "TrIngress.port_acl"},
		{"ternary key too wide", insert(entry(id.acl, 1, call(id.noAction), ternary(1, tooWide, ones32))),
			codes.InvalidArgument, "does not fit the device's 9 bits", "TrIngress.port_acl"},
		{"lpm prefix shorter than the SDN width", insert(entry(id.lpmT, 0, call(id.noAction), lpm(1, b(5), 9))),
			codes.InvalidArgument, "prefix length 9 is not the full 32", "TrIngress.port_lpm"},
		{"range of two values", insert(entry(id.rangeT, 1, call(id.noAction), rng(1, b(1), b(5)))),
			codes.InvalidArgument, "the bounds differ", "TrIngress.port_range"},
		{"optional key too wide", insert(entry(id.opt, 1, call(id.noAction), optional(1, tooWide...), exact(2, mac...))),
			codes.InvalidArgument, "does not fit the device's 9 bits", "TrIngress.port_opt"},
		{"one-shot action too wide", insert(entry(id.ecmp, 0, actionSet(call(id.forward, b(1)), call(id.forward, tooWide)), exact(1, mac...))),
			codes.InvalidArgument, "does not fit the device's 9 bits", "TrIngress.ecmp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			code, msg := h.writeOne(tc.u)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("%v %q, want %v with %q", code, msg, tc.code, tc.msg)
			}
			if es := h.deviceEntries(tc.table); len(es) != 0 {
				t.Fatalf("the refused write left %+v on the device", es)
			}
		})
	}
	h.t = t
	other := []struct {
		name string
		u    *p4v1.Update
	}{
		{"default action too wide", modify(&p4v1.TableEntry{TableId: id.fwd, IsDefaultAction: true, Action: call(id.forward, tooWide)})},
		{"member too wide", update(p4v1.Update_INSERT, memberEntity(id.selector, 1, call(id.forward, tooWide)))},
		{"value set member too wide", update(p4v1.Update_MODIFY, valueSetEntity(id.trusted, fields(exact(1, 3)), fields(exact(1, tooWide...))))},
	}
	for _, tc := range other {
		if code, msg := h.writeOne(tc.u); code != codes.InvalidArgument || !strings.Contains(msg, "does not fit the device's 9 bits") {
			t.Errorf("%s: %v %q, want INVALID_ARGUMENT", tc.name, code, msg)
		}
	}
	if a, ok, err := h.device().DefaultAction("TrIngress.port_fwd"); err != nil || !ok || !bytes.Equal(a.Params[0], b(0, 7)) {
		t.Errorf("device default %+v %v %v, want the program's forward(7)", a, ok, err)
	}
	if ms, err := h.device().ProfileMembers("TrIngress.port_selector"); err != nil || len(ms) != 0 {
		t.Errorf("device members %v %v, want none", ms, err)
	}
	if ms, err := h.device().ValueSet("TrParser.trusted_ports"); err != nil || len(ms) != 0 {
		t.Errorf("device value set %v %v, want empty (the whole set is refused)", ms, err)
	}
}

// TestTranslationPacketIO: PacketOut metadata is translated to the
// device's value and put on the wire in the device's width (9 bits, then
// the 7 of padding: 2 bytes, not P4Info's 39 bits); PacketIn metadata is
// translated back.
func TestTranslationPacketIO(t *testing.T) {
	h, s, err := trHarness(t, translatedProgram(t, 32), "")
	if err != nil {
		t.Fatal(err)
	}
	id := h.trIDs()
	payload := ethFrame(b(0, 0, 0, 0, 0, 0xaa), 60)
	if err := s.stream.Send(packetOut(payload, meta(1, sdn32(2)...))); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for deadline := time.Now().Add(2 * time.Second); len(got) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		got = h.target.Received(2)
	}
	if len(got) != 1 || !bytes.Equal(got[0], payload) {
		t.Fatalf("PacketOut to SDN port 2: got %x on device port 2", got)
	}
	if err := s.stream.Send(packetOut(payload, meta(1, sdn32(512)...))); err != nil {
		t.Fatal(err)
	}
	m := s.next(t, func(m *p4v1.StreamMessageResponse) bool { return m.GetError() != nil })
	if m == nil || codes.Code(m.GetError().GetCanonicalCode()) != codes.InvalidArgument || !strings.Contains(m.GetError().GetMessage(), "does not fit the device's 9 bits") {
		t.Fatalf("PacketOut to SDN port 512: %v, want INVALID_ARGUMENT", m)
	}

	h.mustWrite(insert(entry(id.fwd, 0, call(id.toCPU), exact(1, 2))))
	frame := ethFrame(b(0, 0, 0, 0, 0, 0xbb), 64)
	if err := h.target.Send(2, frame); err != nil {
		t.Fatal(err)
	}
	m = s.next(t, func(m *p4v1.StreamMessageResponse) bool { return m.GetPacket() != nil })
	pin := m.GetPacket()
	if pin == nil || !bytes.Equal(pin.GetPayload(), frame) || len(pin.GetMetadata()) != 2 ||
		!bytes.Equal(pin.GetMetadata()[0].GetValue(), b(2)) || !bytes.Equal(pin.GetMetadata()[1].GetValue(), b(0)) {
		t.Fatalf("PacketIn %v, want ingress_port 2 (SDN), _pad 0 and the frame", pin)
	}
}

// portMap maps SDN ports 1000+N to device ports N (N = 2..6), the CPU port
// to SDN_PORT_CPU (spec "Translation of Port Numbers").
const portMap = `{
  "tna/PortId_t": [
    {"sdn": 1002, "device": 2}, {"sdn": 1003, "device": 3}, {"sdn": 1004, "device": 4},
    {"sdn": 1005, "device": 5}, {"sdn": 1006, "device": 6},
    {"sdn": 4294967293, "device": 255}
  ]
}`

// TestTranslationFile: with a mapping for the URI, it is the whole
// translation: listed values cross both ways, others are refused on the
// way in and reported on the way out.
func TestTranslationFile(t *testing.T) {
	h, s, err := trHarness(t, translatedProgram(t, 32), portMap)
	if err != nil {
		t.Fatal(err)
	}
	id := h.trIDs()
	h.mustWrite(insert(entry(id.fwd, 0, call(id.forward, sdn32(1006)), exact(1, sdn32(1005)...))))
	es := h.deviceEntries("TrIngress.port_fwd")
	if len(es) != 1 || !bytes.Equal(es[0].Match[0].Value, b(0, 5)) || !bytes.Equal(es[0].Action.Params[0], b(0, 6)) {
		t.Fatalf("device holds %+v, want key 5 and forward(6)", es)
	}
	got := readOne(h, tableEntity(&p4v1.TableEntry{TableId: id.fwd, Match: []*p4v1.FieldMatch{exact(1, sdn32(1005)...)}}))
	if want := entry(id.fwd, 0, call(id.forward, uintBytes(1006)), exact(1, uintBytes(1005)...)); len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	if code, msg := h.writeOne(insert(entry(id.fwd, 0, call(id.forward, b(6)), exact(1, 3)))); code != codes.InvalidArgument ||
		!strings.Contains(msg, `not in the translation file's mapping of "tna/PortId_t"`) {
		t.Fatalf("unmapped SDN value: %v %q", code, msg)
	}
	// The declared entry 3 : forward(4) reads as 1003 : forward(1004).
	got = readOne(h, tableEntity(&p4v1.TableEntry{TableId: id.fixed}))
	if want := constEntry(entry(id.fixed, 0, call(id.forward, uintBytes(1004)), exact(1, uintBytes(1003)...))); len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("declared entry read %v, want %v", got, want)
	}
	// The program's default forward(7): device port 7 has no SDN port, so
	// the read says so rather than inventing one.
	_, err = h.read(tableEntity(&p4v1.TableEntry{TableId: id.fwd, IsDefaultAction: true}))
	if code := readErrorCode(err); code != codes.FailedPrecondition || !strings.Contains(err.Error(), "device value 7") {
		t.Fatalf("reading a default action the file cannot express: %v (%v), want FAILED_PRECONDITION", err, code)
	}

	// Packets: SDN 1006 leaves by device port 6; a PacketIn from device
	// port 2 says SDN 1002, one from device port 7 (unmapped) is dropped.
	payload := ethFrame(b(0, 0, 0, 0, 0, 0xaa), 60)
	if err := s.stream.Send(packetOut(payload, meta(1, uintBytes(1006)...))); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for deadline := time.Now().Add(2 * time.Second); len(out) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		out = h.target.Received(6)
	}
	if len(out) != 1 {
		t.Fatalf("PacketOut to SDN port 1006: %d frames on device port 6", len(out))
	}
	h.mustWrite(insert(entry(id.fwd, 0, call(id.toCPU), exact(1, uintBytes(1002)...))))
	isPacket := func(m *p4v1.StreamMessageResponse) bool { return m.GetPacket() != nil }
	if err := h.target.Send(2, ethFrame(b(0, 0, 0, 0, 0, 2), 64)); err != nil {
		t.Fatal(err)
	}
	if m := s.next(t, isPacket); m == nil || !bytes.Equal(m.GetPacket().GetMetadata()[0].GetValue(), uintBytes(1002)) {
		t.Fatalf("PacketIn from device port 2: %v, want ingress_port 1002", m)
	}
	h.mustWrite(modify(&p4v1.TableEntry{TableId: id.fwd, IsDefaultAction: true, Action: call(id.toCPU)}))
	if err := h.target.Send(7, ethFrame(b(0, 0, 0, 0, 0, 7), 64)); err != nil {
		t.Fatal(err)
	}
	if m := s.nextWithin(t, 300*time.Millisecond, isPacket); m != nil {
		t.Fatalf("PacketIn from unmapped device port 7 was sent: %v", m)
	}
}

// TestTranslationDigest: a digest member of a translated type reaches the
// controller translated.
func TestTranslationDigest(t *testing.T) {
	h, s, err := trHarness(t, translatedProgram(t, 32), portMap)
	if err != nil {
		t.Fatal(err)
	}
	id := h.trIDs()
	h.mustWrite(update(p4v1.Update_INSERT, digestEntity(id.learn, &p4v1.DigestEntry_Config{MaxListSize: 1})))
	if err := h.target.Send(4, ethFrame(b(0, 0, 0, 0, 0, 4), 64)); err != nil {
		t.Fatal(err)
	}
	d := s.next(t, func(m *p4v1.StreamMessageResponse) bool { return m.GetDigest() != nil }).GetDigest()
	if d == nil || len(d.GetData()) != 1 {
		t.Fatalf("digest list %v", d)
	}
	ms := d.GetData()[0].GetStruct().GetMembers()
	if len(ms) != 2 || !bytes.Equal(ms[0].GetBitstring(), uintBytes(1004)) || !bytes.Equal(ms[1].GetBitstring(), b(9)) {
		t.Fatalf("digest data %v, want port 1004 (SDN) and source MAC 00:00:00:00:00:09", d.GetData())
	}
}

// TestTranslationStrings: a type translated to a string needs a mapping in
// the file (none is refused at pipeline load) and then takes the strings
// as values, in exact matches, parameters and packet metadata.
func TestTranslationStrings(t *testing.T) {
	prog := translatedProgram(t, 0)
	_, _, err := trHarness(t, prog, "")
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--translation-file") {
		t.Fatalf("string type without a mapping: %v, want INVALID_ARGUMENT naming --translation-file", err)
	}
	_, _, err = trHarness(t, prog, portMap)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "from numbers") {
		t.Fatalf("string type mapped from numbers: %v, want INVALID_ARGUMENT", err)
	}
	h, s, err := trHarness(t, prog, `{"tna/PortId_t": [
		{"sdn": "Ethernet3", "device": 3}, {"sdn": "Ethernet5", "device": 5}, {"sdn": "Ethernet6", "device": 6},
		{"sdn": "Ethernet4", "device": 4}, {"sdn": "Ethernet7", "device": 7}]}`)
	if err != nil {
		t.Fatal(err)
	}
	id := h.trIDs()
	str := func(s string) []byte { return []byte(s) }
	h.mustWrite(insert(entry(id.fwd, 0, call(id.forward, str("Ethernet6")), exact(1, str("Ethernet5")...))))
	if es := h.deviceEntries("TrIngress.port_fwd"); len(es) != 1 || !bytes.Equal(es[0].Match[0].Value, b(0, 5)) {
		t.Fatalf("device holds %+v, want key 5", es)
	}
	got := readOne(h, tableEntity(&p4v1.TableEntry{TableId: id.fwd}))
	if want := entry(id.fwd, 0, call(id.forward, str("Ethernet6")), exact(1, str("Ethernet5")...)); len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	if code, msg := h.writeOne(insert(entry(id.fwd, 0, call(id.forward, str("Ethernet6")), exact(1, str("Ethernet9")...)))); code != codes.InvalidArgument ||
		!strings.Contains(msg, `value "Ethernet9"`) {
		t.Fatalf("unmapped string: %v %q", code, msg)
	}
	if code, _ := h.writeOne(insert(entry(id.acl, 1, call(id.noAction), ternary(1, str("Ethernet5"), b(0xff))))); code != codes.InvalidArgument {
		t.Fatalf("ternary match on a string: %v, want INVALID_ARGUMENT", code)
	}
	payload := ethFrame(b(0, 0, 0, 0, 0, 0xaa), 60)
	if err := s.stream.Send(packetOut(payload, meta(1, str("Ethernet4")...))); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for deadline := time.Now().Add(2 * time.Second); len(out) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		out = h.target.Received(4)
	}
	if len(out) != 1 {
		t.Fatalf("PacketOut to Ethernet4: %d frames on device port 4", len(out))
	}
}

// TestTranslationReconcile: RECONCILE_AND_COMMIT carries translated
// entries over (the values cross as the controller wrote them).
func TestTranslationReconcile(t *testing.T) {
	h, _, err := trHarness(t, translatedProgram(t, 32), portMap)
	if err != nil {
		t.Fatal(err)
	}
	id := h.trIDs()
	h.mustWrite(insert(entry(id.fwd, 0, call(id.forward, uintBytes(1006)), exact(1, uintBytes(1005)...))))
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, h.config()); err != nil {
		t.Fatal(err)
	}
	got := readOne(h, tableEntity(&p4v1.TableEntry{TableId: id.fwd}))
	if want := entry(id.fwd, 0, call(id.forward, uintBytes(1006)), exact(1, uintBytes(1005)...)); len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("after reconcile: %v, want %v", got, want)
	}
}

// TestTranslationPipelineChecks: P4Info whose translated widths contradict
// the type, or a translated type the switch cannot serve, is refused at
// SetForwardingPipelineConfig.
func TestTranslationPipelineChecks(t *testing.T) {
	tests := []struct {
		name string
		edit func(info *p4configv1.P4Info)
		msg  string
	}{
		{"parameter of the device's width", func(info *p4configv1.P4Info) {
			for _, a := range info.GetActions() {
				for _, p := range a.GetParams() {
					if p.GetTypeName().GetName() == portType {
						p.Bitwidth = 9
					}
				}
			}
		}, "bitwidth 9 in P4Info, but its type PortId_t"},
		{"match field of another width", func(info *p4configv1.P4Info) {
			info.GetTables()[0].GetMatchFields()[0].Bitwidth = 16
		}, "bitwidth 16 in P4Info"},
		{"neither width nor string", func(info *p4configv1.P4Info) {
			info.GetTypeInfo().GetNewTypes()[portType].GetTranslatedType().SdnType = nil
		}, "neither a bitwidth nor a string"},
		{"controller header the device does not have", func(info *p4configv1.P4Info) {
			for _, c := range info.GetControllerPacketMetadata() {
				c.GetMetadata()[1].Name = "padding"
			}
		}, "none of its header types has the fields"},
		{"mapping wider than the type", func(info *p4configv1.P4Info) {
			info.GetTypeInfo().GetNewTypes()[portType].GetTranslatedType().SdnType = &p4configv1.P4NewTypeTranslation_SdnBitwidth{SdnBitwidth: 10}
			for _, a := range info.GetActions() {
				for _, p := range a.GetParams() {
					if p.GetTypeName().GetName() == portType {
						p.Bitwidth = 10
					}
				}
			}
		}, "wider than the 10 bits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog := translatedProgram(t, 32)
			tc.edit(prog.info)
			_, _, err := trHarness(t, prog, portMap)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%v, want INVALID_ARGUMENT with %q", err, tc.msg)
			}
		})
	}
	// A value set of a translated type met nowhere else: its device width
	// is what the device config's total leaves.
	vsProg := translatedProgram(t, 32)
	for _, v := range vsProg.info.GetValueSets() {
		v.GetMatch()[0].TypeName = &p4configv1.P4NamedType{Name: "Trusted_t"}
	}
	vsProg.info.TypeInfo.NewTypes["Trusted_t"] = proto.Clone(vsProg.info.TypeInfo.NewTypes[portType]).(*p4configv1.P4NewTypeSpec)
	h, _, err := trHarness(t, vsProg, "")
	if err != nil {
		t.Fatal(err)
	}
	id := h.trIDs()
	h.mustWrite(update(p4v1.Update_MODIFY, valueSetEntity(id.trusted, fields(exact(1, sdn32(5)...)))))
	if ms, err := h.device().ValueSet("TrParser.trusted_ports"); err != nil || len(ms) != 1 || !bytes.Equal(ms[0].Value, b(0, 5)) {
		t.Fatalf("device value set %+v %v, want 5 in 9 bits", ms, err)
	}
	if code, _ := h.writeOne(update(p4v1.Update_MODIFY, valueSetEntity(id.trusted, fields(exact(1, sdn32(512)...))))); code != codes.InvalidArgument {
		t.Fatalf("value set member 512: %v, want INVALID_ARGUMENT", code)
	}

	// A type named but not translated (original_type) is the device's
	// value: fabric_v1model.p4's `type bit<9> FabricPortId_t`.
	prog := testProgramFile(t, translationProgram)
	info := proto.Clone(prog.info).(*p4configv1.P4Info)
	info.GetTables()[0].GetMatchFields()[0].TypeName = &p4configv1.P4NamedType{Name: portType}
	info.TypeInfo = &p4configv1.P4TypeInfo{NewTypes: map[string]*p4configv1.P4NewTypeSpec{portType: {Representation: &p4configv1.P4NewTypeSpec_OriginalType{
		OriginalType: &p4configv1.P4DataTypeSpec{TypeSpec: &p4configv1.P4DataTypeSpec_Bitstring{Bitstring: &p4configv1.P4BitstringLikeTypeSpec{
			TypeSpec: &p4configv1.P4BitstringLikeTypeSpec_Bit{Bit: &p4configv1.P4BitTypeSpec{Bitwidth: 9}}}}}}}}}
	h, _, err = trHarness(t, program{json: prog.json, info: info}, "")
	if err != nil {
		t.Fatal(err)
	}
	id = h.trIDs()
	if code, _ := h.writeOne(insert(entry(id.fwd, 0, call(id.forward, b(1)), exact(1, 2, 0)))); code != codes.OutOfRange {
		t.Fatalf("an untranslated new type keeps the 9-bit check: %v, want OUT_OF_RANGE", code)
	}
}

func constEntry(te *p4v1.TableEntry) *p4v1.TableEntry { te.IsConst = true; return te }

// readErrorCode is the code of a one-entity read's failure.
func readErrorCode(err error) codes.Code {
	for _, d := range status.Convert(err).Details() {
		if pe, ok := d.(*p4v1.Error); ok {
			return codes.Code(pe.GetCanonicalCode())
		}
	}
	return status.Code(err)
}

func uintBytes(v uint64) []byte {
	var out []byte
	for v > 0 {
		out = append([]byte{byte(v)}, out...)
		v >>= 8
	}
	if len(out) == 0 {
		return []byte{0}
	}
	return out
}
