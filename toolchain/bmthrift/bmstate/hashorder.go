package bmstate

// The order in which BMv2 writes its tables, action profiles and meter
// arrays is the iteration order of its std::unordered_map<std::string, T>
// containers, which depends on the standard library it was built with.
// This file computes that order for GNU libstdc++ (the library of every
// BMv2 build on Linux with GCC): its std::hash<std::string> and its
// hashtable's bucket growth and node linking, simulated for a sequence of
// insertions of distinct keys into an empty map.

import "encoding/binary"

// hashSeed is the seed libstdc++'s std::hash<std::string> passes to
// std::_Hash_bytes.
const hashSeed = 0xc70f6907

// hashMul is the multiplier of libstdc++'s 64-bit _Hash_bytes (a variant
// of MurmurHash2 that reads 8 bytes at a time).
const hashMul = 0xc6a4a7935bd1e995

func shiftMix(v uint64) uint64 { return v ^ v>>47 }

// LibstdcxxHash is std::hash<std::string>{}(s) of a 64-bit libstdc++.
func LibstdcxxHash(s string) uint64 {
	b := []byte(s)
	n := len(b)
	aligned := n &^ 7
	h := uint64(hashSeed) ^ uint64(n)*hashMul
	for i := 0; i < aligned; i += 8 {
		d := shiftMix(binary.LittleEndian.Uint64(b[i:])*hashMul) * hashMul
		h ^= d
		h *= hashMul
	}
	if r := n & 7; r != 0 {
		// the tail, most significant byte last
		var d uint64
		for i := r - 1; i >= 0; i-- {
			d = d<<8 | uint64(b[aligned+i])
		}
		h ^= d
		h *= hashMul
	}
	h = shiftMix(h) * hashMul
	return shiftMix(h)
}

// primes are the bucket counts libstdc++'s _Prime_rehash_policy chooses
// from past 13 (its __prime_list from 17 on, as far as any program's
// object count can need).
var primes = []uint64{
	17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109, 113, 127,
	137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383, 409,
	439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193, 1289, 1381, 1493,
	1613, 1741, 1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349, 4703, 5087,
	5503, 5953, 6427, 6949, 7517, 8123, 8783, 9497, 10273, 11113, 12011, 12983, 14033, 15173,
	16411, 17749, 19183, 20753, 22447, 24281, 26267, 28411, 30727, 33223, 35933, 38873, 42043,
	45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779, 85229, 92203, 99733, 107897, 116731,
	126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971, 236897, 256279, 277261,
	299951, 324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841, 608903, 658753,
	712697, 771049, 834181, 902483, 976369, 1056323, 1142821, 1236397, 1337629, 1447153, 1565659,
	1693859, 1832561, 1982627, 2144977, 2320627, 2510653, 2716249, 2938679, 3179303, 3439651,
	3721303, 4026031, 4355707, 4712381, 5098259, 5515729, 5967347, 6456007, 6984629, 7556579,
	8175383, 8844859, 9569143, 10352717, 11200489, 12117689, 13109983, 14183539, 15345007,
	16601593, 17961079, 19431899, 21023161, 22744717, 24607243, 26622317, 28802401, 31160981,
	33712729, 36473443, 39460231, 42691603, 46187573, 49969847, 54061849, 58488943, 63278561,
	68460391,
}

// fastBuckets is the policy's table for requests below 14 buckets.
var fastBuckets = [14]uint64{2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13}

// rehashPolicy is _Prime_rehash_policy with the default max load factor 1.
type rehashPolicy struct{ nextResize uint64 }

func (p *rehashPolicy) nextBucket(n uint64) uint64 {
	if n < uint64(len(fastBuckets)) {
		if n == 0 {
			return 1
		}
		p.nextResize = fastBuckets[n]
		return fastBuckets[n]
	}
	// lower_bound over the list, the last prime answering anything beyond
	for i, q := range primes {
		if q >= n || i == len(primes)-1 {
			p.nextResize = q
			return q
		}
	}
	return 0 // unreachable
}

// needRehash answers whether a map of nBkt buckets holding nElt elements
// must grow to take one more, and to how many buckets.
func (p *rehashPolicy) needRehash(nBkt, nElt uint64) (bool, uint64) {
	if nElt+1 <= p.nextResize {
		return false, 0
	}
	minBkts := nElt + 1
	if p.nextResize == 0 && minBkts < 11 {
		minBkts = 11
	}
	if minBkts >= nBkt {
		return true, p.nextBucket(max(minBkts+1, nBkt*2))
	}
	p.nextResize = nBkt
	return false, 0
}

// UnorderedMapOrder returns keys (distinct) in the order a libstdc++
// std::unordered_map<std::string, T> iterates over them after they were
// emplaced, in the order given, into an empty map.
func UnorderedMapOrder(keys []string) []string {
	n := len(keys)
	if n == 0 {
		return nil
	}
	// Nodes 0..n-1 are the keys; node n is the list head (_M_before_begin).
	// next[i] is the node after i (-1: the end); bucket[b] is the node
	// before bucket b's first node (-1: empty bucket).
	head := n
	next := make([]int, n+1)
	next[head] = -1
	codes := make([]uint64, n)
	for i, k := range keys {
		codes[i] = LibstdcxxHash(k)
	}
	var pol rehashPolicy
	nBkt := uint64(1)
	bucket := []int{-1}
	for i := range keys {
		if grow, nb := pol.needRehash(nBkt, uint64(i)); grow {
			bucket = rehash(next, head, codes, nb)
			nBkt = nb
		}
		b := codes[i] % nBkt
		if bucket[b] >= 0 {
			next[i] = next[bucket[b]]
			next[bucket[b]] = i
			continue
		}
		next[i] = next[head]
		next[head] = i
		if next[i] >= 0 {
			bucket[codes[next[i]]%nBkt] = i
		}
		bucket[b] = head
	}
	out := make([]string, 0, n)
	for i := next[head]; i >= 0; i = next[i] {
		out = append(out, keys[i])
	}
	return out
}

// rehash relinks the nodes into nb buckets as _Hashtable::_M_rehash_aux
// does for unique keys, and returns the new buckets.
func rehash(next []int, head int, codes []uint64, nb uint64) []int {
	bucket := make([]int, nb)
	for i := range bucket {
		bucket[i] = -1
	}
	p := next[head]
	next[head] = -1
	bbegin := uint64(0)
	for p >= 0 {
		after := next[p]
		b := codes[p] % nb
		if bucket[b] < 0 {
			next[p] = next[head]
			next[head] = p
			bucket[b] = head
			if next[p] >= 0 {
				bucket[bbegin] = p
			}
			bbegin = b
		} else {
			next[p] = next[bucket[b]]
			next[bucket[b]] = p
		}
		p = after
	}
	return bucket
}
