package sim

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/offload"
)

// spillSpec is a cluster whose P pool is small next to the prompts it
// leases, with a host-memory tier on every engine under lease spill
// policy pol (the offload store policy itself stores nothing unprompted).
func spillSpec(pol offload.LeaseSpillPolicy, pBlocks int) Spec {
	spec := DefaultSpec()
	spec.Blocks = pBlocks
	cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 1024}})
	cfg.Policy = offload.PreemptionOnly
	cfg.LeaseSpill = pol
	spec.Offload = &cfg
	spec.OffloadLatency, spec.OffloadBandwidth = 200*time.Microsecond, 4e9
	return spec
}

// TestS26LeaseSpill (docs/scenarios.md S26, simulator): D is congested (one
// request at a time, long outputs) while P, whose pool holds a quarter of
// the prompts leased at once, keeps prefilling: under policy pressure P
// spills leased, unread blocks to its tier, reuses their primary blocks,
// and D's reads are served from the tier (loaded back) with valid
// checksums; every answer equals a single engine's, no lease is freed
// early, and — the simulator checks it at every block P sends — no read
// streams a block whose primary copy its lease let go.
func TestS26LeaseSpill(t *testing.T) {
	for _, fail := range []float64{0, 0.3} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) { s26LeaseSpill(t, fail) })
	}
}

// s26LeaseSpill runs S26 with offload copies failing part way with
// probability fail: a failed spill store leaves the lease in the pool, a
// failed restore ends its read READ_END internal and D retries (or, out of
// attempts, recomputes); every answer is still the single engine's.
func s26LeaseSpill(t *testing.T, fail float64) {
	spec := spillSpec(offload.LeaseSpillPressure, 48)
	spec.OffloadFailProb = fail
	spec.DecodeSched = spec.Sched
	spec.DecodeSched.MaxNumSeqs = 1
	spec.DecodeSched.MaxNumBatchedTokens = 4096
	c := New(spec)
	var rs []*Req
	for i := range 24 {
		r := newReq(c, fmt.Sprintf("r%02d", i), 0, 30)
		r.Prompt = prompt(i, 100) // 7 blocks: 24 leases need 168 of P's 48
		rs = append(rs, r)
		c.Submit(clock.Instant(i)*clock.Instant(2*ms), r)
	}
	settle(t, c, 2*time.Minute)
	for _, r := range rs {
		if !r.Done || r.Error != "" || (fail == 0 && !r.Pulled) {
			t.Errorf("%s: done %v error %q pulled %v fallback %v", r.ID, r.Done, r.Error, r.Pulled, r.Fallback)
		}
	}
	p := c.Node("p0")
	st := p.Core.Offload().Stats()
	ps := p.Core.Producer().Stats()
	if ps.SpilledBlocks == 0 || st.LeaseRestoreLoadedBlocks == 0 || (fail > 0 && st.LeaseSpillFailedBlocks+st.LeaseRestoreFailures == 0) {
		t.Fatalf("spilled %d blocks, restored %d from the tier (%d from the pool), %d spill blocks and %d restores failed: the scenario did not happen",
			ps.SpilledBlocks, st.LeaseRestoreLoadedBlocks, st.LeaseRestoreHitBlocks, st.LeaseSpillFailedBlocks, st.LeaseRestoreFailures)
	}
	if c.EarlyFrees != 0 {
		t.Errorf("%d leases freed early", c.EarlyFrees)
	}
	t.Logf("spilled %d blocks of %d leases; restored %d leases: %d blocks loaded from the tier, %d still in the pool; failed: %d spill blocks, %d restores",
		ps.SpilledBlocks, ps.SpilledLeases, ps.RestoredLeases, st.LeaseRestoreLoadedBlocks, st.LeaseRestoreHitBlocks, st.LeaseSpillFailedBlocks, st.LeaseRestoreFailures)
}

// TestLeaseSpillSwarm runs swarm seeds with offload tiers, small pools
// and every lease spill policy, faults included (crashes, partitions,
// failing copies, lost and reordered messages): the swarm's invariants and
// the oracle hold, and leases did spill and were read back.
func TestLeaseSpillSwarm(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for _, pol := range offload.LeaseSpillNames[1:] {
		var sum SpillCounts
		for i := range seeds {
			seed := *seedFlag + uint64(i)
			res, err := RunSeed(seed, Options{Offload: OffloadAny, LeaseSpill: pol, Blocks: 56})
			if err != nil {
				t.Fatalf("%s seed %d: %v", pol, seed, err)
			}
			sum.add(res.Spill)
		}
		if sum.SpilledBlocks == 0 || sum.RestoredTier+sum.RestoredPool == 0 {
			t.Errorf("%s: %d seeds spilled %d blocks and restored %d: spill was not exercised", pol, seeds, sum.SpilledBlocks, sum.RestoredTier+sum.RestoredPool)
		}
		t.Logf("%s: %d seeds spilled %d blocks, restored %d from tiers and %d from pools", pol, seeds, sum.SpilledBlocks, sum.RestoredTier, sum.RestoredPool)
	}
}

// spillFigures is one run of the lease spill workload.
type spillFigures struct {
	done, failed, fellBack int
	// throughput: completed requests per simulated second of the run;
	// goodput: those whose first token came within spillSLO.
	throughput, goodput   float64
	ttftP50, ttftP99      time.Duration
	fastP99               time.Duration // TTFT p99 of the uncongested decoder's requests
	spilled, loaded, hits uint64
	earlyFrees            int
	wrong                 int // answers different from the oracle's
	span                  time.Duration
}

// spillSLO is the TTFT a request must meet to count in goodput.
const spillSLO = time.Second

// runSpillWorkload: one P, two D. d0 is congested (long outputs, two
// sequences at a time), d1 is not; requests alternate between them. P's
// pool (64 blocks) is about four times too small for the prompts leased
// to d0 at once, so under policy never its pool fills with d0's leases
// and d1's requests wait at P behind them.
func runSpillWorkload(t testing.TB, pol offload.LeaseSpillPolicy, seed uint64) spillFigures {
	spec := spillSpec(pol, 64)
	spec.Seed = seed
	spec.Prefill, spec.Decode = 1, 2
	spec.DecodeSched = spec.Sched
	spec.DecodeSched.MaxNumSeqs = 2
	spec.Transfer = spec.Transfer.WithLease(10 * time.Second)
	c := New(spec)
	var rs []*Req
	const n = 160
	for i := range n {
		r := newReq(c, fmt.Sprintf("r%03d", i), 0, 8)
		r.Prompt = prompt(i, 128) // 8 blocks
		if i%2 == 0 {
			r.MaxTokens = 200
		} else {
			r.D = c.Node("d1")
		}
		rs = append(rs, r)
		c.Submit(clock.Instant(i)*clock.Instant(10*ms), r)
	}
	if !c.RunIdle(10 * time.Minute) {
		t.Fatalf("%v: not idle", pol)
	}
	var f spillFigures
	for _, v := range c.Violations {
		t.Errorf("%v: %s", pol, v)
	}
	f.wrong = len(NewOracle(c.Spec).Verify(c))
	var ttft, fast []time.Duration
	var last clock.Instant
	good := 0
	for _, r := range rs {
		if !r.Done || r.Error != "" {
			f.failed++
			continue
		}
		f.done++
		if r.Fallback != 0 {
			f.fellBack++
			if testing.Verbose() {
				t.Logf("%v: %s fell back: %v", pol, r.ID, r.Fallback)
			}
		}
		d := r.FirstAt.Sub(r.SentAt)
		ttft = append(ttft, d)
		if d <= spillSLO {
			good++
		}
		if r.D == c.Node("d1") {
			fast = append(fast, d)
		}
		last = max(last, r.DoneAt)
	}
	f.span = time.Duration(last)
	f.throughput = float64(f.done) / f.span.Seconds()
	f.goodput = float64(good) / f.span.Seconds()
	f.ttftP50, f.ttftP99 = pct(ttft, 0.5), pct(ttft, 0.99)
	f.fastP99 = pct(fast, 0.99)
	p := c.Node("p0")
	st := p.Core.Offload().Stats()
	f.spilled = p.Core.Producer().Stats().SpilledBlocks
	f.loaded, f.hits = st.LeaseRestoreLoadedBlocks, st.LeaseRestoreHitBlocks
	f.earlyFrees = c.EarlyFrees
	return f
}

func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

// TestLeaseSpillFigures compares lease spill policies on the congested
// workload (runSpillWorkload), same seed: every answer is the oracle's
// and no lease is freed early under each, and spilling under pressure
// gives more goodput (requests whose TTFT meets spillSLO) and a lower p99
// TTFT for the uncongested decoder's requests than never spilling. (The
// p99 TTFT over all requests is the congested decoder's queue under
// every policy.) Run with -v for the table (docs/benchmarks.md, "Lease spill").
func TestLeaseSpillFigures(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	t.Logf("%-8s %4s %5s %6s %8s %8s %9s %9s %11s %7s %7s %5s", "policy", "seed", "done", "fellbk", "req/s", "goodput", "TTFT p50", "TTFT p99", "d1 TTFT p99", "spilled", "loaded", "early")
	for _, seed := range seeds {
		var never, pressure spillFigures
		for _, pol := range []offload.LeaseSpillPolicy{offload.LeaseSpillNever, offload.LeaseSpillPressure, offload.LeaseSpillAlways} {
			f := runSpillWorkload(t, pol, seed)
			t.Logf("%-8s %4d %5d %6d %6.1f/s %6.1f/s %9v %9v %11v %7d %7d %5d", pol, seed, f.done, f.fellBack, f.throughput, f.goodput,
				f.ttftP50.Round(time.Millisecond), f.ttftP99.Round(time.Millisecond), f.fastP99.Round(time.Millisecond), f.spilled, f.loaded, f.earlyFrees)
			if f.wrong != 0 || f.failed != 0 || f.earlyFrees != 0 {
				t.Errorf("%v seed %d: %d answers differ from the oracle's, %d failed, %d leases freed early", pol, seed, f.wrong, f.failed, f.earlyFrees)
			}
			switch pol {
			case offload.LeaseSpillNever:
				never = f
				if f.spilled != 0 {
					t.Errorf("policy never spilled %d blocks", f.spilled)
				}
			case offload.LeaseSpillPressure:
				pressure = f
			}
		}
		if pressure.spilled == 0 || pressure.goodput <= never.goodput || pressure.fastP99 >= never.fastP99 {
			t.Errorf("seed %d: pressure (spilled %d, goodput %.1f/s, d1 p99 %v) is not better than never (%.1f/s, d1 p99 %v)",
				seed, pressure.spilled, pressure.goodput, pressure.fastP99, never.goodput, never.fastP99)
		}
	}
}
