package synth

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvlease/kvlease/model"
)

// fillReference is fill written as its definition reads: section j is the
// splitmix64 stream keyed by combine(seed^domainFill, j), 8 little-endian
// bytes per output, the last output cut to the section's end.
func fillReference(kv []byte, seed uint64, section int) {
	for j := 0; len(kv) > 0; j++ {
		sec := kv[:section]
		kv = kv[section:]
		st := combine(seed^domainFill, uint64(j))
		for len(sec) > 0 {
			st += golden
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], mix64(st))
			sec = sec[copy(sec, w[:]):]
		}
	}
}

// fill writes exactly the bytes of its definition, for every section size
// (multiples of 32 and 8 bytes, and odd ones).
func TestFillMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, shape := range []struct{ layers, heads, dim, dtype int }{
		{2, 2, 16, 2}, {32, 8, 128, 2}, {1, 1, 32, 2}, {3, 2, 16, 4}, {1, 1, 1, 1}, {3, 1, 5, 1}, {2, 3, 3, 2}, {1, 1, 9, 4}, {2, 1, 20, 1},
	} {
		p := tinyProfile()
		p.Layers, p.KVHeads, p.HeadDim, p.DTypeBytes = shape.layers, shape.heads, shape.dim, shape.dtype
		h := newHarness(t, p, true, 1, 9)
		vec := h.ex.vecFill
		h.ex.vecFill = false // the Go code, then the vector code where the CPU has it
		defer func() { h.ex.vecFill = vec }()
		section := p.KVHeads * p.HeadDim * p.DTypeBytes
		got := make([]byte, p.BytesPerToken())
		want := make([]byte, p.BytesPerToken())
		for _, v := range []bool{false, vec} {
			h.ex.vecFill = v
			for range 20 {
				seed := rng.Uint64()
				clear(got)
				h.ex.fill(got, seed)
				fillReference(want, seed, section)
				if string(got) != string(want) {
					t.Fatalf("shape %+v vector %v seed %#x: fill differs from its definition", shape, v, seed)
				}
			}
		}
		if section%64 == 0 && hasFillAVX512 && !vec {
			t.Errorf("shape %+v: sections of %d bytes do not use the vector fill", shape, section)
		}
	}
}

// The tokens and KV of a fixed run, pinned: a faster executor must compute
// exactly what the definition does (P/D pairs and recorded traces rely on
// it). Digests of the pool's digests and arena bytes and of the tokens of
// a mixed batch run (chunked prefills, decodes, sampled and greedy), in
// both modes.
func TestPinnedOutputs(t *testing.T) {
	want := map[bool]uint64{false: 0xbc70a5ca932b93f9, true: 0xdb58f8ff3726e7f8}
	for _, full := range []bool{false, true} {
		zero, _ := LookupProfile("zero")
		h := newHarness(t, zero, full, 64, 42)
		rng := rand.New(rand.NewPCG(7, 7))
		var reqs []*hreq
		for i := range 5 {
			s := model.Sampling{}
			if i%2 == 1 {
				s = model.Sampling{Temperature: 0.8, TopP: 0.9, Seed: uint64(i)}
			}
			reqs = append(reqs, h.add(uint64(i+1), randomTokens(rng, 5+13*i), s))
		}
		h.run(reqs, 24, func(*hreq) int { return 1 + rng.IntN(20) })
		sum := fnv.New64a()
		for _, r := range reqs {
			for _, tok := range r.gen {
				binary.Write(sum, binary.LittleEndian, tok)
			}
			for _, b := range h.pool.Blocks(r.hold) {
				binary.Write(sum, binary.LittleEndian, h.pool.Digests(b))
				if full {
					for slot := range testBlockSize {
						sum.Write(h.pool.SlotBytes(b, slot))
					}
				}
			}
		}
		if got := sum.Sum64(); got != want[full] {
			t.Errorf("full=%v: outputs digest %#x, pinned %#x", full, got, want[full])
		}
	}
}

// Execute reports the profile's Duration of the batch, for the zero
// profile (which skips the sums) as for the others.
func TestExecuteDurationZeroProfile(t *testing.T) {
	for _, name := range []string{"zero", "tiny"} {
		p, _ := LookupProfile(name)
		h := newHarness(t, p, false, 16, 1)
		rng := rand.New(rand.NewPCG(2, 2))
		r := h.add(1, randomTokens(rng, 40), model.Sampling{})
		h.ensure(r, 40)
		b := model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: r.tokens, Count: 40, Blocks: h.pool.Blocks(r.hold), Sample: true}}}
		h.ex.Execute(&b, &h.out)
		if want := p.Duration(&b); h.out.Duration != want || (name == "tiny") != (want > 0) {
			t.Errorf("%s: Execute reports %v, Duration %v", name, h.out.Duration, want)
		}
	}
}

// pick, which starts its scan from the draw's top byte, picks what a scan
// of every threshold from the first picks, for tables of every shape.
func TestPickMatchesFullScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, k := range []shapeKey{{1, 1, 0, 0}, {0.3, 1, 0, 0}, {2, 0.5, 0, 0}, {1, 1, 3, 0}, {0.7, 0.9, 0, 0.2}, {0.01, 1, 0, 0}, {1, 1, 1, 0}} {
		tb := buildTable(k.temperature, k.topP, k.topK, k.minP)
		draws := []uint32{0, 1, math.MaxUint32}
		for _, c := range tb.cum {
			if c < 1<<32 {
				draws = append(draws, uint32(c), uint32(c)-1)
			}
		}
		for range 20000 {
			draws = append(draws, rng.Uint32())
		}
		for _, x := range draws {
			want := tb.toks[len(tb.toks)-1]
			for i, c := range tb.cum {
				if uint64(x) < c {
					want = tb.toks[i]
					break
				}
			}
			if got := tb.pick(x); got != want {
				t.Fatalf("table %+v: pick(%#x) = %d, a full scan %d", k, x, got, want)
			}
		}
	}
}
