package offload

import (
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

// TestScenarioS21PolicyWatermark (docs/scenarios.md S21, at the policy): the
// watermark advances over accepted and already-present blocks, stops
// before the first refused one, and does not move when the whole offer is
// refused; the next trigger offers from the watermark again.
func TestScenarioS21PolicyWatermark(t *testing.T) {
	p := newWatermarks(2, 4)
	in := hs(hA, hB, hC, hD, hE)
	if m := p.track(7); m == nil || m[0] != 0 {
		t.Fatalf("track = %v; want watermark 0", m)
	}
	// Tier full: nothing accepted.
	if w := p.offered(7, 0, 0, in, StorePlan{}, false); w != 0 {
		t.Fatalf("watermark %d after a refused batch, want 0", w)
	}
	// A present (not in the plan), B accepted, C refused, D accepted, E
	// refused: the watermark stops before C.
	plan := StorePlan{Hashes: hs(hB, hD), Refused: hs(hC, hE)}
	if w := p.offered(7, 0, 0, in, plan, true); w != 2 || p.get(7, 0) != 2 {
		t.Fatalf("watermark %d, want 2 (before refused C)", w)
	}
	// The other tier has its own watermark.
	if w := p.get(7, 1); w != 0 {
		t.Fatalf("tier 1 watermark %d, want 0", w)
	}
	// Everything accepted: past the end.
	if w := p.offered(7, 0, 2, in[2:], StorePlan{Hashes: hs(hC, hD, hE)}, true); w != 5 {
		t.Fatalf("watermark %d, want 5", w)
	}
	mustPanic(t, "watermark is 5", func() { p.offered(7, 0, 3, in[3:], StorePlan{}, true) })
	mustPanic(t, "untracked", func() { p.offered(8, 0, 0, in, StorePlan{}, true) })
	p.forget(7)
	if p.get(7, 0) != 0 || len(p.m) != 0 {
		t.Fatal("forget kept state")
	}
}

// TestPolicyTriggersAndBound: which triggers offer under each built-in
// policy, and a request beyond MaxRequests is tracked by no watermark.
func TestPolicyTriggersAndBound(t *testing.T) {
	want := map[PolicyKind][3]bool{
		StoreOnCompute: {true, true, true},
		PreemptionOnly: {false, true, false},
		Spillover:      {false, false, false},
		StoreOnFinish:  {false, false, true},
		RequestLevel:   {false, false, true},
	}
	if len(want) != len(PolicyNames) {
		t.Fatalf("%d policies tested of %d", len(want), len(PolicyNames))
	}
	env := PolicyEnv{NumTiers: 1, TierBlocks: 8, PoolBlocks: 8, MaxRequests: 2}
	for k, w := range want {
		p := NewPolicy(k, env)
		if p.Name() != k.String() {
			t.Errorf("%v is named %q", k, p.Name())
		}
		for i, tr := range []Trigger{OnCompute, OnPreempt, OnFinish} {
			off := p.Request(RequestEvent{Trigger: tr, Req: 1, Blocks: []kvblock.BlockID{0, 1, 2}, Hashes: hs(hA, hB, hC)})
			if (off.To == 3) != w[i] || off.Whole != (k == RequestLevel && w[i]) {
				t.Errorf("%v offers %+v on %v", k, off, tr)
			}
		}
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
	}
	m := newWatermarks(1, 2)
	m.track(1)
	m.track(2)
	if m.track(3) != nil || len(m.m) != 2 {
		t.Fatal("third request tracked with bound 2")
	}
	m.forget(1)
	if m.track(3) == nil {
		t.Fatal("request not tracked after room was made")
	}
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
}

// TestRequestLevelLoadable: a lookup loads only runs ending at the last
// block of a unit some request stored; the remembered ends are bounded.
func TestRequestLevelLoadable(t *testing.T) {
	p := NewPolicy(RequestLevel, PolicyEnv{NumTiers: 1, TierBlocks: 2, PoolBlocks: 8, MaxRequests: 2})
	p.Request(RequestEvent{Trigger: OnFinish, Req: 1, Blocks: []kvblock.BlockID{0, 1}, Hashes: hs(hA, hB)})
	in := hs(hA, hB, hC, hD)
	if k := p.Loadable(in, 0, 4); k != 2 {
		t.Fatalf("loadable %d, want 2 (the unit A B)", k)
	}
	if k := p.Loadable(in, 0, 1); k != 0 {
		t.Fatalf("loadable %d of a unit's head, want 0", k)
	}
	if k := p.Loadable(in, 1, 1); k != 1 {
		t.Fatalf("loadable %d after a primary hit on A, want 1 (ends at B)", k)
	}
	p.Request(RequestEvent{Trigger: OnFinish, Req: 2, Blocks: []kvblock.BlockID{0, 1, 2, 3}, Hashes: in})
	if k := p.Loadable(in, 0, 4); k != 4 {
		t.Fatalf("loadable %d, want 4", k)
	}
	p.Request(RequestEvent{Trigger: OnFinish, Req: 3, Blocks: []kvblock.BlockID{4}, Hashes: hs(hE)})
	// Ring of 2: the end B is forgotten.
	if k := p.Loadable(in, 0, 3); k != 0 {
		t.Fatalf("loadable %d after B was forgotten, want 0", k)
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
	p := newSpillover(8)
	hold := pool.NewHold(kvblock.HoldRequest, 1)
	pool.Allocate(hold, 4)
	blocks := append([]kvblock.BlockID(nil), pool.Blocks(hold)...)
	hashes := hs(hA, hB, hC, hD)
	pool.CacheRun(blocks, hashes, kvblock.RootHash, nil)
	p.evictable(blocks, hashes)
	pool.Release(hold)
	got, gh := p.Evicting(pool, 2, nil, nil)
	if len(got) != 2 || got[0] != blocks[3] || got[1] != blocks[2] || gh[0] != hD {
		t.Fatalf("candidates %v %x, want the last two blocks, last first", got, gh)
	}
	// Block 3 held again (a prefix hit): skipped and moved to the end.
	h2 := pool.NewHold(kvblock.HoldRequest, 2)
	pool.Share(h2, blocks[3:])
	got, _ = p.Evicting(pool, 2, nil, nil)
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
	got, _ = p.Evicting(pool, 8, nil, nil)
	if len(got) != 3 || got[0] != blocks[1] || got[1] != blocks[0] || got[2] != blocks[3] {
		t.Fatalf("candidates %v after evicting block 2", got)
	}
	if p.NumSpillCandidates() != 3 {
		t.Fatalf("%d in the mirror, want 3", p.NumSpillCandidates())
	}
	p.Placed(blocks[1])
	p.Placed(blocks[1])
	if err := p.Check(); err != nil || p.NumSpillCandidates() != 2 {
		t.Fatal(err, p.NumSpillCandidates())
	}
}
