package llama

import (
	"testing"

	"github.com/kvlease/kvlease/model"
)

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
