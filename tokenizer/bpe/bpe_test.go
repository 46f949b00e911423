package bpe

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func spmVocab(pieces []string, scores []float32) Vocab {
	v := Vocab{Kind: SentencePiece, BOS: 1, EOS: 2}
	v.Pieces = append(v.Pieces, "<unk>", "<s>", "</s>")
	v.Scores = append(v.Scores, 0, 0, 0)
	for b := 0; b < 256; b++ {
		v.Pieces = append(v.Pieces, "<0x"+strings.ToUpper(string("0123456789abcdef"[b>>4])+string("0123456789abcdef"[b&15]))+">")
		v.Scores = append(v.Scores, 0)
	}
	v.Pieces = append(v.Pieces, pieces...)
	v.Scores = append(v.Scores, scores...)
	return v
}

func pieces(t *Tokenizer, ids []int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, t.Piece(id))
	}
	return out
}

func TestSentencePieceMergeOrder(t *testing.T) {
	tk, err := New(spmVocab(
		[]string{"▁", "a", "b", "c", "ab", "bc", "abc", "▁a", "▁abc", "▁ab"},
		[]float32{-10, -10, -10, -10, -2, -1, -0.5, -3, -0.1, -4}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		// b+c first (score -1 beats a+b's -2), then a+bc, then ▁+abc.
		{"abc", []string{"▁abc"}},
		// a+b (-2) before ▁+a (-3), then ▁+ab.
		{"ab", []string{"▁ab"}},
		{"ab c", []string{"▁ab", "▁", "c"}},
		{"ca", []string{"▁", "c", "a"}},          // ▁+c is no piece; c+a neither
		{"ä", []string{"▁", "<0xC3>", "<0xA4>"}}, // byte fallback
		{"", nil},
	} {
		got := pieces(tk, tk.Encode(tc.in, false, false))
		if !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if d := tk.Decode(tk.Encode(tc.in, true, false)); d != tc.in {
			t.Errorf("Decode(Encode(%q)) = %q", tc.in, d)
		}
	}
	if ids := tk.Encode("a", true, false); ids[0] != 1 {
		t.Errorf("BOS not first: %v", ids)
	}
}

func gpt2Vocab() Vocab {
	v := Vocab{Kind: ByteLevel, BOS: -1}
	for b := 0; b < 256; b++ {
		v.Pieces = append(v.Pieces, string(byteToUnicode[b]))
	}
	v.Merges = []string{"Ġ t", "h e", "Ġt he", "c a", "ca t", "Ġ cat", "Ġ ca"}
	for _, m := range v.Merges {
		v.Pieces = append(v.Pieces, strings.ReplaceAll(m, " ", ""))
	}
	v.Pieces = append(v.Pieces, "<|endoftext|>")
	v.Types = make([]int32, len(v.Pieces))
	for i := range v.Types {
		v.Types[i] = TypeNormal
	}
	v.Types[len(v.Types)-1] = TypeControl
	v.EOS = int32(len(v.Pieces) - 1)
	return v
}

func TestByteLevel(t *testing.T) {
	tk, err := New(gpt2Vocab())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"the cat", []string{"t", "he", "Ġcat"}}, // "the" has no "t he" merge; " cat": "Ġ ca" (rank 6) loses to "c a" (rank 3), then "ca t", "Ġ cat"
		{" the", []string{"Ġthe"}},
		{"a\n\nb", []string{"a", "Ċ", "Ċ", "b"}},
	} {
		got := pieces(tk, tk.Encode(tc.in, false, false))
		if !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	ids := tk.Encode("hi<|endoftext|>", false, true)
	if ids[len(ids)-1] != tk.EOS() {
		t.Errorf("special token not parsed: %v", pieces(tk, ids))
	}
	if ids := tk.Encode("<|endoftext|>", false, false); slices.Contains(ids, tk.EOS()) {
		t.Error("special token parsed without special")
	}
	// Every byte string round-trips, valid UTF-8 or not.
	r := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 200; i++ {
		b := make([]byte, r.IntN(40))
		for j := range b {
			b[j] = " ab\n'é"[r.IntN(7)]
			if r.IntN(5) == 0 {
				b[j] = byte(r.IntN(256))
			}
		}
		if d := tk.Decode(tk.Encode(string(b), false, false)); d != string(b) {
			t.Fatalf("round trip of %q gave %q", b, d)
		}
	}
}

func TestSentencePieceRoundTrip(t *testing.T) {
	tk, err := New(spmVocab([]string{"▁", "e", "t", "▁t", "he", "▁the", "▁a"}, []float32{-1, -2, -3, -4, -5, -6, -7}))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	alphabet := []rune("the a\n€😀xé")
	for i := 0; i < 300; i++ {
		var sb strings.Builder
		for j := r.IntN(30); j > 0; j-- {
			sb.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		s := sb.String()
		if d := tk.Decode(tk.Encode(s, true, false)); d != s {
			t.Fatalf("round trip of %q gave %q", s, d)
		}
	}
}

func TestSplitGPT2(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"it's 42!", []string{"it", "'s", " 42", "!"}},
		{"a  b", []string{"a", " ", " b"}},
		{"a \nb", []string{"a", " ", "\n", "b"}},
		{"end  ", []string{"end", "  "}},
		{"x\ty", []string{"x", "\t", "y"}},
	} {
		if got := words(PreGPT2, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("GPT-2 split of %q = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBadVocab(t *testing.T) {
	for _, v := range []Vocab{
		{},
		{Pieces: []string{"a"}, Scores: []float32{1, 2}},
		{Pieces: []string{"a"}, BOS: 5},
		{Kind: ByteLevel, Pieces: []string{"a"}, Merges: []string{"nospace"}},
	} {
		if _, err := New(v); err == nil {
			t.Errorf("New(%+v) accepted", v)
		}
	}
}

func FuzzEncode(f *testing.F) {
	var tks []*Tokenizer
	for p := Pre(0); p < numPre; p++ {
		v := gpt2Vocab()
		v.Pre, v.IgnoreMerges = p, p == PreLlama3
		tk, _ := New(v)
		tks = append(tks, tk)
	}
	sp, _ := New(spmVocab([]string{"▁", "a", "▁a"}, []float32{-1, -2, -3}))
	f.Add("hello  world's 12\n")
	f.Add("\xff 2024\t\t'LL 東京 🦙\u0301")
	f.Fuzz(func(t *testing.T, s string) {
		for _, tk := range tks {
			if d := tk.Decode(tk.Encode(s, false, false)); d != s {
				t.Fatalf("byte-level (%v) round trip of %q gave %q", tk.pre, s, d)
			}
		}
		if utf8.ValidString(s) {
			if d := sp.Decode(sp.Encode(s, false, false)); d != s {
				t.Fatalf("sentencepiece round trip of %q gave %q", s, d)
			}
		}
	})
}

// words is p's split of s.
func words(p Pre, s string) []string {
	var out []string
	p.split(s, func(w string) { out = append(out, w) })
	return out
}

// TestSpecialTokenText: with special, control, user-defined and unknown
// pieces written in the text are their tokens, the leftmost first and the
// longest there (Hugging Face's rule: "<ab>" before "<b>cd>" although the
// latter is longer); without, only user-defined ones are.
func TestSpecialTokenText(t *testing.T) {
	v := gpt2Vocab()
	extra := []struct {
		piece string
		typ   int32
	}{{"<ab>", TypeControl}, {"<b>cd>", TypeControl}, {"<a", TypeControl}, {"<u>", TypeUserDefined}, {"<unk>", TypeUnknown}, {"<x>", TypeNormal}}
	for _, e := range extra {
		v.Pieces = append(v.Pieces, e.piece)
		v.Types = append(v.Types, e.typ)
	}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	special := func(p string) string { return "[" + p + "]" }
	show := func(ids []int32) string {
		var sb strings.Builder
		for _, id := range ids {
			if tk.types[id] == TypeNormal {
				sb.Write(tk.TokenBytes(id))
			} else {
				sb.WriteString(special(tk.Piece(id)))
			}
		}
		return sb.String()
	}
	for _, tc := range []struct {
		in             string
		special, plain string
	}{
		{"x<ab>cd>y", "x[<ab>]cd>y", "x<ab>cd>y"},
		{"x<b>cd>y", "x[<b>cd>]y", "x<b>cd>y"},
		{"<abc", "[<a]bc", "<abc"},
		{"a<u>b<unk><x>", "a[<u>]b[<unk>]<x>", "a[<u>]b<unk><x>"},
		{"<|endoftext|><|endoftext|>", "[<|endoftext|>][<|endoftext|>]", "<|endoftext|><|endoftext|>"},
	} {
		if got := show(tk.Encode(tc.in, false, true)); got != tc.special {
			t.Errorf("%q with special tokens: %s, want %s", tc.in, got, tc.special)
		}
		if got := show(tk.Encode(tc.in, false, false)); got != tc.plain {
			t.Errorf("%q without special tokens: %s, want %s", tc.in, got, tc.plain)
		}
	}
}
