package kvblock

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Hash is the chained prefix hash of a full block: a function of the parent
// block's hash, the block's token ids and extra keys (cache salt, adapter).
// Equal hashes mean equal KV content, so a block can be shared.
type Hash uint64

// RootHash is the parent of the first block of every prompt. It is a fixed
// constant (not per-process random) so that every engine and every offload
// tier computes the same hashes for the same tokens.
const RootHash Hash = 0x6b766c6561736521 // "kvlease!"

// HashBlock returns the hash of one full block.
//
// extra is mixed in when non-empty: the caller passes the cache salt for the
// first block and the adapter name for every block, as vLLM does.
func HashBlock(parent Hash, tokens []int32, extra string) Hash {
	var stack [8 + 4*64]byte
	n := 8 + 4*len(tokens)
	var buf []byte
	if n <= len(stack) {
		buf = stack[:n]
	} else {
		buf = make([]byte, n)
	}
	binary.LittleEndian.PutUint64(buf, uint64(parent))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[8+4*i:], uint32(t))
	}
	if extra == "" {
		return Hash(xxhash.Sum64(buf))
	}
	d := xxhash.New()
	d.Write(buf)
	d.Write([]byte{0xff}) // separates tokens from extra keys
	d.WriteString(extra)
	return Hash(d.Sum64())
}

// Extras are the extra keys of a request's prefix hash chain.
type Extras struct {
	CacheSalt string // mixed into the first block only
	Adapter   string // mixed into every block
}

func (e Extras) forBlock(i int) string {
	if i == 0 && e.CacheSalt != "" {
		if e.Adapter == "" {
			return "salt:" + e.CacheSalt
		}
		return "salt:" + e.CacheSalt + "\x00adapter:" + e.Adapter
	}
	if e.Adapter != "" {
		return "adapter:" + e.Adapter
	}
	return ""
}

// AppendHashes appends to dst the hashes of the full blocks of tokens that
// are not yet in dst: dst holds the hashes of the first len(dst) blocks, and
// AppendHashes extends it. It returns the extended slice (the caller owns it).
// Calling it after every appended token costs O(1) amortized.
func AppendHashes(dst []Hash, tokens []int32, blockSizeTokens int, ex Extras) []Hash {
	if blockSizeTokens <= 0 {
		// A validated Config never gets here; without the check the loop
		// below would never end.
		panic(fmt.Sprintf("kvblock: AppendHashes with block size %d", blockSizeTokens))
	}
	parent := RootHash
	if len(dst) > 0 {
		parent = dst[len(dst)-1]
	}
	for i := len(dst); (i+1)*blockSizeTokens <= len(tokens); i++ {
		h := HashBlock(parent, tokens[i*blockSizeTokens:(i+1)*blockSizeTokens], ex.forBlock(i))
		dst = append(dst, h)
		parent = h
	}
	return dst
}
