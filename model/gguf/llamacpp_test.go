package gguf_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/model/gguf"
	"github.com/kvlease/kvlease/tokenizer/bpe"
)

// The tests here check the tokenizers against llama.cpp's vocabularies
// (real tokenizers of real models, in llama.cpp's models/ggml-vocab-*.gguf)
// and against token ids no one here computed: Hugging Face's, which
// llama.cpp ships beside the vocabularies (.gguf.inp/.gguf.out), and
// llama.cpp's own over this package's corpus (testdata/tokenize, made by
// tools/llamacpp-tokenize/regen.py). They find llama.cpp's source tree
// through KVLEASE_LLAMACPP and skip without it.

// llamaCppVocab loads ggml-vocab-<name>.gguf from KVLEASE_LLAMACPP.
func llamaCppVocab(t testing.TB, name string) (*gguf.File, string) {
	t.Helper()
	dir := os.Getenv("KVLEASE_LLAMACPP")
	if dir == "" {
		t.Skip("KVLEASE_LLAMACPP is not set: no llama.cpp vocabularies to compare with (see tools/llamacpp-tokenize)")
	}
	path := filepath.Join(dir, "models", "ggml-vocab-"+name+".gguf")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("KVLEASE_LLAMACPP=%s: %v", dir, err)
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f, path
}

// loadedVocabs are llama.cpp's vocabularies whose tokenizers load, and
// refusedVocabs the ones refused, with the words the refusal names.
var (
	loadedVocabs = []string{"llama-bpe", "qwen2", "qwen35", "gpt-2", "mpt", "starcoder", "refact", "command-r",
		"falcon", "llama-spm", "baichuan", "phi-3", "gpt-neox"}
	refusedVocabs = map[string]string{
		"deepseek-llm":   `pre-tokenizer tokenizer.ggml.pre "deepseek-llm"`,
		"deepseek-coder": `pre-tokenizer tokenizer.ggml.pre "deepseek-coder"`,
		"bert-bge":       `tokenizer "bert"`,
		"nomic-bert-moe": `tokenizer "t5"`,
		"gemma-4":        `tokenizer "gemma4"`,
	}
)

func describe(tk *bpe.Tokenizer, ids []int32) string {
	var sb strings.Builder
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%d:%q", id, tk.Piece(id))
	}
	return sb.String()
}

// TestLlamaCppVocabularies: each vocabulary loads or is refused naming
// what is not supported.
func TestLlamaCppVocabularies(t *testing.T) {
	for _, name := range loadedVocabs {
		f, path := llamaCppVocab(t, name)
		if _, err := gguf.Tokenizer(f); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	for name, want := range refusedVocabs {
		f, path := llamaCppVocab(t, name)
		_, err := gguf.Tokenizer(f)
		if !errors.Is(err, gguf.ErrUnsupported) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an ErrUnsupported naming %s", path, err, want)
		}
	}
}

// TestHuggingFaceTokenizations: every case llama.cpp ships for a
// vocabulary (.gguf.inp, cases separated by "\n__ggml_vocab_test__\n";
// .gguf.out, one line of ids per case, made by Hugging Face's tokenizer
// from the model's tokenizer.json), tokenized as plain text without BOS.
func TestHuggingFaceTokenizations(t *testing.T) {
	for _, name := range loadedVocabs {
		t.Run(name, func(t *testing.T) {
			f, path := llamaCppVocab(t, name)
			inp, err := os.ReadFile(path + ".inp")
			if errors.Is(err, os.ErrNotExist) {
				t.Skipf("%s has no .inp", path)
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile(path + ".out")
			if err != nil {
				t.Fatal(err)
			}
			cases := strings.Split(strings.TrimSuffix(string(inp), "\n__ggml_vocab_test__\n"), "\n__ggml_vocab_test__\n")
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(cases) != len(lines) {
				t.Fatalf("%d cases, %d answers", len(cases), len(lines))
			}
			tk, err := gguf.Tokenizer(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, text := range cases {
				var want []int32
				for _, w := range strings.Fields(lines[i]) {
					var id int32
					if _, err := fmt.Sscan(w, &id); err != nil {
						t.Fatalf("answer %d: %v", i, err)
					}
					want = append(want, id)
				}
				if got := tk.Encode(text, false, false); !slices.Equal(got, want) {
					t.Errorf("%q:\n got %s\nwant %s", text, describe(tk, got), describe(tk, want))
				}
			}
			t.Logf("%s: %d cases equal", filepath.Base(path), len(cases))
		})
	}
}

// knownDifferences are the corpus strings where llama.cpp's tokens are
// not Hugging Face's, and kvlease's are Hugging Face's.
var knownDifferences = map[string]map[string]string{
	"qwen2": qwenEOS, "qwen35": qwenEOS,
}

// qwenEOS: Qwen2's vocabulary has "</s>" as an ordinary token (id 128247,
// type NORMAL), which Hugging Face's tokenizer (so vLLM) merges like any
// text; llama.cpp makes every token spelt "</s>" a control token by its
// text (an end-of-generation guess) and parses it as special.
var qwenEOS = map[string]string{
	"<s>Hello</s>": "qwen2's \"</s>\" is text", "</s>": "qwen2's \"</s>\" is text", "a</s>b": "qwen2's \"</s>\" is text",
}

type corpusCase struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

type corpusIDs struct {
	LlamaCpp string    `json:"llama.cpp"`
	Vocab    string    `json:"vocab"`
	AddBOS   bool      `json:"add_bos"`
	Prompt   [][]int32 `json:"prompt"`
	Plain    [][]int32 `json:"plain"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestTokenizerCorpus compares the corpus's tokens on each vocabulary with
// llama.cpp's (testdata/tokenize/<vocab>.json): as a prompt (BOS when the
// file asks for it, special-token text parsed) and as plain text.
func TestTokenizerCorpus(t *testing.T) {
	var corpus []corpusCase
	readJSON(t, "testdata/tokenize/corpus.json", &corpus)
	files, _ := filepath.Glob("testdata/tokenize/*.json")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		if name == "corpus" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			var want corpusIDs
			readJSON(t, file, &want)
			if len(want.Prompt) != len(corpus) || len(want.Plain) != len(corpus) {
				t.Fatalf("%s: %d and %d answers for %d strings: run tools/llamacpp-tokenize/regen.py", file, len(want.Prompt), len(want.Plain), len(corpus))
			}
			f, _ := llamaCppVocab(t, name)
			tk, err := gguf.Tokenizer(f)
			if err != nil {
				t.Fatal(err)
			}
			bos := gguf.AddBOS(f, tk)
			if bos != want.AddBOS {
				t.Errorf("adds BOS %v, llama.cpp %v", bos, want.AddBOS)
			}
			bad, known := 0, 0
			for i, c := range corpus {
				for _, m := range []struct {
					mode     string
					bos, spc bool
					want     []int32
				}{{"prompt", bos, true, want.Prompt[i]}, {"plain", false, false, want.Plain[i]}} {
					got := tk.Encode(c.Text, m.bos, m.spc)
					if why, ok := knownDifferences[name][c.Text]; ok && m.spc {
						// Hugging Face's answer: the text as plain text.
						if hf := tk.Encode(c.Text, m.bos, false); !slices.Equal(got, hf) || slices.Equal(got, m.want) {
							t.Errorf("%s %q: %s no longer holds: got %s, llama.cpp %s", m.mode, c.Text, why, describe(tk, got), describe(tk, m.want))
						}
						known++
						continue
					}
					if !slices.Equal(got, m.want) {
						bad++
						t.Errorf("%s %s %q:\n got %s\nwant %s", c.Kind, m.mode, c.Text, describe(tk, got), describe(tk, m.want))
					}
				}
			}
			t.Logf("%s: %d strings twice, %d differ from llama.cpp %s, %d known differences", want.Vocab, len(corpus), bad, want.LlamaCpp, known)
		})
	}
}

// BenchmarkEncodeLlama3: a mixed prompt on Llama 3's tokenizer.
func BenchmarkEncodeLlama3(b *testing.B) {
	f, _ := llamaCppVocab(b, "llama-bpe")
	tk, err := gguf.Tokenizer(f)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("The year 2024 saw 1,234,567 people — they'd said \"it's fine\".\n\n"+
		"func main() {\n\tfmt.Println(x + 42)\n}\n   indented   text\t\twith tabs\n"+
		"東京は日本の首都です。 Ünïcödé naïve café 🦙🦙 emoji!\n", 40)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tk.Encode(text, true, true)
	}
}
