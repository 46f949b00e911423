package synth

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

func TestSameBatchTwiceSameResult(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			prompt := randomTokens(rng, 77)
			var snaps [][]uint64
			var arenas [][]byte
			var toks []int32
			// Twice on one pool, then once on a second pool and executor with
			// the same seed.
			h1 := newHarness(t, tinyProfile(), m.full, 32, 9)
			h2 := newHarness(t, tinyProfile(), m.full, 32, 9)
			for i, h := range []*harness{h1, h1, h2} {
				r := h.add(uint64(1+i), prompt, model.Sampling{})
				h.ensure(r, len(prompt))
				b := model.Batch{Seqs: []model.Seq{{Req: r.id, Tokens: prompt, Count: len(prompt), Blocks: h.pool.Blocks(r.hold), Sample: true}}}
				h.ex.Execute(&b, &h.out)
				toks = append(toks, h.out.Tokens[0])
				var d []uint64
				var a []byte
				for _, blk := range h.pool.Blocks(r.hold) {
					d = append(d, h.pool.Digests(blk)...)
					a = append(a, h.pool.Bytes(blk)...)
				}
				snaps, arenas = append(snaps, d[:len(prompt)]), append(arenas, a[:len(prompt)*h.pool.Config().BytesPerToken])
				h.pool.Release(r.hold)
			}
			for i := 1; i < 3; i++ {
				if toks[i] != toks[0] || !slices.Equal(snaps[i], snaps[0]) || !bytes.Equal(arenas[i], arenas[0]) {
					t.Fatalf("run %d differs: tokens %v", i, toks)
				}
			}
			if m.full != (len(arenas[0]) > 0) {
				t.Fatalf("full=%v but arena has %d bytes", m.full, len(arenas[0]))
			}
		})
	}
}

// A request's tokens are the same alone or batched with others, with its
// prompt in one step or in chunks of varied sizes, in whatever blocks.
func TestTokensIndependentOfBatchChunkingAndBlocks(t *testing.T) {
	for _, m := range modes {
		for _, sm := range samplings {
			t.Run(m.name+"/"+sm.name, func(t *testing.T) {
				for seed := uint64(0); seed < 8; seed++ {
					rng := rand.New(rand.NewPCG(seed, 99))
					const n, maxNew = 6, 24
					prompts := make([][]int32, n)
					want := make([][]int32, n)
					for i := range prompts {
						prompts[i] = randomTokens(rng, 1+rng.IntN(200))
						want[i] = alone(t, tinyProfile(), m.full, seed, prompts[i], sm.s, maxNew)
					}
					h := newHarness(t, tinyProfile(), m.full, 256, seed)
					h.fragment(rng)
					reqs := make([]*hreq, n)
					for i := range reqs {
						reqs[i] = h.add(uint64(100+i), prompts[i], sm.s)
					}
					h.run(reqs, maxNew, func(*hreq) int { return 1 + rng.IntN(64) })
					for i, r := range reqs {
						if !equalTokens(r.gen, want[i]) {
							t.Fatalf("seed %d req %d: batched+chunked %q, alone %q", seed, i, string32(r.gen), string32(want[i]))
						}
					}
				}
			})
		}
	}
}

func string32(toks []int32) string {
	b := make([]byte, 0, len(toks))
	for _, t := range toks {
		if t == EOSToken {
			b = append(b, "<eos>"...)
			continue
		}
		b = append(b, byte(t))
	}
	return string(b)
}

func TestChunkedPrefillOneTokenAtATime(t *testing.T) {
	for _, m := range modes {
		rng := rand.New(rand.NewPCG(5, 5))
		prompt := randomTokens(rng, 300)
		want := alone(t, tinyProfile(), m.full, 3, prompt, model.Sampling{}, 16)
		for _, c := range []int{1, 7, 16, 17, 64, 299} {
			h := newHarness(t, tinyProfile(), m.full, 64, 3)
			r := h.add(1, prompt, model.Sampling{})
			h.run([]*hreq{r}, 16, func(*hreq) int { return c })
			if !equalTokens(r.gen, want) {
				t.Fatalf("%s chunk %d: %q, want %q", m.name, c, string32(r.gen), string32(want))
			}
		}
	}
}

// A request that shares another's prefix blocks (a prefix-cache hit) and
// computes only its suffix gets the tokens it would get alone.
func TestSharedPrefixBlocks(t *testing.T) {
	for _, m := range modes {
		rng := rand.New(rand.NewPCG(8, 8))
		prefix := randomTokens(rng, 48)
		pa := append(slices.Clone(prefix), randomTokens(rng, 10)...)
		pb := append(slices.Clone(prefix), randomTokens(rng, 13)...)
		want := alone(t, tinyProfile(), m.full, 4, pb, model.Sampling{}, 12)

		h := newHarness(t, tinyProfile(), m.full, 64, 4)
		h.fragment(rng)
		a := h.add(1, pa, model.Sampling{})
		h.run([]*hreq{a}, 1, whole)
		b := h.add(2, pb, model.Sampling{})
		h.pool.Share(b.hold, h.pool.Blocks(a.hold)[:3])
		b.computed = 48
		h.run([]*hreq{b}, 12, whole)
		if !equalTokens(b.gen, want) {
			t.Fatalf("%s: with shared prefix %q, alone %q", m.name, string32(b.gen), string32(want))
		}
	}
}

// The prefix-state cache never changes results: not when it has one slot
// that every request shares, not when requests are forgotten after every step, not when a
// request is recomputed from position 0 (preemption), not when a request
// number is reused for another prompt.
func TestPrefixCacheDoesNotChangeResults(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	prompts := [][]int32{randomTokens(rng, 90), randomTokens(rng, 33), randomTokens(rng, 150)}
	var want [][]int32
	for _, p := range prompts {
		want = append(want, alone(t, tinyProfile(), false, 1, p, model.Sampling{}, 20))
	}
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
		after func(h *harness, reqs []*hreq)
	}{
		{"one slot", func(h *harness) { h.ex.prefix = make([]prefixEntry, 1) }, nil},
		{"forget every step", nil, func(h *harness, reqs []*hreq) {
			for _, r := range reqs {
				h.ex.Forget(r.id)
			}
		}},
		{"preempt and recompute", nil, func(h *harness, reqs []*hreq) {
			if r := reqs[rng.IntN(len(reqs))]; rng.IntN(4) == 0 {
				r.computed = 0
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tinyProfile(), false, 128, 1)
			if tc.setup != nil {
				tc.setup(h)
			}
			var reqs []*hreq
			for i, p := range prompts {
				reqs = append(reqs, h.add(uint64(i+1), p, model.Sampling{}))
			}
			for {
				var live []*hreq
				for _, r := range reqs {
					if len(r.gen) < 20 {
						live = append(live, r)
					}
				}
				if len(live) == 0 {
					break
				}
				h.step(live, func(*hreq) int { return 1 + rng.IntN(40) })
				if tc.after != nil {
					tc.after(h, live)
				}
			}
			for i, r := range reqs {
				if !equalTokens(r.gen, want[i]) {
					t.Fatalf("req %d: %q, want %q", i, string32(r.gen), string32(want[i]))
				}
			}
		})
	}
	t.Run("request number reused", func(t *testing.T) {
		h := newHarness(t, tinyProfile(), false, 128, 1)
		a := h.add(7, prompts[2], model.Sampling{})
		h.run([]*hreq{a}, 5, whole)
		h.pool.Release(a.hold)
		b := h.add(7, prompts[0], model.Sampling{})
		h.run([]*hreq{b}, 20, func(*hreq) int { return 100 }) // Start 100 < a's cached 155
		if !equalTokens(b.gen, want[0]) {
			t.Fatalf("reused number: %q, want %q", string32(b.gen), string32(want[0]))
		}
	})
}

func TestPrefixCacheBound(t *testing.T) {
	h := newHarness(t, tinyProfile(), false, 4, 1)
	r := h.add(1, []int32{1, 2, 3}, model.Sampling{})
	h.ensure(r, 3)
	b := model.Batch{Seqs: []model.Seq{{Tokens: r.tokens, Count: 3, Blocks: h.pool.Blocks(r.hold), Sample: true}}}
	var first int32
	for i := 0; i < 2*prefixSlots+100; i++ {
		b.Seqs[0].Req = uint64(i)
		h.ex.Execute(&b, &h.out)
		if i == 0 {
			first = h.out.Tokens[0]
		} else if h.out.Tokens[0] != first {
			t.Fatalf("request number %d changed the token", i)
		}
		if len(h.ex.prefix) != prefixSlots {
			t.Fatalf("prefix cache has %d slots, want %d", len(h.ex.prefix), prefixSlots)
		}
	}
}

// In full mode every written slot's digest is SlotDigest of its bytes; in
// digest-only mode there are no bytes. Both modes are deterministic (checked
// by the tests above); their tokens differ, since their digests do.
func TestModesDigests(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	prompt := randomTokens(rng, 100)
	var gens [2][]int32
	for i, m := range modes {
		h := newHarness(t, tinyProfile(), m.full, 16, 5)
		if h.ex.FullMode() != m.full {
			t.Fatalf("FullMode() = %v, want %v", h.ex.FullMode(), m.full)
		}
		r := h.add(1, prompt, model.Sampling{})
		h.run([]*hreq{r}, 8, whole)
		gens[i] = r.gen
		for q := 0; q < r.computed; q++ {
			blk := h.pool.Blocks(r.hold)[q/testBlockSize]
			kv := h.pool.SlotBytes(blk, q%testBlockSize)
			d := h.pool.Digests(blk)[q%testBlockSize]
			if m.full && d != kvblock.SlotDigest(kv) {
				t.Fatalf("position %d: digest %x, SlotDigest %x", q, d, kvblock.SlotDigest(kv))
			}
			if !m.full && (kv != nil || d == 0) {
				t.Fatalf("digest-only position %d: %d bytes, digest %x", q, len(kv), d)
			}
		}
	}
	if equalTokens(gens[0], gens[1]) {
		t.Fatalf("full and digest-only modes generated the same %q", string32(gens[0]))
	}
}

// KV bytes depend on the model seed and on every earlier token.
func TestKVDependsOnSeedAndPrefix(t *testing.T) {
	kvAt := func(seed uint64, prompt []int32, q int) []byte {
		h := newHarness(t, tinyProfile(), true, 8, seed)
		r := h.add(1, prompt, model.Sampling{})
		h.run([]*hreq{r}, 1, whole)
		return slices.Clone(h.pool.SlotBytes(h.pool.Blocks(r.hold)[q/testBlockSize], q%testBlockSize))
	}
	p := []int32{10, 20, 30, 40, 50}
	q := []int32{11, 20, 30, 40, 50}
	base := kvAt(1, p, 4)
	if bytes.Equal(base, kvAt(2, p, 4)) {
		t.Fatal("model seed does not change KV")
	}
	if bytes.Equal(base, kvAt(1, q, 4)) {
		t.Fatal("first token does not change the KV of position 4")
	}
	if !bytes.Equal(base, kvAt(1, p, 4)) {
		t.Fatal("KV is not deterministic")
	}
}

// corruptionTrial prefills a random prompt except its last token, lets
// damage change the pool, then samples maxNew tokens. It returns the tokens
// and the context digest seen by the first sample.
func corruptionTrial(t *testing.T, full bool, seed uint64, damage func(h *harness, r *hreq, rng *rand.Rand)) ([]int32, uint64) {
	rng := rand.New(rand.NewPCG(seed, 77))
	prompt := randomTokens(rng, 20+rng.IntN(100))
	h := newHarness(t, tinyProfile(), full, 32, seed)
	r := h.add(1, prompt, model.Sampling{})
	h.step([]*hreq{r}, func(*hreq) int { return len(prompt) - 1 })
	if damage != nil {
		damage(h, r, rng)
	}
	h.ensure(r, len(r.tokens))
	c := h.ex.contextDigest(&model.Seq{Tokens: r.tokens, Blocks: h.pool.Blocks(r.hold)})
	h.run([]*hreq{r}, 4, whole)
	return r.gen, c
}

// collisionProbability is Σ p_i² over the greedy distribution including
// EOS: the chance that two independent contexts sample the same next token.
func collisionProbability(p Profile) float64 {
	tb := buildTable(1, 1, 0, 0)
	sum, prev := p.EOSProbability*p.EOSProbability, uint64(0)
	for _, c := range tb.cum {
		q := float64(c-prev) / (1 << 32) * (1 - p.EOSProbability)
		sum += q * q
		prev = c
	}
	return sum
}

func checkDamage(t *testing.T, full bool, what string, damage func(h *harness, r *hreq, rng *rand.Rand)) {
	const trials = 1000
	nextChanged, contChanged, ctxChanged := 0, 0, 0
	for seed := uint64(0); seed < trials; seed++ {
		ref, refCtx := corruptionTrial(t, full, seed, nil)
		got, ctx := corruptionTrial(t, full, seed, damage)
		if got[0] != ref[0] {
			nextChanged++
		}
		if !equalTokens(got, ref) {
			contChanged++
		}
		if ctx != refCtx {
			ctxChanged++
		}
	}
	// One readable byte cannot change with probability ≥ 99%: two unrelated
	// contexts pick the same byte with probability Σp² (about 7%). The
	// context digest always changes, and 4 tokens almost always do.
	collide := collisionProbability(tinyProfile())
	t.Logf("%s: context changed %d/%d, next token %d/%d (expected ≈ %.1f%%), 4-token continuation %d/%d",
		what, ctxChanged, trials, nextChanged, trials, 100*(1-collide), contChanged, trials)
	if ctxChanged != trials {
		t.Errorf("%s: context digest unchanged in %d of %d trials", what, trials-ctxChanged, trials)
	}
	if float64(nextChanged) < trials*(1-collide-0.05) {
		t.Errorf("%s: next token changed in only %d of %d trials", what, nextChanged, trials)
	}
	if contChanged < trials*99/100 {
		t.Errorf("%s: continuation changed in only %d of %d trials", what, contChanged, trials)
	}
}

func TestCorruptedByteChangesOutput(t *testing.T) {
	checkDamage(t, true, "one corrupted byte", func(h *harness, r *hreq, rng *rand.Rand) {
		q := rng.IntN(r.computed)
		blk, slot := h.pool.Blocks(r.hold)[q/testBlockSize], q%testBlockSize
		kv := h.pool.SlotBytes(blk, slot)
		kv[rng.IntN(len(kv))] ^= byte(1 + rng.IntN(255))
		// A receiver rebuilds digests from the bytes it got.
		h.pool.Digests(blk)[slot] = kvblock.SlotDigest(kv)
	})
}

func TestOverwrittenBlockChangesOutput(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			checkDamage(t, m.full, "block overwritten by another request", func(h *harness, r *hreq, rng *rand.Rand) {
				// The block was freed early and another request wrote its
				// own KV into it.
				full := r.computed / testBlockSize
				if full == 0 {
					t.Fatal("prompt shorter than a block")
				}
				blk := h.pool.Blocks(r.hold)[rng.IntN(full)]
				other := randomTokens(rng, testBlockSize)
				b := model.Batch{Seqs: []model.Seq{{Req: 999, Tokens: other, Count: len(other), Blocks: []kvblock.BlockID{blk}}}}
				var out model.StepResult
				h.ex.Execute(&b, &out)
			})
		})
	}
}

func TestInconsistentBatchPanics(t *testing.T) {
	h := newHarness(t, tinyProfile(), false, 8, 1)
	hold := h.pool.NewHold(kvblock.HoldRequest, 1)
	h.pool.Allocate(hold, 2)
	blocks := h.pool.Blocks(hold)
	toks := make([]int32, 40)
	for _, tc := range []struct {
		name string
		s    model.Seq
	}{
		{"negative start", model.Seq{Tokens: toks, Start: -1, Count: 2, Blocks: blocks}},
		{"negative count", model.Seq{Tokens: toks, Start: 1, Count: -1, Blocks: blocks}},
		{"past the tokens", model.Seq{Tokens: toks[:10], Start: 5, Count: 6, Blocks: blocks}},
		{"blocks too few", model.Seq{Tokens: toks, Start: 0, Count: 33, Blocks: blocks}},
		{"sample before the end", model.Seq{Tokens: toks[:20], Start: 0, Count: 10, Blocks: blocks, Sample: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			h.ex.Execute(&model.Batch{Seqs: []model.Seq{tc.s}}, &h.out)
		})
	}
}

func TestNewRejectsMismatchedPool(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic")
		} else {
			t.Log(r)
		}
	}()
	New(tinyProfile(), kvblock.New(kvblock.Config{NumBlocks: 4, BlockSizeTokens: 16, BytesPerToken: 128}), 1)
}

func TestEmptyAndZeroCountSeqs(t *testing.T) {
	h := newHarness(t, tinyProfile(), true, 8, 1)
	h.out.Tokens = append(h.out.Tokens, 5, 6, 7) // reused, not appended to
	h.ex.Execute(&model.Batch{}, &h.out)
	if len(h.out.Tokens) != 0 || h.out.Duration != 0 {
		t.Fatalf("empty batch: %v", h.out)
	}
	// Everything already computed (Count 0) still samples from the KV.
	r := h.add(1, []int32{1, 2, 3}, model.Sampling{})
	h.step([]*hreq{r}, whole)
	first := r.gen[0]
	r.tokens, r.gen = r.tokens[:3], nil
	h.ex.Execute(&model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: r.tokens, Start: 3, Blocks: h.pool.Blocks(r.hold), Sample: true}}}, &h.out)
	if h.out.Tokens[0] != first {
		t.Fatalf("Count 0 sampled %d, want %d", h.out.Tokens[0], first)
	}
	// An empty request samples without reading anything.
	h.ex.Execute(&model.Batch{Seqs: []model.Seq{{Req: 2, Sample: true}}}, &h.out)
	if h.out.Tokens[0] == model.NoToken {
		t.Fatal("empty request sampled nothing")
	}
}

func TestExecuteDoesNotAllocate(t *testing.T) {
	for _, m := range modes {
		for _, sm := range samplings {
			t.Run(m.name+"/"+sm.name, func(t *testing.T) {
				d := newDecodeBench(t, tinyProfile(), m.full, 32, 200, sm.s)
				d.step() // first step fills caches
				if a := testing.AllocsPerRun(50, d.step); a != 0 {
					t.Fatalf("%v allocations per decode step", a)
				}
			})
		}
	}
}

// decodeBench is a decode loop over nseq requests whose contexts cycle
// between ctx and ctx+window tokens, with all memory preallocated.
type decodeBench struct {
	h      *harness
	batch  model.Batch
	ctx    int
	window int
}

func newDecodeBench(t testing.TB, p Profile, full bool, nseq, ctx int, s model.Sampling) *decodeBench {
	const window = 32
	blocksPer := (ctx + window + testBlockSize) / testBlockSize
	h := newHarness(t, p, full, nseq*blocksPer, 1)
	d := &decodeBench{h: h, ctx: ctx, window: window}
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < nseq; i++ {
		toks := make([]int32, ctx, ctx+window+1)
		copy(toks, randomTokens(rng, ctx))
		r := h.add(uint64(i), toks, s)
		h.ensure(r, ctx+window+1)
		d.batch.Seqs = append(d.batch.Seqs, model.Seq{Req: r.id, Tokens: toks[:ctx], Count: ctx, Blocks: h.pool.Blocks(r.hold), Sample: true, Sampling: s})
	}
	d.run()
	return d
}

func (d *decodeBench) run() {
	d.h.ex.Execute(&d.batch, &d.h.out)
	for i := range d.batch.Seqs {
		s := &d.batch.Seqs[i]
		s.Tokens = append(s.Tokens, d.h.out.Tokens[i])
		s.Start, s.Count = len(s.Tokens)-1, 1
	}
}

// step is one decode step; every window steps the contexts go back to ctx
// tokens (a recompute from position 0 for the prefix cache).
func (d *decodeBench) step() {
	if len(d.batch.Seqs[0].Tokens) > d.ctx+d.window {
		for i := range d.batch.Seqs {
			s := &d.batch.Seqs[i]
			s.Tokens = s.Tokens[:d.ctx+1]
			s.Start = d.ctx
		}
	}
	d.run()
}

// Engines with different block sizes (a P/D pair may differ) produce the
// same tokens: KV and the context fold depend on positions, not blocks.
func TestBlockSizeDoesNotMatter(t *testing.T) {
	for _, m := range modes {
		rng := rand.New(rand.NewPCG(12, 12))
		prompt := randomTokens(rng, 123)
		want := alone(t, tinyProfile(), m.full, 6, prompt, model.Sampling{}, 20)
		for _, bs := range []int{1, 3, 5, 16, 32, 1024} {
			h := newHarnessBS(t, tinyProfile(), m.full, 200, 6, bs)
			h.fragment(rng)
			r := h.add(1, prompt, model.Sampling{})
			h.run([]*hreq{r}, 20, func(*hreq) int { return 1 + rng.IntN(50) })
			if !equalTokens(r.gen, want) {
				t.Fatalf("%s block size %d: %q, want %q", m.name, bs, string32(r.gen), string32(want))
			}
		}
	}
}

// TestAdapterChangesOutput: an adapter (its weights' digest) changes every
// position's KV and so the tokens, greedy and sampled; the same adapter
// gives the same tokens however it is chunked or numbered, and its name
// does not enter (one adapter under two names answers alike).
func TestAdapterChangesOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	prompt := randomTokens(rng, 40)
	run := func(a kvblock.Adapter, s model.Sampling, chunk func(*hreq) int) ([]int32, []byte) {
		h := newHarness(t, tinyProfile(), true, 16, 5)
		r := h.add(1, prompt, s)
		r.adapter = a
		h.run([]*hreq{r}, 24, chunk)
		return r.gen, slices.Clone(h.pool.SlotBytes(h.pool.Blocks(r.hold)[0], 0))
	}
	sql := kvblock.Adapter{Name: "sql", ID: 1, Digest: 0x5eed}
	for _, s := range []model.Sampling{{}, {Temperature: 0.8, TopP: 1, Seed: 3}} {
		base, baseKV := run(kvblock.Adapter{}, s, whole)
		adapted, adaptedKV := run(sql, s, whole)
		if equalTokens(base, adapted) || bytes.Equal(baseKV, adaptedKV) {
			t.Fatalf("temperature %v: the adapter changes neither tokens nor KV", s.Temperature)
		}
		other, _ := run(kvblock.Adapter{Name: "sql", ID: 1, Digest: 0x5eee}, s, whole)
		if equalTokens(other, adapted) {
			t.Fatalf("temperature %v: two adapters' weights answer alike", s.Temperature)
		}
		again, _ := run(kvblock.Adapter{Name: "alias", ID: 9, Digest: 0x5eed}, s, func(*hreq) int { return 7 })
		if !equalTokens(again, adapted) {
			t.Fatalf("temperature %v: the same adapter chunked and renamed answers %v, want %v", s.Temperature, again, adapted)
		}
	}
}
