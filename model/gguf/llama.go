package gguf

import (
	"fmt"

	"github.com/kvlease/kvlease/model/llama"
)

// Llama builds llama weights from a parsed file: general.architecture must
// be "llama"; the shape comes from the llama.* keys (embedding_length,
// feed_forward_length, block_count, attention.head_count,
// attention.head_count_kv, context_length, rope.freq_base,
// attention.layer_norm_rms_epsilon), BOS and EOS from tokenizer.ggml.*. The
// tensors are llama.cpp's (token_embd, blk.N.attn_norm, attn_q, attn_k,
// attn_v, attn_output, ffn_norm, ffn_gate, ffn_down, ffn_up, output_norm,
// output — absent output means a classifier shared with the embedding),
// with Q and K in the adjacent-pair RoPE order llama.cpp's converter writes.
// Matrices may be F32, F16 or Q8_0; norms F32. The weights alias the file's
// buffer.
func Llama(f *File) (*llama.Weights, error) {
	arch, _ := f.String("general.architecture")
	if arch != "llama" {
		return nil, fmt.Errorf("%w: architecture %q (only llama loads)", ErrUnsupported, arch)
	}
	geti := func(key string, def int, required bool) (int, error) {
		v, ok := f.Uint("llama." + key)
		if !ok {
			if required {
				return 0, fmt.Errorf("%w: metadata llama.%s missing", ErrFormat, key)
			}
			return def, nil
		}
		if v > 1<<30 {
			return 0, fmt.Errorf("%w: llama.%s = %d", ErrFormat, key, v)
		}
		return int(v), nil
	}
	var c llama.Config
	var err error
	for _, k := range []struct {
		dst *int
		key string
	}{{&c.Dim, "embedding_length"}, {&c.HiddenDim, "feed_forward_length"}, {&c.Layers, "block_count"},
		{&c.Heads, "attention.head_count"}, {&c.MaxSeqLen, "context_length"}} {
		if *k.dst, err = geti(k.key, 0, true); err != nil {
			return nil, err
		}
	}
	if c.KVHeads, err = geti("attention.head_count_kv", c.Heads, false); err != nil {
		return nil, err
	}
	c.RopeTheta = 10000
	if v, ok := f.Float("llama.rope.freq_base"); ok {
		c.RopeTheta = v
	}
	c.NormEps = 1e-5
	if v, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); ok {
		c.NormEps = float32(v)
	}
	if c.Heads > 0 {
		if rd, ok := f.Uint("llama.rope.dimension_count"); ok && int(rd) != c.Dim/c.Heads {
			return nil, fmt.Errorf("%w: partial RoPE (rope.dimension_count %d, head dim %d)", ErrUnsupported, rd, c.Dim/c.Heads)
		}
	}
	if _, ok := f.Metadata["llama.rope.scaling.type"]; ok {
		if s, _ := f.String("llama.rope.scaling.type"); s != "" && s != "none" {
			return nil, fmt.Errorf("%w: RoPE scaling %q", ErrUnsupported, s)
		}
	}
	c.BOS, c.EOS = -1, -1
	if v, ok := f.Uint("tokenizer.ggml.bos_token_id"); ok && v < 1<<31 {
		c.BOS = int32(v)
	}
	if v, ok := f.Uint("tokenizer.ggml.eos_token_id"); ok && v < 1<<31 {
		c.EOS = int32(v)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, fmt.Errorf("%w: tensor token_embd.weight missing", ErrFormat)
	}
	if len(emb.Dims) != 2 {
		return nil, fmt.Errorf("%w: token_embd.weight has %d dimensions", ErrFormat, len(emb.Dims))
	}
	c.VocabSize = int(emb.Dims[1])
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := &llama.Weights{Config: c}
	if w.Embedding, err = f.matrix("token_embd.weight", c.VocabSize, c.Dim); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("output.weight"); ok {
		if w.Output, err = f.matrix("output.weight", c.VocabSize, c.Dim); err != nil {
			return nil, err
		}
	} else {
		w.Output = w.Embedding
	}
	if w.FinalNorm, err = f.vector("output_norm.weight", c.Dim); err != nil {
		return nil, err
	}
	w.Layers = make([]llama.Layer, c.Layers)
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		if l.AttnNorm, err = f.vector(p+"attn_norm.weight", c.Dim); err != nil {
			return nil, err
		}
		if l.FFNNorm, err = f.vector(p+"ffn_norm.weight", c.Dim); err != nil {
			return nil, err
		}
		for _, m := range []struct {
			dst        *llama.Matrix
			name       string
			rows, cols int
		}{
			{&l.Wq, "attn_q", c.Dim, c.Dim}, {&l.Wk, "attn_k", c.KVDim(), c.Dim}, {&l.Wv, "attn_v", c.KVDim(), c.Dim},
			{&l.Wo, "attn_output", c.Dim, c.Dim}, {&l.W1, "ffn_gate", c.HiddenDim, c.Dim},
			{&l.W2, "ffn_down", c.Dim, c.HiddenDim}, {&l.W3, "ffn_up", c.HiddenDim, c.Dim},
		} {
			if *m.dst, err = f.matrix(p+m.name+".weight", m.rows, m.cols); err != nil {
				return nil, err
			}
		}
	}
	return w, w.Validate()
}

func (f *File) matrix(name string, rows, cols int) (llama.Matrix, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s missing", ErrFormat, name)
	}
	if len(t.Dims) != 2 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(rows) {
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s has dims %v, want [%d %d]", ErrFormat, name, t.Dims, cols, rows)
	}
	m := llama.Matrix{Rows: rows, Cols: cols}
	switch t.Type {
	case 0:
		m.Type, m.F = llama.F32, llama.F32s(t.Data)
	case 1:
		m.Type, m.Raw = llama.F16, t.Data
	case 8:
		m.Type, m.Raw = llama.Q8_0, t.Data
	default:
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s is ggml type %d (F32, F16 and Q8_0 load)", ErrUnsupported, name, t.Type)
	}
	if t.Data == nil {
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s has no data", ErrFormat, name)
	}
	return m, nil
}

func (f *File) vector(name string, n int) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: tensor %s missing", ErrFormat, name)
	}
	if len(t.Dims) != 1 || t.Dims[0] != uint64(n) || t.Type != 0 {
		return nil, fmt.Errorf("%w: tensor %s: dims %v type %d, want [%d] F32", ErrFormat, name, t.Dims, t.Type, n)
	}
	return llama.F32s(t.Data), nil
}
