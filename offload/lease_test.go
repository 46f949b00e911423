package offload

import (
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

// leasedReq computes a request of n tokens and leases its blocks under a
// lease hold of owner lease, as a prefill engine's teardown does; the
// request hold goes.
func (h *harness) leasedReq(id uint64, lease uint64, n int) (kvblock.HoldID, *hreq) {
	h.t.Helper()
	r := h.newReq(id, tokens(int(id), n))
	if !h.admit(r) {
		h.t.Fatal("no room for the request")
	}
	h.compute(r, n)
	hold := h.pool.NewHold(kvblock.HoldLease, lease)
	h.pool.Share(hold, h.pool.Blocks(r.hold))
	h.finish(r)
	return hold, r
}

// TestLeaseSpillPinRestoreUnpin: a lease's blocks are stored under a store
// hold and pinned for the lease when the store ends, so the tier never
// evicts them while other stores need room; restored for a read after the
// pool reused them, with the content of their hashes; unpinned, they are
// ordinary tier blocks again. A lease whose blocks are all in the tier
// already is pinned at once; MaxLeaseSpillBlocks bounds what leases take.
func TestLeaseSpillPinRestoreUnpin(t *testing.T) {
	h := newHarness(t, 16, Config{Tiers: cpuBlocks(6), Policy: PreemptionOnly, LeaseSpill: LeaseSpillPressure, MaxLeaseSpillBlocks: 5})
	lease, r := h.leasedReq(1, 77, 12) // 3 full blocks
	blocks, hashes := slices.Clone(h.pool.Blocks(lease)), r.hashes[:3]
	if out := h.c.SpillLease(77, blocks, hashes); out != SpillStoring {
		t.Fatalf("SpillLease: %v, want a store", out)
	}
	h.check("spill planned")
	h.take()
	if len(h.stores) != 1 || !h.c.Spilling(77) || h.c.SpillingBlocks() != 3 {
		t.Fatalf("stores %d, spilling %v %d", len(h.stores), h.c.Spilling(77), h.c.SpillingBlocks())
	}
	for _, b := range blocks {
		if h.pool.Refs(b) != 2 {
			t.Fatalf("block %d has %d holds while its spill store runs, want the lease's and the store's", b, h.pool.Refs(b))
		}
	}
	w := h.stores[0]
	h.stores = h.stores[:0]
	for k := range w.Blocks {
		h.tiers[w.Tier][w.Slots[k]] = record{w.Hashes[k], slices.Clone(h.pool.Digests(w.Blocks[k]))}
	}
	if sp := h.c.StoreDone(w.ID, len(w.Blocks)); !sp.Spill || !sp.OK || sp.Lease != 77 {
		t.Fatalf("StoreDone: %+v", sp)
	}
	if h.c.LeasePinned(77) != 3 {
		t.Fatalf("%d blocks pinned for the lease, want 3", h.c.LeasePinned(77))
	}
	h.pool.Release(lease) // the engine drops the primary copies
	h.check("spilled")

	// Other requests' stores fill the tier: only unpinned blocks go.
	for i := range 3 {
		o := h.newReq(uint64(10+i), tokens(10+i, 8))
		if !h.admit(o) {
			t.Fatal("no room")
		}
		h.compute(o, 8)
		h.c.offerRange(o.id, h.pool.Blocks(o.hold), o.hashes, 2, false)
		h.storeAll()
		h.finish(o)
		h.check("other stores")
	}
	if ev := h.c.Stats().Tiers[0].EvictedBlocks; ev == 0 {
		t.Fatal("the other stores evicted nothing: the tier was never short")
	}
	for _, hs := range hashes {
		if ready, present := h.c.Manager(0).Contains(hs); !ready || !present {
			t.Fatalf("the tier evicted pinned lease block %x", hs)
		}
	}
	// Bound: 3 pinned + 3 more > 5.
	lease2, r2 := h.leasedReq(2, 78, 12)
	if out := h.c.SpillLease(78, slices.Clone(h.pool.Blocks(lease2)), r2.hashes[:3]); out != SpillRefused {
		t.Fatalf("SpillLease over MaxLeaseSpillBlocks: %v", out)
	}
	h.pool.Release(lease2)

	// The pool reuses every free or evictable block: the lease's too.
	fill := h.pool.NewHold(kvblock.HoldRequest, 99)
	h.pool.Allocate(fill, h.pool.NumAvailable())
	h.pool.Release(fill)
	ready, ok := h.c.RestoreLease(77)
	if ready || !ok {
		t.Fatalf("RestoreLease: ready %v ok %v, want a load", ready, ok)
	}
	h.take()
	if len(h.loads) != 1 || len(h.loads[0].Blocks) != 3 || !h.c.IsRestore(h.loads[0].ID) {
		t.Fatalf("loads %+v", h.loads)
	}
	lw := h.loads[0]
	h.loads = h.loads[:0]
	for k, s := range lw.Slots {
		copy(h.pool.Digests(lw.Blocks[k]), h.tiers[lw.Tier][s].digests)
	}
	if got, ok := h.c.RestoreDone(lw.ID, len(lw.Blocks)); got != 77 || !ok {
		t.Fatalf("RestoreDone: %d %v", got, ok)
	}
	for i, b := range h.c.RestoredBlocks(77) {
		if !slices.Equal(h.pool.Digests(b), h.expect[hashes[i]]) {
			t.Fatalf("restored block %d does not hold the content of %x", i, hashes[i])
		}
	}
	h.check("restored")
	held := h.pool.NewHold(kvblock.HoldLease, 77) // the lease takes them back
	h.pool.Share(held, h.c.RestoredBlocks(77))
	h.c.EndRestore(77)
	h.c.UnpinLease(77)
	h.check("unpinned")
	if st := h.c.Stats(); st.LeasePinnedBlocks != 0 || st.LeaseRestoreLoadedBlocks != 3 || st.LeaseSpilledBlocks != 3 {
		t.Fatalf("stats %+v", st)
	}

	// Spilled again: every block is in the tier already, pinned at once.
	if out := h.c.SpillLease(77, slices.Clone(h.pool.Blocks(held)), hashes); out != SpillPinned {
		t.Fatalf("SpillLease of blocks the tier holds: %v", out)
	}
	h.pool.Release(held)
	h.c.UnpinLease(77) // the lease ends
	h.check("ended")
	if !h.c.Idle() || h.pool.NumHeld() != 0 {
		t.Fatalf("idle %v, held %d", h.c.Idle(), h.pool.NumHeld())
	}
}

// TestLeaseSpillStoreFails: a spill store that fails part way pins nothing
// (the lease keeps its primary copies) and is not retried.
func TestLeaseSpillStoreFails(t *testing.T) {
	h := newHarness(t, 16, Config{Tiers: cpuBlocks(8), Policy: PreemptionOnly, LeaseSpill: LeaseSpillAlways})
	lease, r := h.leasedReq(1, 5, 12)
	if out := h.c.SpillLease(5, slices.Clone(h.pool.Blocks(lease)), r.hashes[:3]); out != SpillStoring {
		t.Fatal(out)
	}
	h.take()
	w := h.stores[0]
	h.stores = h.stores[:0]
	if sp := h.c.StoreDone(w.ID, 1); !sp.Spill || sp.OK {
		t.Fatalf("StoreDone of a failed spill: %+v", sp)
	}
	h.check("failed spill")
	if h.c.LeasePinned(5) != 0 || h.c.Spilling(5) {
		t.Fatal("a failed spill pinned blocks")
	}
	h.take()
	if len(h.stores) != 0 {
		t.Fatalf("a failed spill was retried: %+v", h.stores)
	}
	h.pool.Release(lease)
	h.check("end")
}
