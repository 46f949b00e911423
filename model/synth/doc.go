// Package synth is kvlease's default model backend: a latency model plus
// deterministic KV content and token sampling, with no real neural network.
//
// # What it computes
//
// For every position q that a batch computes, the executor derives
//
//	h_q = mix(h_{q-1}, token_q, q)          prefix state (h_{-1} a constant)
//	s_q = PRF(modelSeed, h_q, q)            the position's 64-bit KV seed
//
// and writes it into the request's block table (block Blocks[q/blockSize],
// slot q%blockSize). In full mode (the pool has an arena) the slot's bytes
// are a deterministic expansion of s_q and the slot digest is
// kvblock.SlotDigest(bytes); in digest-only mode the digest is s_q itself. KV content
// is therefore a function of (model seed, token prefix, position) only: two
// engines with the same seed compute identical blocks for the same prefix,
// which is what makes prefix caching and P/D transfer meaningful.
//
// To sample, the executor reads the digests of every position of the
// request from the pool, folds them into a context digest and maps that (with
// the sampling parameters and position) to a token. Reading the KV is the
// point: if a block was freed early and overwritten, or corrupted in
// transit, the output changes. A disaggregated run must therefore produce
// exactly the tokens of a single-engine run with the same model seed and the
// same mode (full and digest-only mode produce different tokens, since their
// digests differ).
//
// Tokens depend only on (model seed, the request's tokens and KV, sampling
// parameters, position), never on batch composition, block ids, other
// requests or call history.
//
// # Tokens
//
// kvlease uses a byte-level tokenizer: token ids 0..255 are bytes, 256 is
// EOS. Sampled bytes are printable ASCII drawn from an English-like letter
// distribution (spaces about 17%, occasional punctuation and newlines), so
// the output is always valid UTF-8 and reads as plausible gibberish.
//
// # Latency
//
// Profile.Duration is a roofline-style latency model: a step costs a fixed
// overhead, a per-sequence overhead, and the larger of a memory term (weights
// streamed once per step plus the KV context read) and a compute term (per
// token plus a quadratic attention term). The profiles are zero (all
// latencies 0, for overhead benchmarks), tiny (fast, for tests and demos) and
// llama-8b (an 8B-class shape with H100-like timings).
//
// An Executor is not safe for concurrent use; it belongs to one engine core
// and its pool.
package synth
