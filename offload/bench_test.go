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
					hashes[i] = kvblock.Hash(next * 0x9e3779b97f4a7c15)
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
