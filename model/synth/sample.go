package synth

import (
	"math"
	"sort"

	"github.com/kvlease/kvlease/model"
)

// baseChars is the readable byte distribution every sampled byte comes
// from: English letter frequencies scaled to about 80%, spaces about 17%,
// and a little punctuation. Weights are in units of 1e-5 and sorted by
// decreasing weight (ties in a fixed order), which top_p relies on. Only
// printable ASCII and '\n': the output is always valid UTF-8.
var baseChars = [...]struct {
	b byte
	w float64
}{
	{' ', 17000}, {'e', 10160}, {'t', 7248}, {'a', 6536}, {'o', 6008},
	{'i', 5576}, {'n', 5400}, {'s', 5064}, {'h', 4872}, {'r', 4792},
	{'d', 3400}, {'l', 3224}, {'c', 2224}, {'u', 2208}, {'m', 1928},
	{'w', 1888}, {'f', 1784}, {'g', 1616}, {'y', 1576}, {'p', 1544},
	{'b', 1192}, {',', 1000}, {'.', 900}, {'v', 784}, {'k', 616},
	{'\n', 400}, {'\'', 200}, {'-', 150}, {'j', 120}, {'x', 120},
	{'?', 100}, {'!', 100}, {'q', 80}, {'z', 56},
}

// table maps a uniform 32-bit draw to a byte: the draw x picks the first i
// with x < cum[i]. cum is non-decreasing and ends at 1<<32.
type table struct {
	toks []int32
	cum  []uint64
	// from[v] is where pick's scan starts for a draw whose top byte is v:
	// the first i with cum[i] > v<<24 (no earlier threshold can exceed
	// such a draw), so the scan takes a step or two, not up to len(cum).
	from [256]uint8
}

func (t *table) pick(x uint32) int32 {
	for i := int(t.from[x>>24]); i < len(t.cum); i++ {
		if uint64(x) < t.cum[i] {
			return t.toks[i]
		}
	}
	return t.toks[len(t.toks)-1] // unreachable: the last threshold is 1<<32
}

// index fills from (see table).
func (t *table) index() {
	i := 0
	for v := range t.from {
		for i < len(t.cum)-1 && t.cum[i] <= uint64(v)<<24 {
			i++
		}
		t.from[v] = uint8(i)
	}
}

// shapeKey identifies a sampling table. Both fields are sanitized (no NaN),
// so equal parameters give equal keys.
type shapeKey struct {
	temperature float64
	topP        float64
	topK        int
	minP        float64
}

// maxTables bounds the executor's cache of shaped tables; at the bound it is
// cleared (tables are cheap to rebuild and results do not depend on it).
const maxTables = 64

// buildTable shapes the base distribution with temperature t (> 0), then
// keeps the topK most probable bytes (0: all) and those at least minP times
// as probable as the most probable (0: all), then applies nucleus topP (in
// (0, 1]) to what is left:
//
//   - temperature: p_i ∝ w_i^(1/t), computed as exp((ln w_i − ln w_max)/t).
//     t < 1 sharpens towards the frequent bytes (t → 0 gives spaces only),
//     t > 1 flattens towards uniform over the 34 bytes;
//   - top_p: keep the smallest set of most probable bytes whose probability
//     reaches topP (at least one), renormalized.
//
// The shaped probabilities keep the base order, so the nucleus is a prefix.
// It uses math.Log and math.Exp: tables are deterministic on a platform;
// across platforms a threshold may differ in its last bit.
func buildTable(t, topP float64, topK int, minP float64) *table {
	n := len(baseChars)
	if topK > 0 && topK < n {
		n = topK // the base order is by decreasing probability
	}
	p := make([]float64, n)
	lmax := math.Log(baseChars[0].w)
	for i, c := range baseChars[:n] {
		if t == 1 {
			p[i] = c.w
		} else {
			p[i] = math.Exp((math.Log(c.w) - lmax) / t)
		}
	}
	if minP > 0 {
		for i := 1; i < n; i++ { // p[0] is the largest
			if p[i] < minP*p[0] {
				n, p = i, p[:i]
				break
			}
		}
	}
	total := 0.0
	for _, v := range p {
		total += v
	}
	keep, kept := n, total
	if topP < 1 {
		acc := 0.0
		for i, v := range p {
			acc += v
			if acc >= topP*total {
				keep, kept = i+1, acc
				break
			}
		}
	}
	tb := &table{toks: make([]int32, keep), cum: make([]uint64, keep)}
	acc := 0.0
	for i := 0; i < keep; i++ {
		acc += p[i]
		tb.toks[i] = int32(baseChars[i].b)
		tb.cum[i] = uint64(math.Round(acc / kept * (1 << 32)))
	}
	tb.cum[keep-1] = 1 << 32
	tb.index()
	return tb
}

// sanitize maps sampling parameters to a table key. Temperature ≤ 0 or NaN
// is greedy (ok false). TopP outside (0, 1) or NaN disables nucleus sampling:
// the engine validates parameters at the edge; here bad values must not
// panic or grow the table cache.
func sanitize(s model.Sampling) (k shapeKey, ok bool) {
	if !(s.Temperature > 0) {
		return shapeKey{}, false
	}
	k = shapeKey{temperature: s.Temperature, topP: s.TopP, minP: s.MinP}
	if !(k.topP > 0 && k.topP < 1) {
		k.topP = 1
	}
	if s.TopK > 0 && s.TopK < len(baseChars) {
		k.topK = s.TopK
	}
	if !(k.minP > 0 && k.minP <= 1) {
		k.minP = 0
	}
	return k, true
}

// isEOS decides EOS from the top 53 bits of r: probability p exactly.
func isEOS(r uint64, p float64) bool {
	return float64(r>>11)*0x1p-53 < p
}

// rawLogprobs is the model's raw distribution, the one temperature 1 and
// no truncation samples from: EOS with probability EOSProbability, else a
// byte of baseChars in proportion to its weight; every other token never.
// It returns each token's log-probability (-Inf for the never) and the
// tokens with a probability by decreasing probability (ties by smaller
// id), at most model.MaxTopLogprobs of them. The distribution does not
// depend on the context: the context decides which token a draw picks.
func rawLogprobs(p Profile) ([]float32, []model.TokenLogprob) {
	lp := make([]float32, p.VocabSize)
	for i := range lp {
		lp[i] = float32(math.Inf(-1))
	}
	total := 0.0
	for _, c := range baseChars {
		total += c.w
	}
	for _, c := range baseChars {
		lp[c.b] = float32(math.Log((1 - p.EOSProbability) * c.w / total))
	}
	if p.EOSProbability > 0 {
		lp[p.EOS] = float32(math.Log(p.EOSProbability))
	}
	var top []model.TokenLogprob
	for id, v := range lp {
		if !math.IsInf(float64(v), -1) {
			top = append(top, model.TokenLogprob{Token: int32(id), Logprob: v})
		}
	}
	sort.SliceStable(top, func(i, j int) bool { return top[i].Logprob > top[j].Logprob })
	if len(top) > model.MaxTopLogprobs {
		top = top[:model.MaxTopLogprobs]
	}
	return lp, top
}

// ranks is each token's rank under lp: 1 + the number of tokens with a
// larger log-probability.
func ranks(lp []float32) []int32 {
	sorted := append([]float32(nil), lp...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] > sorted[j] })
	r := make([]int32, len(lp))
	for i, v := range lp {
		r[i] = int32(sort.Search(len(sorted), func(k int) bool { return sorted[k] <= v })) + 1
	}
	return r
}
