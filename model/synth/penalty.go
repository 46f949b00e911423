package synth

import (
	"math"
	"slices"

	"github.com/kvlease/kvlease/model"
)

// samplePenalized draws the token of s, whose sampling parameters carry
// logit biases or penalties, with the request's draw r. The logits are the
// model's log-probabilities (rawLogprobs; under a mask, those of
// sampleMasked: EOS with EOSProbability when allowed, the allowed bytes in
// proportion to maskWeights), changed by model.ApplyPenalties. Sampling
// (sampled true, no mask) then shapes them as the llama backend does:
// temperature, min_p, top_k, top_p (k). Greedy decoding keeps temperature
// 1 and no truncation: this model's greedy draw is the context's (r), from
// its distribution. A token the model never produces stays impossible
// whatever its bias.
func (e *Executor) samplePenalized(s *model.Seq, r uint64, k shapeKey, sampled bool) int32 {
	v := e.prof.VocabSize
	if cap(e.pen) < v {
		e.pen, e.counts, e.probs, e.order = make([]float32, v), make([]int32, v), make([]float64, v), make([]int32, v)
	}
	logits := e.pen[:v]
	if s.Mask == nil {
		copy(logits, e.logprob)
	} else if !e.maskedLogits(logits, s.Mask) {
		return e.sampleMasked(s.Mask, r) // every allowed byte weighs nothing: uniform, nothing to penalize
	} else {
		sampled = false // a mask's distribution is not reshaped (sampleMasked)
	}
	model.ApplyPenalties(logits, s, e.counts)
	t := 1.0
	topP, topK, minP := 1.0, 0, 0.0
	if sampled {
		t, topP, topK, minP = k.temperature, k.topP, k.topK, k.minP
	}
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	if math.IsInf(mx, -1) {
		// No token the model produces is allowed (allowed_token_ids
		// outside its bytes): the smallest allowed id.
		if len(s.Sampling.AllowedTokens) > 0 {
			return slices.Min(s.Sampling.AllowedTokens)
		}
		return e.prof.EOS // unreachable: biases are finite, the model has a token
	}
	p := e.probs[:v]
	for i, l := range logits {
		p[i] = 0
		if w := math.Exp((float64(l) - mx) / t); w >= minP {
			p[i] = w // the largest is exp(0) = 1
		}
	}
	ord := e.order[:0]
	for i, w := range p {
		if w > 0 {
			ord = append(ord, int32(i))
		}
	}
	slices.SortStableFunc(ord, func(a, b int32) int {
		switch {
		case p[a] > p[b]:
			return -1
		case p[a] < p[b]:
			return 1
		}
		return 0 // ties keep the smaller id first
	})
	if topK > 0 && topK < len(ord) {
		ord = ord[:topK]
	}
	total := 0.0
	for _, id := range ord {
		total += p[id]
	}
	if topP < 1 {
		acc := 0.0
		for i, id := range ord {
			acc += p[id]
			if acc >= topP*total {
				ord, total = ord[:i+1], acc
				break
			}
		}
	}
	target := float64(mix64(r^domainBytes)>>11) * 0x1p-53 * total
	acc := 0.0
	for _, id := range ord {
		acc += p[id]
		if acc > target {
			return id
		}
	}
	return ord[0] // rounding left the target at the very top
}

// maskedLogits writes the log-probabilities of sampleMasked's
// distribution under mask into logits (-Inf for the tokens it never
// draws). It reports false when no allowed byte has a weight while some
// byte is allowed (sampleMasked then draws uniformly).
func (e *Executor) maskedLogits(logits []float32, mask []uint64) bool {
	total, n := maskedBytes(mask)
	if n > 0 && total == 0 {
		return false
	}
	for i := range logits {
		logits[i] = float32(math.Inf(-1))
	}
	bytesShare := 1.0
	if allowed(mask, e.prof.EOS) {
		if n == 0 {
			logits[e.prof.EOS] = 0
			return true
		}
		logits[e.prof.EOS] = float32(math.Log(e.prof.EOSProbability))
		bytesShare = 1 - e.prof.EOSProbability
	}
	for b := 0; b < 256; b++ {
		if allowed(mask, int32(b)) && maskWeights[b] > 0 {
			logits[b] = float32(math.Log(bytesShare * float64(maskWeights[b]) / float64(total)))
		}
	}
	return true
}
