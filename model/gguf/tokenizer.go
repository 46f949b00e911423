package gguf

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kvlease/kvlease/tokenizer/bpe"
)

// Tokenizer builds the tokenizer the file's metadata carries:
// tokenizer.ggml.model "llama" (SentencePiece, with tokenizer.ggml.scores)
// or "gpt2" (byte-level BPE, with tokenizer.ggml.merges and the
// pre-tokenizer tokenizer.ggml.pre names, see PreTokenizer), the tokens,
// their types, BOS and EOS, and tokenizer.ggml.add_space_prefix. The chat
// template, when the file has one, is ChatTemplate's.
func Tokenizer(f *File) (*bpe.Tokenizer, error) {
	m, _ := f.String("tokenizer.ggml.model")
	var v bpe.Vocab
	switch m {
	case "llama":
		v.Kind = bpe.SentencePiece
	case "gpt2":
		v.Kind = bpe.ByteLevel
	case "":
		return nil, fmt.Errorf("%w: no tokenizer in the file (tokenizer.ggml.model)", ErrFormat)
	default:
		return nil, fmt.Errorf("%w: tokenizer %q (llama and gpt2 load)", ErrUnsupported, m)
	}
	var ok bool
	if v.Pieces, ok = f.Metadata["tokenizer.ggml.tokens"].([]string); !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens missing or not strings", ErrFormat)
	}
	if s, present := f.Metadata["tokenizer.ggml.scores"]; present {
		if v.Scores, ok = s.([]float32); !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.scores is not float32s", ErrFormat)
		}
	}
	if s, present := f.Metadata["tokenizer.ggml.token_type"]; present {
		if v.Types, ok = s.([]int32); !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.token_type is not int32s", ErrFormat)
		}
	}
	if s, present := f.Metadata["tokenizer.ggml.merges"]; present {
		if v.Merges, ok = s.([]string); !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.merges is not strings", ErrFormat)
		}
	}
	if v.Kind == bpe.ByteLevel {
		if v.Merges == nil {
			return nil, fmt.Errorf("%w: a gpt2 tokenizer without tokenizer.ggml.merges", ErrFormat)
		}
		pre, _, err := PreTokenizer(f)
		if err != nil {
			return nil, err
		}
		v.Pre, v.IgnoreMerges = pre.Pre, pre.IgnoreMerges
	}
	v.BOS, v.EOS = -1, -1
	if id, ok := f.Uint("tokenizer.ggml.bos_token_id"); ok && id < uint64(len(v.Pieces)) {
		v.BOS = int32(id)
	}
	if id, ok := f.Uint("tokenizer.ggml.eos_token_id"); ok && id < uint64(len(v.Pieces)) {
		v.EOS = int32(id)
	}
	if b, ok := f.Metadata["tokenizer.ggml.add_space_prefix"].(bool); ok {
		v.NoDummyPrefix = !b
	}
	return bpe.New(v)
}

// ChatTemplate is tokenizer.chat_template, or "".
func (f *File) ChatTemplate() string {
	s, _ := f.String("tokenizer.chat_template")
	return s
}

// Pre is how a byte-level tokenizer named by tokenizer.ggml.pre splits
// text, as llama.cpp reads the name.
type Pre struct {
	Pre bpe.Pre
	// IgnoreMerges: a word that is a token of its own is not merged.
	IgnoreMerges bool
	// AddBOS: text starts with BOS unless tokenizer.ggml.add_bos_token
	// says otherwise.
	AddBOS bool
}

// preTokenizers are the tokenizer.ggml.pre names that load, each with the
// pre-tokenizer llama.cpp gives it (names it maps to the same rules share
// an entry). Names llama.cpp knows with other rules are refused by name.
var preTokenizers = map[string]Pre{
	"default": {Pre: bpe.PreDefault},

	"gpt-2": {Pre: bpe.PreGPT2}, "phi-2": {Pre: bpe.PreGPT2}, "mpt": {Pre: bpe.PreGPT2},
	"olmo": {Pre: bpe.PreGPT2}, "gigachat": {Pre: bpe.PreGPT2}, "a.x-4.0": {Pre: bpe.PreGPT2},
	"mellum": {Pre: bpe.PreGPT2}, "exaone4": {Pre: bpe.PreGPT2}, "trillion": {Pre: bpe.PreGPT2},
	"granite-docling": {Pre: bpe.PreGPT2},

	"llama3": llama3, "llama-v3": llama3, "llama-bpe": llama3, "falcon3": llama3, "falcon-h1": llama3,
	"pixtral": llama3, "midm-2.0": llama3, "lfm2": llama3,
	"dbrx": {Pre: bpe.PreLlama3}, "smaug-bpe": {Pre: bpe.PreLlama3},

	"qwen2": {Pre: bpe.PreQwen2}, "deepseek-r1-qwen": {Pre: bpe.PreQwen2}, "kormo": {Pre: bpe.PreQwen2},
	"f2llmv2": {Pre: bpe.PreQwen2}, "stablelm2": {Pre: bpe.PreQwen2}, "hunyuan": {Pre: bpe.PreQwen2},
	"solar-open": {Pre: bpe.PreQwen2},
	"qwen35":     {Pre: bpe.PreQwen35},

	"starcoder": {Pre: bpe.PreStarCoder}, "smollm": {Pre: bpe.PreStarCoder}, "refact": {Pre: bpe.PreStarCoder},
	"command-r": {Pre: bpe.PreStarCoder}, "codeshell": {Pre: bpe.PreStarCoder}, "exaone": {Pre: bpe.PreStarCoder},
	"minerva-7b": {Pre: bpe.PreStarCoder}, "mellum2": {Pre: bpe.PreStarCoder},

	"falcon": {Pre: bpe.PreFalcon},
}

var llama3 = Pre{Pre: bpe.PreLlama3, IgnoreMerges: true, AddBOS: true}

// PreTokenizer is the pre-tokenizer of the file's byte-level tokenizer,
// named by tokenizer.ggml.pre. A file without the key gets llama.cpp's
// default, and note says so (the caller logs it: the tokens may differ
// from the ones the model was trained with). A name that does not load
// is an ErrUnsupported naming it.
func PreTokenizer(f *File) (p Pre, note string, err error) {
	name, ok := f.String("tokenizer.ggml.pre")
	if !ok {
		return preTokenizers["default"], "the file names no pre-tokenizer (tokenizer.ggml.pre): text is split with llama.cpp's default rules, which may not be the model's", nil
	}
	if p, ok = preTokenizers[name]; !ok {
		return p, "", fmt.Errorf("%w: pre-tokenizer tokenizer.ggml.pre %q (%s load)", ErrUnsupported, name, PreTokenizerNames())
	}
	return p, "", nil
}

// PreTokenizerNames lists the tokenizer.ggml.pre names that load.
func PreTokenizerNames() string {
	names := make([]string, 0, len(preTokenizers))
	for n := range preTokenizers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// AddBOS says whether text prompts start with BOS:
// tokenizer.ggml.add_bos_token when the file has it, else llama.cpp's
// default for the tokenizer (SentencePiece and Llama 3's byte-level
// tokenizer: yes; other byte-level ones: no).
func AddBOS(f *File, t *bpe.Tokenizer) bool {
	if t.BOS() < 0 {
		return false
	}
	if b, ok := f.Metadata["tokenizer.ggml.add_bos_token"].(bool); ok {
		return b
	}
	if t.Kind() == bpe.SentencePiece {
		return true
	}
	p, _, err := PreTokenizer(f)
	return err == nil && p.AddBOS
}
