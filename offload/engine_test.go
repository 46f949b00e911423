package offload_test

// A minimal engine — kvblock pool, sched scheduler, model/sim executor and
// an offload Coordinator, with tier copies run synchronously some steps
// after they are handed out — used to show that offloading never changes
// an output: the simulated model derives every token from the KV it reads,
// so a block stored, evicted, loaded back (or lost, corrupted, recomputed)
// with the wrong content would change the tokens. It also wires the
// Coordinator exactly as engine.Core is meant to (see the package doc).

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/sim"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/sched"
)

const blockSize = 16

type pendingJob struct {
	due  int
	tier int
	job  tier.Job
}

type miniEngine struct {
	t     testing.TB
	pool  *kvblock.Pool
	sch   *sched.Scheduler
	ex    *sim.Executor
	coord *offload.Coordinator // nil: offload off
	tiers []tier.Store
	lag   int // steps between handing out a copy and running it

	steps   int
	jobs    []pendingJob
	reqs    map[uint64]*sched.Request
	staged  []*sched.Request // arrived, not yet given to the scheduler
	loading map[uint64]*sched.Request
	outputs map[uint64][]int32
	res     model.StepResult
	// promptComputed counts prompt positions computed, recomputation
	// included.
	promptComputed uint64
	// damage, when set, runs before every step (it may break tier
	// records).
	damage func()
}

func newMiniEngine(t testing.TB, full bool, poolBlocks int, cfg *offload.Config) *miniEngine {
	t.Helper()
	prof, _ := sim.LookupProfile("tiny")
	pc := kvblock.Config{NumBlocks: poolBlocks, BlockSizeTokens: blockSize}
	if full {
		pc.BytesPerToken = prof.BytesPerToken()
	}
	pool := kvblock.New(pc)
	sc := sched.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 256, MaxWaiting: 1 << 10, ChunkedPrefill: true}
	e := &miniEngine{
		t: t, pool: pool, sch: sched.New(sc, pool), ex: sim.New(prof, pool, 7), lag: 2,
		reqs: map[uint64]*sched.Request{}, loading: map[uint64]*sched.Request{}, outputs: map[uint64][]int32{},
	}
	if cfg != nil {
		e.coord = offload.NewCoordinator(*cfg, pool)
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
			e.tiers = append(e.tiers, st)
		}
		// Wiring 1: preemption hook.
		e.sch.OnPreempt = func(r *sched.Request) {
			e.coord.Preempted(r.ID, pool.Blocks(r.Hold), r.Hashes, r.NumComputed)
		}
	}
	return e
}

// add stages a request. Requests go to the scheduler only when its
// waiting queue is empty (as engine.Core does for remote prefixes), so the
// prefix lookup in the tiers happens just before admission: looked up at
// arrival, a prefix still cached in the pool could be evicted while the
// request waits, and would then be recomputed.
func (e *miniEngine) add(id uint64, prompt []int32, maxTokens int) {
	r := &sched.Request{ID: id, Tokens: slices.Clone(prompt), NumPromptTokens: len(prompt),
		MaxTokens: maxTokens, EOS: sim.EOSToken, MaxModelLen: 8192}
	e.reqs[id] = r
	e.staged = append(e.staged, r)
}

// feed gives staged requests to the scheduler while it has room, first
// loading their prefixes from the tiers when the pool misses them.
func (e *miniEngine) feed() {
	for len(e.staged) > 0 && e.sch.NumWaiting() == 0 && e.sch.NumRunning()+len(e.loading) < e.sch.Config().MaxNumSeqs {
		r := e.staged[0]
		e.staged = e.staged[1:]
		if e.coord != nil {
			// Wiring 2: prefix-miss hook, before the scheduler sees it.
			r.Hashes = kvblock.AppendHashes(r.Hashes[:0], r.Tokens, blockSize, r.Extras)
			if e.coord.Lookup(r.ID, r.Tokens, r.Hashes) {
				e.loading[r.ID] = r
				continue
			}
		}
		if e.sch.Add(r) != sched.Added {
			e.t.Fatal("queue full")
		}
	}
}

// step runs one engine step and reports whether anything is left to do.
func (e *miniEngine) step() bool {
	e.steps++
	if e.damage != nil {
		e.damage()
	}
	// Wiring 3: completions come back (here: copies due now run).
	e.runDue(false)
	e.feed()
	b := e.sch.Schedule()
	if len(b.Seqs) > 0 {
		for _, s := range b.Seqs {
			r := e.reqs[s.Req]
			if s.Start < r.NumPromptTokens {
				e.promptComputed += uint64(min(s.Start+s.Count, r.NumPromptTokens) - s.Start)
			}
		}
		e.ex.Execute(b, &e.res)
		for _, o := range e.sch.Update(&e.res) {
			r := o.Req
			if o.Finished.Finished() {
				e.teardown(r)
				continue
			}
			if e.coord != nil {
				// Wiring 4: after-step hook.
				e.coord.Computed(r.ID, e.pool.Blocks(r.Hold), r.Hashes, r.NumComputed)
			}
		}
	}
	if e.coord != nil {
		// Wiring 5: hand the work to the edge.
		w := e.coord.Take()
		for _, st := range w.Stores {
			e.jobs = append(e.jobs, pendingJob{e.steps + e.lag, st.Tier, tier.StoreJob(e.pool, st)})
		}
		for _, ld := range w.Loads {
			e.jobs = append(e.jobs, pendingJob{e.steps + e.lag, ld.Tier, tier.LoadJob(e.pool, ld)})
		}
	}
	e.check()
	if len(b.Seqs) == 0 && len(e.loading) == 0 && len(e.jobs) == 0 {
		return e.sch.NumWaiting()+len(e.staged) > 0 // only a stuck queue would stay
	}
	return true
}

func (e *miniEngine) runDue(all bool) {
	keep := e.jobs[:0]
	var due []pendingJob
	for _, j := range e.jobs {
		if all || j.due <= e.steps {
			due = append(due, j)
		} else {
			keep = append(keep, j)
		}
	}
	e.jobs = keep
	for _, j := range due {
		c := tier.Run(e.tiers[j.tier], j.job)
		if req, ready := tier.Apply(e.coord, c); ready {
			r := e.loading[req]
			delete(e.loading, req)
			e.sch.Requeue(r)
		}
	}
}

// teardown: the fixed end of a request (wiring 6: offer, then release).
func (e *miniEngine) teardown(r *sched.Request) {
	if e.coord != nil {
		e.coord.Finished(r.ID, e.pool.Blocks(r.Hold), r.Hashes, r.NumComputed)
	}
	e.pool.Release(r.Hold)
	r.Hold = 0
	e.ex.Forget(r.ID)
	e.outputs[r.ID] = slices.Clone(r.Tokens[r.NumPromptTokens:])
	delete(e.reqs, r.ID)
}

func (e *miniEngine) check() {
	e.t.Helper()
	if err := e.pool.Check(); err != nil {
		e.t.Fatalf("step %d: %v", e.steps, err)
	}
	if e.coord != nil {
		if err := e.coord.Check(); err != nil {
			e.t.Fatalf("step %d: %v", e.steps, err)
		}
	}
}

// conversations runs nConv multi-turn conversations with a shared system
// prompt: each turn's prompt is the conversation so far plus a new user
// message; the next turn starts when the previous one finishes. It returns
// every turn's output, keyed "conv/turn".
func (e *miniEngine) conversations(nConv, turns, maxTokens int) map[string][]int32 {
	rng := rand.New(rand.NewPCG(11, 13))
	system := make([]int32, 3*blockSize+5)
	for i := range system {
		system[i] = int32(rng.IntN(256))
	}
	user := func(c, k int) []int32 {
		r := rand.New(rand.NewPCG(uint64(c), uint64(k)))
		out := make([]int32, 12+r.IntN(24))
		for i := range out {
			out[i] = int32(r.IntN(256))
		}
		return out
	}
	history := make([][]int32, nConv)
	turn := make([]int, nConv)
	id := func(c, k int) uint64 { return uint64(c*1000 + k + 1) }
	for c := range nConv {
		history[c] = append(slices.Clone(system), user(c, 0)...)
		e.add(id(c, 0), history[c], maxTokens)
	}
	out := map[string][]int32{}
	for guard := 0; ; guard++ {
		if guard > 200000 {
			e.t.Fatal("the workload does not finish")
		}
		more := e.step()
		for c := range nConv {
			k := turn[c]
			if k >= turns {
				continue
			}
			o, ok := e.outputs[id(c, k)]
			if !ok {
				continue
			}
			out[fmt.Sprintf("%d/%d", c, k)] = o
			turn[c]++
			if k+1 < turns {
				history[c] = append(append(history[c], o...), user(c, k+1)...)
				e.add(id(c, k+1), history[c], maxTokens)
				more = true
			}
		}
		if !more {
			break
		}
	}
	e.runDue(true)
	e.check()
	if len(out) != nConv*turns {
		e.t.Fatalf("%d of %d turns finished", len(out), nConv*turns)
	}
	if e.pool.NumHeld() != 0 || (e.coord != nil && !e.coord.Idle()) {
		e.t.Fatalf("after the workload %d blocks are held", e.pool.NumHeld())
	}
	return out
}

// TestOutputsEqualWithOffload: the same multi-turn workload on a pool far
// too small for it gives exactly the same tokens with offload off, with
// each policy, with cpu and disk tiers, and with disk records corrupted,
// truncated and deleted while it runs — and the offload runs do load
// blocks back and compute fewer prompt tokens.
func TestOutputsEqualWithOffload(t *testing.T) {
	const nConv, turns, maxTokens, poolBlocks = 12, 4, 8, 40
	type run struct {
		name   string
		full   bool
		cfg    func(dir string) *offload.Config
		damage bool
	}
	cpu := func(p offload.PolicyKind) func(string) *offload.Config {
		return func(string) *offload.Config {
			c := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 512}})
			c.Policy = p
			return &c
		}
	}
	disk := func(dir string) *offload.Config {
		c := offload.DefaultConfig([]offload.TierConfig{
			{Medium: offload.MediumCPU, Blocks: 24},
			{Medium: offload.MediumDisk, Path: dir, Blocks: 512},
		})
		c.MaxInflightStoreBlocks = poolBlocks
		return &c
	}
	for _, full := range []bool{false, true} {
		mode := map[bool]string{false: "digest-only", true: "full"}[full]
		base := newMiniEngine(t, full, poolBlocks, nil)
		want := base.conversations(nConv, turns, maxTokens)
		big := newMiniEngine(t, full, 4096, nil)
		if got := big.conversations(nConv, turns, maxTokens); !sameOutputs(got, want) {
			t.Fatal("outputs depend on the pool size")
		}
		t.Logf("%s offload off: %d prompt tokens computed (%d with a pool big enough for everything)", mode, base.promptComputed, big.promptComputed)
		for _, r := range []run{
			{"store-on-compute", full, cpu(offload.StoreOnCompute), false},
			{"preemption-only", full, cpu(offload.PreemptionOnly), false},
			{"spillover", full, cpu(offload.Spillover), false},
			{"cpu+disk", full, disk, false},
			{"cpu+disk damaged", full, disk, true},
		} {
			t.Run(mode+"/"+r.name, func(t *testing.T) {
				dir := t.TempDir()
				e := newMiniEngine(t, r.full, poolBlocks, r.cfg(dir))
				if r.damage {
					e.damage = damageDisk(t, e, rand.New(rand.NewPCG(5, 5)))
				}
				got := e.conversations(nConv, turns, maxTokens)
				if !sameOutputs(got, want) {
					t.Fatal("outputs differ from offload off")
				}
				st := e.coord.Stats()
				t.Logf("%d prompt tokens computed (off: %d), %d loaded, stats %+v", e.promptComputed, base.promptComputed, st.LoadedTokens, st.Tiers)
				if r.name == "store-on-compute" || r.name == "cpu+disk" {
					if st.LoadedTokens == 0 || e.promptComputed >= base.promptComputed {
						t.Fatalf("offload did not help: %d loaded tokens, %d prompt tokens computed (off: %d)", st.LoadedTokens, e.promptComputed, base.promptComputed)
					}
				}
				if r.damage {
					var failed uint64
					for _, ts := range st.Tiers {
						failed += ts.LoadFailedBlocks
					}
					if failed == 0 {
						t.Fatal("no load hit a damaged record: the damage did not bite")
					}
				}
			})
		}
	}
}

// damageDisk returns a step hook that, now and then, corrupts a byte of,
// truncates or deletes one of the disk tier's record files.
func damageDisk(t testing.TB, e *miniEngine, rng *rand.Rand) func() {
	var d *tier.Disk
	for _, s := range e.tiers {
		if dd, ok := s.(*tier.Disk); ok {
			d = dd
		}
	}
	n := d.Geometry().NumBlocks
	return func() {
		if rng.IntN(4) != 0 {
			return
		}
		path := d.Path(offload.Slot(rng.IntN(n)))
		raw, err := os.ReadFile(path)
		if err != nil {
			return // never written
		}
		switch rng.IntN(3) {
		case 0:
			raw[rng.IntN(len(raw))] ^= 0x10
			err = os.WriteFile(path, raw, 0o644)
		case 1:
			err = os.Truncate(path, int64(rng.IntN(len(raw))))
		default:
			err = os.Remove(path)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func sameOutputs(a, b map[string][]int32) bool {
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
