package llamafile_test

import (
	"bytes"
	"errors"
	"github.com/kvlease/kvlease/chat"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/llama"
	"github.com/kvlease/kvlease/model/llamafile"
	"github.com/kvlease/kvlease/tokenizer"
)

func writeFile(t *testing.T, path string, write func(*bytes.Buffer) error) {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// greedy runs prompt through a fresh executor for n greedy tokens.
func greedy(t *testing.T, w *llama.Weights, run llama.Runner, prompt []int32, n int) []int32 {
	t.Helper()
	pool := kvblock.New(kvblock.Config{NumBlocks: 32, BlockSizeTokens: 16, BytesPerToken: w.Config.BytesPerToken()})
	e, err := llama.New(w, pool, run)
	if err != nil {
		t.Fatal(err)
	}
	h := pool.NewHold(kvblock.HoldRequest, 1)
	toks := slices.Clone(prompt)
	done := 0
	var out model.StepResult
	for len(toks) < len(prompt)+n {
		if need := (len(toks)+15)/16 - pool.Len(h); need > 0 {
			pool.Allocate(h, need)
		}
		b := model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: toks, Start: done, Count: len(toks) - done, Blocks: pool.Blocks(h), Sample: true}}}
		e.Execute(&b, &out)
		done = len(toks)
		toks = append(toks, out.Tokens[0])
	}
	return toks[len(prompt):]
}

// TestOpenBothFormats: a GGUF file and a llama2.c checkpoint with its
// tokenizer.bin, memory-mapped, compute the tokens of the weights they were
// written from, with the worker pool as without it.
func TestOpenBothFormats(t *testing.T) {
	dir := t.TempDir()
	w := llamatest.Random(llamatest.Shape260K, 21, false)
	v := llamatest.SPMVocab(w.Config.VocabSize)
	v.ChatTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
		"{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
	gg := filepath.Join(dir, "m.gguf")
	writeFile(t, gg, func(b *bytes.Buffer) error { return llamatest.WriteGGUF(b, w, llamatest.GGUFOptions{Vocab: &v}) })
	l2 := filepath.Join(dir, "stories.bin")
	writeFile(t, l2, func(b *bytes.Buffer) error { return llamatest.WriteLlama2C(b, w) })
	spaced := slices.Clone(v.Tokens)
	for i := range spaced {
		spaced[i] = strings.ReplaceAll(spaced[i], "▁", " ")
	}
	writeFile(t, filepath.Join(dir, "tokenizer.bin"), func(b *bytes.Buffer) error { return llamatest.WriteTokenizerBin(b, spaced, v.Scores) })

	prompt := []int32{1, 300, 301, 302, 40, 41}
	want := greedy(t, w, nil, prompt, 10)
	workers := llamafile.NewWorkers(3)
	defer workers.Close()
	for _, path := range []string{gg, l2} {
		m, err := llamafile.Open(path, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range []llama.Runner{nil, workers} {
			if got := greedy(t, m.Weights, run, prompt, 10); !slices.Equal(got, want) {
				t.Errorf("%s: tokens %v, from the written weights %v", path, got, want)
			}
		}
		// By default BOS comes first and "</s>" written in the prompt is
		// EOS; add_special_tokens false and split_special_tokens true
		// turn both off.
		ids := m.AppendEncode(nil, "Once upon a time</s>", tokenizer.Options{})
		if m.Tok.Decode(ids) != "Once upon a time" || ids[0] != 1 || ids[len(ids)-1] != 2 {
			t.Errorf("%s: encode %v", path, ids)
		}
		ids = m.AppendEncode(nil, "Once upon a time</s>", tokenizer.Options{NoAddSpecialTokens: true, SplitSpecialTokens: true})
		if m.Tok.Decode(ids) != "Once upon a time</s>" || ids[0] == 1 || slices.Contains(ids, 2) {
			t.Errorf("%s: encode without special tokens %v", path, ids)
		}
		m.Close()
	}
	m, err := llamafile.Open(gg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Chat.Template == nil || m.Chat.Fallback != "" || m.Name() != "m" || m.Format != llamafile.GGUF {
		t.Errorf("chat %+v, name %q, format %v", m.Chat, m.Name(), m.Format)
	}
	conv := &chat.Conversation{Messages: []chat.Message{{Role: "user", Content: "Hi"}}, AddGenerationPrompt: true}
	text := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if toks, err := m.AppendChat(nil, conv); err != nil || !slices.Equal(toks, m.Tok.Encode(text, false, true)) {
		t.Errorf("chat tokens %v %v, want those of %q without BOS", toks, err, text)
	}
	conv.Template = "{{ raise_exception('no ' + messages[0].role) }}"
	if _, err := m.AppendChat(nil, conv); err == nil || err.Error() != "no user" {
		t.Errorf("a request's raising template: %v", err)
	}

	os.Remove(filepath.Join(dir, "tokenizer.bin"))
	if _, err := llamafile.Open(l2, ""); !errors.Is(err, llamafile.ErrNoTokenizer) {
		t.Errorf("llama2.c without tokenizer.bin: %v", err)
	}
	if _, err := llamafile.Open(filepath.Join(dir, "missing.gguf"), ""); err == nil {
		t.Error("a missing file opened")
	}
}

// TestOpenPacks: a Q4_K_M file's weights and a Q8_0 file's (the second
// with the classifier tied to the embedding), packed at Open where the CPU
// has the packed kernels (llama.Weights.Pack, in memory of mapAnon), compute
// the tokens of the weights they were written from, with the worker pool
// as without it, after the mapping's pages of the rows no step reads were
// released (llama.Weights.Unread); Close unmaps the packed copy too.
func TestOpenPacks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool
		quant  func(*llama.Weights)
	}{
		{"q4_k_m", false, func(w *llama.Weights) { llamatest.QuantizeKM(w, llama.Q4_K) }},
		{"q8_0", true, func(w *llama.Weights) { llamatest.Quantize(w, llama.Q8_0) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testOpenPacks(t, tc.shared, tc.quant) })
	}
}

func testOpenPacks(t *testing.T, shared bool, quant func(*llama.Weights)) {
	dir := t.TempDir()
	w := llamatest.Random(llama.Config{Dim: 256, HiddenDim: 512, Layers: 2, Heads: 4, KVHeads: 2, VocabSize: 512, MaxSeqLen: 512}, 22, shared)
	quant(w)
	v := llamatest.SPMVocab(w.Config.VocabSize)
	gg := filepath.Join(dir, "m.gguf")
	writeFile(t, gg, func(b *bytes.Buffer) error { return llamatest.WriteGGUF(b, w, llamatest.GGUFOptions{Vocab: &v}) })
	st, err := os.Stat(gg)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{1, 300, 301, 302, 40, 41}
	want := greedy(t, w, nil, prompt, 10)
	workers := llamafile.NewWorkers(2)
	defer workers.Close()
	m, err := llamafile.Open(gg, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Packed != w.PackSize() {
		t.Errorf("Packed %d bytes, want PackSize's %d", m.Packed, w.PackSize())
	}
	unread := 0
	for _, b := range m.Weights.Unread() {
		unread += len(b)
	}
	if m.Packed > 0 && runtime.GOOS == "linux" && (m.Released == 0 || m.Released > unread || unread > int(st.Size())) {
		t.Errorf("released %d bytes of %d unread rows (file %d bytes)", m.Released, unread, st.Size())
	}
	unpacked, err := llamafile.OpenWith(gg, "", llamafile.Options{NoRepack: true})
	if err != nil {
		t.Fatal(err)
	}
	if unpacked.Packed != 0 || unpacked.Released != 0 || unpacked.Weights.PackSize() != m.Packed {
		t.Errorf("NoRepack: Packed %d, Released %d, PackSize %d; want 0, 0 and %d", unpacked.Packed, unpacked.Released, unpacked.Weights.PackSize(), m.Packed)
	}
	for _, mm := range []*llamafile.Model{m, unpacked} {
		for _, run := range []llama.Runner{nil, workers} {
			if got := greedy(t, mm.Weights, run, prompt, 10); !slices.Equal(got, want) {
				t.Errorf("packed %d bytes: tokens %v, from the written weights %v", mm.Packed, got, want)
			}
		}
		if err := mm.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
