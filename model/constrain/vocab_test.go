package constrain

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// testVocab is a SentencePiece-like vocabulary of size n: the 256 bytes,
// EOS (empty text) at 256, then words with and without a leading space,
// digit runs, JSON punctuation runs and multi-byte characters, drawn from
// seed.
func testVocab(n int, seed uint64) ([][]byte, int32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	text := make([][]byte, n)
	for i := 0; i < 256; i++ {
		text[i] = []byte{byte(i)}
	}
	const letters = "etaoinshrdlcumwfgypbvkjxqzETAOINS"
	punct := []string{`"`, `":`, `",`, `{"`, `"}`, `},`, `}}`, `]}`, `["`, `"]`, `":"`, `": "`, `, "`, `\n`, `\"`, `\\`, `\u`, `0.`, `-1`, `e+`, `true`, `null`, `false`, "\n", "\t"}
	multi := []string{"é", "ü", "日本", "🎉", "ñ", "語", "\xe6", "\x97"}
	seen := map[string]bool{}
	for i := 257; i < n; i++ {
		var s string
		for {
			switch r := rng.IntN(20); {
			case r < 12:
				l := 1 + rng.IntN(9)
				b := make([]byte, l)
				for j := range b {
					b[j] = letters[rng.IntN(len(letters))]
				}
				s = string(b)
				if rng.IntN(2) == 0 {
					s = " " + s
				}
			case r < 15:
				s = fmt.Sprint(10000 + rng.IntN(90000))[:1+rng.IntN(3)]
			case r < 18:
				s = punct[rng.IntN(len(punct))] + punct[rng.IntN(len(punct))][:rng.IntN(2)]
			default:
				s = multi[rng.IntN(len(multi))]
				if rng.IntN(2) == 0 {
					s = " " + s
				}
			}
			if !seen[s] || rng.IntN(50) == 0 { // a few duplicate texts, as real vocabularies have
				break
			}
		}
		seen[s] = true
		text[i] = []byte(s)
	}
	return text, 256
}

// bruteMask is Mask by its definition: every token's bytes fed to a copy.
func bruteMask(v *Vocab, s *State) []uint64 {
	if s.mode == mFree {
		return nil
	}
	m := make([]uint64, v.Words())
	for id := 0; id < v.Size(); id++ {
		t := v.Text(int32(id))
		if len(t) == 0 {
			continue
		}
		st := *s
		if st.FeedBytes(t) {
			m[id/64] |= 1 << (id % 64)
		}
	}
	if s.CanEnd() {
		for _, id := range v.eos {
			m[id/64] |= 1 << (id % 64)
		}
	}
	return m
}

// TestMaskMatchesBruteForce walks grammars token by token, choosing among
// the allowed tokens at random, and checks every mask against the brute
// force; generation under masks always reaches a complete text that
// parses.
func TestMaskMatchesBruteForce(t *testing.T) {
	text, eos := testVocab(3000, 5)
	v := NewVocab(text, []int32{eos})
	grammars := []*Grammar{Any()}
	for _, s := range fuzzSchemas {
		grammars = append(grammars, mustCompile(t, s))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var mask []uint64
	for gi, g := range grammars {
		for run := 0; run < 6; run++ {
			s := g.Start()
			var out []byte
			for step := 0; ; step++ {
				mask = v.Mask(&s, mask)
				want := bruteMask(v, &s)
				for w := range want {
					if mask[w] != want[w] {
						t.Fatalf("grammar %d after %q: mask word %d = %x, want %x", gi, out, w, mask[w], want[w])
					}
				}
				var allowed []int32
				for id := 0; id < v.Size(); id++ {
					if Allowed(mask, int32(id)) {
						allowed = append(allowed, int32(id))
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("grammar %d after %q: no token allowed", gi, out)
				}
				// Prefer short tokens that close once long, so runs end.
				tok := allowed[rng.IntN(len(allowed))]
				if step > 40 {
					for _, id := range allowed {
						if v.IsEOS(id) || (len(v.Text(id)) == 1 && (v.Text(id)[0] == '"' || v.Text(id)[0] == '}' || v.Text(id)[0] == ']')) {
							tok = id
							break
						}
					}
				}
				if v.IsEOS(tok) {
					break
				}
				if !s.FeedBytes(v.Text(tok)) {
					t.Fatalf("an allowed token %q was refused", v.Text(tok))
				}
				out = append(out, v.Text(tok)...)
				if s.Done() {
					break
				}
				if step > 3000 {
					t.Fatalf("grammar %d: no end after %q", gi, out)
				}
			}
		}
	}
}

func TestByteVocab(t *testing.T) {
	v := ByteVocab(257, 256)
	g := Any()
	s := v.Start(g)
	m := v.Mask(&s, nil)
	for b := 0; b < 257; b++ {
		want := b == '{' // a byte vocabulary's text starts with the value
		if Allowed(m, int32(b)) != want {
			t.Errorf("token %d: allowed %v, want %v", b, !want, want)
		}
	}
	text, eos := testVocab(300, 1)
	spaced := NewVocab(text, []int32{eos})
	s = spaced.Start(g)
	if !s.Feed(' ') {
		t.Error("a vocabulary of spaced words may not start with a space")
	}
	auto := ToolCalls([]Tool{{Name: "f", Params: Any()}}, false, true)
	s = auto.Start()
	s.Feed('x')
	if v.Mask(&s, nil) != nil {
		t.Error("free text is masked")
	}
}

// BenchmarkMask measures one mask of a 32,000-token vocabulary at the
// positions generation meets most: inside a free string, and between
// members of an object.
func BenchmarkMask(b *testing.B) {
	text, eos := testVocab(32000, 9)
	v := NewVocab(text, []int32{eos})
	g := mustCompile(b, nested)
	for _, c := range []struct{ name, prefix string }{
		{"string", `{"name":"Alb`},
		{"key", `{"name":"Al",`},
		{"number", `{"age":12`},
		{"object-start", ``},
		{"json_object-value", `{"a":`},
	} {
		gg := g
		if c.name == "json_object-value" {
			gg = Any()
		}
		s := gg.Start()
		if !s.FeedBytes([]byte(c.prefix)) {
			b.Fatalf("%q refused", c.prefix)
		}
		b.Run(c.name, func(b *testing.B) {
			var m []uint64
			for b.Loop() {
				m = v.Mask(&s, m)
			}
		})
	}
}

func BenchmarkNewVocab(b *testing.B) {
	text, eos := testVocab(32000, 9)
	for b.Loop() {
		NewVocab(text, []int32{eos})
	}
}
