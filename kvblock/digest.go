package kvblock

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// SlotDigest is the content digest of one token slot's KV bytes. Whoever
// writes a slot's bytes stores this in Digests; a transfer receiver
// recomputes it from the bytes it received, so a digest always describes
// the bytes actually in memory.
func SlotDigest(slot []byte) uint64 { return xxhash.Sum64(slot) }

// Checksum is a block's transfer checksum: a hash of its filled slots'
// digests. P sends it with each block; D recomputes it from what it
// received (digests rebuilt from the bytes when there are bytes) and
// discards the block on a mismatch.
func Checksum(digests []uint64) uint64 {
	var buf [8 * 64]byte
	d := xxhash.New()
	for len(digests) > 0 {
		n := min(len(digests), 64)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint64(buf[8*i:], digests[i])
		}
		d.Write(buf[:8*n])
		digests = digests[n:]
	}
	return d.Sum64()
}
