package offload

import (
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

// harness drives a Coordinator the way an engine core and its edge do:
// requests hold blocks in a digest-only pool, "computing" a full block
// writes digests derived from its hash, and store and load work is run
// synchronously against per-tier maps of records. After every operation,
// check verifies the pool, the coordinator, and that every cached or
// stored block holds the content of its hash.
type harness struct {
	t    *testing.T
	pool *kvblock.Pool
	c    *Coordinator
	bs   int

	tiers  []map[Slot]record
	stores []StoreWork
	loads  []LoadWork
	// expect is the content of every full block ever computed, by hash.
	expect map[kvblock.Hash][]uint64
}

type record struct {
	hash    kvblock.Hash
	digests []uint64
}

// posContent is the KV digest of position q of a token sequence: a
// function of the prefix tokens[:q+1], as in model/synth.
func posContent(tokens []int32, q int) uint64 {
	v := uint64(0x6b766c65)
	for _, t := range tokens[:q+1] {
		v = (v^uint64(t))*0x9e3779b97f4a7c15 + 1
	}
	return v
}

func newHarness(t *testing.T, poolBlocks int, cfg Config) *harness {
	t.Helper()
	pool := kvblock.New(kvblock.Config{NumBlocks: poolBlocks, BlockSizeTokens: 4, Events: true})
	// The default bounds (a quarter of the pool) would cut these small
	// scripted cases; tests of the bounds set them.
	if cfg.MaxInflightStoreBlocks == 0 {
		cfg.MaxInflightStoreBlocks = 2 * poolBlocks
	}
	if cfg.MaxInflightLoadBlocks == 0 {
		cfg.MaxInflightLoadBlocks = poolBlocks
	}
	// These tests (and the model of coordinator_random_test.go) release a
	// load's blocks when it ends; held loads have their own tests.
	if cfg.LoadHoldSteps == 0 {
		cfg.LoadHoldSteps = -1
	}
	h := &harness{t: t, pool: pool, c: NewCoordinator(cfg, pool), bs: 4, expect: map[kvblock.Hash][]uint64{}}
	h.tiers = make([]map[Slot]record, len(cfg.Tiers))
	for i := range h.tiers {
		h.tiers[i] = map[Slot]record{}
	}
	return h
}

func cpuBlocks(n int) []TierConfig { return []TierConfig{{Medium: MediumCPU, Blocks: n}} }

func (h *harness) check(what string) {
	h.t.Helper()
	if err := h.pool.Check(); err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
	if err := h.c.Check(); err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
	for b := range kvblock.BlockID(h.pool.Capacity()) {
		if hash, ok := h.pool.Cached(b); ok {
			h.mustHold(what, b, hash)
		}
	}
	for _, w := range h.stores {
		for i, b := range w.Blocks {
			if h.pool.Refs(b) == 0 {
				h.t.Fatalf("%s: block %d of store %d has no hold", what, b, w.ID)
			}
			h.mustHold(what, b, w.Hashes[i])
		}
	}
}

func (h *harness) mustHold(what string, b kvblock.BlockID, hash kvblock.Hash) {
	h.t.Helper()
	want, ok := h.expect[hash]
	if !ok {
		h.t.Fatalf("%s: block %d carries hash %x which no request computed", what, b, hash)
	}
	if !slices.Equal(h.pool.Digests(b), want) {
		h.t.Fatalf("%s: block %d (hash %x) holds wrong content", what, b, hash)
	}
}

// take collects the work handed out since the last take.
func (h *harness) take() Work {
	w := h.c.Take()
	h.stores = append(h.stores, w.Stores...)
	h.loads = append(h.loads, w.Loads...)
	return w
}

// runStore executes pending store i, writing its first copied blocks.
func (h *harness) runStore(i, copied int) {
	w := h.stores[i]
	h.stores = slices.Delete(h.stores, i, i+1)
	for k := range copied {
		if !slices.Equal(h.pool.Digests(w.Blocks[k]), h.expect[w.Hashes[k]]) {
			h.t.Fatalf("store %d copy %d: block %d does not hold the content of %x while its store reads it", w.ID, k, w.Blocks[k], w.Hashes[k])
		}
		h.tiers[w.Tier][w.Slots[k]] = record{w.Hashes[k], slices.Clone(h.pool.Digests(w.Blocks[k]))}
	}
	h.c.StoreDone(w.ID, copied)
}

func (h *harness) storeAll() {
	h.take()
	for len(h.stores) > 0 {
		w := h.stores[0]
		h.runStore(0, len(w.Blocks))
	}
}

// runLoad executes pending load i; a record that is missing or of another
// hash stops it, as in offload/tier.
func (h *harness) runLoad(i int) (uint64, bool) {
	w := h.loads[i]
	h.loads = slices.Delete(h.loads, i, i+1)
	copied := 0
	for k, s := range w.Slots {
		rec, ok := h.tiers[w.Tier][s]
		if !ok || rec.hash != w.Hashes[k] {
			break
		}
		if !slices.Equal(rec.digests, h.expect[w.Hashes[k]]) {
			h.t.Fatalf("load %d copy %d: the record of %x in slot %d has the wrong content", w.ID, k, w.Hashes[k], s)
		}
		copy(h.pool.Digests(w.Blocks[k]), rec.digests)
		copied++
	}
	return h.c.LoadDone(w.ID, copied)
}

// hreq is a request as the engine core keeps it.
type hreq struct {
	id       uint64
	tokens   []int32
	hashes   []kvblock.Hash
	hold     kvblock.HoldID
	computed int
}

func (h *harness) newReq(id uint64, tokens []int32) *hreq {
	r := &hreq{id: id, tokens: slices.Clone(tokens)}
	r.hashes = kvblock.AppendHashes(nil, r.tokens, h.bs, kvblock.Extras{})
	return r
}

// admit gives r a request hold with its cached prefix, as the scheduler
// does (leaving at least one token to compute). It returns false, changing
// nothing, if the pool cannot hold the whole request.
func (h *harness) admit(r *hreq) bool {
	maxHit := (len(r.tokens) - 1) / h.bs
	hits := h.pool.Lookup(nil, r.hashes[:min(len(r.hashes), maxHit)])
	need := (len(r.tokens)+h.bs-1)/h.bs - len(hits)
	avail := h.pool.NumAvailable()
	for _, b := range hits {
		if h.pool.Refs(b) == 0 {
			avail--
		}
	}
	if need > avail {
		return false
	}
	r.hold = h.pool.NewHold(kvblock.HoldRequest, r.id)
	h.pool.Share(r.hold, hits)
	if !h.pool.Allocate(r.hold, need) {
		h.t.Fatal("allocation failed after the availability check")
	}
	r.computed = len(hits) * h.bs
	return true
}

// compute computes r up to n tokens, caches its full blocks and calls the
// Computed hook.
func (h *harness) compute(r *hreq, n int) {
	h.computeNoHook(r, n)
	h.c.Computed(r.id, h.pool.Blocks(r.hold), r.hashes, r.computed)
}

func (h *harness) computeNoHook(r *hreq, n int) {
	blocks := h.pool.Blocks(r.hold)
	for q := r.computed; q < n; q++ {
		h.pool.Digests(blocks[q/h.bs])[q%h.bs] = posContent(r.tokens, q)
	}
	r.computed = n
	full := min(n/h.bs, len(r.hashes))
	for i, hash := range r.hashes[:full] {
		if _, ok := h.expect[hash]; !ok {
			d := make([]uint64, h.bs)
			for s := range d {
				d[s] = posContent(r.tokens, i*h.bs+s)
			}
			h.expect[hash] = d
		}
	}
	h.pool.CacheRun(blocks[:full], r.hashes[:full], kvblock.RootHash, r.tokens[:full*h.bs])
}

func (h *harness) finish(r *hreq) {
	if r.hold == 0 {
		h.c.Finished(r.id, nil, nil, 0)
		return
	}
	h.c.Finished(r.id, h.pool.Blocks(r.hold), r.hashes, r.computed)
	h.pool.Release(r.hold)
	r.hold = 0
}

func (h *harness) preempt(r *hreq) {
	h.c.Preempted(r.id, h.pool.Blocks(r.hold), r.hashes, r.computed)
	h.pool.Release(r.hold)
	r.hold, r.computed = 0, 0
}

func tokens(seed, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32((seed*31 + i*7) % 251)
	}
	return out
}

// TestScenarioS20StoreInFlightAtFinish (docs/scenarios.md S20): a request
// finishes while stores of its blocks are in flight. Its own hold is
// dropped at once, the blocks stay held by the stores (neither free nor
// evictable, so no allocation can take them) until each store completes,
// and then become evictable. The pool's accounting holds at every step.
func TestScenarioS20StoreInFlightAtFinish(t *testing.T) {
	for _, tc := range []struct {
		name string
		// computedHook: the blocks were offered after their step (stores
		// in flight before teardown); otherwise teardown itself offers
		// them (the request finished in the step that filled them).
		computedHook bool
		copied       int // of 3
	}{
		{"stores submitted after the step", true, 3},
		{"stores submitted by teardown", false, 3},
		{"store fails part way", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, DefaultConfig(cpuBlocks(16)))
			r := h.newReq(1, tokens(1, 14)) // 3 full blocks + 2 tokens
			if !h.admit(r) {
				t.Fatal("admit")
			}
			blocks := slices.Clone(h.pool.Blocks(r.hold))
			if tc.computedHook {
				h.compute(r, 14)
			} else {
				// Compute without the hook: the teardown is the first offer.
				h.computeNoHook(r, 14)
			}
			h.check("computed")
			h.finish(r)
			h.check("finished")
			w := h.take()
			if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Blocks, blocks[:3]) || !slices.Equal(w.Stores[0].Hashes, r.hashes[:3]) {
				t.Fatalf("store work %+v, want blocks %v", w.Stores, blocks[:3])
			}
			// The request's hold is gone; the full blocks are still held
			// (by the store), the partial one is free.
			for _, b := range blocks[:3] {
				if h.pool.Refs(b) != 1 {
					t.Fatalf("block %d has %d holds during its store, want 1", b, h.pool.Refs(b))
				}
			}
			if h.pool.NumHeld() != 3 || h.pool.NumHolds(kvblock.HoldStore) != 1 || h.pool.NumHolds(kvblock.HoldRequest) != 0 {
				t.Fatalf("held %d, store holds %d, request holds %d", h.pool.NumHeld(), h.pool.NumHolds(kvblock.HoldStore), h.pool.NumHolds(kvblock.HoldRequest))
			}
			// No allocation can take them: only the other 5 are available.
			other := h.pool.NewHold(kvblock.HoldRequest, 99)
			if h.pool.Allocate(other, 6) {
				t.Fatal("allocated a block under a store hold")
			}
			if !h.pool.Allocate(other, 5) {
				t.Fatal("could not allocate the 5 unheld blocks")
			}
			for _, b := range h.pool.Blocks(other) {
				if slices.Contains(blocks[:3], b) {
					t.Fatalf("allocation took block %d, which a store holds", b)
				}
			}
			h.pool.Release(other)
			h.check("allocation tried")
			if ready, present := h.c.Manager(0).Contains(r.hashes[0]); ready || !present {
				t.Fatalf("during the store: ready %v present %v", ready, present)
			}
			h.runStore(0, tc.copied)
			h.check("store done")
			if h.pool.NumHeld() != 0 || h.pool.NumHolds(kvblock.HoldStore) != 0 {
				t.Fatalf("after the store: %d blocks held, %d store holds", h.pool.NumHeld(), h.pool.NumHolds(kvblock.HoldStore))
			}
			for _, b := range blocks[:3] {
				if _, cached := h.pool.Cached(b); !cached || h.pool.Refs(b) != 0 {
					t.Fatalf("block %d is not evictable after its store", b)
				}
			}
			for i, hash := range r.hashes[:3] {
				ready, _ := h.c.Manager(0).Contains(hash)
				if ready != (i < tc.copied) {
					t.Fatalf("block %d ready in the tier = %v after %d copied", i, ready, tc.copied)
				}
			}
			st := h.c.Stats().Tiers[0]
			if st.StoredBlocks != uint64(tc.copied) || st.StoreFailedBlocks != uint64(3-tc.copied) {
				t.Fatalf("stats %+v", st)
			}
			if !h.c.Idle() {
				t.Fatal("coordinator not idle")
			}
		})
	}
}

// TestScenarioS21WatermarkSkipsNoRefusedBlock (docs/scenarios.md S21, at the
// coordinator): the tier refuses blocks — whole batches while it is full
// of blocks being stored, single blocks under the reuse threshold — and
// the request's watermark stops before the first refused block, so each
// is offered again at the next step and stored once the tier accepts it.
func TestScenarioS21WatermarkSkipsNoRefusedBlock(t *testing.T) {
	t.Run("tier full of blocks in flight", func(t *testing.T) {
		h := newHarness(t, 16, DefaultConfig(cpuBlocks(2)))
		a := h.newReq(1, tokens(1, 9))
		b := h.newReq(2, tokens(2, 9))
		h.admit(a)
		h.admit(b)
		h.compute(a, 9) // A's 2 blocks fill the tier, stores in flight
		h.take()
		h.compute(b, 9) // B's 2 blocks: refused, nothing evictable
		h.check("refused")
		if w := h.c.Watermark(2, 0); w != 0 {
			t.Fatalf("B's watermark %d after a refusal, want 0", w)
		}
		if st := h.c.Stats().Tiers[0]; st.RefusedBlocks != 2 {
			t.Fatalf("refused %d, want 2", st.RefusedBlocks)
		}
		if w := h.take(); len(w.Stores) != 0 {
			t.Fatalf("work for refused blocks: %+v", w.Stores)
		}
		h.compute(b, 9) // the next step offers them again: still refused
		if w := h.c.Watermark(2, 0); w != 0 {
			t.Fatalf("B's watermark %d, want 0", w)
		}
		h.runStore(0, 2) // A's stores end: its blocks become evictable
		h.compute(b, 9)  // offered again: accepted, A's blocks evicted
		w := h.take()
		if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Hashes, b.hashes[:2]) {
			t.Fatalf("retry: %+v, want B's 2 blocks", w.Stores)
		}
		if wm := h.c.Watermark(2, 0); wm != 2 {
			t.Fatalf("B's watermark %d, want 2", wm)
		}
		h.check("accepted")
		if st := h.c.Stats().Tiers[0]; st.EvictedBlocks != 2 {
			t.Fatalf("evicted %d, want 2", st.EvictedBlocks)
		}
	})
	t.Run("reuse threshold", func(t *testing.T) {
		cfg := DefaultConfig(cpuBlocks(16))
		cfg.StoreThreshold = 2
		h := newHarness(t, 16, cfg)
		// Lookups of a prompt sharing A's first block only: block 0 seen
		// twice in all, blocks 1 and 2 once.
		other := append(tokens(1, 4), tokens(9, 9)...)
		oh := kvblock.AppendHashes(nil, other, 4, kvblock.Extras{})
		a := h.newReq(1, tokens(1, 13))
		h.c.Lookup(1, a.tokens, a.hashes)
		h.c.Lookup(7, other, oh)
		h.admit(a)
		h.compute(a, 13)
		w := h.take()
		if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Hashes, a.hashes[:1]) {
			t.Fatalf("stores %+v, want A's block 0 only", w.Stores)
		}
		if wm := h.c.Watermark(1, 0); wm != 1 {
			t.Fatalf("watermark %d, want 1 (before refused block 1)", wm)
		}
		// A second lookup of A's prompt: blocks 1 and 2 reach the
		// threshold; the next step offers them again and they are stored.
		h.c.Lookup(1, a.tokens, a.hashes)
		h.compute(a, 13)
		w = h.take()
		if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Hashes, a.hashes[1:3]) {
			t.Fatalf("stores %+v, want A's blocks 1 and 2", w.Stores)
		}
		if wm := h.c.Watermark(1, 0); wm != 3 {
			t.Fatalf("watermark %d, want 3", wm)
		}
		h.check("stored")
	})
	t.Run("refused at teardown, stored by a later request", func(t *testing.T) {
		// The request is gone, but its refused blocks are still cached:
		// a later request with the same prefix offers them again.
		h := newHarness(t, 16, DefaultConfig(cpuBlocks(1)))
		a := h.newReq(1, tokens(1, 5))
		h.admit(a)
		h.compute(a, 5) // block 0 stored (in flight): the tier is full
		b := h.newReq(2, tokens(2, 5))
		h.admit(b)
		h.compute(b, 5) // refused
		h.finish(b)
		h.check("B finished")
		h.storeAll()
		b2 := h.newReq(3, tokens(2, 6))
		h.admit(b2) // prefix hit on B's block
		h.compute(b2, 6)
		w := h.take()
		if len(w.Stores) != 1 || w.Stores[0].Hashes[0] != b.hashes[0] {
			t.Fatalf("stores %+v, want B's block", w.Stores)
		}
		h.check("stored")
	})
	t.Run("request longer than the tier's room", func(t *testing.T) {
		// PrepareStore is all or nothing; the coordinator offers the
		// prefix that fits, so the watermark still makes progress.
		h := newHarness(t, 16, DefaultConfig(cpuBlocks(2)))
		a := h.newReq(1, tokens(1, 21)) // 5 full blocks
		h.admit(a)
		h.compute(a, 21)
		w := h.take()
		if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Hashes, a.hashes[:2]) {
			t.Fatalf("stores %+v, want blocks 0 and 1", w.Stores)
		}
		if wm := h.c.Watermark(1, 0); wm != 2 {
			t.Fatalf("watermark %d, want 2", wm)
		}
		h.compute(a, 21) // nothing evictable: refused, watermark kept
		if wm := h.c.Watermark(1, 0); wm != 2 || h.c.Stats().Tiers[0].RefusedBlocks != 6 {
			t.Fatalf("watermark %d, refused %d; want 2 and 3+3", wm, h.c.Stats().Tiers[0].RefusedBlocks)
		}
		h.storeAll()
		h.compute(a, 21)
		w = h.take()
		if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Hashes, a.hashes[2:4]) {
			t.Fatalf("stores %+v, want blocks 2 and 3", w.Stores)
		}
		if wm := h.c.Watermark(1, 0); wm != 4 {
			t.Fatalf("watermark %d, want 4", wm)
		}
		h.check("end")
	})
	t.Run("in-flight bound", func(t *testing.T) {
		cfg := DefaultConfig(cpuBlocks(64))
		cfg.MaxInflightStoreBlocks = 2
		h := newHarness(t, 16, cfg)
		a := h.newReq(1, tokens(1, 21)) // 5 full blocks
		h.admit(a)
		h.compute(a, 21)
		if wm := h.c.Watermark(1, 0); wm != 2 {
			t.Fatalf("watermark %d at the in-flight bound, want 2", wm)
		}
		h.compute(a, 21)
		if wm := h.c.Watermark(1, 0); wm != 2 || h.c.Stats().InflightStoreBlocks != 2 {
			t.Fatalf("watermark %d with %d in flight, want 2 and 2", wm, h.c.Stats().InflightStoreBlocks)
		}
		h.storeAll()
		h.compute(a, 21)
		h.storeAll()
		h.compute(a, 21)
		if wm := h.c.Watermark(1, 0); wm != 5 {
			t.Fatalf("watermark %d after two rounds, want 5", wm)
		}
		h.check("all stored")
	})
}

// TestLoadBringsPrefixBack: a prefix stored in a tier and evicted from the
// pool is loaded back into new blocks and cached, so the next admission
// hits it; a load hold keeps the primary prefix and the targets until the
// load ends.
func TestLoadBringsPrefixBack(t *testing.T) {
	h := newHarness(t, 8, DefaultConfig(cpuBlocks(16)))
	a := h.newReq(1, tokens(1, 17)) // 4 full blocks + 1
	h.admit(a)
	h.compute(a, 17)
	h.finish(a)
	h.storeAll()
	// Evict A's last three blocks: a filler takes all but one.
	f := h.newReq(2, tokens(5, 7*4))
	if !h.admit(f) {
		t.Fatal("admit filler")
	}
	h.compute(f, 7*4)
	h.finish(f)
	h.storeAll()
	b := h.newReq(3, append(slices.Clone(a.tokens), 1, 2, 3))
	if got := len(h.pool.Lookup(nil, b.hashes)); got != 1 {
		t.Fatalf("primary hit %d blocks, want 1", got)
	}
	// (The lookup names a LoRA adapter, which the loaded blocks' event
	// carries.)
	sql := kvblock.Adapter{Name: "sql", ID: 1, Digest: 9}
	if loading, wait := h.c.LookupWaitAdapter(b.id, b.tokens, b.hashes, sql); !loading || wait {
		t.Fatal("Lookup planned no load")
	}
	w := h.take()
	if len(w.Loads) != 1 || !slices.Equal(w.Loads[0].Hashes, a.hashes[1:4]) || w.Loads[0].Req != 3 {
		t.Fatalf("loads %+v, want A's blocks 1..3", w.Loads)
	}
	if h.pool.NumHolds(kvblock.HoldLoad) != 1 || h.pool.Len(h.c.groups[3].hold) != 4 {
		t.Fatal("load hold does not cover the primary prefix and the targets")
	}
	h.check("loading")
	h.pool.TakeEvents()
	if req, ready := h.runLoad(0); req != 3 || !ready {
		t.Fatalf("LoadDone = %d, %v", req, ready)
	}
	h.check("loaded")
	ev := h.pool.TakeEvents()
	if len(ev) != 1 || ev[0].Kind != kvblock.BlockStored || !slices.Equal(ev[0].Hashes, a.hashes[1:4]) ||
		ev[0].Parent != a.hashes[0] || !slices.Equal(ev[0].Tokens, a.tokens[4:16]) || ev[0].Adapter != sql {
		t.Fatalf("pool events %+v", ev)
	}
	if got := len(h.pool.Lookup(nil, b.hashes)); got != 4 {
		t.Fatalf("after the load the primary hit is %d blocks, want 4", got)
	}
	if h.pool.NumHolds(kvblock.HoldLoad) != 0 || h.c.Loading(3) {
		t.Fatal("load hold or state left")
	}
	st := h.c.Stats()
	if st.Tiers[0].HitBlocks != 3 || st.Tiers[0].LoadedBlocks != 3 || st.LoadedTokens != 12 {
		t.Fatalf("stats %+v", st)
	}
	h.admit(b)
	if b.computed != 16 {
		t.Fatalf("admitted with %d computed tokens, want 16", b.computed)
	}
}

// TestLoadFailures: a missing or corrupt record ends its load at that
// block; only the leading loaded blocks are cached, the bad record is
// removed from the tier, and a request that finished while loading is not
// reported ready.
func TestLoadFailures(t *testing.T) {
	h := newHarness(t, 8, DefaultConfig(cpuBlocks(16)))
	a := h.newReq(1, tokens(1, 17))
	h.admit(a)
	h.compute(a, 17)
	h.finish(a)
	h.storeAll()
	h.pool.ResetCache()
	// Corrupt the record of block 2.
	s, _ := h.c.Manager(0).slotOf(a.hashes[2])
	h.tiers[0][Slot(s)] = record{hash: th(0xbad)}
	b := h.newReq(2, slices.Clone(a.tokens))
	if !h.c.Lookup(b.id, b.tokens, b.hashes) {
		t.Fatal("no load")
	}
	h.take()
	if _, ready := h.runLoad(0); !ready {
		t.Fatal("not ready")
	}
	h.check("partial load")
	if got := len(h.pool.Lookup(nil, b.hashes)); got != 2 {
		t.Fatalf("primary hit %d after a load failing at block 2, want 2", got)
	}
	if _, present := h.c.Manager(0).Contains(a.hashes[2]); present {
		t.Fatal("corrupt record still in the tier")
	}
	st := h.c.Stats().Tiers[0]
	if st.LoadedBlocks != 2 || st.LoadFailedBlocks != 2 || st.InvalidatedBlocks != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The next lookup loads only what is still there, after the primary
	// prefix: nothing (block 2 is gone).
	if h.c.Lookup(3, b.tokens, b.hashes) {
		t.Fatal("loaded past a removed record")
	}

	// A request that finishes while loading: the load completes, its
	// blocks are cached, but nobody is told to schedule it.
	h.pool.ResetCache()
	if !h.c.Lookup(4, b.tokens, b.hashes) {
		t.Fatal("no load")
	}
	h.take()
	h.c.Finished(4, nil, nil, 0)
	h.check("finished while loading")
	if req, ready := h.runLoad(0); req != 4 || ready {
		t.Fatalf("LoadDone = %d, %v; want 4, false", req, ready)
	}
	h.check("done")
	if h.pool.NumHeld() != 0 || !h.c.Idle() {
		t.Fatal("holds left")
	}
}

// TestLookupBounds: a lookup leaves one token to compute, loads no more
// than MaxInflightLoadBlocks and the pool's available blocks allow, and
// panics on a second lookup while loading.
func TestLookupBounds(t *testing.T) {
	cfg := DefaultConfig(cpuBlocks(16))
	cfg.MaxInflightLoadBlocks = 3
	h := newHarness(t, 8, cfg)
	a := h.newReq(1, tokens(1, 24)) // 6 full blocks
	h.admit(a)
	h.compute(a, 24)
	h.finish(a)
	h.storeAll()
	h.pool.ResetCache()
	// Exactly 24 tokens: at most 5 blocks looked up; the bound cuts to 3.
	if !h.c.Lookup(2, a.tokens, a.hashes) {
		t.Fatal("no load")
	}
	w := h.take()
	if len(w.Loads) != 1 || len(w.Loads[0].Blocks) != 3 {
		t.Fatalf("loads %+v, want 3 blocks", w.Loads)
	}
	mustPanic(t, "still loading", func() { h.c.Lookup(2, a.tokens, a.hashes) })
	// At the bound, another request loads nothing.
	if h.c.Lookup(3, a.tokens, a.hashes) {
		t.Fatal("loaded over MaxInflightLoadBlocks")
	}
	h.runLoad(0)
	// Pool exhausted: a hold takes all 8 blocks... minus the 3 loaded
	// (cached, evictable) ones are available; take all.
	hold := h.pool.NewHold(kvblock.HoldRequest, 9)
	h.pool.Allocate(hold, h.pool.NumAvailable())
	if h.c.Lookup(4, a.tokens, a.hashes) {
		t.Fatal("loaded with no available block")
	}
	h.pool.Release(hold)
	h.check("end")
	if h.c.Lookup(5, nil, nil) || h.c.Lookup(6, a.tokens[:4], a.hashes) {
		t.Fatal("loaded for an empty or one-block prompt")
	}
}

// TestLookupWait: while loads in flight leave too little of
// MaxInflightLoadBlocks for a prefix the tiers hold, LookupWait plans
// nothing, changes nothing and says wait; with no load in flight it loads
// what the bound allows; a prefix the tiers do not hold never waits.
func TestLookupWait(t *testing.T) {
	cfg := DefaultConfig(cpuBlocks(16))
	cfg.MaxInflightLoadBlocks = 4
	h := newHarness(t, 12, cfg)
	a := h.newReq(1, tokens(1, 24)) // 6 full blocks
	h.admit(a)
	h.compute(a, 24)
	h.finish(a)
	h.storeAll()
	h.pool.ResetCache()
	short := a.tokens[:13] // 3 blocks to load
	if loading, wait := h.c.LookupWait(2, short, a.hashes); !loading || wait {
		t.Fatalf("first lookup: loading %v wait %v", loading, wait)
	}
	w := h.take()
	if len(w.Loads) != 1 || len(w.Loads[0].Blocks) != 3 {
		t.Fatalf("loads %+v", w.Loads)
	}
	before, avail := h.c.Stats(), h.pool.NumAvailable()
	// 5 blocks to load, 1 of the bound left: wait.
	if loading, wait := h.c.LookupWait(3, a.tokens, a.hashes); loading || !wait {
		t.Fatalf("second lookup: loading %v wait %v", loading, wait)
	}
	if after := h.c.Stats(); after.Lookups != before.Lookups || after.InflightLoadBlocks != 3 || h.pool.NumAvailable() != avail || h.c.Loading(3) {
		t.Fatalf("a waiting lookup changed something: %+v", after)
	}
	// Nothing in the tiers: no wait, whatever is in flight.
	if loading, wait := h.c.LookupWait(4, tokens(9, 24), kvblock.AppendHashes(nil, tokens(9, 24), h.bs, kvblock.Extras{})); loading || wait {
		t.Fatalf("lookup of an unknown prefix: loading %v wait %v", loading, wait)
	}
	if _, ready := h.runLoad(0); !ready {
		t.Fatal("first load not ready")
	}
	// No load in flight (and the pool's cache emptied): request 3 loads
	// the first 4 of its 5 blocks, all the bound allows.
	h.pool.ResetCache()
	if loading, wait := h.c.LookupWait(3, a.tokens, a.hashes); !loading || wait {
		t.Fatalf("lookup after the load: loading %v wait %v", loading, wait)
	}
	if w := h.take(); len(w.Loads) != 1 || len(w.Loads[0].Blocks) != 4 {
		t.Fatalf("loads %+v, want the bound's 4 blocks", w.Loads)
	}
	h.runLoad(0)
	h.check("end")
}

// TestPreemptionOnly: blocks are offered only when their request is
// preempted; the store holds keep them through the release.
func TestPreemptionOnly(t *testing.T) {
	cfg := DefaultConfig(cpuBlocks(16))
	cfg.Policy = PreemptionOnly
	h := newHarness(t, 8, cfg)
	a := h.newReq(1, tokens(1, 13))
	h.admit(a)
	h.compute(a, 13)
	if w := h.take(); len(w.Stores) != 0 {
		t.Fatalf("stored on compute: %+v", w.Stores)
	}
	blocks := slices.Clone(h.pool.Blocks(a.hold))
	h.preempt(a)
	h.check("preempted")
	// The hook takes no hold: the scheduler preempted to get blocks now,
	// and all of them are available to it at once.
	if h.pool.NumAvailable() != h.pool.Capacity() {
		t.Fatalf("%d of %d blocks available right after preemption", h.pool.NumAvailable(), h.pool.Capacity())
	}
	w := h.take()
	if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Blocks, blocks[:3]) {
		t.Fatalf("stores %+v, want the 3 full blocks", w.Stores)
	}
	if h.pool.NumHeld() != 3 {
		t.Fatalf("%d blocks held after preemption, want the 3 being stored", h.pool.NumHeld())
	}
	h.storeAll()
	h.admit(a)
	h.compute(a, 13)
	h.preempt(a) // watermark kept: nothing new to store
	if w := h.take(); len(w.Stores) != 0 {
		t.Fatalf("stored again: %+v", w.Stores)
	}
	h.admit(a)
	h.compute(a, 13)
	h.finish(a)
	if w := h.take(); len(w.Stores) != 0 || h.c.Stats().Requests != 0 {
		t.Fatalf("finish stored %+v or kept state", w.Stores)
	}
	h.check("end")
}

// TestSpillover: blocks of finished requests are stored when they reach
// the head of the eviction order while the pool is short of free blocks;
// blocks that are held again are skipped, evicted ones are dropped.
func TestSpillover(t *testing.T) {
	cfg := DefaultConfig(cpuBlocks(16))
	cfg.Policy = Spillover
	cfg.SpillAheadBlocks = 2
	h := newHarness(t, 8, cfg)
	a := h.newReq(1, tokens(1, 13)) // 3 full blocks + 1
	h.admit(a)
	h.compute(a, 13)
	h.finish(a)
	if w := h.take(); len(w.Stores) != 0 {
		t.Fatalf("spilled with %d free blocks: %+v", h.pool.NumFree(), w.Stores)
	}
	// Fill the free blocks: now A's blocks are next to be evicted, tail
	// first (block 2, then 1).
	f := h.pool.NewHold(kvblock.HoldRequest, 9)
	h.pool.Allocate(f, h.pool.NumFree())
	w := h.take()
	if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Hashes, []kvblock.Hash{a.hashes[2], a.hashes[1]}) {
		t.Fatalf("spill %+v, want A's blocks 2 and 1", w.Stores)
	}
	h.check("spilling")
	h.runStore(0, 2)
	w = h.take()
	if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Hashes, a.hashes[:1]) {
		t.Fatalf("next spill %+v, want A's block 0", w.Stores)
	}
	h.storeAll()
	if h.c.Stats().SpillCandidates != 0 {
		t.Fatalf("%d candidates left", h.c.Stats().SpillCandidates)
	}
	h.pool.Release(f)
	h.check("end")

	// A block held again is skipped; an evicted one is dropped.
	b := h.newReq(2, tokens(2, 9))
	h.admit(b)
	h.compute(b, 9)
	h.finish(b)
	c := h.newReq(3, tokens(2, 6)) // shares B's block 0
	h.admit(c)
	f = h.pool.NewHold(kvblock.HoldRequest, 9)
	h.pool.Allocate(f, h.pool.NumFree())
	w = h.take()
	if len(w.Stores) != 1 || !slices.Equal(w.Stores[0].Hashes, b.hashes[1:2]) {
		t.Fatalf("spill %+v, want B's block 1 only (block 0 is held by C)", w.Stores)
	}
	h.storeAll()
	h.pool.Release(f)
	h.check("end 2")
}
