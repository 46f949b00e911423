package gguf

import (
	"fmt"

	"github.com/kvlease/kvlease/tokenizer/bpe"
)

// Tokenizer builds the tokenizer the file's metadata carries:
// tokenizer.ggml.model "llama" (SentencePiece, with tokenizer.ggml.scores)
// or "gpt2" (byte-level BPE, with tokenizer.ggml.merges), the tokens,
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
	if v.Kind == bpe.ByteLevel && v.Merges == nil {
		return nil, fmt.Errorf("%w: a gpt2 tokenizer without tokenizer.ggml.merges", ErrFormat)
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
