package engine

import (
	"bytes"
	"encoding/binary"
	"os"
	"sync"
	"testing"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

func loadFixture(t testing.TB, name string, opts Options) *Pipeline {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Load(data, opts)
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	return pl
}

// ipv4Frame builds Ethernet+IPv4 (+payload) with a correct header checksum.
func ipv4Frame(dst uint32, ttl byte, payload []byte) []byte {
	f := make([]byte, 14+20+len(payload))
	copy(f[0:6], []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55})
	copy(f[6:12], []byte{0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(ip[4:], 0x1234)
	ip[8] = ttl
	ip[9] = 17
	binary.BigEndian.PutUint32(ip[12:], 0x0a000001)
	binary.BigEndian.PutUint32(ip[16:], dst)
	binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
	copy(f[34:], payload)
	return f
}

// inetChecksum is an independent RFC 1071 implementation for the tests.
func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

type captured struct {
	port  uint32
	frame []byte
}

func process(pl *Pipeline, frame []byte, port uint32) []captured {
	var out []captured
	pl.ProcessPacket(frame, port, func(p uint32, f []byte) {
		out = append(out, captured{p, append([]byte(nil), f...)})
	})
	return out
}

func addRoute(t testing.TB, pl *Pipeline, prefix uint32, plen int, mac uint64, port uint16) {
	t.Helper()
	tid, ok := pl.Lookup(KindTable, "MyIngress.ipv4_lpm")
	if !ok {
		t.Fatal("no table MyIngress.ipv4_lpm")
	}
	aid, _ := pl.Lookup(KindAction, "MyIngress.ipv4_forward")
	v := make([]byte, 4)
	binary.BigEndian.PutUint32(v, prefix)
	m := make([]byte, 6)
	putUint(m, mac)
	pb := []byte{byte(port >> 8), byte(port)}
	err := pl.AddEntry(tid, pipeline.TableEntry{
		Match:  []pipeline.Match{{Value: v, PrefixLen: plen}},
		Action: pipeline.ActionCall{ActionID: aid, Params: [][]byte{m, pb}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestIPv4LPMForwarding(t *testing.T) {
	pl := loadFixture(t, "ipv4_lpm.json", Options{})
	addRoute(t, pl, 0x0a000000, 8, 0x020000000001, 1)
	addRoute(t, pl, 0x0a010000, 16, 0x020000000002, 2)
	addRoute(t, pl, 0x0a010200, 24, 0x020000000003, 3)
	addRoute(t, pl, 0, 0, 0x0200000000ff, 9)
	cases := []struct {
		name    string
		dst     uint32
		port    uint32
		dstMAC  uint64
		dropped bool
	}{
		{"/24 wins over /16 and /8", 0x0a010203, 3, 0x020000000003, false},
		{"/16", 0x0a01ff01, 2, 0x020000000002, false},
		{"/8", 0x0aff0000, 1, 0x020000000001, false},
		{"default route /0", 0xc0a80001, 9, 0x0200000000ff, false},
	}
	payload := []byte("payload bytes")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := ipv4Frame(tc.dst, 64, payload)
			out := process(pl, in, 7)
			if len(out) != 1 {
				t.Fatalf("got %d frames, want 1", len(out))
			}
			f := out[0].frame
			if out[0].port != tc.port {
				t.Errorf("port %d, want %d", out[0].port, tc.port)
			}
			if len(f) != len(in) {
				t.Fatalf("length %d, want %d", len(f), len(in))
			}
			mac := make([]byte, 6)
			putUint(mac, tc.dstMAC)
			if !bytes.Equal(f[0:6], mac) || !bytes.Equal(f[6:12], in[0:6]) {
				t.Errorf("MACs %x %x", f[0:6], f[6:12])
			}
			if f[14+8] != 63 {
				t.Errorf("ttl %d, want 63", f[14+8])
			}
			if inetChecksum(f[14:34]) != 0 {
				t.Errorf("bad IPv4 checksum in %x", f[14:34])
			}
			if !bytes.Equal(f[34:], payload) {
				t.Errorf("payload %q", f[34:])
			}
		})
	}
	// Remove the default route: a miss runs the default action (drop).
	tid, _ := pl.Lookup(KindTable, "MyIngress.ipv4_lpm")
	if err := pl.DeleteEntry(tid, []pipeline.Match{{Value: []byte{0}, PrefixLen: 0}}, 0); err != nil {
		t.Fatal(err)
	}
	if out := process(pl, ipv4Frame(0xc0a80001, 64, nil), 1); len(out) != 0 {
		t.Errorf("miss: got %d frames, want a drop", len(out))
	}
	// Not IPv4: no table applied, egress_spec stays 0.
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	out := process(pl, arp, 4)
	if len(out) != 1 || out[0].port != 0 || !bytes.Equal(out[0].frame, arp) {
		t.Errorf("ARP: got %v", out)
	}
}

func TestTableEntryErrors(t *testing.T) {
	pl := loadFixture(t, "ipv4_lpm.json", Options{})
	tid, _ := pl.Lookup(KindTable, "MyIngress.ipv4_lpm")
	fwd, _ := pl.Lookup(KindAction, "MyIngress.ipv4_forward")
	good := pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{10, 0, 0, 0}, PrefixLen: 8}},
		Action: pipeline.ActionCall{ActionID: fwd, Params: [][]byte{{1}, {1}}}}
	if err := pl.AddEntry(tid, good); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		e    pipeline.TableEntry
		code ErrorCode
	}{
		{"duplicate", good, CodeAlreadyExists},
		{"same prefix other bits masked", pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{10, 1, 0, 0}, PrefixLen: 8}}, Action: good.Action}, CodeAlreadyExists},
		{"prefix too long", pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{10, 0, 0, 0}, PrefixLen: 33}}, Action: good.Action}, CodeInvalidArgument},
		{"value too wide", pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{1, 10, 0, 0, 0}, PrefixLen: 8}}, Action: good.Action}, CodeInvalidArgument},
		{"param too wide", pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{11, 0, 0, 0}, PrefixLen: 8}}, Action: pipeline.ActionCall{ActionID: fwd, Params: [][]byte{{1}, {2, 0}}}}, CodeInvalidArgument},
		{"missing param", pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{11, 0, 0, 0}, PrefixLen: 8}}, Action: pipeline.ActionCall{ActionID: fwd, Params: [][]byte{{1}}}}, CodeInvalidArgument},
		{"unknown action", pipeline.TableEntry{Match: []pipeline.Match{{Value: []byte{11, 0, 0, 0}, PrefixLen: 8}}, Action: pipeline.ActionCall{ActionID: 999}}, CodeInvalidArgument},
		{"key count", pipeline.TableEntry{Action: good.Action}, CodeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := pl.AddEntry(tid, tc.e)
			if ErrorCodeOf(err) != tc.code {
				t.Errorf("got %v, want code %v", err, tc.code)
			}
		})
	}
	if _, err := pl.ReadEntry(tid, []pipeline.Match{{Value: []byte{12, 0, 0, 0}, PrefixLen: 8}}, 0); ErrorCodeOf(err) != CodeNotFound {
		t.Errorf("read missing entry: %v", err)
	}
	es, err := pl.ReadEntries(tid)
	if err != nil || len(es) != 1 || es[0].Match[0].PrefixLen != 8 {
		t.Fatalf("ReadEntries = %+v, %v", es, err)
	}
	// Modify keeps the entry, changes its action data.
	mod := good
	mod.Action = pipeline.ActionCall{ActionID: fwd, Params: [][]byte{{2}, {5}}}
	if err := pl.ModifyEntry(tid, mod); err != nil {
		t.Fatal(err)
	}
	out := process(pl, ipv4Frame(0x0a000001, 9, nil), 0)
	if len(out) != 1 || out[0].port != 5 {
		t.Fatalf("after modify: %v", out)
	}
	if _, err := Load([]byte(`{"header_types": 5}`), Options{}); err == nil {
		t.Error("Load accepted bad JSON")
	}
}

// TestConcurrentControlPlane adds and deletes routes while packets flow on
// other goroutines (run with -race).
func TestConcurrentControlPlane(t *testing.T) {
	pl := loadFixture(t, "ipv4_lpm.json", Options{})
	addRoute(t, pl, 0x0a000000, 8, 1, 1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frame := ipv4Frame(0x0a000001, 64, nil)
			var jobs []Job
			for {
				select {
				case <-stop:
					return
				default:
				}
				jobs = pl.Ingress(frame, 0, jobs[:0])
				for _, j := range jobs {
					out, _ := pl.Egress(j, QueueMeta{}, nil)
					if out.Pkt == nil || out.Port != 1 {
						t.Errorf("route lost: %+v", out)
						return
					}
					out.Pkt.Release()
				}
			}
		}()
	}
	tid, _ := pl.Lookup(KindTable, "MyIngress.ipv4_lpm")
	for i := 0; i < 500; i++ {
		addRoute(t, pl, 0x0b000000+uint32(i)<<8, 24, 2, 2)
		if i%2 == 0 {
			v := make([]byte, 4)
			binary.BigEndian.PutUint32(v, 0x0b000000+uint32(i)<<8)
			if err := pl.DeleteEntry(tid, []pipeline.Match{{Value: v, PrefixLen: 24}}, 0); err != nil {
				t.Error(err)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// TestPacketsAllocateNothingWhileRoutesChange: the packet path allocates
// nothing, also right after control-plane writes have published new table
// snapshots (BenchmarkIPv4LPMWithWriter's allocations are its writer's).
func TestPacketsAllocateNothingWhileRoutesChange(t *testing.T) {
	if raceDetector {
		t.Skip("sync.Pool drops items under the race detector")
	}
	pl := loadFixture(t, "ipv4_lpm.json", Options{})
	for i := 0; i < 256; i++ {
		addRoute(t, pl, 0x0a000000|uint32(i)<<8, 24, 0x020000000000|uint64(i), uint16(i%8))
	}
	tid, _ := pl.Lookup(KindTable, "MyIngress.ipv4_lpm")
	fwd, _ := pl.Lookup(KindAction, "MyIngress.ipv4_forward")
	frames := [][]byte{
		ipv4Frame(0x0a002a01, 64, make([]byte, 30)), // hits a /24
		ipv4Frame(0x0b002a01, 64, make([]byte, 30)), // hits the route being changed, or misses
		ipv4Frame(0x0a002a01, 1, make([]byte, 30)),
	}
	jobs := make([]Job, 0, 4)
	packets := func() {
		for _, f := range frames {
			jobs = pl.Ingress(f, 1, jobs[:0])
			for _, j := range jobs {
				out, _ := pl.Egress(j, QueueMeta{}, nil)
				if out.Pkt != nil {
					out.Pkt.Release()
				}
			}
		}
	}
	packets() // warm the pool
	v := []byte{0x0b, 0, 0x2a, 0}
	for round := 0; round < 20; round++ {
		m := []pipeline.Match{{Value: v, PrefixLen: 24}}
		if round%2 == 0 {
			if err := pl.AddEntry(tid, pipeline.TableEntry{Match: m, Action: pipeline.ActionCall{ActionID: fwd, Params: [][]byte{{1}, {1}}}}); err != nil {
				t.Fatal(err)
			}
		} else if err := pl.DeleteEntry(tid, m, 0); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(50, packets); n != 0 {
			t.Fatalf("round %d: %.1f allocations per %d packets", round, n, len(frames))
		}
	}
}
