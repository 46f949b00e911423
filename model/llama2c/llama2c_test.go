package llama2c_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/model/llama"
	"github.com/kvlease/kvlease/model/llama2c"
)

func TestRoundTrip(t *testing.T) {
	for _, shared := range []bool{true, false} {
		w := llamatest.Random(llamatest.Shape260K, 9, shared)
		var buf bytes.Buffer
		if err := llamatest.WriteLlama2C(&buf, w); err != nil {
			t.Fatal(err)
		}
		if int64(buf.Len()) != llama2c.Size(w.Config, shared) {
			t.Fatalf("wrote %d bytes, Size says %d", buf.Len(), llama2c.Size(w.Config, shared))
		}
		got, err := llama2c.Load(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if got.Config != w.Config {
			t.Fatalf("config %+v, wrote %+v", got.Config, w.Config)
		}
		eq := func(a, b llama.Matrix) bool { return a.Rows == b.Rows && a.Cols == b.Cols && slices.Equal(a.F, b.F) }
		if !eq(got.Embedding, w.Embedding) || !eq(got.Output, w.Output) || !slices.Equal(got.FinalNorm, w.FinalNorm) {
			t.Fatal("embedding, output or final norm differ")
		}
		for i := range w.Layers {
			g, e := got.Layers[i], w.Layers[i]
			if !eq(g.Wq, e.Wq) || !eq(g.Wk, e.Wk) || !eq(g.Wv, e.Wv) || !eq(g.Wo, e.Wo) ||
				!eq(g.W1, e.W1) || !eq(g.W2, e.W2) || !eq(g.W3, e.W3) ||
				!slices.Equal(g.AttnNorm, e.AttnNorm) || !slices.Equal(g.FFNNorm, e.FFNNorm) {
				t.Fatalf("layer %d differs", i)
			}
		}
		for _, n := range []int{0, 27, 28, 1000, buf.Len() - 4} {
			if _, err := llama2c.Load(buf.Bytes()[:n]); !errors.Is(err, llama2c.ErrTruncated) {
				t.Errorf("cut at %d: %v", n, err)
			}
		}
		if _, err := llama2c.Load(append(buf.Bytes(), 0, 0, 0, 0)); !errors.Is(err, llama2c.ErrFormat) {
			t.Errorf("4 bytes too many: %v", err)
		}
	}
	if _, err := llama2c.Load([]byte("ak42\x00\x00\x00\x00")); !errors.Is(err, llama2c.ErrUnsupported) {
		t.Errorf("versioned export: %v", err)
	}
}

func TestTokenizerRoundTrip(t *testing.T) {
	v := llamatest.SPMVocab(512)
	var buf bytes.Buffer
	if err := llamatest.WriteTokenizerBin(&buf, v.Tokens, v.Scores); err != nil {
		t.Fatal(err)
	}
	got, err := llama2c.LoadTokenizer(buf.Bytes(), 512)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Pieces, v.Tokens) || !slices.Equal(got.Scores, v.Scores) {
		t.Fatal("tokenizer differs")
	}
	if _, err := llama2c.LoadTokenizer(buf.Bytes(), 513); !errors.Is(err, llama2c.ErrTruncated) {
		t.Errorf("vocabulary too large: %v", err)
	}
	if _, err := llama2c.LoadTokenizer(buf.Bytes(), 100); !errors.Is(err, llama2c.ErrFormat) {
		t.Errorf("vocabulary too small: %v", err)
	}
	if _, err := llama2c.LoadTokenizer(buf.Bytes()[:buf.Len()-2], 512); !errors.Is(err, llama2c.ErrTruncated) {
		t.Errorf("cut: %v", err)
	}
}

// TestTokenizer: a tokenizer.bin spells spaces as " "; encoding and decoding
// go through SentencePiece with byte fallback.
func TestTokenizer(t *testing.T) {
	v := llamatest.SPMVocab(512)
	for i, p := range v.Tokens {
		v.Tokens[i] = strings.ReplaceAll(p, "▁", " ")
	}
	var buf bytes.Buffer
	if err := llamatest.WriteTokenizerBin(&buf, v.Tokens, v.Scores); err != nil {
		t.Fatal(err)
	}
	voc, err := llama2c.LoadTokenizer(buf.Bytes(), 512)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := voc.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode("Once upon a time é", true, false)
	var got []string
	for _, id := range ids {
		got = append(got, tk.Piece(id))
	}
	want := []string{"<s>", " Once", " upon", " a", " time", " ", "<0xC3>", "<0xA9>"}
	if !slices.Equal(got, want) {
		t.Errorf("tokens %q, want %q", got, want)
	}
	if s := tk.Decode(ids); s != "Once upon a time é" {
		t.Errorf("decoded %q", s)
	}
}
