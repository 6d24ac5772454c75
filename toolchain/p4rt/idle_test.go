package p4rt_test

import (
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

const ageingProgram = "testdata/p4rt_ageing.p4"

// ageingHarness is a harness on the ageing program whose primary stream
// the test reads (idle timeout notifications go there).
type ageingHarness struct {
	*harness
	stream      *session
	hosts       uint32
	routes      uint32
	forward     uint32
	notifyAfter time.Duration // the longest a notification may take past its due time
}

func newAgeingHarness(t *testing.T) *ageingHarness {
	h := newHarnessFor(t, ageingProgram)
	h.primary = &p4v1.Uint128{High: 1}
	s, a := h.open(h.primary, "")
	if codes.Code(a.GetStatus().GetCode()) != codes.OK {
		t.Fatalf("not primary: %v", a)
	}
	if err := h.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, h.config()); err != nil {
		t.Fatalf("SetForwardingPipelineConfig: %v", err)
	}
	return &ageingHarness{harness: h, stream: s,
		hosts: h.tableID("AgeingIngress.hosts"), routes: h.tableID("AgeingIngress.routes"),
		forward: h.actionID("AgeingIngress.forward"), notifyAfter: 5 * time.Second}
}

func mac(last byte) []byte { return []byte{0, 0, 0, 0, 0, last} }

// host is an entry of hosts for source MAC ..:last.
func (a *ageingHarness) host(last byte, ttl time.Duration, cookie uint64) *p4v1.TableEntry {
	te := entry(a.hosts, 0, call(a.forward, b(0, 2)), exact(1, mac(last)...))
	te.IdleTimeoutNs, te.ControllerMetadata = int64(ttl), cookie
	return te
}

// elapsed reads an entry's time since its last hit.
func (a *ageingHarness) elapsed(t *testing.T, last byte) time.Duration {
	t.Helper()
	q := entry(a.hosts, 0, nil, exact(1, mac(last)...))
	q.TimeSinceLastHit = &p4v1.TableEntry_IdleTimeout{}
	got, err := a.read(tableEntity(q))
	if err != nil || len(got) != 1 {
		t.Fatalf("reading host %d: %v (%d entities)", last, err, len(got))
	}
	te := got[0].GetTableEntry()
	if te.GetTimeSinceLastHit() == nil {
		t.Fatalf("host %d: time_since_last_hit asked for, not returned", last)
	}
	return time.Duration(te.GetTimeSinceLastHit().GetElapsedNs())
}

// hit sends a frame from source MAC ..:last through the pipeline.
func (a *ageingHarness) hit(t *testing.T, last byte) {
	t.Helper()
	frame := append(append(mac(0xee), mac(last)...), 0x88, 0xb5)
	if err := a.target.Send(1, frame); err != nil {
		t.Fatal(err)
	}
}

// notified waits for the next idle timeout notification and returns its
// entries by source MAC's last byte.
func (a *ageingHarness) notified(t *testing.T, within time.Duration) (map[byte]*p4v1.TableEntry, time.Time) {
	t.Helper()
	m := a.stream.nextWithin(t, within, func(m *p4v1.StreamMessageResponse) bool { return m.GetIdleTimeoutNotification() != nil })
	if m == nil {
		return nil, time.Time{}
	}
	n := m.GetIdleTimeoutNotification()
	if len(n.GetTableEntry()) == 0 {
		t.Fatal("a notification with no entries (the spec forbids it)")
	}
	out := map[byte]*p4v1.TableEntry{}
	for _, te := range n.GetTableEntry() {
		v := te.GetMatch()[0].GetExact().GetValue() // canonical: the leading zeros dropped
		out[v[len(v)-1]] = te
	}
	return out, time.Unix(0, n.GetTimestamp())
}

func TestIdleTimeoutRequests(t *testing.T) {
	a := newAgeingHarness(t)
	onRoutes := entry(a.routes, 0, call(a.forward, b(0, 1)), exact(1, mac(1)...))
	onRoutes.IdleTimeoutNs = int64(time.Second)
	negative := a.host(1, 0, 0)
	negative.IdleTimeoutNs = -1
	withElapsed := a.host(1, time.Second, 0)
	withElapsed.TimeSinceLastHit = &p4v1.TableEntry_IdleTimeout{ElapsedNs: 5}
	for _, c := range []struct {
		name string
		u    *p4v1.Update
		want codes.Code
	}{
		{"timeout on a table without idle timeout", insert(onRoutes), codes.InvalidArgument},
		{"negative timeout", insert(negative), codes.InvalidArgument},
		{"time_since_last_hit in a write", insert(withElapsed), codes.InvalidArgument},
		{"timeout below the device's millisecond", insert(a.host(2, 1500*time.Microsecond, 0)), codes.OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := a.write(c.u)
			if err != nil || got[0] != c.want {
				t.Errorf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}

	withElapsedQuery := func(te *p4v1.TableEntry) *p4v1.Entity {
		te.TimeSinceLastHit = &p4v1.TableEntry_IdleTimeout{}
		return tableEntity(te)
	}
	for _, c := range []struct {
		name string
		q    *p4v1.Entity
	}{
		{"a table without idle timeout", withElapsedQuery(&p4v1.TableEntry{TableId: a.routes})},
		{"every table (a wildcard names routes too)", withElapsedQuery(&p4v1.TableEntry{})},
		{"the default entry", withElapsedQuery(&p4v1.TableEntry{TableId: a.hosts, IsDefaultAction: true})},
	} {
		t.Run("reading time_since_last_hit of "+c.name, func(t *testing.T) {
			if _, err := a.read(c.q); readErrorCode(err) != codes.InvalidArgument {
				t.Errorf("got %v, want INVALID_ARGUMENT", err)
			}
		})
	}

	// The timeout reads back exactly as written (the device keeps it
	// rounded up to a millisecond), and not at all where it is unasked.
	got, err := a.read(tableEntity(&p4v1.TableEntry{TableId: a.hosts}))
	if err != nil || len(got) != 1 {
		t.Fatalf("read: %v, %d entities", err, len(got))
	}
	te := got[0].GetTableEntry()
	if te.GetIdleTimeoutNs() != int64(1500*time.Microsecond) || te.GetTimeSinceLastHit() != nil {
		t.Errorf("read back idle_timeout_ns %d, time_since_last_hit %v; want 1500000 and none", te.GetIdleTimeoutNs(), te.GetTimeSinceLastHit())
	}
}

func TestIdleTimeoutNotifications(t *testing.T) {
	const ttl = 250 * time.Millisecond
	a := newAgeingHarness(t)
	written := time.Now()
	a.mustWrite(insert(a.host(1, ttl, 77)), insert(a.host(2, 0, 0)), insert(a.host(3, time.Hour, 0)))

	// Host 1 is notified once idle for its timeout, with the fields the
	// spec asks for; hosts 2 (no timeout) and 3 (an hour) are not.
	first, at := a.notified(t, ttl+a.notifyAfter)
	if first == nil {
		t.Fatal("no idle timeout notification")
	}
	if since := time.Since(written); since < ttl {
		t.Errorf("notified %v after the entry was written, before its timeout %v", since, ttl)
	}
	if len(first) != 1 || first[1] == nil {
		t.Fatalf("notified %v, want host 1 alone", first)
	}
	want := entry(a.hosts, 0, nil, exact(1, 1)) // its key in canonical form (the spec's)
	want.IdleTimeoutNs, want.ControllerMetadata = int64(ttl), 77
	got := proto.Clone(first[1]).(*p4v1.TableEntry)
	got.Action = nil // other fields may be set (the spec), and the action is
	if !proto.Equal(got, want) {
		t.Errorf("notification entry %v, want %v", got, want)
	}

	// Notifying restarts the entry's timer (a second notification after
	// another timeout) but not its idle time, which a read reports.
	second, at2 := a.notified(t, ttl+a.notifyAfter)
	if second[1] == nil {
		t.Fatal("no second notification while host 1 stays idle")
	}
	if gap := at2.Sub(at); gap < ttl {
		t.Errorf("second notification %v after the first, within the timeout %v", gap, ttl)
	}
	idle := a.elapsed(t, 1)
	if idle < 2*ttl {
		t.Errorf("time_since_last_hit %v after two notifications, want at least %v", idle, 2*ttl)
	}
	if e := a.elapsed(t, 2); e < 2*ttl {
		t.Errorf("host 2 (no timeout): time_since_last_hit %v, want its idle time, at least %v", e, 2*ttl)
	}

	// A hit resets the idle time.
	a.hit(t, 1)
	if e := a.elapsed(t, 1); e >= idle {
		t.Errorf("time_since_last_hit %v after a hit, was %v before", e, idle)
	}

	// A MODIFY with the same timeout keeps the idle time running; with a
	// new one it starts again.
	time.Sleep(20 * time.Millisecond)
	before := a.elapsed(t, 1)
	a.mustWrite(modify(a.host(1, ttl, 77)))
	kept := a.elapsed(t, 1)
	if kept < before {
		t.Errorf("a MODIFY keeping the timeout reset the idle time: %v, then %v", before, kept)
	}
	time.Sleep(50 * time.Millisecond)
	a.mustWrite(modify(a.host(1, 2*ttl, 78)))
	if e := a.elapsed(t, 1); e >= kept {
		t.Errorf("a MODIFY with a new timeout kept the idle time: %v, was %v", e, kept)
	}
	n, _ := a.notified(t, 2*ttl+a.notifyAfter)
	if n[1].GetIdleTimeoutNs() != int64(2*ttl) || n[1].GetControllerMetadata() != 78 {
		t.Errorf("after the MODIFY: notified %v, want the new timeout and cookie", n[1])
	}

	// A deleted entry is not notified again.
	a.mustWrite(remove(a.host(1, 0, 0)))
	for deadline := time.Now().Add(4 * ttl); time.Now().Before(deadline); {
		if n, _ := a.notified(t, time.Until(deadline)); n[1] != nil {
			t.Fatalf("host 1 notified after it was deleted: %v", n[1])
		}
	}
}

// The entries a RECONCILE_AND_COMMIT keeps keep their timeouts.
func TestIdleTimeoutReconciled(t *testing.T) {
	a := newAgeingHarness(t)
	a.mustWrite(insert(a.host(1, 200*time.Millisecond, 5)))
	if err := a.setPipeline(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, a.config()); err != nil {
		t.Fatal(err)
	}
	got, err := a.read(tableEntity(&p4v1.TableEntry{TableId: a.hosts}))
	if err != nil || len(got) != 1 || got[0].GetTableEntry().GetIdleTimeoutNs() != int64(200*time.Millisecond) {
		t.Fatalf("after reconciling: %v, %v", got, err)
	}
	if n, _ := a.notified(t, a.notifyAfter); n[1] == nil {
		t.Error("no notification for the reconciled entry")
	}
}
