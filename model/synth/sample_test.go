package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvlease/kvlease/model"
)

// sampleMany samples once after each of n random short prompts (batches of
// 256) and returns the tokens.
func sampleMany(t *testing.T, p Profile, n int, s model.Sampling, modelSeed uint64) []int32 {
	const batch = 256
	h := newHarness(t, p, false, batch, modelSeed)
	rng := rand.New(rand.NewPCG(modelSeed, 3))
	var holds []*hreq
	for i := 0; i < batch; i++ {
		r := h.add(uint64(i), nil, s)
		h.ensure(r, 16)
		holds = append(holds, r)
	}
	var out []int32
	var b model.Batch
	for len(out) < n {
		b.Seqs = b.Seqs[:0]
		for _, r := range holds {
			toks := randomTokens(rng, 4+rng.IntN(12))
			b.Seqs = append(b.Seqs, model.Seq{Req: r.id, Tokens: toks, Count: len(toks), Blocks: h.pool.Blocks(r.hold), Sample: true, Sampling: s})
		}
		h.ex.Execute(&b, &h.out)
		out = append(out, h.out.Tokens...)
	}
	return out[:n]
}

func TestEOSRate(t *testing.T) {
	for _, tc := range []struct {
		eos float64
		s   model.Sampling
	}{
		{1.0 / 96, model.Sampling{}},
		{1.0 / 96, model.Sampling{Temperature: 0.7, TopP: 0.5, Seed: 3}},
		{0.25, model.Sampling{}},
		{0, model.Sampling{}},
		{1, model.Sampling{Temperature: 2, Seed: 1}},
	} {
		p := tinyProfile()
		p.EOSProbability = tc.eos
		const n = 40000
		toks := sampleMany(t, p, n, tc.s, 17)
		eos := 0
		for _, tok := range toks {
			if tok == EOSToken {
				eos++
			}
		}
		mean := n * tc.eos
		sigma := math.Sqrt(n * tc.eos * (1 - tc.eos))
		t.Logf("EOSProbability %.4f %+v: %d EOS in %d samples (expected %.0f ± %.0f)", tc.eos, tc.s, eos, n, mean, sigma)
		if math.Abs(float64(eos)-mean) > 5*sigma+0.5 {
			t.Errorf("EOSProbability %v: %d EOS in %d samples, expected %.0f ± %.0f", tc.eos, eos, n, mean, sigma)
		}
	}
}

// Sampled bytes are printable ASCII or newline, spread like English text.
func TestReadableBytes(t *testing.T) {
	const n = 40000
	toks := sampleMany(t, tinyProfile(), n, model.Sampling{}, 5)
	counts := map[int32]int{}
	for _, tok := range toks {
		if tok != EOSToken && tok != '\n' && (tok < 0x20 || tok > 0x7e) {
			t.Fatalf("sampled token %d is not printable ASCII", tok)
		}
		counts[tok]++
	}
	space := float64(counts[' ']) / n
	if space < 0.15 || space > 0.19 {
		t.Errorf("spaces are %.3f of the output, want about 0.17", space)
	}
	if counts['e'] <= counts['t'] || counts['t'] <= counts['z'] {
		t.Errorf("letter counts not English-like: e %d, t %d, z %d", counts['e'], counts['t'], counts['z'])
	}
	t.Logf("%q", string32(toks[:160]))
}

func TestSamplingParameters(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	prompt := randomTokens(rng, 40)
	gen := func(s model.Sampling) []int32 { return alone(t, tinyProfile(), false, 1, prompt, s, 24) }

	greedy := gen(model.Sampling{})
	if !equalTokens(greedy, gen(model.Sampling{Seed: 12345, TopP: 0.3})) {
		t.Error("greedy sampling depends on Seed or TopP")
	}
	s := model.Sampling{Temperature: 1, TopP: 1, Seed: 9}
	if !equalTokens(gen(s), gen(s)) {
		t.Error("sampling with a seed is not reproducible")
	}
	differ := 0
	for seed := uint64(0); seed < 100; seed++ {
		a := alone(t, tinyProfile(), false, 1, prompt, model.Sampling{Temperature: 1, TopP: 1, Seed: seed}, 8)
		b := alone(t, tinyProfile(), false, 1, prompt, model.Sampling{Temperature: 1, TopP: 1, Seed: seed + 1000}, 8)
		if !equalTokens(a, b) {
			differ++
		}
	}
	if differ < 99 {
		t.Errorf("different sampling seeds gave different outputs in only %d of 100 cases", differ)
	}

	// Bad values are sanitized, never a panic: NaN or negative temperature is
	// greedy, top_p outside (0, 1) is off.
	if !equalTokens(greedy, gen(model.Sampling{Temperature: math.NaN(), Seed: 3})) ||
		!equalTokens(greedy, gen(model.Sampling{Temperature: -1, Seed: 3})) {
		t.Error("NaN or negative temperature is not greedy")
	}
	base := gen(model.Sampling{Temperature: 1, TopP: 1, Seed: 3})
	for _, topP := range []float64{0, -1, 2, math.NaN(), math.Inf(1)} {
		if !equalTokens(base, gen(model.Sampling{Temperature: 1, TopP: topP, Seed: 3})) {
			t.Errorf("top_p %v is not the same as top_p 1", topP)
		}
	}
	gen(model.Sampling{Temperature: math.Inf(1), TopP: 1e-300, Seed: 3})
	gen(model.Sampling{Temperature: 1e-300, TopP: 1, Seed: 3})
}

// Temperature and top_p shape the byte distribution as documented.
func TestTemperatureAndTopPShape(t *testing.T) {
	const n = 20000
	freq := func(s model.Sampling) map[int32]float64 {
		f := map[int32]float64{}
		for _, tok := range sampleMany(t, tinyProfile(), n, s, 8) {
			f[tok] += 1.0 / n
		}
		return f
	}
	onlySpaces := func(name string, f map[int32]float64) {
		for tok, v := range f {
			if tok != ' ' && tok != EOSToken {
				t.Errorf("%s: sampled %q (%.4f); want only spaces and EOS", name, rune(tok), v)
				return
			}
		}
	}
	onlySpaces("top_p 0.1", freq(model.Sampling{Temperature: 1, TopP: 0.1, Seed: 1}))
	onlySpaces("temperature 0.01", freq(model.Sampling{Temperature: 0.01, TopP: 1, Seed: 1}))

	hot := freq(model.Sampling{Temperature: 1000, TopP: 1, Seed: 1})
	uniform := (1 - tinyProfile().EOSProbability) / float64(len(baseChars))
	if math.Abs(hot['z']-uniform) > 0.3*uniform || math.Abs(hot[' ']-uniform) > 0.3*uniform {
		t.Errorf("temperature 1000: z %.4f, space %.4f, want both about %.4f", hot['z'], hot[' '], uniform)
	}
	cold := freq(model.Sampling{Temperature: 0.5, TopP: 1, Seed: 1})
	warm := freq(model.Sampling{Temperature: 1, TopP: 1, Seed: 1})
	if !(cold[' '] > warm[' '] && warm[' '] > hot[' ']) {
		t.Errorf("space frequency not decreasing with temperature: %.3f, %.3f, %.3f", cold[' '], warm[' '], hot[' '])
	}
	nucleus := freq(model.Sampling{Temperature: 1, TopP: 0.5, Seed: 1})
	kept := 0
	for tok := range nucleus {
		if tok != EOSToken {
			kept++
		}
	}
	// Cumulative base weights reach half of the total at the 6th byte.
	if kept != 6 {
		t.Errorf("top_p 0.5 kept %d bytes, want 6", kept)
	}
}

func TestBuildTable(t *testing.T) {
	for _, tc := range []struct{ t, topP float64 }{{1, 1}, {0.3, 1}, {3, 0.9}, {1e-9, 1}, {1e9, 1}, {1, 1e-9}, {math.Inf(1), 1}} {
		tb := buildTable(tc.t, tc.topP, 0, 0)
		if len(tb.toks) == 0 || len(tb.toks) != len(tb.cum) || tb.cum[len(tb.cum)-1] != 1<<32 {
			t.Fatalf("%+v: bad table %+v", tc, tb)
		}
		for i := 1; i < len(tb.cum); i++ {
			if tb.cum[i] < tb.cum[i-1] {
				t.Fatalf("%+v: thresholds decrease at %d", tc, i)
			}
		}
		if tb.pick(0) != ' ' || tb.pick(math.MaxUint32) == 0 {
			t.Fatalf("%+v: pick(0) = %q", tc, rune(tb.pick(0)))
		}
	}
}

func TestTableCacheBound(t *testing.T) {
	h := newHarness(t, tinyProfile(), false, 4, 1)
	r := h.add(1, []int32{1, 2, 3}, model.Sampling{})
	h.ensure(r, 3)
	for i := 0; i < 3*maxTables; i++ {
		s := model.Sampling{Temperature: 0.5 + float64(i)/100, TopP: 0.95, Seed: 1}
		b := model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: r.tokens, Count: 3, Blocks: h.pool.Blocks(r.hold), Sample: true, Sampling: s}}}
		h.ex.Execute(&b, &h.out)
		if len(h.ex.tables) > maxTables {
			t.Fatalf("%d shaped tables cached, limit %d", len(h.ex.tables), maxTables)
		}
	}
}

// top_k keeps the k most frequent bytes, min_p those at least min_p times
// as probable as the most probable; both only when sampling.
func TestTopKAndMinPShape(t *testing.T) {
	const n = 8000
	kept := func(s model.Sampling) map[int32]bool {
		f := map[int32]bool{}
		for _, tok := range sampleMany(t, tinyProfile(), n, s, 8) {
			if tok != EOSToken {
				f[tok] = true
			}
		}
		return f
	}
	want := func(name string, got map[int32]bool, bytes string) {
		t.Helper()
		if len(got) != len(bytes) {
			t.Errorf("%s: sampled %d distinct bytes, want %q", name, len(got), bytes)
		}
		for _, b := range []byte(bytes) {
			if !got[int32(b)] {
				t.Errorf("%s: never sampled %q", name, b)
			}
		}
	}
	want("top_k 1", kept(model.Sampling{Temperature: 1, TopP: 1, TopK: 1, Seed: 2}), " ")
	want("top_k 3", kept(model.Sampling{Temperature: 1, TopP: 1, TopK: 3, Seed: 2}), " et")
	// At temperature 1, weights at least half of the space's 17000.
	want("min_p 0.5", kept(model.Sampling{Temperature: 1, TopP: 1, MinP: 0.5, Seed: 2}), " e")
	// Filters compose: top_k 5 then min_p 0.38 (6536/17000 ≈ 0.384 keeps 'a').
	want("top_k 5 min_p 0.38", kept(model.Sampling{Temperature: 1, TopP: 1, TopK: 5, MinP: 0.38, Seed: 2}), " eta")
	// Disabled values change nothing; greedy ignores the filters.
	base := sampleMany(t, tinyProfile(), 200, model.Sampling{Temperature: 1, TopP: 1, Seed: 4}, 8)
	for _, s := range []model.Sampling{{TopK: 0}, {TopK: -1}, {TopK: len(baseChars)}, {MinP: 0}, {MinP: -1}, {MinP: 2}, {MinP: math.NaN()}} {
		s.Temperature, s.TopP, s.Seed = 1, 1, 4
		if !equalTokens(base, sampleMany(t, tinyProfile(), 200, s, 8)) {
			t.Errorf("%+v differs from no filter", s)
		}
	}
	greedy := sampleMany(t, tinyProfile(), 200, model.Sampling{}, 8)
	if !equalTokens(greedy, sampleMany(t, tinyProfile(), 200, model.Sampling{TopK: 1, MinP: 0.9}, 8)) {
		t.Error("greedy decoding changed under top_k/min_p")
	}
}
