package offload

import (
	"fmt"
	"strings"

	"github.com/kvlease/kvlease/kvblock"
)

// Lease spill, the tier's side: moving a P engine's leased, unread blocks
// out of the primary pool and back (the feature is the engine's:
// engine/spill.go decides when and drives every move; the lease's side is
// xfer/spill.go). The Coordinator stores a lease's blocks under a store
// hold, then pins their tier copies for the lease (a pin, as a load's:
// not evictable) so the engine may drop the lease's primary hold; it
// brings them back for a read (RestoreLease: shared from the pool when
// it still caches them, loaded from the tier otherwise), and unpins them
// when the lease ends or is restored (UnpinLease). Leases are named by
// their id (an opaque uint64 here).

// LeaseSpillPolicy says when a P engine spills leased blocks
// (--lease-spill).
type LeaseSpillPolicy uint8

const (
	// LeaseSpillNever keeps leased blocks in the primary pool until the
	// lease ends (the zero value).
	LeaseSpillNever LeaseSpillPolicy = iota
	// LeaseSpillPressure spills leases, newest first, while the pool is
	// short of free blocks: fewer than SpillAheadBlocks are available, or
	// the head of the waiting queue lacks blocks.
	LeaseSpillPressure
	// LeaseSpillAlways spills every lease as soon as it is granted.
	LeaseSpillAlways
)

// LeaseSpillNames lists the --lease-spill values in LeaseSpillPolicy
// order.
var LeaseSpillNames = []string{"never", "pressure", "always"}

func (p LeaseSpillPolicy) String() string {
	if int(p) < len(LeaseSpillNames) {
		return LeaseSpillNames[p]
	}
	return fmt.Sprintf("LeaseSpillPolicy(%d)", p)
}

// ParseLeaseSpill parses a --lease-spill value.
func ParseLeaseSpill(s string) (LeaseSpillPolicy, error) {
	for i, n := range LeaseSpillNames {
		if s == n {
			return LeaseSpillPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("--lease-spill: unknown policy %q (want %s)", s, strings.Join(LeaseSpillNames, ", "))
}

// SpillOutcome is what SpillLease did.
type SpillOutcome uint8

const (
	// SpillRefused: nothing changed (no tier has room, a bound is reached,
	// or a block is being stored by another job); offer it again later.
	SpillRefused SpillOutcome = iota
	// SpillStoring: a store is queued; StoreDone reports its end.
	SpillStoring
	// SpillPinned: every block was ready in a tier already and is pinned
	// for the lease now: the caller drops the primary copies at once.
	SpillPinned
)

// SpillStored is StoreDone's report on a lease spill's store: Spill is
// set for such a store; OK says every block was written and is pinned for
// Lease now.
type SpillStored struct {
	Lease     uint64
	Spill, OK bool
}

// leasePin is a lease's spilled blocks in one tier: their hashes, in the
// order the lease gave them, each pinned once.
type leasePin struct {
	tier   int
	hashes []kvblock.Hash
}

// spillJob is the lease side of a store in flight: the lease, every hash
// of its offer (in order), and the hashes that were ready in the tier
// already and are pinned since the offer.
type spillJob struct {
	lease  uint64
	hashes []kvblock.Hash
	pinned []kvblock.Hash
}

// restoreJob brings a lease's spilled blocks back into the pool: a load
// hold over the blocks (shared hits and load targets), blocks[i] for the
// lease's i-th pinned hash, and the load in flight (id 0: none needed).
type restoreJob struct {
	lease  uint64
	hold   kvblock.HoldID
	blocks []kvblock.BlockID
	load   WorkID
	hashes []kvblock.Hash // the load's hashes
	tier   int
	failed bool
}

// leaseState is the Coordinator's lease spill bookkeeping.
type leaseState struct {
	pins     map[uint64]*leasePin
	spilling map[uint64]WorkID // lease → its spill store in flight
	restores map[uint64]*restoreJob
	loads    map[WorkID]*restoreJob
	// pinned: blocks pinned for leases; storing: blocks of spill stores
	// in flight. Both count against MaxLeaseSpillBlocks.
	pinned, storing int
}

func (s *leaseState) init() {
	if s.pins == nil {
		s.pins = map[uint64]*leasePin{}
		s.spilling = map[uint64]WorkID{}
		s.restores = map[uint64]*restoreJob{}
		s.loads = map[WorkID]*restoreJob{}
	}
}

// LeaseSpillPolicy is the configured policy.
func (c *Coordinator) LeaseSpillPolicy() LeaseSpillPolicy { return c.cfg.LeaseSpill }

// SpillLease offers the blocks of lease (pool blocks, cached with hashes,
// in the lease's order) to the first tier that can take them all: blocks
// ready there already are pinned at once, the others are stored under a
// store hold (the reuse filter does not apply: a spill is not a caching
// decision). A lease has one spill at a time; offering a lease whose
// blocks are pinned or being stored panics.
func (c *Coordinator) SpillLease(lease uint64, blocks []kvblock.BlockID, hashes []kvblock.Hash) SpillOutcome {
	c.leases.init()
	if len(blocks) != len(hashes) || len(blocks) == 0 {
		panic(fmt.Sprintf("offload: SpillLease of %d blocks and %d hashes", len(blocks), len(hashes)))
	}
	if _, ok := c.leases.pins[lease]; ok {
		panic(fmt.Sprintf("offload: SpillLease of lease %d which is spilled", lease))
	}
	if _, ok := c.leases.spilling[lease]; ok {
		panic(fmt.Sprintf("offload: SpillLease of lease %d which is being spilled", lease))
	}
	n := len(hashes)
	if c.leases.pinned+c.leases.storing+n > c.cfg.MaxLeaseSpillBlocks {
		c.stats.LeaseSpillRefusedBlocks += uint64(n)
		return SpillRefused
	}
	for t, m := range c.tiers {
		var ready, absent []kvblock.Hash
		var absentB []kvblock.BlockID
		busy := false
		for i, h := range hashes {
			r, present := m.Contains(h)
			switch {
			case !present:
				absent = append(absent, h)
				absentB = append(absentB, blocks[i])
			case r:
				ready = append(ready, h)
			default:
				busy = true // another job is storing it: try later
			}
		}
		if busy || c.inStore+len(absent) > c.cfg.MaxInflightStoreBlocks {
			continue
		}
		if len(absent) == 0 {
			m.PrepareLoad(ready)
			c.pinLease(lease, t, hashes)
			return SpillPinned
		}
		// Pinning the ready ones first keeps PrepareStore from evicting
		// them to make room for the others.
		if len(ready) > 0 {
			m.PrepareLoad(ready)
		}
		plan, ok := m.prepareStore(absent, false)
		if !ok || len(plan.Hashes) != len(absent) {
			if ok {
				panic("offload: a spill store plan left blocks out")
			}
			if len(ready) > 0 {
				m.CompleteLoad(ready)
			}
			continue
		}
		c.account(t, plan, true, len(absent))
		j := c.submitStore(t, absentB, absent, plan)
		j.spill = &spillJob{lease: lease, hashes: append([]kvblock.Hash(nil), hashes...), pinned: ready}
		c.leases.spilling[lease] = c.nextID // submitStore's work id
		c.leases.storing += n
		return SpillStoring
	}
	c.stats.LeaseSpillRefusedBlocks += uint64(n)
	return SpillRefused
}

func (c *Coordinator) pinLease(lease uint64, tier int, hashes []kvblock.Hash) {
	c.version++
	c.leases.pins[lease] = &leasePin{tier: tier, hashes: append([]kvblock.Hash(nil), hashes...)}
	c.leases.pinned += len(hashes)
	c.stats.LeaseSpills++
	c.stats.LeaseSpilledBlocks += uint64(len(hashes))
}

// spillStoreDone ends the lease side of store j (StoreDone, before its
// store hold goes): when every block was written it pins them all for
// the lease and reports true; otherwise it unpins what the offer had
// pinned and reports false.
func (c *Coordinator) spillStoreDone(j *storeJob, copied int) bool {
	sp := j.spill
	delete(c.leases.spilling, sp.lease)
	c.leases.storing -= len(sp.hashes)
	m := c.tiers[j.tier]
	if copied < len(j.hashes) {
		if len(sp.pinned) > 0 {
			m.CompleteLoad(sp.pinned)
		}
		c.stats.LeaseSpillFailedBlocks += uint64(len(sp.hashes))
		return false
	}
	m.PrepareLoad(j.hashes) // just stored: ready, present
	c.pinLease(sp.lease, j.tier, sp.hashes)
	return true
}

// Spilling reports whether lease has a spill store in flight.
func (c *Coordinator) Spilling(lease uint64) bool {
	_, ok := c.leases.spilling[lease]
	return ok
}

// SpillingBlocks is the number of blocks of spill stores in flight: the
// primary blocks their leases will let go when they end.
func (c *Coordinator) SpillingBlocks() int { return c.leases.storing }

// LeasePinned reports how many blocks are pinned in a tier for lease.
func (c *Coordinator) LeasePinned(lease uint64) int {
	if p, ok := c.leases.pins[lease]; ok {
		return len(p.hashes)
	}
	return 0
}

// LeasePins calls yield for every lease with blocks pinned, with their
// number, until it returns false (in no particular order).
func (c *Coordinator) LeasePins(yield func(lease uint64, blocks int) bool) {
	for lease, p := range c.leases.pins {
		if !yield(lease, len(p.hashes)) {
			return
		}
	}
}

// UnpinLease releases the tier copies pinned for lease (its lease ended,
// or its blocks are back in the pool): they stay in the tier as ordinary,
// evictable blocks. A lease with nothing pinned is a no-op.
func (c *Coordinator) UnpinLease(lease uint64) {
	p, ok := c.leases.pins[lease]
	if !ok {
		return
	}
	c.version++
	delete(c.leases.pins, lease)
	c.leases.pinned -= len(p.hashes)
	c.tiers[p.tier].CompleteLoad(p.hashes)
}

// RestoreLease starts bringing back the blocks pinned for lease, in the
// order they were pinned, under a load hold: each whose hash the pool
// still caches is shared at once, the others are allocated and loaded
// from the lease's tier (one LoadWork, handed out by the next Take). It
// reports ok false, changing nothing, when the pool has too few blocks
// available; ready when nothing needs loading (RestoredBlocks gives the
// blocks now), otherwise LoadDone of the load reports the end. The caller
// ends every restore with EndRestore. A lease with nothing pinned, or
// with a restore in progress, panics.
func (c *Coordinator) RestoreLease(lease uint64) (ready, ok bool) {
	p, pinned := c.leases.pins[lease]
	if !pinned {
		panic(fmt.Sprintf("offload: RestoreLease of lease %d with nothing pinned", lease))
	}
	if _, dup := c.leases.restores[lease]; dup {
		panic(fmt.Sprintf("offload: RestoreLease of lease %d which is being restored", lease))
	}
	n := len(p.hashes)
	blocks := make([]kvblock.BlockID, n)
	var hit [1]kvblock.BlockID
	miss, avail := 0, c.pool.NumAvailable()
	for i := range p.hashes {
		blocks[i] = -1
		if got := c.pool.Lookup(hit[:0], p.hashes[i:i+1]); len(got) == 1 {
			blocks[i] = got[0]
			if c.pool.Refs(got[0]) == 0 {
				avail-- // sharing it takes it out of what Allocate can use
			}
			continue
		}
		miss++
	}
	if miss > avail {
		return false, false
	}
	c.version++
	r := &restoreJob{lease: lease, blocks: blocks, tier: p.tier}
	r.hold = c.pool.NewHold(kvblock.HoldLoad, lease)
	// Share every hit before allocating: an allocation may evict an
	// evictable hit not yet shared.
	for _, b := range blocks {
		if b >= 0 {
			c.pool.Share(r.hold, []kvblock.BlockID{b})
		}
	}
	c.leases.restores[lease] = r
	c.stats.LeaseRestores++
	c.stats.LeaseRestoreHitBlocks += uint64(n - miss)
	if miss == 0 {
		return true, true
	}
	if !c.pool.Allocate(r.hold, miss) {
		panic("offload: allocation failed after the availability check")
	}
	targets := c.pool.Blocks(r.hold)[n-miss:]
	w := LoadWork{Tier: p.tier, Medium: c.tiers[p.tier].cfg.Medium, Req: 0}
	k := 0
	for i, b := range blocks {
		if b < 0 {
			blocks[i] = targets[k]
			w.Blocks = append(w.Blocks, targets[k])
			w.Hashes = append(w.Hashes, p.hashes[i])
			k++
		}
	}
	w.Slots = c.tiers[p.tier].PrepareLoad(w.Hashes)
	c.nextID++
	w.ID = c.nextID
	r.load, r.hashes = w.ID, w.Hashes
	c.leases.loads[w.ID] = r
	c.outLoad = append(c.outLoad, w)
	return false, true
}

// IsRestore reports whether load work id is a lease restore's (its end
// goes to RestoreDone, not LoadDone).
func (c *Coordinator) IsRestore(id WorkID) bool {
	_, ok := c.leases.loads[id]
	return ok
}

// RestoreDone reports the end of a restore's load id: copied of its
// blocks were read into the pool. It returns the lease and whether the
// whole restore succeeded (RestoredBlocks then gives the blocks). A
// failed restore's tier copies stay pinned (the lease still has its
// blocks there) and its blocks are let go by EndRestore.
func (c *Coordinator) RestoreDone(id WorkID, copied int) (lease uint64, ok bool) {
	r, found := c.leases.loads[id]
	if !found {
		panic(fmt.Sprintf("offload: RestoreDone(%d) of no restore in flight", id))
	}
	if copied < 0 || copied > len(r.hashes) {
		panic(fmt.Sprintf("offload: RestoreDone(%d, %d) of a load of %d blocks", id, copied, len(r.hashes)))
	}
	c.version++
	delete(c.leases.loads, id)
	r.load = 0
	c.tiers[r.tier].CompleteLoad(r.hashes)
	s := &c.stats.Tiers[r.tier]
	s.LoadedBlocks += uint64(copied)
	s.LoadFailedBlocks += uint64(len(r.hashes) - copied)
	if copied < len(r.hashes) {
		r.failed = true
		c.stats.LeaseRestoreFailures++
		return r.lease, false
	}
	c.stats.LeaseRestoreLoadedBlocks += uint64(copied)
	return r.lease, true
}

// RestoredBlocks returns the blocks of lease's restore, one per pinned
// hash in order, while its hold keeps them (until EndRestore). The slice
// is the coordinator's.
func (c *Coordinator) RestoredBlocks(lease uint64) []kvblock.BlockID {
	r, ok := c.leases.restores[lease]
	if !ok || r.load != 0 || r.failed {
		panic(fmt.Sprintf("offload: RestoredBlocks of lease %d with no finished restore", lease))
	}
	return r.blocks
}

// EndRestore releases the hold of lease's finished restore: after the
// caller took the blocks under the lease's own hold, or gave up.
func (c *Coordinator) EndRestore(lease uint64) {
	r, ok := c.leases.restores[lease]
	if !ok || r.load != 0 {
		panic(fmt.Sprintf("offload: EndRestore of lease %d with no finished restore", lease))
	}
	c.version++
	delete(c.leases.restores, lease)
	c.pool.Release(r.hold)
}

// checkLeases verifies the lease spill bookkeeping: pins name present,
// ready tier blocks; counts match and are within MaxLeaseSpillBlocks;
// every spill store is in flight with its lease indexed; every restore's
// hold is a live load hold of its blocks (added to holds).
func (c *Coordinator) checkLeases(holds map[kvblock.HoldID]bool) error {
	pinned, storing := 0, 0
	for lease, p := range c.leases.pins {
		m := c.tiers[p.tier]
		for _, h := range p.hashes {
			s, ok := m.slotOf(h)
			if !ok || m.pins[s] <= 0 {
				return fmt.Errorf("offload: lease %d's block %x is not pinned in tier %d", lease, h, p.tier)
			}
		}
		pinned += len(p.hashes)
	}
	for lease, id := range c.leases.spilling {
		j, ok := c.stores[id]
		if !ok || j.spill == nil || j.spill.lease != lease {
			return fmt.Errorf("offload: lease %d's spill store %d is not in flight", lease, id)
		}
		if _, dup := c.leases.pins[lease]; dup {
			return fmt.Errorf("offload: lease %d is spilled and being spilled", lease)
		}
		storing += len(j.spill.hashes)
	}
	for id, j := range c.stores {
		if j.spill != nil && c.leases.spilling[j.spill.lease] != id {
			return fmt.Errorf("offload: spill store %d of lease %d is not indexed", id, j.spill.lease)
		}
	}
	if pinned != c.leases.pinned || storing != c.leases.storing {
		return fmt.Errorf("offload: lease blocks pinned %d storing %d, recorded %d %d", pinned, storing, c.leases.pinned, c.leases.storing)
	}
	if pinned+storing > c.cfg.MaxLeaseSpillBlocks {
		return fmt.Errorf("offload: lease blocks pinned %d + storing %d over the bound %d", pinned, storing, c.cfg.MaxLeaseSpillBlocks)
	}
	for lease, r := range c.leases.restores {
		if !c.pool.Live(r.hold) || c.pool.Kind(r.hold) != kvblock.HoldLoad || c.pool.Len(r.hold) != len(r.blocks) {
			return fmt.Errorf("offload: lease %d's restore hold %#x is not a live load hold of its %d blocks", lease, uint64(r.hold), len(r.blocks))
		}
		if r.load != 0 && c.leases.loads[r.load] != r {
			return fmt.Errorf("offload: lease %d's restore load %d is not indexed", lease, r.load)
		}
		holds[r.hold] = true
	}
	for id, r := range c.leases.loads {
		if c.leases.restores[r.lease] != r || r.load != id {
			return fmt.Errorf("offload: restore load %d of lease %d is not its lease's", id, r.lease)
		}
	}
	return nil
}
