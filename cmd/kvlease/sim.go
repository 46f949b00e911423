package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kvlease/kvlease/cmd/internal/cli"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/sim"
	"github.com/kvlease/kvlease/xfer"
)

func init() {
	cli.Register(cli.Command{
		Name:    "sim",
		Summary: "deterministic cluster simulation: replay a seed, sweep seeds, or the policy report",
		Run:     runSim,
	})
}

// simFlags are kvlease sim's inputs.
type simFlags struct {
	seed      uint64
	seeds     int
	policy    xfer.Policy
	fullKV    bool
	noFaults  bool
	requests  int
	workers   int
	keepGoing bool
	report    bool
	jsonOut   string
	progress  time.Duration
	safety    time.Duration
	liveness  time.Duration
	offload   string
	spill     string
	blocks    int
	sparse    bool
	apiFaults bool
}

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("sim", stderr)
	var f simFlags
	policy := "lease"
	fs.Uint64Var(&f.seed, "seed", 1, "the seed to replay; with --seeds the first seed of the sweep; with --report the seed of the workload")
	fs.IntVar(&f.seeds, "seeds", 0, "sweep this many seeds from --seed on (stops at the first failure unless --keep-going)")
	fs.StringVar(&policy, "policy", policy, "release policy of every engine: "+policyNames())
	fs.BoolVar(&f.fullKV, "full-kv", false, "pools with real KV bytes (slower; default: per-slot digests only)")
	fs.BoolVar(&f.noFaults, "no-faults", false, "run the drawn workload with no fault at all")
	fs.IntVar(&f.requests, "requests", 0, "client requests per seed (0: drawn from the seed; the report: 400)")
	fs.DurationVar(&f.safety, "safety-phase", 0, "how long faults are injected, simulated (0: 3s)")
	fs.DurationVar(&f.liveness, "liveness-limit", 0, "bound of the fault-free phase: by then every request, lease and hold must have ended (0: 20m)")
	fs.StringVar(&f.offload, "offload", "", "offload tiers on every engine of every seed: any (the policy the seed draws) or a policy ("+
		strings.Join(offload.PolicyNames, ", ")+"); empty: drawn, one seed in four")
	fs.StringVar(&f.spill, "lease-spill", "", "with offload tiers: the lease spill policy of every seed ("+strings.Join(offload.LeaseSpillNames, ", ")+"); empty: drawn")
	fs.IntVar(&f.blocks, "blocks", 0, "every engine's pool capacity in blocks (0: drawn from the seed)")
	fs.BoolVar(&f.sparse, "sparse", false, "drive only the engines with work at each instant, as --fleet does (checks stay on every instant)")
	fs.BoolVar(&f.apiFaults, "api-faults", false, "also inject the fault API's faults (kvlease serve --enable-fault-api) in the safety phase, each kind with probability 1/2 at a rate drawn from the seed")
	fs.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "with --seeds: seeds run at once (each seed runs in one goroutine); with --fleet: policies run at once")
	fs.BoolVar(&f.keepGoing, "keep-going", false, "with --seeds: run every seed, whatever fails")
	fs.DurationVar(&f.progress, "progress", 2*time.Second, "with --seeds: wall time between progress lines on stderr (0: none)")
	fs.BoolVar(&f.report, "report", false, "run the standard fault mix (sim.StandardFaults) under lease, vllm, vllm-lease and legacy-timeout and print a table")
	fs.StringVar(&f.jsonOut, "json", "", "with --report: also write the report as JSON to this file (- for stdout)")
	fleet := addFleetFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	pol, err := xfer.ParsePolicy(policy)
	if err != nil {
		return fmt.Errorf("--policy %q: want one of %s", policy, policyNames())
	}
	f.policy = pol
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case f.seeds < 0 || f.seeds > 100_000_000:
		return fmt.Errorf("--seeds %d: want 0..100000000", f.seeds)
	case f.requests < 0 || f.requests > 100000:
		return fmt.Errorf("--requests %d: want 0..100000 (0: drawn)", f.requests)
	case f.workers < 1 || f.workers > 1024:
		return fmt.Errorf("--workers %d: want 1..1024", f.workers)
	case f.safety < 0 || f.safety > time.Hour:
		return fmt.Errorf("--safety-phase %v: want 0..1h", f.safety)
	case f.liveness < 0 || f.liveness > 24*time.Hour:
		return fmt.Errorf("--liveness-limit %v: want 0..24h", f.liveness)
	case f.offload != "" && f.offload != sim.OffloadAny && !slices.Contains(offload.PolicyNames, f.offload):
		return fmt.Errorf("--offload %q: want %s or one of %s", f.offload, sim.OffloadAny, strings.Join(offload.PolicyNames, ", "))
	case f.spill != "" && !slices.Contains(offload.LeaseSpillNames, f.spill):
		return fmt.Errorf("--lease-spill %q: want one of %s", f.spill, strings.Join(offload.LeaseSpillNames, ", "))
	case f.blocks < 0 || f.blocks > 1<<20:
		return fmt.Errorf("--blocks %d: want 0..%d (0: drawn)", f.blocks, 1<<20)
	case f.progress < 0:
		return fmt.Errorf("--progress %v: want a duration ≥ 0", f.progress)
	case f.report && f.seeds > 0:
		return errors.New("--report and --seeds: give one of them")
	case f.report && (set["policy"] || set["no-faults"] || set["full-kv"] || set["safety-phase"] || set["liveness-limit"] || set["offload"] ||
		set["lease-spill"] || set["blocks"] || set["sparse"] || set["api-faults"]):
		return errors.New("--report runs every policy on the standard mix: give it only --seed, --requests and --json")
	case f.jsonOut != "" && !f.report:
		return errors.New("--json needs --report")
	case fleet.on && (f.report || f.seeds > 0 || set["policy"] || set["no-faults"] || set["full-kv"] || set["requests"] ||
		set["safety-phase"] || set["liveness-limit"] || set["offload"] || set["keep-going"] || set["sparse"] || set["lease-spill"] || set["blocks"]):
		return errors.New("--fleet runs its own workload under --policies: give it only --seed, --workers and the fleet flags")
	}
	pols, err := fleet.validate(set)
	if err != nil {
		return err
	}
	switch {
	case fleet.on:
		fleet.opts.Seed = f.seed
		return simFleet(ctx, fleet, pols, f.workers, stdout, stderr)
	case f.report:
		return simReport(ctx, f, stdout)
	case f.seeds > 0:
		return simSweep(ctx, f, stdout, stderr)
	}
	return simReplay(f, stdout)
}

func policyNames() string {
	var names []string
	for _, p := range xfer.Policies {
		names = append(names, p.String())
	}
	return strings.Join(names, "|")
}

func (f simFlags) options() sim.Options {
	return sim.Options{Policy: f.policy, FullKV: f.fullKV, Requests: f.requests, NoFaults: f.noFaults,
		SafetyPhase: f.safety, LivenessLimit: f.liveness, Offload: f.offload, LeaseSpill: f.spill, Blocks: f.blocks, Sparse: f.sparse,
		APIFaults: f.apiFaults}
}

// simReplay runs one seed and prints what it did.
func simReplay(f simFlags, stdout io.Writer) error {
	opts := f.options()
	res, err := sim.RunSeed(f.seed, opts)
	writeResult(stdout, res, opts)
	if err != nil {
		return fmt.Errorf("seed %d failed", f.seed)
	}
	return nil
}

// writeCounts writes a line of label and the counts by name, sorted.
func writeCounts(w io.Writer, label string, counts map[string]int) {
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprint(w, label)
	for _, n := range names {
		fmt.Fprintf(w, " %s=%d", n, counts[n])
	}
	fmt.Fprintln(w)
}

func writeResult(w io.Writer, res sim.Result, opts sim.Options) {
	mode := "digest-only"
	if opts.FullKV {
		mode = "full KV"
	}
	fmt.Fprintf(w, "seed %d, policy %s, %s\n", res.Seed, res.Policy, mode)
	fmt.Fprintf(w, "profile: %s\n", res.Profile)
	fmt.Fprintf(w, "requests %d: %d completed (%d pulled from P), %d failed, %d aborted by the client, %d fell back\n",
		res.Requests, res.Completed, res.Pulled, res.Failed, res.Aborted, res.Fallbacks)
	fmt.Fprintf(w, "goodput %.1f req/s, p99 TTFT %v, lease block·s unread %.2f read %.2f, early frees %d, engine exits %d\n",
		res.Goodput, res.P99TTFT.Round(time.Microsecond), res.UnreadBlockSeconds, res.ReadBlockSeconds, res.EarlyFrees, res.Exits)
	writeCounts(w, "lease releases:", res.Released)
	if res.Profile.Offload != "" {
		fmt.Fprintf(w, "lease spill %s: %d blocks spilled, %d restored from tiers, %d from pools\n",
			res.Profile.LeaseSpill, res.Spill.SpilledBlocks, res.Spill.RestoredTier, res.Spill.RestoredPool)
	}
	if len(res.Injected) > 0 {
		writeCounts(w, "faults injected:", res.Injected)
	}
	fmt.Fprintf(w, "simulated %v, %d events, trace hash %016x\n", res.SimTime.Round(time.Microsecond), res.Events, res.TraceHash)
	if len(res.Failures) == 0 {
		fmt.Fprintln(w, "PASS")
		return
	}
	fmt.Fprintf(w, "FAIL: %d failures\n", len(res.Failures))
	for _, s := range res.Failures {
		fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(s, "\n", "\n    "))
	}
	fmt.Fprintf(w, "replay: %s\n", sim.ReplayCommand(res.Seed, opts))
}

// sweepStats aggregate a sweep.
type sweepStats struct {
	seeds, requests, completed int
	events                     uint64
	simTime                    time.Duration
	failures                   []sim.Result
}

// maxListedFailures bounds the failures a sweep prints (all are counted).
const maxListedFailures = 20

// simSweep runs seeds [seed, seed+seeds) on f.workers goroutines, each seed
// in one goroutine from start to end (sim is not safe for concurrent use,
// but distinct seeds share nothing). The results do not depend on the
// number of workers; only which seeds past a failure still run does.
func simSweep(ctx context.Context, f simFlags, stdout, stderr io.Writer) error {
	// The simulator allocates small, short-lived objects at a high rate; a
	// larger heap target trades memory for time spent in the collector.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	opts := f.options()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan uint64)
	results := make(chan sim.Result, f.workers)
	var wg sync.WaitGroup
	for range min(f.workers, f.seeds) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range next {
				res, _ := sim.RunSeed(seed, opts) // the failures are in res
				results <- res
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range f.seeds {
			select {
			case next <- f.seed + uint64(i):
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	start := time.Now()
	lastProgress := start
	var st sweepStats
	for res := range results {
		st.seeds++
		st.requests += res.Requests
		st.completed += res.Completed
		st.events += res.Events
		st.simTime += res.SimTime
		if len(res.Failures) > 0 {
			st.failures = append(st.failures, res)
			fmt.Fprintf(stderr, "seed %d FAILED: %s\n", res.Seed, firstLine(res.Failures[0]))
			if !f.keepGoing {
				cancel() // no new seeds; those running finish
			}
		}
		if f.progress > 0 && time.Since(lastProgress) >= f.progress {
			lastProgress = time.Now()
			el := time.Since(start).Seconds()
			fmt.Fprintf(stderr, "%d/%d seeds  %.0f seeds/s  %.0f simulated requests/s  %d failed\n",
				st.seeds, f.seeds, float64(st.seeds)/el, float64(st.requests)/el, len(st.failures))
		}
	}
	wall := time.Since(start)
	writeSweep(stdout, f, opts, st, wall)
	if len(st.failures) > 0 {
		return fmt.Errorf("%d of %d seeds failed", len(st.failures), st.seeds)
	}
	if st.seeds < f.seeds {
		if err := context.Cause(ctx); err != nil {
			return err
		}
	}
	return nil
}

func writeSweep(w io.Writer, f simFlags, opts sim.Options, st sweepStats, wall time.Duration) {
	mode := "digest-only"
	if f.fullKV {
		mode = "full KV"
	}
	sec := max(wall.Seconds(), 1e-9)
	fmt.Fprintf(w, "%d seeds from %d, policy %s, %s, %d workers: %v wall\n", st.seeds, f.seed, f.policy, mode, f.workers, wall.Round(time.Millisecond))
	fmt.Fprintf(w, "%.1f seeds/s, %.0f simulated requests per wall second (%d requests, %d completed, %d events, %v simulated)\n",
		float64(st.seeds)/sec, float64(st.requests)/sec, st.requests, st.completed, st.events, st.simTime.Round(time.Second))
	if len(st.failures) == 0 {
		fmt.Fprintln(w, "failures: none")
		return
	}
	slices.SortFunc(st.failures, func(a, b sim.Result) int {
		switch {
		case a.Seed < b.Seed:
			return -1
		case a.Seed > b.Seed:
			return 1
		}
		return 0
	})
	fmt.Fprintf(w, "failures: %d\n", len(st.failures))
	for i, res := range st.failures {
		if i == maxListedFailures {
			fmt.Fprintf(w, "  ... %d more\n", len(st.failures)-i)
			break
		}
		fmt.Fprintf(w, "  seed %d: %s (%d failures)\n    replay: %s\n", res.Seed, firstLine(res.Failures[0]), len(res.Failures), sim.ReplayCommand(res.Seed, opts))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// simReport runs the standard fault mix under every policy.
func simReport(ctx context.Context, f simFlags, stdout io.Writer) error {
	mix := defaultFaultMix()
	mix.Seed = f.seed
	if f.requests > 0 {
		mix.Requests = f.requests
	}
	rows := policyReport(mix)
	part := mix.partitioned()
	partRows := policyReport(part)
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.jsonOut == "-" {
		if err := writePolicyJSON(stdout, mix, rows, part, partRows); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "standard fault mix (sim.StandardFaults), seed %d, %d requests; times simulated:\n%s\n\n", mix.Seed, mix.Requests, mix.profile())
		writePolicyTable(stdout, rows)
		fmt.Fprintf(stdout, "\nthe same with p0 and d1 partitioned at %v for %v, longer than the lease (a read of freed blocks is one vLLM serves from freed memory):\n\n",
			part.PartitionAt, part.PartitionFor)
		writePolicyTable(stdout, partRows)
		if f.jsonOut != "" {
			out, err := os.Create(f.jsonOut)
			if err != nil {
				return err
			}
			err = writePolicyJSON(out, mix, rows, part, partRows)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	if all := append(append([]policyRow(nil), rows...), partRows...); !reportOK(all) {
		for _, r := range all {
			for _, m := range r.MismatchLog {
				fmt.Fprintf(stdout, "%s: %s\n", r.Policy, firstLine(m))
			}
		}
		return errors.New("a block leaked, an output differed from the single-engine run, an invariant broke or lease freed early")
	}
	return nil
}
