package offload

import (
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

// TestScenarioS21PolicyWatermark (SCENARIOS.md S21, at the policy): the
// watermark advances over accepted and already-present blocks, stops
// before the first refused one, and does not move when the whole offer is
// refused; the next trigger offers from the watermark again.
func TestScenarioS21PolicyWatermark(t *testing.T) {
	p := NewPolicy(StoreOnCompute, 2, 4, 8)
	in := hs(hA, hB, hC, hD, hE)
	from, to := p.Range(OnCompute, 7, 0, 5)
	if from != 0 || to != 5 {
		t.Fatalf("Range = %d, %d; want 0, 5", from, to)
	}
	// Tier full: nothing accepted.
	if w := p.Offered(7, 0, 0, in, StorePlan{}, false); w != 0 {
		t.Fatalf("watermark %d after a refused batch, want 0", w)
	}
	// A present (not in the plan), B accepted, C refused, D accepted, E
	// refused: the watermark stops before C.
	plan := StorePlan{Hashes: hs(hB, hD), Refused: hs(hC, hE)}
	if w := p.Offered(7, 0, 0, in, plan, true); w != 2 {
		t.Fatalf("watermark %d, want 2 (before refused C)", w)
	}
	if from, to := p.Range(OnCompute, 7, 0, 5); from != 2 || to != 5 {
		t.Fatalf("next Range = %d, %d; want C onwards", from, to)
	}
	// The other tier has its own watermark.
	if from, _ := p.Range(OnCompute, 7, 1, 5); from != 0 {
		t.Fatalf("tier 1 watermark %d, want 0", from)
	}
	// Everything accepted: past the end; nothing more until a block fills.
	if w := p.Offered(7, 0, 2, in[2:], StorePlan{Hashes: hs(hC, hD, hE)}, true); w != 5 {
		t.Fatalf("watermark %d, want 5", w)
	}
	if from, to := p.Range(OnCompute, 7, 0, 5); from != to {
		t.Fatalf("Range = %d, %d with nothing new", from, to)
	}
	mustPanic(t, "watermark is 5", func() { p.Offered(7, 0, 3, in[3:], StorePlan{}, true) })
	mustPanic(t, "untracked", func() { p.Offered(8, 0, 0, in, StorePlan{}, true) })
	p.Forget(7)
	if p.Watermark(7, 0) != 0 || p.NumRequests() != 0 {
		t.Fatal("Forget kept state")
	}
}

// TestPolicyTriggersAndBound: which triggers offer under each policy, and
// a request beyond MaxRequests is offered nothing.
func TestPolicyTriggersAndBound(t *testing.T) {
	want := map[PolicyKind][3]bool{
		StoreOnCompute: {true, true, true},
		PreemptionOnly: {false, true, false},
		Spillover:      {false, false, false},
	}
	for k, w := range want {
		p := NewPolicy(k, 1, 2, 8)
		for i, tr := range []Trigger{OnCompute, OnPreempt, OnFinish} {
			if p.Offers(tr) != w[i] {
				t.Errorf("%v offers on %v = %v", k, tr, !w[i])
			}
			if _, to := p.Range(tr, 1, 0, 3); (to == 3) != w[i] {
				t.Errorf("%v Range on %v = %d", k, tr, to)
			}
		}
	}
	p := NewPolicy(StoreOnCompute, 1, 2, 8)
	p.Range(OnCompute, 1, 0, 3)
	p.Range(OnCompute, 2, 0, 3)
	if from, to := p.Range(OnCompute, 3, 0, 3); from != to || p.NumRequests() != 2 {
		t.Fatalf("third request offered %d..%d with bound 2", from, to)
	}
	p.Forget(1)
	if _, to := p.Range(OnCompute, 3, 0, 3); to != 3 {
		t.Fatal("request not tracked after room was made")
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestSpillMirror: the eviction-order mirror follows the pool's order
// (tails first), moves re-registered and held blocks to the end, and drops
// blocks that were evicted.
func TestSpillMirror(t *testing.T) {
	pool := kvblock.New(kvblock.Config{NumBlocks: 8, BlockSizeTokens: 1})
	p := NewPolicy(Spillover, 1, 4, 8)
	hold := pool.NewHold(kvblock.HoldRequest, 1)
	pool.Allocate(hold, 4)
	blocks := append([]kvblock.BlockID(nil), pool.Blocks(hold)...)
	hashes := hs(hA, hB, hC, hD)
	pool.CacheRun(blocks, hashes, kvblock.RootHash, nil)
	p.Evictable(blocks, hashes)
	pool.Release(hold)
	got, gh := p.SpillCandidates(pool, 2, nil, nil)
	if len(got) != 2 || got[0] != blocks[3] || got[1] != blocks[2] || gh[0] != hD {
		t.Fatalf("candidates %v %x, want the last two blocks, last first", got, gh)
	}
	// Block 3 held again (a prefix hit): skipped and moved to the end.
	h2 := pool.NewHold(kvblock.HoldRequest, 2)
	pool.Share(h2, blocks[3:])
	got, _ = p.SpillCandidates(pool, 2, nil, nil)
	if len(got) != 2 || got[0] != blocks[2] || got[1] != blocks[1] {
		t.Fatalf("candidates %v with block 3 held", got)
	}
	pool.Release(h2)
	// Evict block 2 (the LRU head now): it is dropped.
	h3 := pool.NewHold(kvblock.HoldRequest, 3)
	pool.Allocate(h3, pool.NumFree()+1)
	if _, cached := pool.Cached(blocks[2]); cached {
		t.Fatal("block 2 not evicted")
	}
	got, _ = p.SpillCandidates(pool, 8, nil, nil)
	if len(got) != 3 || got[0] != blocks[1] || got[1] != blocks[0] || got[2] != blocks[3] {
		t.Fatalf("candidates %v after evicting block 2", got)
	}
	if p.NumSpillCandidates() != 3 {
		t.Fatalf("%d in the mirror, want 3", p.NumSpillCandidates())
	}
	p.Spilled(blocks[1])
	p.Spilled(blocks[1])
	if err := p.Check(); err != nil || p.NumSpillCandidates() != 2 {
		t.Fatal(err, p.NumSpillCandidates())
	}
}
