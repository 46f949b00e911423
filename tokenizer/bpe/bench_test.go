package bpe

import (
	"strings"
	"testing"
)

// benchText is a mixed prompt: prose, digits, code, whitespace runs, CJK
// and emoji.
var benchText = strings.Repeat("The year 2024 saw 1,234,567 people — they'd said \"it's fine\".\n\n"+
	"func main() {\n\tfmt.Println(x + 42)\n}\n   indented   text\t\twith tabs\n"+
	"東京は日本の首都です。 Ünïcödé naïve café 🦙🦙 emoji!\n", 40)

func benchEncode(b *testing.B, tk *Tokenizer) {
	b.SetBytes(int64(len(benchText)))
	b.ReportAllocs()
	n := 0
	for i := 0; i < b.N; i++ {
		n = len(tk.Encode(benchText, false, true))
	}
	b.ReportMetric(float64(n), "tokens")
}

// BenchmarkEncodeByteLevel: a small byte-level vocabulary, so the time is
// mostly the pre-tokenizer's and the merge loop's over single bytes.
func BenchmarkEncodeByteLevel(b *testing.B) {
	tk, err := New(gpt2Vocab())
	if err != nil {
		b.Fatal(err)
	}
	benchEncode(b, tk)
}

// BenchmarkSplit: each pre-tokenizer alone.
func BenchmarkSplit(b *testing.B) {
	for p := Pre(0); p < numPre; p++ {
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(int64(len(benchText)))
			for i := 0; i < b.N; i++ {
				n := 0
				p.split(benchText, func(string) { n++ })
			}
		})
	}
}
