package gguf

import (
	"fmt"
	"math"
	"strings"

	"github.com/kvlease/kvlease/model/llama"
)

// Llama builds model/llama weights from a parsed file whose
// general.architecture is one of the llama family it implements, each as
// llama.cpp computes it:
//
//   - llama (Llama 2/3.x, TinyLlama, SmolLM, Mistral without sliding
//     window): RoPE on adjacent pairs (llama.cpp's NORM; its converter
//     permutes Q and K into that order), optional rope_freqs.weight;
//   - qwen2 (Qwen2, Qwen2.5): RoPE on halves (NEOX);
//   - qwen3: RoPE on halves, and blk.N.attn_q_norm / attn_k_norm, an
//     RMSNorm of each query and key head before RoPE.
//
// Q, K and V biases (attn_q.bias, …) load on all three, as in llama.cpp
// (qwen2 files have them). The shape comes from the <arch>.* keys
// (embedding_length, feed_forward_length, block_count,
// attention.head_count, attention.head_count_kv, attention.key_length —
// the head width, Dim/Heads when absent; value_length and
// rope.dimension_count must equal it — context_length, rope.freq_base,
// attention.layer_norm_rms_epsilon), BOS and EOS from tokenizer.ggml.*. The
// other tensors are llama.cpp's (token_embd, blk.N.attn_norm, attn_q,
// attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_down, ffn_up,
// output_norm, output — absent output means a classifier shared with the
// embedding). Matrices may be of any type llama.Type.Loads (F32, F16,
// BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: what llama-quantize
// writes for Q4_K_M and Q5_K_M, with its fallbacks for rows that are not
// whole 256-weight blocks); any other type is refused by its ggml name.
// Norms and biases are F32, as llama.cpp's converter and llama-quantize
// write them. The weights alias the file's buffer.
//
// RoPE as llama.cpp computes it: rope_freqs.weight (Llama 3.1/3.2's
// per-pair frequency factors) divides pair i's frequency by factor i, and
// rope.scaling.factor (rope.scale_linear in older files) divides every
// angle when rope.scaling.type is linear or absent; "none" ignores the
// factor. Nothing that would change the math is ignored: any other scaling
// type (yarn, longrope, …), any <arch>.* key outside those the loader reads
// or knows to be inert, and any tensor it does not use are refused by name.
func Llama(f *File) (*llama.Weights, error) {
	arch, _ := f.String("general.architecture")
	var c llama.Config
	switch arch {
	case "llama":
		c.Rope = llama.RopeAdjacent
	case "qwen2", "qwen3":
		c.Rope = llama.RopeHalves
	default:
		return nil, fmt.Errorf("%w: general.architecture %q (llama, qwen2 and qwen3 load)", ErrUnsupported, arch)
	}
	if err := checkKeys(f, arch); err != nil {
		return nil, err
	}
	geti := func(key string, def int, required bool) (int, error) {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			if _, there := f.Metadata[arch+"."+key]; there || required {
				return 0, fmt.Errorf("%w: metadata %s.%s missing or not a non-negative integer", ErrFormat, arch, key)
			}
			return def, nil
		}
		if v > 1<<30 {
			return 0, fmt.Errorf("%w: %s.%s = %d", ErrFormat, arch, key, v)
		}
		return int(v), nil
	}
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
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		c.RopeTheta = v
	}
	c.NormEps = 1e-5
	if v, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		c.NormEps = float32(v)
	}
	if c.Heads > 0 {
		hd, err := geti("attention.key_length", c.Dim/c.Heads, false)
		if err != nil {
			return nil, err
		}
		if hd != c.Dim/c.Heads || c.Dim%c.Heads != 0 {
			c.HeadSize = hd
		}
		for _, k := range []string{"attention.value_length", "rope.dimension_count"} {
			if v, err := geti(k, hd, false); err != nil {
				return nil, err
			} else if v != hd {
				return nil, fmt.Errorf("%w: %s.%s %d differs from the head width %d (attention.key_length, else embedding_length / head_count): partial RoPE or unequal key and value heads", ErrUnsupported, arch, k, v, hd)
			}
		}
	}
	if c.RopeScale, err = ropeScaling(f, arch); err != nil {
		return nil, err
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
	if v, ok := f.Uint(arch + ".vocab_size"); ok && v != emb.Dims[1] {
		return nil, fmt.Errorf("%w: %s.vocab_size %d, token_embd.weight has %d rows", ErrFormat, arch, v, emb.Dims[1])
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// Every tensor the model uses is taken through mat and vec; whatever
	// is left in the file at the end is refused.
	used := make(map[string]bool, len(f.Tensors))
	mat := func(name string, rows, cols int) (llama.Matrix, error) {
		used[name] = true
		return f.matrix(name, rows, cols)
	}
	vec := func(name string, n int) ([]float32, error) {
		used[name] = true
		return f.vector(name, n)
	}
	w := &llama.Weights{Config: c}
	if w.Embedding, err = mat("token_embd.weight", c.VocabSize, c.Dim); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("output.weight"); ok {
		if w.Output, err = mat("output.weight", c.VocabSize, c.Dim); err != nil {
			return nil, err
		}
	} else {
		w.Output = w.Embedding
	}
	if w.FinalNorm, err = vec("output_norm.weight", c.Dim); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok && arch == "llama" {
		if w.RopeFactors, err = vec("rope_freqs.weight", c.HeadDim()/2); err != nil {
			return nil, err
		}
	}
	w.Layers = make([]llama.Layer, c.Layers)
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		if l.AttnNorm, err = vec(p+"attn_norm.weight", c.Dim); err != nil {
			return nil, err
		}
		if l.FFNNorm, err = vec(p+"ffn_norm.weight", c.Dim); err != nil {
			return nil, err
		}
		for _, m := range []struct {
			dst        *llama.Matrix
			name       string
			rows, cols int
		}{
			{&l.Wq, "attn_q", c.QDim(), c.Dim}, {&l.Wk, "attn_k", c.KVDim(), c.Dim}, {&l.Wv, "attn_v", c.KVDim(), c.Dim},
			{&l.Wo, "attn_output", c.Dim, c.QDim()}, {&l.W1, "ffn_gate", c.HiddenDim, c.Dim},
			{&l.W2, "ffn_down", c.Dim, c.HiddenDim}, {&l.W3, "ffn_up", c.HiddenDim, c.Dim},
		} {
			if *m.dst, err = mat(p+m.name+".weight", m.rows, m.cols); err != nil {
				return nil, err
			}
		}
		for _, b := range []struct {
			dst  *[]float32
			name string
			n    int
		}{{&l.BQ, "attn_q.bias", c.QDim()}, {&l.BK, "attn_k.bias", c.KVDim()}, {&l.BV, "attn_v.bias", c.KVDim()}} {
			if _, ok := f.Tensor(p + b.name); ok {
				if *b.dst, err = vec(p+b.name, b.n); err != nil {
					return nil, err
				}
			}
		}
		if arch == "qwen3" {
			if l.QNorm, err = vec(p+"attn_q_norm.weight", c.HeadDim()); err != nil {
				return nil, err
			}
			if l.KNorm, err = vec(p+"attn_k_norm.weight", c.HeadDim()); err != nil {
				return nil, err
			}
		}
	}
	for i := range f.Tensors {
		if name := f.Tensors[i].Name; !used[name] {
			return nil, fmt.Errorf("%w: tensor %s (%s) is not part of the %s model as implemented, and ignoring it could change the answers", ErrUnsupported, name, tensorRole(name), arch)
		}
	}
	return w, w.Validate()
}

// inertKeys are <arch>.* metadata keys that Llama does not read and that do
// not change the model's math (or that it checks below); any other key
// under the architecture's prefix is refused.
var inertKeys = map[string]bool{
	"context_length": true, "embedding_length": true, "feed_forward_length": true, "block_count": true,
	"vocab_size": true, "attention.head_count": true, "attention.head_count_kv": true,
	"attention.layer_norm_rms_epsilon": true, "attention.key_length": true, "attention.value_length": true,
	"rope.dimension_count": true, "rope.freq_base": true, "rope.scaling.type": true, "rope.scaling.factor": true,
	"rope.scale_linear": true,
	// Read by llama.cpp for YaRN only (refused) or not at all.
	"rope.scaling.original_context_length": true, "rope.scaling.finetuned": true,
	// The old converter's note that Q and K were permuted to llama.cpp's
	// order, which every llama file is in.
	"tensor_data_layout": true,
}

// checkKeys refuses an <arch>.* key that would change the math and that
// Llama does not implement, naming it. A few are accepted at the value
// that means "off".
func checkKeys(f *File, arch string) error {
	for _, k := range f.Keys {
		name, ok := strings.CutPrefix(k, arch+".")
		if !ok || inertKeys[name] {
			continue
		}
		off := false
		switch name {
		case "expert_count", "expert_used_count":
			v, ok := f.Uint(k)
			off = ok && v == 0
		case "attention.causal":
			v, ok := f.Metadata[k].(bool)
			off = ok && v
		case "rope.scaling.attn_factor":
			v, ok := f.Float(k)
			off = ok && v == 1
		}
		if !off {
			return fmt.Errorf("%w: metadata %s = %v: not implemented (it changes the model's math)", ErrUnsupported, k, f.Metadata[k])
		}
	}
	return nil
}

// ropeScaling is the linear RoPE scaling factor of the file (0: none), as
// llama.cpp reads it: rope.scaling.type defaults to linear, whose factor is
// rope.scaling.factor or the older rope.scale_linear (absent or 0: none);
// "none" turns the factor off; every other type is refused by name.
func ropeScaling(f *File, arch string) (float64, error) {
	typ := "linear"
	if _, ok := f.Metadata[arch+".rope.scaling.type"]; ok {
		s, ok := f.String(arch + ".rope.scaling.type")
		if !ok {
			return 0, fmt.Errorf("%w: %s.rope.scaling.type is not a string", ErrFormat, arch)
		}
		typ = s
	}
	switch typ {
	case "none":
		return 0, nil
	case "linear":
	default:
		return 0, fmt.Errorf("%w: RoPE scaling %q (%s.rope.scaling.type; linear and none load)", ErrUnsupported, typ, arch)
	}
	for _, k := range []string{arch + ".rope.scaling.factor", arch + ".rope.scale_linear"} {
		if _, ok := f.Metadata[k]; !ok {
			continue
		}
		v, ok := f.Float(k)
		if !ok || !(v >= 0) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%w: %s = %v", ErrFormat, k, f.Metadata[k])
		}
		if v == 1 {
			v = 0
		}
		return v, nil
	}
	return 0, nil
}

// tensorRole says what a tensor Llama does not use is for, where it knows.
func tensorRole(name string) string {
	base := name
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if _, after, ok := strings.Cut(rest, "."); ok {
			base = after
		}
	}
	switch base {
	case "rope_factors_long.weight", "rope_factors_short.weight":
		return "LongRoPE frequency factors"
	case "attn_qkv.weight", "attn_qkv.bias":
		return "fused QKV projection"
	case "attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias", "output.bias":
		return "a bias"
	case "attn_q_norm.weight", "attn_k_norm.weight":
		return "a per-head Q/K norm"
	case "ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight":
		return "mixture of experts"
	}
	return "unknown role"
}

func (f *File) matrix(name string, rows, cols int) (llama.Matrix, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s missing", ErrFormat, name)
	}
	if len(t.Dims) != 2 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(rows) {
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s has dims %v, want [%d %d]", ErrFormat, name, t.Dims, cols, rows)
	}
	typ := llama.Type(t.Type)
	if t.Type > 255 || !typ.Loads() {
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s is %s (%s load)", ErrUnsupported, name, typeName(t.Type), llama.LoadableTypes())
	}
	if typ.RowBytes(cols) < 0 {
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s is %s with rows of %d columns, not whole blocks of %d", ErrFormat, name, typ, cols, typ.Block())
	}
	if t.Data == nil {
		return llama.Matrix{}, fmt.Errorf("%w: tensor %s has no data", ErrFormat, name)
	}
	m := llama.Matrix{Rows: rows, Cols: cols, Type: typ}
	if typ == llama.F32 {
		m.F = llama.F32s(t.Data)
	} else {
		m.Raw = t.Data
	}
	return m, nil
}

func (f *File) vector(name string, n int) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: tensor %s missing", ErrFormat, name)
	}
	if len(t.Dims) != 1 || t.Dims[0] != uint64(n) || t.Type != uint32(llama.F32) {
		return nil, fmt.Errorf("%w: tensor %s: dims %v type %s, want [%d] F32", ErrFormat, name, t.Dims, typeName(t.Type), n)
	}
	return llama.F32s(t.Data), nil
}

// typeName is ggml's name of a tensor type ("Q4_K"), or "ggml type N".
func typeName(t uint32) string {
	if t > 255 {
		return fmt.Sprintf("ggml type %d", t)
	}
	return llama.Type(t).String()
}
