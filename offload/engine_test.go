package offload_test

// A minimal engine — kvblock pool, sched scheduler, model/synth executor and
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
	"time"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/sched"
)

const blockSize = 16

// modelledDisk as a disk tier's path keeps its records in memory: only its
// bandwidth is modelled.
const modelledDisk = "(modelled)"

type pendingJob struct {
	due   int           // step (untimed)
	dueAt time.Duration // simulated time (timed)
	tier  int
	job   tier.Job
}

type miniEngine struct {
	t     testing.TB
	pool  *kvblock.Pool
	sch   *sched.Scheduler
	ex    *synth.Executor
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

	// Timed mode: a simulated clock advanced by the profile's step
	// durations; a copy takes its bytes over its tier's bandwidth, one copy
	// at a time per tier, instead of lag steps.
	timed       bool
	now         time.Duration
	copyBytes   int64              // bytes of one block on the modelled hardware
	bandwidth   map[string]float64 // bytes per second, by medium
	tierFree    []time.Duration
	arrival     map[uint64]time.Duration
	ttft        []time.Duration
	preemptions uint64
}

func newMiniEngine(t testing.TB, full bool, poolBlocks int, cfg *offload.Config) *miniEngine {
	sc := sched.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 256, MaxWaiting: 1 << 10, ChunkedPrefill: true}
	return newMiniEngineProfile(t, "tiny", sc, full, poolBlocks, cfg)
}

func newMiniEngineProfile(t testing.TB, profile string, sc sched.Config, full bool, poolBlocks int, cfg *offload.Config) *miniEngine {
	t.Helper()
	prof, _ := synth.LookupProfile(profile)
	pc := kvblock.Config{NumBlocks: poolBlocks, BlockSizeTokens: blockSize}
	if full {
		pc.BytesPerToken = prof.BytesPerToken()
	}
	pool := kvblock.New(pc)
	e := &miniEngine{
		t: t, pool: pool, sch: sched.New(sc, pool), ex: synth.New(prof, pool, 7), lag: 2,
		reqs: map[uint64]*sched.Request{}, loading: map[uint64]*sched.Request{}, outputs: map[uint64][]int32{},
		arrival: map[uint64]time.Duration{},
	}
	if cfg != nil {
		e.coord = offload.NewCoordinator(*cfg, pool)
		for _, tc := range cfg.Tiers {
			g, err := tier.GeometryOf(tc, pc)
			if err != nil {
				t.Fatal(err)
			}
			var st tier.Store
			if tc.Medium == offload.MediumDisk && tc.Path != modelledDisk {
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
		e.tierFree = make([]time.Duration, len(cfg.Tiers))
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
		MaxTokens: maxTokens, EOS: synth.EOSToken, MaxModelLen: 1 << 20}
	e.reqs[id] = r
	e.arrival[id] = e.now
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
		if e.timed {
			e.now += e.res.Duration
		}
		for _, o := range e.sch.Update(&e.res) {
			r := o.Req
			if o.Token != model.NoToken && len(r.Tokens) == r.NumPromptTokens+1 {
				e.ttft = append(e.ttft, e.now-e.arrival[r.ID])
			}
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
		for _, ld := range w.Loads { // loads first: a request waits on them
			e.queue(ld.Tier, tier.LoadJob(e.pool, ld))
		}
		for _, st := range w.Stores {
			e.queue(st.Tier, tier.StoreJob(e.pool, st))
		}
	}
	if e.timed && len(b.Seqs) == 0 && len(e.jobs) > 0 {
		// Idle until the next copy ends.
		next := e.jobs[0].dueAt
		for _, j := range e.jobs {
			next = min(next, j.dueAt)
		}
		e.now = max(e.now, next)
	}
	e.check()
	if len(b.Seqs) == 0 && len(e.loading) == 0 && len(e.jobs) == 0 {
		return e.sch.NumWaiting()+len(e.staged) > 0 // only a stuck queue would stay
	}
	return true
}

func (e *miniEngine) queue(ti int, j tier.Job) {
	pj := pendingJob{due: e.steps + e.lag, tier: ti, job: j}
	if e.timed {
		d := time.Duration(float64(int64(len(j.Copies))*e.copyBytes) / e.bandwidth[e.coord.Config().Tiers[ti].Medium] * 1e9)
		pj.dueAt = max(e.now, e.tierFree[ti]) + d
		e.tierFree[ti] = pj.dueAt
	}
	e.jobs = append(e.jobs, pj)
}

func (e *miniEngine) runDue(all bool) {
	keep := e.jobs[:0]
	var due []pendingJob
	for _, j := range e.jobs {
		if all || (!e.timed && j.due <= e.steps) || (e.timed && j.dueAt <= e.now) {
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

// workload is a multi-turn chat load: conv conversations of turns turns
// with a shared system prompt; each turn's prompt is the conversation so
// far plus a new user message of userMin to userMin+userSpread-1 tokens;
// the next turn starts when the previous one finishes.
type workload struct {
	conv, turns, maxTokens      int
	system, userMin, userSpread int
}

func (e *miniEngine) conversations(nConv, turns, maxTokens int) map[string][]int32 {
	return e.run(workload{conv: nConv, turns: turns, maxTokens: maxTokens, system: 3*blockSize + 5, userMin: 12, userSpread: 24})
}

// run runs the workload and returns every turn's output, keyed
// "conv/turn".
func (e *miniEngine) run(wl workload) map[string][]int32 {
	nConv, turns, maxTokens := wl.conv, wl.turns, wl.maxTokens
	rng := rand.New(rand.NewPCG(11, 13))
	system := make([]int32, wl.system)
	for i := range system {
		system[i] = int32(rng.IntN(256))
	}
	user := func(c, k int) []int32 {
		r := rand.New(rand.NewPCG(uint64(c), uint64(k)))
		out := make([]int32, wl.userMin+r.IntN(wl.userSpread))
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
		if guard > 10_000_000 {
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

// TestMultiTurnFigures runs the offload issue's workload — 64
// conversations of 8 turns with a growing history behind a shared system
// prompt — on the llama-8b latency profile (digest-only) with a pool four
// times too small for the conversations' KV, with offload off and with
// each policy, and reports the prompt tokens recomputed (computed beyond
// what a pool big enough for everything computes) and the mean time to
// first token on the simulated clock (host-memory copies at 25 GB/s, disk
// at 3 GB/s, 2 MiB per block). Outputs are the same in every run. The
// issue's target: at least 3 × fewer recomputed prompt tokens with
// store-on-compute than with offload off.
func TestMultiTurnFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of simulation")
	}
	wl := workload{conv: 64, turns: 8, maxTokens: 32, system: 256, userMin: 32, userSpread: 64}
	// Final history ≈ 256 + 8 × (64 + 32) ≈ 1024 tokens = 64 blocks per
	// conversation; without the shared system prompt, 48 each: ~3100
	// blocks of working set.
	const poolBlocks = 3100 / 4
	sc := sched.Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 2048, MaxWaiting: 1 << 12, ChunkedPrefill: true}
	prof, _ := synth.LookupProfile("llama-8b")
	copyBytes := int64(prof.BytesPerToken() * blockSize)
	run := func(poolBlocks int, cfg *offload.Config) (*miniEngine, map[string][]int32) {
		e := newMiniEngineProfile(t, "llama-8b", sc, false, poolBlocks, cfg)
		e.timed = true
		e.copyBytes = copyBytes
		e.bandwidth = map[string]float64{offload.MediumCPU: 25e9, offload.MediumDisk: 3e9}
		e.lag = 0
		return e, e.run(wl)
	}
	mean := func(d []time.Duration) time.Duration {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return sum / time.Duration(len(d))
	}
	floorE, want := run(1<<14, nil)
	offE, off := run(poolBlocks, nil)
	if !sameOutputs(off, want) {
		t.Fatal("outputs depend on the pool size")
	}
	recomputedOff := offE.promptComputed - floorE.promptComputed
	t.Logf("pool %d blocks; big pool: %d prompt tokens computed, mean TTFT %v", poolBlocks, floorE.promptComputed, mean(floorE.ttft))
	t.Logf("%-24s recomputed %7d prompt tokens, mean TTFT %v, %d preemptions", "offload off", recomputedOff, mean(offE.ttft), offE.sch.Stats().Preemptions)
	cpu := offload.TierConfig{Medium: offload.MediumCPU, Blocks: 4096} // 8 GiB of 2 MiB blocks
	for _, tc := range []struct {
		name  string
		p     offload.PolicyKind
		tiers []offload.TierConfig
	}{
		{"store-on-compute", offload.StoreOnCompute, []offload.TierConfig{cpu}},
		{"preemption-only", offload.PreemptionOnly, []offload.TierConfig{cpu}},
		{"spillover", offload.Spillover, []offload.TierConfig{cpu}},
		// The disk is modelled by its bandwidth; its records live in memory
		// (a Disk store is exercised by TestOutputsEqualWithOffload).
		{"store-on-compute disk", offload.StoreOnCompute, []offload.TierConfig{{Medium: offload.MediumDisk, Path: modelledDisk, Blocks: 4096}}},
	} {
		cfg := offload.DefaultConfig(tc.tiers)
		cfg.Policy = tc.p
		e, got := run(poolBlocks, &cfg)
		if !sameOutputs(got, want) {
			t.Fatalf("%s: outputs differ from offload off", tc.name)
		}
		rec := e.promptComputed - floorE.promptComputed
		st := e.coord.Stats()
		t.Logf("%-24s recomputed %7d prompt tokens (%.1fx fewer), mean TTFT %v, %d preemptions, loaded %d tokens, stored %d blocks",
			tc.name, rec, float64(recomputedOff)/float64(max(rec, 1)), mean(e.ttft), e.sch.Stats().Preemptions, st.LoadedTokens, st.Tiers[0].StoredBlocks)
		if tc.name == "store-on-compute" && rec*3 > recomputedOff {
			t.Errorf("store-on-compute recomputes %d prompt tokens, offload off %d: want at least 3x fewer", rec, recomputedOff)
		}
	}
}

// TestOutputsEqualUnderPreemption: with long outputs and more requests
// running than the pool can hold, requests are preempted (their blocks
// offered at the next step, under store holds until stored) and recomputed
// or loaded back; the outputs still equal offload off.
func TestOutputsEqualUnderPreemption(t *testing.T) {
	const poolBlocks = 24
	sc := sched.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 128, MaxWaiting: 1 << 10, ChunkedPrefill: true}
	wl := workload{conv: 8, turns: 3, maxTokens: 40, system: 2 * blockSize, userMin: 8, userSpread: 16}
	base := newMiniEngineProfile(t, "tiny", sc, true, poolBlocks, nil)
	want := base.run(wl)
	if base.sch.Stats().Preemptions == 0 {
		t.Fatal("the workload preempts nothing")
	}
	for _, p := range []offload.PolicyKind{offload.PreemptionOnly, offload.StoreOnCompute} {
		t.Run(p.String(), func(t *testing.T) {
			cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 256}})
			cfg.Policy = p
			e := newMiniEngineProfile(t, "tiny", sc, true, poolBlocks, &cfg)
			if !sameOutputs(e.run(wl), want) {
				t.Fatal("outputs differ from offload off")
			}
			st := e.coord.Stats()
			t.Logf("%d preemptions (off: %d), %d prompt tokens computed (off: %d), stored %d blocks, loaded %d tokens",
				e.sch.Stats().Preemptions, base.sch.Stats().Preemptions, e.promptComputed, base.promptComputed, st.Tiers[0].StoredBlocks, st.LoadedTokens)
			if e.sch.Stats().Preemptions == 0 || st.Tiers[0].StoredBlocks == 0 {
				t.Fatal("no preemption or nothing stored")
			}
		})
	}
}
