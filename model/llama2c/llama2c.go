// Package llama2c loads Andrej Karpathy's llama2.c checkpoints (the legacy
// "version 0" export: a header of seven int32 and float32 weights, such as
// stories15M.bin) and their tokenizer.bin. It parses bytes the caller holds
// (typically a memory-mapped file) and does no I/O.
package llama2c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kvlease/kvlease/model/llama"
	"github.com/kvlease/kvlease/tokenizer/bpe"
)

// Errors a caller may test with errors.Is.
var (
	ErrFormat      = errors.New("llama2c: not a llama2.c checkpoint")
	ErrTruncated   = errors.New("llama2c: truncated file")
	ErrUnsupported = errors.New("llama2c: unsupported")
)

// HeaderBytes is the size of the header: dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size (negative: an unshared classifier
// follows), seq_len, each a little-endian int32.
const HeaderBytes = 28

// Size is the byte size of a checkpoint of shape c: the header, the
// weights, the RoPE tables llama2.c stores (and this package skips), and
// the classifier when it is not shared.
func Size(c llama.Config, shared bool) int64 {
	hd := int64(c.HeadDim())
	d, h, l, v, kv := int64(c.Dim), int64(c.HiddenDim), int64(c.Layers), int64(c.VocabSize), int64(c.KVDim())
	n := v*d + l*(2*d+d*d+2*d*kv+d*d+3*d*h) + d + 2*int64(c.MaxSeqLen)*hd/2
	if !shared {
		n += v * d
	}
	return HeaderBytes + 4*n
}

// Load returns the weights of checkpoint b; they alias b. RoPE theta is
// 10000 and the norm epsilon 1e-5 (llama2.c's constants), BOS 1 and EOS 2
// (its SentencePiece tokenizer's).
func Load(b []byte) (*llama.Weights, error) {
	if len(b) >= 4 && string(b[:4]) == "ak42" {
		return nil, fmt.Errorf("%w: a versioned llama2.c export (magic ak42); export with version 0 (legacy)", ErrUnsupported)
	}
	if len(b) < HeaderBytes {
		return nil, fmt.Errorf("%w: %d bytes, the header alone is %d", ErrTruncated, len(b), HeaderBytes)
	}
	var h [7]int32
	for i := range h {
		h[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	shared := h[5] > 0
	vocab := h[5]
	if vocab < 0 {
		vocab = -vocab
	}
	c := llama.Config{Dim: int(h[0]), HiddenDim: int(h[1]), Layers: int(h[2]), Heads: int(h[3]), KVHeads: int(h[4]),
		VocabSize: int(vocab), MaxSeqLen: int(h[6]), RopeTheta: 10000, NormEps: 1e-5, BOS: 1, EOS: 2}
	if c.VocabSize <= 2 {
		c.BOS, c.EOS = -1, -1
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: header %v: %v", ErrFormat, h, err)
	}
	if want := Size(c, shared); int64(len(b)) != want {
		if int64(len(b)) < want {
			return nil, fmt.Errorf("%w: %d bytes, shape %v needs %d", ErrTruncated, len(b), h, want)
		}
		return nil, fmt.Errorf("%w: %d bytes, shape %v needs exactly %d", ErrFormat, len(b), h, want)
	}
	f := llama.F32s(b[HeaderBytes:])
	take := func(n int) []float32 {
		s := f[:n:n]
		f = f[n:]
		return s
	}
	mat := func(rows, cols int) llama.Matrix {
		return llama.Matrix{Rows: rows, Cols: cols, Type: llama.F32, F: take(rows * cols)}
	}
	d, kv, hd := c.Dim, c.KVDim(), c.HiddenDim
	w := &llama.Weights{Config: c, Layers: make([]llama.Layer, c.Layers)}
	w.Embedding = mat(c.VocabSize, d)
	for i := range w.Layers {
		w.Layers[i].AttnNorm = take(d)
	}
	for i := range w.Layers {
		w.Layers[i].Wq = mat(d, d)
	}
	for i := range w.Layers {
		w.Layers[i].Wk = mat(kv, d)
	}
	for i := range w.Layers {
		w.Layers[i].Wv = mat(kv, d)
	}
	for i := range w.Layers {
		w.Layers[i].Wo = mat(d, d)
	}
	for i := range w.Layers {
		w.Layers[i].FFNNorm = take(d)
	}
	for i := range w.Layers {
		w.Layers[i].W1 = mat(hd, d)
	}
	for i := range w.Layers {
		w.Layers[i].W2 = mat(d, hd)
	}
	for i := range w.Layers {
		w.Layers[i].W3 = mat(hd, d)
	}
	w.FinalNorm = take(d)
	take(c.MaxSeqLen * c.HeadDim()) // freq_cis_real and freq_cis_imag
	if shared {
		w.Output = w.Embedding
	} else {
		w.Output = mat(c.VocabSize, d)
	}
	return w, w.Validate()
}

// Vocab is a tokenizer.bin: each token's bytes and merge score.
type Vocab struct {
	MaxTokenLen int
	Pieces      []string
	Scores      []float32
}

// maxPieceBytes bounds one token's length.
const maxPieceBytes = 1 << 16

// LoadTokenizer parses a tokenizer.bin for a model of vocabSize tokens: an
// int32 max_token_length, then per token a float32 score, an int32 length
// and that many bytes.
func LoadTokenizer(b []byte, vocabSize int) (*Vocab, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: tokenizer of %d bytes", ErrTruncated, len(b))
	}
	v := &Vocab{MaxTokenLen: int(int32(binary.LittleEndian.Uint32(b)))}
	off := 4
	for i := 0; i < vocabSize; i++ {
		if len(b)-off < 8 {
			return nil, fmt.Errorf("%w: tokenizer ends at token %d of %d", ErrTruncated, i, vocabSize)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
		n := int32(binary.LittleEndian.Uint32(b[off+4:]))
		off += 8
		if n < 0 || n > maxPieceBytes {
			return nil, fmt.Errorf("%w: token %d has length %d", ErrFormat, i, n)
		}
		if len(b)-off < int(n) {
			return nil, fmt.Errorf("%w: tokenizer ends inside token %d", ErrTruncated, i)
		}
		v.Pieces = append(v.Pieces, string(b[off:off+int(n)]))
		v.Scores = append(v.Scores, score)
		off += int(n)
	}
	if off != len(b) {
		return nil, fmt.Errorf("%w: tokenizer has %d bytes after %d tokens (wrong vocabulary size?)", ErrFormat, len(b)-off, vocabSize)
	}
	return v, nil
}

// Tokenizer builds the SentencePiece tokenizer of a tokenizer.bin: its
// pieces spell a space as " " (llama2.c's export replaced "▁"), <0xXX>
// pieces are byte fallback, <unk>, <s> and </s> (ids 0, 1, 2) are special.
func (v *Vocab) Tokenizer() (*bpe.Tokenizer, error) {
	bos, eos := int32(1), int32(2)
	if len(v.Pieces) <= 2 {
		bos, eos = -1, -1
	}
	return bpe.New(bpe.Vocab{Kind: bpe.SentencePiece, Pieces: v.Pieces, Scores: v.Scores, BOS: bos, EOS: eos, Space: " "})
}
