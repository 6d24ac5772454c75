package p4rt

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

func newOut() *streamOut {
	return &streamOut{ch: make(chan *p4v1.StreamMessageResponse, 16), done: make(chan struct{})}
}

// drain returns the arbitration status codes queued on o.
func drain(o *streamOut) []codes.Code {
	var out []codes.Code
	for {
		select {
		case m := <-o.ch:
			out = append(out, codes.Code(m.GetArbitration().GetStatus().GetCode()))
		default:
			return out
		}
	}
}

func arb(device uint64, role string, id *p4v1.Uint128) *p4v1.MasterArbitrationUpdate {
	m := &p4v1.MasterArbitrationUpdate{DeviceId: device, ElectionId: id}
	if role != "" {
		m.Role = &p4v1.Role{Name: role}
	}
	return m
}

func eid(low uint64) *p4v1.Uint128 { return &p4v1.Uint128{Low: low} }

// TestArbitration walks the §5 rules: highest election id is primary,
// notices go to the right clients with the right codes, and only the
// primary's (role, id) may write.
func TestArbitration(t *testing.T) {
	a := newArbiter()
	o1, o2, o3, o4 := newOut(), newOut(), newOut(), newOut()

	c1, notes, err := a.update(0, nil, o1, arb(0, "", eid(1)))
	if err != nil {
		t.Fatal(err)
	}
	deliver(notes)
	if got := drain(o1); len(got) != 1 || got[0] != codes.OK {
		t.Fatalf("first client notices %v, want [OK]", got)
	}
	if !a.isPrimary("", electionOf(eid(1))) || a.isPrimary("", electionOf(eid(2))) {
		t.Fatal("isPrimary wrong after the first client")
	}

	// A higher id takes over: the old primary learns first, then the new.
	c2, notes, err := a.update(0, nil, o2, arb(0, "", eid(5)))
	if err != nil {
		t.Fatal(err)
	}
	deliver(notes)
	if got := drain(o1); len(got) != 1 || got[0] != codes.AlreadyExists {
		t.Fatalf("old primary notices %v, want [ALREADY_EXISTS]", got)
	}
	if got := drain(o2); len(got) != 1 || got[0] != codes.OK {
		t.Fatalf("new primary notices %v, want [OK]", got)
	}
	if a.isPrimary("", electionOf(eid(1))) || !a.isPrimary("", electionOf(eid(5))) {
		t.Fatal("primary did not move to the higher election id")
	}

	// A lower id joins as backup; only it is told.
	_, notes, err = a.update(0, nil, o3, arb(0, "", eid(3)))
	if err != nil {
		t.Fatal(err)
	}
	deliver(notes)
	if got := drain(o3); len(got) != 1 || got[0] != codes.AlreadyExists {
		t.Fatalf("backup notices %v", got)
	}
	if got := append(drain(o1), drain(o2)...); len(got) != 0 {
		t.Fatalf("others were told about a backup: %v", got)
	}

	// Errors that end a stream.
	errTests := []struct {
		name string
		c    *controller
		m    *p4v1.MasterArbitrationUpdate
		code codes.Code
	}{
		{"wrong device on a new stream", nil, arb(9, "", eid(7)), codes.NotFound},
		{"wrong device on a live stream", c1, arb(9, "", eid(7)), codes.FailedPrecondition},
		{"election id in use", nil, arb(0, "", eid(5)), codes.InvalidArgument},
		{"role change", c1, arb(0, "other", eid(1)), codes.FailedPrecondition},
	}
	for _, tc := range errTests {
		if _, _, err := a.update(0, tc.c, o4, tc.m); codeOf(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}

	// An unset election id is never primary.
	_, notes, err = a.update(0, nil, o4, arb(0, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	deliver(notes)
	if got := drain(o4); len(got) != 1 || got[0] != codes.AlreadyExists {
		t.Fatalf("unset-id client notices %v", got)
	}

	// The primary leaves: everyone left hears there is no primary, and
	// a client below the highest id ever seen does not take over.
	deliver(a.leave(0, c2))
	for i, o := range []*streamOut{o1, o3, o4} {
		if got := drain(o); len(got) != 1 || got[0] != codes.NotFound {
			t.Errorf("client %d after primary left: %v, want [NOT_FOUND]", i, got)
		}
	}
	if a.isPrimary("", electionOf(eid(5))) {
		t.Fatal("a departed client is still primary")
	}
	// Re-electing with the same id as the highest makes c1 primary again.
	if _, notes, err = a.update(0, c1, o1, arb(0, "", eid(5))); err != nil {
		t.Fatal(err)
	}
	deliver(notes)
	if !a.isPrimary("", electionOf(eid(5))) || !a.primaryOf(c1) {
		t.Fatal("c1 did not become primary with the highest id")
	}

	// Roles are arbitrated separately.
	if _, _, err := a.update(0, nil, newOut(), arb(0, "r2", eid(1))); err != nil {
		t.Fatal(err)
	}
	if !a.isPrimary("r2", electionOf(eid(1))) || a.isPrimary("r2", electionOf(eid(5))) {
		t.Fatal("role r2 not arbitrated on its own")
	}
	if got := len(a.primaries()); got != 2 {
		t.Fatalf("%d primaries, want 2", got)
	}
}

func TestArbitrationStreamLimit(t *testing.T) {
	a := newArbiter()
	for i := 0; i < maxControllersPerRole; i++ {
		if _, _, err := a.update(0, nil, newOut(), arb(0, "", eid(uint64(i+1)))); err != nil {
			t.Fatalf("controller %d: %v", i, err)
		}
	}
	if _, _, err := a.update(0, nil, newOut(), arb(0, "", eid(1000))); codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("one controller too many: %v, want RESOURCE_EXHAUSTED", err)
	}
}
