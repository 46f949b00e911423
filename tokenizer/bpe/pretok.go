package bpe

import (
	"unicode"
	"unicode/utf8"
)

// Pre is a byte-level tokenizer's pre-tokenizer: the rule that splits text
// into words before the merges run inside each word. Each is the Hugging
// Face tokenizers pattern (or sequence of patterns) the model was trained
// with, written out by hand because Go's regexp has no lookahead; the
// patterns are quoted on each constant. \s is Unicode White_Space, \p{L},
// \p{N}, \p{M} and \p{P} are the Unicode general categories, as in the
// reference implementations.
type Pre uint8

const (
	// PreGPT2 is GPT-2's pattern:
	//
	//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	PreGPT2 Pre = iota
	// PreLlama3 is Llama 3's pattern (digits in groups of up to three,
	// punctuation and a leading non-letter joined to words):
	//
	//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	//
	// The contractions match ASCII letters of either case (as llama.cpp's
	// adaptation of the pattern does).
	PreLlama3
	// PreQwen2 is Llama 3's pattern with digits one by one (\p{N} in place
	// of \p{N}{1,3}).
	PreQwen2
	// PreQwen35 is PreQwen2 with combining marks (\p{M}) joined to letters:
	//
	//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	PreQwen35
	// PreStarCoder isolates every digit (\p{N}), then splits the rest with
	// GPT-2's pattern (StarCoder, SmolLM, Refact, Command R).
	PreStarCoder
	// PreFalcon splits runs of punctuation ([\p{P}\$\+<=>\^~\|`]+), then
	// GPT-2's pattern, then groups of three ASCII digits ([0-9][0-9][0-9]).
	PreFalcon
	// PreDefault is llama.cpp's default for a file that names no
	// pre-tokenizer: runs of punctuation ([\p{P}\$\+<=>\^~\|]+), GPT-2's
	// pattern, runs of digits (\p{N}+), groups of three ASCII digits.
	PreDefault
	numPre
)

var preNames = [numPre]string{"gpt2", "llama3", "qwen2", "qwen35", "starcoder", "falcon", "default"}

// String names the pre-tokenizer.
func (p Pre) String() string {
	if p < numPre {
		return preNames[p]
	}
	return "Pre(?)"
}

// Character classes of the patterns. \r and \n are whitespace set apart;
// an invalid UTF-8 byte is a character of class other.
const (
	clOther uint8 = iota
	clLetter
	clNumber
	clMark
	clSpace   // \s other than \r and \n
	clNewline // \r, \n
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := 0; c < utf8.RuneSelf; c++ {
		r := rune(c)
		switch {
		case r == '\r' || r == '\n':
			t[c] = clNewline
		case unicode.IsSpace(r):
			t[c] = clSpace
		case unicode.IsLetter(r):
			t[c] = clLetter
		case unicode.IsNumber(r):
			t[c] = clNumber
		default:
			t[c] = clOther
		}
	}
	return t
}()

// charAt is the class and byte length of the character at s[i].
func charAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && n == 1:
		return clOther, 1
	case unicode.IsLetter(r):
		return clLetter, n
	case unicode.IsNumber(r):
		return clNumber, n
	case unicode.Is(unicode.M, r):
		return clMark, n
	case unicode.IsSpace(r):
		return clSpace, n
	}
	return clOther, n
}

// contraction is the length of the contraction suffix ('s, 't, 're, 've,
// 'm, 'll, 'd) that s starts with after its apostrophe, or 0; fold: either
// ASCII case.
func contraction(s string, fold bool) int {
	lower := func(i int) byte {
		if i >= len(s) {
			return 0
		}
		c := s[i]
		if fold && c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	switch lower(0) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if lower(1) == 'e' {
			return 2
		}
	case 'l':
		if lower(1) == 'l' {
			return 2
		}
	}
	return 0
}

// runEnd is the end of the run of characters from s[i] whose class in(c).
func runEnd(s string, i int, in func(uint8) bool) int {
	for i < len(s) {
		c, n := charAt(s, i)
		if !in(c) {
			break
		}
		i += n
	}
	return i
}

func isLetter(c uint8) bool      { return c == clLetter }
func isNumber(c uint8) bool      { return c == clNumber }
func isWhite(c uint8) bool       { return c == clSpace || c == clNewline }
func isLetterMark(c uint8) bool  { return c == clLetter || c == clMark }
func isGPT2Other(c uint8) bool   { return c == clOther || c == clMark }
func isQwen35Other(c uint8) bool { return c == clOther }

// whiteTail splits the whitespace run s[i:j] for \s+(?!\S)|\s+: all of it
// at the end of the text, else all but its last character when that
// leaves some, else its one character. It returns the match's end.
func whiteTail(s string, i, j int) int {
	if j == len(s) {
		return j
	}
	_, n := utf8.DecodeLastRuneInString(s[i:j])
	if j-n > i {
		return j - n
	}
	return j
}

// splitGPT2 calls word with the words of s under GPT-2's pattern, in
// order; they concatenate to s.
func splitGPT2(s string, word func(string)) {
	for i := 0; i < len(s); {
		if s[i] == '\'' {
			if k := contraction(s[i+1:], false); k > 0 {
				word(s[i : i+1+k])
				i += 1 + k
				continue
			}
		}
		c, n := charAt(s, i)
		j := i
		if s[i] == ' ' && i+1 < len(s) {
			if c2, _ := charAt(s, i+1); !isWhite(c2) {
				c, j = c2, i+1
			}
		}
		var k int
		switch {
		case c == clLetter:
			k = runEnd(s, j, isLetter)
		case c == clNumber:
			k = runEnd(s, j, isNumber)
		case !isWhite(c):
			k = runEnd(s, j, isGPT2Other)
		default:
			k = whiteTail(s, i, runEnd(s, i+n, isWhite))
		}
		word(s[i:k])
		i = k
	}
}

// splitLlama3 calls word with the words of s under Llama 3's pattern with
// digit groups of up to maxDigits; marks: \p{M} joins letters (PreQwen35).
func splitLlama3(s string, maxDigits int, marks bool, word func(string)) {
	letter, other := isLetter, isGPT2Other
	if marks {
		letter, other = isLetterMark, isQwen35Other
	}
	for i := 0; i < len(s); {
		if s[i] == '\'' {
			if k := contraction(s[i+1:], true); k > 0 {
				word(s[i : i+1+k])
				i += 1 + k
				continue
			}
		}
		c, n := charAt(s, i)
		k := -1
		switch {
		case letter(c): // [^\r\n\p{L}\p{N}]?\p{L}+ with no prefix
			k = runEnd(s, i, letter)
		case c == clNumber: // \p{N}{1,maxDigits}
			k = i + n
			for d := 1; d < maxDigits && k < len(s); d++ {
				c2, n2 := charAt(s, k)
				if c2 != clNumber {
					break
				}
				k += n2
			}
		case c != clNewline && i+n < len(s): // a one-character prefix to letters
			if c2, _ := charAt(s, i+n); letter(c2) {
				k = runEnd(s, i+n, letter)
			}
		}
		if k < 0 { //  ?[^\s\p{L}\p{N}]+[\r\n]*
			j := -1
			if other(c) {
				j = i
			} else if s[i] == ' ' && i+1 < len(s) {
				if c2, _ := charAt(s, i+1); other(c2) {
					j = i + 1
				}
			}
			if j >= 0 {
				k = runEnd(s, j, other)
				for k < len(s) && (s[k] == '\r' || s[k] == '\n') {
					k++
				}
			}
		}
		if k < 0 { // whitespace: \s*[\r\n]+|\s+(?!\S)|\s+
			j := runEnd(s, i, isWhite)
			for p := j - 1; p >= i; p-- {
				if s[p] == '\r' || s[p] == '\n' {
					k = p + 1
					break
				}
			}
			if k < 0 {
				k = whiteTail(s, i, j)
			}
		}
		word(s[i:k])
		i = k
	}
}

// isolate calls word with the matches of a pattern in s and the text
// between them (Hugging Face's "Isolated" split behaviour, which is also
// what llama.cpp does with text no pattern matches). match returns the
// end of the match at s[i], or -1.
func isolate(s string, match func(s string, i int) int, word func(string)) {
	gap := 0
	for i := 0; i < len(s); {
		if k := match(s, i); k > i {
			if gap < i {
				word(s[gap:i])
			}
			word(s[i:k])
			i, gap = k, k
			continue
		}
		_, n := charAt(s, i)
		i += n
	}
	if gap < len(s) {
		word(s[gap:])
	}
}

// oneNumber matches \p{N}.
func oneNumber(s string, i int) int {
	if c, n := charAt(s, i); c == clNumber {
		return i + n
	}
	return -1
}

// numbers matches \p{N}+.
func numbers(s string, i int) int {
	if k := runEnd(s, i, isNumber); k > i {
		return k
	}
	return -1
}

// threeDigits matches [0-9][0-9][0-9].
func threeDigits(s string, i int) int {
	if i+3 <= len(s) && isDigit(s[i]) && isDigit(s[i+1]) && isDigit(s[i+2]) {
		return i + 3
	}
	return -1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// punctRun returns the matcher of [\p{P}<extra>]+.
func punctRun(extra string) func(s string, i int) int {
	var ascii [utf8.RuneSelf]bool
	for c := 0; c < utf8.RuneSelf; c++ {
		ascii[c] = unicode.IsPunct(rune(c))
	}
	for i := 0; i < len(extra); i++ {
		ascii[extra[i]] = true
	}
	return func(s string, i int) int {
		k := i
		for k < len(s) {
			if c := s[k]; c < utf8.RuneSelf {
				if !ascii[c] {
					break
				}
				k++
				continue
			}
			r, n := utf8.DecodeRuneInString(s[k:])
			if !unicode.IsPunct(r) || (r == utf8.RuneError && n == 1) {
				break
			}
			k += n
		}
		if k > i {
			return k
		}
		return -1
	}
}

var (
	falconPunct  = punctRun("$+<=>^~|`")
	defaultPunct = punctRun("$+<=>^~|")
)

// split calls word with the words of s under p, in order; they
// concatenate to s.
func (p Pre) split(s string, word func(string)) {
	switch p {
	case PreGPT2:
		splitGPT2(s, word)
	case PreLlama3:
		splitLlama3(s, 3, false, word)
	case PreQwen2:
		splitLlama3(s, 1, false, word)
	case PreQwen35:
		splitLlama3(s, 1, true, word)
	case PreStarCoder:
		isolate(s, oneNumber, func(w string) { splitGPT2(w, word) })
	case PreFalcon:
		isolate(s, falconPunct, func(w string) {
			splitGPT2(w, func(w string) { isolate(w, threeDigits, word) })
		})
	case PreDefault:
		isolate(s, defaultPunct, func(w string) {
			splitGPT2(w, func(w string) {
				isolate(w, numbers, func(w string) { isolate(w, threeDigits, word) })
			})
		})
	default:
		word(s)
	}
}
