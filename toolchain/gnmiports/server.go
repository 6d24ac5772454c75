// Package gnmiports serves the switch's ports over gNMI: the OpenConfig
// interface leaves a controller needs to follow its links, as Stratum
// serves them and as P4Runtime controllers (ONOS, finsy) subscribe to them.
//
// The model is read-only and small: for every data port,
//
//	/interfaces/interface[name=IFACE]/state/name         string
//	/interfaces/interface[name=IFACE]/state/ifindex      uint   (the P4 port number)
//	/interfaces/interface[name=IFACE]/state/id           uint   (the P4 port number)
//	/interfaces/interface[name=IFACE]/state/oper-status  "UP" | "DOWN"
//
// ifindex carries the P4 port number, not the kernel's index: a controller
// takes it as the port's id in P4Runtime (finsy's SwitchPort.id does).
// Get and Subscribe (ONCE, POLL, STREAM with ON_CHANGE, TARGET_DEFINED or
// SAMPLE) are served; Set is refused (the ports are configured on the
// command line).
package gnmiports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrapin/terrapin/toolchain/device"
)

// Version is the gNMI specification version the service follows.
const Version = "0.10.0"

// Ports is what the service reads: the device's ports and their changes.
type Ports interface {
	Ports() []device.PortState
	WatchPorts(fn func(device.PortState)) (cancel func())
}

// minSample bounds how often a SAMPLE subscription may ask to be sent the
// ports (a zero interval means "as the target chooses": this).
const minSample = 10 * time.Millisecond

// pendingChanges bounds the changes a slow subscriber may have waiting;
// past it the subscription ends with ResourceExhausted rather than skip a
// change silently.
const pendingChanges = 4096

// Server is the gNMI service of one switch.
type Server struct {
	gpb.UnimplementedGNMIServer
	ports Ports
	log   *slog.Logger
}

// New serves ports; log may be nil.
func New(ports Ports, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{ports: ports, log: log}
}

// Register adds the service to g.
func (s *Server) Register(g grpc.ServiceRegistrar) { gpb.RegisterGNMIServer(g, s) }

// Capabilities names the model and the encodings served.
func (s *Server) Capabilities(context.Context, *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	return &gpb.CapabilityResponse{
		SupportedModels: []*gpb.ModelData{{
			Name: "openconfig-interfaces", Organization: "OpenConfig working group", Version: "2.5.0",
		}},
		SupportedEncodings: encodings,
		GNMIVersion:        Version,
	}, nil
}

// The leaves are scalars, the same in every encoding.
var encodings = []gpb.Encoding{gpb.Encoding_PROTO, gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_ASCII}

func checkEncoding(e gpb.Encoding) error {
	for _, ok := range encodings {
		if e == ok {
			return nil
		}
	}
	return status.Errorf(codes.Unimplemented, "encoding %v is not served (PROTO, JSON, JSON_IETF, ASCII are)", e)
}

// Get returns every leaf under each requested path.
func (s *Server) Get(_ context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	if err := checkEncoding(req.GetEncoding()); err != nil {
		return nil, err
	}
	if t := req.GetType(); t == gpb.GetRequest_CONFIG {
		return nil, status.Error(codes.NotFound, "no configuration leaves are served (the ports are read-only state)")
	}
	if len(req.GetPath()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "GetRequest names no path")
	}
	ports := s.ports.Ports()
	now := time.Now().UnixNano()
	resp := &gpb.GetResponse{}
	for _, p := range req.GetPath() {
		q, err := parseQuery(req.GetPrefix(), p)
		if err != nil {
			return nil, err
		}
		var ups []*gpb.Update
		for _, port := range ports {
			ups = append(ups, q.updates(port)...)
		}
		if len(ups) == 0 && !q.wildcard() {
			// A path naming a port that is not there; a wildcard that matches no port (a
			// switch started without ports) is an empty answer, which finsy expects.
			return nil, status.Errorf(codes.NotFound, "no data at %s", q)
		}
		resp.Notification = append(resp.Notification, &gpb.Notification{Timestamp: now, Update: ups})
	}
	return resp, nil
}

// Set is refused: nothing here is configuration.
func (s *Server) Set(context.Context, *gpb.SetRequest) (*gpb.SetResponse, error) {
	return nil, status.Error(codes.Unimplemented, "Set is not served: the ports are configured on the switch's command line")
}

// Subscribe serves one subscription list (gNMI specification §3.5).
func (s *Server) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	list := first.GetSubscribe()
	if list == nil {
		return status.Error(codes.InvalidArgument, "the first SubscribeRequest must carry a SubscriptionList")
	}
	if err := checkEncoding(list.GetEncoding()); err != nil {
		return err
	}
	if len(list.GetSubscription()) == 0 {
		return status.Error(codes.InvalidArgument, "SubscriptionList has no subscription")
	}
	sub := &subscription{stream: stream, list: list}
	for _, one := range list.GetSubscription() {
		q, err := parseQuery(list.GetPrefix(), one.GetPath())
		if err != nil {
			return err
		}
		sub.queries = append(sub.queries, subQuery{query: q, mode: one.GetMode(), sample: time.Duration(one.GetSampleInterval())})
	}
	switch list.GetMode() {
	case gpb.SubscriptionList_ONCE:
		return sub.sendAll(s.ports.Ports(), true)
	case gpb.SubscriptionList_POLL:
		return s.poll(sub)
	case gpb.SubscriptionList_STREAM:
		return s.stream(sub)
	}
	return status.Errorf(codes.InvalidArgument, "subscription list mode %v is unknown", list.GetMode())
}

func (s *Server) poll(sub *subscription) error {
	if err := sub.sendAll(s.ports.Ports(), true); err != nil {
		return err
	}
	for {
		req, err := sub.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if req.GetPoll() == nil {
			return status.Error(codes.InvalidArgument, "a POLL subscription takes only Poll requests after its list")
		}
		if err := sub.sendAll(s.ports.Ports(), true); err != nil {
			return err
		}
	}
}

func (s *Server) stream(sub *subscription) error {
	ctx := sub.stream.Context()
	// Changes are queued before the first state is read, so that none falls
	// between the two.
	changes := make(chan device.PortState, pendingChanges)
	overflow := make(chan struct{})
	var once sync.Once
	cancel := s.ports.WatchPorts(func(p device.PortState) {
		select {
		case changes <- p:
		default:
			once.Do(func() { close(overflow) })
		}
	})
	defer cancel()
	// The client may only close its side now; anything else it sends is an error.
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := sub.stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if req.GetPoll() != nil || req.GetSubscribe() != nil {
				recvErr <- status.Error(codes.InvalidArgument, "a STREAM subscription takes no further requests")
				return
			}
		}
	}()
	if !sub.list.GetUpdatesOnly() {
		if err := sub.sendAll(s.ports.Ports(), false); err != nil {
			return err
		}
	}
	if err := sub.stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}}); err != nil {
		return err
	}
	sample := sub.sampleEvery()
	var tick <-chan time.Time
	if sample > 0 {
		t := time.NewTicker(sample)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil // the client is done sending; it may still read, but nothing waits for it
			}
			return err
		case <-overflow:
			return status.Errorf(codes.ResourceExhausted, "more than %d port changes waited for this subscriber", pendingChanges)
		case p := <-changes:
			if err := sub.sendChange(p); err != nil {
				return err
			}
		case <-tick:
			if err := sub.sendSamples(s.ports.Ports()); err != nil {
				return err
			}
		}
	}
}

type subQuery struct {
	query
	mode   gpb.SubscriptionMode
	sample time.Duration
}

type subscription struct {
	stream  gpb.GNMI_SubscribeServer
	list    *gpb.SubscriptionList
	queries []subQuery
}

// sampleEvery is the shortest interval of the SAMPLE subscriptions, 0 if none.
func (s *subscription) sampleEvery() time.Duration {
	var every time.Duration
	for _, q := range s.queries {
		if q.mode != gpb.SubscriptionMode_SAMPLE {
			continue
		}
		d := max(q.sample, minSample)
		if every == 0 || d < every {
			every = d
		}
	}
	return every
}

func (s *subscription) send(ups []*gpb.Update) error {
	if len(ups) == 0 {
		return nil
	}
	n := &gpb.Notification{Timestamp: time.Now().UnixNano(), Update: ups}
	if t := s.list.GetPrefix().GetTarget(); t != "" {
		n.Prefix = &gpb.Path{Target: t}
	}
	return s.stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: n}})
}

// sendAll sends every subscribed leaf (then the sync response, if sync).
func (s *subscription) sendAll(ports []device.PortState, sync bool) error {
	var ups []*gpb.Update
	for _, port := range ports {
		for _, q := range s.queries {
			ups = append(ups, q.updates(port)...)
		}
	}
	if err := s.send(ups); err != nil {
		return err
	}
	if sync {
		return s.stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}})
	}
	return nil
}

// sendChange sends the leaves a port's link change touches to the
// subscriptions that follow changes (SAMPLE ones see it at their next tick).
func (s *subscription) sendChange(port device.PortState) error {
	var ups []*gpb.Update
	for _, q := range s.queries {
		if q.mode == gpb.SubscriptionMode_SAMPLE {
			continue
		}
		for _, u := range q.updates(port) {
			if leafOf(u.GetPath()) == "oper-status" {
				ups = append(ups, u)
			}
		}
	}
	return s.send(ups)
}

func (s *subscription) sendSamples(ports []device.PortState) error {
	var ups []*gpb.Update
	for _, port := range ports {
		for _, q := range s.queries {
			if q.mode == gpb.SubscriptionMode_SAMPLE {
				ups = append(ups, q.updates(port)...)
			}
		}
	}
	return s.send(ups)
}

func leafOf(p *gpb.Path) string {
	elems := p.GetElem()
	if len(elems) == 0 {
		return ""
	}
	return elems[len(elems)-1].GetName()
}

// ---- the model --------------------------------------------------------------------------

// leaves are the state leaves of one interface, in the order they are sent.
var leaves = []string{"name", "ifindex", "id", "oper-status"}

func leafValue(leaf string, p device.PortState) *gpb.TypedValue {
	switch leaf {
	case "name":
		return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: p.Name}}
	case "ifindex", "id":
		return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: uint64(p.Number)}}
	case "oper-status":
		v := "DOWN"
		if p.Up {
			v = "UP"
		}
		return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: v}}
	}
	return nil
}

func leafPath(leaf string, p device.PortState) *gpb.Path {
	return &gpb.Path{Elem: []*gpb.PathElem{
		{Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"name": p.Name}},
		{Name: "state"},
		{Name: leaf},
	}}
}

// query is a requested path (prefix joined) against the model:
// interfaces / interface[name] / state / leaf, any of them a wildcard "*"
// and a shorter path meaning everything under it.
type query struct {
	text string
	elem []*gpb.PathElem
}

func (q query) String() string { return q.text }

func parseQuery(prefix, path *gpb.Path) (query, error) {
	if len(path.GetElement()) > 0 || len(prefix.GetElement()) > 0 {
		return query{}, status.Error(codes.InvalidArgument, "path uses the deprecated string elements; use PathElem (gNMI 0.4.0 and later)")
	}
	for _, o := range []string{prefix.GetOrigin(), path.GetOrigin()} {
		if o != "" && o != "openconfig" {
			return query{}, status.Errorf(codes.NotFound, "origin %q is not served (openconfig is)", o)
		}
	}
	elem := append(append([]*gpb.PathElem{}, prefix.GetElem()...), path.GetElem()...)
	q := query{elem: elem, text: pathText(elem)}
	model := []string{"interfaces", "interface", "state", ""}
	if len(elem) > len(model) {
		return q, status.Errorf(codes.NotFound, "no data at %s: the model ends at a leaf of interfaces/interface/state", q)
	}
	for i, e := range elem {
		name := e.GetName()
		if name == "..." {
			return q, status.Errorf(codes.Unimplemented, "%s: the multi-level wildcard is not served", q)
		}
		if name == "*" {
			continue
		}
		if i < 3 && name != model[i] {
			return q, status.Errorf(codes.NotFound, "no data at %s: %q is not in the model (interfaces/interface/state/...)", q, name)
		}
		if i == 3 && leafValue(name, device.PortState{}) == nil {
			return q, status.Errorf(codes.NotFound, "no data at %s: leaf %q is not served (%v are)", q, name, leaves)
		}
		for k := range e.GetKey() {
			if i != 1 || k != "name" {
				return q, status.Errorf(codes.NotFound, "no data at %s: key %q is not in the model (interface[name])", q, k)
			}
		}
	}
	return q, nil
}

// wildcard reports whether q may match any port (no interface name, or "*").
func (q query) wildcard() bool {
	if len(q.elem) < 2 {
		return true
	}
	name, ok := q.elem[1].GetKey()["name"]
	return !ok || name == "*" || q.elem[1].GetName() == "*"
}

// updates are the leaves of port under q.
func (q query) updates(port device.PortState) []*gpb.Update {
	if len(q.elem) >= 2 {
		if name, ok := q.elem[1].GetKey()["name"]; ok && name != "*" && name != port.Name {
			return nil
		}
	}
	var ups []*gpb.Update
	for _, leaf := range leaves {
		if len(q.elem) == 4 && q.elem[3].GetName() != "*" && q.elem[3].GetName() != leaf {
			continue
		}
		ups = append(ups, &gpb.Update{Path: leafPath(leaf, port), Val: leafValue(leaf, port)})
	}
	return ups
}

func pathText(elem []*gpb.PathElem) string {
	if len(elem) == 0 {
		return "/"
	}
	out := ""
	for _, e := range elem {
		out += "/" + e.GetName()
		for k, v := range e.GetKey() {
			out += fmt.Sprintf("[%s=%s]", k, v)
		}
	}
	return out
}
