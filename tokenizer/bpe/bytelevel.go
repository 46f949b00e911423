package bpe

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

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

// pretokenize splits text as GPT-2's pattern does:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (Go's regexp has no lookahead, hence the hand-written scanner.)
func pretokenize(text string) []string {
	// Work on byte offsets: invalid UTF-8 bytes stay as they are (each one
	// a rune of class "other"), so every byte string round-trips.
	type ch struct {
		off, n int
		r      rune
	}
	var cs []ch
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		cs = append(cs, ch{i, n, r})
		i += n
	}
	end := func(k int) int {
		if k < len(cs) {
			return cs[k].off
		}
		return len(text)
	}
	class := func(k int) int {
		r := cs[k].r
		switch {
		case r == utf8.RuneError && cs[k].n == 1:
			return 4
		case unicode.IsLetter(r):
			return 1
		case unicode.IsNumber(r):
			return 2
		case unicode.IsSpace(r):
			return 3
		}
		return 4
	}
	var out []string
	for i := 0; i < len(cs); {
		if cs[i].r == '\'' && i+1 < len(cs) {
			rest := text[cs[i+1].off:]
			matched := false
			for _, c := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
				if strings.HasPrefix(rest, c) {
					out = append(out, text[cs[i].off:cs[i+1].off+len(c)])
					i += 1 + len(c)
					matched = true
					break
				}
			}
			if matched {
				continue
			}
		}
		j := i
		if cs[j].r == ' ' && j+1 < len(cs) && class(j+1) != 3 {
			j++
		}
		if c := class(j); c != 3 {
			k := j
			for k < len(cs) && class(k) == c {
				k++
			}
			out = append(out, text[cs[i].off:end(k)])
			i = k
			continue
		}
		// A run of whitespace: all of it at the end of the text; otherwise
		// all but its last character, which goes with the next word
		// (\s+(?!\S)), or the single character when the run is one long.
		k := i
		for k < len(cs) && class(k) == 3 {
			k++
		}
		if k < len(cs) && k-i > 1 {
			k--
		}
		out = append(out, text[cs[i].off:end(k)])
		i = k
	}
	return out
}
