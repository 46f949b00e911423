package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// harness is a minimal engine for tests: requests with block tables in a
// pool, stepped through an executor with caller-chosen chunking.
type harness struct {
	t    testing.TB
	pool *kvblock.Pool
	ex   *Executor
	bs   int
	out  model.StepResult
}

type hreq struct {
	id       uint64
	tokens   []int32
	hold     kvblock.HoldID
	computed int
	sampling model.Sampling
	adapter  kvblock.Adapter
	gen      []int32
}

const testBlockSize = 16

func newHarness(t testing.TB, p Profile, full bool, numBlocks int, modelSeed uint64) *harness {
	return newHarnessBS(t, p, full, numBlocks, modelSeed, testBlockSize)
}

func newHarnessBS(t testing.TB, p Profile, full bool, numBlocks int, modelSeed uint64, blockSize int) *harness {
	t.Helper()
	cfg := kvblock.Config{NumBlocks: numBlocks, BlockSizeTokens: blockSize}
	if full {
		cfg.BytesPerToken = p.BytesPerToken()
	}
	pool := kvblock.New(cfg)
	return &harness{t: t, pool: pool, ex: New(p, pool, modelSeed), bs: blockSize}
}

func tinyProfile() Profile {
	p, ok := LookupProfile("tiny")
	if !ok {
		panic("no tiny profile")
	}
	return p
}

// fragment shuffles the pool's free stack so that allocations get block
// ids in a random order.
func (h *harness) fragment(rng *rand.Rand) {
	n := h.pool.NumFree()
	holds := make([]kvblock.HoldID, n)
	for i := range holds {
		holds[i] = h.pool.NewHold(kvblock.HoldStore, uint64(i))
		if !h.pool.Allocate(holds[i], 1) {
			h.t.Fatal("fragment: pool exhausted")
		}
	}
	rng.Shuffle(n, func(i, j int) { holds[i], holds[j] = holds[j], holds[i] })
	for _, id := range holds {
		h.pool.Release(id)
	}
}

func (h *harness) add(id uint64, prompt []int32, s model.Sampling) *hreq {
	r := &hreq{id: id, tokens: append([]int32(nil), prompt...), sampling: s}
	r.hold = h.pool.NewHold(kvblock.HoldRequest, id)
	return r
}

func (h *harness) ensure(r *hreq, n int) {
	need := (n+h.bs-1)/h.bs - h.pool.Len(r.hold)
	if need > 0 && !h.pool.Allocate(r.hold, need) {
		h.t.Fatalf("pool exhausted allocating %d blocks", need)
	}
}

// step runs one batch over reqs, each computing chunk(r) of its pending
// positions (at least 1), and appends sampled tokens.
func (h *harness) step(reqs []*hreq, chunk func(*hreq) int) {
	var b model.Batch
	for _, r := range reqs {
		pending := len(r.tokens) - r.computed
		n := min(max(chunk(r), 1), pending)
		h.ensure(r, r.computed+n)
		b.Seqs = append(b.Seqs, model.Seq{
			Req: r.id, Tokens: r.tokens, Start: r.computed, Count: n,
			Blocks: h.pool.Blocks(r.hold), Sample: r.computed+n == len(r.tokens), Sampling: r.sampling,
			Adapter: r.adapter,
		})
	}
	h.ex.Execute(&b, &h.out)
	if len(h.out.Tokens) != len(reqs) {
		h.t.Fatalf("got %d tokens for %d seqs", len(h.out.Tokens), len(reqs))
	}
	for i, r := range reqs {
		r.computed += b.Seqs[i].Count
		tok := h.out.Tokens[i]
		if !b.Seqs[i].Sample {
			if tok != model.NoToken {
				h.t.Fatalf("req %d: token %d without Sample", r.id, tok)
			}
			continue
		}
		if tok == model.NoToken {
			h.t.Fatalf("req %d: no token with Sample", r.id)
		}
		r.tokens = append(r.tokens, tok)
		r.gen = append(r.gen, tok)
	}
}

// run steps reqs together until each has generated maxNew tokens (EOS does
// not stop a test request).
func (h *harness) run(reqs []*hreq, maxNew int, chunk func(*hreq) int) {
	for {
		var live []*hreq
		for _, r := range reqs {
			if len(r.gen) < maxNew {
				live = append(live, r)
			}
		}
		if len(live) == 0 {
			return
		}
		h.step(live, chunk)
	}
}

func whole(*hreq) int { return 1 << 30 }

func randomTokens(rng *rand.Rand, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(rng.IntN(256))
	}
	return t
}

// alone generates maxNew tokens for prompt in a fresh harness, the prompt
// computed in one step.
func alone(t testing.TB, p Profile, full bool, modelSeed uint64, prompt []int32, s model.Sampling, maxNew int) []int32 {
	h := newHarness(t, p, full, 64+(len(prompt)+maxNew)/testBlockSize, modelSeed)
	r := h.add(1, prompt, s)
	h.run([]*hreq{r}, maxNew, whole)
	return r.gen
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var modes = []struct {
	name string
	full bool
}{{"digest-only", false}, {"full", true}}

var samplings = []struct {
	name string
	s    model.Sampling
}{
	{"greedy", model.Sampling{}},
	{"t=0.8,top_p=0.9", model.Sampling{Temperature: 0.8, TopP: 0.9, Seed: 42}},
	{"t=1.5", model.Sampling{Temperature: 1.5, TopP: 1, Seed: 7}},
}
