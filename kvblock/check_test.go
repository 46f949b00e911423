package kvblock

import "testing"

// checkFixture returns a pool with every kind of state: block 0 held twice
// (two holds), block 1 held and cached, blocks 2 and 3 evictable, the rest
// free, and a released hold slot.
func checkFixture(t *testing.T) (*Pool, HoldID, HoldID) {
	t.Helper()
	p := New(Config{NumBlocks: 8, BlockSizeTokens: 1})
	a := p.NewHold(HoldRequest, 1)
	p.Allocate(a, 4)
	p.CacheRun(p.Blocks(a)[1:4], []Hash{h64(101), h64(102), h64(103)}, h64(100), nil)
	b := p.NewHold(HoldLease, 2)
	p.Share(b, p.Blocks(a)[:2])
	p.Release(a)
	gone := p.NewHold(HoldStore, 3)
	p.Release(gone)
	if err := p.Check(); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	if p.NumHeld() != 2 || p.NumEvictable() != 2 || p.NumFree() != 4 {
		t.Fatalf("fixture: held %d evictable %d free %d", p.NumHeld(), p.NumEvictable(), p.NumFree())
	}
	return p, b, gone
}

// TestCheckDetectsCorruption tampers with the pool's internals, one way at a
// time, and requires Check to notice each.
func TestCheckDetectsCorruption(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(p *Pool, live, gone HoldID)
	}{
		{"refs too high on a held block", func(p *Pool, _, _ HoldID) { p.refs[0]++ }},
		{"refs too low on a held block", func(p *Pool, _, _ HoldID) { p.refs[0]-- }},
		{"refs on a free block", func(p *Pool, _, _ HoldID) { p.refs[p.free[0]] = 1 }},
		{"refs on an evictable block", func(p *Pool, _, _ HoldID) { p.refs[2] = 1 }},
		{"block twice in the free stack", func(p *Pool, _, _ HoldID) { p.free = append(p.free, p.free[0]) }},
		{"free block lost", func(p *Pool, _, _ HoldID) { p.free = p.free[1:] }},
		{"held block also free", func(p *Pool, _, _ HoldID) { p.free[0] = 0 }},
		{"evictable count off", func(p *Pool, _, _ HoldID) { p.numEvictable++ }},
		{"LRU back link broken", func(p *Pool, _, _ HoldID) { p.prev[p.lruTl] = none }},
		{"LRU cycle", func(p *Pool, _, _ HoldID) { p.next[p.lruTl] = p.lruHead; p.prev[p.lruHead] = p.lruTl }},
		{"evictable block dropped from the LRU", func(p *Pool, _, _ HoldID) {
			p.lruRemove(BlockID(p.lruHead))
			p.numEvictable++
		}},
		{"cached flag on a free block", func(p *Pool, _, _ HoldID) { p.hashed[p.free[0]] = true }},
		{"cached flag lost on an evictable block", func(p *Pool, _, _ HoldID) { p.hashed[2] = false }},
		{"cached flag lost on a held block", func(p *Pool, _, _ HoldID) { p.hashed[1] = false }},
		{"index entry lost", func(p *Pool, _, _ HoldID) { delete(p.index, h64(102)) }},
		{"index points at an uncached block", func(p *Pool, _, _ HoldID) { p.index[h64(999)] = p.free[0] }},
		{"index points at a block with another hash", func(p *Pool, _, _ HoldID) { p.index[h64(102)] = 3 }},
		{"index points out of range", func(p *Pool, _, _ HoldID) { p.index[h64(999)] = 100 }},
		{"block carries another hash than its index entry", func(p *Pool, _, _ HoldID) { p.hashes[2] = h64(555) }},
		{"live hold count off", func(p *Pool, _, _ HoldID) { p.numLive[HoldLease]++ }},
		{"hold not counted live", func(p *Pool, live, _ HoldID) { p.holds[live.index()].live = false }},
		{"released hold names blocks", func(p *Pool, _, gone HoldID) {
			p.holds[gone.index()].blocks = append(p.holds[gone.index()].blocks, 0)
		}},
		{"hold names a block without counting it", func(p *Pool, live, _ HoldID) {
			p.holds[live.index()].blocks = append(p.holds[live.index()].blocks, 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, live, gone := checkFixture(t)
			tt.tamper(p, live, gone)
			if err := p.CheckFull(); err == nil {
				t.Fatal("CheckFull passed on a corrupted pool")
			} else {
				t.Log(err)
			}
			// Check verifies again once the pool changed (every mutator
			// counts a version: TestCheckSkipsOnlyAnUnchangedPool).
			p.version++
			if err := p.Check(); err == nil {
				t.Fatal("Check passed on a corrupted pool after a change")
			}
		})
	}
}

// TestCheckSkipsOnlyAnUnchangedPool: Check verifies again after every
// method that changes the accounting (each counts a version), and returns
// at once on a pool that did not change since it last passed.
func TestCheckSkipsOnlyAnUnchangedPool(t *testing.T) {
	p, live, _ := checkFixture(t)
	mutators := []struct {
		name string
		fn   func()
	}{
		{"NewHold", func() { live = p.NewHold(HoldLease, 5) }},
		{"Allocate", func() { p.Allocate(live, 1) }},
		{"Share", func() { p.Share(live, []BlockID{0}) }},
		{"Truncate", func() { p.Truncate(live, 1) }},
		{"Cache", func() { p.Cache(p.Blocks(live)[0], h64(777)) }},
		{"CacheRun", func() {
			h := p.NewHold(HoldRequest, 6)
			p.Allocate(h, 1)
			v := p.version
			p.CacheRun(p.Blocks(h), []Hash{h64(778)}, h64(0), nil)
			if p.version == v {
				t.Error("CacheRun did not count a version")
			}
			p.Release(h)
		}},
		{"Uncache", func() { p.Uncache(2) }},
		{"Release", func() { p.Release(live) }},
		{"ResetCache", func() {
			for _, h := range p.LiveHolds(nil) {
				p.Release(h.ID)
			}
			p.ResetCache()
		}},
	}
	for _, m := range mutators {
		if err := p.Check(); err != nil {
			t.Fatalf("before %s: %v", m.name, err)
		}
		// A tamper no method saw: Check, with nothing changed, does not
		// look; CheckFull does.
		p.numEvictable++
		if err := p.Check(); err != nil {
			t.Fatalf("before %s: Check re-verified an unchanged pool: %v", m.name, err)
		}
		if p.CheckFull() == nil {
			t.Fatal("CheckFull missed the tamper")
		}
		p.numEvictable--
		v := p.version
		m.fn()
		if p.version == v {
			t.Errorf("%s did not count a version", m.name)
		}
		p.numEvictable++
		if p.Check() == nil {
			t.Errorf("after %s: Check did not verify the changed pool", m.name)
		}
		p.numEvictable--
	}
}
