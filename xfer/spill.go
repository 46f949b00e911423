package xfer

import (
	"fmt"
	"sort"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// Lease spill, the lease's side (see doc.go, "Lease spill"; the feature is
// the engine's, engine/spill.go, which decides and drives every move): the
// Producer says which leases may spill and when their primary copies may
// go, and keeps the reads waiting for a restore; the engine core asks the
// offload coordinator to store, pin and restore them.

// leaseSpill is a lease's spill state, made at its first spill.
type leaseSpill struct {
	// blocks[i] is the primary block of index i while it is resident;
	// out[i] says it is spilled (its primary copy dropped: the lease's
	// hold no longer names it).
	blocks []kvblock.BlockID
	out    []bool
	n      int // spilled now
	// offer are the indexes of the spill store in flight (storing).
	offer   []int
	storing bool
	// restoring: a restore was asked for (TakeRestores) or runs; waiting
	// are the reads it serves, in arrival order.
	restoring bool
	waiting   []readWait
}

// readWait is a read pinned and waiting for its lease's restore.
type readWait struct {
	key     readKey
	indexes []uint32
}

// SpillCandidate is a lease whose resident, cached blocks may spill:
// Indexes are their positions in the lease, Blocks and Hashes the pool's
// blocks and their prefix hashes. The slices are the caller's.
type SpillCandidate struct {
	Lease   wire.LeaseID
	Indexes []int
	Blocks  []kvblock.BlockID
	Hashes  []kvblock.Hash
}

// numBlocks is the number of blocks of lease l (resident or spilled).
func (p *Producer) numBlocks(l *leaseState) int {
	if l.spill != nil {
		return len(l.spill.blocks)
	}
	return p.pool.Len(l.hold)
}

// blockAt is the primary block of index ix of l, which must be resident.
func (p *Producer) blockAt(l *leaseState, ix int) kvblock.BlockID {
	if l.spill != nil {
		if l.spill.out[ix] {
			panic(fmt.Sprintf("xfer: block %d of lease %d is spilled", ix, l.id))
		}
		return l.spill.blocks[ix]
	}
	return p.pool.Blocks(l.hold)[ix]
}

// spillable reports whether l may start a spill now: live, its fate not
// decided, no read in flight or waiting, nothing spilled or being
// spilled.
func spillable(l *leaseState) bool {
	return l.pending == 0 && l.reads == 0 && (l.spill == nil || (!l.spill.storing && !l.spill.restoring && l.spill.n == 0))
}

// SpillCandidates appends to dst the leases that may spill now, newest
// grant first (a decoder reads its queue oldest first, so the newest
// leases are read last), each with its resident blocks that carry a
// prefix hash (a partial last block has none and stays), until maxBlocks
// blocks are listed (the first candidate is listed whatever its size).
// It changes nothing; O(live leases) and a sort of the candidates.
func (p *Producer) SpillCandidates(dst []SpillCandidate, maxBlocks int) []SpillCandidate {
	if maxBlocks <= 0 {
		return dst
	}
	var ls []*leaseState
	for _, l := range p.leases {
		if spillable(l) {
			ls = append(ls, l)
		}
	}
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].granted != ls[j].granted {
			return ls[i].granted > ls[j].granted
		}
		return ls[i].id > ls[j].id
	})
	total := 0
	for _, l := range ls {
		c := SpillCandidate{Lease: l.id}
		for ix := range p.numBlocks(l) {
			b := p.blockAt(l, ix)
			if h, ok := p.pool.Cached(b); ok {
				c.Indexes = append(c.Indexes, ix)
				c.Blocks = append(c.Blocks, b)
				c.Hashes = append(c.Hashes, h)
			}
		}
		if len(c.Blocks) == 0 {
			continue
		}
		if total > 0 && total+len(c.Blocks) > maxBlocks {
			break
		}
		dst = append(dst, c)
		if total += len(c.Blocks); total >= maxBlocks {
			break
		}
	}
	return dst
}

// SpillStarted records that the blocks at indexes of lease id (a
// SpillCandidate's) are being stored: the lease is not offered again
// until SpillDone or SpillFailed. A lease that may not spill panics.
func (p *Producer) SpillStarted(id wire.LeaseID, indexes []int) {
	l, ok := p.leases[id]
	if !ok || !spillable(l) {
		panic(fmt.Sprintf("xfer: SpillStarted of lease %d which may not spill", id))
	}
	p.spillState(l)
	l.spill.storing = true
	l.spill.offer = append(l.spill.offer[:0], indexes...)
}

func (p *Producer) spillState(l *leaseState) {
	if l.spill == nil {
		n := p.pool.Len(l.hold)
		l.spill = &leaseSpill{blocks: append([]kvblock.BlockID(nil), p.pool.Blocks(l.hold)...), out: make([]bool, n)}
	}
}

// SpillReady reports whether lease id's primary copies may go now that its
// spill store ended: it is live, its fate is not decided, and no read is
// in flight (a read streams its blocks straight from the pool).
func (p *Producer) SpillReady(id wire.LeaseID) bool {
	l, ok := p.leases[id]
	if !ok || l.spill == nil || !l.spill.storing {
		return false
	}
	return l.pending == 0 && (l.reads == 0 || MutateSpillIgnoresRead)
}

// SpillDone drops lease id's primary hold on the blocks of its spill
// (their tier copies are pinned for it by the caller, before this call):
// they become evictable, or stay where other holds keep them. Call it only
// when SpillReady; otherwise it panics.
func (p *Producer) SpillDone(now clock.Instant, id wire.LeaseID) {
	if !p.SpillReady(id) {
		panic(fmt.Sprintf("xfer: SpillDone of lease %d which is not ready", id))
	}
	l := p.leases[id]
	sp := l.spill
	sp.storing = false
	for _, ix := range sp.offer {
		sp.out[ix] = true
	}
	sp.n += len(sp.offer)
	p.stats.SpilledBlocks += uint64(len(sp.offer))
	p.stats.SpilledLeases++
	sp.offer = sp.offer[:0]
	p.rehold(l)
}

// SpillFailed ends lease id's spill store without a spill (the store
// failed, or SpillReady said no). A lease gone meanwhile is a no-op.
func (p *Producer) SpillFailed(id wire.LeaseID) {
	if l, ok := p.leases[id]; ok && l.spill != nil {
		l.spill.storing = false
		l.spill.offer = l.spill.offer[:0]
	}
}

// rehold replaces l's lease hold with one naming exactly its resident
// blocks, in index order. The new hold is taken before the old one goes,
// so a block resident before and after never loses its hold.
func (p *Producer) rehold(l *leaseState) {
	h := p.pool.NewHold(kvblock.HoldLease, uint64(l.id))
	for ix, b := range l.spill.blocks {
		if !l.spill.out[ix] {
			p.pool.Share(h, []kvblock.BlockID{b})
		}
	}
	p.pool.Release(l.hold)
	l.hold = h
}

// waitRestore pins read key of l, which names spilled blocks, until the
// restore of l's blocks ends, and asks for that restore if none runs.
func (p *Producer) waitRestore(l *leaseState, key readKey, indexes []uint32) {
	l.reads++
	p.reads[key] = l
	l.spill.waiting = append(l.spill.waiting, readWait{key: key, indexes: append([]uint32(nil), indexes...)})
	if !l.spill.restoring {
		l.spill.restoring = true
		p.restores = append(p.restores, l.id)
	}
}

// TakeRestores returns the leases whose spilled blocks a read waits for
// since the last call: the caller starts each restore (the offload
// coordinator's RestoreLease) and ends it with Restored or RestoreFailed.
// The caller owns the slice.
func (p *Producer) TakeRestores() []wire.LeaseID {
	r := p.restores
	p.restores = nil
	return r
}

// Restored ends lease id's restore: blocks are its spilled blocks back in
// the pool, in index order, under the caller's hold; the lease takes them
// under its own hold (resident again: the caller unpins the tier copies
// when this returns true) and the reads waiting for them are streamed. It
// returns false, changing nothing, when the lease is gone.
func (p *Producer) Restored(now clock.Instant, id wire.LeaseID, blocks []kvblock.BlockID) bool {
	l, ok := p.leases[id]
	if !ok || l.spill == nil || !l.spill.restoring {
		return false
	}
	sp := l.spill
	if len(blocks) != sp.n {
		panic(fmt.Sprintf("xfer: lease %d restored %d blocks of %d spilled", id, len(blocks), sp.n))
	}
	k := 0
	for ix := range sp.blocks {
		if sp.out[ix] {
			sp.blocks[ix] = blocks[k]
			sp.out[ix] = false
			k++
		}
	}
	sp.n = 0
	sp.restoring = false
	p.rehold(l)
	p.stats.RestoredLeases++
	waiting := sp.waiting
	sp.waiting = nil
	for _, w := range waiting {
		if p.reads[w.key] == l {
			p.serveRead(now, l, p.readWork(l, w.key.s, w.key.id, w.indexes))
		}
	}
	return true
}

// RestoreFailed ends lease id's restore without its blocks: the reads
// waiting for it end with status st (StatusBusy when the pool had no
// room, which D retries within the lease; StatusInternal when the tier
// lost them, after which D falls back). The lease keeps its spilled
// blocks in the tier.
func (p *Producer) RestoreFailed(now clock.Instant, id wire.LeaseID, st wire.Status) {
	l, ok := p.leases[id]
	if !ok || l.spill == nil || !l.spill.restoring {
		return
	}
	waiting := l.spill.waiting
	l.spill.waiting = nil
	l.spill.restoring = false
	for _, w := range waiting {
		if p.reads[w.key] != l {
			continue
		}
		p.stats.ReadsRefused++
		if st == wire.StatusBusy {
			p.stats.ReadsBusy++
		}
		p.out = append(p.out, Envelope{Session: w.key.s, Msg: &wire.ReadEnd{ReadID: w.key.id, Lease: l.id, Status: st}})
		p.finishRead(now, w.key, l, false)
	}
}

// dropWaiting forgets read key of l if it waits for a restore (its
// session ended).
func (l *leaseState) dropWaiting(key readKey) {
	if l.spill == nil {
		return
	}
	w := l.spill.waiting
	for i := range w {
		if w[i].key == key {
			l.spill.waiting = append(w[:i], w[i+1:]...)
			return
		}
	}
}

// OnUnspill sets the function called when a lease with spilled blocks is
// released: the caller releases their tier copies with it (the offload
// coordinator's UnpinLease). The engine core sets it.
func (p *Producer) OnUnspill(fn func(wire.LeaseID)) { p.unspillFn = fn }

// NumSpilledBlocks is the number of lease blocks spilled now (O(live
// leases)).
func (p *Producer) NumSpilledBlocks() int {
	n := 0
	for _, l := range p.leases {
		if l.spill != nil {
			n += l.spill.n
		}
	}
	return n
}

// Resident reports whether block index ix of live lease id is in the pool
// under the lease's hold, so a read may stream it (for the simulator's
// invariants).
func (p *Producer) Resident(id wire.LeaseID, ix int) bool {
	l, ok := p.leases[id]
	if !ok || ix < 0 || ix >= p.numBlocks(l) {
		return false
	}
	if l.spill != nil && l.spill.out[ix] {
		return false
	}
	b := p.blockAt(l, ix)
	for _, hb := range p.pool.Blocks(l.hold) {
		if hb == b {
			return true
		}
	}
	return false
}

// checkSpill verifies l's spill state against the pool: the hold names
// exactly the resident blocks, the count of spilled blocks is right, and
// waiting reads are pinned reads of l.
func (p *Producer) checkSpill(l *leaseState) error {
	sp := l.spill
	if sp == nil {
		return nil
	}
	n := 0
	for _, o := range sp.out {
		if o {
			n++
		}
	}
	if n != sp.n || p.pool.Len(l.hold) != len(sp.blocks)-n {
		return fmt.Errorf("xfer: lease %d has %d blocks spilled (counted %d) and holds %d of %d", l.id, n, sp.n, p.pool.Len(l.hold), len(sp.blocks))
	}
	if sp.restoring && sp.n == 0 {
		return fmt.Errorf("xfer: lease %d restores with nothing spilled", l.id)
	}
	if sp.storing && (sp.n != 0 || len(sp.offer) == 0) {
		return fmt.Errorf("xfer: lease %d stores a spill of %d blocks with %d spilled", l.id, len(sp.offer), sp.n)
	}
	for _, w := range sp.waiting {
		if p.reads[w.key] != l {
			return fmt.Errorf("xfer: lease %d has a waiting read that is not its read in flight", l.id)
		}
	}
	return nil
}
