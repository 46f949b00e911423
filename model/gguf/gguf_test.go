package gguf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/model/gguf"
	"github.com/kvlease/kvlease/model/llama"
	"github.com/kvlease/kvlease/tokenizer/bpe"
)

func shape() llama.Config {
	c := llamatest.Shape260K
	c.HiddenDim = 192 // whole Q8_0 blocks
	return c
}

func write(t testing.TB, w *llama.Weights, o llamatest.GGUFOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := llamatest.WriteGGUF(&buf, w, o); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sameMatrix(t *testing.T, name string, got, want llama.Matrix) {
	t.Helper()
	if got.Rows != want.Rows || got.Cols != want.Cols || got.Type != want.Type ||
		!slices.Equal(got.F, want.F) || !bytes.Equal(got.Raw, want.Raw) {
		t.Fatalf("%s: loaded %d×%d %s differs from the written %d×%d %s", name, got.Rows, got.Cols, got.Type, want.Rows, want.Cols, want.Type)
	}
}

// TestRoundTrip writes random weights in each type, shared and unshared,
// and checks that every tensor and the configuration load back unchanged.
func TestRoundTrip(t *testing.T) {
	for _, typ := range []llama.Type{llama.F32, llama.F16, llama.Q8_0} {
		for _, shared := range []bool{true, false} {
			w := llamatest.Random(shape(), 5, shared)
			llamatest.Quantize(w, typ)
			v := llamatest.SPMVocab(w.Config.VocabSize)
			f, err := gguf.Parse(write(t, w, llamatest.GGUFOptions{Vocab: &v}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := gguf.Llama(f)
			if err != nil {
				t.Fatal(err)
			}
			if got.Config != w.Config {
				t.Fatalf("config %+v, wrote %+v", got.Config, w.Config)
			}
			sameMatrix(t, "embedding", got.Embedding, w.Embedding)
			sameMatrix(t, "output", got.Output, w.Output)
			for i := range w.Layers {
				g, e := got.Layers[i], w.Layers[i]
				for j, m := range []llama.Matrix{g.Wq, g.Wk, g.Wv, g.Wo, g.W1, g.W2, g.W3} {
					sameMatrix(t, "layer matrix", m, []llama.Matrix{e.Wq, e.Wk, e.Wv, e.Wo, e.W1, e.W2, e.W3}[j])
				}
				if !slices.Equal(g.AttnNorm, e.AttnNorm) || !slices.Equal(g.FFNNorm, e.FFNNorm) {
					t.Fatal("norms differ")
				}
			}
			if !slices.Equal(got.FinalNorm, w.FinalNorm) {
				t.Fatal("final norm differs")
			}
			toks, _ := f.Metadata["tokenizer.ggml.tokens"].([]string)
			if !slices.Equal(toks, v.Tokens) {
				t.Fatal("tokenizer tokens differ")
			}
		}
	}
}

// TestTruncatedFiles cuts a file at many points: each gives an error that
// says truncated (or, where the cut falls in the header, not GGUF), never
// a panic or a model.
func TestTruncatedFiles(t *testing.T) {
	w := llamatest.Random(shape(), 5, false)
	llamatest.Quantize(w, llama.Q8_0)
	v := llamatest.SPMVocab(w.Config.VocabSize)
	b := write(t, w, llamatest.GGUFOptions{Vocab: &v})
	for _, n := range []int{0, 3, 4, 10, 23, 100, 1000, 5000, len(b) / 2, len(b) - 1} {
		f, err := gguf.Parse(b[:n])
		if err == nil {
			_, err = gguf.Llama(f)
		}
		if !errors.Is(err, gguf.ErrTruncated) && !errors.Is(err, gguf.ErrFormat) {
			t.Errorf("cut at %d of %d: %v", n, len(b), err)
		}
	}
}

func TestUnsupported(t *testing.T) {
	w := llamatest.Random(shape(), 5, false)
	f, err := gguf.Parse(write(t, w, llamatest.GGUFOptions{Architecture: "gemma"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gguf.Llama(f); !errors.Is(err, gguf.ErrUnsupported) {
		t.Errorf("architecture gemma: %v", err)
	}

	// Tensors of types that do not load, or do not suit the width: rewrite
	// the type of token_embd.weight (shape() is 64 wide).
	for _, c := range []struct {
		typ  uint32
		want error
		says string
	}{
		{20, gguf.ErrUnsupported, "token_embd.weight is IQ4_NL (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K load)"},
		{16, gguf.ErrUnsupported, "token_embd.weight is IQ2_XXS"},
		{12, gguf.ErrFormat, "token_embd.weight is Q4_K with rows of 64 columns, not whole blocks of 256"},
		{4, gguf.ErrUnsupported, "token_embd.weight is Q4_2"},
		{99, gguf.ErrUnsupported, "token_embd.weight is ggml type 99"},
		{256, gguf.ErrUnsupported, "token_embd.weight is ggml type 256"},
	} {
		b := write(t, w, llamatest.GGUFOptions{})
		i := bytes.Index(b, []byte("token_embd.weight"))
		typeAt := i + len("token_embd.weight") + 4 + 2*8
		binary.LittleEndian.PutUint32(b[typeAt:], c.typ)
		f, err = gguf.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gguf.Llama(f); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("a ggml type %d tensor: %v, want %v saying %q", c.typ, err, c.want, c.says)
		}
	}

	b := write(t, w, llamatest.GGUFOptions{})
	binary.LittleEndian.PutUint32(b[4:], 2)
	if _, err := gguf.Parse(b); !errors.Is(err, gguf.ErrUnsupported) {
		t.Errorf("version 2: %v", err)
	}
}

// FuzzParse: no input panics Parse or Llama, or makes them allocate without
// bound.
func FuzzParse(f *testing.F) {
	c := llama.Config{Dim: 32, HiddenDim: 64, Layers: 1, Heads: 2, KVHeads: 1, VocabSize: 8, MaxSeqLen: 16}
	w := llamatest.Random(c, 1, false)
	v := llamatest.Vocab{Model: "llama", Tokens: []string{"a", "b", "c", "d", "e", "f", "g", "h"}, BOS: 1, EOS: 2}
	f.Add(write(f, w, llamatest.GGUFOptions{Vocab: &v}))
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if file, err := gguf.Parse(b); err == nil {
			gguf.Llama(file)
		}
	})
}

// TestTokenizerFromMetadata: the SentencePiece tokenizer a file carries
// encodes as its vocabulary says, and a gpt2 tokenizer needs its merges.
func TestTokenizerFromMetadata(t *testing.T) {
	w := llamatest.Random(shape(), 5, true)
	v := llamatest.SPMVocab(w.Config.VocabSize)
	v.ChatTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"
	f, err := gguf.Parse(write(t, w, llamatest.GGUFOptions{Vocab: &v}))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := gguf.Tokenizer(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range tk.Encode("Once upon a time, there was a little girl named Lily.", true, false) {
		got = append(got, tk.Piece(id))
	}
	want := []string{"<s>", "▁Once", "▁upon", "▁a", "▁time", ",", "▁there", "▁was", "▁a", "▁little", "▁girl", "▁named", "▁Lily", "."}
	if !slices.Equal(got, want) {
		t.Errorf("tokens %q, want %q", got, want)
	}
	if f.ChatTemplate() != v.ChatTemplate {
		t.Errorf("chat template %q", f.ChatTemplate())
	}

	v.Model = "gpt2"
	f, err = gguf.Parse(write(t, w, llamatest.GGUFOptions{Vocab: &v}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gguf.Tokenizer(f); !errors.Is(err, gguf.ErrFormat) {
		t.Errorf("gpt2 without merges: %v", err)
	}
	v.Model = "bert"
	f, _ = gguf.Parse(write(t, w, llamatest.GGUFOptions{Vocab: &v}))
	if _, err := gguf.Tokenizer(f); !errors.Is(err, gguf.ErrUnsupported) {
		t.Errorf("bert tokenizer: %v", err)
	}
}

// TestRopeScaling: Llama 3.1/3.2's rope_freqs.weight and linear scaling
// load (llama.cpp's semantics: a factor without a type is linear, type
// none turns it off); every other scaling type, and every key and tensor
// the loader does not implement, is refused by name — never ignored.
func TestRopeScaling(t *testing.T) {
	w := llamatest.Random(shape(), 5, true)
	w.RopeFactors = []float32{1, 1.5, 4, 8}
	w.Config.RopeScale = 2
	v := llamatest.SPMVocab(w.Config.VocabSize)
	f, err := gguf.Parse(write(t, w, llamatest.GGUFOptions{Vocab: &v}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := gguf.Llama(f)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config != w.Config || !slices.Equal(got.RopeFactors, w.RopeFactors) {
		t.Fatalf("config %+v factors %v, wrote %+v %v", got.Config, got.RopeFactors, w.Config, w.RopeFactors)
	}

	plain := llamatest.Random(shape(), 5, true)
	for _, tc := range []struct {
		name  string
		extra map[string]any
		scale float64
	}{
		{"factor without type", map[string]any{"llama.rope.scaling.factor": float32(4)}, 4},
		{"old key", map[string]any{"llama.rope.scale_linear": float32(3)}, 3},
		{"type none", map[string]any{"llama.rope.scaling.type": "none", "llama.rope.scaling.factor": float32(4)}, 0},
		{"factor 1", map[string]any{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float32(1)}, 0},
		{"inert keys", map[string]any{"llama.expert_count": uint32(0), "llama.attention.causal": true,
			"llama.rope.scaling.original_context_length": uint32(8192), "llama.vocab_size": uint32(plain.Config.VocabSize)}, 0},
	} {
		f, err := gguf.Parse(write(t, plain, llamatest.GGUFOptions{Extra: tc.extra}))
		if err != nil {
			t.Fatal(err)
		}
		got, err := gguf.Llama(f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Config.RopeScale != tc.scale {
			t.Errorf("%s: RopeScale %v, want %v", tc.name, got.Config.RopeScale, tc.scale)
		}
	}

	for _, tc := range []struct {
		name    string
		extra   map[string]any
		tensors map[string][]float32
		want    string // the refusal names it
	}{
		{"yarn", map[string]any{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": float32(4)}, nil, `"yarn"`},
		{"longrope", map[string]any{"llama.rope.scaling.type": "longrope"}, nil, `"longrope"`},
		{"unknown type", map[string]any{"llama.rope.scaling.type": "dynamic"}, nil, `"dynamic"`},
		{"yarn key without type", map[string]any{"llama.rope.scaling.yarn_ext_factor": float32(1)}, nil, "llama.rope.scaling.yarn_ext_factor"},
		{"sliding window", map[string]any{"llama.attention.sliding_window": uint32(4096)}, nil, "llama.attention.sliding_window"},
		{"experts", map[string]any{"llama.expert_count": uint32(8)}, nil, "llama.expert_count"},
		{"attention scale", map[string]any{"llama.attention.scale": float32(0.1)}, nil, "llama.attention.scale"},
		{"logit scale", map[string]any{"llama.logit_scale": float32(2)}, nil, "llama.logit_scale"},
		{"attn factor", map[string]any{"llama.rope.scaling.attn_factor": float32(1.2)}, nil, "llama.rope.scaling.attn_factor"},
		{"value length", map[string]any{"llama.attention.value_length": uint32(16)}, nil, "llama.attention.value_length 16"},
		{"partial rope", map[string]any{"llama.rope.dimension_count": uint32(4)}, nil, "llama.rope.dimension_count 4"},
		{"other architecture", map[string]any{"general.architecture": "gemma3"}, nil, `general.architecture "gemma3"`},
		{"vocab size", map[string]any{"llama.vocab_size": uint32(7)}, nil, "llama.vocab_size"},
		{"longrope factors", nil, map[string][]float32{"rope_factors_long.weight": {1, 1, 1, 1}}, "rope_factors_long.weight (LongRoPE"},
		{"output bias", nil, map[string][]float32{"blk.0.attn_output.bias": make([]float32, 64)}, "blk.0.attn_output.bias (a bias"},
		{"q norm on llama", nil, map[string][]float32{"blk.1.attn_q_norm.weight": make([]float32, 8)}, "blk.1.attn_q_norm.weight (a per-head Q/K norm"},
		{"unknown tensor", nil, map[string][]float32{"blk.2.mystery.weight": {1}}, "blk.2.mystery.weight"},
	} {
		f, err := gguf.Parse(write(t, plain, llamatest.GGUFOptions{Extra: tc.extra, ExtraTensors: tc.tensors}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = gguf.Llama(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.name, err, tc.want)
		}
	}
}

// TestArchitectures: qwen2 (biases, RoPE on halves) and qwen3 (per-head Q/K
// norms, a head width of attention.key_length other than dim/heads) files
// load back what was written, keys under their own prefix; a qwen3 file
// without its norms and a qwen2 file with a tensor qwen2 does not have are
// refused by name.
func TestArchitectures(t *testing.T) {
	for _, tc := range []struct {
		arch  string
		shape llama.Config
		build func(w *llama.Weights)
	}{
		{"qwen2", shape(), func(w *llama.Weights) { llamatest.AddBiases(w, 3) }},
		{"qwen3", llama.Config{Dim: 64, HiddenDim: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadSize: 32, VocabSize: 512, MaxSeqLen: 64},
			func(w *llama.Weights) { llamatest.AddQKNorms(w, 3) }},
		{"llama", shape(), func(w *llama.Weights) { llamatest.AddBiases(w, 3) }}, // llama.cpp loads biases on llama too
	} {
		for _, typ := range []llama.Type{llama.F32, llama.Q8_0} {
			c := tc.shape
			if tc.arch != "llama" {
				c.Rope = llama.RopeHalves
			}
			w := llamatest.Random(c, 5, typ == llama.F32)
			tc.build(w)
			llamatest.Quantize(w, typ)
			v := llamatest.SPMVocab(c.VocabSize)
			f, err := gguf.Parse(write(t, w, llamatest.GGUFOptions{Architecture: tc.arch, Vocab: &v}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := gguf.Llama(f)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.arch, typ, err)
			}
			if got.Config != w.Config {
				t.Fatalf("%s: config %+v, wrote %+v", tc.arch, got.Config, w.Config)
			}
			for i := range w.Layers {
				g, e := got.Layers[i], w.Layers[i]
				sameMatrix(t, "wq", g.Wq, e.Wq)
				sameMatrix(t, "wo", g.Wo, e.Wo)
				for j, v := range [][]float32{g.BQ, g.BK, g.BV, g.QNorm, g.KNorm} {
					if want := [][]float32{e.BQ, e.BK, e.BV, e.QNorm, e.KNorm}[j]; !slices.Equal(v, want) {
						t.Fatalf("%s layer %d: bias or norm %d differs", tc.arch, i, j)
					}
				}
			}
		}
	}

	q3 := llamatest.Random(llama.Config{Dim: 64, HiddenDim: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadSize: 32, VocabSize: 512, MaxSeqLen: 64, Rope: llama.RopeHalves}, 5, true)
	f, _ := gguf.Parse(write(t, q3, llamatest.GGUFOptions{Architecture: "qwen3"}))
	if _, err := gguf.Llama(f); err == nil || !strings.Contains(err.Error(), "blk.0.attn_q_norm.weight missing") {
		t.Errorf("qwen3 without q/k norms: %v", err)
	}
	q2 := llamatest.Random(shape(), 5, true)
	q2.Config.Rope = llama.RopeHalves
	for _, name := range []string{"rope_freqs.weight", "output.bias"} {
		f, _ = gguf.Parse(write(t, q2, llamatest.GGUFOptions{Architecture: "qwen2", ExtraTensors: map[string][]float32{name: make([]float32, 4)}}))
		if _, err := gguf.Llama(f); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("qwen2 with %s: %v", name, err)
		}
	}
	f, _ = gguf.Parse(write(t, q2, llamatest.GGUFOptions{Architecture: "qwen2", Extra: map[string]any{"qwen2.pooling_type": uint32(1)}}))
	if _, err := gguf.Llama(f); err == nil || !strings.Contains(err.Error(), "qwen2.pooling_type") {
		t.Errorf("qwen2 embedding model: %v", err)
	}
}

// TestPreTokenizerNames: tokenizer.ggml.pre picks the pre-tokenizer as
// llama.cpp reads it; a missing one is llama.cpp's default with a note to
// log; an unknown one is refused naming it.
func TestPreTokenizerNames(t *testing.T) {
	w := llamatest.Random(shape(), 5, true)
	v := llamatest.SPMVocab(w.Config.VocabSize)
	f, err := gguf.Parse(write(t, w, llamatest.GGUFOptions{Vocab: &v}))
	if err != nil {
		t.Fatal(err)
	}
	f.Metadata["tokenizer.ggml.model"] = "gpt2"
	f.Metadata["tokenizer.ggml.merges"] = []string{}
	for _, tc := range []struct {
		name    string // "" for none
		pre     bpe.Pre
		bos     bool
		note    bool
		refused bool
	}{
		{"llama-bpe", bpe.PreLlama3, true, false, false},
		{"smaug-bpe", bpe.PreLlama3, false, false, false},
		{"qwen2", bpe.PreQwen2, false, false, false},
		{"qwen35", bpe.PreQwen35, false, false, false},
		{"smollm", bpe.PreStarCoder, false, false, false},
		{"gpt-2", bpe.PreGPT2, false, false, false},
		{"falcon", bpe.PreFalcon, false, false, false},
		{"", bpe.PreDefault, false, true, false},
		{"tekken", 0, false, false, true},
		{"no-such-tokenizer", 0, false, false, true},
	} {
		delete(f.Metadata, "tokenizer.ggml.pre")
		if tc.name != "" {
			f.Metadata["tokenizer.ggml.pre"] = tc.name
		}
		p, note, err := gguf.PreTokenizer(f)
		tk, terr := gguf.Tokenizer(f)
		if tc.refused {
			if !errors.Is(err, gguf.ErrUnsupported) || !errors.Is(terr, gguf.ErrUnsupported) || !strings.Contains(terr.Error(), `"`+tc.name+`"`) {
				t.Errorf("%q: %v, %v; want a refusal naming it", tc.name, err, terr)
			}
			continue
		}
		if err != nil || terr != nil || p.Pre != tc.pre || (note != "") != tc.note || gguf.AddBOS(f, tk) != tc.bos {
			t.Errorf("%q: %+v, note %q, %v, %v, adds BOS %v", tc.name, p, note, err, terr, tk != nil && gguf.AddBOS(f, tk))
		}
	}
	f.Metadata["tokenizer.ggml.pre"] = "llama-bpe"
	f.Metadata["tokenizer.ggml.add_bos_token"] = false
	if tk, err := gguf.Tokenizer(f); err != nil || gguf.AddBOS(f, tk) {
		t.Errorf("add_bos_token false: %v", err)
	}
}
