package llama_test

import (
	"math"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/model/llama"
)

// reference is an independent, plain-loop float64 forward pass over the
// whole token sequence (no pool, no chunks, no caches): the logits of the
// last position. It follows the llama architecture as published (llama2.c's
// run.c): RMSNorm, Q/K/V, RoPE on adjacent pairs, causal grouped-query
// attention, output projection, SwiGLU, final norm, classifier; with the
// family's variants as Hugging Face's modeling code has them: a head width
// of its own (Qwen3's head_dim), Q/K/V biases (Qwen2's), an RMSNorm of each
// query and key head before RoPE (Qwen3's q_norm, k_norm), RoPE on halves
// (rotate_half: element i with element i + head_dim/2), Llama 3.1's
// per-pair frequency factors and linear scaling. The inputs of a matrix
// whose type multiplies rounded inputs (Q8_0, the K-quants) are rounded
// first as its kernels round them (llama.RoundedInputs: 8-bit blocks, as
// llama.cpp's), then everything is exact: the executor's math without its
// float32 roundings. referenceUnrounded keeps the inputs exact: what
// the rounding costs.
func reference(w *llama.Weights, tokens []int32) []float64 {
	return referenceWith(w, tokens, true)
}

func referenceUnrounded(w *llama.Weights, tokens []int32) []float64 {
	return referenceWith(w, tokens, false)
}

func referenceWith(w *llama.Weights, tokens []int32, round bool) []float64 {
	c := w.Config
	hd := c.Dim / c.Heads
	if c.HeadSize != 0 {
		hd = c.HeadSize
	}
	type matrix struct {
		rows [][]float64
		typ  llama.Type
	}
	mat := func(m *llama.Matrix) matrix {
		out := make([][]float64, m.Rows)
		row := make([]float32, m.Cols)
		for r := range out {
			m.Row(r, row)
			out[r] = make([]float64, m.Cols)
			for i, v := range row {
				out[r][i] = float64(v)
			}
		}
		return matrix{out, m.Type}
	}
	vec := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	mul := func(m matrix, x []float64) []float64 {
		if round {
			x32 := make([]float32, len(x))
			for i, v := range x {
				x32[i] = float32(v)
			}
			x = llama.RoundedInputs(m.typ, x32)
		}
		out := make([]float64, len(m.rows))
		for r := range m.rows {
			s := 0.0
			for i := range x {
				s += m.rows[r][i] * x[i]
			}
			out[r] = s
		}
		return out
	}
	norm := func(x, g []float64) []float64 {
		ss := 0.0
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+float64(c.NormEps))
		out := make([]float64, len(x))
		for i := range x {
			out[i] = g[i] * x[i] * inv
		}
		return out
	}
	// rope rotates each head of x: pair j (j < hd/2) is elements (2j,
	// 2j+1), or (j, j+hd/2) on halves, by pos × θ^(-2j/hd) / factor j /
	// linear scale.
	rope := func(x []float64, pos int) {
		for h := 0; h < len(x); h += hd {
			for j := 0; j < hd/2; j++ {
				a := float64(pos) * math.Pow(c.RopeTheta, -float64(2*j)/float64(hd))
				if w.RopeFactors != nil {
					a /= float64(w.RopeFactors[j])
				}
				if c.RopeScale != 0 {
					a /= c.RopeScale
				}
				i0, i1 := h+2*j, h+2*j+1
				if c.Rope == llama.RopeHalves {
					i0, i1 = h+j, h+j+hd/2
				}
				x0, x1 := x[i0], x[i1]
				x[i0] = x0*math.Cos(a) - x1*math.Sin(a)
				x[i1] = x0*math.Sin(a) + x1*math.Cos(a)
			}
		}
	}
	bias := func(x []float64, b []float32) {
		for i := range b {
			x[i] += float64(b[i])
		}
	}
	headNorm := func(x []float64, g []float32) {
		if g == nil {
			return
		}
		for h := 0; h < len(x); h += hd {
			copy(x[h:h+hd], norm(x[h:h+hd], vec(g)))
		}
	}
	emb := mat(&w.Embedding).rows
	n := len(tokens)
	xs := make([][]float64, n)
	for p, t := range tokens {
		xs[p] = append([]float64(nil), emb[t]...)
	}
	for l := range w.Layers {
		L := &w.Layers[l]
		wq, wk, wv, wo := mat(&L.Wq), mat(&L.Wk), mat(&L.Wv), mat(&L.Wo)
		w1, w2, w3 := mat(&L.W1), mat(&L.W2), mat(&L.W3)
		keys, vals, qs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for p := range n {
			xb := norm(xs[p], vec(L.AttnNorm))
			qs[p], keys[p], vals[p] = mul(wq, xb), mul(wk, xb), mul(wv, xb)
			bias(qs[p], L.BQ)
			bias(keys[p], L.BK)
			bias(vals[p], L.BV)
			headNorm(qs[p], L.QNorm)
			headNorm(keys[p], L.KNorm)
			rope(qs[p], p)
			rope(keys[p], p)
		}
		for p := range n {
			att := make([]float64, c.Heads*hd)
			for h := range c.Heads {
				g := h / (c.Heads / c.KVHeads)
				sc := make([]float64, p+1)
				mx := math.Inf(-1)
				for t := 0; t <= p; t++ {
					s := 0.0
					for d := range hd {
						s += qs[p][h*hd+d] * keys[t][g*hd+d]
					}
					sc[t] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[t])
				}
				sum := 0.0
				for t := range sc {
					sc[t] = math.Exp(sc[t] - mx)
					sum += sc[t]
				}
				for t := range sc {
					for d := range hd {
						att[h*hd+d] += sc[t] / sum * vals[t][g*hd+d]
					}
				}
			}
			o := mul(wo, att)
			for i := range o {
				xs[p][i] += o[i]
			}
			xb := norm(xs[p], vec(L.FFNNorm))
			a, b := mul(w1, xb), mul(w3, xb)
			for i := range a {
				a[i] = a[i] / (1 + math.Exp(-a[i])) * b[i]
			}
			f := mul(w2, a)
			for i := range f {
				xs[p][i] += f[i]
			}
		}
	}
	return mul(mat(&w.Output), norm(xs[n-1], vec(w.FinalNorm)))
}

// TestForwardMatchesReference compares the executor's logits (float32
// arithmetic, K/V through the pool's bytes, a prompt in chunks of 5 over
// blocks of 4 tokens, then decode steps) with the float64 reference. The
// tolerance: max |Δlogit| ≤ 1e-3 × (1 + max |logit|), about 30 float32 ulps
// of accumulated rounding through 5 layers; a wrong layout, RoPE pair, head
// mapping or causal mask gives errors of order 1.
func TestForwardMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name   string
		typ    llama.Type
		shape  llama.Config
		shared bool
		// variant changes w (nil: plain llama): a RoPE variant, biases,
		// norms; the test then also checks that the change matters at
		// these positions.
		variant func(w *llama.Weights)
	}{
		{"f32-gqa-shared", llama.F32, llamatest.Shape260K, true, nil},
		{"f32-unshared", llama.F32, llamatest.Shape260K, false, nil},
		{"f16", llama.F16, llamatest.Shape260K, false, nil},
		{"q8_0", llama.Q8_0, withHidden(llamatest.Shape260K, 192), false, nil},
		// Llama 3.1's rope_freqs: one factor per pair, 1 to 8 as its
		// converter computes them (head dim 8: four pairs).
		{"rope-factors", llama.F32, llamatest.Shape260K, false, func(w *llama.Weights) {
			w.RopeFactors = []float32{1, 2.5, 5.75, 8}
		}},
		{"rope-linear", llama.Q8_0, withHidden(llamatest.Shape260K, 192), false, func(w *llama.Weights) {
			w.Config.RopeScale = 4
		}},
		{"rope-factors-linear", llama.F32, llamatest.Shape260K, true, func(w *llama.Weights) {
			w.RopeFactors = []float32{1.5, 1, 3, 8}
			w.Config.RopeScale = 2
		}},
		// qwen2: RoPE on halves, Q/K/V biases.
		{"qwen2-f32", llama.F32, llamatest.Shape260K, true, qwen2},
		{"qwen2-q8_0", llama.Q8_0, withHidden(llamatest.Shape260K, 192), false, qwen2},
		// qwen3: a head width other than dim/heads (4 heads of 32 over
		// dim 64: Wq is 128×64, Wo 64×128), per-head Q/K norms, halves.
		{"qwen3-f32", llama.F32, qwen3Shape, true, qwen3},
		{"qwen3-q8_0", llama.Q8_0, qwen3Shape, false, qwen3},
		{"qwen3-norms-only", llama.F32, qwen3Shape, false, func(w *llama.Weights) { llamatest.AddQKNorms(w, 9) }},
		{"llama-wide-heads", llama.F32, qwen3Shape, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := llamatest.Random(tc.shape, 7, tc.shared)
			llamatest.Quantize(w, tc.typ)
			if tc.variant != nil {
				plain := *w
				plain.Layers = slices.Clone(w.Layers)
				tc.variant(w)
				variantMatters(t, reference(&plain, []int32{1, 17, 300, 5, 5, 42, 99, 511, 3, 250}), reference(w, []int32{1, 17, 300, 5, 5, 42, 99, 511, 3, 250}))
			}
			forwardMatchesReference(t, w)
		})
	}
}

// The variants of the llama family as the loaders build them.
var qwen3Shape = llama.Config{Dim: 64, HiddenDim: 192, Layers: 3, Heads: 4, KVHeads: 2, HeadSize: 32, VocabSize: 512, MaxSeqLen: 512}

func qwen2(w *llama.Weights) {
	w.Config.Rope = llama.RopeHalves
	llamatest.AddBiases(w, 9)
}

func qwen3(w *llama.Weights) {
	w.Config.Rope = llama.RopeHalves
	llamatest.AddQKNorms(w, 9)
}

// variantMatters fails unless a and b (the reference with and without a
// variant) differ by much more than compareLogits tolerates: a forward pass
// that ignored the variant would fail.
func variantMatters(t *testing.T, a, b []float64) {
	t.Helper()
	scale, d := 0.0, 0.0
	for i := range a {
		scale = math.Max(scale, math.Abs(a[i]))
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	if d < 10*1e-3*(1+scale) {
		t.Fatalf("the variant moves the reference's logits by %g only: the test would not see it ignored", d)
	}
}

func withHidden(c llama.Config, h int) llama.Config { c.HiddenDim = h; return c }

// compareLogits fails when max |got − want| > tol × (1 + max |want|), or
// when the logits are too small for the check to mean anything; it
// returns max |got − want| / (1 + max |want|).
func compareLogits(t *testing.T, got []float32, want []float64, tol float64) float64 {
	t.Helper()
	scale, worst := 0.0, 0.0
	for i := range want {
		scale = math.Max(scale, math.Abs(want[i]))
		worst = math.Max(worst, math.Abs(float64(got[i])-want[i]))
	}
	if tol := tol * (1 + scale); worst > tol {
		t.Fatalf("max |logit - reference| = %g > %g (max |logit| %g)", worst, tol, scale)
	}
	if scale < 1 {
		t.Fatalf("degenerate logits (max |logit| %g): the test would not see errors", scale)
	}
	return worst / (1 + scale)
}
