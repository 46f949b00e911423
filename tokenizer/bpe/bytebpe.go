package bpe

import (
	"fmt"
	"strings"
)

// pairMerge is a merge of two tokens: the merged token and its rank (the
// merge's place in the merges list, lowest first).
type pairMerge struct{ id, rank int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// byteLevel indexes v's merges by token ids. A merge whose sides or result
// are not tokens is refused, as Hugging Face's tokenizer refuses it.
func (t *Tokenizer) byteLevel(v Vocab) error {
	for b := range t.byteID {
		t.byteID[b] = -1
		if id, ok := t.ids[string(byteToUnicode[b])]; ok {
			t.byteID[b] = id
		}
	}
	t.merges = make(map[uint64]pairMerge, len(v.Merges))
	for r, m := range v.Merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok {
			return fmt.Errorf("%w: merge %d %q is not a pair", ErrVocab, r, m)
		}
		ia, oka := t.ids[a]
		ib, okb := t.ids[b]
		im, okm := t.ids[a+b]
		if !oka || !okb || !okm {
			return fmt.Errorf("%w: merge %d %q: %q, %q or %q is not a token", ErrVocab, r, m, a, b, a+b)
		}
		if _, dup := t.merges[pairKey(ia, ib)]; !dup {
			t.merges[pairKey(ia, ib)] = pairMerge{id: im, rank: int32(r)}
		}
	}
	if v.IgnoreMerges {
		t.words = make(map[string]int32, len(v.Pieces))
		var buf []byte
	pieces:
		for i, p := range v.Pieces {
			buf = buf[:0]
			for _, r := range p {
				b, ok := unicodeToByte[r]
				if !ok {
					continue pieces
				}
				buf = append(buf, b)
			}
			if _, dup := t.words[string(buf)]; !dup {
				t.words[string(buf)] = int32(i)
			}
		}
	}
	return nil
}

// idSymbol is a token of a word being merged, in a list of the word's
// tokens; id -1 is a byte whose character is no token, and a merged-away
// token.
type idSymbol struct {
	id         int32
	prev, next int32
}

// idPair is a candidate merge of syms[left] and its next into token id,
// made when they were the tokens a and b (a stale candidate no longer
// finds them).
type idPair struct {
	left, rank int32
	a, b, id   int32
}

// pairHeap is a min-heap of candidates by rank, then position.
type pairHeap []idPair

func (h pairHeap) less(i, j int) bool {
	return h[i].rank < h[j].rank || (h[i].rank == h[j].rank && h[i].left < h[j].left)
}

func (h *pairHeap) push(p idPair) {
	*h = append(*h, p)
	q := *h
	for i := len(q) - 1; i > 0; {
		up := (i - 1) / 2
		if !q.less(i, up) {
			break
		}
		q[i], q[up] = q[up], q[i]
		i = up
	}
}

func (h *pairHeap) pop() idPair {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && q.less(l, m) {
			m = l
		}
		if l+1 < n && q.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// bpeScratch is the memory one Encode call reuses across words.
type bpeScratch struct {
	syms []idSymbol
	heap pairHeap
}

// bpeWord appends the tokens of pre-tokenized word w: its bytes'
// characters, merged pair by pair, the lowest-ranked pair present first
// (the leftmost on ties), until no pair of neighbours has a merge.
func (t *Tokenizer) bpeWord(out []int32, w string, sc *bpeScratch) []int32 {
	if len(w) == 1 && t.byteID[w[0]] >= 0 {
		return append(out, t.byteID[w[0]])
	}
	if t.words != nil {
		if id, ok := t.words[w]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	for i := 0; i < len(w); i++ {
		syms = append(syms, idSymbol{id: t.byteID[w[i]], prev: int32(i) - 1, next: int32(i) + 1})
	}
	syms[len(syms)-1].next = -1
	h := sc.heap[:0]
	try := func(l int32) {
		if l < 0 {
			return
		}
		r := syms[l].next
		if r < 0 || syms[l].id < 0 || syms[r].id < 0 {
			return
		}
		if m, ok := t.merges[pairKey(syms[l].id, syms[r].id)]; ok {
			h.push(idPair{left: l, rank: m.rank, a: syms[l].id, b: syms[r].id, id: m.id})
		}
	}
	for i := range syms {
		try(int32(i))
	}
	for len(h) > 0 {
		p := h.pop()
		l := &syms[p.left]
		if l.id != p.a || l.next < 0 || syms[l.next].id != p.b {
			continue // stale: a side merged since
		}
		r := &syms[l.next]
		l.id = p.id
		r.id = -1
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = p.left
		}
		try(l.prev)
		try(p.left)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		switch {
		case syms[i].id >= 0:
			out = append(out, syms[i].id)
		case t.unk >= 0:
			out = append(out, t.unk)
		}
	}
	sc.syms, sc.heap = syms, h
	return out
}

// byteToUnicode is GPT-2's map of bytes to printable characters: the
// printable Latin-1 bytes map to themselves, the others to U+0100 onwards,
// in byte order.
var byteToUnicode, unicodeToByte = func() ([256]rune, map[rune]byte) {
	var fwd [256]rune
	inv := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			fwd[b] = rune(b)
		} else {
			fwd[b] = rune(256 + n)
			n++
		}
		inv[fwd[b]] = byte(b)
	}
	return fwd, inv
}()
