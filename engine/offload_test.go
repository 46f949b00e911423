package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/sched"
)

// offloadCore drives a Core with the simulated model and runs its offload
// copies synchronously against real tier stores, lag steps after the core
// hands them out (so requests do finish, and get preempted, while copies
// are in flight). It checks the core after every step.
type offloadCore struct {
	t      *testing.T
	core   *Core
	exec   *synth.Executor
	stores []tier.Store
	lag    int

	now   clock.Instant
	steps int
	jobs  []delayedJob
	res   model.StepResult
	// promptComputed counts prompt positions computed, recomputation
	// included.
	promptComputed uint64
	tokens         map[string][]int32
	usage          map[string]Usage
}

type delayedJob struct {
	due  int
	tier int
	job  tier.Job
}

func newOffloadCore(t *testing.T, poolBlocks int, sc sched.Config, cfg *offload.Config) *offloadCore {
	return newOffloadCoreProfile(t, "tiny", true, poolBlocks, sc, cfg)
}

// newOffloadCoreProfile: full sets whether blocks carry KV bytes (or only
// digests).
func newOffloadCoreProfile(t *testing.T, profile string, full bool, poolBlocks int, sc sched.Config, cfg *offload.Config) *offloadCore {
	t.Helper()
	prof, _ := synth.LookupProfile(profile)
	pc := kvblock.Config{NumBlocks: poolBlocks, BlockSizeTokens: 16, Events: true}
	if full {
		pc.BytesPerToken = prof.BytesPerToken()
	}
	core := NewCore(Config{
		Pool: pc, Sched: sc,
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 16, Offload: cfg,
	}, rand.New(rand.NewPCG(3, 4)))
	h := &offloadCore{t: t, core: core, exec: synth.New(prof, core.Pool(), 11), lag: 2,
		tokens: map[string][]int32{}, usage: map[string]Usage{}}
	if cfg != nil {
		for _, tc := range cfg.Tiers {
			g, err := tier.GeometryOf(tc, pc)
			if err != nil {
				t.Fatal(err)
			}
			var st tier.Store
			if tc.Medium == offload.MediumDisk {
				st, err = tier.NewDisk(tier.DiskConfig{Dir: tc.Path, Geometry: g})
			} else {
				st, err = tier.NewMemory(g)
			}
			if err != nil {
				t.Fatal(err)
			}
			h.stores = append(h.stores, st)
		}
	}
	return h
}

// apply feeds one completion back into the core.
func (h *offloadCore) apply(c tier.Completion) {
	if c.Kind == tier.JobStore {
		h.core.StoreDone(h.now, offload.WorkID(c.JobID), c.Copied)
	} else {
		h.core.LoadDone(h.now, offload.WorkID(c.JobID), c.Copied)
	}
}

// runJobs runs the copies due now (all of them if all is set).
func (h *offloadCore) runJobs(all bool) {
	var due []delayedJob
	keep := h.jobs[:0]
	for _, j := range h.jobs {
		if all || j.due <= h.steps {
			due = append(due, j)
		} else {
			keep = append(keep, j)
		}
	}
	h.jobs = keep
	for _, j := range due {
		h.apply(tier.Run(h.stores[j.tier], j.job))
	}
}

// queue takes a Ready's copies. Jobs are built now, as the node's Submit
// builds them: they alias the pool's memory, which the holds keep
// unchanged until completion.
func (h *offloadCore) queue(rd Ready) {
	for _, w := range rd.Loads {
		h.jobs = append(h.jobs, delayedJob{due: h.steps + h.lag, tier: w.Tier, job: tier.LoadJob(h.core.Pool(), w)})
	}
	for _, w := range rd.Stores {
		h.jobs = append(h.jobs, delayedJob{due: h.steps + h.lag, tier: w.Tier, job: tier.StoreJob(h.core.Pool(), w)})
	}
}

// step runs one engine step and reports whether anything is left to do.
func (h *offloadCore) step() bool {
	h.t.Helper()
	h.steps++
	h.runJobs(false)
	rd := h.core.Step(h.now)
	for _, o := range rd.Outputs {
		if o.Token != model.NoToken {
			h.tokens[o.ID] = append(h.tokens[o.ID], o.Token)
		}
		if o.Finished {
			h.usage[o.ID] = o.Usage
		}
	}
	h.queue(rd)
	if err := h.core.Check(); err != nil {
		h.t.Fatalf("step %d: %v", h.steps, err)
	}
	if rd.Batch == nil {
		return !h.core.Idle() || len(h.jobs) > 0
	}
	for _, s := range rd.Batch.Seqs {
		r := h.core.byID[s.Req]
		if s.Start < r.NumPromptTokens {
			h.promptComputed += uint64(min(s.Start+s.Count, r.NumPromptTokens) - s.Start)
		}
	}
	h.exec.Execute(rd.Batch, &h.res)
	h.now = h.now.Add(h.res.Duration)
	h.core.Complete(h.now, &h.res)
	return true
}

// settle runs every copy and steps until nothing is live, then checks that
// no hold is left.
func (h *offloadCore) settle() {
	h.t.Helper()
	for range 1000 {
		h.runJobs(true)
		if !h.step() {
			break
		}
	}
	if !h.core.Idle() || len(h.jobs) > 0 {
		h.t.Fatal("the core does not settle")
	}
	if co := h.core.Offload(); co != nil && !co.Idle() {
		h.t.Fatal("offload copies in flight after settling")
	}
	if held := h.core.Pool().NumHeld(); held != 0 {
		h.t.Fatalf("%d blocks held after settling", held)
	}
}

// conversations runs a multi-turn chat workload: nConv conversations of
// turns turns behind a shared system prompt; each turn's prompt is the
// conversation so far plus a new user message, and a conversation's next
// turn is added when its previous one finishes. It returns every turn's
// tokens, keyed "conv/turn".
func (h *offloadCore) conversations(nConv, turns, maxTokens int) map[string][]int32 {
	return h.workload(chatLoad{conv: nConv, turns: turns, maxTokens: maxTokens, system: 3*16 + 5, userMin: 12, userSpread: 24})
}

// chatLoad: conv conversations of turns turns behind a shared system
// prompt of system tokens, user messages of userMin to
// userMin+userSpread-1 tokens.
type chatLoad struct {
	conv, turns, maxTokens      int
	system, userMin, userSpread int
}

func (h *offloadCore) workload(wl chatLoad) map[string][]int32 {
	h.t.Helper()
	nConv, turns, maxTokens := wl.conv, wl.turns, wl.maxTokens
	rng := rand.New(rand.NewPCG(11, 13))
	system := make([]int32, wl.system)
	for i := range system {
		system[i] = int32(32 + rng.IntN(200))
	}
	user := func(c, k int) []int32 {
		r := rand.New(rand.NewPCG(uint64(c), uint64(k)))
		out := make([]int32, wl.userMin+r.IntN(wl.userSpread))
		for i := range out {
			out[i] = int32(32 + r.IntN(200))
		}
		return out
	}
	add := func(c, k int, prompt []int32) {
		id := fmt.Sprintf("%d/%d", c, k)
		if res := h.core.Add(h.now, &Request{ID: id, Prompt: slices.Clone(prompt), MaxTokens: maxTokens, IgnoreEOS: true}); res != Accepted {
			h.t.Fatalf("%s: %v", id, res)
		}
	}
	history := make([][]int32, nConv)
	turn := make([]int, nConv)
	for c := range nConv {
		history[c] = append(slices.Clone(system), user(c, 0)...)
		add(c, 0, history[c])
	}
	for guard := 0; ; guard++ {
		if guard > 100_000 {
			h.t.Fatal("the workload does not finish")
		}
		more := h.step()
		for c := range nConv {
			k := turn[c]
			if k >= turns {
				continue
			}
			id := fmt.Sprintf("%d/%d", c, k)
			if _, done := h.usage[id]; !done {
				continue
			}
			turn[c]++
			if k+1 < turns {
				history[c] = append(append(history[c], h.tokens[id]...), user(c, k+1)...)
				add(c, k+1, history[c])
				more = true
			}
		}
		if !more {
			break
		}
	}
	h.settle()
	out := map[string][]int32{}
	for id, u := range h.usage {
		if u.CompletionTokens != maxTokens {
			h.t.Fatalf("%s: usage %+v", id, u)
		}
		out[id] = h.tokens[id]
	}
	if len(out) != nConv*turns {
		h.t.Fatalf("%d of %d turns finished", len(out), nConv*turns)
	}
	return out
}

func (h *offloadCore) cachedTokens() int {
	n := 0
	for _, u := range h.usage {
		n += u.CachedTokens
	}
	return n
}

func sameTokens(a, b map[string][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func loadedBlocks(st offload.Stats) (loaded, stored uint64) {
	for _, ts := range st.Tiers {
		loaded += ts.LoadedBlocks
		stored += ts.StoredBlocks
	}
	return loaded, stored
}

// TestOffloadOutputsEqualOffloadOff: a multi-turn workload on a pool far
// too small for it (with preemptions) gives exactly the tokens of offload
// off with every policy, with a cpu tier and with cpu+disk tiers. The
// simulated model derives each token from the KV it reads, so a block
// stored, evicted and loaded back with the wrong content, or freed while a
// copy still used it, would change the output. The runs that keep prompts
// in a tier load blocks back, compute fewer prompt tokens and report more
// cached tokens in Usage.
func TestOffloadOutputsEqualOffloadOff(t *testing.T) {
	const nConv, turns, maxTokens, poolBlocks = 12, 4, 16, 40
	sc := sched.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 256, MaxWaiting: 1 << 10, ChunkedPrefill: true}
	base := newOffloadCore(t, poolBlocks, sc, nil)
	want := base.conversations(nConv, turns, maxTokens)
	big := newOffloadCore(t, 4096, sc, nil)
	if !sameTokens(big.conversations(nConv, turns, maxTokens), want) {
		t.Fatal("outputs depend on the pool size")
	}
	if base.core.Stats().Sched.Preemptions == 0 {
		t.Fatal("the workload preempts nothing")
	}
	t.Logf("offload off: %d prompt tokens computed (%d on a pool big enough), %d cached, %d preemptions",
		base.promptComputed, big.promptComputed, base.cachedTokens(), base.core.Stats().Sched.Preemptions)
	cpu := func(p offload.PolicyKind) func(string) *offload.Config {
		return func(string) *offload.Config {
			c := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 512}})
			c.Policy = p
			return &c
		}
	}
	cpuDisk := func(dir string) *offload.Config {
		c := offload.DefaultConfig([]offload.TierConfig{
			{Medium: offload.MediumCPU, Blocks: 24},
			{Medium: offload.MediumDisk, Path: dir, Blocks: 512},
		})
		c.MaxInflightStoreBlocks = poolBlocks
		return &c
	}
	for _, tc := range []struct {
		name  string
		cfg   func(dir string) *offload.Config
		helps bool // must load blocks back and compute fewer prompt tokens
	}{
		{"store-on-compute", cpu(offload.StoreOnCompute), true},
		{"preemption-only", cpu(offload.PreemptionOnly), false},
		{"spillover", cpu(offload.Spillover), true},
		{"cpu+disk", cpuDisk, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newOffloadCore(t, poolBlocks, sc, tc.cfg(t.TempDir()))
			if !sameTokens(h.conversations(nConv, turns, maxTokens), want) {
				t.Fatal("outputs differ from offload off")
			}
			st := h.core.Offload().Stats()
			loaded, stored := loadedBlocks(st)
			t.Logf("%d prompt tokens computed (off %d), %d cached (off %d), stored %d blocks, loaded %d, %d preemptions",
				h.promptComputed, base.promptComputed, h.cachedTokens(), base.cachedTokens(), stored, loaded, h.core.Stats().Sched.Preemptions)
			if stored == 0 {
				t.Fatal("nothing stored")
			}
			if tc.helps {
				if loaded == 0 || h.promptComputed >= base.promptComputed {
					t.Fatalf("offload did not help: %d blocks loaded, %d prompt tokens computed (off %d)", loaded, h.promptComputed, base.promptComputed)
				}
				// Loaded blocks are admitted as prefix-cache hits.
				if h.cachedTokens() <= base.cachedTokens() {
					t.Fatalf("cached tokens %d, offload off %d", h.cachedTokens(), base.cachedTokens())
				}
			}
		})
	}
}

// TestS20FinishedRequestBlocksHeldUntilStored (SCENARIOS.md S20): a request
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
		if r == nil || !r.loading || len(h.jobs) == 0 || core.Scheduler().NumWaiting() != 0 {
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

// offloadNode starts a node over a core with the zero-latency simulated
// model, a pool of poolBlocks and offload cfg (nil: off), its tiers opened
// with OpenOffload.
func offloadNode(t *testing.T, poolBlocks int, cfg *offload.Config) (*Node, context.CancelFunc) {
	t.Helper()
	prof, _ := synth.LookupProfile("zero")
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: poolBlocks, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sched.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 256, MaxWaiting: 64, ChunkedPrefill: true},
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 16, Offload: cfg,
	}, rand.New(rand.NewPCG(3, 4)))
	set, err := OpenOffload(core)
	if err != nil {
		t.Fatal(err)
	}
	if (set == nil) != (cfg == nil) {
		t.Fatalf("OpenOffload: %v for config %v", set, cfg)
	}
	n := NewNode(core, synth.New(prof, core.Pool(), 11), NodeConfig{Offload: set})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := n.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-n.Done() })
	return n, cancel
}

// nodeConversations runs nConv conversations of turns turns through n,
// round-robin (turn k of every conversation, then turn k+1), one request at
// a time: between two turns of a conversation the others push its blocks
// out of the small pool. It returns each turn's tokens and the cached
// tokens of every usage.
func nodeConversations(t *testing.T, n *Node, nConv, turns int) (map[string][]int32, int) {
	t.Helper()
	history := make([][]int32, nConv)
	user := func(c, k int) []int32 {
		r := rand.New(rand.NewPCG(uint64(c), uint64(k)))
		out := make([]int32, 20+r.IntN(24))
		for i := range out {
			out[i] = int32(32 + r.IntN(200))
		}
		return out
	}
	out := map[string][]int32{}
	cached := 0
	for k := range turns {
		for c := range nConv {
			history[c] = append(history[c], user(c, k)...)
			id := fmt.Sprintf("%d/%d", c, k)
			s, res := n.Submit(&Request{ID: id, Prompt: slices.Clone(history[c]), MaxTokens: 8, IgnoreEOS: true})
			if res != Accepted {
				t.Fatalf("%s: %v", id, res)
			}
			for _, o := range drain(t, s) {
				if o.Token != model.NoToken {
					out[id] = append(out[id], o.Token)
				}
				if o.Finished {
					cached += o.Usage.CachedTokens
					if o.Status != sched.FinishedLength {
						t.Fatalf("%s: %v", id, o.Status)
					}
				}
			}
			history[c] = append(history[c], out[id]...)
		}
	}
	return out, cached
}

// TestNodeOffloadMemoryAndDiskTiers: a node with a host-memory tier and a
// disk tier (real files) serves a multi-turn workload on a pool too small
// to keep the conversations with exactly the tokens of a node without
// offload, loading blocks back (from both tiers' stores) and reporting them
// as cached tokens and in NodeStats.Offload; when it stops, no block is
// held and no copy is in flight.
func TestNodeOffloadMemoryAndDiskTiers(t *testing.T) {
	const nConv, turns, poolBlocks = 4, 4, 16
	off, _ := offloadNode(t, poolBlocks, nil)
	want, cachedOff := nodeConversations(t, off, nConv, turns)

	tiers, err := offload.ParseTiers("cpu:8blocks,disk:" + t.TempDir() + ":256blocks")
	if err != nil {
		t.Fatal(err)
	}
	cfg := offload.DefaultConfig(tiers)
	// Stores run concurrently with the steps; with room for a pool's
	// worth in flight, few offers wait for a slot.
	cfg.MaxInflightStoreBlocks = poolBlocks
	n, cancel := offloadNode(t, poolBlocks, &cfg)
	got, cached := nodeConversations(t, n, nConv, turns)
	if !sameTokens(got, want) {
		t.Fatal("outputs differ from offload off")
	}
	st := n.Stats()
	o := st.Offload
	if o == nil || len(o.Tiers) != 2 || o.Tiers[0].Medium != offload.MediumCPU || o.Tiers[1].Medium != offload.MediumDisk {
		t.Fatalf("offload stats %+v", o)
	}
	loaded, _ := loadedBlocks(*o)
	t.Logf("cached tokens %d (off %d); tiers %+v", cached, cachedOff, o.Tiers)
	if loaded == 0 || o.Tiers[1].StoredBlocks == 0 || cached <= cachedOff {
		t.Fatalf("loaded %d blocks, disk stored %d, cached tokens %d (off %d)", loaded, o.Tiers[1].StoredBlocks, cached, cachedOff)
	}
	cancel()
	<-n.Done()
	st = n.Stats()
	if st.Pool.Held != 0 || st.Offload.InflightStoreBlocks != 0 || st.Offload.InflightLoadBlocks != 0 {
		t.Fatalf("after stop: held %d, in flight %d stores %d loads", st.Pool.Held, st.Offload.InflightStoreBlocks, st.Offload.InflightLoadBlocks)
	}
}

func TestNewNodeNeedsOffloadSet(t *testing.T) {
	cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 8}})
	core := NewCore(Config{
		Pool: kvblock.Config{NumBlocks: 8, BlockSizeTokens: 4}, Sched: sched.DefaultConfig(),
		MaxModelLen: 64, VocabSize: 257, EOS: 256, Offload: &cfg,
	}, rand.New(rand.NewPCG(1, 2)))
	defer func() {
		if recover() == nil {
			t.Fatal("NewNode without the offload set did not panic")
		}
	}()
	NewNode(core, stepExec{}, NodeConfig{})
}

// TestNodeOffloadShutdownMidway: a node stopped while requests run, load
// and store leaves no block held and no copy in flight, whatever the
// copies were doing.
func TestNodeOffloadShutdownMidway(t *testing.T) {
	cfg := offload.DefaultConfig([]offload.TierConfig{
		{Medium: offload.MediumCPU, Blocks: 32},
		{Medium: offload.MediumDisk, Path: t.TempDir(), Blocks: 128},
	})
	cfg.MaxInflightStoreBlocks = 24
	for round := range 4 {
		n, cancel := offloadNode(t, 24, &cfg)
		shared := make([]int32, 40)
		for i := range shared {
			shared[i] = int32(50 + i)
		}
		var streams []*Stream
		for i := range 12 {
			p := append(slices.Clone(shared), int32(100+i), int32(100+round))
			s, res := n.Submit(&Request{ID: fmt.Sprint(i), Prompt: p, MaxTokens: 40, IgnoreEOS: true})
			if res != Accepted {
				t.Fatal(res)
			}
			streams = append(streams, s)
		}
		// Stop after some request has made progress.
		if _, err := streams[round].Recv(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		cancel()
		for _, s := range streams {
			drain(t, s)
		}
		<-n.Done()
		st := n.Stats()
		if st.Pool.Held != 0 || st.Offload.InflightStoreBlocks != 0 || st.Offload.InflightLoadBlocks != 0 || st.Requests != 0 {
			t.Fatalf("round %d after stop: held %d, in flight %d stores %d loads, %d requests",
				round, st.Pool.Held, st.Offload.InflightStoreBlocks, st.Offload.InflightLoadBlocks, st.Requests)
		}
	}
}

// TestOffloadMultiTurnFigures runs the offload issue's workload through
// the engine core — 64 conversations of 8 turns with a growing history
// behind a shared system prompt, on the llama-8b shape (digest-only) with a
// pool four times too small for the conversations' KV — with offload off
// and with each policy (copies complete two steps after they are handed
// out), and reports the prompt tokens recomputed: computed beyond what a
// pool big enough for everything computes. The target: at least
// 3 x fewer with store-on-compute than with offload off. (The offload
// package's TestMultiTurnFigures adds time to first token under modelled
// copy bandwidths.)
func TestOffloadMultiTurnFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of simulation")
	}
	wl := chatLoad{conv: 64, turns: 8, maxTokens: 32, system: 256, userMin: 32, userSpread: 64}
	const poolBlocks = 3100 / 4 // ~3100 blocks of working set
	sc := sched.Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 2048, MaxWaiting: 1 << 12, ChunkedPrefill: true}
	run := func(poolBlocks int, cfg *offload.Config) (*offloadCore, map[string][]int32) {
		h := newOffloadCoreProfile(t, "llama-8b", false, poolBlocks, sc, cfg)
		return h, h.workload(wl)
	}
	floor, want := run(1<<14, nil)
	offH, off := run(poolBlocks, nil)
	if !sameTokens(off, want) {
		t.Fatal("outputs depend on the pool size")
	}
	recomputedOff := offH.promptComputed - floor.promptComputed
	t.Logf("pool %d blocks; a big pool computes %d prompt tokens", poolBlocks, floor.promptComputed)
	t.Logf("%-18s recomputed %7d prompt tokens, %d cached, %d preemptions", "offload off", recomputedOff, offH.cachedTokens(), offH.core.Stats().Sched.Preemptions)
	for _, p := range []offload.PolicyKind{offload.StoreOnCompute, offload.PreemptionOnly, offload.Spillover} {
		cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 4096}})
		cfg.Policy = p
		h, got := run(poolBlocks, &cfg)
		if !sameTokens(got, want) {
			t.Fatalf("%v: outputs differ from offload off", p)
		}
		rec := h.promptComputed - floor.promptComputed
		st := h.core.Offload().Stats()
		t.Logf("%-18s recomputed %7d prompt tokens (%.1fx fewer), %d cached, %d preemptions, loaded %d tokens, stored %d blocks",
			p, rec, float64(recomputedOff)/float64(max(rec, 1)), h.cachedTokens(), h.core.Stats().Sched.Preemptions, st.LoadedTokens, st.Tiers[0].StoredBlocks)
		if p == offload.StoreOnCompute && rec*3 > recomputedOff {
			t.Errorf("store-on-compute recomputes %d prompt tokens, offload off %d: want at least 3x fewer", rec, recomputedOff)
		}
	}
}
