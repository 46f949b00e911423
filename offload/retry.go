package offload

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
)

// storeRetry is the failed part of a store, waiting for its next attempt.
// It holds nothing: when it is due, the blocks still cached with their
// hashes are offered again, and those evicted meanwhile are given up.
type storeRetry struct {
	due     uint64 // Take count
	tier    int
	attempt int // attempts made
	origin
	blocks []kvblock.BlockID
	hashes []kvblock.Hash
}

// origin is the request offer a store came from, so that a store given up
// lowers the request's watermark and the blocks are offered again at its
// next trigger (S21). hasReq is false for spillover's offers.
type origin struct {
	req    uint64
	hasReq bool
	from   int // the offer's first block index in the request
}

// Outcomes of the blocks of failed stores (TierStats.StoreFailures).
const (
	// StoreRetried: queued for another attempt after a back-off.
	StoreRetried = iota
	// StoreExhausted: given up after MaxStoreRetries attempts.
	StoreExhausted
	// StoreEvicted: given up at the retry, the block being no longer
	// cached in the primary pool.
	StoreEvicted
	// StoreRefused: given up at the retry, the tier having no room (or
	// the in-flight bound being reached).
	StoreRefused
	numStoreOutcomes
)

// StoreOutcomes names the outcomes of failed store blocks, by index
// (kvlease_offload_store_failed_blocks_total{outcome}).
var StoreOutcomes = [numStoreOutcomes]string{"retried", "exhausted", "evicted", "refused"}

// storeFailed handles the blocks of store j from copied on, which were not
// written: they are retried after a back-off of 2^attempts steps, up to
// MaxStoreRetries attempts, or given up (the request's watermark lowered).
// blocks are the store's blocks; the hold is still live.
func (c *Coordinator) storeFailed(j *storeJob, blocks []kvblock.BlockID, copied int) {
	n := len(j.hashes) - copied
	s := &c.stats.Tiers[j.tier]
	if j.attempt > c.cfg.MaxStoreRetries || len(c.retries) >= c.cfg.MaxRequests {
		s.StoreFailures[StoreExhausted] += uint64(n)
		c.giveUp(j.tier, j.origin)
		return
	}
	s.StoreFailures[StoreRetried] += uint64(n)
	c.retries = append(c.retries, storeRetry{
		due: c.takes + 1<<(j.attempt-1), tier: j.tier, attempt: j.attempt, origin: j.origin,
		blocks: append([]kvblock.BlockID(nil), blocks[copied:]...), hashes: append([]kvblock.Hash(nil), j.hashes[copied:]...),
	})
}

// giveUp lowers the watermark of the request a store came from to the
// start of its offer, so its next trigger offers the blocks again (those
// present in the tier are skipped by PrepareStore).
func (c *Coordinator) giveUp(tier int, o origin) {
	if !o.hasReq {
		return
	}
	if m, ok := c.marks.m[o.req]; ok && m[tier] > o.from {
		m[tier] = o.from
	}
}

// runRetries makes the retries that are due, in the order they failed.
func (c *Coordinator) runRetries() {
	keep := c.retries[:0]
	for _, r := range c.retries {
		if r.due > c.takes {
			keep = append(keep, r)
			continue
		}
		c.retry(r)
	}
	clear(c.retries[len(keep):])
	c.retries = keep
}

func (c *Coordinator) retry(r storeRetry) {
	s := &c.stats.Tiers[r.tier]
	k := 0 // the leading blocks still cached with their hashes
	for k < len(r.blocks) {
		if h, ok := c.pool.Cached(r.blocks[k]); !ok || h != r.hashes[k] {
			break
		}
		k++
	}
	s.StoreFailures[StoreEvicted] += uint64(len(r.blocks) - k)
	n := c.fit(r.tier, r.hashes, 0, k)
	s.StoreFailures[StoreRefused] += uint64(k - n)
	if n < len(r.blocks) {
		c.giveUp(r.tier, r.origin)
	}
	if n == 0 {
		return
	}
	plan, ok := c.tiers[r.tier].PrepareStore(r.hashes[:n])
	if !ok {
		s.StoreFailures[StoreRefused] += uint64(n)
		c.giveUp(r.tier, r.origin)
		return
	}
	if len(plan.Evicted) > 0 || len(plan.Refused) > 0 {
		c.giveUp(r.tier, r.origin) // the watermark may claim blocks the tier lost
	}
	s.EvictedBlocks += uint64(len(plan.Evicted))
	if len(plan.Hashes) > 0 {
		j := c.submitStore(r.tier, r.blocks[:n], r.hashes[:n], plan)
		j.origin, j.attempt = r.origin, r.attempt+1
	}
}

func (c *Coordinator) checkRetries() error {
	if len(c.retries) > c.cfg.MaxRequests {
		return fmt.Errorf("offload: %d store retries, bound %d", len(c.retries), c.cfg.MaxRequests)
	}
	for _, r := range c.retries {
		if len(r.blocks) != len(r.hashes) || len(r.blocks) == 0 || r.attempt < 1 || r.attempt > c.cfg.MaxStoreRetries {
			return fmt.Errorf("offload: store retry of %d blocks, %d hashes, attempt %d", len(r.blocks), len(r.hashes), r.attempt)
		}
	}
	return nil
}
