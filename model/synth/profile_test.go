package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvlease/kvlease/model"
)

func TestProfiles(t *testing.T) {
	if got, want := ProfileNames(), []string{"llama-8b", "tiny", "zero"}; !slices.Equal(got, want) {
		t.Fatalf("ProfileNames() = %v, want %v", got, want)
	}
	for _, n := range ProfileNames() {
		p, ok := LookupProfile(n)
		if !ok || p.Name != n {
			t.Fatalf("LookupProfile(%q) = %q, %v", n, p.Name, ok)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if p.VocabSize != 257 || p.EOS != 256 {
			t.Fatalf("%s: vocab %d, EOS %d", n, p.VocabSize, p.EOS)
		}
	}
	if _, ok := LookupProfile("gpt-5"); ok {
		t.Fatal("unknown profile found")
	}
	for _, tc := range []struct {
		name          string
		bytesPerToken int
	}{{"tiny", 256}, {"zero", 256}, {"llama-8b", 128 << 10}} {
		p, _ := LookupProfile(tc.name)
		if got := p.BytesPerToken(); got != tc.bytesPerToken {
			t.Errorf("%s: BytesPerToken() = %d, want %d", tc.name, got, tc.bytesPerToken)
		}
	}
	if p, _ := LookupProfile("llama-8b"); p.BytesPerToken()*16 != 2<<20 {
		t.Error("llama-8b block is not 2 MiB")
	}
	// A copy: changing it does not change the registry.
	p, _ := LookupProfile("tiny")
	p.Layers = 99
	if q, _ := LookupProfile("tiny"); q.Layers != 2 {
		t.Fatal("LookupProfile returned a shared profile")
	}
}

func TestProfileValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Profile)
	}{
		{"no layers", func(p *Profile) { p.Layers = 0 }},
		{"negative heads", func(p *Profile) { p.KVHeads = -1 }},
		{"huge", func(p *Profile) { p.HeadDim = 1 << 30 }},
		{"no max len", func(p *Profile) { p.MaxModelLen = 0 }},
		{"small vocab", func(p *Profile) { p.VocabSize = 256 }},
		{"EOS is a byte", func(p *Profile) { p.EOS = 65 }},
		{"EOS past vocab", func(p *Profile) { p.EOS = 257 }},
		{"EOS probability NaN", func(p *Profile) { p.EOSProbability = math.NaN() }},
		{"EOS probability > 1", func(p *Profile) { p.EOSProbability = 1.5 }},
		{"negative latency", func(p *Profile) { p.DecodePerSeq = -1 }},
	} {
		p := tinyProfile()
		tc.mod(&p)
		if err := p.Validate(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func decodeBatch(seqs, context int) *model.Batch {
	b := &model.Batch{}
	for i := 0; i < seqs; i++ {
		b.Seqs = append(b.Seqs, model.Seq{Start: context - 1, Count: 1, Sample: true})
	}
	return b
}

func prefillBatch(tokens int) *model.Batch {
	return &model.Batch{Seqs: []model.Seq{{Count: tokens, Sample: true}}}
}

// The llama-8b figures stay in the ranges the profile's comment claims.
func TestLlamaFigures(t *testing.T) {
	p, _ := LookupProfile("llama-8b")
	for _, tc := range []struct {
		name     string
		b        *model.Batch
		min, max time.Duration
	}{
		{"decode 1 × 1k", decodeBatch(1, 1024), 6 * time.Millisecond, 8 * time.Millisecond},
		{"decode 64 × 1k", decodeBatch(64, 1024), 9 * time.Millisecond, 13 * time.Millisecond},
		{"decode 256 × 512", decodeBatch(256, 512), 14 * time.Millisecond, 22 * time.Millisecond},
		{"prefill 1k", prefillBatch(1024), 20 * time.Millisecond, 40 * time.Millisecond},
		{"prefill 8k", prefillBatch(8192), 200 * time.Millisecond, 320 * time.Millisecond},
	} {
		d := p.Duration(tc.b)
		t.Logf("llama-8b %s: %v", tc.name, d)
		if d < tc.min || d > tc.max {
			t.Errorf("%s: %v, want in [%v, %v]", tc.name, d, tc.min, tc.max)
		}
	}
	tiny := tinyProfile()
	if d := tiny.Duration(decodeBatch(8, 100)); d < time.Millisecond || d > 5*time.Millisecond {
		t.Errorf("tiny decode step %v, want a few ms", d)
	}
}

func randomBatch(rng *rand.Rand) *model.Batch {
	b := &model.Batch{}
	for i := rng.IntN(20); i >= 0; i-- {
		b.Seqs = append(b.Seqs, model.Seq{Start: rng.IntN(5000), Count: 1 + rng.IntN(600)})
	}
	return b
}

// Adding a sequence, a token or context never shortens a step; the zero
// profile is always 0; nothing overflows.
func TestDurationMonotone(t *testing.T) {
	zero, _ := LookupProfile("zero")
	rng := rand.New(rand.NewPCG(6, 6))
	for _, name := range ProfileNames() {
		p, _ := LookupProfile(name)
		if d := p.Duration(&model.Batch{}); d != 0 {
			t.Fatalf("%s: empty batch takes %v", name, d)
		}
		if d := p.Duration(nil); d != 0 {
			t.Fatalf("%s: nil batch takes %v", name, d)
		}
		for i := 0; i < 2000; i++ {
			b := randomBatch(rng)
			d := p.Duration(b)
			if d < 0 || (name == "zero") != (d == 0) {
				t.Fatalf("%s: %v for %+v", name, d, b)
			}
			k := rng.IntN(len(b.Seqs))
			more := slices.Clone(b.Seqs)
			more[k].Count += 1 + rng.IntN(100)
			if d2 := p.Duration(&model.Batch{Seqs: more}); d2 < d {
				t.Fatalf("%s: more tokens %v < %v", name, d2, d)
			}
			more = slices.Clone(b.Seqs)
			more[k].Start += 1 + rng.IntN(1000)
			if d2 := p.Duration(&model.Batch{Seqs: more}); d2 < d {
				t.Fatalf("%s: more context %v < %v", name, d2, d)
			}
			more = append(slices.Clone(b.Seqs), model.Seq{Start: rng.IntN(100), Count: 1 + rng.IntN(5)})
			if d2 := p.Duration(&model.Batch{Seqs: more}); d2 < d {
				t.Fatalf("%s: another seq %v < %v", name, d2, d)
			}
		}
	}
	// Strictly increasing for the timed profiles.
	p := tinyProfile()
	if !(p.Duration(prefillBatch(100)) < p.Duration(prefillBatch(5000))) ||
		!(p.Duration(decodeBatch(1, 100)) < p.Duration(decodeBatch(100, 100))) ||
		!(p.Duration(decodeBatch(10, 100)) < p.Duration(decodeBatch(10, 100000))) {
		t.Error("tiny is not increasing in tokens, sequences and context")
	}
	// Absurd and negative input saturate instead of overflowing.
	huge := &model.Batch{Seqs: []model.Seq{{Start: math.MaxInt, Count: math.MaxInt}, {Start: -5, Count: -7}}}
	if d := p.Duration(huge); d != math.MaxInt64 {
		t.Errorf("huge batch: %v", d)
	}
	if d := zero.Duration(huge); d != 0 {
		t.Errorf("zero profile, huge batch: %v", d)
	}
	neg := &model.Batch{Seqs: []model.Seq{{Start: -5, Count: -7}}}
	if d := p.Duration(neg); d != p.StepOverhead+p.DecodePerSeq+p.DecodePerStep {
		t.Errorf("negative seq: %v", d)
	}
}

// Execute reports the profile's duration.
func TestExecuteDuration(t *testing.T) {
	h := newHarness(t, tinyProfile(), false, 8, 1)
	r := h.add(1, make([]int32, 50), model.Sampling{})
	h.ensure(r, 50)
	b := model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: r.tokens, Count: 50, Blocks: h.pool.Blocks(r.hold), Sample: true}}}
	h.ex.Execute(&b, &h.out)
	if want := tinyProfile().Duration(&b); h.out.Duration != want || want == 0 {
		t.Fatalf("Duration %v, want %v", h.out.Duration, want)
	}
}
