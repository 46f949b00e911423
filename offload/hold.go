package offload

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
)

// heldLoad is a request's loaded prefix, held from the end of its loads
// until its admission shares the blocks (Admitted), its end (Finished), or
// the hold is dropped: after Config.LoadHoldSteps steps or by the valve
// (DropHeld). A load that would pass MaxHeldLoadBlocks is not held.
type heldLoad struct {
	hold   kvblock.HoldID
	since  uint64 // Take count when the hold began
	blocks []kvblock.BlockID
	hashes []kvblock.Hash
}

// loadedRecord is a loaded prefix whose hold was dropped before its
// request's admission: at admission, the blocks evicted since are counted
// (Stats.LoadedEvictedBlocks).
type loadedRecord struct {
	blocks []kvblock.BlockID
	hashes []kvblock.Hash
}

// holdLoaded keeps request req's loaded prefix blocks[:n] (with their
// hashes) held after its loads end, under hold, which holds exactly them.
// Without holds (LoadHoldSteps < 0) the hold is released and only the
// record is kept.
func (c *Coordinator) holdLoaded(req uint64, hold kvblock.HoldID, blocks []kvblock.BlockID, hashes []kvblock.Hash) {
	if c.cfg.LoadHoldSteps < 0 || c.heldBlocks+len(blocks) > c.cfg.MaxHeldLoadBlocks {
		// At the bound the new hold is the one not taken: the older ones
		// belong to requests nearer the head of the queue.
		if c.cfg.LoadHoldSteps >= 0 {
			c.stats.LoadHoldsBounded++
		}
		c.pool.Release(hold)
		c.record(req, blocks, hashes)
		return
	}
	c.version++
	c.held[req] = &heldLoad{hold: hold, since: c.takes, blocks: blocks, hashes: hashes}
	c.heldOrder = append(c.heldOrder, req)
	c.heldBlocks += len(blocks)
}

// record notes a loaded prefix without a hold, to count its evictions at
// admission. At most MaxRequests records are kept (beyond, none is).
func (c *Coordinator) record(req uint64, blocks []kvblock.BlockID, hashes []kvblock.Hash) {
	if len(c.records) >= c.cfg.MaxRequests {
		return
	}
	c.version++
	c.records[req] = loadedRecord{blocks: blocks, hashes: hashes}
}

// release drops request req's held load, if any, keeping a record unless
// the request is gone.
func (c *Coordinator) release(req uint64, keepRecord bool) bool {
	h, ok := c.held[req]
	if !ok {
		return false
	}
	c.version++
	delete(c.held, req)
	c.heldBlocks -= len(h.blocks)
	c.pool.Release(h.hold)
	if keepRecord {
		c.record(req, h.blocks, h.hashes)
	}
	return true
}

// expireHeld drops the held loads older than LoadHoldSteps steps.
func (c *Coordinator) expireHeld() {
	for len(c.heldOrder) > 0 {
		req := c.heldOrder[0]
		h, ok := c.held[req]
		if ok && c.takes-h.since < uint64(c.cfg.LoadHoldSteps) {
			break
		}
		c.heldOrder = c.heldOrder[1:]
		if ok && c.release(req, true) {
			c.stats.LoadHoldsExpired++
		}
	}
	if len(c.heldOrder) == 0 {
		c.heldOrder = c.heldOrder[:0:0] // let the backing array go
	}
}

// Admitted is the admission hook for a request whose loads ended
// (LoadDone reported it ready): the scheduler is sharing its cached prefix
// now, so its held load, if still held, is released — the request's own
// hold takes the blocks over. Loaded blocks evicted before the admission
// (possible only if the hold was dropped) are counted in
// Stats.LoadedEvictedBlocks. Calling it for a request with neither a held
// load nor a record does nothing.
func (c *Coordinator) Admitted(req uint64) {
	if h, ok := c.held[req]; ok {
		c.stats.LoadedEvictedBlocks += uint64(c.evicted(h.blocks, h.hashes))
		c.release(req, false)
		return
	}
	if r, ok := c.records[req]; ok {
		c.stats.LoadedEvictedBlocks += uint64(c.evicted(r.blocks, r.hashes))
		delete(c.records, req)
		c.version++
	}
}

func (c *Coordinator) evicted(blocks []kvblock.BlockID, hashes []kvblock.Hash) int {
	n := 0
	for i, b := range blocks {
		if h, ok := c.pool.Cached(b); !ok || h != hashes[i] {
			n++
		}
	}
	return n
}

// DropHeld is the valve: it drops every held load (the blocks stay cached
// and evictable), so that holds of requests behind the head of the
// waiting queue cannot keep it from the blocks it needs. The engine opens
// it when requests wait and the step admitted none of them. It returns
// how many holds it dropped.
func (c *Coordinator) DropHeld() int {
	n := 0
	for len(c.heldOrder) > 0 {
		req := c.heldOrder[0]
		c.heldOrder = c.heldOrder[1:]
		if c.release(req, true) {
			n++
		}
	}
	c.stats.LoadHoldsValved += uint64(n)
	return n
}

// NumHeld is the number of requests whose loaded prefix is held.
func (c *Coordinator) NumHeld() int { return len(c.held) }

// NumLoading is the number of requests with loads in flight.
func (c *Coordinator) NumLoading() int { return len(c.groups) }

// checkHeld verifies the held loads against the pool: each names a live
// load hold of exactly its blocks, cached with their hashes; the counts
// match and are within their bounds. It returns the holds it saw.
func (c *Coordinator) checkHeld(holds map[kvblock.HoldID]bool) error {
	n := 0
	for req, h := range c.held {
		if !c.pool.Live(h.hold) || c.pool.Kind(h.hold) != kvblock.HoldLoad || c.pool.Len(h.hold) != len(h.blocks) {
			return fmt.Errorf("offload: request %d's held load %#x is not a live load hold of its %d blocks", req, uint64(h.hold), len(h.blocks))
		}
		for i, b := range h.blocks {
			if hh, ok := c.pool.Cached(b); !ok || hh != h.hashes[i] {
				return fmt.Errorf("offload: request %d's held block %d is not cached with its hash", req, b)
			}
		}
		if _, loading := c.groups[req]; loading {
			return fmt.Errorf("offload: request %d holds a load and is loading", req)
		}
		holds[h.hold] = true
		n += len(h.blocks)
	}
	if n != c.heldBlocks || (c.cfg.LoadHoldSteps >= 0 && n > c.cfg.MaxHeldLoadBlocks) {
		return fmt.Errorf("offload: held load blocks %d, recorded %d, bound %d", n, c.heldBlocks, c.cfg.MaxHeldLoadBlocks)
	}
	if len(c.records) > c.cfg.MaxRequests {
		return fmt.Errorf("offload: %d loaded records, bound %d", len(c.records), c.cfg.MaxRequests)
	}
	return nil
}
