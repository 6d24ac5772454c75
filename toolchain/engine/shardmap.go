package engine

import "hash/maphash"

// shardMap is a map split into 64 shards for copy-on-write snapshots: a
// new table version shares every shard with the published one and copies a
// shard only when it writes to it, so one control-plane write copies 1/64
// of the index instead of all of it. Readers index the shard array and
// then the shard (one multiply more than a plain map).
type shardMap[K comparable] struct {
	shards [nShards]map[K]*entry
	owned  uint64 // shards this (unpublished) version may write in place
	n      int
}

const (
	shardBits = 6
	nShards   = 1 << shardBits
)

func shardOfU64(k uint64) int { return int((k * 0x9E3779B97F4A7C15) >> (64 - shardBits)) }

func shardOfString(seed maphash.Seed, s string) int {
	return int(maphash.String(seed, s) >> (64 - shardBits))
}

func shardOfBytes(seed maphash.Seed, b []byte) int {
	return int(maphash.Bytes(seed, b) >> (64 - shardBits))
}

// fork returns a version sharing all shards with m.
func (m *shardMap[K]) fork() *shardMap[K] {
	if m == nil {
		return nil
	}
	n := *m
	n.owned = 0
	return &n
}

func (m *shardMap[K]) get(i int, k K) *entry { return m.shards[i][k] }

func (m *shardMap[K]) own(i int) map[K]*entry {
	if m.owned&(1<<uint(i)) == 0 {
		old := m.shards[i]
		c := make(map[K]*entry, len(old)+1)
		for k, v := range old {
			c[k] = v
		}
		m.shards[i] = c
		m.owned |= 1 << uint(i)
	}
	return m.shards[i]
}

func (m *shardMap[K]) put(i int, k K, e *entry) {
	s := m.own(i)
	if _, ok := s[k]; !ok {
		m.n++
	}
	s[k] = e
}

func (m *shardMap[K]) del(i int, k K) {
	if _, ok := m.shards[i][k]; !ok {
		return
	}
	delete(m.own(i), k)
	m.n--
}

func (m *shardMap[K]) each(f func(e *entry)) {
	for _, s := range m.shards {
		for _, e := range s {
			f(e)
		}
	}
}
