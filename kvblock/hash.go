package kvblock

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// Hash is the chained prefix hash of a full block: a function of the parent
// block's hash, the block's token ids, extra keys (cache salt, adapter) and
// the engine's HashKey. Equal hashes are taken to mean equal KV content: the
// prefix cache, a decode engine's own-cache hits (which skip the pull) and
// the offload tiers all share a block on hash equality alone. So the hash
// must resist collisions built on purpose (vLLM's advisory
// GHSA-rm76-4mrf-v9r8 is the attack on an unkeyed 64-bit hash): it is 128
// bits of SipHash-2-4, a pseudo-random function of a secret key. Without the
// key nobody can compute a hash, let alone search for two prompts whose
// hashes collide; by chance, two distinct blocks collide with probability
// about n²/2¹²⁹ among n blocks.
//
// The zero Hash is RootHash, the parent of the first block of every prompt.
type Hash [16]byte

// RootHash is the parent of the first block of every prompt. Every hash is
// keyed, so a fixed public root loses nothing.
var RootHash Hash

// HashKey keys the prefix hash. Each engine hashes the tokens it is given
// with its own key (no hash crosses the wire), so keys need not agree for
// correctness; engines of a cluster derive theirs from the cluster secret
// (DeriveHashKey), so P, D and anything else holding the secret compute the
// same hashes for the same tokens (KV events, shared indexes). An engine
// with no cluster secret draws a random key at start. The zero key is
// public: it is for tests and simulations, where nobody builds collisions.
type HashKey [16]byte

// DeriveHashKey derives the prefix-hash key from the cluster secret:
// HMAC-SHA256(secret, "kvlease prefix-hash key v1"), first 16 bytes. The
// label separates it from the handshake's use of the same secret.
func DeriveHashKey(secret []byte) HashKey {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("kvlease prefix-hash key v1"))
	var k HashKey
	copy(k[:], m.Sum(nil))
	return k
}

// HashBlock returns the hash of one full block: SipHash-2-4 with a 128-bit
// output (the reference algorithm of Aumasson and Bernstein), keyed by key,
// over
//
//	parent (16 bytes) ‖ each token id as 4 bytes little endian [‖ 0xff ‖ extra]
//
// The output's two 64-bit halves are stored little endian, as the reference
// implementation writes them. extra is mixed in when non-empty: the caller
// passes the cache salt for the first block and the adapter name for every
// block, as vLLM does. HashBlock allocates nothing for blocks of up to 64
// tokens with no extra key.
func HashBlock(key HashKey, parent Hash, tokens []int32, extra string) Hash {
	var stack [16 + 4*64]byte
	n := 16 + 4*len(tokens)
	if extra != "" {
		n += 1 + len(extra)
	}
	var buf []byte
	if n <= len(stack) {
		buf = stack[:n]
	} else {
		buf = make([]byte, n)
	}
	copy(buf, parent[:])
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[16+4*i:], uint32(t))
	}
	if extra != "" {
		p := 16 + 4*len(tokens)
		buf[p] = 0xff // separates tokens from extra keys
		copy(buf[p+1:], extra)
	}
	return sipHash128(key, buf)
}

// sipRound is one SipRound of SipHash.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// sipHash128 is SipHash-2-4 with a 128-bit output, written from the
// algorithm's specification; TestSipHashVectors pins it to the reference
// vectors.
func sipHash128(key HashKey, m []byte) Hash {
	k0 := binary.LittleEndian.Uint64(key[0:])
	k1 := binary.LittleEndian.Uint64(key[8:])
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d ^ 0xee // 0xee: the 128-bit output variant
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	n := len(m)
	for len(m) >= 8 {
		w := binary.LittleEndian.Uint64(m)
		v3 ^= w
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= w
		m = m[8:]
	}
	// The last word: the remaining bytes, and the length's low byte on top.
	w := uint64(n) << 56
	for i, c := range m {
		w |= uint64(c) << (8 * i)
	}
	v3 ^= w
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= w
	v2 ^= 0xee
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	var h Hash
	binary.LittleEndian.PutUint64(h[0:], v0^v1^v2^v3)
	v1 ^= 0xdd
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	binary.LittleEndian.PutUint64(h[8:], v0^v1^v2^v3)
	return h
}

// Extras are the extra keys of a request's prefix hash chain, and the key
// that makes it unforgeable.
type Extras struct {
	// Key is the engine's prefix-hash key (see HashKey): the engine core
	// sets it on every request, so everything that hashes a request's
	// tokens (scheduler, transfer consumer, offload) agrees.
	Key       HashKey
	CacheSalt string  // mixed into the first block only
	Adapter   Adapter // mixed into every block (the zero Adapter: none)
}

// Adapter is a LoRA adapter a request runs with: KV computed under one
// adapter is not KV of another adapter, nor of the base model, so the
// adapter is part of every block's prefix hash (as vLLM puts the LoRA
// name in every block's extra keys). The zero Adapter is the base model.
type Adapter struct {
	// Name is the adapter's served name (vLLM's lora_name), which requests
	// give as their model.
	Name string
	// ID is the engine's number of the adapter (vLLM's lora_int_id: 1, 2,
	// ... in load order); KV events report it. It is not hashed: engines
	// number their adapters independently.
	ID int32
	// Digest identifies the adapter's weights (a digest of its files):
	// it is hashed with Name, so an adapter unloaded and loaded again
	// under the same name with other weights never hits the blocks of the
	// first. The simulated model derives its adapted KV from it.
	Digest uint64
}

// IsBase reports whether a is the zero Adapter (the base model).
func (a Adapter) IsBase() bool { return a.Name == "" && a.Digest == 0 }

// key is the adapter's part of a block's extra key.
func (a Adapter) key() string {
	if a.Digest == 0 {
		return "adapter:" + a.Name
	}
	return "adapter:" + a.Name + "\x00" + strconv.FormatUint(a.Digest, 16)
}

func (e Extras) forBlock(i int) string {
	base := e.Adapter.IsBase()
	if i == 0 && e.CacheSalt != "" {
		if base {
			return "salt:" + e.CacheSalt
		}
		return "salt:" + e.CacheSalt + "\x00" + e.Adapter.key()
	}
	if !base {
		return e.Adapter.key()
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
		h := HashBlock(ex.Key, parent, tokens[i*blockSizeTokens:(i+1)*blockSizeTokens], ex.forBlock(i))
		dst = append(dst, h)
		parent = h
	}
	return dst
}

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
