package constrain

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// Vocab is a model's vocabulary prepared for masking: the bytes of every
// token in a trie, and the tokens a free string accepts whatever their
// position in it. Build it once per model with NewVocab; it is immutable
// and safe to share.
type Vocab struct {
	size int
	text [][]byte
	eos  []int32
	// spaced: the vocabulary has word tokens that carry their leading
	// space (SentencePiece's "▁word", byte-level BPE's "Ġword"), so a
	// model's first token may well be " {": Start allows one space first.
	spaced bool

	// plain are the tokens made only of bytes a JSON string takes as they
	// are, in whole UTF-8 characters: inside a free string, each of them
	// is accepted and leaves the position unchanged. other are the rest
	// of the tokens with text, checked one by one there.
	plain []uint64
	other []int32

	// The trie: node i's children are edges [first[i], first[i+1]) (by
	// increasing byte), its tokens toks[tfirst[i]:tfirst[i+1]].
	first  []int32
	eb     []byte
	ec     []int32
	tfirst []int32
	toks   []int32
}

// NewVocab prepares a vocabulary: text[id] is the text of token id (nil
// or empty for special tokens, which are never allowed), eos the ids that
// end the text, allowed where the text may end. text and eos are not kept.
func NewVocab(text [][]byte, eos []int32) *Vocab {
	v := &Vocab{size: len(text), text: make([][]byte, len(text)), eos: slices.Clone(eos)}
	v.plain = make([]uint64, v.Words())
	ids := make([]int32, 0, len(text))
	for id, t := range text {
		if len(t) == 0 {
			continue
		}
		v.text[id] = bytes.Clone(t)
		ids = append(ids, int32(id))
		if len(t) > 1 && t[0] == ' ' && t[1] != ' ' {
			v.spaced = true
		}
		if isPlain(t) {
			v.plain[id/64] |= 1 << (id % 64)
		} else {
			v.other = append(v.other, int32(id))
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(v.text[a], v.text[b]) })
	v.build(ids)
	return v
}

// ByteVocab is kvlease's byte-level vocabulary: ids 0..255 are the bytes,
// eos ends the text, the other ids below size are special.
func ByteVocab(size int, eos int32) *Vocab {
	text := make([][]byte, size)
	for i := 0; i < 256 && i < size; i++ {
		text[i] = []byte{byte(i)}
	}
	return NewVocab(text, []int32{eos})
}

func isPlain(t []byte) bool {
	for _, b := range t {
		if b < 0x20 || b == '"' || b == '\\' {
			return false
		}
	}
	return utf8.Valid(t)
}

// build lays the trie out breadth-first over ids sorted by text.
func (v *Vocab) build(ids []int32) {
	type span struct {
		lo, hi int // ids[lo:hi] share the node's prefix
		depth  int
	}
	queue := []span{{0, len(ids), 0}}
	for qi := 0; qi < len(queue); qi++ {
		sp := queue[qi]
		v.first = append(v.first, int32(len(v.eb)))
		v.tfirst = append(v.tfirst, int32(len(v.toks)))
		i := sp.lo
		for i < sp.hi && len(v.text[ids[i]]) == sp.depth {
			v.toks = append(v.toks, ids[i])
			i++
		}
		for i < sp.hi {
			b := v.text[ids[i]][sp.depth]
			j := i
			for j < sp.hi && v.text[ids[j]][sp.depth] == b {
				j++
			}
			v.eb = append(v.eb, b)
			v.ec = append(v.ec, int32(len(queue)))
			queue = append(queue, span{i, j, sp.depth + 1})
			i = j
		}
	}
	v.first = append(v.first, int32(len(v.eb)))
	v.tfirst = append(v.tfirst, int32(len(v.toks)))
}

// Start is the position before the first byte of a text of g generated
// with this vocabulary: one space may come first if the vocabulary's
// words carry their leading space, none otherwise (a byte vocabulary
// starts with the value).
func (v *Vocab) Start(g *Grammar) State {
	s := g.Start()
	s.space = v.spaced
	return s
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// Words is the length of a mask: one bit per token id.
func (v *Vocab) Words() int { return (v.size + 63) / 64 }

// Text is the text of token id (nil for special tokens). Shared: read-only.
func (v *Vocab) Text(id int32) []byte {
	if id < 0 || int(id) >= v.size {
		return nil
	}
	return v.text[id]
}

// IsEOS reports whether id ends the text.
func (v *Vocab) IsEOS(id int32) bool { return slices.Contains(v.eos, id) }

// Mask sets in dst (resized to Words, reused) the tokens that s accepts:
// a token with text is allowed when all its bytes keep the text in the
// grammar, an EOS token when the text may end there. It returns nil when
// every token is allowed (free text). s is not changed.
//
// Cost: inside a free string, a copy of the plain set plus a check of
// each other token; elsewhere a walk of the trie that stops at the first
// refused byte of every branch. Both are bounded by the vocabulary's
// size; see BenchmarkMask.
func (v *Vocab) Mask(s *State, dst []uint64) []uint64 {
	if s.mode == mFree {
		return nil
	}
	w := v.Words()
	if cap(dst) < w {
		dst = make([]uint64, w)
	}
	dst = dst[:w]
	if s.mode == mString && s.esc == 0 && s.need == 0 && !s.bounded {
		copy(dst, v.plain)
		for _, id := range v.other {
			st := *s
			if st.FeedBytes(v.text[id]) {
				dst[id/64] |= 1 << (id % 64)
			}
		}
	} else {
		clear(dst)
		v.walk(0, *s, dst)
	}
	if s.CanEnd() {
		for _, id := range v.eos {
			dst[id/64] |= 1 << (id % 64)
		}
	}
	return dst
}

// walk sets the tokens below trie node n that s accepts. s is passed by
// value: each branch starts from its own copy, which stays on the stack.
func (v *Vocab) walk(n int32, s State, dst []uint64) {
	for e := v.first[n]; e < v.first[n+1]; e++ {
		st := s
		if !st.Feed(v.eb[e]) {
			continue
		}
		c := v.ec[e]
		for _, id := range v.toks[v.tfirst[c]:v.tfirst[c+1]] {
			dst[id/64] |= 1 << (id % 64)
		}
		v.walk(c, st, dst)
	}
}

// Allowed reports whether mask (from Mask; nil allows all) allows id.
func Allowed(mask []uint64, id int32) bool {
	if mask == nil {
		return true
	}
	return id >= 0 && int(id)/64 < len(mask) && mask[id/64]&(1<<(id%64)) != 0
}
