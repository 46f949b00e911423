package kvblock

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkPoolAllocFree: one op is a request's block life without prefix
// caching: NewHold, Allocate 64 blocks, Release. Target ≤ 2 µs, 0 allocs.
func BenchmarkPoolAllocFree(b *testing.B) {
	p := New(Config{NumBlocks: 16384, BlockSizeTokens: 16})
	// Fragment the free stack a little, as a running engine would.
	rng := rand.New(rand.NewPCG(1, 1))
	var live []HoldID
	for range 100 {
		h := p.NewHold(HoldRequest, 0)
		p.Allocate(h, 1+rng.IntN(100))
		live = append(live, h)
	}
	for i, h := range live {
		if i%2 == 0 {
			p.Release(h)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		h := p.NewHold(HoldRequest, 1)
		if !p.Allocate(h, 64) {
			b.Fatal("Allocate failed")
		}
		p.Release(h)
	}
}

// BenchmarkPoolAllocEvict is AllocFree when every allocated block must be
// evicted from the prefix cache (the pool is full of cached blocks).
func BenchmarkPoolAllocEvict(b *testing.B) {
	const n = 16384
	p := New(Config{NumBlocks: n, BlockSizeTokens: 16})
	h := p.NewHold(HoldRequest, 0)
	p.Allocate(h, n)
	nextN := uint64(1)
	for _, blk := range p.Blocks(h) {
		p.Cache(blk, h64(nextN))
		nextN++
	}
	p.Release(h)
	b.ReportAllocs()
	for b.Loop() {
		h := p.NewHold(HoldRequest, 1)
		if !p.Allocate(h, 64) {
			b.Fatal("Allocate failed")
		}
		for _, blk := range p.Blocks(h) {
			p.Cache(blk, h64(nextN))
			nextN++
		}
		p.Release(h)
	}
}

// benchPrefix fills a pool with one fully cached 4,096-token prompt (block
// size 16, 256 blocks), released so its blocks are evictable, as after the
// request that computed it finished.
func benchPrefix(b *testing.B, ex Extras) (*Pool, []int32) {
	const bs, promptTokens = 16, 4096
	p := New(Config{NumBlocks: 16384, BlockSizeTokens: bs})
	rng := rand.New(rand.NewPCG(2, 2))
	prompt := make([]int32, promptTokens)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(128_000))
	}
	hashes := AppendHashes(nil, prompt, bs, ex)
	h := p.NewHold(HoldRequest, 0)
	p.Allocate(h, len(hashes))
	p.CacheRun(p.Blocks(h), hashes, RootHash, prompt)
	p.Release(h)
	if got := len(p.Lookup(nil, hashes)); got != promptTokens/bs {
		b.Fatalf("cached prefix %d blocks", got)
	}
	return p, prompt
}

// BenchmarkPrefixLookup: one op is a prefix-cache hit of a 4,096-token
// prompt: hash the prompt, look it up, Share the 256 hit blocks into a fresh
// hold, Release. Target ≤ 30 µs, buffers reused so ~0 allocs.
func BenchmarkPrefixLookup(b *testing.B) {
	benchmarkPrefixLookup(b, Extras{})
}

// BenchmarkPrefixLookupExtras is PrefixLookup with a cache salt and an
// adapter, which puts extra keys into every block's hash.
func BenchmarkPrefixLookupExtras(b *testing.B) {
	benchmarkPrefixLookup(b, Extras{CacheSalt: "tenant-42", Adapter: Adapter{Name: "lora-sql"}})
}

func benchmarkPrefixLookup(b *testing.B, ex Extras) {
	p, prompt := benchPrefix(b, ex)
	bs := p.BlockSizeTokens()
	hashes := make([]Hash, 0, len(prompt)/bs)
	hit := make([]BlockID, 0, len(prompt)/bs)
	b.ReportAllocs()
	for b.Loop() {
		hashes = AppendHashes(hashes[:0], prompt, bs, ex)
		hit = p.Lookup(hit[:0], hashes)
		if len(hit) != len(hashes) {
			b.Fatalf("hit %d of %d blocks", len(hit), len(hashes))
		}
		h := p.NewHold(HoldRequest, 1)
		p.Share(h, hit)
		p.Release(h)
	}
}

// BenchmarkAppendHashes is the hashing part of PrefixLookup alone.
func BenchmarkAppendHashes(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	prompt := make([]int32, 4096)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(128_000))
	}
	hashes := make([]Hash, 0, 256)
	b.SetBytes(int64(4 * len(prompt)))
	b.ReportAllocs()
	for b.Loop() {
		hashes = AppendHashes(hashes[:0], prompt, 16, Extras{})
	}
}

// BenchmarkCheckFull is the cost of the full invariant check on a large
// pool (0 allocs).
func BenchmarkCheckFull(b *testing.B) {
	p, _ := benchPrefix(b, Extras{})
	h := p.NewHold(HoldRequest, 1)
	p.Allocate(h, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.CheckFull(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckUnchanged is Check on a pool that did not change since it
// last passed (most instants of a simulation, for most engines).
func BenchmarkCheckUnchanged(b *testing.B) {
	p, _ := benchPrefix(b, Extras{})
	h := p.NewHold(HoldRequest, 1)
	p.Allocate(h, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
