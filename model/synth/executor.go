package synth

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// prefixSlots is the size of the prefix-state cache (a power of two).
const prefixSlots = 4096

// prefixEntry remembers a request's prefix state after its last computed
// position, so the next step continues in O(1) per token.
type prefixEntry struct {
	req  uint64 // the request (Seq.Req) the entry is for
	pos  int    // positions 0..pos-1 are folded into hash
	hash uint64 // h_{pos-1}
	last int32  // tokens[pos-1], a cheap check that the entry still fits
}

// Executor is the simulated model.Executor: it writes deterministic KV into
// a pool and samples tokens from the KV it reads back. Create it with New.
// Not safe for concurrent use.
type Executor struct {
	prof      Profile
	pool      *kvblock.Pool
	blockSize int
	full      bool // the pool has an arena: write bytes, digest = kvblock.SlotDigest
	section   int  // bytes of one layer's K (or V): KVHeads × HeadDim × DTypeBytes
	// sectionKeys[j] is mix64(j+golden), the constant half of section j's
	// combine in fill.
	sectionKeys []uint64
	// vecFill: fill writes whole sections with the CPU's vector unit
	// (fillVector), each section's stream starting at fillStarts[j].
	vecFill    bool
	fillStarts []uint64
	// zeroLatency: every latency of the profile is 0 (zero), so every
	// batch's Duration is 0.
	zeroLatency bool

	kvKey, greedyKey, sampledKey uint64

	// prefix caches each request's prefix state, direct-mapped: request
	// r's entry is prefix[r % len(prefix)], and a request that maps to the
	// slot of another overwrites its entry. The engine numbers requests in
	// sequence, so live requests rarely share a slot. Results never depend
	// on it: a miss recomputes the state from the tokens.
	prefix []prefixEntry

	base   table
	tables map[shapeKey]*table

	// logprob is every token's log-probability under the model's raw
	// distribution, and top the tokens by decreasing probability (see
	// rawLogprobs).
	logprob []float32
	rank    []int32 // each token's rank under logprob
	top     []model.TokenLogprob
	plp     []model.Logprobs // the step's prompt logprobs

	// Scratch of samplePenalized.
	pen    []float32
	counts []int32
	probs  []float64
	order  []int32
}

var _ model.Executor = (*Executor)(nil)

// New returns an executor for profile p writing into pool, with model seed
// modelSeed (engines that must agree on KV and tokens, such as a P/D pair,
// use the same seed). Full mode is selected when the pool has an arena
// (Config.BytesPerToken > 0); then BytesPerToken must equal
// p.BytesPerToken(). New panics on an invalid profile or a mismatched pool:
// configuration is validated at the edges.
func New(p Profile, pool *kvblock.Pool, modelSeed uint64) *Executor {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	bpt := pool.Config().BytesPerToken
	if bpt != 0 && bpt != p.BytesPerToken() {
		panic(fmt.Sprintf("sim: pool has %d bytes per token, profile %q needs %d", bpt, p.Name, p.BytesPerToken()))
	}
	e := &Executor{
		prof:       p,
		pool:       pool,
		blockSize:  pool.BlockSizeTokens(),
		full:       bpt > 0,
		section:    p.KVHeads * p.HeadDim * p.DTypeBytes,
		kvKey:      mix64(modelSeed ^ domainKV),
		greedyKey:  mix64(modelSeed ^ domainGreedy),
		sampledKey: mix64(modelSeed ^ domainSampled),
		prefix:     make([]prefixEntry, prefixSlots),
		tables:     make(map[shapeKey]*table),
	}
	e.sectionKeys = make([]uint64, 2*p.Layers)
	e.fillStarts = make([]uint64, 2*p.Layers)
	e.vecFill = hasFillAVX512 && e.section%64 == 0
	for j := range e.sectionKeys {
		e.sectionKeys[j] = mix64(uint64(j) + golden)
	}
	e.zeroLatency = p.StepOverhead == 0 && p.DecodePerStep == 0 && p.DecodePerSeq == 0 &&
		p.DecodePerContextToken == 0 && p.PrefillPerToken == 0 && p.PrefillPerAttendedToken == 0
	e.base = *buildTable(1, 1, 0, 0)
	e.logprob, e.top = rawLogprobs(p)
	e.rank = ranks(e.logprob)
	return e
}

// Profile returns the executor's profile.
func (e *Executor) Profile() Profile { return e.prof }

// FullMode reports whether the executor writes KV bytes (true) or only
// digests.
func (e *Executor) FullMode() bool { return e.full }

// Forget drops the cached prefix state of request req. Calling it when a
// request finishes keeps the cache small; not calling it is also correct.
func (e *Executor) Forget(req uint64) {
	if en := e.prefixEntry(req); en.req == req {
		*en = prefixEntry{}
	}
}

// prefixEntry is request req's slot of the prefix-state cache.
func (e *Executor) prefixEntry(req uint64) *prefixEntry {
	return &e.prefix[req&uint64(len(e.prefix)-1)]
}

// Execute computes the batch: it writes the KV of every position
// Start..Start+Count-1 of every sequence into its blocks, then samples one
// token for each sequence with Sample set. All writes of a batch happen
// before any read. out.Tokens is reused; out.Duration is
// e.Profile().Duration(b).
//
// The batch must be consistent (Start, Count ≥ 0; Start+Count ≤
// len(Tokens); Blocks cover Start+Count slots; Sample only when
// Start+Count == len(Tokens)); an inconsistent batch is an engine bug and
// panics. Req identifies a request whose Tokens only ever grow at the end:
// the prefix cache relies on it.
func (e *Executor) Execute(b *model.Batch, out *model.StepResult) {
	out.Tokens = out.Tokens[:0]
	out.Logprobs = out.Logprobs[:0]
	out.PromptLogprobs = out.PromptLogprobs[:0]
	e.plp = e.plp[:0]
	for i := range b.Seqs {
		e.check(&b.Seqs[i])
	}
	for i := range b.Seqs {
		e.write(&b.Seqs[i])
	}
	for i := range b.Seqs {
		s := &b.Seqs[i]
		tok := model.NoToken
		var lp model.Logprobs
		top := e.top[:min(max(s.Sampling.TopLogprobs, 0), len(e.top))]
		if s.Sample {
			tok = e.sample(s)
			if s.Sampling.Logprobs {
				lp = model.Logprobs{Logprob: e.logprob[tok], Top: top}
			}
		}
		var plp model.PromptLogprobs
		if s.Sampling.PromptLogprobs {
			from, to := model.PromptRange(s.Start, s.Count, s.NumPromptTokens)
			start := len(e.plp)
			ptop := e.top[:min(max(s.Sampling.PromptTopLogprobs, 0), len(e.top))]
			for k := from; k < to; k++ {
				t := s.Tokens[k]
				e.plp = append(e.plp, model.Logprobs{Logprob: e.logprob[t], Rank: e.rank[t], Top: ptop})
			}
			plp = model.PromptLogprobs{From: from, Entries: e.plp[start:len(e.plp):len(e.plp)]}
		}
		out.Tokens = append(out.Tokens, tok)
		out.Logprobs = append(out.Logprobs, lp)
		out.PromptLogprobs = append(out.PromptLogprobs, plp)
	}
	if e.zeroLatency {
		out.Duration = 0 // what Duration computes, without its sums
	} else {
		out.Duration = e.prof.Duration(b)
	}
}

func (e *Executor) check(s *model.Seq) {
	end := s.Start + s.Count
	switch {
	case s.Start < 0 || s.Count < 0 || end > len(s.Tokens):
		panic(fmt.Sprintf("sim: req %d computes positions [%d, %d) of %d tokens", s.Req, s.Start, end, len(s.Tokens)))
	case len(s.Blocks)*e.blockSize < end:
		panic(fmt.Sprintf("sim: req %d: %d blocks of %d tokens do not cover %d positions", s.Req, len(s.Blocks), e.blockSize, end))
	case s.Sample && end != len(s.Tokens):
		panic(fmt.Sprintf("sim: req %d samples after position %d of %d tokens", s.Req, end, len(s.Tokens)))
	}
}

// prefixState returns h_{Start-1} (prefixRoot when Start is 0), from the
// cache when it fits and otherwise recomputed from Tokens[:Start].
func (e *Executor) prefixState(s *model.Seq) uint64 {
	h, from := adapterRoot(s.Adapter), 0
	if en := e.prefixEntry(s.Req); en.req == s.Req && en.pos > 0 && en.pos <= s.Start && s.Tokens[en.pos-1] == en.last {
		h, from = en.hash, en.pos
	}
	for q := from; q < s.Start; q++ {
		h = prefixStep(h, s.Tokens[q], q)
	}
	return h
}

// adapterRoot is h_{-1} of a sequence run with adapter a: prefixRoot for
// the base model, and for an adapter a root keyed by its weights' digest.
// So an adapter changes every position's KV, and through the KV every
// token, as real low-rank updates to the projections would, while two
// engines with the same adapter files agree exactly (a P/D pair). The name
// is left out: one adapter served under two names answers alike (their
// prefix-cache entries stay apart, by the hash's extra keys).
func adapterRoot(a kvblock.Adapter) uint64 {
	if a.Digest == 0 {
		return prefixRoot
	}
	return combine(prefixRoot, a.Digest^domainAdapter)
}

func (e *Executor) write(s *model.Seq) {
	if s.Count == 0 {
		return
	}
	h := e.prefixState(s)
	end := s.Start + s.Count
	for q := s.Start; q < end; q++ {
		h = prefixStep(h, s.Tokens[q], q)
		seed := kvSeed(e.kvKey, h, q)
		blk, slot := s.Blocks[q/e.blockSize], q%e.blockSize
		if e.full {
			kv := e.pool.SlotBytes(blk, slot)
			e.fill(kv, seed)
			seed = kvblock.SlotDigest(kv)
		}
		e.pool.Digests(blk)[slot] = seed
	}
	*e.prefixEntry(s.Req) = prefixEntry{req: s.Req, pos: end, hash: h, last: s.Tokens[end-1]}
}

// fill writes a slot's KV bytes from its seed. Layout: for each layer l, K
// then V, each a section of KVHeads × HeadDim × DTypeBytes bytes (head-major,
// then dim, then the dtype's little-endian bytes). Section j = 2l+k (k = 0
// for K, 1 for V) is the splitmix64 stream keyed by combine(seed, j), 8
// little-endian bytes per output, so any layer can be regenerated on its
// own. The bytes are not meaningful floats.
func (e *Executor) fill(kv []byte, seed uint64) {
	base := seed ^ domainFill
	if e.vecFill {
		for j := range e.fillStarts {
			e.fillStarts[j] = mix64(base ^ e.sectionKeys[j]) // combine(base, j)
		}
		if fillVector(kv, e.fillStarts, e.section) {
			return
		}
	}
	for j := 0; len(kv) > 0; j++ {
		sec := kv[:e.section]
		kv = kv[e.section:]
		st := mix64(base ^ e.sectionKeys[j]) // combine(base, j)
		// Four outputs at a time through a fixed-size view: no bounds
		// check per output, and the four are independent.
		for len(sec) >= 32 {
			w := (*[32]byte)(sec)
			binary.LittleEndian.PutUint64(w[0:], mix64(st+golden))
			binary.LittleEndian.PutUint64(w[8:], mix64(st+golden2))
			binary.LittleEndian.PutUint64(w[16:], mix64(st+golden3))
			binary.LittleEndian.PutUint64(w[24:], mix64(st+golden4))
			st += golden4
			sec = sec[32:]
		}
		for len(sec) >= 8 {
			st += golden
			binary.LittleEndian.PutUint64(sec, mix64(st))
			sec = sec[8:]
		}
		if len(sec) > 0 {
			st += golden
			v := mix64(st)
			for i := range sec {
				sec[i] = byte(v >> (8 * i))
			}
		}
	}
}

// contextDigest folds the digests of positions 0..len(Tokens)-1, read from
// the pool through the block table, into one value.
//
// Position i goes to lane i%4, and each lane steps c = rotl((c^d)×K, 31):
// a bijection of the running value and of the digest (K is odd), so
// changing any one digest always changes its lane, and the lanes are then
// combined with full mixing, so it always changes the result. Several
// changes (an overwritten block) leave a lane that is a bijection of the
// last changed digest, so with random digests the result collides with
// probability about 2^-64. Four independent lanes run about four times
// faster than one serial chain: this loop is the executor's hot spot in
// decode.
func (e *Executor) contextDigest(s *model.Seq) uint64 {
	const k = 0x9fb21c651e98df25 // odd
	n := len(s.Tokens)
	// l0 is always the lane of the next position: a single step rotates the
	// lanes, four steps bring them back. The fold depends on positions only,
	// not on the block size.
	l0, l1, l2, l3 := uint64(domainContext), uint64(domainContext+1), uint64(domainContext+2), uint64(domainContext+3)
	for i := 0; i*e.blockSize < n; i++ {
		d := e.pool.Digests(s.Blocks[i])
		d = d[:min(e.blockSize, n-i*e.blockSize)]
		for ; len(d) >= 4; d = d[4:] {
			l0 = bits.RotateLeft64((l0^d[0])*k, 31)
			l1 = bits.RotateLeft64((l1^d[1])*k, 31)
			l2 = bits.RotateLeft64((l2^d[2])*k, 31)
			l3 = bits.RotateLeft64((l3^d[3])*k, 31)
		}
		for _, v := range d {
			l0, l1, l2, l3 = l1, l2, l3, bits.RotateLeft64((l0^v)*k, 31)
		}
	}
	return combine(combine(combine(combine(l0, l1), l2), l3), uint64(n))
}

// sample draws the token at position len(Tokens). Greedy (Temperature ≤ 0):
// r = PRF(modelSeed, context) and the base distribution. Otherwise r =
// PRF(modelSeed, context, Sampling.Seed, position) and the distribution
// shaped by Temperature and TopP (see buildTable). EOS comes first, with
// probability EOSProbability whatever the parameters. A masked sequence
// draws from maskWeights instead (sampleMasked).
func (e *Executor) sample(s *model.Seq) int32 {
	c := e.contextDigest(s)
	k, sampled := sanitize(s.Sampling)
	var r uint64
	tb := &e.base
	if !sampled {
		r = combine(e.greedyKey, c)
	} else {
		r = combine(combine(combine(e.sampledKey, c), s.Sampling.Seed), uint64(len(s.Tokens)))
		tb = e.shaped(k)
	}
	if s.Sampling.Penalized() {
		return e.samplePenalized(s, r, k, sampled)
	}
	if s.Mask != nil {
		return e.sampleMasked(s.Mask, r)
	}
	if isEOS(r, e.prof.EOSProbability) {
		return e.prof.EOS
	}
	return tb.pick(uint32(mix64(r^domainBytes) >> 32))
}

func (e *Executor) shaped(k shapeKey) *table {
	if k == (shapeKey{temperature: 1, topP: 1}) {
		return &e.base
	}
	if t, ok := e.tables[k]; ok {
		return t
	}
	if len(e.tables) >= maxTables {
		clear(e.tables)
	}
	t := buildTable(k.temperature, k.topP, k.topK, k.minP)
	e.tables[k] = t
	return t
}
