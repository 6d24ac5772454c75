package bmthrift

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/simple_pre_lag"
	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/simple_switch"
	"github.com/terrapin/terrapin/toolchain/bmthrift/gen/standard"
	"github.com/terrapin/terrapin/toolchain/compiler"
	"github.com/terrapin/terrapin/toolchain/device"
	"github.com/terrapin/terrapin/toolchain/device/switchtarget"
	"github.com/terrapin/terrapin/toolchain/p4rt"
	"github.com/terrapin/terrapin/toolchain/pipeline"
)

func TestHelpers(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"fit pads", fitBytes([]byte{1}, 16), []byte{0, 1}},
		{"fit masks the first byte (9 bits)", fitBytes([]byte{0xff, 0xff}, 9), []byte{1, 0xff}},
		{"fit drops high bytes", fitBytes([]byte{1, 2, 3}, 16), []byte{2, 3}},
		{"prefix 12 of 32", maskPrefix([]byte{10, 0, 0, 1}, 32, 12), []byte{10, 0, 0, 0}},
		{"prefix of 9 bits", maskPrefix([]byte{1, 0xff}, 9, 4), []byte{1, 0xe0}},
		{"register of 32 bits", registerBytes(4294967296+5, 32), []byte{0, 0, 0, 5}},
		{"register of 72 bits, negative", registerBytes(-1, 72), bytes.Repeat([]byte{0xff}, 9)},
	} {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s: got %x, want %x", tc.name, tc.got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want []uint32
	}{
		{"100100010", []uint32{1, 5, 8}},
		{"", nil},
		{"1", []uint32{0}},
		{"1010", []uint32{1, 3}},
	} {
		if got := bitmap(tc.in); !equalU32(got, tc.want) {
			t.Errorf("bitmap(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	got := readData([][]byte{{0, 1}, {0, 0}, {10, 0, 0, 1}})
	if want := (standard.BmActionData{{1}, {0}, {10, 0, 0, 1}}); len(got) != 3 || !bytes.Equal(got[0], want[0]) ||
		!bytes.Equal(got[1], want[1]) || !bytes.Equal(got[2], want[2]) {
		t.Errorf("readData: %x, want %x", got, want)
	}
	for _, tc := range []struct {
		name  string
		rates []*standard.BmMeterRateConfig
		want  *pipeline.MeterConfig
		code  standard.MeterOperationErrorCode
	}{
		{"committed then peak", []*standard.BmMeterRateConfig{{UnitsPerMicros: 0.5, BurstSize: 10}, {UnitsPerMicros: 1, BurstSize: 20}},
			&pipeline.MeterConfig{CIR: 500000, CBurst: 10, PIR: 1000000, PBurst: 20}, 0},
		{"peak below committed", []*standard.BmMeterRateConfig{{UnitsPerMicros: 2, BurstSize: 1}, {UnitsPerMicros: 1, BurstSize: 1}},
			nil, standard.MeterOperationErrorCode_INVALID_INFO_RATE_VALUE},
		{"one rate", []*standard.BmMeterRateConfig{{UnitsPerMicros: 1, BurstSize: 1}}, nil, standard.MeterOperationErrorCode_BAD_RATES_LIST},
		{"negative burst", []*standard.BmMeterRateConfig{{UnitsPerMicros: 1, BurstSize: -1}, {UnitsPerMicros: 1, BurstSize: 1}},
			nil, standard.MeterOperationErrorCode_INVALID_BURST_SIZE_VALUE},
	} {
		got, code, ok := meterConfig(tc.rates)
		if ok != (tc.want != nil) || code != tc.code || (ok && *got != *tc.want) {
			t.Errorf("%s: got %+v %v %v", tc.name, got, code, ok)
		}
		if ok {
			back := meterRates(got)
			if back[0].UnitsPerMicros != tc.rates[0].UnitsPerMicros || back[1].BurstSize != tc.rates[1].BurstSize {
				t.Errorf("%s: read back %+v %+v", tc.name, back[0], back[1])
			}
		}
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rig is a switch without ports running the thrift-cli suite's program,
// with the Thrift runtime and P4Runtime served on loopback.
type rig struct {
	dev      *device.Device
	target   *switchtarget.Target
	std      *standard.StandardClient
	pre      *simple_pre_lag.SimplePreLAGClient
	sw       *simple_switch.SimpleSwitchClient
	p4rt     p4v1.P4RuntimeClient
	info     *p4configv1.P4Info
	json     []byte
	srv      *Server
	mu       sync.Mutex
	replaced [][]byte
}

var (
	compileOnce sync.Once
	compiled    *compiler.Result
	compileErr  error
)

func program(t *testing.T) *compiler.Result {
	compileOnce.Do(func() {
		res, errs := compiler.Compile(compiler.Options{Program: "../../scripts/thrift-cli/cli_compare.p4"})
		if len(errs) > 0 {
			compileErr = errs
		}
		compiled = res
	})
	if compileErr != nil {
		t.Fatal(compileErr)
	}
	return compiled
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigCPU(t, -1)
}

// newRigCPU is newRig with a CPU port (-1: none), the one port a device
// without interfaces has.
func newRigCPU(t *testing.T, cpuPort int) *rig {
	t.Helper()
	prog := program(t)
	dev, err := device.New(device.Config{CPUPort: cpuPort})
	if err != nil {
		t.Fatal(err)
	}
	target := switchtarget.New(dev, switchtarget.EngineCompiler(dev, nil))
	t.Cleanup(target.Close)
	ctx, cancel := context.WithCancel(context.Background())
	pp, err := target.PreparePipeline(ctx, prog.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.Commit(); err != nil {
		t.Fatal(err)
	}
	r := &rig{dev: dev, target: target, info: prog.P4Info, json: prog.JSON}

	psrv := p4rt.NewServer(p4rt.Config{DeviceID: 1, Target: target, Program: prog.JSON})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Target: target, Device: dev, DeviceID: 1, ThriftPort: 9090, PipelineReplaced: func(js []byte) {
		r.mu.Lock()
		r.replaced = append(r.replaced, js)
		r.mu.Unlock()
		psrv.PipelineReplaced(js)
	}})
	r.srv = srv
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = psrv.Serve(ctx, lis) }()
	go func() { defer wg.Done(); _ = srv.Serve(ctx, sock) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	trans := thrift.NewTBufferedTransport(thrift.NewTSocketConf(Addr(sock).String(), &thrift.TConfiguration{ConnectTimeout: 5 * time.Second}), 8192)
	if err := trans.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trans.Close() })
	proto := thrift.NewTBinaryProtocolConf(trans, nil)
	client := func(name string) thrift.TClient {
		mp := thrift.NewTMultiplexedProtocol(proto, name)
		return thrift.NewTStandardClient(mp, mp)
	}
	r.std = standard.NewStandardClient(client("standard"))
	r.pre = simple_pre_lag.NewSimplePreLAGClient(client("simple_pre_lag"))
	r.sw = simple_switch.NewSimpleSwitchClient(client("simple_switch"))

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r.p4rt = p4v1.NewP4RuntimeClient(conn)
	return r
}

func exact(b ...byte) *standard.BmMatchParam {
	return &standard.BmMatchParam{Type: standard.BmMatchParamType_EXACT, Exact: &standard.BmMatchParamExact{Key: b}}
}

func mac(last byte) []byte { return []byte{0, 0, 0, 0, 0, last} }

func tableCode(err error) standard.TableOperationErrorCode {
	var e *standard.InvalidTableOperation
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// TestEntryHandles: handles as BMv2 gives them — the lowest free index,
// its version bumped by a delete, so a stale handle is refused as expired;
// a cleared table starts again at 0.
func TestEntryHandles(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	add := func(last byte) standard.BmEntryHandle {
		t.Helper()
		h, err := r.std.BmMtAddEntry(ctx, 0, "CliIngress.l2", standard.BmMatchParams{exact(mac(last)...)}, "CliIngress.forward",
			standard.BmActionData{{0, last}}, &standard.BmAddEntryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h0, h1, h2 := add(1), add(2), add(3); h0 != 0 || h1 != 1 || h2 != 2 {
		t.Errorf("handles %d %d %d, want 0 1 2", h0, h1, h2)
	}
	if err := r.std.BmMtDeleteEntry(ctx, 0, "CliIngress.l2", 0); err != nil {
		t.Fatal(err)
	}
	if h := add(4); h != 1<<24 {
		t.Errorf("after a delete: handle %#x, want 0x1000000", h)
	}
	for _, tc := range []struct {
		h    standard.BmEntryHandle
		want standard.TableOperationErrorCode
	}{
		{0, standard.TableOperationErrorCode_EXPIRED_HANDLE},
		{77, standard.TableOperationErrorCode_INVALID_HANDLE},
	} {
		if _, err := r.std.BmMtGetEntry(ctx, 0, "CliIngress.l2", tc.h); tableCode(err) != tc.want {
			t.Errorf("handle %d: %v, want %v", tc.h, err, tc.want)
		}
	}
	_, err := r.std.BmMtAddEntry(ctx, 0, "CliIngress.l2", standard.BmMatchParams{exact(mac(2)...)}, "CliIngress.forward",
		standard.BmActionData{{0, 9}}, &standard.BmAddEntryOptions{})
	if tableCode(err) != standard.TableOperationErrorCode_DUPLICATE_ENTRY {
		t.Errorf("duplicate: %v", err)
	}
	if err := r.std.BmMtClearEntries(ctx, 0, "CliIngress.l2", false); err != nil {
		t.Fatal(err)
	}
	if h := add(5); h != 0 {
		t.Errorf("after a clear: handle %#x, want 0", h)
	}
}

// TestSharedWithP4Runtime: what one control plane writes, the other reads.
func TestSharedWithP4Runtime(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	ids := map[string]uint32{}
	for _, tb := range r.info.Tables {
		ids[tb.Preamble.Name] = tb.Preamble.Id
	}
	for _, a := range r.info.Actions {
		ids[a.Preamble.Name] = a.Preamble.Id
	}
	for _, x := range r.info.Registers {
		ids[x.Preamble.Name] = x.Preamble.Id
	}
	// P4Runtime becomes primary and pushes the same program.
	stream, err := r.p4rt.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	election := &p4v1.Uint128{Low: 1}
	if err := stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{
		Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: 1, ElectionId: election}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.p4rt.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: election,
		Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: r.info, P4DeviceConfig: r.json}}); err != nil {
		t.Fatal(err)
	}
	write := func(u ...*p4v1.Update) {
		t.Helper()
		if _, err := r.p4rt.Write(ctx, &p4v1.WriteRequest{DeviceId: 1, ElectionId: election, Updates: u}); err != nil {
			t.Fatal(err)
		}
	}
	acl := &p4v1.TableEntry{TableId: ids["CliIngress.acl"], Priority: 10,
		Match:  []*p4v1.FieldMatch{{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: []byte{8, 0}, Mask: []byte{0xff, 0}}}}},
		Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: ids["CliIngress.acl_deny"]}}}}
	write(&p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: acl}}},
		&p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{
			PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{
				MulticastGroupEntry: &p4v1.MulticastGroupEntry{MulticastGroupId: 3, Replicas: []*p4v1.Replica{
					{PortKind: &p4v1.Replica_EgressPort{EgressPort: 1}, Instance: 1},
					{PortKind: &p4v1.Replica_EgressPort{EgressPort: 2}, Instance: 1},
					{PortKind: &p4v1.Replica_EgressPort{EgressPort: 3}, Instance: 2}}}}}}}},
		&p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{
			RegisterId: ids["CliIngress.last_length"], Index: &p4v1.Index{Index: 4},
			Data: &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: []byte{0x12, 0x34}}}}}}})

	// Thrift reads P4Runtime's entry, priority inverted as PI does.
	es, err := r.std.BmMtGetEntries(ctx, 0, "CliIngress.acl")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || *es[0].Options.Priority != 2147483647-10 || es[0].EntryHandle != 0 ||
		*es[0].ActionEntry.ActionName != "CliIngress.acl_deny" {
		t.Errorf("P4Runtime's entry over Thrift: %+v", es)
	}
	if v, err := r.std.BmRegisterRead(ctx, 0, "CliIngress.last_length", 4); err != nil || v != 0x1234 {
		t.Errorf("register over Thrift: %d %v", v, err)
	}
	js, err := r.pre.BmMcGetEntries(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js, `"mgrps":[{"id":3,"l1_handles":[0,1]}]`) || !strings.Contains(js, `{"handle":0,"ports":[1,2],"lags":[]}`) {
		t.Errorf("P4Runtime's group over Thrift: %s", js)
	}

	// P4Runtime reads Thrift's entry, counter and mirroring session.
	pri := int32(2147483647 - 20)
	h, err := r.std.BmMtAddEntry(ctx, 0, "CliIngress.acl", standard.BmMatchParams{{Type: standard.BmMatchParamType_TERNARY,
		Ternary: &standard.BmMatchParamTernary{Key: []byte{8, 6}, Mask: []byte{0xff, 0xff}}}}, "CliIngress.acl_permit",
		nil, &standard.BmAddEntryOptions{Priority: &pri})
	if err != nil || h != 1 {
		t.Fatalf("Thrift add: %d %v", h, err)
	}
	if err := r.std.BmMtWriteCounter(ctx, 0, "CliIngress.acl", h, &standard.BmCounterValue{Packets: 3, Bytes: 300}); err != nil {
		t.Fatal(err)
	}
	if err := r.sw.MirroringSessionAdd(ctx, 7, &simple_switch.MirroringSessionConfig{Port: thrift.Int32Ptr(4)}); err != nil {
		t.Fatal(err)
	}
	rs, err := r.p4rt.Read(ctx, &p4v1.ReadRequest{DeviceId: 1, Entities: []*p4v1.Entity{
		{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: ids["CliIngress.acl"], CounterData: &p4v1.CounterData{}}}},
		{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4v1.CloneSessionEntry{SessionId: 7}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var sawEntry, sawSession bool
	for _, e := range resp.Entities {
		if te := e.GetTableEntry(); te != nil && te.Priority == 20 {
			sawEntry = te.GetCounterData().GetPacketCount() == 3 && te.GetCounterData().GetByteCount() == 300
		}
		if cs := e.GetPacketReplicationEngineEntry().GetCloneSessionEntry(); cs != nil {
			sawSession = len(cs.Replicas) == 1 && (cs.Replicas[0].GetEgressPort() == 4 || bytes.Equal(cs.Replicas[0].GetPort(), []byte{4}))
		}
	}
	if !sawEntry || !sawSession {
		t.Errorf("Thrift's writes over P4Runtime: entry %v session %v: %v", sawEntry, sawSession, resp.Entities)
	}

	// P4Runtime reads the default action Thrift set, and the program's once
	// Thrift resets it, as PI reads it from BMv2.
	readDefault := func() *p4v1.Action {
		t.Helper()
		rs, err := r.p4rt.Read(ctx, &p4v1.ReadRequest{DeviceId: 1, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{
			TableEntry: &p4v1.TableEntry{TableId: ids["CliIngress.l2"], IsDefaultAction: true}}}}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rs.Recv()
		if err != nil || len(resp.Entities) != 1 {
			t.Fatalf("default entry read: %v %v", resp, err)
		}
		return resp.Entities[0].GetTableEntry().GetAction().GetAction()
	}
	if err := r.std.BmMtSetDefaultAction(ctx, 0, "CliIngress.l2", "CliIngress.forward", [][]byte{{0, 5}}); err != nil {
		t.Fatal(err)
	}
	if a := readDefault(); a.GetActionId() != ids["CliIngress.forward"] || len(a.Params) != 1 || !bytes.Equal(a.Params[0].Value, []byte{5}) {
		t.Errorf("P4Runtime read of a default Thrift set: %v", a)
	}
	if err := r.std.BmMtResetDefaultEntry(ctx, 0, "CliIngress.l2"); err != nil {
		t.Fatal(err)
	}
	if a := readDefault(); a.GetActionId() != ids["CliIngress.drop"] {
		t.Errorf("P4Runtime read of a default Thrift reset: %v", a)
	}

	// swap_configs: the new program forwards, mirroring sessions kept,
	// P4Runtime told.
	if err := r.std.BmSwapConfigs(ctx); err == nil {
		t.Error("swap without a loaded config: no error")
	}
	if err := r.std.BmLoadNewConfig(ctx, string(r.json)); err != nil {
		t.Fatal(err)
	}
	if err := r.std.BmSwapConfigs(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.std.BmMtGetNumEntries(ctx, 0, "CliIngress.acl"); err != nil || n != 0 {
		t.Errorf("entries after the swap: %d %v", n, err)
	}
	if cfg, err := r.sw.MirroringSessionGet(ctx, 7); err != nil || cfg.GetPort() != 4 {
		t.Errorf("mirroring session after the swap: %v %v", cfg, err)
	}
	r.mu.Lock()
	if len(r.replaced) != 1 {
		t.Errorf("P4Runtime told of %d swaps", len(r.replaced))
	}
	r.mu.Unlock()
	if _, err := r.p4rt.Write(ctx, &p4v1.WriteRequest{DeviceId: 1, ElectionId: election, Updates: []*p4v1.Update{
		{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: acl}}}}}); err == nil {
		t.Error("P4Runtime wrote after a Thrift swap without pushing its pipeline again")
	}
}

// TestQueueDepthAndMulticast: set_queue_depth reaches the device's queues
// and the PRE's nodes become the engine's replicas.
func TestQueueDepthAndMulticast(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, err := r.sw.SetAllEgressQueueDepths(ctx, 100); err != nil {
		t.Fatal(err)
	}
	// no data port: a port number without an interface has queues, as in
	// BMv2; the drop port has none
	if rc, _ := r.sw.SetEgressQueueDepth(ctx, 3, 10); rc != 0 {
		t.Errorf("a port without an interface: rc %d, want 0", rc)
	}
	if n, ok := r.dev.QueueDepth(3, 0); !ok || n != 10 {
		t.Errorf("port 3: depth %d %v, want 10", n, ok)
	}
	if rc, _ := r.sw.SetEgressQueueDepth(ctx, 511, 10); rc != 1 {
		t.Errorf("the drop port: rc %d, want 1", rc)
	}
	if _, err := r.pre.BmMcMgrpCreate(ctx, 0, 5); err != nil {
		t.Fatal(err)
	}
	n0, _ := r.pre.BmMcNodeCreate(ctx, 0, 7, "110", "")
	n1, _ := r.pre.BmMcNodeCreate(ctx, 0, 8, "1", "10")
	if err := r.pre.BmMcSetLagMembership(ctx, 0, 1, "100000"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []simple_pre_lag.BmMcL1Handle{n0, n1} {
		if err := r.pre.BmMcNodeAssociate(ctx, 0, 5, n); err != nil {
			t.Fatal(err)
		}
	}
	c, _, _ := r.target.Current()
	reps, ok := c.Engine.MulticastGroup(5)
	want := []pipeline.Replica{{Port: 1, Rid: 7}, {Port: 2, Rid: 7}, {Port: 0, Rid: 8}, {Port: 5, Rid: 8}}
	if !ok || len(reps) != len(want) {
		t.Fatalf("group 5: %v, want %v", reps, want)
	}
	for i := range want {
		if reps[i] != want[i] {
			t.Errorf("replica %d: %v, want %v", i, reps[i], want[i])
		}
	}
	if err := r.pre.BmMcNodeAssociate(ctx, 0, 5, n0); err == nil {
		t.Error("a node associated twice: no error")
	}
	if err := r.pre.BmMcNodeDestroy(ctx, 0, n0); err != nil {
		t.Fatal(err)
	}
	if reps, _ := c.Engine.MulticastGroup(5); len(reps) != 2 {
		t.Errorf("after destroying a node: %v", reps)
	}
}

// TestQueueRate: set_queue_rate in the three forms of sswitch_CLI.py
// reaches the device's queues as the time between packets, and answers 0
// as BMv2 does (for a port number without an interface too); the drop port
// answers 1.
func TestQueueRate(t *testing.T) {
	r := newRigCPU(t, 64)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		call       func() (int32, error)
		rc         int32
		prio       int   // priority read back on port 64
		wantGapNs  int64 // after the call
		otherPrio  int
		otherGapNs int64
	}{
		{"all", func() (int32, error) { return r.sw.SetAllEgressQueueRates(ctx, 1000) }, 0, 0, 1_000_000, 7, 1_000_000},
		{"port", func() (int32, error) { return r.sw.SetEgressQueueRate(ctx, 64, 500) }, 0, 3, 2_000_000, 7, 2_000_000},
		{"port and priority", func() (int32, error) { return r.sw.SetEgressPriorityQueueRate(ctx, 64, 7, 100) }, 0, 7, 10_000_000, 6, 2_000_000},
		{"priority 0 off", func() (int32, error) { return r.sw.SetEgressPriorityQueueRate(ctx, 64, 0, 0) }, 0, 0, 0, 7, 10_000_000},
		{"port without an interface", func() (int32, error) { return r.sw.SetEgressQueueRate(ctx, 3, 10) }, 0, 7, 10_000_000, 1, 2_000_000},
		{"drop port", func() (int32, error) { return r.sw.SetEgressQueueRate(ctx, 511, 10) }, 1, 7, 10_000_000, 1, 2_000_000},
		{"no such priority", func() (int32, error) { return r.sw.SetEgressPriorityQueueRate(ctx, 64, 8, 10) }, 1, 7, 10_000_000, 1, 2_000_000},
		{"negative port", func() (int32, error) { return r.sw.SetEgressQueueRate(ctx, -1, 10) }, 1, 7, 10_000_000, 1, 2_000_000},
	} {
		rc, err := tc.call()
		if err != nil || rc != tc.rc {
			t.Errorf("%s: rc %d err %v, want %d", tc.name, rc, err, tc.rc)
		}
		for _, q := range []struct {
			prio int
			gap  int64
		}{{tc.prio, tc.wantGapNs}, {tc.otherPrio, tc.otherGapNs}} {
			if g, ok := r.dev.QueueRate(64, q.prio); !ok || g != q.gap {
				t.Errorf("%s: priority %d gap %d ns, want %d", tc.name, q.prio, g, q.gap)
			}
		}
	}
}

// TestIndirectSetDefault: table_indirect_set_default and
// ..._with_group set an indirect table's default entry to a member or a
// group, read back as BMv2 reads it, with BMv2's error codes.
func TestIndirectSetDefault(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, err := r.std.BmMtActProfAddMember(ctx, 0, "CliIngress.src_selector", "CliIngress.set_tag", standard.BmActionData{{5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.std.BmMtActProfCreateGroup(ctx, 0, "CliIngress.src_selector"); err != nil {
		t.Fatal(err)
	}
	code := func(err error) standard.TableOperationErrorCode {
		if e, ok := err.(*standard.InvalidTableOperation); ok {
			return e.Code
		}
		return 0
	}
	for _, tc := range []struct {
		name string
		set  func() error
		code standard.TableOperationErrorCode // 0: success
		want string                           // default entry read back
	}{
		{"member", func() error { return r.std.BmMtIndirectSetDefaultMember(ctx, 0, "CliIngress.by_src", 0) }, 0, "member 0"},
		{"group", func() error { return r.std.BmMtIndirectWsSetDefaultGroup(ctx, 0, "CliIngress.by_src", 0) }, 0, "group 0"},
		{"no such member", func() error { return r.std.BmMtIndirectSetDefaultMember(ctx, 0, "CliIngress.by_src", 4) },
			standard.TableOperationErrorCode_INVALID_MBR_HANDLE, "group 0"},
		{"no such group", func() error { return r.std.BmMtIndirectWsSetDefaultGroup(ctx, 0, "CliIngress.by_src", 4) },
			standard.TableOperationErrorCode_INVALID_GRP_HANDLE, "group 0"},
		{"group on a table without a selector", func() error { return r.std.BmMtIndirectWsSetDefaultGroup(ctx, 0, "CliIngress.by_dst", 0) },
			standard.TableOperationErrorCode_WRONG_TABLE_TYPE, "group 0"},
		{"member on a direct table", func() error { return r.std.BmMtIndirectSetDefaultMember(ctx, 0, "CliIngress.l2", 0) },
			standard.TableOperationErrorCode_WRONG_TABLE_TYPE, "group 0"},
		{"reset", func() error { return r.std.BmMtIndirectResetDefaultEntry(ctx, 0, "CliIngress.by_src") }, 0, "none"},
	} {
		if err := tc.set(); code(err) != tc.code || (tc.code == 0 && err != nil) {
			t.Errorf("%s: %v, want code %v", tc.name, err, tc.code)
		}
		e, err := r.std.BmMtGetDefaultEntry(ctx, 0, "CliIngress.by_src")
		if err != nil {
			t.Fatal(err)
		}
		got := "none"
		switch {
		case e.MbrHandle != nil:
			got = fmt.Sprintf("member %d", *e.MbrHandle)
		case e.GrpHandle != nil:
			got = fmt.Sprintf("group %d", *e.GrpHandle)
		}
		if got != tc.want {
			t.Errorf("%s: default entry %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestDirectResourcesByIndex: direct counters and meters are named by the
// entry handle's index, whatever its version, as BMv2 names them (a
// handle whose index holds no entry is still invalid).
func TestDirectResourcesByIndex(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for i := byte(1); i <= 2; i++ {
		if _, err := r.std.BmMtAddEntry(ctx, 0, "CliIngress.flows", standard.BmMatchParams{exact(mac(i)...)},
			"CliIngress.policed_forward", standard.BmActionData{{i}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rates := []*standard.BmMeterRateConfig{{UnitsPerMicros: 0.25, BurstSize: 100}, {UnitsPerMicros: 0.5, BurstSize: 200}}
	for _, tc := range []struct {
		name string
		h    standard.BmEntryHandle
		want standard.TableOperationErrorCode
	}{
		{"current version", 1, 0},
		{"another version", 0x05000001, 0},
		{"no entry at the index", 7, standard.TableOperationErrorCode_INVALID_HANDLE},
	} {
		err := r.std.BmMtSetMeterRates(ctx, 0, "CliIngress.flows", tc.h, rates)
		if tableCode(err) != tc.want || (tc.want == 0 && err != nil) {
			t.Errorf("%s: set rates: %v, want %v", tc.name, err, tc.want)
		}
		got, err := r.std.BmMtGetMeterRates(ctx, 0, "CliIngress.flows", tc.h)
		if tableCode(err) != tc.want || (tc.want == 0 && (err != nil || len(got) != 2 || got[1].BurstSize != 200)) {
			t.Errorf("%s: get rates: %v %v", tc.name, got, err)
		}
	}
	if _, err := r.std.BmMtAddEntry(ctx, 0, "CliIngress.acl", standard.BmMatchParams{ternary([]byte{8, 0}, []byte{0xff, 0})},
		"CliIngress.acl_deny", nil, prio(1)); err != nil {
		t.Fatal(err)
	}
	if err := r.std.BmMtWriteCounter(ctx, 0, "CliIngress.acl", 0x01000000, &standard.BmCounterValue{Bytes: 70, Packets: 7}); err != nil {
		t.Errorf("write counter by another version: %v", err)
	}
	if v, err := r.std.BmMtReadCounter(ctx, 0, "CliIngress.acl", 0x02000000); err != nil || v.Packets != 7 {
		t.Errorf("read counter by another version: %v %v", v, err)
	}
}

// TestClearKeepsIndirectDefault: table_clear without reset_default keeps
// an indirect table's default member, as BMv2 does; with it, the default
// goes.
func TestClearKeepsIndirectDefault(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, err := r.std.BmMtActProfAddMember(ctx, 0, "CliIngress.dst_profile", "CliIngress.forward", standard.BmActionData{{1}}); err != nil {
		t.Fatal(err)
	}
	if err := r.std.BmMtIndirectSetDefaultMember(ctx, 0, "CliIngress.by_dst", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.std.BmMtIndirectAddEntry(ctx, 0, "CliIngress.by_dst", standard.BmMatchParams{exact(mac(1)...)}, 0, nil); err != nil {
		t.Fatal(err)
	}
	for _, reset := range []bool{false, true} {
		if err := r.std.BmMtClearEntries(ctx, 0, "CliIngress.by_dst", reset); err != nil {
			t.Fatal(err)
		}
		d, err := r.std.BmMtGetDefaultEntry(ctx, 0, "CliIngress.by_dst")
		if err != nil {
			t.Fatal(err)
		}
		if kept := d.ActionType == standard.BmActionEntryType_MBR_HANDLE && *d.MbrHandle == 0; kept == reset {
			t.Errorf("reset_default %v: default %v", reset, d)
		}
		if n, _ := r.std.BmMtGetNumEntries(ctx, 0, "CliIngress.by_dst"); n != 0 {
			t.Errorf("reset_default %v: %d entries left", reset, n)
		}
	}
}

// crc16Bitwise is a 16-bit CRC by its definition (MSB first, no
// reflection), for the one CRC-16 below that the standard library lacks.
func crc16Bitwise(poly, init uint16, data []byte) uint16 {
	r := init
	for _, x := range data {
		r ^= uint16(x) << 8
		for range 8 {
			if r&0x8000 != 0 {
				r = r<<1 ^ poly
			} else {
				r <<= 1
			}
		}
	}
	return r
}

// TestCustomCRCParameters: set_crc16_parameters and set_crc32_parameters
// (bm_set_crc{16,32}_custom_parameters) change what the program's
// crc16_custom and crc32_custom hashes give the next packet, with
// parameters whose top bit is set arriving as negative Thrift integers;
// the wrong width or name is refused with BMv2's codes.
func TestCustomCRCParameters(t *testing.T) {
	r := newRigCPU(t, 64)
	ctx := context.Background()
	frame := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00}
	addrs := frame[:12]
	hashes := func() (uint64, uint64) {
		t.Helper()
		if err := r.dev.InjectPacketOut(frame); err != nil {
			t.Fatal(err)
		}
		var got [2]uint64
		for i := range got {
			v, err := r.std.BmRegisterRead(ctx, 0, "CliIngress.hashes", int32(i))
			if err != nil {
				t.Fatal(err)
			}
			got[i] = uint64(v)
		}
		return got[0], got[1]
	}
	h16, h32 := hashes()
	if want := uint64(crc32.ChecksumIEEE(addrs)); h32 != want {
		t.Errorf("crc32_custom before any change: %#x, want crc32's %#x", h32, want)
	}
	// CRC-16/CCITT-FALSE: polynomial 0x1021, initial remainder 0xFFFF (-1 as an i16)
	if err := r.std.BmSetCrc16CustomParameters(ctx, 0, "calc", &standard.BmCrc16Config{
		Polynomial: 0x1021, InitialRemainder: -1}); err != nil {
		t.Fatal(err)
	}
	// CRC-32C: polynomial 0x1EDC6F41, both remainders 0xFFFFFFFF, reflected
	if err := r.std.BmSetCrc32CustomParameters(ctx, 0, "calc_0", &standard.BmCrc32Config{
		Polynomial: 0x1EDC6F41, InitialRemainder: -1, FinalXorValue: -1, DataReflected: true, RemainderReflected: true}); err != nil {
		t.Fatal(err)
	}
	n16, n32 := hashes()
	if want := uint64(crc16Bitwise(0x1021, 0xFFFF, addrs)); n16 != want || n16 == h16 {
		t.Errorf("crc16_custom after set_crc16_parameters: %#x (before %#x), want %#x", n16, h16, want)
	}
	if want := uint64(crc32.Checksum(addrs, crc32.MakeTable(crc32.Castagnoli))); n32 != want {
		t.Errorf("crc32_custom after set_crc32_parameters: %#x, want CRC-32C %#x", n32, want)
	}
	// CRC-16/ARC again, polynomial 0x8005 (negative as an i16): the value before
	if err := r.std.BmSetCrc16CustomParameters(ctx, 0, "calc", &standard.BmCrc16Config{
		Polynomial: -0x7ffb, DataReflected: true, RemainderReflected: true}); err != nil {
		t.Fatal(err)
	}
	if back, _ := hashes(); back != h16 {
		t.Errorf("crc16_custom set back to crc16's parameters: %#x, want %#x", back, h16)
	}
	for _, tc := range []struct {
		name string
		err  error
		code standard.CrcErrorCode
	}{
		{"crc16 on a crc32_custom", r.std.BmSetCrc16CustomParameters(ctx, 0, "calc_0", &standard.BmCrc16Config{}), standard.CrcErrorCode_WRONG_TYPE_CALCULATION},
		{"crc32 on a crc16_custom", r.std.BmSetCrc32CustomParameters(ctx, 0, "calc", &standard.BmCrc32Config{}), standard.CrcErrorCode_WRONG_TYPE_CALCULATION},
		{"no such calculation", r.std.BmSetCrc16CustomParameters(ctx, 0, "nosuch", &standard.BmCrc16Config{}), standard.CrcErrorCode_INVALID_CALCULATION_NAME},
	} {
		var e *standard.InvalidCrcOperation
		if !errors.As(tc.err, &e) || e.Code != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.code)
		}
	}
}
