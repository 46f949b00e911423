package llama_test

import (
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/llama"
)

// harness drives an Executor over its own pool the way the engine does:
// each request holds blocks covering its positions; steps compute chunks.
type harness struct {
	pool *kvblock.Pool
	exec *llama.Executor
	bs   int
}

func newHarness(t testing.TB, w *llama.Weights, blocks, blockSize int, run llama.Runner) *harness {
	t.Helper()
	pool := kvblock.New(kvblock.Config{NumBlocks: blocks, BlockSizeTokens: blockSize, BytesPerToken: w.Config.BytesPerToken()})
	e, err := llama.New(w, pool, run)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{pool: pool, exec: e, bs: blockSize}
}

// seq is one request in the harness.
type seq struct {
	id       uint64
	hold     kvblock.HoldID
	tokens   []int32
	computed int
	sampling model.Sampling
}

func (h *harness) newSeq(id uint64, prompt []int32, s model.Sampling) *seq {
	return &seq{id: id, hold: h.pool.NewHold(kvblock.HoldRequest, id), tokens: append([]int32(nil), prompt...), sampling: s}
}

// entry makes the batch entry computing the next n positions of s
// (allocating blocks as needed).
func (h *harness) entry(s *seq, n int) model.Seq {
	end := s.computed + n
	need := (end+h.bs-1)/h.bs - h.pool.Len(s.hold)
	if need > 0 && !h.pool.Allocate(s.hold, need) {
		panic("harness: pool exhausted")
	}
	return model.Seq{Req: s.id, Tokens: s.tokens, Start: s.computed, Count: n,
		Blocks: h.pool.Blocks(s.hold), Sample: end == len(s.tokens), Sampling: s.sampling}
}

// step executes entries and advances their sequences, appending sampled
// tokens. It returns the sampled tokens (NoToken for non-sampling entries).
func (h *harness) step(seqs []*seq, counts []int) []int32 {
	var b model.Batch
	for i, s := range seqs {
		b.Seqs = append(b.Seqs, h.entry(s, counts[i]))
	}
	var out model.StepResult
	h.exec.Execute(&b, &out)
	for i, s := range seqs {
		s.computed += counts[i]
		if out.Tokens[i] != model.NoToken {
			s.tokens = append(s.tokens, out.Tokens[i])
		}
	}
	return out.Tokens
}

// preempt drops s's blocks and computed state, as recompute preemption does.
func (h *harness) preempt(s *seq) {
	h.pool.Release(s.hold)
	s.hold = h.pool.NewHold(kvblock.HoldRequest, s.id)
	s.computed = 0
}
