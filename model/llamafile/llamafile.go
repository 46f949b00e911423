// Package llamafile opens real model files for kvlease serve: it
// memory-maps a GGUF v3 or legacy llama2.c checkpoint, builds the
// model/llama weights over the mapping, the tokenizer (from the GGUF
// metadata, or a llama2.c tokenizer.bin) and the chat format, and lends the
// executor a pool of worker goroutines (Workers). It is an edge: the file
// formats, the math and the tokenizers are pure packages (model/gguf,
// model/llama2c, model/llama, tokenizer/bpe); this package holds the system
// calls and the goroutines.
package llamafile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvlease/kvlease/chat"
	"github.com/kvlease/kvlease/model/constrain"
	"github.com/kvlease/kvlease/model/gguf"
	"github.com/kvlease/kvlease/model/llama"
	"github.com/kvlease/kvlease/model/llama2c"
	"github.com/kvlease/kvlease/tokenizer"
	"github.com/kvlease/kvlease/tokenizer/bpe"
)

// Format names a model file format.
type Format string

const (
	GGUF    Format = "gguf"
	Llama2C Format = "llama2.c"
)

// Model is an open model file. Its weights alias the mapping: Close only
// when nothing uses them any more.
type Model struct {
	Path    string
	Format  Format
	Weights *llama.Weights
	Tok     *bpe.Tokenizer
	// Chat renders chats: the file's own Jinja template
	// (tokenizer.chat_template), or the family of its markers when the
	// template cannot be compiled or run (Chat.Fallback says why; the
	// caller logs it once). A llama2.c checkpoint has no template:
	// chat.Plain.
	Chat *chat.Renderer
	// AddBOS: text prompts start with BOS (gguf.AddBOS).
	AddBOS bool
	// TokenizerNote, when set, is a warning about the tokenizer for the
	// log (a file that names no pre-tokenizer).
	TokenizerNote string
	// Packed is the size in bytes of the weights' packed copy
	// (llama.Weights.Pack: rows interleaved for the kernels of this
	// CPU), 0 when there is none.
	Packed int
	// Released is the bytes of the file's mapping given back to the
	// system after packing: the rows no step reads any more
	// (llama.Weights.Unread; they stay in the page cache, and are read
	// back from it if anything touches them).
	Released int

	data  []byte
	unmap func() error
	// unpack unmaps the weights' packed copy (llama.Weights.Pack), nil if
	// none.
	unpack func() error
}

// ErrNoTokenizer is returned for a llama2.c checkpoint without a tokenizer.
var ErrNoTokenizer = errors.New("llamafile: a llama2.c checkpoint needs its tokenizer.bin")

// Open maps the model file at path and loads it. tokenizerPath is a
// llama2.c tokenizer.bin; empty means tokenizer.bin beside the checkpoint
// (GGUF files carry their tokenizer and take none).
func Open(path, tokenizerPath string) (*Model, error) {
	return OpenWith(path, tokenizerPath, Options{})
}

// Options are choices of OpenWith.
type Options struct {
	// NoRepack keeps the weights in the file's layout only: no packed
	// copy (llama.cpp's --no-repack). The copy is about the size of the
	// rows it packs; the mapping's pages of the rows no step reads then
	// are released (Released). Without it steps read the file's rows,
	// slower where this CPU has packed kernels.
	NoRepack bool
}

// OpenWith is Open with o.
func OpenWith(path, tokenizerPath string, o Options) (*Model, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	m := &Model{Path: path, data: data, unmap: unmap}
	if err := m.load(tokenizerPath, o); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func (m *Model) load(tokenizerPath string, o Options) error {
	template := ""
	if bytes.HasPrefix(m.data, []byte(gguf.Magic)) {
		m.Format = GGUF
		if tokenizerPath != "" {
			return errors.New("a GGUF file carries its tokenizer: drop --tokenizer-file")
		}
		f, err := gguf.Parse(m.data)
		if err != nil {
			return err
		}
		if m.Weights, err = gguf.Llama(f); err != nil {
			return err
		}
		if m.Tok, err = gguf.Tokenizer(f); err != nil {
			return err
		}
		template = f.ChatTemplate()
		m.AddBOS = gguf.AddBOS(f, m.Tok)
		if m.Tok.Kind() == bpe.ByteLevel {
			_, m.TokenizerNote, _ = gguf.PreTokenizer(f)
		}
	} else {
		m.Format = Llama2C
		var err error
		if m.Weights, err = llama2c.Load(m.data); err != nil {
			return err
		}
		if tokenizerPath == "" {
			tokenizerPath = filepath.Join(filepath.Dir(m.Path), "tokenizer.bin")
			if _, err := os.Stat(tokenizerPath); err != nil {
				return fmt.Errorf("%w: none at %s; give --tokenizer-file", ErrNoTokenizer, tokenizerPath)
			}
		}
		tb, err := os.ReadFile(tokenizerPath)
		if err != nil {
			return err
		}
		v, err := llama2c.LoadTokenizer(tb, m.Weights.Config.VocabSize)
		if err != nil {
			return fmt.Errorf("%s: %w", tokenizerPath, err)
		}
		if m.Tok, err = v.Tokenizer(); err != nil {
			return err
		}
		m.AddBOS = true
	}
	var tok chat.Tokens
	if id := m.Tok.BOS(); id >= 0 {
		tok.BOS = m.Tok.Piece(id)
	}
	if id := m.Tok.EOS(); id >= 0 {
		tok.EOS = m.Tok.Piece(id)
	}
	if n := m.Weights.PackSize(); n > 0 && !o.NoRepack {
		buf, unmap, err := mapAnon(n)
		if err != nil {
			return fmt.Errorf("packing the weights: %w", err)
		}
		m.unpack = unmap
		m.Weights.Pack(buf)
		m.Packed = n
		for _, b := range m.Weights.Unread() {
			m.Released += release(m.data, b)
		}
	}
	m.Chat = chat.NewRenderer(template, tok)
	if m.Tok.VocabSize() != m.Weights.Config.VocabSize {
		return fmt.Errorf("the tokenizer has %d tokens, the model %d", m.Tok.VocabSize(), m.Weights.Config.VocabSize)
	}
	if m.Weights.Config.EOS < 0 {
		return errors.New("the model has no EOS token")
	}
	return nil
}

// Name is the served model name the file suggests: its base name without
// extension.
func (m *Model) Name() string {
	return strings.TrimSuffix(filepath.Base(m.Path), filepath.Ext(m.Path))
}

// Close unmaps the file and the weights' packed copy.
func (m *Model) Close() error {
	var err error
	if m.unpack != nil {
		err = m.unpack()
	}
	if m.unmap != nil {
		err = errors.Join(err, m.unmap())
	}
	m.unmap, m.unpack, m.data, m.Weights = nil, nil, nil, nil
	return err
}

// AppendEncode appends the tokens of a completion prompt: BOS first when
// AddBOS unless opt.NoAddSpecialTokens, and special-token text written in
// the prompt as those tokens unless opt.SplitSpecialTokens (vLLM's and
// Hugging Face's defaults; bpe.Tokenizer.Encode says which tokens count).
func (m *Model) AppendEncode(dst []int32, text string, opt tokenizer.Options) []int32 {
	return append(dst, m.Tok.Encode(text, m.AddBOS && !opt.NoAddSpecialTokens, !opt.SplitSpecialTokens)...)
}

// AppendChat renders c with the model's chat template (or the request's
// chat_template) at the current time and appends its tokens, the special
// tokens written in the text as those tokens. A Jinja template writes
// {{ bos_token }} itself where the model wants it, so BOS is added in
// front only for a family (as vLLM tokenizes a rendered chat without
// adding special tokens). The error is the request's
// (chat.Renderer.Render).
func (m *Model) AppendChat(dst []int32, c *chat.Conversation) ([]int32, error) {
	text, err := m.Chat.Render(c, time.Now())
	if err != nil {
		return dst, err
	}
	return append(dst, m.Tok.Encode(text, m.AddBOS && m.Chat.Template == nil && c.Template == "", true)...), nil
}

// Vocab is the vocabulary for constrained decoding: every token's text as
// the server writes it (TokenBytes), EOS the model's. It costs a trie of
// the vocabulary: build it once.
func (m *Model) Vocab() *constrain.Vocab {
	n := m.Weights.Config.VocabSize
	text := make([][]byte, n)
	for id := 0; id < n && id < m.Tok.VocabSize(); id++ {
		text[id] = m.Tok.TokenBytes(int32(id))
	}
	eos := []int32{m.Weights.Config.EOS}
	if e := m.Tok.EOS(); e >= 0 && e != eos[0] && int(e) < n {
		eos = append(eos, e)
	}
	return constrain.NewVocab(text, eos)
}

// TokenBytes is the text of one token (nil for special tokens).
func (m *Model) TokenBytes(tok int32) []byte { return m.Tok.TokenBytes(tok) }
