package llamatest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/kvlease/kvlease/model/llama"
)

// Shapes of llama2.c's published models (the weights are ours, random).
var (
	// Shape260K is stories260K: about 260K parameters, fast enough for CI.
	Shape260K = llama.Config{Dim: 64, HiddenDim: 172, Layers: 5, Heads: 8, KVHeads: 4, VocabSize: 512, MaxSeqLen: 512}
	// Shape15M is stories15M (dim 288, 6 layers, 6 heads, 32000 tokens).
	Shape15M = llama.Config{Dim: 288, HiddenDim: 768, Layers: 6, Heads: 6, KVHeads: 6, VocabSize: 32000, MaxSeqLen: 256}
	// Shape42M is stories42M.
	Shape42M = llama.Config{Dim: 512, HiddenDim: 1376, Layers: 8, Heads: 8, KVHeads: 8, VocabSize: 32000, MaxSeqLen: 1024}
)

// WithDefaults fills the constants llama2.c files do not carry: RoPE theta
// 10000, RMSNorm epsilon 1e-5, BOS 1 and EOS 2 (SentencePiece's).
func WithDefaults(c llama.Config) llama.Config {
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-5
	}
	if c.BOS == 0 && c.EOS == 0 {
		c.BOS, c.EOS = 1, 2
	}
	return c
}

// Random returns F32 weights of shape c (completed by WithDefaults) drawn
// from seed: matrix entries uniform in ±1/√cols, so activations keep their
// scale through the layers, and norm weights near 1. With shared the output
// classifier is the embedding (as in llama2.c's shared checkpoints).
func Random(c llama.Config, seed uint64, shared bool) *llama.Weights {
	c = WithDefaults(c)
	r := rand.New(rand.NewPCG(seed, 0x6c6c616d61))
	mat := func(rows, cols int) llama.Matrix {
		a := float32(1 / math.Sqrt(float64(cols)))
		f := make([]float32, rows*cols)
		for i := range f {
			f[i] = (2*r.Float32() - 1) * a
		}
		return llama.Matrix{Rows: rows, Cols: cols, Type: llama.F32, F: f}
	}
	norm := func(n int) []float32 {
		f := make([]float32, n)
		for i := range f {
			f[i] = 0.8 + 0.4*r.Float32()
		}
		return f
	}
	w := &llama.Weights{Config: c}
	w.Embedding = mat(c.VocabSize, c.Dim)
	// Embedding rows of unit scale (not 1/√dim): RMSNorm rescales them anyway.
	for i := range w.Embedding.F {
		w.Embedding.F[i] *= float32(math.Sqrt(float64(c.Dim)))
	}
	for range c.Layers {
		w.Layers = append(w.Layers, llama.Layer{
			AttnNorm: norm(c.Dim),
			Wq:       mat(c.QDim(), c.Dim),
			Wk:       mat(c.KVDim(), c.Dim),
			Wv:       mat(c.KVDim(), c.Dim),
			Wo:       mat(c.Dim, c.QDim()),
			FFNNorm:  norm(c.Dim),
			W1:       mat(c.HiddenDim, c.Dim),
			W2:       mat(c.Dim, c.HiddenDim),
			W3:       mat(c.HiddenDim, c.Dim),
		})
	}
	w.FinalNorm = norm(c.Dim)
	if shared {
		w.Output = w.Embedding
	} else {
		w.Output = mat(c.VocabSize, c.Dim)
		// Logits of a useful spread: sampling tests need more than one
		// plausible token, greedy tests a clear winner most of the time.
		for i := range w.Output.F {
			w.Output.F[i] *= 4
		}
	}
	return w
}

// AddBiases gives every layer of w Q, K and V biases (qwen2's) drawn from
// seed, uniform in ±0.5: large enough that a forward pass ignoring them
// gives other logits.
func AddBiases(w *llama.Weights, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x62696173))
	vec := func(n int) []float32 {
		f := make([]float32, n)
		for i := range f {
			f[i] = r.Float32() - 0.5
		}
		return f
	}
	c := w.Config
	for i := range w.Layers {
		l := &w.Layers[i]
		l.BQ, l.BK, l.BV = vec(c.QDim()), vec(c.KVDim()), vec(c.KVDim())
	}
}

// AddQKNorms gives every layer of w per-head Q and K RMSNorm weights
// (qwen3's) drawn from seed, in [0.5, 2).
func AddQKNorms(w *llama.Weights, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x716b6e6f))
	vec := func(n int) []float32 {
		f := make([]float32, n)
		for i := range f {
			f[i] = 0.5 + 1.5*r.Float32()
		}
		return f
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		l.QNorm, l.KNorm = vec(w.Config.HeadDim()), vec(w.Config.HeadDim())
	}
}

// Quantize converts every matrix of w to t (any type llama.Type.Loads)
// in place, except those whose rows are not whole blocks of t (they stay
// F32). Norm vectors stay F32, as in GGUF files.
func Quantize(w *llama.Weights, t llama.Type) {
	quantizeEach(w, func(string, int) llama.Type { return t })
}

// QuantizeKM converts w as llama-quantize's Q4_K_M (t = Q4_K) or Q5_K_M
// (t = Q5_K) lays out its types: the output classifier Q6_K, attn_v and
// ffn_down Q6_K in the even layers, every other matrix t; a matrix whose
// width is not a multiple of 256 falls back as llama-quantize's do (Q4_K
// to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0).
func QuantizeKM(w *llama.Weights, t llama.Type) {
	quantizeEach(w, func(name string, layer int) llama.Type {
		if name == "output" || (name == "attn_v" || name == "ffn_down") && layer%2 == 0 {
			return llama.Q6_K
		}
		return t
	})
}

// quantizeEach converts every matrix of w to the type pick gives its name
// (llama.cpp's, without "blk.N." and ".weight"; layer -1 for the
// embedding and output), falling back as QuantizeKM says and leaving F32
// the matrices whose rows still are not whole blocks.
func quantizeEach(w *llama.Weights, pick func(name string, layer int) llama.Type) {
	shared := sameMatrix(&w.Embedding, &w.Output)
	q := func(m *llama.Matrix, name string, layer int) {
		t := pick(name, layer)
		if m.Cols%256 != 0 {
			switch t {
			case llama.Q4_K:
				t = llama.Q5_0
			case llama.Q5_K:
				t = llama.Q5_1
			case llama.Q6_K:
				t = llama.Q8_0
			}
		}
		*m = QuantizeMatrix(*m, t)
	}
	q(&w.Embedding, "token_embd", -1)
	if shared {
		w.Output = w.Embedding
	} else {
		q(&w.Output, "output", -1)
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		for _, m := range []struct {
			m    *llama.Matrix
			name string
		}{{&l.Wq, "attn_q"}, {&l.Wk, "attn_k"}, {&l.Wv, "attn_v"}, {&l.Wo, "attn_output"},
			{&l.W1, "ffn_gate"}, {&l.W2, "ffn_down"}, {&l.W3, "ffn_up"}} {
			q(m.m, m.name, i)
		}
	}
}

func sameMatrix(a, b *llama.Matrix) bool {
	return a.Rows == b.Rows && a.Cols == b.Cols && a.Type == b.Type &&
		((len(a.F) > 0 && len(b.F) > 0 && &a.F[0] == &b.F[0]) || (len(a.Raw) > 0 && len(b.Raw) > 0 && &a.Raw[0] == &b.Raw[0]))
}

// QuantizeMatrix returns an F32 matrix encoded as t. Q8_0 follows ggml:
// per block of 32, d = max|x|/127 (stored as float16), q = round(x/d);
// the other quantisations round to nearest as quant.go says, BF16 rounds
// to nearest even. A matrix whose rows are not whole blocks of t is
// returned unchanged.
func QuantizeMatrix(m llama.Matrix, t llama.Type) llama.Matrix {
	if m.Type != llama.F32 || t == llama.F32 || !t.Loads() || t.RowBytes(m.Cols) < 0 {
		return m
	}
	out := llama.Matrix{Rows: m.Rows, Cols: m.Cols, Type: t, Raw: make([]byte, m.Rows*t.RowBytes(m.Cols))}
	switch t {
	case llama.F16:
		for i, v := range m.F {
			binary.LittleEndian.PutUint16(out.Raw[2*i:], llama.F32ToF16(v))
		}
		return out
	case llama.BF16:
		for i, v := range m.F {
			b := math.Float32bits(v)
			b += 0x7fff + b>>16&1 // round to nearest even (finite weights)
			binary.LittleEndian.PutUint16(out.Raw[2*i:], uint16(b>>16))
		}
		return out
	}
	bs, bb := t.Block(), t.BlockBytes()
	for b := 0; b < len(m.F)/bs; b++ {
		x, blk := m.F[b*bs:(b+1)*bs], out.Raw[b*bb:(b+1)*bb]
		switch t {
		case llama.Q8_0:
			d := absMaxAbs(x) / 127
			binary.LittleEndian.PutUint16(blk, llama.F32ToF16(d))
			for i, v := range x {
				blk[2+i] = byte(int8(math.Round(float64(v * inv(d)))))
			}
		case llama.Q4_K, llama.Q5_K:
			quantizeK45(t, x, blk)
		case llama.Q6_K:
			quantizeQ6K(x, blk)
		default:
			quantize32(t, x, blk)
		}
	}
	return out
}

func absMaxAbs(x []float32) float32 { return float32(math.Abs(float64(absMax(x)))) }
