package model

import (
	"math"
	"testing"
)

// ApplyPenalties follows vLLM's semantics: bias added; repetition divides
// positive and multiplies negative logits of tokens in prompt or output;
// frequency times the output count and presence once are subtracted for
// output tokens only; -Inf stays; the scratch is left zeroed.
func TestApplyPenalties(t *testing.T) {
	inf := float32(math.Inf(-1))
	seq := &Seq{Tokens: []int32{0, 1, 2, 2, 3, 3, 3}, NumPromptTokens: 2}
	for _, tc := range []struct {
		name string
		s    Sampling
		want []float32
	}{
		{"none", Sampling{}, []float32{2, -2, 1, -1, 4, inf}},
		{"bias", Sampling{LogitBias: []TokenBias{{4, -10}, {5, 50}, {9, 1}}}, []float32{2, -2, 1, -1, -6, inf}},
		{"repetition", Sampling{RepetitionPenalty: 2}, []float32{1, -4, 0.5, -2, 4, inf}},
		{"repetition 1 is off", Sampling{RepetitionPenalty: 1}, []float32{2, -2, 1, -1, 4, inf}},
		{"frequency", Sampling{FrequencyPenalty: 0.5}, []float32{2, -2, 0, -2.5, 4, inf}},
		{"presence", Sampling{PresencePenalty: 1.5}, []float32{2, -2, -0.5, -2.5, 4, inf}},
		{"bad words", Sampling{BadWords: [][]int32{{4}, {3, 1}, {2, 0}, {9, 9, 2}}}, []float32{2, inf, 1, -1, inf, inf}},
		{"allowed", Sampling{AllowedTokens: []int32{1, 5, 4, 9}}, []float32{inf, -2, inf, inf, 4, inf}},
		{"all", Sampling{LogitBias: []TokenBias{{0, 1}}, RepetitionPenalty: 2, FrequencyPenalty: 1, PresencePenalty: -1},
			[]float32{1.5, -4, 0.5 - 1, -2 - 2, 4, inf}},
	} {
		logits := []float32{2, -2, 1, -1, 4, inf}
		counts := make([]int32, len(logits))
		s := *seq
		s.Sampling = tc.s
		ApplyPenalties(logits, &s, counts)
		for i := range logits {
			if logits[i] != tc.want[i] {
				t.Errorf("%s: logits %v, want %v", tc.name, logits, tc.want)
				break
			}
		}
		for _, c := range counts {
			if c != 0 {
				t.Fatalf("%s: scratch left %v", tc.name, counts)
			}
		}
		if got := tc.s.Penalized(); got != (tc.name != "none" && tc.name != "repetition 1 is off") {
			t.Errorf("%s: Penalized %v", tc.name, got)
		}
	}
}
