package llama

import (
	"math"
	"slices"

	"github.com/kvlease/kvlease/model"
)

// sample draws the next token of s from the logits of its last position.
//
// Greedy (Temperature ≤ 0 or NaN): the id with the largest logit, the
// smallest id on ties (NaN logits never win). Otherwise the distribution
// p_i ∝ exp((l_i − max)/Temperature), computed in float64; with TopP in
// (0, 1) only the smallest set of most probable ids whose mass reaches
// TopP is kept (ties broken by smaller id first). Before TopP, MinP in
// (0, 1] drops the ids whose probability is under MinP times the largest
// and TopK > 0 keeps the TopK most probable (same tie order). The draw is a uniform
// u = PRF(Seed, position) in [0, 1): the chosen id is the first, in
// increasing id order (nucleus order with TopP), whose cumulative mass
// exceeds u × total. The same (logits, Seed, position, parameters) give the
// same token on every engine. A Mask sets the logits of the tokens it
// does not allow to -Inf first (so they are never drawn).
func (e *Executor) sample(s *model.Seq, logits []float32) int32 {
	if s.Mask != nil && s.Sampling.Logprobs {
		// Logprobs are the raw distribution's: restore the logits the
		// mask changes once the token is drawn.
		e.unmasked = append(e.unmasked[:0], logits...)
		defer copy(logits, e.unmasked)
	}
	applyMask(logits, s.Mask)
	t, topP := s.Sampling.Temperature, s.Sampling.TopP
	if !(t > 0) {
		return argmax(logits)
	}
	if !(topP > 0 && topP < 1) {
		topP = 1
	}
	topK, minP := s.Sampling.TopK, s.Sampling.MinP
	if topK >= len(logits) {
		topK = 0
	}
	if !(minP > 0 && minP <= 1) {
		minP = 0
	}
	mx := logits[argmax(logits)]
	if math.IsNaN(float64(mx)) || math.IsInf(float64(mx), 0) {
		return argmax(logits)
	}
	if cap(e.probs) < len(logits) {
		e.probs = make([]float64, len(logits))
	}
	p := e.probs[:len(logits)]
	total := 0.0
	for i, l := range logits {
		v := 0.0
		if !math.IsNaN(float64(l)) {
			v = math.Exp((float64(l) - float64(mx)) / t)
		}
		if v < minP { // the largest probability is exp(0) = 1
			v = 0
		}
		p[i] = v
		total += v
	}
	u := uniform(s.Sampling.Seed, uint64(len(s.Tokens)))
	if topP == 1 && topK <= 0 {
		target := u * total
		acc := 0.0
		for i, v := range p {
			acc += v
			if acc > target {
				return int32(i)
			}
		}
		return argmax(logits) // rounding left u × total at the very top
	}
	if cap(e.order) < len(p) {
		e.order = make([]int32, len(p))
	}
	ord := e.order[:len(p)]
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortFunc(ord, func(a, b int32) int {
		switch {
		case p[a] > p[b]:
			return -1
		case p[a] < p[b]:
			return 1
		}
		return int(a - b)
	})
	if topK > 0 {
		total = 0
		for _, id := range ord[:topK] {
			total += p[id]
		}
		ord = ord[:topK]
	}
	kept, acc := len(ord), 0.0
	for i, id := range ord {
		acc += p[id]
		if acc >= topP*total {
			kept = i + 1
			break
		}
	}
	mass := 0.0
	for _, id := range ord[:kept] {
		mass += p[id]
	}
	target := u * mass
	acc = 0
	for _, id := range ord[:kept] {
		acc += p[id]
		if acc > target {
			return id
		}
	}
	return ord[0]
}

// argmax is the smallest index of the largest value; NaN never wins.
func argmax(x []float32) int32 {
	best, bv := 0, float32(math.Inf(-1))
	for i, v := range x {
		if v > bv {
			best, bv = i, v
		}
	}
	return int32(best)
}

// uniform is a float64 in [0, 1) from (seed, position): splitmix64 of both,
// its top 53 bits.
func uniform(seed, pos uint64) float64 {
	return float64(mix64(mix64(seed^0x6c6c616d6153616d)+pos)>>11) * 0x1p-53
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// logprobs is the log-softmax of logits (the model's raw distribution,
// before temperature and truncation) at tok, and the k most probable ids
// (at most model.MaxTopLogprobs; ties by smaller id). The sum is taken in
// float64 around the largest logit; NaN logits count as never produced.
// Top is a slice of e.tops, valid until the next Execute.
func (e *Executor) logprobs(logits []float32, tok int32, k int) model.Logprobs {
	lse, top := e.topLogprobs(logits, k)
	return model.Logprobs{Logprob: logprobAt(logits, tok, lse), Top: top}
}

// logprobAt is tok's log-probability given the log-sum-exp of the logits.
func logprobAt(logits []float32, tok int32, lse float64) float32 {
	l := float64(logits[tok])
	if math.IsNaN(l) {
		return float32(math.Inf(-1))
	}
	return float32(l - lse)
}

// topLogprobs is the log-sum-exp of logits and the k most probable ids
// with their log-probabilities (see logprobs). Taken before sampling, it
// sees the raw logits: a Mask then changes only the logits of tokens that
// are not sampled.
func (e *Executor) topLogprobs(logits []float32, k int) (float64, []model.TokenLogprob) {
	mx := float64(logits[argmax(logits)])
	sum := 0.0
	for _, l := range logits {
		if !math.IsNaN(float64(l)) {
			sum += math.Exp(float64(l) - mx)
		}
	}
	lse := mx + math.Log(sum)
	k = min(max(k, 0), model.MaxTopLogprobs, len(logits))
	start := len(e.tops)
	// Selection by insertion into a list of at most k: O(V·k), k ≤ 20.
	for id := range logits {
		l := logits[id]
		if math.IsNaN(float64(l)) {
			continue
		}
		top := e.tops[start:]
		if len(top) == k && (k == 0 || l <= logits[top[k-1].Token]) {
			continue
		}
		pos := len(top)
		for pos > 0 && logits[top[pos-1].Token] < l {
			pos--
		}
		if len(top) < k {
			e.tops = append(e.tops, model.TokenLogprob{})
			top = e.tops[start:]
		}
		copy(top[pos+1:], top[pos:len(top)-1])
		top[pos] = model.TokenLogprob{Token: int32(id)}
	}
	top := e.tops[start:len(e.tops):len(e.tops)]
	for i := range top {
		top[i].Logprob = logprobAt(logits, top[i].Token, lse)
	}
	return lse, top
}

// rank is 1 + the number of ids whose logit is larger than tok's (NaN
// logits are never larger; a NaN tok ranks after every other id).
func rank(logits []float32, tok int32) int32 {
	l := logits[tok]
	if math.IsNaN(float64(l)) {
		return int32(len(logits))
	}
	n := int32(1)
	for _, v := range logits {
		if v > l {
			n++
		}
	}
	return n
}

// applyMask sets to -Inf the logits of the tokens mask does not allow
// (model.Seq.Mask; nil allows all). The mask allows at least one token,
// so argmax and the sampler still find one.
func applyMask(logits []float32, mask []uint64) {
	if mask == nil {
		return
	}
	ninf := float32(math.Inf(-1))
	for w, bits := range mask {
		if bits == ^uint64(0) {
			continue
		}
		lo := w * 64
		hi := min(lo+64, len(logits))
		for i := lo; i < hi; i++ {
			if bits&(1<<(i-lo)) == 0 {
				logits[i] = ninf
			}
		}
	}
}
