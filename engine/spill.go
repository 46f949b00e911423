package engine

import (
	"fmt"
	"math"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/wire"
)

// Lease spill (offload.Config.LeaseSpill) is the engine's: this file
// decides when a P engine's leased, unread blocks move to an offload tier
// and carries out every move between its producer and its offload
// coordinator. The other parts only do what they are told: the producer
// keeps the lease's side (xfer/spill.go: which leases may spill, when
// their primary copies may go, which reads wait for a restore), the
// coordinator the tier's (offload/lease.go: stores, tier pins, restores
// by lease id), and the simulator counts (sim.Node.SpillCounts). The order
// of every move keeps the safety rules of holds:
//
//   - spill: the blocks are stored under a store hold; when the store
//     ends, their tier copies are pinned for the lease first, and only
//     then, if no read is in flight and the lease's fate is not decided
//     (Producer.SpillReady), is the lease's primary hold on them dropped
//     (Producer.SpillDone); otherwise the pins go and nothing changes.
//   - read: a READ naming a spilled block pins the lease as any read does
//     and waits; before the next schedule (ahead of new prefills) the core
//     restores the lease's blocks under a load hold —
//     shared from the pool when it still caches them, loaded from the tier
//     otherwise — and the lease takes them under its own hold before that
//     hold goes and the tier pins are dropped; then the read is streamed
//     from the pool with its checksums, as any read. No room for the
//     restore: READ_END busy (D retries); the tier lost a copy: READ_END
//     internal (D retries, then falls back).
//   - end: the tier copies of a released lease are unpinned with it
//     (Producer.OnUnspill).
//
// Spill policies: never; pressure — while fewer than SpillAheadBlocks
// blocks are available (free or evictable, counting those of spill stores
// in flight) or the head of the waiting queue lacks blocks, spill leases
// newest first, up to SpillAheadBlocks blocks in flight (plus those of
// restores waiting for room); always — every
// lease as soon as it is granted.

// restoreWait is a restore waiting for room in the pool, until a bound.
type restoreWait struct {
	lease wire.LeaseID
	until clock.Instant
}

// restoreStep runs the restores reads asked for, and retries those that
// wait for room; Step calls it before scheduling, so a read waiting for
// its lease's spilled blocks gets the pool's room before new prefills do
// (a decoder waits on it; a prefill only feeds a queue), and a restore
// that needs no load streams its reads in the same turn. It returns the
// blocks the restores still waiting need.
//
// A restore the pool has no room for waits, and its blocks count as
// pressure (so leases spill to make the room: spillStep), for at most a
// heartbeat interval; then its reads are refused busy and D retries them.
func (c *Core) restoreStep(now clock.Instant) (need int) {
	if c.producer == nil || c.offload == nil {
		return 0
	}
	for _, id := range c.producer.TakeRestores() {
		c.restoreWaits = append(c.restoreWaits, restoreWait{lease: id, until: now.Add(c.cfg.Transfer.HeartbeatInterval)})
	}
	keep := c.restoreWaits[:0]
	for _, w := range c.restoreWaits {
		if c.restore(now, w.lease) {
			continue
		}
		if now < w.until {
			need += c.offload.LeasePinned(uint64(w.lease))
			keep = append(keep, w)
			continue
		}
		c.producer.RestoreFailed(now, w.lease, wire.StatusBusy)
	}
	clear(c.restoreWaits[len(keep):])
	c.restoreWaits = keep
	return need
}

// spillStep is the spill decision, after scheduling: need are the blocks
// of restores waiting for room.
func (c *Core) spillStep(now clock.Instant, need int) {
	if c.producer == nil || c.offload == nil {
		return
	}
	want := math.MaxInt
	switch c.offload.LeaseSpillPolicy() {
	case offload.LeaseSpillNever:
		return
	case offload.LeaseSpillPressure:
		target := c.offload.Config().SpillAheadBlocks + need
		spilling := c.offload.SpillingBlocks()
		if c.pool.NumAvailable()+spilling >= target && !c.sched.Short() {
			return
		}
		if want = target - spilling; want <= 0 {
			return
		}
	}
	c.spillCands = c.producer.SpillCandidates(c.spillCands[:0], want)
	for i := range c.spillCands {
		cand := &c.spillCands[i]
		switch c.offload.SpillLease(uint64(cand.Lease), cand.Blocks, cand.Hashes) {
		case offload.SpillStoring:
			c.producer.SpillStarted(cand.Lease, cand.Indexes)
		case offload.SpillPinned:
			c.producer.SpillStarted(cand.Lease, cand.Indexes)
			c.producer.SpillDone(now, cand.Lease)
		}
	}
	clear(c.spillCands)
}

// nextRestoreWait is when the first waiting restore gives up, or
// clock.Never.
func (c *Core) nextRestoreWait() clock.Instant {
	t := clock.Never
	for _, w := range c.restoreWaits {
		t = min(t, w.until)
	}
	return t
}

// spillStored applies the end of a lease's spill store (StoreDone).
func (c *Core) spillStored(now clock.Instant, sp offload.SpillStored) {
	id := wire.LeaseID(sp.Lease)
	if sp.OK && c.producer.SpillReady(id) {
		c.producer.SpillDone(now, id) // its tier copies are pinned
		return
	}
	if sp.OK {
		c.offload.UnpinLease(sp.Lease)
	}
	c.producer.SpillFailed(id)
}

// restore starts bringing back lease id's spilled blocks for the reads
// that wait for them; false: the pool has no room for them now.
func (c *Core) restore(now clock.Instant, id wire.LeaseID) bool {
	if c.offload.LeasePinned(uint64(id)) == 0 {
		// Released since the READ (its pins went with it): the producer
		// has nothing waiting any more.
		c.producer.RestoreFailed(now, id, wire.StatusInternal)
		return true
	}
	ready, ok := c.offload.RestoreLease(uint64(id))
	if ready {
		c.restored(now, id)
	}
	return ok
}

// restored hands a finished restore's blocks to the lease, then lets the
// restore's hold and the tier pins go.
func (c *Core) restored(now clock.Instant, id wire.LeaseID) {
	lease := uint64(id)
	if c.producer.Restored(now, id, c.offload.RestoredBlocks(lease)) {
		c.offload.UnpinLease(lease)
	}
	c.offload.EndRestore(lease)
}

// restoreDone applies the end of a restore's load (LoadDone).
func (c *Core) restoreDone(now clock.Instant, id offload.WorkID, copied int) {
	lease, ok := c.offload.RestoreDone(id, copied)
	if ok {
		c.restored(now, wire.LeaseID(lease))
		return
	}
	c.offload.EndRestore(lease)
	c.producer.RestoreFailed(now, wire.LeaseID(lease), wire.StatusInternal)
}

// checkSpill cross-checks the producer's spilled leases with the tier pins.
func (c *Core) checkSpill() error {
	if c.producer == nil || c.offload == nil {
		return nil
	}
	var err error
	pinned := 0
	c.offload.LeasePins(func(lease uint64, n int) bool {
		pinned += n
		info, live := c.producer.Lease(wire.LeaseID(lease))
		if !live || info.Spilled != n {
			err = fmt.Errorf("engine: lease %d has %d blocks pinned in a tier, producer says live %v with %d spilled", lease, n, live, info.Spilled)
			return false
		}
		return true
	})
	if err == nil && pinned != c.producer.NumSpilledBlocks() {
		err = fmt.Errorf("engine: %d blocks pinned in tiers for leases, producer has %d spilled", pinned, c.producer.NumSpilledBlocks())
	}
	return err
}
