package engine

// Entry handles: every table entry, whoever added it (P4Runtime, BMv2's
// Thrift runtime, the program's own entries), has a handle as BMv2's
// match units give them, so both control planes name the same entry the
// same way. A handle is an index (the lowest free one, as BMv2's
// HandleMgr hands them out) in its low 24 bits and the index's version in
// the high 8: deleting an entry bumps the version, so a stale handle is
// told apart from the entry that took its index later. Clearing a table
// forgets every index and version, as BMv2's reset does.

import (
	"container/heap"
	"errors"
	"sort"
	"sync/atomic"

	"github.com/terrapin/terrapin/toolchain/pipeline"
)

// Handle errors, matched with errors.Is: an index that holds no entry, and
// an index whose entry was deleted since the handle was given out.
var (
	ErrInvalidHandle = errors.New("invalid entry handle")
	ErrExpiredHandle = errors.New("expired entry handle")
	ErrHandleInUse   = errors.New("entry handle in use")
)

func handleOf(version uint8, index uint32) uint32 { return uint32(version)<<24 | index }

func handleIndex(h uint32) uint32 { return h & 0x00ffffff }

// handles allocates a table's entry handles. Writers hold pl.mu.
type handles struct {
	versions []uint8
	ids      map[uint32]string // index -> the entry's identity (byID key)
	free     indexHeap         // released indexes below next
	next     uint32
}

type indexHeap []uint32

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(uint32)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// alloc gives the entry of identity id the lowest free index.
func (hs *handles) alloc(id string) uint32 {
	if hs.ids == nil {
		hs.ids = map[uint32]string{}
	}
	var i uint32
	if hs.free.Len() > 0 {
		i = heap.Pop(&hs.free).(uint32)
	} else {
		i = hs.next
		hs.next++
		hs.versions = append(hs.versions, 0)
	}
	hs.ids[i] = id
	return handleOf(hs.versions[i], i)
}

// allocAt gives the entry of identity id the handle h (index and version),
// as BMv2 does when it restores a state dump: the indexes below h's that
// were never given out become free, with version 0.
func (hs *handles) allocAt(id string, h uint32) error {
	if hs.ids == nil {
		hs.ids = map[uint32]string{}
	}
	i := handleIndex(h)
	if _, used := hs.ids[i]; used {
		return ErrHandleInUse
	}
	if i < hs.next {
		for k, f := range hs.free {
			if f == i {
				heap.Remove(&hs.free, k)
				break
			}
		}
	}
	for ; hs.next <= i; hs.next++ {
		hs.versions = append(hs.versions, 0)
		if hs.next < i {
			heap.Push(&hs.free, hs.next)
		}
	}
	hs.versions[i] = uint8(h >> 24)
	hs.ids[i] = id
	return nil
}

// release frees h's index and bumps its version.
func (hs *handles) release(h uint32) {
	i := handleIndex(h)
	if _, ok := hs.ids[i]; !ok {
		return
	}
	delete(hs.ids, i)
	hs.versions[i]++
	heap.Push(&hs.free, i)
}

// lookup returns the identity of the entry h names.
func (hs *handles) lookup(h uint32) (string, error) {
	i := handleIndex(h)
	id, ok := hs.ids[i]
	if !ok {
		return "", ErrInvalidHandle
	}
	if hs.versions[i] != uint8(h>>24) {
		return "", ErrExpiredHandle
	}
	return id, nil
}

// EntryByHandle returns the entry that handle h names in the table.
func (pl *Pipeline) EntryByHandle(tableID int, h uint32) (pipeline.TableEntry, error) {
	t, err := pl.table(tableID)
	if err != nil {
		return pipeline.TableEntry{}, err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	id, err := t.hnd.lookup(h)
	if err != nil {
		return pipeline.TableEntry{}, err
	}
	en := t.state.Load().byID.get(shardOfString(t.seed, id), id)
	if en == nil {
		return pipeline.TableEntry{}, ErrInvalidHandle
	}
	return t.export(en), nil
}

// EntryAtIndex returns the entry at handle h's index, whatever h's
// version: BMv2 names an entry's direct counter, direct meter and ageing
// timeout by the index alone.
func (pl *Pipeline) EntryAtIndex(tableID int, h uint32) (pipeline.TableEntry, error) {
	t, err := pl.table(tableID)
	if err != nil {
		return pipeline.TableEntry{}, err
	}
	pl.mu.Lock()
	i := handleIndex(h)
	var cur uint32
	if int(i) < len(t.hnd.versions) {
		cur = handleOf(t.hnd.versions[i], i)
	}
	pl.mu.Unlock()
	return pl.EntryByHandle(tableID, cur|i)
}

// EntriesByHandle returns the table's entries in the order of their
// handles' indexes, the order BMv2 dumps a table in.
func (pl *Pipeline) EntriesByHandle(tableID int) ([]pipeline.TableEntry, error) {
	es, err := pl.ReadEntries(tableID)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(es, func(i, j int) bool { return handleIndex(es[i].Handle) < handleIndex(es[j].Handle) })
	return es, nil
}

// entryLife is an entry's ageing state in a table that supports timeouts
// (support_timeout): the timeout a control plane set (BMv2's
// table_set_timeout; 0: none) and when the entry was last hit (or added,
// or given its timeout), on the pipeline clock.
type entryLife struct {
	timeoutMs atomic.Uint32
	lastHit   atomic.Int64 // ns
}

// SetEntryTimeout sets the ageing timeout of the entry at handle h's index
// (whatever h's version, as BMv2) and restarts its idle time. The engine
// deletes nothing: the timeout is what the control plane reads back
// (EntryTimeout) and what a state dump holds.
func (pl *Pipeline) SetEntryTimeout(tableID int, h uint32, ms uint32) error {
	defer pl.writing()()
	en, err := pl.entryAtIndex(tableID, h)
	if err != nil {
		return err
	}
	en.life.timeoutMs.Store(ms)
	en.life.lastHit.Store(pl.clock())
	return nil
}

// EntryTimeout returns the ageing timeout of the entry at handle h's index
// and the milliseconds since it was last hit.
func (pl *Pipeline) EntryTimeout(tableID int, h uint32) (timeoutMs uint32, sinceHitMs uint64, err error) {
	en, err := pl.entryAtIndex(tableID, h)
	if err != nil {
		return 0, 0, err
	}
	since := max(pl.clock()-en.life.lastHit.Load(), 0)
	return en.life.timeoutMs.Load(), uint64(since / 1e6), nil
}

func (pl *Pipeline) entryAtIndex(tableID int, h uint32) (*entry, error) {
	t, err := pl.table(tableID)
	if err != nil {
		return nil, err
	}
	if !t.ageing {
		return nil, errf(CodeFailedPrecondition, "table %s does not support timeouts", t.info.Name)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	id, ok := t.hnd.ids[handleIndex(h)]
	if !ok {
		return nil, ErrInvalidHandle
	}
	en := t.state.Load().byID.get(shardOfString(t.seed, id), id)
	if en == nil || en.life == nil {
		return nil, ErrInvalidHandle
	}
	return en, nil
}
