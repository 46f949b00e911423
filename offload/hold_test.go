package offload

import (
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

// heldSetup stores request A (4 full blocks), evicts its last three with a
// filler, and loads them back for request B; it returns the harness and B
// with its loads done (held, unless cfg says otherwise).
func heldSetup(t *testing.T, cfg Config) (*harness, *hreq) {
	t.Helper()
	h := newHarness(t, 8, cfg)
	a := h.newReq(1, tokens(1, 17))
	h.admit(a)
	h.compute(a, 17)
	h.finish(a)
	h.storeAll()
	f := h.newReq(2, tokens(5, 7*4))
	if !h.admit(f) {
		t.Fatal("admit filler")
	}
	h.compute(f, 7*4)
	h.finish(f)
	h.storeAll()
	b := h.newReq(3, append(slices.Clone(a.tokens), 1, 2, 3))
	if !h.c.Lookup(b.id, b.tokens, b.hashes) {
		t.Fatal("Lookup planned no load")
	}
	h.take()
	if req, ready := h.runLoad(0); req != 3 || !ready {
		t.Fatalf("LoadDone = %d, %v", req, ready)
	}
	h.check("loaded")
	return h, b
}

// evictAll fills the pool with a new request's blocks, evicting every
// cached block nobody holds, and finishes it.
func evictAll(h *harness, id uint64) {
	h.t.Helper()
	f := h.newReq(id, tokens(int(100+id), h.pool.NumAvailable()*4))
	if !h.admit(f) {
		h.t.Fatal("admit the evicting request")
	}
	h.finish(f)
}

// TestHeldLoadPassesToRequest: a loaded prefix stays held until its
// request's admission, so a request that fills the pool in between evicts
// none of it; Admitted releases the hold (the request's own hold has the
// blocks) and no loaded block was evicted.
func TestHeldLoadPassesToRequest(t *testing.T) {
	h, b := heldSetup(t, Config{Tiers: cpuBlocks(16), Policy: StoreOnCompute, LoadHoldSteps: 8, MaxHeldLoadBlocks: 8})
	if h.c.NumHeld() != 1 || h.pool.NumHolds(kvblock.HoldLoad) != 1 || h.c.Stats().HeldLoadBlocks != 4 {
		t.Fatalf("held %d, load holds %d, stats %+v", h.c.NumHeld(), h.pool.NumHolds(kvblock.HoldLoad), h.c.Stats())
	}
	evictAll(h, 4)
	if got := len(h.pool.Lookup(nil, b.hashes)); got != 4 {
		t.Fatalf("after a filler the primary hit is %d blocks, want the 4 held", got)
	}
	if !h.admit(b) {
		t.Fatal("admit B")
	}
	h.c.Admitted(b.id)
	h.check("admitted")
	st := h.c.Stats()
	if h.c.NumHeld() != 0 || h.pool.NumHolds(kvblock.HoldLoad) != 0 || st.LoadedEvictedBlocks != 0 || st.HeldLoadBlocks != 0 {
		t.Fatalf("after admission: held %d, stats %+v", h.c.NumHeld(), st)
	}
	if b.computed != 16 {
		t.Fatalf("B admitted with %d tokens cached, want 16", b.computed)
	}
	h.finish(b)
	if h.pool.NumHeld() != 0 {
		t.Fatal("blocks left held")
	}
}

// TestHeldLoadDrops: a held load drops after LoadHoldSteps steps, by the
// valve, at the MaxHeldLoadBlocks bound, and when its request finishes;
// without holds (LoadHoldSteps < 0) nothing is held. A dropped prefix that
// is evicted before its request's admission counts as loaded-then-evicted.
func TestHeldLoadDrops(t *testing.T) {
	t.Run("steps", func(t *testing.T) {
		h, b := heldSetup(t, Config{Tiers: cpuBlocks(16), Policy: StoreOnCompute, LoadHoldSteps: 3, MaxHeldLoadBlocks: 8})
		for range 2 {
			h.take()
		}
		if h.c.NumHeld() != 1 {
			t.Fatal("dropped before LoadHoldSteps steps")
		}
		h.take()
		if h.c.NumHeld() != 0 || h.c.Stats().LoadHoldsExpired != 1 || h.pool.NumHolds(kvblock.HoldLoad) != 0 {
			t.Fatalf("after 3 steps: held %d, stats %+v", h.c.NumHeld(), h.c.Stats())
		}
		h.check("expired")
		evictAll(h, 4)
		h.admit(b)
		h.c.Admitted(b.id)
		if got := h.c.Stats().LoadedEvictedBlocks; got != 4 {
			t.Fatalf("loaded-then-evicted %d, want 4", got)
		}
		h.finish(b)
		h.check("end")
	})
	t.Run("valve", func(t *testing.T) {
		h, b := heldSetup(t, Config{Tiers: cpuBlocks(16), Policy: StoreOnCompute, LoadHoldSteps: 8, MaxHeldLoadBlocks: 8})
		if n := h.c.DropHeld(); n != 1 || h.c.NumHeld() != 0 || h.c.Stats().LoadHoldsValved != 1 {
			t.Fatalf("DropHeld = %d, stats %+v", n, h.c.Stats())
		}
		h.check("valved")
		h.admit(b)
		h.c.Admitted(b.id)
		if got := h.c.Stats().LoadedEvictedBlocks; got != 0 {
			t.Fatalf("loaded-then-evicted %d with nothing evicted", got)
		}
		h.finish(b)
	})
	t.Run("bound", func(t *testing.T) {
		h, _ := heldSetup(t, Config{Tiers: cpuBlocks(16), Policy: StoreOnCompute, LoadHoldSteps: 8, MaxHeldLoadBlocks: 3})
		if h.c.NumHeld() != 0 || h.c.Stats().LoadHoldsBounded != 1 || h.pool.NumHolds(kvblock.HoldLoad) != 0 {
			t.Fatalf("a 4-block prefix held under a bound of 3: stats %+v", h.c.Stats())
		}
		h.check("bounded")
	})
	t.Run("finished", func(t *testing.T) {
		h, b := heldSetup(t, Config{Tiers: cpuBlocks(16), Policy: StoreOnCompute, LoadHoldSteps: 8, MaxHeldLoadBlocks: 8})
		h.finish(b)
		if h.c.NumHeld() != 0 || h.pool.NumHeld() != 0 {
			t.Fatal("a finished request's held load is left")
		}
		h.check("finished")
	})
	t.Run("off", func(t *testing.T) {
		h, _ := heldSetup(t, Config{Tiers: cpuBlocks(16), Policy: StoreOnCompute, LoadHoldSteps: -1})
		if h.c.NumHeld() != 0 || h.pool.NumHolds(kvblock.HoldLoad) != 0 {
			t.Fatal("held without holds")
		}
	})
}
