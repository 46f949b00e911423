package llama

import (
	"math"
	"testing"

	"github.com/kvlease/kvlease/model"
)

// top_k and min_p restrict the draw to the documented ids; disabled values
// and greedy decoding are unaffected.
func TestSampleTopKMinP(t *testing.T) {
	// Probabilities at temperature 1 ∝ exp(logit): ids 3, 0, 2, 1, 4 in
	// decreasing order (exp(-1) ≈ 0.37, exp(-2) ≈ 0.14, ...).
	logits := []float32{-1, -3, -2, 0, -4}
	var e Executor
	draw := func(s model.Sampling) map[int32]bool {
		got := map[int32]bool{}
		toks := make([]int32, 0, 64)
		for pos := 0; pos < 3000; pos++ {
			toks = toks[:0]
			for i := 0; i < pos%64; i++ {
				toks = append(toks, 0)
			}
			s.Seed = uint64(pos / 64)
			got[e.sample(&model.Seq{Tokens: toks, Sampling: s}, logits)] = true
		}
		return got
	}
	check := func(name string, got map[int32]bool, want ...int32) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: drew %v, want %v", name, got, want)
		}
		for _, id := range want {
			if !got[id] {
				t.Errorf("%s: never drew %d", name, id)
			}
		}
	}
	check("no filter", draw(model.Sampling{Temperature: 1, TopP: 1}), 0, 1, 2, 3, 4)
	check("top_k 1", draw(model.Sampling{Temperature: 1, TopP: 1, TopK: 1}), 3)
	check("top_k 2", draw(model.Sampling{Temperature: 1, TopP: 1, TopK: 2}), 3, 0)
	check("min_p 0.3", draw(model.Sampling{Temperature: 1, TopP: 1, MinP: 0.3}), 3, 0)
	check("min_p 0.1", draw(model.Sampling{Temperature: 1, TopP: 1, MinP: 0.1}), 3, 0, 2)
	check("top_k 3 min_p 0.3", draw(model.Sampling{Temperature: 1, TopP: 1, TopK: 3, MinP: 0.3}), 3, 0)
	check("top_k too large", draw(model.Sampling{Temperature: 1, TopP: 1, TopK: 9}), 0, 1, 2, 3, 4)
	check("greedy ignores them", draw(model.Sampling{TopK: 3, MinP: 0.5}), 3)
}

// logprobs is the log-softmax of the logits: the sampled id's, and the k
// most probable (ties by smaller id) in order, whatever the sampling
// parameters.
func TestLogprobs(t *testing.T) {
	logits := []float32{-1, -3, -2, 0, -4, 0, float32(math.NaN())}
	var e Executor
	lse := math.Log(math.Exp(-1) + math.Exp(-3) + math.Exp(-2) + 2*math.Exp(0) + math.Exp(-4))
	want := func(id int) float32 { return float32(float64(logits[id]) - lse) }
	lp := e.logprobs(logits, 2, 4)
	if lp.Logprob != want(2) {
		t.Errorf("sampled logprob %v, want %v", lp.Logprob, want(2))
	}
	ids := []int32{3, 5, 0, 2} // 3 and 5 tie: the smaller first
	if len(lp.Top) != len(ids) {
		t.Fatalf("top %v", lp.Top)
	}
	for i, id := range ids {
		if lp.Top[i].Token != id || lp.Top[i].Logprob != want(int(id)) {
			t.Errorf("top[%d] = %+v, want id %d logprob %v", i, lp.Top[i], id, want(int(id)))
		}
	}
	if lp := e.logprobs(logits, 6, 0); len(lp.Top) != 0 || !math.IsInf(float64(lp.Logprob), -1) {
		t.Errorf("a NaN logit: %+v, want -Inf and no top", lp)
	}
	// Through Execute's path: the tops of several sequences of one step
	// stay intact.
	a := e.logprobs(logits, 0, 2)
	b := e.logprobs([]float32{5, 1, 2}, 1, 3)
	if a.Top[0].Token != 3 || a.Top[1].Token != 5 || b.Top[0].Token != 0 || b.Top[2].Token != 1 {
		t.Errorf("tops of one step: %+v %+v", a.Top, b.Top)
	}
}

// Penalties reach the llama backend's sampling, greedy included, while
// the logprobs stay the model's: a +100 bias makes its token the greedy
// choice; the sampled token's logprob is the raw one.
func TestPenalizedSampling(t *testing.T) {
	logits := []float32{-1, -3, -2, 0, -4}
	var e Executor
	// Through Execute's order: top logprobs, then sampling on a
	// penalized copy.
	s := &model.Seq{Tokens: []int32{3, 3}, NumPromptTokens: 1,
		Sampling: model.Sampling{Logprobs: true, LogitBias: []model.TokenBias{{Token: 4, Bias: 100}}}}
	pen := append([]float32(nil), logits...)
	model.ApplyPenalties(pen, s, make([]int32, len(logits)))
	if tok := e.sample(s, pen); tok != 4 {
		t.Errorf("greedy with +100 on 4 picked %d", tok)
	}
	s.Sampling = model.Sampling{FrequencyPenalty: 2}
	pen = append(pen[:0], logits...)
	model.ApplyPenalties(pen, s, make([]int32, len(logits)))
	if tok := e.sample(s, pen); tok != 0 {
		t.Errorf("greedy with token 3 (output once) penalized by 2 picked %d, want 0", tok)
	}
	s.Sampling = model.Sampling{AllowedTokens: []int32{1, 2}}
	pen = append(pen[:0], logits...)
	model.ApplyPenalties(pen, s, make([]int32, len(logits)))
	if tok := e.sample(s, pen); tok != 2 {
		t.Errorf("greedy among allowed 1 and 2 picked %d, want 2", tok)
	}
	if logits[3] != 0 {
		t.Error("the raw logits changed")
	}
}

// A mask restricts greedy and sampled draws to the tokens it allows.
func TestSampleMask(t *testing.T) {
	var e Executor
	for _, s := range []model.Sampling{{}, {Temperature: 1, TopP: 1}, {Temperature: 0.7, TopP: 0.9, TopK: 2}} {
		got := map[int32]bool{}
		for pos := 0; pos < 2000; pos++ {
			logits := []float32{-1, -3, -2, 0, -4, 5, 1}
			s.Seed = uint64(pos)
			mask := []uint64{1<<1 | 1<<2 | 1<<4} // 5, the best, is not allowed
			got[e.sample(&model.Seq{Tokens: make([]int32, pos%7), Sampling: s, Mask: mask}, logits)] = true
		}
		for id := range got {
			if id != 1 && id != 2 && id != 4 {
				t.Errorf("%+v: drew %d, which the mask does not allow", s, id)
			}
		}
		if s.Temperature == 0 && (len(got) != 1 || !got[2]) {
			t.Errorf("greedy drew %v, want the best allowed, 2", got)
		}
	}
}

// With logprobs asked for, the logits are left as the model gave them
// (logprobs are the raw distribution's, as vLLM's); without, the mask may
// overwrite them.
func TestSampleMaskKeepsRawLogitsForLogprobs(t *testing.T) {
	var e Executor
	logits := []float32{-1, -3, -2, 0, -4, 5, 1}
	want := append([]float32(nil), logits...)
	tok := e.sample(&model.Seq{Sampling: model.Sampling{Logprobs: true}, Mask: []uint64{1 << 2}}, logits)
	if tok != 2 {
		t.Fatalf("drew %d under a mask of 2", tok)
	}
	for i := range logits {
		if logits[i] != want[i] {
			t.Fatalf("logit %d changed from %v to %v", i, want[i], logits[i])
		}
	}
}
