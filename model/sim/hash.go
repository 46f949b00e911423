package sim

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// golden is 2^64/φ, the splitmix64 increment.
const golden = 0x9e3779b97f4a7c15

// Domain separators: each use of the model seed gets its own key so that,
// for example, a KV seed never equals a sampling draw.
const (
	prefixRoot    = 0x70726566697821a5 // h_{-1}
	domainKV      = 0x6b765f7365656421
	domainGreedy  = 0x6772656564792121
	domainSampled = 0x73616d706c656421
	domainContext = 0x636f6e7465787421
	domainBytes   = 0x6279746573212121
	domainFill    = 0x66696c6c6b762121
)

// mix64 is the splitmix64 finalizer: a bijection of uint64 with full
// avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// combine keys h with x. For a fixed x it is a bijection of h and for a fixed
// h a bijection of x, so a change in either input always changes the result.
func combine(h, x uint64) uint64 {
	return mix64(h ^ mix64(x+golden))
}

// prefixStep extends the prefix state h_{q-1} with token tok at position q.
func prefixStep(h uint64, tok int32, q int) uint64 {
	return combine(h, uint64(uint32(tok))|uint64(q)<<32)
}

// kvSeed is s_q = PRF(modelSeed, h_q, q); key is mix64(modelSeed^domainKV).
func kvSeed(key, h uint64, q int) uint64 {
	return combine(combine(key, h), uint64(q))
}

// SlotDigest is the digest of one token slot's KV bytes (xxhash64). A
// transfer receiver calls it to rebuild a block's digests from the bytes it
// received; the executor stores the same value when it writes a slot in full
// mode.
func SlotDigest(slotBytes []byte) uint64 { return xxhash.Sum64(slotBytes) }

// BlockChecksum is the checksum of a block: xxhash64 over its slot digests,
// each as 8 little-endian bytes. The producer sends it with each block and
// the receiver verifies it after rebuilding the digests (SlotDigest). It
// does not allocate.
func BlockChecksum(digests []uint64) uint64 {
	var d xxhash.Digest
	d.Reset()
	var buf [256]byte
	for len(digests) > 0 {
		n := min(len(digests), len(buf)/8)
		for i, v := range digests[:n] {
			binary.LittleEndian.PutUint64(buf[8*i:], v)
		}
		d.Write(buf[:8*n])
		digests = digests[n:]
	}
	return d.Sum64()
}
