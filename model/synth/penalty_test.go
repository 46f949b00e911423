package synth

import (
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// Penalized draws keep to the model's tokens (or the mask's), follow the
// biases, and are a function of the draw.
func TestSamplePenalized(t *testing.T) {
	prof, _ := LookupProfile("tiny")
	pool := kvblock.New(kvblock.Config{NumBlocks: 8, BlockSizeTokens: 16})
	e := New(prof, pool, 1)
	mask := make([]uint64, (prof.VocabSize+63)/64)
	for _, id := range []int32{'a', 'b', prof.EOS} {
		mask[id/64] |= 1 << (id % 64)
	}
	for _, tc := range []struct {
		name    string
		s       model.Sampling
		mask    []uint64
		allowed func(int32) bool
	}{
		{"bias +100 on 'x', sampled", model.Sampling{Temperature: 1, TopP: 1, LogitBias: []model.TokenBias{{Token: 'x', Bias: 100}}}, nil,
			func(id int32) bool { return id == 'x' }},
		{"bias +100 on 'A' (never produced)", model.Sampling{Temperature: 1, TopP: 1, LogitBias: []model.TokenBias{{Token: 'A', Bias: 100}}}, nil,
			func(id int32) bool { return id != 'A' && e.logprob[id] > -1e30 }},
		{"masked, 'a' banned", model.Sampling{LogitBias: []model.TokenBias{{Token: 'a', Bias: -100}}}, mask,
			func(id int32) bool { return id == 'b' || id == prof.EOS }},
		{"greedy, top_k 1 is ignored, presence", model.Sampling{TopK: 1, PresencePenalty: 2}, nil,
			func(id int32) bool { return e.logprob[id] > -1e30 }},
	} {
		seen := map[int32]bool{}
		for r := uint64(0); r < 2000; r++ {
			s := &model.Seq{Tokens: []int32{'h', 'i', ' '}, NumPromptTokens: 2, Sampling: tc.s, Mask: tc.mask}
			k, sampled := sanitize(s.Sampling)
			tok := e.samplePenalized(s, r*0x9e3779b97f4a7c15, k, sampled)
			if !tc.allowed(tok) {
				t.Fatalf("%s: drew %d", tc.name, tok)
			}
			if tok != e.samplePenalized(s, r*0x9e3779b97f4a7c15, k, sampled) {
				t.Fatalf("%s: the same draw gave two tokens", tc.name)
			}
			seen[tok] = true
		}
		if tc.name == "greedy, top_k 1 is ignored, presence" && len(seen) < 10 {
			t.Errorf("%s: only %d tokens drawn", tc.name, len(seen))
		}
	}
}
