package offload

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
)

// spillover offers cached blocks with no hold that are next in line to be
// evicted from the primary pool, while the pool is short of free blocks:
// it copies only what the pool is about to lose, late, so the tiers hold
// the blocks the pool could not keep; a block evicted before its store is
// accepted is lost.
//
// It keeps an approximate copy of the primary pool's eviction order: the
// blocks of finished and preempted requests, appended in the order the
// pool appends them to its LRU when their holds drop (an intrusive list
// over block ids, with the hash each block carried when it was appended).
// Evicting walks it from the head.
type spillover struct {
	spill     list
	links     links
	in        []bool
	spillHash []kvblock.Hash
}

func newSpillover(poolBlocks int) *spillover {
	return &spillover{spill: emptyList, links: newLinks(poolBlocks), in: make([]bool, poolBlocks), spillHash: make([]kvblock.Hash, poolBlocks)}
}

func (*spillover) Name() string { return Spillover.String() }

// Request notes a preempted or finished request's blocks as about to
// become evictable, and offers nothing.
func (p *spillover) Request(ev RequestEvent) Offer {
	if ev.Trigger == OnPreempt || ev.Trigger == OnFinish {
		p.evictable(ev.Blocks, ev.Hashes)
	}
	return Offer{}
}

// evictable appends blocks (a request's block table prefix, blocks[i]
// carrying hashes[i]), whose holds are about to drop, to the mirror of the
// eviction order last block first, as the pool does; a block already in
// it moves to the end.
func (p *spillover) evictable(blocks []kvblock.BlockID, hashes []kvblock.Hash) {
	n := min(len(blocks), len(hashes))
	for i := n - 1; i >= 0; i-- {
		b := blocks[i]
		if p.in[b] {
			p.links.remove(&p.spill, int32(b))
		}
		p.in[b] = true
		p.spillHash[b] = hashes[i]
		p.links.pushBack(&p.spill, int32(b))
	}
}

// Evicting appends up to n blocks from the head of the eviction-order
// mirror that are evictable in pool right now (cached with the hash they
// were appended with, and no hold). On the way it drops blocks that were
// evicted or re-cached since, and moves blocks that are held again to the
// end (when their holds drop they rejoin the pool's LRU at its end). Each
// entry is visited at most once per call, so a call costs O(mirror
// length) at worst.
func (p *spillover) Evicting(pool *kvblock.Pool, n int, blocks []kvblock.BlockID, hashes []kvblock.Hash) ([]kvblock.BlockID, []kvblock.Hash) {
	found := 0
	i := p.spill.head
	for visits := p.spill.n; visits > 0 && found < n && i != nilNode; visits-- {
		next := p.links.next[i]
		b := kvblock.BlockID(i)
		h, cached := pool.Cached(b)
		switch {
		case !cached || h != p.spillHash[b]:
			p.Placed(b) // gone from the pool: too late
		case pool.Refs(b) > 0:
			p.links.remove(&p.spill, i)
			p.links.pushBack(&p.spill, i)
		default:
			// A candidate stays where it is: if a tier refuses it, it is
			// still next in line and is offered again by the next call,
			// until it is stored or evicted.
			blocks = append(blocks, b)
			hashes = append(hashes, h)
			found++
		}
		i = next
	}
	return blocks, hashes
}

// Placed removes block b from the eviction-order mirror (it is stored in
// every tier, or gone). Removing a block that is not in it is a no-op.
func (p *spillover) Placed(b kvblock.BlockID) {
	if !p.in[b] {
		return
	}
	p.links.remove(&p.spill, int32(b))
	p.in[b] = false
}

func (*spillover) Loadable(_ []kvblock.Hash, _, hits int) int { return hits }

func (*spillover) Forget(uint64) {}

// NumSpillCandidates is the length of the eviction-order mirror.
func (p *spillover) NumSpillCandidates() int { return p.spill.n }

// Check verifies the mirror's links and membership flags.
func (p *spillover) Check() error {
	seen := 0
	for i, prev := p.spill.head, nilNode; i != nilNode; prev, i = i, p.links.next[i] {
		if p.links.prev[i] != prev {
			return fmt.Errorf("offload: spill list link broken at block %d", i)
		}
		if !p.in[i] {
			return fmt.Errorf("offload: block %d in the spill list but not flagged", i)
		}
		if seen++; seen > len(p.in) {
			return fmt.Errorf("offload: spill list has a cycle")
		}
	}
	flagged := 0
	for _, in := range p.in {
		if in {
			flagged++
		}
	}
	if seen != p.spill.n || flagged != seen {
		return fmt.Errorf("offload: spill list has %d blocks, counted %d, flagged %d", seen, p.spill.n, flagged)
	}
	return nil
}
