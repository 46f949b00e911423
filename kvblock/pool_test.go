package kvblock

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
)

// mustPanic runs f and fails unless it panics with a message containing want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("did not panic (want a panic mentioning %q)", want)
		}
		if msg := panicString(r); !strings.Contains(msg, want) {
			t.Fatalf("panicked with %q, want it to mention %q", msg, want)
		}
	}()
	f()
}

func panicString(r any) string {
	switch v := r.(type) {
	case string:
		return v
	case error:
		return v.Error()
	}
	return ""
}

// TestPoolMisusePanics: misuse of holds and blocks is a bug, and a bug must
// crash rather than corrupt the accounting silently.
func TestPoolMisusePanics(t *testing.T) {
	small := func() *Pool { return New(Config{NumBlocks: 4, BlockSizeTokens: 2}) }
	released := func() (*Pool, HoldID) {
		p := small()
		h := p.NewHold(HoldRequest, 1)
		p.Allocate(h, 2)
		p.Release(h)
		return p, h
	}
	// evictable returns a pool whose block 0 is cached and unheld.
	evictable := func() *Pool {
		p := small()
		h := p.NewHold(HoldRequest, 1)
		p.Allocate(h, 1)
		p.Cache(0, h64(42))
		p.Release(h)
		return p
	}
	tests := []struct {
		name string
		want string
		f    func()
	}{
		{"double Release", "not live", func() { p, h := released(); p.Release(h) }},
		{"Allocate after Release", "not live", func() { p, h := released(); p.Allocate(h, 1) }},
		{"Share after Release", "not live", func() { p, h := released(); p.Share(h, nil) }},
		{"Truncate after Release", "not live", func() { p, h := released(); p.Truncate(h, 0) }},
		{"Blocks after Release", "not live", func() { p, h := released(); p.Blocks(h) }},
		{"Len after Release", "not live", func() { p, h := released(); p.Len(h) }},
		{"Kind after Release", "not live", func() { p, h := released(); p.Kind(h) }},
		{"Owner after Release", "not live", func() { p, h := released(); p.Owner(h) }},
		{"stale id after its slot is reused", "not live", func() {
			p, h := released()
			h2 := p.NewHold(HoldLease, 2) // reuses the slot with a new generation
			if h2 == h {
				panic("hold id reused")
			}
			p.Release(h)
		}},
		{"zero HoldID", "does not exist", func() { small().Release(0) }},
		{"never issued HoldID", "does not exist", func() { small().Allocate(HoldID(7), 1) }},
		{"Share of a never used block", "Share of free block", func() {
			p := small()
			p.Share(p.NewHold(HoldRequest, 1), []BlockID{0})
		}},
		{"Share of a released block", "Share of free block", func() {
			p, _ := released()
			p.Share(p.NewHold(HoldRequest, 1), []BlockID{1})
		}},
		{"Share of an uncached evictable block", "Share of free block", func() {
			p := evictable()
			p.Uncache(0)
			p.Share(p.NewHold(HoldRequest, 1), []BlockID{0})
		}},
		{"Share out of range", "out of range", func() {
			p := small()
			p.Share(p.NewHold(HoldRequest, 1), []BlockID{4})
		}},
		{"Cache of a free block", "Cache of unheld block", func() { small().Cache(0, h64(1)) }},
		{"Cache of an evictable block", "Cache of unheld block", func() { evictable().Cache(0, h64(43)) }},
		{"Cache under a second hash", "already cached", func() {
			p := small()
			p.Allocate(p.NewHold(HoldRequest, 1), 1)
			p.Cache(0, h64(1))
			p.Cache(0, h64(2))
		}},
		{"Cache out of range", "out of range", func() { small().Cache(-1, h64(1)) }},
		{"CacheRun of an unheld block", "Cache of unheld block", func() {
			small().CacheRun([]BlockID{0}, []Hash{h64(1)}, RootHash, []int32{0, 0})
		}},
		{"CacheRun with mismatched lengths", "mismatched", func() {
			small().CacheRun([]BlockID{0}, nil, RootHash, nil)
		}},
		{"Truncate beyond the hold", "Truncate(3)", func() {
			p := small()
			h := p.NewHold(HoldRequest, 1)
			p.Allocate(h, 2)
			p.Truncate(h, 3)
		}},
		{"Truncate negative", "Truncate(-1)", func() {
			p := small()
			p.Truncate(p.NewHold(HoldRequest, 1), -1)
		}},
		{"negative Allocate", "negative", func() { p := small(); p.Allocate(p.NewHold(HoldRequest, 1), -1) }},
		{"NewHold kind 0", "bad hold kind", func() { small().NewHold(0, 1) }},
		{"NewHold kind out of range", "bad hold kind", func() { small().NewHold(numHoldKinds, 1) }},
		{"New with a bad config", "NumBlocks", func() { New(Config{BlockSizeTokens: 16}) }},
		{"AppendHashes with block size 0", "block size 0", func() { AppendHashes(nil, []int32{1}, 0, Extras{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustPanic(t, tt.want, tt.f) })
	}
}

// TestAllocateImpossibleChangesNothing: an allocation larger than free plus
// evictable fails as a value and leaves every block and the LRU as it was.
func TestAllocateImpossibleChangesNothing(t *testing.T) {
	p := New(Config{NumBlocks: 6, BlockSizeTokens: 1, Events: true})
	a := p.NewHold(HoldRequest, 1)
	p.Allocate(a, 4)
	p.CacheRun(p.Blocks(a)[:2], []Hash{h64(10), h64(11)}, RootHash, []int32{5, 6})
	p.Release(a) // 0, 1 evictable; 2, 3, 4, 5 free
	p.TakeEvents()
	b := p.NewHold(HoldRequest, 2)
	if !p.Allocate(b, 1) { // takes block 2 (top of the free stack)
		t.Fatal("Allocate(1) failed")
	}
	if p.Allocate(b, 6) {
		t.Fatal("Allocate(6) with 5 available succeeded")
	}
	if got := p.Blocks(b); !slices.Equal(got, []BlockID{2}) {
		t.Fatalf("hold after failed Allocate = %v, want [2]", got)
	}
	if p.NumFree() != 3 || p.NumEvictable() != 2 || p.NumHeld() != 1 || len(p.TakeEvents()) != 0 {
		t.Fatalf("failed Allocate changed the pool: free %d evictable %d held %d", p.NumFree(), p.NumEvictable(), p.NumHeld())
	}
	// Everything left, exactly: the free stack LIFO (3, 4, 5), then the LRU
	// from its head. Release pushed 1 before 0 (last to first), so 1 goes first.
	if !p.Allocate(b, 5) {
		t.Fatal("Allocate(5) with 5 available failed")
	}
	if got, want := p.Blocks(b), []BlockID{2, 3, 4, 5, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("allocation order = %v, want %v", got, want)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestShareMovesEvictableOutOfLRU: a prefix hit takes a cached block out of
// the LRU, and its next release makes it the most recently used.
func TestShareMovesEvictableOutOfLRU(t *testing.T) {
	p := New(Config{NumBlocks: 3, BlockSizeTokens: 1})
	a := p.NewHold(HoldRequest, 1)
	p.Allocate(a, 3)
	p.CacheRun(p.Blocks(a), []Hash{h64(1), h64(2), h64(3)}, RootHash, nil)
	p.Release(a) // LRU: 2, 1, 0
	b := p.NewHold(HoldRequest, 2)
	hit := p.Lookup(nil, []Hash{h64(1), h64(2), h64(3)})
	if !slices.Equal(hit, []BlockID{0, 1, 2}) {
		t.Fatalf("Lookup = %v", hit)
	}
	p.Share(b, hit[1:2]) // block 1 held; LRU: 2, 0
	if p.NumEvictable() != 2 || p.Refs(1) != 1 {
		t.Fatalf("after Share: evictable %d, refs(1) %d", p.NumEvictable(), p.Refs(1))
	}
	p.Release(b) // LRU: 2, 0, 1
	c := p.NewHold(HoldRequest, 3)
	p.Allocate(c, 3)
	if got := p.Blocks(c); !slices.Equal(got, []BlockID{2, 0, 1}) {
		t.Fatalf("eviction order = %v, want [2 0 1]", got)
	}
	if n := len(p.Lookup(nil, []Hash{h64(1)})); n != 0 {
		t.Fatal("evicted hash still found")
	}
}

// h64 is a test hash made from a number: distinct numbers, distinct hashes.
func h64(n uint64) Hash {
	var h Hash
	binary.LittleEndian.PutUint64(h[:], n)
	h[15] = 0x7e // never RootHash, even for n = 0
	return h
}

// TestHoldIDNeverReused: hold slots are reused last-released first, each
// with the next generation; a slot whose 32-bit generation is exhausted is
// retired instead of wrapping, so a stale id never names a newer hold (with
// a wrap, the slot's 2³²+1-th hold would get back its first hold's id).
func TestHoldIDNeverReused(t *testing.T) {
	p := New(Config{NumBlocks: 4, BlockSizeTokens: 1})
	first := p.NewHold(HoldRequest, 1)
	p.Allocate(first, 1)
	p.Release(first)
	// Fast-forward the slot as if 2³²−3 more holds had used it.
	p.holds[first.index()].gen = math.MaxUint32 - 2
	issued := map[HoldID]bool{first: true}
	var last HoldID
	for range 2 {
		h := p.NewHold(HoldLease, 2)
		if h.index() != first.index() || issued[h] {
			t.Fatalf("NewHold = %#x (slot %d), first was %#x: want slot %d with a fresh generation", uint64(h), h.index(), uint64(first), first.index())
		}
		issued[h] = true
		p.Allocate(h, 1)
		p.Release(h)
		last = h
	}
	if last.gen() != math.MaxUint32 {
		t.Fatalf("last generation %#x, want the maximum", last.gen())
	}
	next := p.NewHold(HoldRequest, 3)
	if next.index() == first.index() || issued[next] {
		t.Fatalf("after the last generation NewHold = %#x: the retired slot was reused", uint64(next))
	}
	for id := range issued {
		if p.Live(id) {
			t.Fatalf("released hold %#x is live", uint64(id))
		}
	}
	mustPanic(t, "not live", func() { p.Release(first) })
	mustPanic(t, "not live", func() { p.Release(last) })
	p.Allocate(next, 2)
	p.Release(next)
	if err := p.CheckFull(); err != nil {
		t.Fatal(err)
	}
	if p.NumFree() != 4 {
		t.Fatalf("%d blocks free, want 4", p.NumFree())
	}
}
