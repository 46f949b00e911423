package offload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

// TestCoordinatorMatchesModel runs random engine-like operations (requests
// arriving, computing, growing, being preempted and finishing; stores and
// loads completing in any order, fully or part way; tier records being
// corrupted or lost) against a Coordinator and checks after every one:
//
//   - Pool.Check and Coordinator.Check pass;
//   - every block's hold count equals a naive model's: the request holds
//     the test made, plus one per store work not yet done that names it,
//     plus one per load group (primary prefix and targets) not yet done;
//   - every cached block, and every block being stored, holds the content
//     of its hash (so no block is reused while a store reads it, and no
//     load puts content under the wrong hash);
//   - every block a tier reports ready has a record with the right content
//     unless the test damaged it;
//   - a watermark passes only blocks present in the tier, and stops only
//     at a block the tier does not hold (or at the in-flight bound).
//
// At the end every request finishes and all work drains: no hold is left
// and the coordinator is idle.
func TestCoordinatorMatchesModel(t *testing.T) {
	const runs, ops = 24, 1500
	for i := range runs {
		seed := uint64(4200 + i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runCoordinatorRandom(t, rand.New(rand.NewPCG(seed, 99)), ops)
		})
	}
}

type rreq struct {
	*hreq
	state   int // running, waiting, loading
	blocks  []kvblock.BlockID
	loadRef []kvblock.BlockID // blocks of its load hold, while loading
}

const (
	stRunning = iota
	stWaiting
	stLoading
)

func runCoordinatorRandom(t *testing.T, rng *rand.Rand, ops int) {
	poolBlocks := 6 + rng.IntN(20)
	cfg := Config{Policy: PolicyKind(1 + rng.IntN(len(PolicyNames))), Eviction: []string{EvictionLRU, EvictionARC}[rng.IntN(2)]}
	cfg.Tiers = []TierConfig{{Medium: MediumCPU, Blocks: 1 + rng.IntN(2*poolBlocks)}}
	if rng.IntN(2) == 0 {
		cfg.Tiers = append(cfg.Tiers, TierConfig{Medium: MediumDisk, Path: "/nonexistent", Blocks: 1 + rng.IntN(3*poolBlocks)})
	}
	if rng.IntN(3) == 0 && cfg.Policy != RequestLevel {
		cfg.StoreThreshold = 2
	}
	cfg.MaxInflightStoreBlocks = 1 + rng.IntN(2*poolBlocks)
	cfg.MaxInflightLoadBlocks = 1 + rng.IntN(poolBlocks)
	cfg.SpillAheadBlocks = 1 + rng.IntN(poolBlocks)
	cfg.MaxRequests = 1 + rng.IntN(8)
	t.Logf("pool %d blocks, config %+v", poolBlocks, cfg)
	h := newHarness(t, poolBlocks, cfg)
	damaged := map[[2]int]bool{} // (tier, slot) records the test broke

	// Prompts share prefixes: a few token chains.
	chains := make([][]int32, 4)
	for i := range chains {
		chains[i] = tokens(rng.IntN(1000), 4*poolBlocks)
	}
	var reqs []*rreq
	nextID := uint64(0)
	loadWorks := map[uint64]int{}             // load works in flight per request
	orphans := map[uint64][]kvblock.BlockID{} // load holds of requests that finished while loading

	admit := func(r *rreq) {
		if h.admit(r.hreq) {
			r.state = stRunning
			r.blocks = slices.Clone(h.pool.Blocks(r.hold))
		} else {
			r.state = stWaiting
		}
	}
	// arrive looks r up (as the engine does before queueing it) and
	// admits it unless it is loading.
	arrive := func(r *rreq) {
		maxHit := (len(r.tokens) - 1) / h.bs
		hits := h.pool.Lookup(nil, r.hashes[:min(len(r.hashes), maxHit)])
		if h.c.Lookup(r.id, r.tokens, r.hashes) {
			r.state = stLoading
			r.loadRef = slices.Clone(hits)
			for _, w := range h.take().Loads {
				if w.Req != r.id {
					t.Fatalf("load for request %d from a lookup of %d", w.Req, r.id)
				}
				r.loadRef = append(r.loadRef, w.Blocks...)
				loadWorks[r.id]++
			}
			return
		}
		admit(r)
	}
	remove := func(r *rreq) { reqs = slices.DeleteFunc(reqs, func(q *rreq) bool { return q == r }) }
	pick := func(state int) *rreq {
		var c []*rreq
		for _, r := range reqs {
			if r.state == state {
				c = append(c, r)
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[rng.IntN(len(c))]
	}
	// offered runs a hook and checks the watermarks it moved.
	offered := func(r *rreq, hook func()) {
		tracked := h.c.marks.m[r.id] != nil
		type mark struct{ before, budget int }
		marks := make([]mark, len(cfg.Tiers))
		for ti := range marks {
			marks[ti] = mark{h.c.Watermark(r.id, ti), cfg.MaxInflightStoreBlocks - h.c.inStore}
		}
		hook()
		if tracked && h.c.marks.m[r.id] == nil {
			return // finished: forgotten
		}
		full := min(r.computed/h.bs, len(r.hashes))
		for ti, m := range marks {
			after := h.c.Watermark(r.id, ti)
			if after < m.before {
				t.Fatalf("request %d tier %d watermark went back from %d to %d", r.id, ti, m.before, after)
			}
			for i := m.before; i < after; i++ {
				if _, present := h.c.Manager(ti).Contains(r.hashes[i]); !present {
					t.Fatalf("request %d tier %d watermark passed block %d which the tier does not hold", r.id, ti, i)
				}
			}
			if after > m.before && after < full && after-m.before < m.budget {
				if _, present := h.c.Manager(ti).Contains(r.hashes[after]); present {
					t.Fatalf("request %d tier %d watermark stopped at block %d which the tier holds", r.id, ti, after)
				}
			}
		}
	}
	finish := func(r *rreq) {
		switch r.state {
		case stRunning:
			offered(r, func() { h.c.Finished(r.id, h.pool.Blocks(r.hold), r.hashes, r.computed) })
			h.pool.Release(r.hold)
			r.hold = 0
		case stLoading:
			orphans[r.id] = r.loadRef
			h.c.Finished(r.id, nil, nil, 0)
		default:
			h.c.Finished(r.id, nil, nil, 0)
		}
		remove(r)
	}

	for op := range ops {
		var what string
		switch k := rng.IntN(100); {
		case k < 14:
			if len(reqs) >= 12 {
				continue
			}
			nextID++
			ch := chains[rng.IntN(len(chains))]
			n := 1 + rng.IntN(len(ch)/2)
			r := &rreq{hreq: h.newReq(nextID, ch[:n])}
			reqs = append(reqs, r)
			what = fmt.Sprintf("arrive %d (%d tokens)", r.id, n)
			arrive(r)
		case k < 34:
			r := pick(stRunning)
			if r == nil {
				continue
			}
			what = fmt.Sprintf("step %d", r.id)
			if r.computed < len(r.tokens) {
				n := min(len(r.tokens), r.computed+1+rng.IntN(9))
				offered(r, func() { h.compute(r.hreq, n) })
				break
			}
			// Decode: append tokens, grow the block table, compute.
			grow := 1 + rng.IntN(6)
			for range grow {
				r.tokens = append(r.tokens, int32(rng.IntN(50)))
			}
			r.hashes = kvblock.AppendHashes(r.hashes, r.tokens, h.bs, kvblock.Extras{})
			need := (len(r.tokens)+h.bs-1)/h.bs - h.pool.Len(r.hold)
			if need > 0 && !h.pool.Allocate(r.hold, need) {
				what = fmt.Sprintf("preempt %d (pool full)", r.id)
				offered(r, func() { h.preempt(r.hreq) })
				r.state, r.blocks = stWaiting, nil
				break
			}
			r.blocks = slices.Clone(h.pool.Blocks(r.hold))
			offered(r, func() { h.compute(r.hreq, len(r.tokens)) })
		case k < 40:
			r := pick(stRunning)
			if r == nil {
				continue
			}
			what = fmt.Sprintf("preempt %d", r.id)
			offered(r, func() { h.preempt(r.hreq) })
			r.state, r.blocks = stWaiting, nil
		case k < 46:
			r := pick(stWaiting)
			if r == nil {
				continue
			}
			what = fmt.Sprintf("re-admit %d", r.id)
			arrive(r)
		case k < 54:
			if len(reqs) == 0 {
				continue
			}
			r := reqs[rng.IntN(len(reqs))]
			what = fmt.Sprintf("finish %d (state %d)", r.id, r.state)
			finish(r)
		case k < 72:
			if len(h.stores) == 0 {
				continue
			}
			i := rng.IntN(len(h.stores))
			copied := len(h.stores[i].Blocks)
			if rng.IntN(6) == 0 {
				copied = rng.IntN(copied + 1)
			}
			what = fmt.Sprintf("store %d done (%d of %d)", h.stores[i].ID, copied, len(h.stores[i].Blocks))
			w := h.stores[i]
			h.runStore(i, copied)
			for k := range copied {
				delete(damaged, [2]int{w.Tier, int(w.Slots[k])})
			}
		case k < 86:
			if len(h.loads) == 0 {
				continue
			}
			i := rng.IntN(len(h.loads))
			w := h.loads[i]
			what = fmt.Sprintf("load %d done (request %d)", w.ID, w.Req)
			req, ready := h.runLoad(i)
			if req != w.Req {
				t.Fatalf("LoadDone reported request %d for a load of %d", req, w.Req)
			}
			if loadWorks[req]--; loadWorks[req] == 0 {
				delete(loadWorks, req)
				delete(orphans, req)
				if !ready && h.c.Loading(req) {
					t.Fatalf("request %d still loading after its last load", req)
				}
			} else if ready {
				t.Fatalf("request %d ready with %d loads in flight", req, loadWorks[req])
			}
			var r *rreq
			for _, q := range reqs {
				if q.id == req {
					r = q
				}
			}
			if ready {
				if r == nil || r.state != stLoading {
					t.Fatalf("request %d reported ready but it is not loading", req)
				}
				r.loadRef = nil
				admit(r)
			}
		case k < 88:
			ti := rng.IntN(len(cfg.Tiers))
			if len(h.tiers[ti]) == 0 {
				continue
			}
			slots := slices.Sorted(func(yield func(Slot) bool) {
				for s := range h.tiers[ti] {
					if !yield(s) {
						return
					}
				}
			})
			s := slots[rng.IntN(len(slots))]
			what = fmt.Sprintf("damage tier %d slot %d", ti, s)
			if rng.IntN(2) == 0 {
				delete(h.tiers[ti], s)
			} else {
				h.tiers[ti][s] = record{hash: kvblock.Hash{}} // no block has the zero hash (RootHash)
			}
			damaged[[2]int{ti, int(s)}] = true
		default:
			what = "take"
			h.take()
		}
		h.take()
		h.check(fmt.Sprintf("op %d %s", op, what))
		// Hold counts against the model.
		want := make([]int, poolBlocks)
		for _, r := range reqs {
			if r.state == stRunning {
				for _, b := range r.blocks {
					want[b]++
				}
			}
			if r.state == stLoading {
				for _, b := range r.loadRef {
					want[b]++
				}
			}
		}
		for _, w := range h.stores {
			for _, b := range w.Blocks {
				want[b]++
			}
		}
		// Loads of finished requests still hold their blocks.
		for _, blocks := range orphans {
			for _, b := range blocks {
				want[b]++
			}
		}
		for b := range want {
			if got := h.pool.Refs(kvblock.BlockID(b)); got != want[b] {
				t.Fatalf("op %d %s: block %d has %d holds, model %d", op, what, b, got, want[b])
			}
		}
		// Ready tier blocks have their records, unless damaged.
		for ti := range cfg.Tiers {
			m := h.c.Manager(ti)
			for s := range m.numBlocks {
				if m.member[s] == listNone || m.pins[s] == notReady || damaged[[2]int{ti, int(s)}] {
					continue
				}
				hash := m.hash[s]
				rec, ok := h.tiers[ti][Slot(s)]
				if !ok || rec.hash != hash || !slices.Equal(rec.digests, h.expect[hash]) {
					t.Fatalf("op %d %s: tier %d slot %d is ready with hash %x but its record is wrong", op, what, ti, s, hash)
				}
			}
		}
	}
	// Liveness: finish everything, drain all work.
	for len(reqs) > 0 {
		finish(reqs[0])
	}
	h.take()
	for round := 0; len(h.stores)+len(h.loads) > 0; round++ {
		if round > 1000 {
			t.Fatal("work does not drain")
		}
		for len(h.loads) > 0 {
			if _, ready := h.runLoad(0); ready {
				t.Fatal("a finished request was reported ready")
			}
		}
		clear(orphans)
		for len(h.stores) > 0 {
			h.runStore(0, len(h.stores[0].Blocks))
		}
		h.take()
	}
	h.check("drained")
	if h.pool.NumHeld() != 0 || !h.c.Idle() || h.c.Stats().Requests != 0 {
		t.Fatalf("after draining: %d blocks held, idle %v, %d requests tracked", h.pool.NumHeld(), h.c.Idle(), h.c.Stats().Requests)
	}
	st := h.c.Stats()
	t.Logf("stats %+v", st)
}
