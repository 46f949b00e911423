package offload

import (
	"testing"
)

// TestStoreRetries: the blocks of a store that fails part way are retried
// after 1, 2, 4 steps (holding nothing meanwhile), and succeed on a retry;
// after MaxStoreRetries failed retries they are given up and the request's
// watermark drops back, so its next trigger offers them again (S21: the
// watermark never claims a block the tier does not hold). Outcomes are
// counted by reason.
func TestStoreRetries(t *testing.T) {
	t.Run("retry succeeds", func(t *testing.T) {
		h := newHarness(t, 8, DefaultConfig(cpuBlocks(16)))
		a := h.newReq(1, tokens(1, 17))
		h.admit(a)
		h.compute(a, 17)
		if w := h.take(); len(w.Stores) != 1 || len(w.Stores[0].Hashes) != 4 {
			t.Fatalf("stores %+v", w.Stores)
		}
		h.runStore(0, 1) // the copy fails after one block
		h.check("failed")
		if st := h.c.Stats().Tiers[0]; st.StoreFailures[StoreRetried] != 3 || st.StoredBlocks != 1 {
			t.Fatalf("stats %+v", st)
		}
		// The failed blocks are held by the request only; the retry is due
		// at the next step.
		w := h.take()
		if len(w.Stores) != 1 || len(w.Stores[0].Hashes) != 3 || w.Stores[0].Hashes[0] != a.hashes[1] {
			t.Fatalf("retry stores %+v", w.Stores)
		}
		h.runStore(0, 3)
		h.check("retried")
		if h.c.Watermark(1, 0) != 4 || h.c.Manager(0).Len() != 4 {
			t.Fatalf("watermark %d, tier holds %d", h.c.Watermark(1, 0), h.c.Manager(0).Len())
		}
		h.finish(a)
	})
	t.Run("given up", func(t *testing.T) {
		cfg := DefaultConfig(cpuBlocks(16))
		cfg.MaxStoreRetries = 2
		h := newHarness(t, 8, cfg)
		a := h.newReq(1, tokens(1, 17))
		h.admit(a)
		h.compute(a, 17)
		h.take()
		h.runStore(0, 0)
		steps := 0
		for retries := 0; retries < 2; {
			steps++
			if steps > 10 {
				t.Fatal("no retry within 10 steps")
			}
			if w := h.take(); len(w.Stores) == 1 {
				retries++
				h.runStore(0, 0)
				h.check("retry failed")
			}
		}
		if steps != 1+2 {
			t.Fatalf("two retries took %d steps, want 1 + 2 (back-off 1, 2)", steps)
		}
		st := h.c.Stats().Tiers[0]
		if st.StoreFailures[StoreRetried] != 8 || st.StoreFailures[StoreExhausted] != 4 || h.c.Watermark(1, 0) != 0 {
			t.Fatalf("stats %+v, watermark %d", st, h.c.Watermark(1, 0))
		}
		// The next trigger offers the blocks again.
		h.compute(a, 17)
		if w := h.take(); len(w.Stores) != 1 || len(w.Stores[0].Hashes) != 4 {
			t.Fatalf("blocks not offered again after giving up: %+v", w.Stores)
		}
		h.runStore(0, 4)
		h.check("stored")
		h.finish(a)
	})
	t.Run("evicted", func(t *testing.T) {
		h := newHarness(t, 8, DefaultConfig(cpuBlocks(16)))
		a := h.newReq(1, tokens(1, 17))
		h.admit(a)
		h.compute(a, 17)
		h.take()
		h.runStore(0, 0)
		h.finish(a)
		evictAll(h, 2) // a's blocks are evicted before the retry
		if w := h.take(); len(w.Stores) != 0 {
			t.Fatalf("a retry of evicted blocks: %+v", w.Stores)
		}
		if st := h.c.Stats().Tiers[0]; st.StoreFailures[StoreEvicted] != 4 {
			t.Fatalf("stats %+v", st)
		}
		h.check("end")
	})
}
