package bpe

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// The oracle: each pre-tokenizer's patterns as the model files' tokenizers
// write them, run by a backtracking regular-expression engine with
// lookahead (regexp2, a port of .NET's), matches and the text between
// them kept in order (Hugging Face's Isolated split). Only the
// contractions are written with explicit ASCII classes, as llama.cpp
// adapts them, where the originals say (?i:...).
const (
	reGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	reCont   = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	reLlama3 = reCont + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2  = reCont + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen35 = reCont + `|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

var oraclePatterns = map[Pre][]string{
	PreGPT2:      {reGPT2},
	PreLlama3:    {reLlama3},
	PreQwen2:     {reQwen2},
	PreQwen35:    {reQwen35},
	PreStarCoder: {`\p{N}`, reGPT2},
	PreFalcon:    {"[\\p{P}\\$\\+<=>\\^~\\|`]+", reGPT2, `[0-9][0-9][0-9]`},
	PreDefault:   {`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`, `[0-9][0-9][0-9]`},
}

type oracle []*regexp2.Regexp

func newOracle(p Pre) oracle {
	var o oracle
	for _, re := range oraclePatterns[p] {
		o = append(o, regexp2.MustCompile(re))
	}
	return o
}

func (o oracle) split(s string) []string {
	words := []string{s}
	for _, re := range o {
		var next []string
		for _, w := range words {
			gap := 0
			m, err := re.FindStringMatch(w)
			for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
				i, n := m.ByteRange()
				if i > gap {
					next = append(next, w[gap:i])
				}
				if n > 0 {
					next = append(next, w[i:i+n])
				}
				gap = i + n
			}
			if err != nil {
				panic(err)
			}
			if gap < len(w) {
				next = append(next, w[gap:])
			}
		}
		words = next
	}
	return words
}

// alphabet: every class the patterns tell apart, and the characters they
// name (apostrophes and contraction letters, ASCII and other digits,
// \r \n and other whitespace, punctuation in and out of \p{P}, marks).
var alphabet = []string{
	"a", "b", "Z", "s", "S", "t", "r", "e", "E", "v", "m", "l", "L", "d", "D", "'", "’",
	"0", "1", "9", "٣", "²", "Ⅻ", "½",
	" ", " ", " ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "\u3000", "\u2028", "\u0085",
	".", ",", "!", "$", "+", "<", "=", ">", "^", "~", "|", "`", "-", "_", "(", "\"", "…", "。", "、",
	"é", "ß", "Ω", "ж", "東", "京", "한", "ا", "\u0301", "\u0903", "\u20dd",
	"🦙", "😀", "\u200d", "\ufeff", "€",
}

func randomText(r *rand.Rand, n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return sb.String()
}

func checkSplit(t *testing.T, p Pre, o oracle, s string) {
	t.Helper()
	got, want := words(p, s), o.split(s)
	if !slices.Equal(got, want) {
		t.Fatalf("%v split of %q = %q, the pattern's = %q", p, s, got, want)
	}
}

// TestSplitMatchesPatterns compares every pre-tokenizer's split with its
// patterns' on random texts over the characters that matter.
func TestSplitMatchesPatterns(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for p := Pre(0); p < numPre; p++ {
		o := newOracle(p)
		for i := 0; i < 3000; i++ {
			checkSplit(t, p, o, randomText(r, 1+r.IntN(24)))
		}
	}
}

// TestSplitExamples pins cases that tell the patterns apart.
func TestSplitExamples(t *testing.T) {
	for _, tc := range []struct {
		p    Pre
		in   string
		want []string
	}{
		{PreGPT2, " 2024", []string{" 2024"}},
		{PreLlama3, " 2024", []string{" ", "202", "4"}},
		{PreQwen2, " 2024", []string{" ", "2", "0", "2", "4"}},
		{PreStarCoder, " 2024 ab", []string{" ", "2", "0", "2", "4", " ab"}},
		{PreLlama3, "I'M (hello)\n\n  x", []string{"I", "'M", " (", "hello", ")\n\n", " ", " x"}},
		{PreGPT2, "I'M", []string{"I", "'", "M"}},
		{PreLlama3, "a \n\t b", []string{"a", " \n", "\t", " b"}},
		{PreLlama3, "\tfoo", []string{"\tfoo"}},
		{PreQwen35, "e\u0301x", []string{"e\u0301x"}},
		{PreQwen2, "e\u0301x", []string{"e", "\u0301x"}},
		{PreFalcon, "12345...!", []string{"123", "45", "...!"}},
		{PreDefault, "a1234", []string{"a", "123", "4"}},
	} {
		if got := words(tc.p, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%v split of %q = %q, want %q", tc.p, tc.in, got, tc.want)
		}
		checkSplit(t, tc.p, newOracle(tc.p), tc.in)
	}
}

func FuzzSplit(f *testing.F) {
	oracles := make([]oracle, numPre)
	for p := range oracles {
		oracles[p] = newOracle(Pre(p))
	}
	f.Add("Hello  world's 2024!\n\n\t x")
	f.Add("東京 🦙.cpp e\u0301 '' 'LL")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) { // the oracle works on runes
			s = strings.ToValidUTF8(s, "\ufffd")
		}
		for p := range oracles {
			checkSplit(t, Pre(p), oracles[p], s)
			if got := strings.Join(words(Pre(p), s), ""); got != s {
				t.Fatalf("%v split of %q loses text: %q", Pre(p), s, got)
			}
		}
	})
}
