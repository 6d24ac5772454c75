package gnmiports

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/terrapin/terrapin/toolchain/device"
)

// fakePorts stands for the device: ports whose links the test changes.
type fakePorts struct {
	mu       sync.Mutex
	ports    []device.PortState
	watchers map[int]func(device.PortState)
	next     int
}

func (f *fakePorts) Ports() []device.PortState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]device.PortState(nil), f.ports...)
}

func (f *fakePorts) WatchPorts(fn func(device.PortState)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watchers == nil {
		f.watchers = map[int]func(device.PortState){}
	}
	id := f.next
	f.next++
	f.watchers[id] = fn
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.watchers, id)
	}
}

func (f *fakePorts) set(number uint16, up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.ports {
		if f.ports[i].Number == number {
			f.ports[i].Up = up
			for _, fn := range f.watchers {
				fn(f.ports[i])
			}
		}
	}
}

func (f *fakePorts) watching() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers)
}

func serve(t *testing.T) (gpb.GNMIClient, *fakePorts) {
	t.Helper()
	ports := &fakePorts{ports: []device.PortState{
		{Number: 1, Name: "veth1", Up: true},
		{Number: 2, Name: "veth2", Up: true},
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	New(ports, nil).Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return gpb.NewGNMIClient(conn), ports
}

// path builds interfaces/interface[name=NAME]/state/LEAF, shortened to n elements.
func path(name, leaf string, n int) *gpb.Path {
	elems := []*gpb.PathElem{
		{Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"name": name}},
		{Name: "state"},
		{Name: leaf},
	}
	return &gpb.Path{Elem: elems[:n]}
}

// leavesOf renders updates as "iface leaf=value" for comparison.
func leavesOf(ups []*gpb.Update) []string {
	var out []string
	for _, u := range ups {
		e := u.GetPath().GetElem()
		v := u.GetVal()
		val := v.GetStringVal()
		if _, ok := v.GetValue().(*gpb.TypedValue_UintVal); ok {
			val = string(rune('0' + v.GetUintVal()))
		}
		out = append(out, e[1].GetKey()["name"]+" "+e[3].GetName()+"="+val)
	}
	return out
}

func equal(a, b []string) bool {
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

func TestGet(t *testing.T) {
	cases := []struct {
		name string
		req  *gpb.GetRequest
		want []string
		code codes.Code
	}{
		{"every port's ifindex, as finsy asks", &gpb.GetRequest{Path: []*gpb.Path{path("*", "ifindex", 4)}},
			[]string{"veth1 ifindex=1", "veth2 ifindex=2"}, codes.OK},
		{"one port's state", &gpb.GetRequest{Path: []*gpb.Path{path("veth2", "", 3)}},
			[]string{"veth2 name=veth2", "veth2 ifindex=2", "veth2 id=2", "veth2 oper-status=UP"}, codes.OK},
		{"under a prefix", &gpb.GetRequest{Prefix: path("veth1", "", 2), Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "state"}, {Name: "oper-status"}}}}},
			[]string{"veth1 oper-status=UP"}, codes.OK},
		{"a port that is not there", &gpb.GetRequest{Path: []*gpb.Path{path("eth9", "ifindex", 4)}}, nil, codes.NotFound},
		{"a leaf that is not served", &gpb.GetRequest{Path: []*gpb.Path{path("*", "mtu", 4)}}, nil, codes.NotFound},
		{"outside the model", &gpb.GetRequest{Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "system"}}}}}, nil, codes.NotFound},
		{"configuration", &gpb.GetRequest{Type: gpb.GetRequest_CONFIG, Path: []*gpb.Path{path("*", "", 2)}}, nil, codes.NotFound},
		{"no path", &gpb.GetRequest{}, nil, codes.InvalidArgument},
		{"deprecated string elements", &gpb.GetRequest{Path: []*gpb.Path{{Element: []string{"interfaces"}}}}, nil, codes.InvalidArgument},
		{"an unknown encoding", &gpb.GetRequest{Encoding: gpb.Encoding_BYTES, Path: []*gpb.Path{path("*", "", 2)}}, nil, codes.Unimplemented},
	}
	client, _ := serve(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := client.Get(context.Background(), c.req)
			if status.Code(err) != c.code {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, c.code)
			}
			if err != nil {
				return
			}
			var got []string
			for _, n := range resp.GetNotification() {
				got = append(got, leavesOf(n.GetUpdate())...)
			}
			if !equal(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestASwitchWithoutPortsAnswersEmpty(t *testing.T) {
	client, ports := serve(t)
	ports.mu.Lock()
	ports.ports = nil
	ports.mu.Unlock()
	resp, err := client.Get(context.Background(), &gpb.GetRequest{Path: []*gpb.Path{path("*", "ifindex", 4)}})
	if err != nil {
		t.Fatalf("a wildcard over no ports: %v, want an empty answer", err)
	}
	for _, n := range resp.GetNotification() {
		if len(n.GetUpdate()) != 0 {
			t.Fatalf("updates from no ports: %v", n.GetUpdate())
		}
	}
}

func TestSetIsRefused(t *testing.T) {
	client, _ := serve(t)
	_, err := client.Set(context.Background(), &gpb.SetRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Set: %v, want Unimplemented", err)
	}
}

// next reads one response within a second.
func next(t *testing.T, stream gpb.GNMI_SubscribeClient) *gpb.SubscribeResponse {
	t.Helper()
	type result struct {
		r   *gpb.SubscribeResponse
		err error
	}
	ch := make(chan result, 1)
	go func() {
		r, err := stream.Recv()
		ch <- result{r, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("recv: %v", res.err)
		}
		return res.r
	case <-time.After(time.Second):
		t.Fatal("no response within a second")
	}
	return nil
}

func subscribe(t *testing.T, client gpb.GNMIClient, list *gpb.SubscriptionList) gpb.GNMI_SubscribeClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := client.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: list}}); err != nil {
		t.Fatal(err)
	}
	return stream
}

func TestStreamOnChangeFollowsTheLinks(t *testing.T) {
	client, ports := serve(t)
	stream := subscribe(t, client, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, Subscription: []*gpb.Subscription{
		{Path: path("veth1", "oper-status", 4), Mode: gpb.SubscriptionMode_ON_CHANGE},
		{Path: path("veth2", "oper-status", 4), Mode: gpb.SubscriptionMode_ON_CHANGE},
	}})
	if got := leavesOf(next(t, stream).GetUpdate().GetUpdate()); !equal(got, []string{"veth1 oper-status=UP", "veth2 oper-status=UP"}) {
		t.Fatalf("initial state %q", got)
	}
	if !next(t, stream).GetSyncResponse() {
		t.Fatal("no sync response after the initial state")
	}
	ports.set(2, false)
	if got := leavesOf(next(t, stream).GetUpdate().GetUpdate()); !equal(got, []string{"veth2 oper-status=DOWN"}) {
		t.Fatalf("after port 2 lost its link: %q", got)
	}
	ports.set(2, true)
	if got := leavesOf(next(t, stream).GetUpdate().GetUpdate()); !equal(got, []string{"veth2 oper-status=UP"}) {
		t.Fatalf("after port 2 came back: %q", got)
	}
}

func TestStreamUpdatesOnlySkipsTheInitialState(t *testing.T) {
	client, ports := serve(t)
	stream := subscribe(t, client, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, UpdatesOnly: true,
		Subscription: []*gpb.Subscription{{Path: path("*", "oper-status", 4), Mode: gpb.SubscriptionMode_TARGET_DEFINED}}})
	if !next(t, stream).GetSyncResponse() {
		t.Fatal("updates_only: the first response must be the sync response")
	}
	ports.set(1, false)
	if got := leavesOf(next(t, stream).GetUpdate().GetUpdate()); !equal(got, []string{"veth1 oper-status=DOWN"}) {
		t.Fatalf("after port 1 lost its link: %q", got)
	}
}

func TestStreamEndsAndStopsWatchingWhenTheClientLeaves(t *testing.T) {
	client, ports := serve(t)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list := &gpb.SubscriptionList{Subscription: []*gpb.Subscription{{Path: path("*", "oper-status", 4)}}}
	if err := stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: list}}); err != nil {
		t.Fatal(err)
	}
	next(t, stream)
	next(t, stream)
	if ports.watching() != 1 {
		t.Fatalf("%d watchers while subscribed, want 1", ports.watching())
	}
	cancel()
	deadline := time.Now().Add(2 * time.Second)
	for ports.watching() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := ports.watching(); n != 0 {
		t.Fatalf("%d watchers left after the client went", n)
	}
}

func TestSample(t *testing.T) {
	client, ports := serve(t)
	stream := subscribe(t, client, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, UpdatesOnly: true,
		Subscription: []*gpb.Subscription{{Path: path("veth1", "oper-status", 4), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(20 * time.Millisecond)}}})
	next(t, stream)     // sync
	ports.set(2, false) // not sampled, and SAMPLE does not follow changes
	for i := 0; i < 3; i++ {
		if got := leavesOf(next(t, stream).GetUpdate().GetUpdate()); !equal(got, []string{"veth1 oper-status=UP"}) {
			t.Fatalf("sample %d: %q", i, got)
		}
	}
}

func TestOnceAndPoll(t *testing.T) {
	client, ports := serve(t)
	once := subscribe(t, client, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE,
		Subscription: []*gpb.Subscription{{Path: path("*", "ifindex", 4)}}})
	if got := leavesOf(next(t, once).GetUpdate().GetUpdate()); !equal(got, []string{"veth1 ifindex=1", "veth2 ifindex=2"}) {
		t.Fatalf("ONCE: %q", got)
	}
	if !next(t, once).GetSyncResponse() {
		t.Fatal("ONCE: no sync response")
	}
	if _, err := once.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("ONCE: the stream should end after the sync response, got %v", err)
	}

	poll := subscribe(t, client, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_POLL,
		Subscription: []*gpb.Subscription{{Path: path("veth1", "oper-status", 4)}}})
	next(t, poll)
	next(t, poll)
	ports.set(1, false)
	if err := poll.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}); err != nil {
		t.Fatal(err)
	}
	if got := leavesOf(next(t, poll).GetUpdate().GetUpdate()); !equal(got, []string{"veth1 oper-status=DOWN"}) {
		t.Fatalf("POLL: %q", got)
	}
}

func TestBadSubscriptions(t *testing.T) {
	cases := []struct {
		name string
		req  *gpb.SubscribeRequest
		code codes.Code
	}{
		{"a poll first", &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}, codes.InvalidArgument},
		{"no subscription", &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{}}}, codes.InvalidArgument},
		{"outside the model", &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
			Subscription: []*gpb.Subscription{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "components"}}}}}}}}, codes.NotFound},
	}
	client, _ := serve(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stream, err := client.Subscribe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(c.req); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			if status.Code(err) != c.code {
				t.Fatalf("got %v, want %v", err, c.code)
			}
		})
	}
}
