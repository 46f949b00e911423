package llama_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/llama"
)

// kvOf reads back the KV bytes of positions 0..n-1 of s.
func (h *harness) kvOf(s *seq, n int) []byte {
	var out []byte
	for p := 0; p < n; p++ {
		out = append(out, h.pool.SlotBytes(h.pool.Blocks(s.hold)[p/h.bs], p%h.bs)...)
	}
	return out
}

type want struct {
	tokens []int32
	kv     []byte
}

var samplings = []model.Sampling{
	{},                                 // greedy
	{Temperature: 1, TopP: 1, Seed: 5}, // seeded
	{Temperature: 0.7, TopP: 0.9, Seed: 11},
	{Temperature: 1.3, TopP: 0.5, Seed: 99},
}

func prompts(vocab int, r *rand.Rand) [][]int32 {
	var ps [][]int32
	for _, n := range []int{1, 7, 23, 40} {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(r.IntN(vocab))
		}
		ps = append(ps, p)
	}
	return ps
}

const genTokens = 12

// alone runs each request by itself: its prompt in one step, then one token
// per step.
func alone(t *testing.T, w *llama.Weights, ps [][]int32) []want {
	var out []want
	for i, p := range ps {
		h := newHarness(t, w, 64, 16, nil)
		s := h.newSeq(uint64(i), p, samplings[i%len(samplings)])
		for len(s.tokens) < len(p)+genTokens {
			h.step([]*seq{s}, []int{len(s.tokens) - s.computed})
		}
		out = append(out, want{tokens: s.tokens, kv: h.kvOf(s, len(s.tokens)-1)})
	}
	return out
}

// TestBatchingChunkingPreemptionKeepTokens runs the same requests alone and
// then together, with random chunk sizes, random batch composition, a small
// block size and a preemption (recompute) of each request halfway through:
// every request's tokens and every byte of its KV must be identical. On a
// llama model and on one with every variant of the family at once (wide
// heads, biases, Q/K norms, RoPE on halves with factors).
func TestBatchingChunkingPreemptionKeepTokens(t *testing.T) {
	t.Run("llama", func(t *testing.T) { batchingKeepsTokens(t, llamatest.Random(llamatest.Shape260K, 3, false)) })
	t.Run("variants", func(t *testing.T) { batchingKeepsTokens(t, allVariants()) })
}

// allVariants is a model with every variant of the family the executor
// implements.
func allVariants() *llama.Weights {
	w := llamatest.Random(qwen3Shape, 3, false)
	w.Config.Rope = llama.RopeHalves
	llamatest.AddBiases(w, 4)
	llamatest.AddQKNorms(w, 5)
	w.RopeFactors = make([]float32, w.Config.HeadDim()/2)
	for i := range w.RopeFactors {
		w.RopeFactors[i] = 1 + float32(i%3)
	}
	return w
}

func batchingKeepsTokens(t *testing.T, w *llama.Weights) {
	r := rand.New(rand.NewPCG(1, 2))
	ps := prompts(w.Config.VocabSize, r)
	base := alone(t, w, ps)

	for trial := 0; trial < 3; trial++ {
		h := newHarness(t, w, 256, 3, nil)
		var live []*seq
		preempted := map[uint64]bool{}
		for i, p := range ps {
			live = append(live, h.newSeq(uint64(i), p, samplings[i%len(samplings)]))
		}
		for steps := 0; len(live) > 0; steps++ {
			if steps > 1000 {
				t.Fatal("no progress")
			}
			var batch []*seq
			var counts []int
			for _, s := range live {
				if r.IntN(4) == 0 {
					continue // not scheduled this step
				}
				left := len(s.tokens) - s.computed
				batch = append(batch, s)
				counts = append(counts, 1+r.IntN(left))
			}
			if len(batch) == 0 {
				continue
			}
			h.step(batch, counts)
			for j := 0; j < len(live); j++ {
				s := live[j]
				n := len(ps[s.id]) + genTokens
				if !preempted[s.id] && len(s.tokens) >= len(ps[s.id])+genTokens/2 {
					preempted[s.id] = true
					h.preempt(s)
				}
				if len(s.tokens) >= n {
					b := base[s.id]
					if !slices.Equal(s.tokens[:n], b.tokens) {
						t.Fatalf("trial %d req %d: tokens %v, alone %v", trial, s.id, s.tokens[:n], b.tokens)
					}
					if !bytes.Equal(h.kvOf(s, n-1), b.kv) {
						t.Fatalf("trial %d req %d: KV bytes differ from the run alone", trial, s.id)
					}
					h.pool.Release(s.hold)
					live = slices.Delete(live, j, j+1)
					j--
				}
			}
		}
	}
}

// TestCorruptedBlockChangesTheAnswer flips one bit of one position's key in
// the pool: the next logits change, and the slot's digest no longer matches
// its bytes (what a transfer's checksum catches).
func TestCorruptedBlockChangesTheAnswer(t *testing.T) {
	w := llamatest.Random(llamatest.Shape260K, 3, false)
	prompt := []int32{1, 10, 20, 30, 40, 50, 60, 70, 80}
	run := func(corrupt bool) ([]float32, bool) {
		h := newHarness(t, w, 16, 4, nil)
		s := h.newSeq(1, prompt, model.Sampling{})
		h.step([]*seq{s}, []int{len(prompt) - 1}) // all but the last position
		blk := h.pool.Blocks(s.hold)[0]
		if corrupt {
			h.pool.SlotBytes(blk, 2)[5] ^= 0x10 // layer 0, K, head 0, dim 1
		}
		caught := kvblock.SlotDigest(h.pool.SlotBytes(blk, 2)) != h.pool.Digests(blk)[2]
		h.step([]*seq{s}, []int{1})
		return slices.Clone(h.exec.Logits(0)), caught
	}
	clean, caught := run(false)
	if caught {
		t.Fatal("digest mismatch without corruption")
	}
	bad, caught := run(true)
	if !caught {
		t.Error("the corrupted slot's digest still matches")
	}
	if slices.Equal(clean, bad) {
		t.Error("a corrupted key did not change the logits: attention does not read the pool")
	}
}

// TestDecodeStepAllocatesNothing: once the buffers have grown, a decode
// step of a batch of sequences allocates nothing.
func TestDecodeStepAllocatesNothing(t *testing.T) {
	t.Run("llama", func(t *testing.T) { decodeAllocatesNothing(t, llamatest.Random(llamatest.Shape260K, 3, false)) })
	t.Run("variants", func(t *testing.T) { decodeAllocatesNothing(t, allVariants()) })
}

func decodeAllocatesNothing(t *testing.T, w *llama.Weights) {
	h := newHarness(t, w, 512, 16, nil)
	var ss []*seq
	for i := 0; i < 4; i++ {
		ss = append(ss, h.newSeq(uint64(i), []int32{1, int32(i + 5), 9}, samplings[i]))
	}
	var b model.Batch
	var out model.StepResult
	step := func() {
		b.Seqs = b.Seqs[:0]
		for _, s := range ss {
			b.Seqs = append(b.Seqs, h.entry(s, len(s.tokens)-s.computed))
		}
		h.exec.Execute(&b, &out)
		for i, s := range ss {
			s.computed = len(s.tokens)
			s.tokens = append(s.tokens, out.Tokens[i])
		}
	}
	for i := 0; i < 20; i++ {
		step() // grow the buffers, the token slices
	}
	for _, s := range ss {
		s.tokens = slices.Grow(s.tokens, 200)
	}
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Fatalf("%v allocations per decode step", n)
	}
}

// TestAttentionPathsAgree runs the same requests through attention's two
// ways of reading the pool: float32 views of whole blocks with the vector
// kernels, and bytes decoded one float at a time (the path of a machine
// that cannot view them in place). Every step's logits must be the same
// bits.
func TestAttentionPathsAgree(t *testing.T) {
	w := llamatest.Random(llamatest.Shape260K, 4, false)
	r := rand.New(rand.NewPCG(5, 6))
	for i, p := range prompts(w.Config.VocabSize, r) {
		view, dec := newHarness(t, w, 64, 3, nil), newHarness(t, w, 64, 3, nil)
		llama.DecodePoolBytes(dec.exec)
		a, b := view.newSeq(1, p, samplings[i%len(samplings)]), dec.newSeq(1, p, samplings[i%len(samplings)])
		for len(a.tokens) < len(p)+genTokens {
			view.step([]*seq{a}, []int{len(a.tokens) - a.computed})
			dec.step([]*seq{b}, []int{len(b.tokens) - b.computed})
			la, lb := view.exec.Logits(0), dec.exec.Logits(0)
			for k := range la {
				if math.Float32bits(la[k]) != math.Float32bits(lb[k]) {
					t.Fatalf("prompt %d, %d tokens: logit %d is %v through float32 views, %v through bytes", i, len(a.tokens), k, la[k], lb[k])
				}
			}
			if !slices.Equal(a.tokens, b.tokens) {
				t.Fatalf("prompt %d: tokens %v and %v", i, a.tokens, b.tokens)
			}
		}
	}
}
