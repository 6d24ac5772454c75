package p4rt

import (
	"context"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// The spec suggests scanning every 10 ms; BMv2's ageing monitor sweeps
// once a second. A tenth of a second keeps a notification within 0.1 s
// of its timeout while costing a 2-vCPU switch nothing it would notice,
// and large tables stretch the pause so a scan never takes more than a
// twentieth of the control plane's time (or of the write lock's).
const (
	idleScanInterval = 100 * time.Millisecond
	idleScanShare    = 20
)

// idleNotifier tells the primary clients which entries sat idle for their
// idle_timeout_ns (IdleTimeoutNotification, spec "Table Idle Timeout
// Notification"). After notifying an entry it restarts the entry's timer,
// as the spec requires, by remembering when it did, not by touching the
// device: a read's time_since_last_hit stays the time since the last hit.
// While no entry has a timeout it sleeps until a write or a new pipeline
// wakes it, so a switch without timeouts has no timer running.
type idleNotifier struct {
	srv  *Server
	wake chan struct{}

	ps       *pipelineState                  // the pipeline notified refers to
	notified map[uint32]map[string]time.Time // table id → entry key → last notification
}

func newIdleNotifier(s *Server) *idleNotifier {
	return &idleNotifier{srv: s, wake: make(chan struct{}, 1)}
}

// poke makes the notifier look again (an entry may have been given a
// timeout). It never blocks.
func (n *idleNotifier) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *idleNotifier) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		start := time.Now()
		msg, timed := n.scan(start)
		if msg != nil {
			for _, o := range n.srv.arb.primaries() {
				o.send(msg, true) // the spec lets notifications be dropped under load
			}
		}
		if !timed {
			// Nothing can be due until a write or a pipeline wakes us.
			select {
			case <-ctx.Done():
				return
			case <-n.wake:
			}
		}
		// At most one scan per interval, however many writes wake us.
		timer.Reset(max(idleScanInterval, idleScanShare*time.Since(start)) - time.Since(start))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// scan finds the entries due a notification and builds one message for
// them all (nil: none); timed reports whether any entry has a timeout.
func (n *idleNotifier) scan(now time.Time) (msg *p4v1.StreamMessageResponse, timed bool) {
	s := n.srv
	s.mu.RLock()
	defer s.mu.RUnlock()
	ps := s.cur
	if ps == nil || !s.committed {
		n.ps, n.notified = nil, nil
		return nil, false
	}
	if ps != n.ps {
		n.ps, n.notified = ps, map[uint32]map[string]time.Time{}
	}
	var idle []*p4v1.TableEntry
	for _, id := range ps.schema.tableIDs {
		t, ts := ps.schema.tables[id], ps.tables[id]
		if !t.idleTimeout || t.missing || !ts.hasIdleTimeouts() {
			delete(n.notified, id)
			continue
		}
		timed = true
		due, err := n.dueEntries(ps, t, now)
		if err != nil {
			s.log.Warn("idle timeout scan: cannot read the table", "table", t.name, "error", messageOf(err))
			continue
		}
		idle = append(idle, due...)
	}
	if len(idle) == 0 {
		return nil, timed
	}
	return &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_IdleTimeoutNotification{
		IdleTimeoutNotification: &p4v1.IdleTimeoutNotification{TableEntry: idle, Timestamp: now.UnixNano()},
	}}, true
}

// dueEntries returns t's entries whose idle time, counted from their last
// hit or their last notification, whichever is later, reached their
// timeout, and records that they are notified now.
func (n *idleNotifier) dueEntries(ps *pipelineState, t *tableInfo, now time.Time) ([]*p4v1.TableEntry, error) {
	entries, err := ps.entries(t)
	if err != nil {
		return nil, err
	}
	before := n.notified[t.id]
	after := map[string]time.Time{}
	var due []*p4v1.TableEntry
	for _, e := range entries {
		if e.idleTimeoutNs == 0 {
			continue
		}
		ageing, err := ps.ageingOf(t, e)
		if err != nil {
			return nil, err
		}
		key := entryKey(e.match, e.priority)
		idle := ageing.SinceHit
		last, notifiedBefore := before[key]
		if notifiedBefore {
			idle = min(idle, now.Sub(last))
		}
		if idle < time.Duration(e.idleTimeoutNs) {
			if notifiedBefore {
				after[key] = last
			}
			continue
		}
		// The key fields, controller_metadata, metadata and
		// idle_timeout_ns are what the spec asks for; the action comes
		// along, as in a read.
		te, err := ps.entryProto(t, e, &p4v1.TableEntry{})
		if err != nil {
			return nil, err
		}
		due = append(due, te)
		after[key] = now
	}
	n.notified[t.id] = after
	return due, nil
}

// hasIdleTimeouts reports whether any of the table's entries was written
// with an idle timeout.
func (ts *tableState) hasIdleTimeouts() bool {
	for _, m := range ts.meta {
		if m.idleTimeoutNs != 0 {
			return true
		}
	}
	return false
}
