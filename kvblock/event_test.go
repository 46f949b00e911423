package kvblock

import (
	"slices"
	"testing"
)

// takeOne drains the outbox and requires exactly one event.
func takeOne(t *testing.T, p *Pool) Event {
	t.Helper()
	evs := p.TakeEvents()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(evs), evs)
	}
	return evs[0]
}

func TestCacheRunEmitsBlockStored(t *testing.T) {
	const bs = 4
	p := New(Config{NumBlocks: 8, BlockSizeTokens: bs, Events: true, Medium: "CPU"})
	tokens := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
	hashes := AppendHashes(nil, tokens, bs, Extras{})
	if len(hashes) != 4 {
		t.Fatalf("%d hashes", len(hashes))
	}
	a := p.NewHold(HoldRequest, 1)
	p.Allocate(a, 4)

	// The first two blocks, from the root.
	p.CacheRun(p.Blocks(a)[:2], hashes[:2], RootHash, tokens[:2*bs])
	ev := takeOne(t, p)
	if ev.Kind != BlockStored || ev.Parent != RootHash || !slices.Equal(ev.Hashes, hashes[:2]) ||
		!slices.Equal(ev.Tokens, tokens[:2*bs]) || ev.BlockSize != bs || ev.Medium != "CPU" {
		t.Fatalf("first run: %+v", ev)
	}

	// All four again: only blocks 2 and 3 are new, and the parent is the
	// hash of block 1, not the root the caller passed.
	tokensCopy := slices.Clone(tokens)
	p.CacheRun(p.Blocks(a), hashes, RootHash, tokensCopy[:4*bs])
	ev = takeOne(t, p)
	if ev.Parent != hashes[1] || !slices.Equal(ev.Hashes, hashes[2:4]) || !slices.Equal(ev.Tokens, tokens[2*bs:4*bs]) {
		t.Fatalf("second run: parent %x hashes %x tokens %v", ev.Parent, ev.Hashes, ev.Tokens)
	}
	// The event owns its tokens.
	tokensCopy[3*bs] = -1
	if ev.Tokens[bs] != tokens[3*bs] {
		t.Fatal("event tokens alias the caller's slice")
	}

	// Nothing new: no event at all.
	p.CacheRun(p.Blocks(a), hashes, RootHash, tokens[:4*bs])
	if evs := p.TakeEvents(); len(evs) != 0 {
		t.Fatalf("re-caching cached blocks recorded %+v", evs)
	}

	// A second request computes the same prefix into its own blocks: the
	// hashes are taken, so its blocks stay uncached and nothing is stored;
	// a run with a duplicate in the middle reports only the new blocks.
	b := p.NewHold(HoldRequest, 2)
	p.Allocate(b, 3)
	other := []Hash{hashes[0], h64(777), h64(778)}
	p.CacheRun(p.Blocks(b), other, RootHash, tokens[:3*bs])
	ev = takeOne(t, p)
	if ev.Parent != hashes[0] || !slices.Equal(ev.Hashes, other[1:]) || !slices.Equal(ev.Tokens, tokens[bs:3*bs]) {
		t.Fatalf("run behind a duplicate: parent %x hashes %x tokens %v", ev.Parent, ev.Hashes, ev.Tokens)
	}
	if _, ok := p.Cached(p.Blocks(b)[0]); ok {
		t.Fatal("a block whose hash another block carries got cached")
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestEvictionAndUncacheEmitBlockRemoved(t *testing.T) {
	p := New(Config{NumBlocks: 2, BlockSizeTokens: 1, Events: true})
	a := p.NewHold(HoldRequest, 1)
	p.Allocate(a, 2)
	p.CacheRun(p.Blocks(a), []Hash{h64(10), h64(11)}, RootHash, []int32{1, 2})
	p.Release(a) // LRU: 1 (hash 11), 0 (hash 10)
	p.TakeEvents()

	b := p.NewHold(HoldRequest, 2)
	p.Allocate(b, 1) // evicts block 1
	ev := takeOne(t, p)
	want := Event{Kind: BlockRemoved, Hashes: []Hash{h64(11)}, BlockSize: 1, Medium: "GPU"}
	if ev.Kind != want.Kind || !slices.Equal(ev.Hashes, want.Hashes) || ev.BlockSize != 1 || ev.Medium != "GPU" {
		t.Fatalf("eviction: %+v, want %+v", ev, want)
	}
	if ev.Kind.String() != "BlockRemoved" {
		t.Fatalf("String = %q", ev.Kind.String())
	}

	p.Uncache(0) // evictable block 0 becomes free
	if ev := takeOne(t, p); ev.Kind != BlockRemoved || !slices.Equal(ev.Hashes, []Hash{h64(10)}) {
		t.Fatalf("Uncache: %+v", ev)
	}
	p.Uncache(0) // not cached any more: no event
	if evs := p.TakeEvents(); len(evs) != 0 {
		t.Fatalf("Uncache of an uncached block recorded %+v", evs)
	}
	if p.NumFree() != 1 || p.NumEvictable() != 0 {
		t.Fatalf("free %d evictable %d", p.NumFree(), p.NumEvictable())
	}
}

func TestResetCacheEmitsAllBlocksCleared(t *testing.T) {
	p := New(Config{NumBlocks: 4, BlockSizeTokens: 1, Events: true})
	a := p.NewHold(HoldRequest, 1)
	p.Allocate(a, 3)
	p.CacheRun(p.Blocks(a), []Hash{h64(1), h64(2), h64(3)}, RootHash, []int32{1, 2, 3})
	p.TakeEvents()
	if p.ResetCache() {
		t.Fatal("ResetCache succeeded while blocks are held")
	}
	if evs := p.TakeEvents(); len(evs) != 0 {
		t.Fatalf("failed ResetCache recorded %+v", evs)
	}
	p.Release(a)
	if !p.ResetCache() {
		t.Fatal("ResetCache failed with nothing held")
	}
	ev := takeOne(t, p)
	if ev.Kind != AllBlocksCleared || ev.Medium != "GPU" || len(ev.Hashes) != 0 {
		t.Fatalf("ResetCache: %+v", ev)
	}
	if p.NumFree() != 4 || p.NumEvictable() != 0 || len(p.Lookup(nil, []Hash{h64(1)})) != 0 {
		t.Fatalf("after ResetCache: free %d evictable %d", p.NumFree(), p.NumEvictable())
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestEventsOff: with Events false the outbox stays empty whatever happens.
func TestEventsOff(t *testing.T) {
	p := New(Config{NumBlocks: 2, BlockSizeTokens: 1})
	for i := range 10 {
		h := p.NewHold(HoldRequest, uint64(i))
		p.Allocate(h, 2) // evicts the previous round's blocks
		p.CacheRun(p.Blocks(h), []Hash{h64(uint64(2 * i)), h64(uint64(2*i + 1))}, RootHash, nil)
		p.Uncache(p.Blocks(h)[0])
		p.Release(h)
	}
	p.ResetCache()
	if evs := p.TakeEvents(); evs != nil {
		t.Fatalf("events off, yet recorded %+v", evs)
	}
}

// TestTakeEventsEmpties: the caller owns what TakeEvents returns, and the
// outbox starts over.
func TestTakeEventsEmpties(t *testing.T) {
	p := New(Config{NumBlocks: 1, BlockSizeTokens: 1, Events: true})
	p.ResetCache()
	first := p.TakeEvents()
	p.ResetCache()
	second := p.TakeEvents()
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("%d then %d events", len(first), len(second))
	}
	first[0].Kind = BlockStored
	if second[0].Kind != AllBlocksCleared {
		t.Fatal("the two drains share memory")
	}
	if p.TakeEvents() != nil {
		t.Fatal("outbox not empty after TakeEvents")
	}
}
