package offload

import (
	"fmt"
	"slices"

	"github.com/kvlease/kvlease/kvblock"
)

// Trigger says why a request's blocks are being offered.
type Trigger uint8

const (
	// OnCompute: a step computed more of the request.
	OnCompute Trigger = iota + 1
	// OnPreempt: the request is about to lose its blocks to preemption.
	OnPreempt
	// OnFinish: the request finished; its hold is about to be dropped.
	OnFinish
)

func (t Trigger) String() string {
	switch t {
	case OnCompute:
		return "compute"
	case OnPreempt:
		return "preempt"
	case OnFinish:
		return "finish"
	}
	return fmt.Sprintf("Trigger(%d)", t)
}

// Policy decides which blocks are offered to the offload tiers, and when.
//
// The per-request policies (StoreOnCompute, PreemptionOnly) keep, for each
// request and tier, a watermark: the request's leading full blocks
// [0, watermark) are in that tier (accepted by its Manager, or already
// present). A watermark advances only over blocks the Manager accepted:
// when the Manager refuses a block (reuse threshold not met) the watermark
// stops before it, and when it refuses the whole batch (tier full of
// blocks being stored or loaded) the watermark stays, so the refused
// blocks are offered again at the next trigger (S21). Block indexes name
// prefix positions, and a request's full blocks never change, so a
// watermark survives preemption.
//
// Spillover keeps instead an approximate copy of the primary pool's
// eviction order: the blocks of finished and preempted requests, appended
// in the order the pool appends them to its LRU when their holds drop.
// SpillCandidates walks it from the head.
//
// Not safe for concurrent use.
type Policy struct {
	kind        PolicyKind
	numTiers    int
	maxRequests int
	marks       map[uint64][]int // per request: watermark per tier

	// Spillover's mirror of the pool's LRU: an intrusive list over block
	// ids with the hash each block carried when it was appended.
	spill      list
	spillLinks links
	spillIn    []bool
	spillHash  []kvblock.Hash
}

// NewPolicy returns a policy of kind for numTiers tiers, tracking at most
// maxRequests requests, over a primary pool of poolBlocks blocks. It panics
// on bad arguments: configuration is validated at the edges.
func NewPolicy(kind PolicyKind, numTiers, maxRequests, poolBlocks int) *Policy {
	if kind < StoreOnCompute || kind > Spillover || numTiers < 1 || maxRequests < 1 || poolBlocks < 1 {
		panic(fmt.Sprintf("offload: NewPolicy(%v, %d tiers, %d requests, %d blocks)", kind, numTiers, maxRequests, poolBlocks))
	}
	p := &Policy{kind: kind, numTiers: numTiers, maxRequests: maxRequests, marks: make(map[uint64][]int)}
	if kind == Spillover {
		p.spill = emptyList
		p.spillLinks = newLinks(poolBlocks)
		p.spillIn = make([]bool, poolBlocks)
		p.spillHash = make([]kvblock.Hash, poolBlocks)
	}
	return p
}

// Kind is the policy's kind.
func (p *Policy) Kind() PolicyKind { return p.kind }

// NumRequests is the number of requests with watermarks.
func (p *Policy) NumRequests() int { return len(p.marks) }

// Offers reports whether trigger tr offers a request's blocks under this
// policy.
func (p *Policy) Offers(tr Trigger) bool {
	switch p.kind {
	case StoreOnCompute:
		return true
	case PreemptionOnly:
		return tr == OnPreempt
	}
	return false
}

// Range returns the blocks [from, to) of request req that trigger tr
// offers to tier: from is the tier's watermark and to is numFull, the
// request's computed full blocks; from == to means nothing to offer. It
// starts tracking req if needed; at the MaxRequests bound an untracked
// request is offered nothing.
func (p *Policy) Range(tr Trigger, req uint64, tier, numFull int) (from, to int) {
	p.checkTier(tier)
	if !p.Offers(tr) {
		return 0, 0
	}
	m, ok := p.marks[req]
	if !ok {
		if len(p.marks) >= p.maxRequests {
			return 0, 0
		}
		m = make([]int, p.numTiers)
		p.marks[req] = m
	}
	if m[tier] >= numFull {
		return m[tier], m[tier]
	}
	return m[tier], numFull
}

// Offered records the Manager's answer to an offer of hashes (request
// req's blocks [from, from+len(hashes)) ) to tier: ok and plan are
// PrepareStore's results. The watermark advances to just before the first
// block the tier does not hold after the call — refused, or evicted by the
// call itself to make room — or past all of them; without ok it stays. It
// returns the new watermark. It costs O(len(hashes) × (refused + evicted)),
// and the refused and evicted lists are short unless the tier thrashes.
func (p *Policy) Offered(req uint64, tier, from int, hashes []kvblock.Hash, plan StorePlan, ok bool) int {
	p.checkTier(tier)
	m, tracked := p.marks[req]
	if !tracked {
		panic(fmt.Sprintf("offload: Offered for untracked request %d", req))
	}
	if m[tier] != from {
		panic(fmt.Sprintf("offload: request %d offered from block %d but its tier %d watermark is %d", req, from, tier, m[tier]))
	}
	if !ok {
		return m[tier]
	}
	// Stop at the first block the tier does not hold now: refused, or
	// present before the call but evicted by it to make room (PrepareStore
	// does not protect present input blocks).
	to := from + len(hashes)
	if len(plan.Refused) > 0 || len(plan.Evicted) > 0 {
		for i, h := range hashes {
			if slices.Contains(plan.Refused, h) || slices.Contains(plan.Evicted, h) {
				to = from + i
				break
			}
		}
	}
	m[tier] = to
	return to
}

// Watermark is request req's watermark for tier (0 when untracked).
func (p *Policy) Watermark(req uint64, tier int) int {
	p.checkTier(tier)
	if m, ok := p.marks[req]; ok {
		return m[tier]
	}
	return 0
}

// Forget drops request req's watermarks (it finished).
func (p *Policy) Forget(req uint64) { delete(p.marks, req) }

func (p *Policy) checkTier(tier int) {
	if tier < 0 || tier >= p.numTiers {
		panic(fmt.Sprintf("offload: tier %d of %d", tier, p.numTiers))
	}
}

// Evictable tells the spillover policy that blocks (a request's block table
// prefix, blocks[i] carrying hashes[i]) become evictable when their holds
// drop. They are appended to the mirror of the eviction order last block
// first, as the pool does; a block already in it moves to the end. Other
// policies ignore it.
func (p *Policy) Evictable(blocks []kvblock.BlockID, hashes []kvblock.Hash) {
	if p.kind != Spillover {
		return
	}
	n := min(len(blocks), len(hashes))
	for i := n - 1; i >= 0; i-- {
		b := blocks[i]
		if p.spillIn[b] {
			p.spillLinks.remove(&p.spill, int32(b))
		}
		p.spillIn[b] = true
		p.spillHash[b] = hashes[i]
		p.spillLinks.pushBack(&p.spill, int32(b))
	}
}

// SpillCandidates appends to blocks and hashes up to n blocks from the head
// of the eviction-order mirror that are evictable in pool right now (cached
// with the hash they were appended with, and no hold), and returns them.
// On the way it drops blocks that were evicted or re-cached since, and
// moves blocks that are held again to the end (when their holds drop they
// rejoin the pool's LRU at its end). Each entry is visited at most once per
// call, so a call costs O(mirror length) at worst.
func (p *Policy) SpillCandidates(pool *kvblock.Pool, n int, blocks []kvblock.BlockID, hashes []kvblock.Hash) ([]kvblock.BlockID, []kvblock.Hash) {
	if p.kind != Spillover {
		return blocks, hashes
	}
	found := 0
	i := p.spill.head
	for visits := p.spill.n; visits > 0 && found < n && i != nilNode; visits-- {
		next := p.spillLinks.next[i]
		b := kvblock.BlockID(i)
		h, cached := pool.Cached(b)
		switch {
		case !cached || h != p.spillHash[b]:
			p.Spilled(b) // gone from the pool: too late
		case pool.Refs(b) > 0:
			p.spillLinks.remove(&p.spill, i)
			p.spillLinks.pushBack(&p.spill, i)
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

// Spilled removes block b from the eviction-order mirror (it is stored in
// every tier, or gone). Removing a block that is not in it is a no-op.
func (p *Policy) Spilled(b kvblock.BlockID) {
	if p.kind != Spillover || !p.spillIn[b] {
		return
	}
	p.spillLinks.remove(&p.spill, int32(b))
	p.spillIn[b] = false
}

// NumSpillCandidates is the length of the eviction-order mirror.
func (p *Policy) NumSpillCandidates() int { return p.spill.n }

// Check verifies the mirror's links and membership flags.
func (p *Policy) Check() error {
	if len(p.marks) > p.maxRequests {
		return fmt.Errorf("offload: policy tracks %d requests, bound %d", len(p.marks), p.maxRequests)
	}
	if p.kind != Spillover {
		return nil
	}
	seen := 0
	for i, prev := p.spill.head, nilNode; i != nilNode; prev, i = i, p.spillLinks.next[i] {
		if p.spillLinks.prev[i] != prev {
			return fmt.Errorf("offload: spill list link broken at block %d", i)
		}
		if !p.spillIn[i] {
			return fmt.Errorf("offload: block %d in the spill list but not flagged", i)
		}
		if seen++; seen > len(p.spillIn) {
			return fmt.Errorf("offload: spill list has a cycle")
		}
	}
	flagged := 0
	for _, in := range p.spillIn {
		if in {
			flagged++
		}
	}
	if seen != p.spill.n || flagged != seen {
		return fmt.Errorf("offload: spill list has %d blocks, counted %d, flagged %d", seen, p.spill.n, flagged)
	}
	return nil
}
