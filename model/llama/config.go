package llama

import (
	"errors"
	"fmt"
	"math"
)

// Config is a llama-family model's shape and constants, as a model file
// states them. The family's members differ in RoPE's pairing (Rope), in
// optional Q/K/V biases and per-head Q/K norms (Layer) and in a head
// width other than Dim/Heads (HeadSize).
type Config struct {
	Dim       int // embedding width
	HiddenDim int // feed-forward width
	Layers    int
	Heads     int // query heads
	KVHeads   int // key/value heads (grouped-query attention when < Heads)
	// HeadSize is the width of one attention head (query, key and value)
	// when it is not Dim/Heads (Qwen3-0.6B: dim 1024, 16 heads of 128);
	// 0 means Dim/Heads. HeadDim is the width in effect.
	HeadSize  int
	VocabSize int
	// MaxSeqLen is the longest sequence the model was trained for; the engine
	// takes it as its maximum model length.
	MaxSeqLen int
	// Rope is which elements of a head RoPE rotates together.
	Rope RopeStyle
	// RopeTheta is RoPE's base frequency (10000 for llama 1/2).
	RopeTheta float64
	// RopeScale is linear RoPE scaling: every pair's angle is divided by it
	// (llama.cpp's rope.scaling.factor with type linear; 0 means 1, none).
	RopeScale float64
	// NormEps is RMSNorm's epsilon.
	NormEps float32
	// BOS and EOS are the tokenizer's special ids (-1 when the file has none).
	BOS, EOS int32
}

// RopeStyle is the pairing of a head's elements that RoPE rotates: pair i
// (i < HeadDim/2) turns by position × frequency i either way.
type RopeStyle uint8

const (
	// RopeAdjacent rotates (x[2i], x[2i+1]): llama (llama.cpp's NORM
	// RoPE, the order its converter permutes Q and K into).
	RopeAdjacent RopeStyle = iota
	// RopeHalves rotates (x[i], x[i+HeadDim/2]): qwen2 and qwen3
	// (llama.cpp's NEOX RoPE, Hugging Face's rotate_half).
	RopeHalves
)

func (s RopeStyle) String() string {
	switch s {
	case RopeAdjacent:
		return "adjacent pairs"
	case RopeHalves:
		return "halves"
	}
	return fmt.Sprintf("RopeStyle(%d)", uint8(s))
}

// KVBytes is the size of one KV element in the pool: float32.
const KVBytes = 4

// HeadDim is the width of one attention head: HeadSize, or Dim/Heads.
func (c Config) HeadDim() int {
	if c.HeadSize > 0 {
		return c.HeadSize
	}
	return c.Dim / c.Heads
}

// QDim is the width of the query projection (and of the attention output
// that the output projection reads): Heads × HeadDim.
func (c Config) QDim() int { return c.Heads * c.HeadDim() }

// KVDim is the width of the key (and of the value) projection.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim() }

// BytesPerToken is the KV one token occupies in the pool: 2 (K and V) ×
// Layers × KVHeads × HeadDim × KVBytes — kvblock.Config.BytesPerToken.
func (c Config) BytesPerToken() int { return 2 * c.Layers * c.KVDim() * KVBytes }

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.HiddenDim <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.VocabSize <= 0 || c.MaxSeqLen <= 0:
		return fmt.Errorf("llama: every dimension must be positive: %+v", c)
	case c.HeadSize < 0 || c.HeadSize > 1<<12:
		return fmt.Errorf("llama: head size %d out of bounds (0 for Dim/Heads, at most 4096)", c.HeadSize)
	case c.HeadSize == 0 && c.Dim%c.Heads != 0:
		return fmt.Errorf("llama: dim %d is not a multiple of %d heads", c.Dim, c.Heads)
	case c.Rope > RopeHalves:
		return fmt.Errorf("llama: unknown %v", c.Rope)
	case c.HeadDim()%2 != 0:
		return fmt.Errorf("llama: head dim %d is odd: RoPE rotates pairs", c.HeadDim())
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("llama: %d heads are not a multiple of %d kv heads", c.Heads, c.KVHeads)
	case c.Dim > 1<<16 || c.HiddenDim > 1<<18 || c.Layers > 1024 || c.VocabSize > 1<<22 || c.MaxSeqLen > 1<<20 || c.Heads > 1<<12 || c.QDim() > 1<<17:
		return fmt.Errorf("llama: shape out of bounds (dim ≤ 65536, hidden ≤ 262144, layers ≤ 1024, vocab ≤ 4M, context ≤ 1M, heads ≤ 4096, heads × head dim ≤ 131072): %+v", c)
	case !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0):
		return errors.New("llama: RopeTheta must be positive and finite")
	case !(c.RopeScale >= 0) || math.IsInf(c.RopeScale, 0):
		return fmt.Errorf("llama: RopeScale %v must be 0 (none) or positive and finite", c.RopeScale)
	case !(c.NormEps > 0):
		return errors.New("llama: NormEps must be positive")
	case c.EOS >= int32(c.VocabSize) || c.BOS >= int32(c.VocabSize):
		return fmt.Errorf("llama: BOS %d or EOS %d outside the vocabulary of %d", c.BOS, c.EOS, c.VocabSize)
	}
	return nil
}

// Layer is one transformer block's weights.
type Layer struct {
	AttnNorm []float32 // Dim
	Wq       Matrix    // QDim × Dim (rows × cols: out × in)
	Wk, Wv   Matrix    // KVDim × Dim
	// BQ, BK and BV, when not nil, are added to the projections (qwen2):
	// QDim, KVDim and KVDim.
	BQ, BK, BV []float32
	// QNorm and KNorm, when not nil (both or neither), are RMSNorm
	// weights applied to each query and key head before RoPE (qwen3):
	// HeadDim each.
	QNorm, KNorm []float32
	Wo           Matrix    // Dim × QDim
	FFNNorm      []float32 // Dim
	W1           Matrix    // HiddenDim × Dim (gate)
	W2           Matrix    // Dim × HiddenDim (down)
	W3           Matrix    // HiddenDim × Dim (up)
}

// Weights is a whole model. Its slices may alias a memory-mapped file: they
// are read-only.
type Weights struct {
	Config    Config
	Embedding Matrix // VocabSize × Dim
	Layers    []Layer
	FinalNorm []float32 // Dim
	Output    Matrix    // VocabSize × Dim (may be Embedding: a shared classifier)
	// RopeFactors, when not nil, divide each RoPE pair's frequency: pair i
	// of every head rotates by position × θ^(-2i/HeadDim) / RopeFactors[i]
	// (HeadDim/2 of them; Llama 3.1/3.2's rope_freqs.weight).
	RopeFactors []float32
}

// Validate checks the configuration and every tensor's shape.
func (w *Weights) Validate() error {
	c := w.Config
	if err := c.Validate(); err != nil {
		return err
	}
	if len(w.Layers) != c.Layers {
		return fmt.Errorf("llama: %d layers of weights for %d in the config", len(w.Layers), c.Layers)
	}
	check := func(name string, m *Matrix, rows, cols int) error {
		if m.Rows != rows || m.Cols != cols {
			return fmt.Errorf("llama: %s is %d×%d, want %d×%d", name, m.Rows, m.Cols, rows, cols)
		}
		return m.validate(name)
	}
	vec := func(name string, v []float32, n int) error {
		if len(v) != n {
			return fmt.Errorf("llama: %s has %d elements, want %d", name, len(v), n)
		}
		return nil
	}
	optVec := func(name string, v []float32, n int) error {
		if v == nil {
			return nil
		}
		return vec(name, v, n)
	}
	if err := check("token embedding", &w.Embedding, c.VocabSize, c.Dim); err != nil {
		return err
	}
	if err := check("output", &w.Output, c.VocabSize, c.Dim); err != nil {
		return err
	}
	if err := vec("final norm", w.FinalNorm, c.Dim); err != nil {
		return err
	}
	if w.RopeFactors != nil {
		if err := vec("RoPE factors", w.RopeFactors, c.HeadDim()/2); err != nil {
			return err
		}
		for i, f := range w.RopeFactors {
			if !(f > 0) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("llama: RoPE factor %d is %v, want positive and finite", i, f)
			}
		}
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("layer %d ", i)
		for _, e := range []error{
			vec(p+"attention norm", l.AttnNorm, c.Dim),
			vec(p+"ffn norm", l.FFNNorm, c.Dim),
			check(p+"wq", &l.Wq, c.QDim(), c.Dim),
			check(p+"wk", &l.Wk, c.KVDim(), c.Dim),
			check(p+"wv", &l.Wv, c.KVDim(), c.Dim),
			check(p+"wo", &l.Wo, c.Dim, c.QDim()),
			optVec(p+"q bias", l.BQ, c.QDim()),
			optVec(p+"k bias", l.BK, c.KVDim()),
			optVec(p+"v bias", l.BV, c.KVDim()),
			optVec(p+"q norm", l.QNorm, c.HeadDim()),
			optVec(p+"k norm", l.KNorm, c.HeadDim()),
			check(p+"w1", &l.W1, c.HiddenDim, c.Dim),
			check(p+"w2", &l.W2, c.Dim, c.HiddenDim),
			check(p+"w3", &l.W3, c.HiddenDim, c.Dim),
		} {
			if e != nil {
				return e
			}
		}
		if (l.QNorm == nil) != (l.KNorm == nil) {
			return fmt.Errorf("llama: %shas one of the Q and K norms only", p)
		}
	}
	return nil
}
