package p4rt

import (
	"sync"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// electionID is a P4Runtime Uint128; set is false for an unset id, which
// is lower than every id and never primary (spec §16.2.1).
type electionID struct {
	high, low uint64
	set       bool
}

func electionOf(u *p4v1.Uint128) electionID {
	if u == nil {
		return electionID{}
	}
	return electionID{high: u.GetHigh(), low: u.GetLow(), set: true}
}

// less orders ids; an unset id is below every set one.
func (a electionID) less(b electionID) bool {
	if a.set != b.set {
		return !a.set
	}
	if a.high != b.high {
		return a.high < b.high
	}
	return a.low < b.low
}

func (a electionID) proto() *p4v1.Uint128 {
	if !a.set {
		return nil
	}
	return &p4v1.Uint128{High: a.high, Low: a.low}
}

// maxControllersPerRole bounds the live streams of one (device, role):
// each holds a 1024-message queue, and the spec lets the server refuse
// more with RESOURCE_EXHAUSTED (§5.3 rule 1.4).
const maxControllersPerRole = 64

// controller is one StreamChannel that has sent a valid arbitration.
type controller struct {
	role     string
	election electionID
	out      *streamOut
}

// roleState tracks the controllers of one (device, role). The primary is
// the live controller whose id equals the highest id ever seen (§5).
type roleState struct {
	live    map[*controller]bool
	highest electionID
	primary *controller
}

// arbiter implements client arbitration for the server's single device.
type arbiter struct {
	mu    sync.Mutex
	roles map[string]*roleState
}

func newArbiter() *arbiter { return &arbiter{roles: map[string]*roleState{}} }

func (a *arbiter) role(name string) *roleState {
	r, ok := a.roles[name]
	if !ok {
		r = &roleState{live: map[*controller]bool{}}
		a.roles[name] = r
	}
	return r
}

// notice builds the arbitration response for c (spec §5.4).
func (r *roleState) notice(deviceID uint64, c *controller) *p4v1.StreamMessageResponse {
	u := &p4v1.MasterArbitrationUpdate{DeviceId: deviceID, ElectionId: r.highest.proto()}
	if c.role != "" {
		u.Role = &p4v1.Role{Name: c.role}
	}
	switch {
	case r.primary == c:
		u.Status = &status.Status{Code: int32(codes.OK), Message: "primary"}
	case r.primary != nil:
		u.Status = &status.Status{Code: int32(codes.AlreadyExists), Message: "backup: another controller is primary"}
	default:
		u.Status = &status.Status{Code: int32(codes.NotFound), Message: "backup: no primary"}
	}
	return &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Arbitration{Arbitration: u}}
}

// update applies an arbitration message from stream c (nil on the stream's
// first one) and returns the controller record and the notices to send.
// A non-nil error terminates the stream with that code (spec §5.3).
func (a *arbiter) update(deviceID uint64, c *controller, out *streamOut, m *p4v1.MasterArbitrationUpdate) (*controller, []notice, error) {
	if m.GetDeviceId() != deviceID {
		if c == nil {
			return nil, nil, errorf(codes.NotFound, "unknown device id %d (this switch is %d)", m.GetDeviceId(), deviceID)
		}
		return nil, nil, errorf(codes.FailedPrecondition, "device id %d differs from this stream's %d", m.GetDeviceId(), deviceID)
	}
	roleName := m.GetRole().GetName()
	if m.GetRole().GetConfig() != nil {
		return nil, nil, invalid("role config is not supported: every role has full pipeline access")
	}
	if c != nil && roleName != c.role {
		return nil, nil, errorf(codes.FailedPrecondition, "role %q differs from this stream's role %q; open a new stream", roleName, c.role)
	}
	id := electionOf(m.GetElectionId())

	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.role(roleName)
	if id.set {
		for other := range r.live {
			if other != c && other.election == id {
				return nil, nil, invalid("election id (%d,%d) is already used by another controller", id.high, id.low)
			}
		}
	}
	if c == nil {
		if len(r.live) >= maxControllersPerRole {
			return nil, nil, errorf(codes.ResourceExhausted, "role %q already has %d controllers", roleName, maxControllersPerRole)
		}
		c = &controller{role: roleName, out: out}
		r.live[c] = true
	}
	wasPrimary := r.primary == c
	c.election = id
	var notes []notice
	all := func() {
		for other := range r.live {
			notes = append(notes, notice{to: other.out, msg: r.notice(deviceID, other)})
		}
	}
	if id.set && !id.less(r.highest) {
		prev := r.primary
		r.highest = id
		r.primary = c
		if prev == nil || prev == c {
			if prev == nil {
				all()
			} else {
				notes = append(notes, notice{to: c.out, msg: r.notice(deviceID, c)})
			}
		} else {
			// Others first, then the new primary (§5.3 steps 2 and 5).
			for other := range r.live {
				if other != c {
					notes = append(notes, notice{to: other.out, msg: r.notice(deviceID, other)})
				}
			}
			notes = append(notes, notice{to: c.out, msg: r.notice(deviceID, c)})
		}
		return c, notes, nil
	}
	if wasPrimary {
		r.primary = nil
		all()
	} else {
		notes = append(notes, notice{to: c.out, msg: r.notice(deviceID, c)})
	}
	return c, notes, nil
}

// leave forgets a closed stream; if it was primary, the others learn that
// there is none (§5).
func (a *arbiter) leave(deviceID uint64, c *controller) []notice {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.role(c.role)
	delete(r.live, c)
	if r.primary != c {
		return nil
	}
	r.primary = nil
	var notes []notice
	for other := range r.live {
		notes = append(notes, notice{to: other.out, msg: r.notice(deviceID, other)})
	}
	return notes
}

// isPrimary reports whether (role, election id) names the live primary.
func (a *arbiter) isPrimary(role string, id electionID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.roles[role]
	return ok && r.primary != nil && id.set && r.primary.election == id
}

// knownRole reports whether a controller ever arbitrated for role (the
// default role always exists).
func (a *arbiter) knownRole(role string) bool {
	if role == "" {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.roles[role]
	return ok
}

// primaryOf reports whether stream c is currently a primary.
func (a *arbiter) primaryOf(c *controller) bool {
	if c == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.roles[c.role].primary == c
}

// primaries returns the outputs of every role's primary: PacketIn and
// digests go to them (every role has full pipeline access).
func (a *arbiter) primaries() []*streamOut {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*streamOut
	for _, r := range a.roles {
		if r.primary != nil {
			out = append(out, r.primary.out)
		}
	}
	return out
}

type notice struct {
	to  *streamOut
	msg *p4v1.StreamMessageResponse
}
