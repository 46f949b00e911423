package bpe

import (
	"container/heap"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind is a tokenizer's algorithm.
type Kind uint8

const (
	// SentencePiece is SentencePiece-style BPE (llama, llama 2, TinyLlama,
	// llama2.c): spaces become "▁", a "▁" is prepended, adjacent pieces merge
	// by the highest score, and characters outside the vocabulary fall back
	// to byte tokens <0xXX>.
	SentencePiece Kind = iota
	// ByteLevel is GPT-2-style byte-level BPE (Llama 3, Qwen2, SmolLM,
	// GPT-2, …): text is split by the vocabulary's pre-tokenizer (Pre),
	// bytes map to printable characters, and pairs merge by their rank in
	// the merges list.
	ByteLevel
)

// Token types (GGUF tokenizer.ggml.token_type).
const (
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// ErrVocab reports an unusable vocabulary.
var ErrVocab = errors.New("bpe: bad vocabulary")

// Vocab describes a tokenizer, as a model file carries it.
type Vocab struct {
	Kind   Kind
	Pieces []string
	// Scores (SentencePiece): higher merges first. Types may be nil (all
	// normal, except <0xXX> pieces, which are bytes, and <s>, </s>, <unk>).
	Scores []float32
	Types  []int32
	// Merges (ByteLevel): "left right" pairs, highest priority first.
	Merges []string
	// BOS and EOS ids, -1 when absent.
	BOS, EOS int32
	// Space is how a space is spelt inside pieces: "▁" (GGUF) or " "
	// (llama2.c's tokenizer.bin). Empty means "▁". SentencePiece only.
	Space string
	// NoDummyPrefix turns off the space SentencePiece prepends to text.
	NoDummyPrefix bool
	// Pre is the pre-tokenizer (ByteLevel only).
	Pre Pre
	// IgnoreMerges (ByteLevel): a pre-tokenized word that is a piece of
	// its own becomes that token without merging (Hugging Face's
	// ignore_merges, set for Llama 3). Otherwise every word is merged,
	// which can end at other tokens than the word's own piece.
	IgnoreMerges bool
}

// Tokenizer encodes text to token ids and back. It is immutable after New
// and safe for concurrent use.
type Tokenizer struct {
	kind   Kind
	pieces []string
	scores []float32
	types  []int32
	ids    map[string]int32
	// ByteLevel: the merges by the ids of their two sides, the token of
	// each byte's character (-1: none) and, with IgnoreMerges, every
	// token by the bytes it stands for.
	merges  map[uint64]pairMerge
	byteID  [256]int32
	words   map[string]int32
	byteTok [256]int32 // SentencePiece byte fallback (-1: none)
	unk     int32
	bos     int32
	eos     int32
	space   string
	prefix  bool
	pre     Pre
	ignore  bool // IgnoreMerges
	special specials
	// text[id] is each token's decoded bytes (nil for control tokens).
	text [][]byte
}

// Limits, so that a hostile file cannot make New allocate without bound.
const (
	maxVocab  = 1 << 22
	maxMerges = 1 << 22
)

// New builds a tokenizer from v.
func New(v Vocab) (*Tokenizer, error) {
	n := len(v.Pieces)
	if n == 0 || n > maxVocab {
		return nil, fmt.Errorf("%w: %d pieces", ErrVocab, n)
	}
	if (v.Scores != nil && len(v.Scores) != n) || (v.Types != nil && len(v.Types) != n) {
		return nil, fmt.Errorf("%w: %d pieces, %d scores, %d types", ErrVocab, n, len(v.Scores), len(v.Types))
	}
	if len(v.Merges) > maxMerges {
		return nil, fmt.Errorf("%w: %d merges", ErrVocab, len(v.Merges))
	}
	if v.BOS >= int32(n) || v.EOS >= int32(n) {
		return nil, fmt.Errorf("%w: BOS %d or EOS %d outside %d pieces", ErrVocab, v.BOS, v.EOS, n)
	}
	if v.Pre >= numPre {
		return nil, fmt.Errorf("%w: pre-tokenizer %d", ErrVocab, v.Pre)
	}
	t := &Tokenizer{kind: v.Kind, pieces: v.Pieces, scores: v.Scores, ids: make(map[string]int32, n),
		unk: -1, bos: v.BOS, eos: v.EOS, space: v.Space, prefix: !v.NoDummyPrefix, pre: v.Pre, ignore: v.IgnoreMerges}
	if t.space == "" {
		t.space = "▁"
	}
	t.types = v.Types
	if t.types == nil {
		t.types = make([]int32, n)
		for i, p := range v.Pieces {
			t.types[i] = TypeNormal
			switch {
			case isBytePiece(p):
				t.types[i] = TypeByte
			case p == "<unk>":
				t.types[i] = TypeUnknown
			case p == "<s>" || p == "</s>" || int32(i) == v.BOS || int32(i) == v.EOS:
				t.types[i] = TypeControl
			}
		}
	}
	for i := range t.byteTok {
		t.byteTok[i] = -1
	}
	for i := n - 1; i >= 0; i-- { // the first of duplicate pieces wins
		t.ids[v.Pieces[i]] = int32(i)
	}
	for i, p := range v.Pieces {
		switch t.types[i] {
		case TypeByte:
			if b, ok := parseBytePiece(p); ok && t.byteTok[b] < 0 {
				t.byteTok[b] = int32(i)
			}
		case TypeUnknown:
			if t.unk < 0 {
				t.unk = int32(i)
			}
		}
	}
	t.special = newSpecials(v.Pieces, t.types)
	if v.Kind == ByteLevel {
		if err := t.byteLevel(v); err != nil {
			return nil, err
		}
	}
	t.text = make([][]byte, n)
	for i, p := range v.Pieces {
		t.text[i] = t.decodePiece(int32(i), p)
	}
	return t, nil
}

func isBytePiece(p string) bool { _, ok := parseBytePiece(p); return ok }

func parseBytePiece(p string) (byte, bool) {
	if len(p) != 6 || p[:3] != "<0x" || p[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range p[3:5] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = byte(c - '0')
		case c >= 'A' && c <= 'F':
			d = byte(c-'A') + 10
		case c >= 'a' && c <= 'f':
			d = byte(c-'a') + 10
		default:
			return 0, false
		}
		b = b<<4 | d
	}
	return b, true
}

// VocabSize is the number of token ids.
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// BOS and EOS are the special ids (-1 when the vocabulary has none).
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence id, or -1.
func (t *Tokenizer) EOS() int32 { return t.eos }

// Piece is token id's piece as the vocabulary spells it.
func (t *Tokenizer) Piece(id int32) string { return t.pieces[id] }

// ID is the token whose piece is exactly p.
func (t *Tokenizer) ID(p string) (int32, bool) {
	id, ok := t.ids[p]
	return id, ok
}

// TokenBytes is the text token id stands for: the bytes of a byte token,
// a piece with its space marker turned back into a space, nothing for a
// control token or an id outside the vocabulary. The slice is shared:
// read-only.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.text) {
		return nil
	}
	return t.text[id]
}

func (t *Tokenizer) decodePiece(id int32, p string) []byte {
	switch t.types[id] {
	case TypeControl, TypeUnknown, TypeUnused:
		return nil
	case TypeByte:
		if b, ok := parseBytePiece(p); ok {
			return []byte{b}
		}
	}
	if t.kind == ByteLevel {
		out := make([]byte, 0, len(p))
		for _, r := range p {
			b, ok := unicodeToByte[r]
			if !ok { // not byte-level text: keep it as it is
				return []byte(p)
			}
			out = append(out, b)
		}
		return out
	}
	return []byte(strings.ReplaceAll(p, t.space, " "))
}

// Decode returns the text of tokens, control tokens dropped. A
// SentencePiece text loses the space its dummy prefix added at the start.
func (t *Tokenizer) Decode(tokens []int32) string {
	var out []byte
	for _, id := range tokens {
		out = append(out, t.TokenBytes(id)...)
	}
	if t.kind == SentencePiece && t.prefix && len(out) > 0 && out[0] == ' ' {
		out = out[1:]
	}
	return string(out)
}

// Encode returns the tokens of text, with BOS first when bos and the
// vocabulary has one.
//
// With special, the text of a control, user-defined or unknown token
// written in text (such as "<|begin_of_text|>" or "<|im_start|>" in a
// rendered chat template) becomes that token, as Hugging Face tokenizers
// and vLLM parse special tokens by default and llama.cpp with
// parse_special: "<|begin_of_text|>Hi<|eot_id|> there" is 4 tokens on a
// Llama 3 vocabulary. Without special, control and unknown tokens' text is
// plain text; user-defined tokens (Hugging Face's added tokens that are
// not special) are still matched, as both references do. Where several
// such pieces could match, the leftmost wins, and the longest of those
// starting there (Hugging Face's rule).
//
// SentencePiece text after a special token gets the dummy prefix again,
// like text at the start (llama.cpp's rule).
func (t *Tokenizer) Encode(text string, bos, special bool) []int32 {
	var out []int32
	if bos && t.bos >= 0 {
		out = append(out, t.bos)
	}
	afterSpecial := true
	for len(text) > 0 {
		at, id, n := t.special.find(text, special)
		if at < 0 {
			at = len(text)
		}
		if at > 0 {
			out = t.encodeText(out, text[:at], afterSpecial)
		}
		if id < 0 {
			break
		}
		out = append(out, id)
		afterSpecial = true
		text = text[at+n:]
	}
	return out
}

func (t *Tokenizer) encodeText(out []int32, text string, prefix bool) []int32 {
	if t.kind == ByteLevel {
		var sc bpeScratch
		t.pre.split(text, func(w string) { out = t.bpeWord(out, w, &sc) })
		return out
	}
	s := strings.ReplaceAll(text, " ", t.space)
	if prefix && t.prefix {
		s = t.space + s
	}
	return t.spm(out, s)
}

// symbol is one node of the merge list.
type symbol struct {
	text       string
	prev, next int
}

type bigram struct {
	left, right int
	score       float64 // the merged piece's score
	size        int     // length of the merged text, to detect stale entries
}

type bigramHeap []bigram

func (h bigramHeap) Len() int { return len(h) }
func (h bigramHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return h[i].left < h[j].left
}
func (h bigramHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *bigramHeap) Push(x any)   { *h = append(*h, x.(bigram)) }
func (h *bigramHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// merge runs BPE over syms: repeatedly the best-scoring adjacent pair
// (leftmost on ties) that score accepts merges, until none does. It is
// O(n log n) in the number of symbols.
func merge(syms []symbol, score func(a, b string) (float64, bool)) []symbol {
	h := &bigramHeap{}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		if s, ok := score(syms[l].text, syms[r].text); ok {
			heap.Push(h, bigram{left: l, right: r, score: s, size: len(syms[l].text) + len(syms[r].text)})
		}
	}
	for i := 0; i+1 < len(syms); i++ {
		try(i, i+1)
	}
	for h.Len() > 0 {
		b := heap.Pop(h).(bigram)
		l, r := &syms[b.left], &syms[b.right]
		if l.text == "" || r.text == "" || l.next != b.right || len(l.text)+len(r.text) != b.size {
			continue // stale: one side merged since
		}
		l.text += r.text
		r.text = ""
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	return syms
}

func (t *Tokenizer) spm(out []int32, s string) []int32 {
	syms := make([]symbol, 0, len(s))
	for i, r := range s {
		n := utf8.RuneLen(r)
		if r == utf8.RuneError {
			n = 1
		}
		syms = append(syms, symbol{text: s[i : i+n], prev: len(syms) - 1, next: len(syms) + 1})
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	merge(syms, func(a, b string) (float64, bool) {
		id, ok := t.ids[a+b]
		if !ok || t.types[id] != TypeNormal && t.types[id] != TypeUserDefined {
			return 0, false
		}
		if t.scores == nil {
			return float64(-id), true
		}
		return float64(t.scores[id]), true
	})
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		p := syms[i].text
		if id, ok := t.ids[p]; ok && t.types[id] != TypeControl {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(p); j++ { // byte fallback
			switch {
			case t.byteTok[p[j]] >= 0:
				out = append(out, t.byteTok[p[j]])
			case t.unk >= 0:
				out = append(out, t.unk)
			}
		}
	}
	return out
}

// Kind is the tokenizer's algorithm.
func (t *Tokenizer) Kind() Kind { return t.kind }
