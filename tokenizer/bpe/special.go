package bpe

import (
	"sort"
	"strings"
)

// specials finds special-token text: the pieces of control, user-defined
// and unknown tokens, bucketed by first byte, longest first in a bucket,
// so a scan of the text tests only the positions whose byte starts one.
type specials struct {
	first  [256]bool
	bucket map[byte][]specialPiece
}

type specialPiece struct {
	text string
	id   int32
	// always: a user-defined token, matched also when special tokens
	// are not parsed.
	always bool
}

func newSpecials(pieces []string, types []int32) specials {
	var s specials
	s.bucket = make(map[byte][]specialPiece)
	seen := make(map[string]bool)
	for i, p := range pieces {
		typ := types[i]
		if p == "" || (typ != TypeControl && typ != TypeUserDefined && typ != TypeUnknown) || seen[p] {
			continue // the first of duplicate pieces wins
		}
		seen[p] = true
		s.first[p[0]] = true
		s.bucket[p[0]] = append(s.bucket[p[0]], specialPiece{text: p, id: int32(i), always: typ == TypeUserDefined})
	}
	for _, b := range s.bucket {
		sort.SliceStable(b, func(i, j int) bool { return len(b[i].text) > len(b[j].text) })
	}
	return s
}

// find returns the leftmost special piece in text, the longest there: its
// offset, id and length, or -1, -1, 0. Without all, only user-defined
// pieces count.
func (s *specials) find(text string, all bool) (int, int32, int) {
	for i := 0; i < len(text); i++ {
		if !s.first[text[i]] {
			continue
		}
		for _, p := range s.bucket[text[i]] {
			if (all || p.always) && strings.HasPrefix(text[i:], p.text) {
				return i, p.id, len(p.text)
			}
		}
	}
	return -1, -1, 0
}
