package model

import (
	"math"
	"slices"
	"time"

	"github.com/kvlease/kvlease/kvblock"
)

// Sampling are a request's sampling parameters.
type Sampling struct {
	// Temperature 0 is greedy: the token depends only on the context.
	Temperature float64
	// TopP in (0, 1]; 1 disables nucleus sampling.
	TopP float64
	// TopK keeps only the TopK most probable tokens; 0 (or less) disables
	// it. MinP in (0, 1] keeps only tokens whose probability is at least
	// MinP times the most probable one's; 0 disables it. Both act on the
	// temperature-shaped distribution, before TopP, and only when
	// sampling: greedy decoding ignores them (the most probable token
	// survives both), as vLLM's greedy path does.
	TopK int
	MinP float64
	// Seed makes non-greedy sampling reproducible. The engine draws one for
	// requests that do not set it.
	Seed uint64
	// Logprobs asks for the sampled token's log-probability and the
	// TopLogprobs (at most MaxTopLogprobs) most probable tokens with
	// theirs, in StepResult.Logprobs. They are the model's distribution
	// as it is, before temperature, penalties, biases and truncation
	// (vLLM's default, raw logprobs), so they do not depend on the
	// sampling parameters.
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs asks for the log-probabilities of the prompt's tokens
	// (StepResult.PromptLogprobs): each prompt token after the first,
	// given the tokens before it, with its rank and the PromptTopLogprobs
	// most probable tokens. The scheduler then computes every prompt
	// position (no prefix-cache hit), as vLLM does for prompt_logprobs.
	PromptLogprobs    bool
	PromptTopLogprobs int
	// Penalties and biases change the logits before sampling (greedy
	// decoding included), in vLLM's order: LogitBias is added to its
	// tokens' logits; then RepetitionPenalty (off at 0 or 1) divides the
	// positive and multiplies the negative logits of the tokens in the
	// prompt or the output; FrequencyPenalty times its count and
	// PresencePenalty once are subtracted from the logit of each token in
	// the output. Logprobs are taken before them. See ApplyPenalties.
	LogitBias []TokenBias
	// AllowedTokens, when not empty, are the only tokens sampling may
	// pick (vLLM's allowed_token_ids): the others' logits become -Inf
	// first.
	AllowedTokens []int32
	// BadWords are token sequences (vLLM's bad_words, tokenized): a
	// word's last token is -Inf when the output ends with the word's
	// other tokens (always, for a one-token word).
	BadWords          [][]int32
	RepetitionPenalty float32
	FrequencyPenalty  float32
	PresencePenalty   float32
}

// TokenBias is a logit_bias entry.
type TokenBias struct {
	Token int32
	Bias  float32
}

// Penalized reports whether s changes the logits (ApplyPenalties has
// something to do).
func (s *Sampling) Penalized() bool {
	return len(s.LogitBias) > 0 || len(s.AllowedTokens) > 0 || len(s.BadWords) > 0 || (s.RepetitionPenalty > 0 && s.RepetitionPenalty != 1) ||
		s.FrequencyPenalty != 0 || s.PresencePenalty != 0
}

// ApplyPenalties applies seq's logit biases and penalties (Sampling) to
// logits, indexed by token id, in place. counts is scratch of at least
// len(logits) zeros, left zeroed. Tokens out of range of logits are
// skipped; a -Inf logit stays -Inf.
func ApplyPenalties(logits []float32, seq *Seq, counts []int32) {
	sp := &seq.Sampling
	if len(sp.AllowedTokens) > 0 {
		for _, t := range sp.AllowedTokens {
			if t >= 0 && int(t) < len(logits) {
				counts[t] = 1
			}
		}
		inf := float32(math.Inf(-1))
		for i := range logits {
			if counts[i] == 0 {
				logits[i] = inf
			}
			counts[i] = 0
		}
	}
	out := seq.Tokens[min(seq.NumPromptTokens, len(seq.Tokens)):]
	for _, w := range sp.BadWords {
		if n := len(w); n > 0 && int(w[n-1]) < len(logits) && w[n-1] >= 0 && endsWith(out, w[:n-1]) {
			logits[w[n-1]] = float32(math.Inf(-1))
		}
	}
	for _, b := range sp.LogitBias {
		if b.Token >= 0 && int(b.Token) < len(logits) {
			logits[b.Token] += b.Bias
		}
	}
	if rp := sp.RepetitionPenalty; rp > 0 && rp != 1 {
		// counts marks each token once: 1 seen.
		for _, t := range seq.Tokens {
			if t >= 0 && int(t) < len(logits) && counts[t] == 0 {
				counts[t] = 1
				if l := logits[t]; l > 0 {
					logits[t] = l / rp
				} else {
					logits[t] = l * rp
				}
			}
		}
		for _, t := range seq.Tokens {
			if t >= 0 && int(t) < len(logits) {
				counts[t] = 0
			}
		}
	}
	if sp.FrequencyPenalty == 0 && sp.PresencePenalty == 0 {
		return
	}
	for _, t := range out {
		if t >= 0 && int(t) < len(logits) {
			counts[t]++
		}
	}
	for _, t := range out {
		if t < 0 || int(t) >= len(logits) || counts[t] == 0 {
			continue // counted already
		}
		logits[t] -= sp.FrequencyPenalty*float32(counts[t]) + sp.PresencePenalty
		counts[t] = 0
	}
}

// PromptLogprobs are the logprobs of prompt tokens From, From+1, ...
type PromptLogprobs struct {
	From    int
	Entries []Logprobs
}

// PromptRange is the range [from, to) of prompt tokens a step computing
// positions [start, start+count) of a prompt of numPrompt tokens scores:
// position q's logits score token q+1, and token 0 has no score.
func PromptRange(start, count, numPrompt int) (from, to int) {
	from = start + 1
	to = min(start+count, numPrompt-1) + 1
	if to < from {
		return from, from
	}
	return from, to
}

// MaxTopLogprobs bounds Sampling.TopLogprobs (vLLM's default
// max_logprobs).
const MaxTopLogprobs = 20

// TokenLogprob is a token and its log-probability (natural log; -Inf for a
// token the model never produces).
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Logprobs are a sampled token's log-probability and the most probable
// tokens' (most probable first, ties by smaller id). Rank (prompt
// logprobs only) is 1 + the number of tokens more probable than it.
type Logprobs struct {
	Logprob float32
	Rank    int32
	Top     []TokenLogprob
}

// Seq is one request's share of a batch.
type Seq struct {
	// Req is the engine's internal number for the request.
	Req uint64
	// Tokens are all known tokens of the request, prompt then generated.
	// Owned by the engine; read-only for the executor.
	Tokens []int32
	// Start is the first position computed in this step; positions before
	// it already have KV in Blocks.
	Start int
	// Count is how many positions this step computes: Start..Start+Count-1.
	Count int
	// Blocks is the request's block table; it covers at least Start+Count
	// token slots. Owned by the pool; read-only.
	Blocks []kvblock.BlockID
	// Sample is set when Start+Count == len(Tokens): the step must sample the
	// next token.
	Sample   bool
	Sampling Sampling
	// Mask, when non-nil, is the set of token ids the step may sample (bit
	// id%64 of word id/64; constrain.Vocab.Mask): an executor samples from
	// its distribution restricted to them. It always allows at least one
	// token. Owned by the engine; read-only.
	Mask []uint64
	// NumPromptTokens is how many of Tokens are the prompt (for
	// Sampling.PromptLogprobs).
	NumPromptTokens int
	// Adapter is the LoRA adapter the sequence runs with (the zero
	// Adapter: the base model). An executor that cannot apply adapters is
	// never given one: the edge refuses them at start.
	Adapter kvblock.Adapter
}

// Batch is the work of one engine step. The engine reuses its memory: an
// executor must not keep references past Execute.
type Batch struct {
	Seqs []Seq
}

// NumTokens is the number of positions the batch computes.
func (b *Batch) NumTokens() int {
	n := 0
	for i := range b.Seqs {
		n += b.Seqs[i].Count
	}
	return n
}

// NoToken marks a sequence that sampled nothing this step.
const NoToken int32 = -1

// StepResult is what an executor returns for a batch.
type StepResult struct {
	// Tokens has one entry per Batch.Seqs entry: the sampled token, or
	// NoToken when Sample was false.
	Tokens []int32
	// Logprobs has one entry per Batch.Seqs entry, set for those that
	// sampled with Sampling.Logprobs (the zero value for the others). The
	// Top slices are the executor's, valid until its next Execute.
	Logprobs []Logprobs
	// PromptLogprobs has one entry per Batch.Seqs entry: for a sequence
	// with Sampling.PromptLogprobs, the logprobs of the prompt tokens
	// this step scored (Tokens[From], Tokens[From+1], ...: the prompt
	// tokens after each computed position); empty for the others. The
	// executor's, valid until its next Execute.
	PromptLogprobs []PromptLogprobs
	// Duration is how long the step takes on the modelled hardware.
	Duration time.Duration
}

// Executor runs batches. Implementations used by pure cores must be
// deterministic: the same batch on the same pool content gives the same
// result.
type Executor interface {
	// Execute writes the KV of every computed position into the blocks
	// and fills out (reusing out.Tokens' memory).
	Execute(b *Batch, out *StepResult)
}

// endsWith reports whether s ends with suffix.
func endsWith(s, suffix []int32) bool {
	if len(suffix) > len(s) {
		return false
	}
	return slices.Equal(s[len(s)-len(suffix):], suffix)
}
