package offload

import (
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

// BenchmarkManagerStoreLoad runs the manager's whole cycle on 64-block
// batches of new hashes in a full tier: PrepareStore (evicting 64 blocks),
// CompleteStore, Lookup, PrepareLoad, CompleteLoad, Touch. One op is one
// batch; ns/block divides by 64.
func BenchmarkManagerStoreLoad(b *testing.B) {
	for _, ev := range []string{EvictionLRU, EvictionARC} {
		b.Run(ev, func(b *testing.B) {
			const batch = 64
			m := NewManager(ManagerConfig{Medium: MediumCPU, NumBlocks: 16384, Eviction: ev})
			hashes := make([]kvblock.Hash, batch)
			next := uint64(1)
			fill := func() {
				for i := range hashes {
					hashes[i] = th(uint64(next * 0x9e3779b97f4a7c15))
					next++
				}
			}
			for m.NumFree() > 0 { // start full, so every batch evicts
				fill()
				plan, _ := m.PrepareStore(hashes)
				m.CompleteStore(plan.Hashes, true)
				m.TakeEvents()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				fill()
				plan, ok := m.PrepareStore(hashes)
				if !ok || len(plan.Evicted) != batch {
					b.Fatalf("PrepareStore: %v, %d evicted", ok, len(plan.Evicted))
				}
				m.CompleteStore(plan.Hashes, true)
				if hits, _ := m.Lookup(hashes); hits != batch {
					b.Fatalf("%d hits", hits)
				}
				m.PrepareLoad(hashes)
				m.CompleteLoad(hashes)
				m.Touch(hashes)
				m.TakeEvents()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/block")
		})
	}
}

// BenchmarkCoordinator measures the engine-facing hot paths on a 4096-block
// pool: Computed for a running request whose blocks are all stored (the
// per-step cost of store-on-compute), and bringing a stored 64-block prompt
// back after the pool dropped it (ResetCache, Lookup, Take, LoadDone).
func BenchmarkCoordinator(b *testing.B) {
	const blocks, bs = 64, 16
	setup := func() (*kvblock.Pool, *Coordinator, []kvblock.BlockID, []kvblock.Hash, []int32) {
		pool := kvblock.New(kvblock.Config{NumBlocks: 4096, BlockSizeTokens: bs})
		cfg := DefaultConfig([]TierConfig{{Medium: MediumCPU, Blocks: 1 << 16}})
		cfg.MaxInflightStoreBlocks, cfg.MaxInflightLoadBlocks = 4096, 4096
		c := NewCoordinator(cfg, pool)
		toks := make([]int32, blocks*bs+1)
		for i := range toks {
			toks[i] = int32(i % 251)
		}
		hashes := kvblock.AppendHashes(nil, toks, bs, kvblock.Extras{})
		hold := pool.NewHold(kvblock.HoldRequest, 1)
		pool.Allocate(hold, blocks+1)
		bl := append([]kvblock.BlockID(nil), pool.Blocks(hold)...)
		pool.CacheRun(bl[:blocks], hashes, kvblock.RootHash, nil)
		return pool, c, bl, hashes, toks
	}
	b.Run("Computed/steady", func(b *testing.B) {
		_, c, bl, hashes, toks := setup()
		c.Computed(1, bl, hashes, len(toks))
		for _, w := range c.Take().Stores {
			c.StoreDone(w.ID, len(w.Blocks))
		}
		b.ResetTimer()
		for b.Loop() {
			c.Computed(1, bl, hashes, len(toks))
		}
	})
	b.Run("LookupLoad/64-blocks", func(b *testing.B) {
		pool, c, bl, hashes, toks := setup()
		c.Finished(1, bl, hashes, len(toks))
		pool.Release(pool.LiveHolds(nil)[0].ID)
		for _, w := range c.Take().Stores {
			c.StoreDone(w.ID, len(w.Blocks))
		}
		req := uint64(2)
		b.ResetTimer()
		for b.Loop() {
			pool.ResetCache()
			if !c.Lookup(req, toks, hashes) {
				b.Fatal("no load")
			}
			for _, w := range c.Take().Loads {
				c.LoadDone(w.ID, len(w.Blocks))
			}
			req++
		}
	})
}
