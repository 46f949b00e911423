package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvlease/kvlease/bench"
	"github.com/kvlease/kvlease/bench/stats"
	"github.com/kvlease/kvlease/cmd/internal/cli"
	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/proxy"
	"github.com/kvlease/kvlease/xfer"
)

func init() {
	cli.Register(cli.Command{
		Name:    "demo",
		Summary: "the main job on defaults: one faulty workload on a local P/D cluster under each release policy, compared",
		Run:     runDemo,
	})
}

// demoOptions are kvlease demo's flags, checked.
type demoOptions struct {
	duration      time.Duration
	requests      int
	concurrency   int
	seed          uint64
	out           string
	kvLease       time.Duration
	legacyTimeout time.Duration
	abortRate     float64
	invalidRate   float64
	decodeSeqs    int
	prefillBlocks int
	policies      []xfer.Policy
	model         *modelFileFlags
}

// The demo's fixed shape: what the flags do not change.
const (
	demoPrefill, demoDecode = 1, 2
	demoProfile             = "tiny"
	demoCrashAt, demoBackAt = 0.3, 0.5 // decode0 is killed, then restarted, at these points of the run
	demoAbortMaxDelay       = 300 * time.Millisecond
	demoOutputTokens        = 32
	demoSLOTTFT             = 500 * time.Millisecond
	demoSettleMargin        = 3 * time.Second
	demoReplayConcurrency   = 16
)

var demoInputLen = bench.Dist{Kind: bench.DistUniform, A: 64, B: 256}

func parseDemoFlags(args []string, stderr io.Writer) (demoOptions, error) {
	fs := cli.NewFlagSet("demo", stderr)
	o := demoOptions{}
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "load per policy (with --requests and no --duration: until the requests are done)")
	fs.IntVar(&o.requests, "requests", 0, "requests per policy at most (0: as many as --duration allows)")
	fs.IntVar(&o.concurrency, "concurrency", 16, "clients sending requests, each as soon as its previous one ended")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of prompts, lengths, aborts and invalid requests: every policy gets the same")
	fs.StringVar(&o.out, "out", "", "directory for the plots and JSON (default: a new directory under $TMPDIR)")
	fs.DurationVar(&o.kvLease, "kv-lease", 3*time.Second, "lease, vllm and vllm-lease: the engines' --kv-lease (serve's default is 30s; shorter so that the demo fits a minute)")
	fs.DurationVar(&o.legacyTimeout, "legacy-timeout", 10*time.Second, "legacy-timeout: its one fixed timeout (vLLM's is 480s; shorter so that the demo fits a minute)")
	fs.Float64Var(&o.abortRate, "abort-rate", 0.15, "share of requests the client abandons (before the first token or mid-stream)")
	fs.Float64Var(&o.invalidRate, "invalid-rate", 0.1, "share of requests invalid for the decode engine only (min_tokens > max_tokens): rejected after their prefill")
	fs.IntVar(&o.decodeSeqs, "decode-max-num-seqs", 4, "each decode engine's batch: below the load, so that requests wait in the decode queues")
	fs.IntVar(&o.prefillBlocks, "prefill-num-blocks", 512, "the prefill engine's KV blocks (16 tokens each): room for the load, not for much stranded KV")
	policies := fs.String("policies", "lease,vllm,vllm-lease,legacy-timeout", "release policies to compare, comma-separated")
	o.model = addModelFileFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["requests"] && !set["duration"] {
		o.duration = 0
	}
	switch {
	case o.duration < 0 || o.duration > time.Hour:
		return o, fmt.Errorf("--duration %v: want a duration up to 1h, such as 5s", o.duration)
	case o.requests < 0 || o.requests > 100000:
		return o, fmt.Errorf("--requests %d: want 0..100000", o.requests)
	case o.duration == 0 && o.requests == 0:
		return o, errors.New("--duration 0: give a duration or --requests")
	case o.concurrency < 1 || o.concurrency > 1024:
		return o, fmt.Errorf("--concurrency %d: want 1..1024", o.concurrency)
	case o.kvLease < 100*time.Millisecond:
		return o, fmt.Errorf("--kv-lease %v: want at least 100ms, such as 3s", o.kvLease)
	case o.legacyTimeout < 100*time.Millisecond:
		return o, fmt.Errorf("--legacy-timeout %v: want at least 100ms, such as 10s", o.legacyTimeout)
	case !(o.abortRate >= 0 && o.abortRate <= 1):
		return o, fmt.Errorf("--abort-rate %v: want a share in [0, 1]", o.abortRate)
	case !(o.invalidRate >= 0 && o.invalidRate <= 1):
		return o, fmt.Errorf("--invalid-rate %v: want a share in [0, 1]", o.invalidRate)
	case o.decodeSeqs < 1 || o.decodeSeqs > 1024:
		return o, fmt.Errorf("--decode-max-num-seqs %d: want 1..1024", o.decodeSeqs)
	case o.prefillBlocks < 64 || o.prefillBlocks > 1<<20:
		return o, fmt.Errorf("--prefill-num-blocks %d: want 64..1048576 (a prompt takes up to 16)", o.prefillBlocks)
	}
	for _, name := range strings.Split(*policies, ",") {
		p, err := xfer.ParsePolicy(strings.TrimSpace(name))
		if err != nil {
			return o, fmt.Errorf("--policies %q: %q is not lease, vllm, vllm-lease or legacy-timeout", *policies, name)
		}
		o.policies = append(o.policies, p)
	}
	if err := o.model.check(); err != nil {
		return o, err
	}
	return o, nil
}

// leaseOf is the lease, or for legacy-timeout the timeout, a policy runs
// with in the demo.
func (o *demoOptions) leaseOf(p xfer.Policy) time.Duration {
	if p == xfer.PolicyLegacyTimeout {
		return o.legacyTimeout
	}
	return o.kvLease
}

// load is the workload every policy gets.
func (o *demoOptions) load() bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Concurrency = o.concurrency
	cfg.Duration, cfg.Requests = o.duration, o.requests
	cfg.Seed = o.seed
	cfg.Workload.InputLen = demoInputLen
	cfg.Workload.OutputLen = bench.Fixed(demoOutputTokens)
	cfg.AbortRate, cfg.AbortMaxDelay = o.abortRate, demoAbortMaxDelay
	cfg.InvalidRate = o.invalidRate
	cfg.SLO.TTFT = demoSLOTTFT
	cfg.RecordOutputs = true
	cfg.Timeout = time.Minute
	cfg.MetricsInterval = 200 * time.Millisecond
	return cfg
}

// clusterRun is one policy's run.
func (o *demoOptions) clusterRun(p xfer.Policy) bench.ClusterRun {
	return bench.ClusterRun{
		Load: o.load(),
		Cluster: localcluster.Options{
			Prefill: demoPrefill, Decode: demoDecode, Profile: demoProfile,
			ExtraServeArgs: append([]string{"--release-policy", p.String(), "--kv-lease", o.leaseOf(p).String()}, o.model.serveArgs()...),
			StopTimeout:    5 * time.Second,
		},
		PrefillArgs: []string{"--num-blocks", fmt.Sprint(o.prefillBlocks)},
		DecodeArgs:  []string{"--max-num-seqs", fmt.Sprint(o.decodeSeqs)},
		Faults: []bench.Fault{
			{At: demoCrashAt, Action: bench.FaultKill, Engine: demoPrefill, EngineName: proxy.RoleDecode + "0"},
			{At: demoBackAt, Action: bench.FaultRestart, Engine: demoPrefill, EngineName: proxy.RoleDecode + "0"},
		},
		SettleTimeout: o.leaseOf(p) + demoSettleMargin,
	}
}

// demoRow is one policy's line of the comparison.
type demoRow struct {
	Policy    string  `json:"policy"`
	LeaseS    float64 `json:"lease_or_timeout_s"`
	Requests  int     `json:"requests"`
	Completed int     `json:"completed"`
	Errors    int     `json:"errors"`
	Aborted   int     `json:"aborted_by_client"`
	Rejected  int     `json:"rejected_as_planned"`
	Goodput   float64 `json:"goodput_req_per_s"`
	P99TTFTms float64 `json:"p99_ttft_ms"`
	// UnreadBlockSeconds is KV memory leases held for requests nobody
	// read: stranded.
	UnreadBlockSeconds float64            `json:"unread_lease_block_seconds"`
	ReadBlockSeconds   float64            `json:"read_lease_block_seconds"`
	Released           map[string]float64 `json:"leases_released"`
	HeldAfterLoad      float64            `json:"blocks_held_after_load"`
	HeldAtEnd          float64            `json:"blocks_held_at_end"`
	LeasesAtEnd        float64            `json:"leases_active_at_end"`
	SettleSeconds      float64            `json:"settle_s"`
	Faults             []string           `json:"faults"`
	// Verified outputs equal the single engine's; Differed do not;
	// Unverified could not be replayed.
	Verified   int              `json:"outputs_equal"`
	Differed   int              `json:"outputs_differing"`
	Unverified int              `json:"outputs_unverified"`
	Mismatches []bench.Mismatch `json:"mismatches,omitempty"`
	Problems   []string         `json:"problems,omitempty"`
}

func newDemoRow(p xfer.Policy, lease time.Duration, res *bench.Result) demoRow {
	s, c := &res.Summary, res.Cluster
	row := demoRow{Policy: p.String(), LeaseS: lease.Seconds(),
		Requests: s.Requests, Completed: s.Completed, Errors: s.Errors, Aborted: s.Aborted, Rejected: s.Rejected,
		Goodput: s.GoodputPerSecond, P99TTFTms: s.TTFT.P99 * 1e3,
		UnreadBlockSeconds: c.End.BlockSecondsUnread, ReadBlockSeconds: c.End.BlockSecondsRead, Released: c.End.Released,
		HeldAfterLoad: c.AfterLoad.HeldBlocks, HeldAtEnd: c.End.HeldBlocks, LeasesAtEnd: c.End.LeasesActive,
		SettleSeconds: c.SettleSeconds, Problems: c.Problems()}
	for _, f := range c.Faults {
		row.Faults = append(row.Faults, f.String())
	}
	return row
}

func (r *demoRow) ok() bool { return len(r.Problems) == 0 && r.Differed == 0 && r.Unverified == 0 }

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseDemoFlags(args, stderr)
	if err != nil {
		return err
	}
	began := time.Now()
	if o.out == "" {
		if o.out, err = os.MkdirTemp("", "kvlease-demo-*"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	printDemoIntro(stdout, &o)

	results := make([]*bench.Result, 0, len(o.policies))
	rows := make([]demoRow, 0, len(o.policies))
	for i, p := range o.policies {
		fmt.Fprintf(stdout, "[%d/%d] %-14s ", i+1, len(o.policies), p)
		res, err := bench.RunCluster(ctx, o.clusterRun(p))
		if err != nil {
			fmt.Fprintln(stdout)
			return fmt.Errorf("%s: %w", p, err)
		}
		if res.Summary.Interrupted || ctx.Err() != nil {
			fmt.Fprintln(stdout, "interrupted")
			return errors.New("interrupted")
		}
		s, c := &res.Summary, res.Cluster
		fmt.Fprintf(stdout, "%d requests in %.1fs: %d ok, %d errors, %d aborted, %d rejected; %.0f blocks held after the load, %s\n",
			s.Requests, s.DurationSeconds, s.Completed, s.Errors, s.Aborted, s.Rejected, c.AfterLoad.HeldBlocks, settledText(c))
		results = append(results, res)
		rows = append(rows, newDemoRow(p, o.leaseOf(p), res))
	}

	fmt.Fprint(stdout, "verifying outputs against a single `--role both` engine... ")
	verifyStart := time.Now()
	distinct, err := verifyDemo(ctx, &o, results, rows)
	if err != nil {
		fmt.Fprintln(stdout)
		return fmt.Errorf("verifying outputs: %w", err)
	}
	fmt.Fprintf(stdout, "%d distinct requests replayed in %.1fs\n\n", distinct, time.Since(verifyStart).Seconds())

	writeDemoTable(stdout, rows)
	fmt.Fprintln(stdout)
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-14s leases released: %s\n", r.Policy, releasedText(r.Released))
	}
	writeDemoLegend(stdout, o)

	paths, err := writeDemoFiles(o, rows, results)
	fmt.Fprintln(stdout)
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n(%.1f s of wall time)\n", time.Since(began).Seconds())

	bad := false
	for _, r := range rows {
		for _, p := range r.Problems {
			bad = true
			fmt.Fprintf(stderr, "%s: %s\n", r.Policy, p)
		}
		for _, m := range r.Mismatches {
			bad = true
			fmt.Fprintf(stderr, "%s: output differs: %s\n", r.Policy, m)
		}
		if r.Differed > len(r.Mismatches) {
			fmt.Fprintf(stderr, "%s: %d more outputs differ (see demo.json)\n", r.Policy, r.Differed-len(r.Mismatches))
		}
		bad = bad || !r.ok()
	}
	fmt.Fprintln(stdout, "\nThe same comparison in simulated time, deterministic from a seed: kvlease sim --report")
	if bad {
		return errors.New("a block leaked, an engine failed, or an output differed from the single-engine run (see above)")
	}
	fmt.Fprintln(stdout, "OK: no block leaked under any policy, and every completed output equals the single-engine run.")
	return nil
}

func printDemoIntro(w io.Writer, o *demoOptions) {
	names := make([]string, len(o.policies))
	for i, p := range o.policies {
		names[i] = p.String()
	}
	bound := fmt.Sprintf("%v", o.duration)
	switch {
	case o.duration == 0:
		bound = fmt.Sprintf("%d requests", o.requests)
	case o.requests > 0:
		bound += fmt.Sprintf(" or %d requests", o.requests)
	}
	fmt.Fprintf(w, "kvlease demo: one faulty workload on a local P/D cluster under each release policy (%s)\n", strings.Join(names, ", "))
	fmt.Fprintf(w, "  cluster: %d prefill engine (%d KV blocks) + %d decode engines, %s, started fresh for each policy;\n",
		demoPrefill, o.prefillBlocks, demoDecode, o.model.describe(demoProfile))
	fmt.Fprintf(w, "    each decode engine runs %d requests at a time, below the load: requests wait in its queue while the prefill holds their KV\n", o.decodeSeqs)
	fmt.Fprintf(w, "  load: %s, %d clients, prompts of %s tokens, %d output tokens, seed %d\n",
		bound, o.concurrency, demoInputLen, demoOutputTokens, o.seed)
	fmt.Fprintf(w, "  faults: %.0f%% of requests abandoned by their client (within %v of sending, or mid-stream);\n", o.abortRate*100, demoAbortMaxDelay)
	fmt.Fprintf(w, "    %.0f%% invalid for the decode engine only (rejected after their prefill); decode0 killed (SIGKILL) at %.0f%% of the run, restarted at %.0f%%\n",
		o.invalidRate*100, demoCrashAt*100, demoBackAt*100)
	fmt.Fprintf(w, "  shortened so that the demo fits a minute: lease, vllm and vllm-lease run with --kv-lease %v (default 30s),\n", o.kvLease)
	fmt.Fprintf(w, "    legacy-timeout with a %v timeout (vLLM's: 480s)\n\n", o.legacyTimeout)
}

func settledText(c *bench.ClusterReport) string {
	if c.Settled {
		return fmt.Sprintf("all released %.1fs after it", c.SettleSeconds)
	}
	return fmt.Sprintf("%.0f STILL HELD %.1fs after it", c.End.HeldBlocks, c.SettleSeconds)
}

func releasedText(m map[string]float64) string {
	return bench.LeaseFigures{Released: m}.ReleasedText()
}

// verifyDemo replays every distinct completed request of every policy's
// run on one single engine and fills in the rows' verification figures.
// It returns the number of requests replayed.
func verifyDemo(ctx context.Context, o *demoOptions, results []*bench.Result, rows []demoRow) (int, error) {
	if len(results) == 0 {
		return 0, nil
	}
	var keys []bench.TurnKey
	for _, r := range results {
		keys = append(keys, bench.CompletedKeys(r.Records)...)
	}
	seen := map[bench.TurnKey]bool{}
	distinct := keys[:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			distinct = append(distinct, k)
		}
	}
	url, stop, err := startReferenceEngine(ctx, o.model.serveArgs())
	if err != nil {
		return 0, err
	}
	defer stop()
	// Every policy ran the same workload (same seed): one replay serves all.
	texts, failed, err := bench.Replay(ctx, results[0].Config, url, distinct, demoReplayConcurrency)
	if err != nil {
		return 0, err
	}
	if len(failed) > 0 && len(texts) == 0 {
		for k, why := range failed {
			return 0, fmt.Errorf("the single engine failed request %+v: %s", k, why)
		}
	}
	for i, res := range results {
		checked, missing, mism := bench.CompareOutputs(res.Records, texts)
		rows[i].Verified, rows[i].Differed, rows[i].Unverified = checked-len(mism), len(mism), missing
		rows[i].Mismatches = mism[:min(len(mism), 5)]
		if missing > 0 {
			rows[i].Problems = append(rows[i].Problems, fmt.Sprintf("%d completed requests could not be replayed on the single engine", missing))
		}
	}
	return len(distinct), nil
}

// startReferenceEngine starts, in this process, the single engine the
// cluster's outputs must equal: kvlease serve --role both with the
// cluster's profile and model seed, or its model file (modelArgs), on a
// free port.
func startReferenceEngine(ctx context.Context, modelArgs []string) (url string, stop func(), err error) {
	args := append([]string{"--role", "both", "--host", "127.0.0.1", "--port", "0", "--profile", demoProfile}, modelArgs...)
	return cli.StartEngine(ctx, args, slog.New(slog.DiscardHandler))
}

func writeDemoTable(w io.Writer, rows []demoRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trequests\tok\terrors\taborted\trejected\tgoodput\tp99 TTFT\tunread lease\theld blocks\theld blocks\toutputs equal to\t")
	fmt.Fprintln(tw, "\t\t\t\t\t\treq/s\tms\tblock-seconds\tafter the load\tat the end\tsingle engine\t")
	for _, r := range rows {
		verdict := fmt.Sprintf("%d/%d", r.Verified, r.Verified+r.Differed+r.Unverified)
		if r.Differed > 0 {
			verdict += fmt.Sprintf(" (%d DIFFER)", r.Differed)
		}
		end := fmt.Sprintf("%.0f", r.HeldAtEnd)
		if r.HeldAtEnd > 0 || r.LeasesAtEnd > 0 {
			end += " LEAK"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.0f\t%.1f\t%.0f\t%s\t%s\t\n",
			r.Policy, r.Requests, r.Completed, r.Errors, r.Aborted, r.Rejected, r.Goodput, r.P99TTFTms,
			r.UnreadBlockSeconds, r.HeldAfterLoad, end, verdict)
	}
	tw.Flush()
}

// writeDemoLegend explains each column of the table and the lines under
// it.
func writeDemoLegend(w io.Writer, o demoOptions) {
	fmt.Fprintf(w, `
columns:
  policy            the lease release policy of the run (see kvlease demo -h, --policies)
  requests          requests sent: the same seeded workload under every policy (how many fit in the run varies with the load)
  ok                answered in full
  errors            streams cut by the deliberate kill: requests decode0 was streaming when it was killed (SIGKILL), which
                    the proxy ends with an error event ("decode engine ... failed"); no release policy can save them, and
                    the demo does not fail on them
  aborted           abandoned by their client on purpose (the %.0f%% fault), before or during their answer
  rejected          invalid for the decode engine (the %.0f%% fault): refused by it after their prefill, as planned
  goodput           completed requests per second with a time to first token of at most %v
  p99 TTFT          99th percentile of the time to first token of completed requests
  unread lease      KV memory a prefill engine held under leases nobody read (stranded), in block-seconds
  held blocks       the prefill engine's blocks still held by leases when the load stopped, and after settling
                    (at the end: must be 0, else LEAK)
  outputs equal to  completed outputs replayed on a single --role both engine and equal to its answer
leases released: how each policy's leases ended (read_done: read by the decode engine; aborted, rejected,
  undelivered: released when the proxy or D knew; expired: held until the lease ran out)
leases: %v for lease, vllm and vllm-lease, %v for legacy-timeout (production defaults 30s and 480s: stranded
  block-seconds grow with them)
`, o.abortRate*100, o.invalidRate*100, demoSLOTTFT, o.kvLease, o.legacyTimeout)
}

// Files written by the demo into --out.
const (
	demoJSON         = "demo.json"
	demoLatencyPlot  = "demo_ttft_cdf.png"
	demoHeldPlot     = "demo_held_blocks.png"
	demoLeasesPlot   = "demo_leases_active.png"
	demoResultSuffix = ".results.json"
)

// writeDemoFiles writes the plots, demo.json and each policy's
// results.json into o.out, and returns the paths written, plots first.
func writeDemoFiles(o demoOptions, rows []demoRow, results []*bench.Result) ([]string, error) {
	var written []string
	var ttft, held, leases []bench.Curve
	for i, res := range results {
		name := rows[i].Policy
		ttft = append(ttft, bench.Curve{Name: name, Points: stats.CDF(res.Latencies("ttft"), 500)})
		held = append(held, bench.Curve{Name: name, Points: bench.SumSeries(res.Metrics, bench.MetricHeldBlocks)})
		leases = append(leases, bench.Curve{Name: name, Points: bench.SumSeries(res.Metrics, bench.MetricLeasesActive)})
	}
	for _, p := range []struct {
		file string
		plot func(path string) (bool, error)
	}{
		{demoLatencyPlot, func(path string) (bool, error) {
			return bench.PlotCDF(path, "Time to first token by release policy (completed requests)", "TTFT (ms, log scale)", true, ttft)
		}},
		{demoHeldPlot, func(path string) (bool, error) {
			return bench.PlotSeries(path, "Held KV blocks, all engines (decode0 killed at 30%, restarted at 50%)", "blocks", held)
		}},
		{demoLeasesPlot, func(path string) (bool, error) {
			return bench.PlotSeries(path, "Active leases on the prefill engine", "leases", leases)
		}},
	} {
		path := filepath.Join(o.out, p.file)
		ok, err := p.plot(path)
		if err != nil {
			return written, err
		}
		if ok {
			written = append(written, path)
		}
	}
	report := struct {
		Seed          uint64        `json:"seed"`
		Duration      time.Duration `json:"duration_ns"`
		Requests      int           `json:"requests,omitempty"`
		Concurrency   int           `json:"concurrency"`
		KVLease       time.Duration `json:"kv_lease_ns"`
		LegacyTimeout time.Duration `json:"legacy_timeout_ns"`
		AbortRate     float64       `json:"abort_rate"`
		InvalidRate   float64       `json:"invalid_rate"`
		Policies      []demoRow     `json:"policies"`
	}{o.seed, o.duration, o.requests, o.concurrency, o.kvLease, o.legacyTimeout, o.abortRate, o.invalidRate, rows}
	b, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return written, err
	}
	path := filepath.Join(o.out, demoJSON)
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return written, err
	}
	written = append(written, path)
	for i, res := range results {
		path := filepath.Join(o.out, rows[i].Policy+demoResultSuffix)
		f, err := os.Create(path)
		if err != nil {
			return written, err
		}
		err = res.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
