package llama_test

import (
	"testing"

	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/model"
)

// Prompt logprobs: each prompt token after the first is scored by the
// logits of the position before it, the same whether the prompt is
// computed at once or in chunks beside another sequence, and equal to the
// logprob a step sampling there reports for that token.
func TestPromptLogprobsChunked(t *testing.T) {
	w := llamatest.Random(llamatest.Shape260K, 5, false)
	// 70 tokens: scored at once, the rows span three of scorePrompt's
	// blocks of 32.
	prompt := make([]int32, 70)
	for i := range prompt {
		prompt[i] = int32(1 + (i*37+i*i)%500)
	}
	sp := model.Sampling{PromptLogprobs: true, PromptTopLogprobs: 3}
	run := func(chunk int) []model.Logprobs {
		h := newHarness(t, w, 128, 4, nil)
		s := h.newSeq(1, prompt, sp)
		other := h.newSeq(2, []int32{9, 8, 7, 6, 5}, model.Sampling{})
		var got []model.Logprobs
		for s.computed < len(prompt) {
			n := min(chunk, len(s.tokens)-s.computed)
			var b model.Batch
			b.Seqs = append(b.Seqs, h.entry(other, len(other.tokens)-other.computed), h.entry(s, n))
			b.Seqs[1].NumPromptTokens = len(prompt)
			var out model.StepResult
			h.exec.Execute(&b, &out)
			if len(out.PromptLogprobs) != 2 || len(out.PromptLogprobs[0].Entries) != 0 {
				t.Fatalf("prompt logprobs for a sequence that did not ask: %+v", out.PromptLogprobs)
			}
			p := out.PromptLogprobs[1]
			if p.From != len(got)+1 && len(p.Entries) > 0 {
				t.Fatalf("chunk at %d scores from token %d, want %d", s.computed, p.From, len(got)+1)
			}
			for _, e := range p.Entries {
				got = append(got, model.Logprobs{Logprob: e.Logprob, Rank: e.Rank, Top: append([]model.TokenLogprob(nil), e.Top...)})
			}
			s.computed += n
			other.computed = len(other.tokens)
			if out.Tokens[1] != model.NoToken {
				s.tokens = append(s.tokens, out.Tokens[1])
			}
			other.tokens = append(other.tokens, out.Tokens[0])
		}
		return got
	}
	whole, chunked := run(len(prompt)), run(5)
	if len(whole) != len(prompt)-1 || len(chunked) != len(whole) {
		t.Fatalf("%d and %d entries for a %d-token prompt", len(whole), len(chunked), len(prompt))
	}
	for k := range whole {
		if whole[k].Logprob != chunked[k].Logprob || len(whole[k].Top) != 3 || whole[k].Top[0] != chunked[k].Top[0] {
			t.Errorf("token %d: whole %+v, chunked %+v", k+1, whole[k], chunked[k])
		}
		if whole[k].Logprob > whole[k].Top[0].Logprob {
			t.Errorf("token %d: logprob %v above the top's %v", k+1, whole[k].Logprob, whole[k].Top[0].Logprob)
		}
		// The rank agrees with the top: first when it is the top token,
		// after the top ones otherwise.
		if r, tok := whole[k].Rank, prompt[k+1]; r != chunked[k].Rank || (tok == whole[k].Top[0].Token) != (r == 1) ||
			(r > 3 && (tok == whole[k].Top[1].Token || tok == whole[k].Top[2].Token)) || r < 1 {
			t.Errorf("token %d (%d): rank %d, top %+v", k+1, tok, r, whole[k].Top)
		}
	}
	// The last prompt token's alternatives are those a step sampling at
	// the position before reports.
	h := newHarness(t, w, 64, 4, nil)
	s := h.newSeq(1, prompt[:len(prompt)-1], model.Sampling{Logprobs: true, TopLogprobs: 20})
	var b model.Batch
	b.Seqs = append(b.Seqs, h.entry(s, len(s.tokens)))
	var out model.StepResult
	h.exec.Execute(&b, &out)
	if got, want := whole[len(whole)-1].Top, out.Logprobs[0].Top[:3]; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("last prompt token's top %+v, a sampling step's %+v", got, want)
	}
}
