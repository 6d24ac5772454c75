package p4rt

import (
	"context"
	"errors"
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

// streamQueue is how many responses may wait for a slow client before
// PacketIn and digests to it are dropped (spec §16.5 allows dropping
// under load; arbitration notices are never dropped).
const streamQueue = 1024

// streamOut serializes the responses of one StreamChannel.
type streamOut struct {
	ch   chan *p4v1.StreamMessageResponse
	done <-chan struct{}
}

// send queues m; if droppable and the queue is full, m is dropped and
// send reports false.
func (o *streamOut) send(m *p4v1.StreamMessageResponse, droppable bool) bool {
	if droppable {
		select {
		case o.ch <- m:
			return true
		default:
			return false
		}
	}
	select {
	case o.ch <- m:
		return true
	case <-o.done:
		return false
	}
}

func deliver(notes []notice) {
	for _, n := range notes {
		n.to.send(n.msg, false)
	}
}

func streamError(code codes.Code, msg string, details any) *p4v1.StreamMessageResponse {
	e := &p4v1.StreamError{CanonicalCode: int32(code), Message: msg}
	switch d := details.(type) {
	case *p4v1.PacketOut:
		e.Details = &p4v1.StreamError_PacketOut{PacketOut: &p4v1.PacketOutError{PacketOut: d}}
	case *p4v1.DigestListAck:
		e.Details = &p4v1.StreamError_DigestListAck{DigestListAck: &p4v1.DigestListAckError{DigestListAck: d}}
	default:
		e.Details = &p4v1.StreamError_Other{Other: &p4v1.StreamOtherError{}}
	}
	return &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Error{Error: e}}
}

// StreamChannel runs one controller session: arbitration, PacketOut,
// digest acks (spec §16).
func (s *Server) StreamChannel(stream p4v1.P4Runtime_StreamChannelServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	out := &streamOut{ch: make(chan *p4v1.StreamMessageResponse, streamQueue), done: ctx.Done()}
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case m := <-out.ch:
				if err := stream.Send(m); err != nil {
					sendErr <- err
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()

	var me *controller
	defer func() {
		if me != nil {
			deliver(s.arb.leave(s.deviceID, me))
		}
	}()
	recvc := make(chan *p4v1.StreamMessageRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case recvc <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		var req *p4v1.StreamMessageRequest
		select {
		case req = <-recvc:
		case <-recvErr:
			return nil // client closed; not an error of ours
		case err := <-sendErr:
			return err
		case <-ctx.Done():
			return nil
		}
		if err := s.handleStreamMessage(&me, out, req); err != nil {
			// Arbitration failures end the stream with their code (§5.3).
			return rpcError(err)
		}
	}
}

func (s *Server) handleStreamMessage(me **controller, out *streamOut, req *p4v1.StreamMessageRequest) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("BUG: panic on a stream message", "panic", fmt.Sprint(r))
			out.send(streamError(codes.Internal, fmt.Sprintf("internal error: %v", r), nil), true)
			err = nil
		}
	}()
	switch x := req.GetUpdate().(type) {
	case *p4v1.StreamMessageRequest_Arbitration:
		c, notes, err := s.arb.update(s.deviceID, *me, out, x.Arbitration)
		if err != nil {
			return err
		}
		*me = c
		deliver(notes)
	case *p4v1.StreamMessageRequest_Packet:
		s.packetOut(*me, out, x.Packet)
	case *p4v1.StreamMessageRequest_DigestAck:
		if !s.arb.primaryOf(*me) {
			out.send(streamError(codes.PermissionDenied, "only the primary controller acknowledges digests", x.DigestAck), true)
			return nil
		}
		if err := s.digests.ack(x.DigestAck); err != nil {
			out.send(streamError(codeOf(err), messageOf(err), x.DigestAck), true)
		}
	case *p4v1.StreamMessageRequest_Other:
		out.send(streamError(codes.Unimplemented, "no architecture-specific stream messages are supported", nil), true)
	default:
		out.send(streamError(codes.InvalidArgument, "stream message has no update set", nil), true)
	}
	return nil
}

func (s *Server) packetOut(me *controller, out *streamOut, po *p4v1.PacketOut) {
	if !s.arb.primaryOf(me) {
		out.send(streamError(codes.PermissionDenied, "only the primary controller may send PacketOut", po), true)
		return
	}
	sch := s.io.Load()
	if sch == nil {
		out.send(streamError(codes.FailedPrecondition, "no forwarding pipeline config has been set", po), true)
		return
	}
	frame, err := encodePacketOut(sch.packetOut, po)
	if err != nil {
		out.send(streamError(codes.InvalidArgument, err.Error(), po), true)
		return
	}
	if err := s.target.InjectPacketOut(frame); err != nil {
		out.send(streamError(codes.Unavailable, "injecting the packet: "+err.Error(), po), true)
	}
}

// toController is the Target's controller sink: a frame the pipeline sent
// to the CPU port becomes a PacketIn to every primary. It runs on the
// device's goroutine, so it only decodes and queues.
func (s *Server) toController(frame []byte) {
	// The schema is read through an atomic pointer, not s.mu: a long Write
	// batch must not stall the device's goroutine.
	sch := s.io.Load()
	if sch == nil {
		return
	}
	pin, err := decodePacketIn(sch.packetIn, frame)
	if err != nil {
		if errors.As(err, new(*untranslatableError)) {
			s.untranslatable.warn(s.log, "dropping a CPU-port frame", "err", err)
		} else {
			s.log.Debug("dropping a CPU-port frame", "err", err)
		}
		return
	}
	m := &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Packet{Packet: pin}}
	for _, o := range s.arb.primaries() {
		o.send(m, true)
	}
}
