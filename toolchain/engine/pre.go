package engine

// The packet replication engine: multicast groups and clone sessions.

import (
	"sort"
	"sync"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

type pre struct {
	mu       sync.RWMutex
	groups   map[uint32][]pipeline.Replica
	sessions map[uint32]*pipeline.CloneSession
}

func newPRE() *pre {
	return &pre{groups: map[uint32][]pipeline.Replica{}, sessions: map[uint32]*pipeline.CloneSession{}}
}

func (r *pre) setGroup(g uint32, reps []pipeline.Replica) error {
	if g == 0 {
		return errf(CodeInvalidArgument, "multicast group 0 means no multicast")
	}
	seen := map[pipeline.Replica]bool{}
	for _, x := range reps {
		if seen[x] {
			return errf(CodeInvalidArgument, "duplicate replica (port %d, rid %d)", x.Port, x.Rid)
		}
		seen[x] = true
	}
	cp := append([]pipeline.Replica(nil), reps...)
	r.mu.Lock()
	r.groups[g] = cp
	r.mu.Unlock()
	return nil
}

func (r *pre) deleteGroup(g uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.groups[g]; !ok {
		return errf(CodeNotFound, "no multicast group %d", g)
	}
	delete(r.groups, g)
	return nil
}

func (r *pre) group(g uint32) ([]pipeline.Replica, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reps, ok := r.groups[g]
	return append([]pipeline.Replica(nil), reps...), ok
}

// replicas is the packet-path read: the returned slice is never mutated
// (setGroup installs a fresh one), so no copy is needed.
func (r *pre) replicas(g uint32) []pipeline.Replica {
	r.mu.RLock()
	reps := r.groups[g]
	r.mu.RUnlock()
	return reps
}

func (r *pre) groupIDs() []uint32 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]uint32, 0, len(r.groups))
	for g := range r.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (r *pre) setSession(id uint32, s pipeline.CloneSession) error {
	if s.TruncateLength < 0 {
		return errf(CodeInvalidArgument, "negative truncation length")
	}
	cp := s
	cp.Replicas = append([]pipeline.Replica(nil), s.Replicas...)
	r.mu.Lock()
	r.sessions[id] = &cp
	r.mu.Unlock()
	return nil
}

func (r *pre) deleteSession(id uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sessions[id]; !ok {
		return errf(CodeNotFound, "no clone session %d", id)
	}
	delete(r.sessions, id)
	return nil
}

func (r *pre) session(id uint32) (pipeline.CloneSession, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.sessions[id]
	if !ok {
		return pipeline.CloneSession{}, false
	}
	cp := *s
	cp.Replicas = append([]pipeline.Replica(nil), s.Replicas...)
	return cp, true
}

func (r *pre) sessionRef(id uint32) *pipeline.CloneSession {
	r.mu.RLock()
	s := r.sessions[id]
	r.mu.RUnlock()
	return s
}

func (r *pre) sessionIDs() []uint32 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]uint32, 0, len(r.sessions))
	for g := range r.sessions {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
