package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

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
//
// In timed mode a copy instead takes its bytes over its tier's modelled
// bandwidth, one copy at a time per tier, on the simulated clock that the
// executor's step durations advance; an idle core waits for the next copy
// to end. Then the harness records each request's time to first token.
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
	// damage, when set, runs before every step (it may break tier
	// records behind the core's back).
	damage func()

	timed     bool
	copyBytes int64              // bytes of one block on the modelled hardware
	bandwidth map[string]float64 // bytes per second, by medium
	tierFree  []clock.Instant    // when each tier's previous copy ends
	arrival   map[string]clock.Instant
	ttft      []time.Duration

	// storing are the primary blocks of each store handed out and not yet
	// completed (S20: each must stay held until its completion).
	storing map[uint64][]kvblock.BlockID
}

type delayedJob struct {
	due   int           // step (untimed)
	dueAt clock.Instant // simulated instant (timed)
	tier  int
	job   tier.Job
}

// modelledDisk as a disk tier's path keeps its records in memory: only its
// bandwidth is modelled (timed mode).
const modelledDisk = "(modelled)"

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
		tokens: map[string][]int32{}, usage: map[string]Usage{}, arrival: map[string]clock.Instant{}}
	if cfg != nil {
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
			h.stores = append(h.stores, st)
		}
		h.tierFree = make([]clock.Instant, len(cfg.Tiers))
	}
	return h
}

// setTimed switches h to timed mode: a block is copyBytes on the modelled
// hardware, and each medium moves bandwidth bytes per second.
func (h *offloadCore) setTimed(copyBytes int64, bandwidth map[string]float64) {
	h.timed, h.copyBytes, h.bandwidth, h.lag = true, copyBytes, bandwidth, 0
}

// apply feeds one completion back into the core.
func (h *offloadCore) apply(c tier.Completion) {
	if c.Kind == tier.JobStore {
		delete(h.storing, c.JobID)
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
		if all || (!h.timed && j.due <= h.steps) || (h.timed && j.dueAt <= h.now) {
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

// queue takes a Ready's copies, loads first (a request waits on them).
// Jobs are built now, as the node's Submit builds them: they alias the
// pool's memory, which the holds keep unchanged until completion.
func (h *offloadCore) queue(rd Ready) {
	for _, w := range rd.Loads {
		h.enqueue(w.Tier, tier.LoadJob(h.core.Pool(), w))
	}
	for _, w := range rd.Stores {
		if h.storing == nil {
			h.storing = map[uint64][]kvblock.BlockID{}
		}
		h.storing[uint64(w.ID)] = slices.Clone(w.Blocks)
		h.enqueue(w.Tier, tier.StoreJob(h.core.Pool(), w))
	}
}

func (h *offloadCore) enqueue(ti int, j tier.Job) {
	dj := delayedJob{due: h.steps + h.lag, tier: ti, job: j}
	if h.timed {
		medium := h.core.Offload().Config().Tiers[ti].Medium
		d := time.Duration(float64(int64(len(j.Copies))*h.copyBytes) / h.bandwidth[medium] * 1e9)
		dj.dueAt = clock.Max(h.now, h.tierFree[ti]).Add(d)
		h.tierFree[ti] = dj.dueAt
	}
	h.jobs = append(h.jobs, dj)
}

// add adds a request now and fails the test if the core refuses it.
func (h *offloadCore) add(r *Request) {
	h.t.Helper()
	if res := h.core.Add(h.now, r); res != Accepted {
		h.t.Fatalf("%s: %v", r.ID, res)
	}
	h.arrival[r.ID] = h.now
}

// step runs one engine step and reports whether anything is left to do.
func (h *offloadCore) step() bool {
	h.t.Helper()
	h.steps++
	if h.damage != nil {
		h.damage()
	}
	h.runJobs(false)
	rd := h.core.Step(h.now)
	for _, o := range rd.Outputs {
		if o.Token != model.NoToken {
			if len(h.tokens[o.ID]) == 0 {
				h.ttft = append(h.ttft, o.At.Sub(h.arrival[o.ID]))
			}
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
	for id, blocks := range h.storing {
		for _, b := range blocks {
			if h.core.Pool().Refs(b) == 0 {
				h.t.Fatalf("step %d: block %d of store %d in flight is not held (S20)", h.steps, b, id)
			}
		}
	}
	if rd.Batch == nil {
		if h.timed && len(h.jobs) > 0 {
			// Idle until the next copy ends.
			next := h.jobs[0].dueAt
			for _, j := range h.jobs {
				next = min(next, j.dueAt)
			}
			h.now = clock.Max(h.now, next)
		}
		return !h.core.Idle() || len(h.jobs) > 0
	}
	for _, s := range rd.Batch.Seqs {
		r := h.core.byID.Get(s.Req)
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
		h.add(&Request{ID: fmt.Sprintf("%d/%d", c, k), Prompt: slices.Clone(prompt), MaxTokens: maxTokens, IgnoreEOS: true})
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

// damageDisk returns a step hook that, now and then, corrupts a byte of,
// truncates or deletes one of the record files of h's disk tier.
func damageDisk(h *offloadCore, rng *rand.Rand) func() {
	h.t.Helper()
	var d *tier.Disk
	for _, s := range h.stores {
		if dd, ok := s.(*tier.Disk); ok {
			d = dd
		}
	}
	if d == nil {
		h.t.Fatal("no disk tier to damage")
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
			h.t.Fatal(err)
		}
	}
}

func meanDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// p99Duration is the 99th percentile of ds (nearest rank), 0 for none.
func p99Duration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}
