package offload

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
)

// The offers: what the policy offers, fitted to the tiers' room and the
// in-flight bounds, prepared in the tiers' Managers and handed out as
// store work under store holds.

// ask tells the policy of a request's trigger (blocks and hashes are its
// full computed blocks) and returns its offer, cut to the blocks given.
func (c *Coordinator) ask(tr Trigger, req uint64, blocks []kvblock.BlockID, hashes []kvblock.Hash) Offer {
	off := c.policy.Request(RequestEvent{Trigger: tr, Req: req, Blocks: blocks, Hashes: hashes, Marks: c.marks.m[req]})
	off.To = max(0, min(off.To, len(hashes)))
	return off
}

func (c *Coordinator) offerRequest(tr Trigger, req uint64, blocks []kvblock.BlockID, hashes []kvblock.Hash, numComputed int) {
	n := c.numFull(blocks, hashes, numComputed)
	off := c.ask(tr, req, blocks[:n], hashes[:n])
	c.offerRange(req, blocks, hashes, off.To, off.Whole)
}

// offerRange offers each tier request req's blocks from its watermark up
// to to; whole makes it all or nothing per tier.
func (c *Coordinator) offerRange(req uint64, blocks []kvblock.BlockID, hashes []kvblock.Hash, to int, whole bool) {
	if to <= 0 {
		return
	}
	m := c.marks.track(req)
	if m == nil {
		return
	}
	for t := range c.tiers {
		from := m[t]
		if from >= to {
			continue
		}
		// Blocks that do not fit (the tier is full of blocks in flight, or
		// we are at the in-flight bound) count as refused; the watermark
		// stops before them and they are offered again later.
		offered := to - from
		end := c.fit(t, hashes, from, to)
		if whole && end < to {
			end = from
		}
		c.stats.Tiers[t].RefusedBlocks += uint64(offered - (end - from))
		if from >= end {
			continue
		}
		if whole && c.tiers[t].wouldRefuse(hashes[from:end]) {
			c.stats.Tiers[t].RefusedBlocks += uint64(offered)
			continue
		}
		plan, ok := c.tiers[t].PrepareStore(hashes[from:end])
		c.marks.offered(req, t, from, hashes[from:end], plan, ok)
		c.account(t, plan, ok, end-from)
		if ok && len(plan.Hashes) > 0 {
			c.submitStore(t, blocks[from:end], hashes[from:end], plan).origin = origin{req: req, hasReq: true, from: from}
		}
	}
}

// fit shortens the offer hashes[from:to] to tier t so that it can be
// placed: its blocks not yet in the tier fit in the tier's free and
// evictable slots and in the in-flight bound. (PrepareStore is all or
// nothing; without this a request longer than the tier's room would never
// store anything.) Blocks the reuse filter will refuse are counted as
// needing room too, which only errs on the short side.
func (c *Coordinator) fit(t int, hashes []kvblock.Hash, from, to int) int {
	m := c.tiers[t]
	room := min(m.NumFree()+m.NumEvictable(), c.cfg.MaxInflightStoreBlocks-c.inStore)
	need := 0
	for i := from; i < to; i++ {
		if _, present := m.Contains(hashes[i]); present {
			continue
		}
		if need == room {
			return i
		}
		need++
	}
	return to
}

func (c *Coordinator) account(t int, plan StorePlan, ok bool, offered int) {
	s := &c.stats.Tiers[t]
	if !ok {
		s.RefusedBlocks += uint64(offered)
		return
	}
	s.RefusedBlocks += uint64(len(plan.Refused))
	s.EvictedBlocks += uint64(len(plan.Evicted))
}

// submitStore takes a store hold on the blocks of plan.Hashes (found in
// the offered blocks/hashes, in order) and queues the work.
func (c *Coordinator) submitStore(t int, blocks []kvblock.BlockID, hashes []kvblock.Hash, plan StorePlan) *storeJob {
	c.nextID++
	id := c.nextID
	w := StoreWork{ID: id, Tier: t, Medium: c.tiers[t].cfg.Medium, Hashes: append([]kvblock.Hash(nil), plan.Hashes...), Slots: plan.Slots,
		Blocks: make([]kvblock.BlockID, 0, len(plan.Hashes))}
	// plan.Hashes is in input order without duplicates: one pass matches
	// each accepted hash with the first block offered under it.
	j := 0
	for i, h := range hashes {
		if j < len(plan.Hashes) && plan.Hashes[j] == h {
			w.Blocks = append(w.Blocks, blocks[i])
			j++
		}
	}
	if j != len(plan.Hashes) {
		panic("offload: store plan does not follow the offered order")
	}
	c.version++
	hold := c.pool.NewHold(kvblock.HoldStore, uint64(id))
	c.pool.Share(hold, w.Blocks)
	job := &storeJob{tier: t, hold: hold, hashes: plan.Hashes, attempt: 1}
	c.stores[id] = job
	c.inStore += len(w.Blocks)
	c.outStore = append(c.outStore, w)
	return job
}

// offerPreempted makes the offers Preempted deferred, over the leading
// blocks that are still cached with their hashes.
func (c *Coordinator) offerPreempted() {
	for _, o := range c.preempted {
		n := 0
		for n < len(o.blocks) {
			if h, ok := c.pool.Cached(o.blocks[n]); !ok || h != o.hashes[n] {
				break
			}
			n++
		}
		if o.whole && n < len(o.blocks) {
			continue // part of the unit is gone
		}
		c.offerRange(o.req, o.blocks, o.hashes, n, o.whole)
	}
	clear(c.preempted)
	c.preempted = c.preempted[:0]
}

// spillPass offers the blocks at the head of the primary pool's eviction
// order while the pool is short of free blocks.
func (c *Coordinator) spillPass() {
	window := c.cfg.SpillAheadBlocks
	if c.pool.NumFree() >= window {
		return
	}
	window = min(window, c.cfg.MaxInflightStoreBlocks-c.inStore)
	if window <= 0 {
		return
	}
	c.spillB, c.spillH = c.policy.Evicting(c.pool, window, c.spillB[:0], c.spillH[:0])
	if len(c.spillB) != len(c.spillH) || len(c.spillB) > window {
		panic(fmt.Sprintf("offload: policy %s offered %d blocks and %d hashes for %d", c.policy.Name(), len(c.spillB), len(c.spillH), window))
	}
	if len(c.spillB) == 0 {
		return
	}
	for t, m := range c.tiers {
		c.offerB, c.offerH = c.offerB[:0], c.offerH[:0]
		for i, h := range c.spillH {
			if _, present := m.Contains(h); !present {
				c.offerB = append(c.offerB, c.spillB[i])
				c.offerH = append(c.offerH, h)
			}
		}
		if len(c.offerH) == 0 {
			continue
		}
		// None of them is present: fit them to the room as a prefix.
		if n := c.fit(t, c.offerH, 0, len(c.offerH)); n < len(c.offerH) {
			c.stats.Tiers[t].RefusedBlocks += uint64(len(c.offerH) - n)
			c.offerB, c.offerH = c.offerB[:n], c.offerH[:n]
			if n == 0 {
				continue
			}
		}
		plan, ok := m.PrepareStore(c.offerH)
		c.account(t, plan, ok, len(c.offerH))
		if ok && len(plan.Hashes) > 0 {
			c.submitStore(t, c.offerB, c.offerH, plan)
		}
	}
	// A candidate present in every tier (stored or being stored) is done.
	for i, h := range c.spillH {
		all := true
		for _, m := range c.tiers {
			if _, present := m.Contains(h); !present {
				all = false
				break
			}
		}
		if all {
			c.policy.Placed(c.spillB[i])
		}
	}
}
