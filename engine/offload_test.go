package engine

import (
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/sched"
)

// TestS20FinishedRequestBlocksHeldUntilStored (docs/scenarios.md S20): a request
// finishes while the stores of its blocks are in flight; its request hold
// goes at once, but each block stays held (not evictable, not reusable by
// another request) until its own store completes, then becomes evictable.
func TestS20FinishedRequestBlocksHeldUntilStored(t *testing.T) {
	sc := sched.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 32, MaxWaiting: 16, ChunkedPrefill: true}
	cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 64}})
	cfg.MaxInflightStoreBlocks = 4 // default: a quarter of the pool, 1 block
	h := newOffloadCore(t, 4, sc, &cfg)
	core, pool := h.core, h.core.Pool()
	prompt := make([]int32, 49) // 3 full blocks and one token: the whole pool
	for i := range prompt {
		prompt[i] = int32(40 + i)
	}
	if res := core.Add(h.now, &Request{ID: "a", Prompt: prompt, MaxTokens: 1}); res != Accepted {
		t.Fatal(res)
	}
	queue := false // whether step queues the copies of its Ready
	step := func() Ready {
		t.Helper()
		rd := core.Step(h.now)
		if queue {
			h.queue(rd)
		}
		if err := core.Check(); err != nil {
			t.Fatal(err)
		}
		if rd.Batch != nil {
			h.exec.Execute(rd.Batch, &h.res)
			core.Complete(h.now, &h.res)
		}
		return rd
	}
	// Two chunks of 32 tokens: after the first, blocks 0 and 1 are full
	// and their store is handed out; the second computes block 2 and
	// finishes the request (with the first store still in flight), whose
	// teardown stores block 2.
	var stores []offload.StoreWork
	var blocks []kvblock.BlockID
	finished := false
	for i := 0; i < 10 && !finished; i++ {
		rd := step()
		stores = append(stores, rd.Stores...)
		for _, o := range rd.Outputs {
			finished = finished || o.Finished
		}
		if rd.Batch != nil {
			blocks = slices.Clone(rd.Batch.Seqs[0].Blocks)
		}
	}
	if !finished || len(stores) != 2 || len(stores[0].Blocks) != 2 || len(stores[1].Blocks) != 1 {
		t.Fatalf("finished %v, stores %+v", finished, stores)
	}
	if !slices.Equal(append(slices.Clone(stores[0].Blocks), stores[1].Blocks...), blocks[:3]) {
		t.Fatalf("stores of %v %v, request blocks %v", stores[0].Blocks, stores[1].Blocks, blocks)
	}
	jobs := []tier.Job{tier.StoreJob(pool, stores[0]), tier.StoreJob(pool, stores[1])}
	queue = true
	// The finished request's partial block is free; its three full ones
	// are held by their stores.
	if pool.NumHeld() != 3 || pool.NumEvictable() != 0 || pool.NumFree() != 1 {
		t.Fatalf("held %d evictable %d free %d", pool.NumHeld(), pool.NumEvictable(), pool.NumFree())
	}
	// b's first chunk needs 2 blocks: not while the stores run.
	other := make([]int32, 60)
	for i := range other {
		other[i] = int32(100 + i)
	}
	if res := core.Add(h.now, &Request{ID: "b", Prompt: other, MaxTokens: 1}); res != Accepted {
		t.Fatal(res)
	}
	for range 5 {
		if rd := step(); rd.Batch != nil || len(rd.Stores)+len(rd.Loads) != 0 {
			t.Fatalf("step with stores in flight: batch %v, stores %d, loads %d", rd.Batch != nil, len(rd.Stores), len(rd.Loads))
		}
		for _, b := range blocks[:3] {
			if pool.Refs(b) != 1 {
				t.Fatalf("block %d has %d holds", b, pool.Refs(b))
			}
		}
	}
	// The second store ends first: its block alone becomes evictable, and
	// b starts in the free block and that one.
	h.apply(tier.Run(h.stores[0], jobs[1]))
	if pool.NumHeld() != 2 || pool.NumEvictable() != 1 || pool.Refs(blocks[2]) != 0 {
		t.Fatalf("after the second store: held %d evictable %d", pool.NumHeld(), pool.NumEvictable())
	}
	rd := step()
	if rd.Batch == nil || !slices.Contains(rd.Batch.Seqs[0].Blocks, blocks[2]) ||
		slices.Contains(rd.Batch.Seqs[0].Blocks, blocks[0]) || slices.Contains(rd.Batch.Seqs[0].Blocks, blocks[1]) {
		t.Fatalf("b's first chunk: %+v; a's blocks %v", rd.Batch, blocks)
	}
	if pool.Refs(blocks[0]) != 1 || pool.Refs(blocks[1]) != 1 {
		t.Fatal("a block under a store hold was shared or freed")
	}
	// The first store: what the tier now holds is what a computed, read
	// from blocks nobody could change meanwhile.
	c := tier.Run(h.stores[0], jobs[0])
	if !c.OK {
		t.Fatalf("store: %+v", c)
	}
	for i, b := range stores[0].Blocks {
		digests := make([]uint64, 16)
		data := make([]byte, len(pool.Bytes(b)))
		ok, err := h.stores[0].Read(stores[0].Slots[i], stores[0].Hashes[i], digests, data)
		if !ok || err != nil || !slices.Equal(digests, pool.Digests(b)) || string(data) != string(pool.Bytes(b)) {
			t.Fatalf("block %d: tier record differs from the pool (ok %v, %v)", b, ok, err)
		}
	}
	h.apply(c)
	if pool.Refs(blocks[0]) != 0 || pool.Refs(blocks[1]) != 0 {
		t.Fatal("a's blocks still held after their store")
	}
	// b's second chunk needs two more blocks: a's, evicted now.
	rd = step()
	if rd.Batch == nil || !slices.Contains(rd.Batch.Seqs[0].Blocks, blocks[0]) || !slices.Contains(rd.Batch.Seqs[0].Blocks, blocks[1]) {
		t.Fatalf("b's second chunk: %+v; a's blocks %v", rd.Batch, blocks)
	}
	h.settle()
	if st := core.Offload().Stats(); st.Tiers[0].StoredBlocks < 3 || st.InflightStoreBlocks != 0 {
		t.Fatalf("offload stats %+v", st)
	}
}

// TestOffloadAbortWhileLoadingAndFailedLoad: a request parked while its
// prefix loads can be aborted (its load ends later and resumes nobody,
// leaving no hold); a load that fails (a missing or corrupt record) resumes
// the request anyway, which recomputes what was not loaded and produces
// the same token.
func TestOffloadAbortWhileLoadingAndFailedLoad(t *testing.T) {
	sc := sched.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 256, MaxWaiting: 16, ChunkedPrefill: true}
	cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 64}})
	cfg.MaxInflightStoreBlocks, cfg.MaxInflightLoadBlocks = 8, 8
	h := newOffloadCore(t, 8, sc, &cfg)
	h.lag = 1 << 20 // copies run when the test says
	core := h.core
	prompt := func(n int, base int32) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = 32 + (base+int32(i))%200
		}
		return p
	}
	run := func(id string, p []int32) {
		t.Helper()
		if res := core.Add(h.now, &Request{ID: id, Prompt: p, MaxTokens: 1}); res != Accepted {
			t.Fatal(res)
		}
		for i := 0; i < 100; i++ {
			h.runJobs(true)
			if _, done := h.usage[id]; done {
				return
			}
			h.step()
		}
		t.Fatalf("%s does not finish", id)
	}
	run("a", prompt(49, 40))   // 3 full blocks, stored
	run("x", prompt(100, 100)) // 7 blocks: evicts most of a's
	if core.Pool().NumEvictable() >= 7+3 {
		t.Fatal("a's blocks were not evicted")
	}
	parked := func(id string) *request {
		t.Helper()
		if res := core.Add(h.now, &Request{ID: id, Prompt: prompt(49, 40), MaxTokens: 1}); res != Accepted {
			t.Fatal(res)
		}
		h.step()
		r := core.byExt[id]
		if r == nil || !r.loading || len(h.jobs) == 0 || core.sched.NumWaiting() != 0 {
			t.Fatalf("%s is not loading (jobs %d)", id, len(h.jobs))
		}
		return r
	}
	parked("a2")
	if res := core.Abort(h.now, "a2"); res != Aborted {
		t.Fatal(res)
	}
	if u, ok := h.usage["a2"]; ok {
		t.Fatalf("usage before the step: %+v", u)
	}
	h.step()
	if u, ok := h.usage["a2"]; !ok || u.CompletionTokens != 0 {
		t.Fatalf("a2 not finished: %+v", u)
	}
	h.runJobs(true) // its load ends: nobody to resume
	h.step()
	if core.Pool().NumHeld() != 0 || !core.Idle() || !core.Offload().Idle() {
		t.Fatalf("after the aborted load: held %d", core.Pool().NumHeld())
	}
	// a2's load cached a's blocks again; evict them once more. Then a3's
	// load fails: no block copied.
	run("y", prompt(100, 250))
	parked("a3")
	for _, j := range h.jobs {
		if j.job.Kind != tier.JobLoad {
			t.Fatalf("unexpected %v job", j.job.Kind)
		}
		h.apply(tier.Completion{JobID: j.job.ID, Kind: tier.JobLoad, Err: tier.ErrMiss})
	}
	h.jobs = nil
	for i := 0; i < 100 && h.usage["a3"] == (Usage{}); i++ {
		h.step()
	}
	if !slices.Equal(h.tokens["a3"], h.tokens["a"]) {
		t.Fatalf("a3 %v after a failed load, a %v", h.tokens["a3"], h.tokens["a"])
	}
	st := core.Offload().Stats().Tiers[0]
	if st.LoadFailedBlocks == 0 || st.InvalidatedBlocks != 1 || st.LoadedBlocks == 0 {
		t.Fatalf("tier stats %+v", st)
	}
	// a4 loads what a3 stored again, and its usage counts the loaded
	// blocks as cached tokens.
	run("z", prompt(100, 170))
	parked("a4")
	h.runJobs(true)
	for i := 0; i < 100 && h.usage["a4"] == (Usage{}); i++ {
		h.step()
	}
	if u := h.usage["a4"]; u.CachedTokens != 48 || !slices.Equal(h.tokens["a4"], h.tokens["a"]) {
		t.Fatalf("a4: usage %+v, tokens %v, a's %v", u, h.tokens["a4"], h.tokens["a"])
	}
	h.settle()
}
