package llamatest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"

	"github.com/kvlease/kvlease/model/llama"
)

func shared(w *llama.Weights) bool { return sameMatrix(&w.Embedding, &w.Output) }

// WriteLlama2C writes w (F32 matrices) as a legacy llama2.c checkpoint: the
// seven-int32 header (vocab size negative when the classifier is not
// shared), the weights in run.c's order, the RoPE tables run.c expects
// (freq_cis_real, freq_cis_imag) and the classifier if unshared.
func WriteLlama2C(out io.Writer, w *llama.Weights) error {
	c := w.Config
	bw := bufio.NewWriter(out)
	vocab := int32(c.VocabSize)
	if !shared(w) {
		vocab = -vocab
	}
	for _, v := range []int32{int32(c.Dim), int32(c.HiddenDim), int32(c.Layers), int32(c.Heads), int32(c.KVHeads), vocab, int32(c.MaxSeqLen)} {
		binary.Write(bw, binary.LittleEndian, v)
	}
	var err error
	f32 := func(f []float32) {
		var b [4]byte
		for _, v := range f {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			bw.Write(b[:])
		}
	}
	m := func(x llama.Matrix) {
		if x.Type != llama.F32 {
			err = errors.New("llamatest: llama2.c checkpoints hold F32 weights only")
		}
		f32(x.F)
	}
	m(w.Embedding)
	each := func(f func(l *llama.Layer)) {
		for i := range w.Layers {
			f(&w.Layers[i])
		}
	}
	each(func(l *llama.Layer) { f32(l.AttnNorm) })
	each(func(l *llama.Layer) { m(l.Wq) })
	each(func(l *llama.Layer) { m(l.Wk) })
	each(func(l *llama.Layer) { m(l.Wv) })
	each(func(l *llama.Layer) { m(l.Wo) })
	each(func(l *llama.Layer) { f32(l.FFNNorm) })
	each(func(l *llama.Layer) { m(l.W1) })
	each(func(l *llama.Layer) { m(l.W2) })
	each(func(l *llama.Layer) { m(l.W3) })
	f32(w.FinalNorm)
	hd := c.HeadDim()
	for _, fn := range []func(float64) float64{math.Cos, math.Sin} {
		for p := 0; p < c.MaxSeqLen; p++ {
			for i := 0; i < hd/2; i++ {
				f32([]float32{float32(fn(float64(p) * math.Pow(10000, -float64(2*i)/float64(hd))))})
			}
		}
	}
	if !shared(w) {
		m(w.Output)
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// WriteTokenizerBin writes a llama2.c tokenizer.bin.
func WriteTokenizerBin(out io.Writer, pieces []string, scores []float32) error {
	bw := bufio.NewWriter(out)
	maxLen := 0
	for _, p := range pieces {
		maxLen = max(maxLen, len(p))
	}
	binary.Write(bw, binary.LittleEndian, int32(maxLen))
	for i, p := range pieces {
		binary.Write(bw, binary.LittleEndian, scores[i])
		binary.Write(bw, binary.LittleEndian, int32(len(p)))
		bw.WriteString(p)
	}
	return bw.Flush()
}

// Vocab is a tokenizer as GGUF metadata carries it.
type Vocab struct {
	Model  string // "llama" (SentencePiece) or "gpt2" (byte-level BPE)
	Tokens []string
	Scores []float32
	Types  []int32 // 1 normal, 2 unknown, 3 control, 6 byte
	Merges []string
	BOS    int32
	EOS    int32
	// ChatTemplate is tokenizer.chat_template, when not empty.
	ChatTemplate string
}

// SPMVocab is a SentencePiece-style vocabulary of n tokens (n ≥ 259+26):
// <unk>, <s>, </s>, the 256 byte tokens <0x00>…<0xFF>, then pieces: the
// letters, "▁" and word-ish pieces, with scores that favour longer merges.
func SPMVocab(n int) Vocab {
	v := Vocab{Model: "llama", BOS: 1, EOS: 2}
	add := func(s string, score float32, typ int32) {
		v.Tokens = append(v.Tokens, s)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	add("<unk>", 0, 2)
	add("<s>", 0, 3)
	add("</s>", 0, 3)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, 6)
	}
	words := []string{"▁", "e", "t", "a", "o", "i", "n", "s", "h", "r", "d", "l", "u", "c", "m", "w", "f", "g", "y", "p", "b", ",", ".", "v", "k",
		"▁t", "he", "▁the", "▁a", "in", "er", "an", "on", "▁s", "▁w", "at", "en", "nd", "▁and", "ed", "▁o", "es", "▁h", "▁b", "or", "it",
		"▁c", "▁f", "is", "▁to", "▁of", "ing", "▁in", "ou", "ar", "▁m", "▁d", "▁p", "as", "▁he", "▁was", "▁The", "▁T", "he", "▁Once",
		"▁upon", "▁time", "▁there", "▁little", "▁girl", "▁named", "▁Lily", "ly", "ll"}
	// Every prefix of a word is a piece too, as in a trained vocabulary:
	// BPE reaches a word through them.
	var all []string
	for _, w := range words {
		rs := []rune(w)
		for k := 1; k <= len(rs); k++ {
			all = append(all, string(rs[:k]))
		}
	}
	seen := map[string]bool{}
	for i := 0; len(v.Tokens) < n; i++ {
		var w string
		if i < len(all) {
			w = all[i]
		} else {
			// Filler pieces: distinct, never produced by merging the above.
			w = fmt.Sprintf("▁zz%d", i)
		}
		if seen[w] {
			continue
		}
		seen[w] = true
		add(w, -float32(i), 1)
	}
	return v
}

// GGUFOptions are what WriteGGUF writes besides the weights.
type GGUFOptions struct {
	// Architecture is general.architecture ("llama" when empty).
	Architecture string
	Vocab        *Vocab
	// Extra metadata (uint32, int32, float32, string, bool values),
	// replacing the value WriteGGUF would write under the same key.
	Extra map[string]any
	// ExtraTensors are written after the model's as F32 vectors (tests
	// of tensors a loader must refuse).
	ExtraTensors map[string][]float32
}

// WriteGGUF writes w as a GGUF v3 file with <architecture>.* metadata, the
// tokenizer of o.Vocab in tokenizer.ggml.* and tensors named as llama.cpp
// names them, in w's matrix types (norms and biases F32), aligned to 32 bytes; RoPE
// factors as rope_freqs.weight and linear RoPE scaling as
// rope.scaling.type linear with its factor.
func WriteGGUF(out io.Writer, w *llama.Weights, o GGUFOptions) error {
	c := w.Config
	arch := o.Architecture
	if arch == "" {
		arch = "llama"
	}
	type kv struct {
		k string
		v any
	}
	if want, ok := map[string]llama.RopeStyle{"llama": llama.RopeAdjacent, "qwen2": llama.RopeHalves, "qwen3": llama.RopeHalves}[arch]; ok && c.Rope != want {
		return fmt.Errorf("llamatest: architecture %s has RoPE on %v, the weights' config says %v", arch, want, c.Rope)
	}
	a := arch + "."
	md := []kv{
		{"general.architecture", arch},
		{"general.alignment", uint32(32)},
		{a + "context_length", uint32(c.MaxSeqLen)},
		{a + "embedding_length", uint32(c.Dim)},
		{a + "block_count", uint32(c.Layers)},
		{a + "feed_forward_length", uint32(c.HiddenDim)},
		{a + "attention.head_count", uint32(c.Heads)},
		{a + "attention.head_count_kv", uint32(c.KVHeads)},
		{a + "attention.key_length", uint32(c.HeadDim())},
		{a + "attention.value_length", uint32(c.HeadDim())},
		{a + "rope.freq_base", float32(c.RopeTheta)},
		{a + "rope.dimension_count", uint32(c.HeadDim())},
		{a + "attention.layer_norm_rms_epsilon", c.NormEps},
	}
	if c.RopeScale != 0 {
		md = append(md, kv{a + "rope.scaling.type", "linear"}, kv{a + "rope.scaling.factor", float32(c.RopeScale)})
	}
	if v := o.Vocab; v != nil {
		md = append(md, kv{"tokenizer.ggml.model", v.Model}, kv{"tokenizer.ggml.tokens", v.Tokens},
			kv{"tokenizer.ggml.bos_token_id", uint32(v.BOS)}, kv{"tokenizer.ggml.eos_token_id", uint32(v.EOS)})
		if v.Scores != nil {
			md = append(md, kv{"tokenizer.ggml.scores", v.Scores})
		}
		if v.Types != nil {
			md = append(md, kv{"tokenizer.ggml.token_type", v.Types})
		}
		if v.Merges != nil {
			md = append(md, kv{"tokenizer.ggml.merges", v.Merges})
		}
		if v.ChatTemplate != "" {
			md = append(md, kv{"tokenizer.chat_template", v.ChatTemplate})
		}
	}
	keys := make([]string, 0, len(o.Extra))
	for k := range o.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if i := slices.IndexFunc(md, func(e kv) bool { return e.k == k }); i >= 0 {
			md[i].v = o.Extra[k]
			continue
		}
		md = append(md, kv{k, o.Extra[k]})
	}

	type tensor struct {
		name string
		dims []uint64
		typ  uint32
		data []byte
	}
	var ts []tensor
	vecT := func(name string, f []float32) {
		b := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		ts = append(ts, tensor{name, []uint64{uint64(len(f))}, 0, b})
	}
	matT := func(name string, m llama.Matrix) {
		data := m.Raw
		if m.Type == llama.F32 {
			data = make([]byte, 4*len(m.F))
			for i, v := range m.F {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		}
		ts = append(ts, tensor{name, []uint64{uint64(m.Cols), uint64(m.Rows)}, uint32(m.Type), data})
	}
	matT("token_embd.weight", w.Embedding)
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		vecT(p+"attn_norm.weight", l.AttnNorm)
		matT(p+"attn_q.weight", l.Wq)
		matT(p+"attn_k.weight", l.Wk)
		matT(p+"attn_v.weight", l.Wv)
		for _, b := range []struct {
			name string
			v    []float32
		}{{"attn_q.bias", l.BQ}, {"attn_k.bias", l.BK}, {"attn_v.bias", l.BV}, {"attn_q_norm.weight", l.QNorm}, {"attn_k_norm.weight", l.KNorm}} {
			if b.v != nil {
				vecT(p+b.name, b.v)
			}
		}
		matT(p+"attn_output.weight", l.Wo)
		vecT(p+"ffn_norm.weight", l.FFNNorm)
		matT(p+"ffn_gate.weight", l.W1)
		matT(p+"ffn_down.weight", l.W2)
		matT(p+"ffn_up.weight", l.W3)
	}
	vecT("output_norm.weight", w.FinalNorm)
	if w.RopeFactors != nil {
		vecT("rope_freqs.weight", w.RopeFactors)
	}
	names := make([]string, 0, len(o.ExtraTensors))
	for k := range o.ExtraTensors {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		vecT(k, o.ExtraTensors[k])
	}
	if !shared(w) {
		matT("output.weight", w.Output)
	}

	bw := &countWriter{w: bufio.NewWriter(out)}
	le := func(v any) { binary.Write(bw, binary.LittleEndian, v) }
	str := func(s string) { le(uint64(len(s))); bw.Write([]byte(s)) }
	bw.Write([]byte("GGUF"))
	le(uint32(3))
	le(uint64(len(ts)))
	le(uint64(len(md)))
	for _, e := range md {
		str(e.k)
		switch v := e.v.(type) {
		case uint32:
			le(uint32(4))
			le(v)
		case int32:
			le(uint32(5))
			le(v)
		case float32:
			le(uint32(6))
			le(v)
		case bool:
			le(uint32(7))
			le(v)
		case string:
			le(uint32(8))
			str(v)
		case []string:
			le(uint32(9))
			le(uint32(8))
			le(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []float32:
			le(uint32(9))
			le(uint32(6))
			le(uint64(len(v)))
			le(v)
		case []int32:
			le(uint32(9))
			le(uint32(5))
			le(uint64(len(v)))
			le(v)
		default:
			return fmt.Errorf("llamatest: metadata %s: unsupported value %T", e.k, e.v)
		}
	}
	off := uint64(0)
	for _, t := range ts {
		str(t.name)
		le(uint32(len(t.dims)))
		le(t.dims)
		le(t.typ)
		le(off)
		off += (uint64(len(t.data)) + 31) / 32 * 32
	}
	pad := func() {
		for bw.n%32 != 0 {
			bw.Write([]byte{0})
		}
	}
	pad()
	for _, t := range ts {
		bw.Write(t.data)
		pad()
	}
	if bw.err != nil {
		return bw.err
	}
	return bw.w.Flush()
}

type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}
