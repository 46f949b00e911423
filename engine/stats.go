package engine

import (
	"maps"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/xfer"
)

// PoolStats are the block pool's current figures.
type PoolStats struct {
	Capacity        int
	BlockSizeTokens int
	Free            int
	Evictable       int
	Held            int
	// Usage is the fraction of blocks held (vLLM's kv_cache_usage_perc).
	Usage float64
}

// NodeStats is a snapshot of a running engine: the core's counters (its
// maps are copies, owned by the receiver), the pool's figures and the
// loop's state.
type NodeStats struct {
	Stats
	Pool     PoolStats
	Draining bool
	// Streams is the number of requests whose stream is still open (set
	// by the node).
	Streams int
	// Now is the engine's instant when the snapshot was taken.
	Now clock.Instant
	// Producer and Consumer are the transfer counters (copies, owned by
	// the receiver), nil when the core has no such side.
	Producer *xfer.ProducerStats
	Consumer *xfer.ConsumerStats
	// ReadStreams is the number of reads P is streaming.
	ReadStreams int
	// Offload are the offload counters (a copy, owned by the receiver),
	// nil without offload: per tier (Tiers[i].Medium "CPU" or "DISK"),
	// StoredBlocks, LoadedBlocks, EvictedBlocks and HitBlocks for
	// kvlease_offload_{stored,loaded,evicted}_blocks_total{medium} and
	// kvlease_offload_hits_total{medium}.
	Offload *offload.Stats
}

// Stats returns a snapshot of the engine at now (Streams left zero).
func (l *Loop) Stats(now clock.Instant) NodeStats {
	c := l.core
	st := c.Stats()
	st.Finished = maps.Clone(st.Finished)
	st.Rejected = maps.Clone(st.Rejected)
	p := c.pool
	ns := NodeStats{
		Stats: st,
		Pool: PoolStats{
			Capacity:        p.Capacity(),
			BlockSizeTokens: p.BlockSizeTokens(),
			Free:            p.NumFree(),
			Evictable:       p.NumEvictable(),
			Held:            p.NumHeld(),
			Usage:           p.Usage(),
		},
		Draining:    c.Draining(),
		Now:         now,
		ReadStreams: len(l.reads),
	}
	if c.producer != nil {
		ps := c.producer.Stats()
		ps.Released = maps.Clone(ps.Released)
		ns.Producer = &ps
	}
	if c.consumer != nil {
		cs := c.consumer.Stats()
		cs.Fallbacks = maps.Clone(cs.Fallbacks)
		cs.Failures = maps.Clone(cs.Failures)
		cs.ReleasesSent = maps.Clone(cs.ReleasesSent)
		ns.Consumer = &cs
	}
	if c.offload != nil {
		os := c.offload.Stats() // its Tiers slice is a copy
		ns.Offload = &os
	}
	return ns
}
