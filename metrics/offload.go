package metrics

import (
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/offload"
)

type tierStats = offload.TierStats

// offloadMetrics are kvlease's offload metrics, one series per configured
// tier. The medium label is the tier's medium as the KV events name it
// (vLLM's LoadStoreSpec.medium(): "CPU"; kvlease adds "DISK"), so a
// dashboard can join these counters with the BlockStored/BlockRemoved
// events of the same tier. The policy label is the engine's store policy
// (--offload-policy, or a custom policy's name), so engines running
// different policies can be compared. An engine without offload exports no series
// (its metric families are described, with no samples).
var offloadMetrics = []snapshotMetric{
	{
		name: "kvlease_offload_stored_blocks_total", kind: counter,
		help:   "KV blocks copied from the primary pool to an offload tier, by medium (CPU, DISK) and store policy.",
		labels: []string{"medium", "policy"},
		read:   offloadTiers(func(t *tierStats) uint64 { return t.StoredBlocks }),
	},
	{
		name: "kvlease_offload_loaded_blocks_total", kind: counter,
		help:   "KV blocks loaded back from an offload tier into the primary pool instead of being recomputed, by medium.",
		labels: []string{"medium", "policy"},
		read:   offloadTiers(func(t *tierStats) uint64 { return t.LoadedBlocks }),
	},
	{
		name: "kvlease_offload_evicted_blocks_total", kind: counter,
		help:   "KV blocks evicted from an offload tier to make room, by medium.",
		labels: []string{"medium", "policy"},
		read:   offloadTiers(func(t *tierStats) uint64 { return t.EvictedBlocks }),
	},
	{
		name: "kvlease_offload_refused_blocks_total", kind: counter,
		help:   "KV blocks offered to an offload tier and refused (reuse filter, tier full of blocks in flight, in-flight bound); offered again later, by medium and store policy.",
		labels: []string{"medium", "policy"},
		read:   offloadTiers(func(t *tierStats) uint64 { return t.RefusedBlocks }),
	},
	{
		name: "kvlease_offload_store_failed_blocks_total", kind: counter,
		help:   "KV blocks whose copy to an offload tier failed, by medium, store policy and outcome: retried after a back-off, or given up (exhausted: after the last retry; evicted: no longer in the primary pool at the retry; refused: the tier had no room); a given-up block is offered again at its request's next trigger.",
		labels: []string{"medium", "policy", "outcome"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			if s.Offload == nil {
				return
			}
			for i := range s.Offload.Tiers {
				t := &s.Offload.Tiers[i]
				for o, name := range offload.StoreOutcomes {
					emit(float64(t.StoreFailures[o]), t.Medium, s.Offload.Policy, name)
				}
			}
		},
	},
	{
		name: "kvlease_offload_hits_total", kind: counter,
		help:   "KV blocks a prefix lookup found in an offload tier (missing from the primary pool) and planned to load, by medium.",
		labels: []string{"medium", "policy"},
		read:   offloadTiers(func(t *tierStats) uint64 { return t.HitBlocks }),
	},
	{
		name: "kvlease_lease_spilled_blocks_total", kind: counter,
		help:   "Leased KV blocks a prefill engine moved to an offload tier under --lease-spill: their tier copies pinned for the lease, their primary copies let go.",
		labels: []string{"policy"},
		read:   leaseSpill(func(s *engine.NodeStats) float64 { return float64(s.Producer.SpilledBlocks) }),
	},
	{
		name: "kvlease_lease_spilled_blocks", kind: gauge,
		help:   "Leased KV blocks in an offload tier now (pinned there until their lease ends or a read brings them back).",
		labels: []string{"policy"},
		read:   leaseSpill(func(s *engine.NodeStats) float64 { return float64(s.Offload.LeasePinnedBlocks) }),
	},
	{
		name: "kvlease_lease_restored_blocks_total", kind: counter,
		help:   "Spilled lease blocks brought back into the primary pool for a read, by source: pool (still cached there, shared) or tier (loaded back).",
		labels: []string{"policy", "source"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			if s.Offload != nil && s.Producer != nil {
				emit(float64(s.Offload.LeaseRestoreHitBlocks), s.Offload.LeaseSpill, "pool")
				emit(float64(s.Offload.LeaseRestoreLoadedBlocks), s.Offload.LeaseSpill, "tier")
			}
		},
	},
	{
		name: "kvlease_lease_restore_failures_total", kind: counter,
		help:   "Restores of spilled lease blocks whose load from the tier failed (their reads end with READ_END internal; the decoder retries, then recomputes).",
		labels: []string{"policy"},
		read:   leaseSpill(func(s *engine.NodeStats) float64 { return float64(s.Offload.LeaseRestoreFailures) }),
	},
}

// leaseSpill reads one lease spill figure of a prefill engine with
// offload (none without), labelled with its --lease-spill policy.
func leaseSpill(get func(*engine.NodeStats) float64) func(s *engine.NodeStats, emit emitFunc) {
	return func(s *engine.NodeStats, emit emitFunc) {
		if s.Offload != nil && s.Producer != nil {
			emit(get(s), s.Offload.LeaseSpill)
		}
	}
}

// offloadTiers reads one counter of every tier.
func offloadTiers(get func(*tierStats) uint64) func(s *engine.NodeStats, emit emitFunc) {
	return func(s *engine.NodeStats, emit emitFunc) {
		if s.Offload == nil {
			return
		}
		for i := range s.Offload.Tiers {
			t := &s.Offload.Tiers[i]
			emit(float64(get(t)), t.Medium, s.Offload.Policy)
		}
	}
}
