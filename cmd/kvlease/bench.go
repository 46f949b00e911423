package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kvlease/kvlease/bench"
	"github.com/kvlease/kvlease/cmd/internal/cli"
	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/xfer"
)

func init() {
	cli.Register(cli.Command{
		Name:    "bench",
		Summary: "load against an OpenAI-compatible endpoint: progress, percentiles, JSON and PNG",
		Run:     runBench,
	})
}

// benchFlags maps bench.Config fields to the flags that set them, so that a
// bad value is reported under the name the user typed.
var benchFlags = map[string]string{
	"URL": "--url", "API": "--api", "Rate": "--rate", "Concurrency": "--concurrency",
	"MaxInflight": "--max-inflight", "Requests": "--requests", "Duration": "--duration",
	"Timeout": "--timeout", "AbortRate": "--abort-rate", "InvalidRate": "--invalid-rate", "AbortMaxDelay": "--abort-max-delay",
	"MetricsInterval": "--metrics-interval", "MetricsURLs": "--metrics-url", "Processes": "--pids",
	"SLO.TTFT": "--slo-ttft", "SLO.TPOT": "--slo-tpot", "SLO.E2E": "--slo-e2e",
	"Workload.Kind": "--workload", "Workload.InputLen": "--input-len", "Workload.OutputLen": "--output-len",
	"Workload.Groups": "--groups", "Workload.PrefixLen": "--prefix-len", "Workload.Turns": "--turns",
	"Workload.CharsPerToken": "--chars-per-token",
}

// distFlag is a flag.Value for a length distribution.
type distFlag struct{ d *bench.Dist }

func (f distFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f distFlag) Set(s string) error {
	d, err := bench.ParseDist(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench", stderr)
	cfg := bench.DefaultConfig()
	wl := &cfg.Workload
	fs.StringVar(&cfg.URL, "url", "", "base URL of the OpenAI-compatible server (http://host:port); required unless --scenario")
	api := fs.String("api", string(cfg.API), "endpoint: completions or chat")
	fs.StringVar(&cfg.Model, "model", "", "model name (default: the first of GET /v1/models)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "send \"Authorization: Bearer KEY\" (a server started with --api-key); default "+
		cli.APIKeyEnv+", else "+cli.VLLMAPIKeyEnv+", else OPENAI_API_KEY; never written to the results")
	fs.BoolVar(&cfg.Stream, "stream", cfg.Stream, "stream tokens (needed for TTFT and inter-token latency)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "closed loop: requests in flight")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: Poisson arrivals per second (0: closed loop)")
	fs.IntVar(&cfg.MaxInflight, "max-inflight", cfg.MaxInflight, "open loop: bound on requests in flight; arrivals beyond it are dropped")
	fs.IntVar(&cfg.Requests, "requests", cfg.Requests, "requests to send (with --duration and no --requests: as many as fit)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop sending after this long (e.g. 30s)")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on each request")
	workload := fs.String("workload", string(wl.Kind), "random, shared-prefix or multi-turn")
	fs.Var(distFlag{&wl.InputLen}, "input-len", "prompt tokens per request: 128, 64-256 (uniform), normal:128,32 or exp:128")
	fs.Var(distFlag{&wl.OutputLen}, "output-len", "output tokens per request (max_tokens with ignore_eos), same forms")
	fs.IntVar(&wl.Groups, "groups", wl.Groups, "shared-prefix: number of shared system prompts")
	fs.IntVar(&wl.PrefixLen, "prefix-len", wl.PrefixLen, "shared-prefix: tokens of each system prompt")
	fs.IntVar(&wl.Turns, "turns", wl.Turns, "multi-turn: requests per conversation")
	fs.Float64Var(&wl.CharsPerToken, "chars-per-token", wl.CharsPerToken, "prompt characters per token (1 for kvlease's byte tokenizer, about 4 for BPE)")
	fs.Float64Var(&cfg.AbortRate, "abort-rate", 0, "share of requests the client abandons (before the first token or mid-stream)")
	fs.Float64Var(&cfg.InvalidRate, "invalid-rate", 0, "share of requests sent invalid on purpose (min_tokens > max_tokens): behind a P/D proxy, rejected by the decode engine after the prefill ran")
	fs.DurationVar(&cfg.AbortMaxDelay, "abort-max-delay", cfg.AbortMaxDelay, "latest moment of an abort before the first token")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of prompts, lengths, aborts and arrivals")
	fs.DurationVar(&cfg.SLO.TTFT, "slo-ttft", 0, "goodput: bound on time to first token (0: none)")
	fs.DurationVar(&cfg.SLO.TPOT, "slo-tpot", 0, "goodput: bound on time per output token (0: none)")
	fs.DurationVar(&cfg.SLO.E2E, "slo-e2e", 0, "goodput: bound on end-to-end latency (0: none)")
	metricsURLs := fs.String("metrics-url", "", "comma-separated Prometheus endpoints to scrape during the run (URL or URL/metrics)")
	fs.DurationVar(&cfg.MetricsInterval, "metrics-interval", cfg.MetricsInterval, "scrape interval")
	pids := fs.String("pids", "", "NAME=PID,... processes on this machine (the engines, a proxy) whose CPU time during the load is reported per request, beside bench's own; --scenario adds its cluster's")
	fs.BoolVar(&cfg.RecordOutputs, "record-outputs", false, "keep each request's generated text in results.json")
	out := fs.String("out", "", "directory for results.json and PNG plots (none if empty)")
	progress := fs.String("progress", "auto", "auto (a bar on a terminal, lines otherwise), bar, lines or none")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the client to this file (to see what the load generator itself costs)")
	lc := addLocalClusterFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.APIKey == "" {
		cfg.APIKey = cli.ClientAPIKey()
	}
	if set["duration"] && !set["requests"] {
		cfg.Requests = 0
	}
	cfg.API, wl.Kind = bench.API(*api), bench.WorkloadKind(*workload)
	procs, perr := bench.ParseProcesses(*pids)
	if perr != nil {
		return fmt.Errorf("--pids %w", perr)
	}
	cfg.Processes = procs
	for _, u := range strings.Split(*metricsURLs, ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.MetricsURLs = append(cfg.MetricsURLs, u)
		}
	}
	switch *progress {
	case "auto":
		if f, ok := stdout.(*os.File); ok && bench.IsTerminal(f) {
			cfg.Progress = bench.TerminalProgress(stdout)
		} else {
			cfg.Progress = bench.LineProgress(stdout, 5*time.Second)
		}
	case "bar":
		cfg.Progress = bench.TerminalProgress(stdout)
	case "lines":
		cfg.Progress = bench.LineProgress(stdout, 5*time.Second)
	case "none":
	default:
		return fmt.Errorf("--progress %q: want auto, bar, lines or none", *progress)
	}
	var cc *bench.ClusterRun
	if lc.scenario == "" && (set["model-file"] || set["tokenizer-file"]) {
		return errors.New("--model-file: goes with --scenario, whose engines bench starts itself (a server given by --url serves its own model)")
	}
	if lc.scenario != "" {
		if cfg.URL != "" {
			return errors.New("--url: not with --scenario, which runs against a local cluster that bench starts itself")
		}
		var err error
		if cc, err = lc.config(cfg, set, stdout, stderr); err != nil {
			return err
		}
		cfg = cc.Load
		cfg.URL = "http://127.0.0.1:1" // validated here, set to the cluster's proxy by RunCluster
	}
	if err := cfg.Validate(); err != nil {
		return flagError(err)
	}

	if *cpuProfile != "" {
		stop, err := cli.StartCPUProfile(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer stop()
	}
	var res *bench.Result
	var err error
	if cc != nil {
		res, err = bench.RunCluster(ctx, *cc)
	} else {
		res, err = bench.Run(ctx, cfg)
	}
	if err != nil {
		return flagError(err)
	}
	fmt.Fprintln(stdout)
	if err := res.Table(stdout); err != nil {
		return err
	}
	if *out != "" {
		paths, err := res.WriteDir(*out)
		for _, p := range paths {
			fmt.Fprintf(stdout, "wrote %s\n", p)
		}
		if err != nil {
			return err
		}
	}
	if res.Summary.Interrupted {
		return errors.New("interrupted")
	}
	if res.Cluster != nil {
		if p := res.Cluster.Problems(); len(p) > 0 {
			return fmt.Errorf("the cluster did not end clean: %s", strings.Join(p, "; "))
		}
	}
	return nil
}

// localClusterFlags are bench's flags for a run against a local cluster
// it starts itself (--scenario).
type localClusterFlags struct {
	scenario           string
	prefill, decode    int
	profile            string
	releasePolicy      string
	kvLease            time.Duration
	serveArgs          string
	prefillArgs        string
	decodeArgs         string
	settleTimeout      time.Duration
	logDir, binary     string
	engineReadyTimeout time.Duration
	model              *modelFileFlags
}

// settleMargin is added to the lease for the default --settle-timeout.
const settleMargin = 10 * time.Second

func addLocalClusterFlags(fs *flag.FlagSet) *localClusterFlags {
	lc := &localClusterFlags{}
	names := make([]string, len(bench.Scenarios))
	for i, s := range bench.Scenarios {
		names[i] = string(s)
	}
	fs.StringVar(&lc.scenario, "scenario", "", "start a local cluster and run the load against it with a fault: "+strings.Join(names, ", ")+", or none (no fault)")
	fs.IntVar(&lc.prefill, "prefill", 1, "--scenario: prefill engines")
	fs.IntVar(&lc.decode, "decode", 2, "--scenario: decode engines")
	fs.StringVar(&lc.profile, "profile", "tiny", "--scenario: the engines' model profile (kvlease serve --profile)")
	fs.StringVar(&lc.releasePolicy, "release-policy", "lease", "--scenario: the engines' release policy: lease, vllm, vllm-lease or legacy-timeout")
	fs.DurationVar(&lc.kvLease, "kv-lease", 0, "--scenario: the engines' --kv-lease (0: serve's default, 30s; legacy-timeout 480s)")
	fs.StringVar(&lc.serveArgs, "serve-args", "", "--scenario: more flags for every engine, space-separated")
	fs.StringVar(&lc.prefillArgs, "prefill-args", "", "--scenario: more flags for the prefill engines only")
	fs.StringVar(&lc.decodeArgs, "decode-args", "", "--scenario: more flags for the decode engines only (e.g. \"--max-waiting 4\")")
	fs.DurationVar(&lc.settleTimeout, "settle-timeout", 0, "--scenario: how long to wait after the load for every lease to end and no block to be held (0: the lease plus 10s)")
	fs.StringVar(&lc.logDir, "log-dir", "", "--scenario: directory for the engines' logs (default: a temporary one, removed)")
	fs.StringVar(&lc.binary, "binary", "", "--scenario: kvlease binary to run the engines with (default: this one)")
	fs.DurationVar(&lc.engineReadyTimeout, "ready-timeout", 60*time.Second, "--scenario: how long each engine may take to answer /health")
	lc.model = addModelFileFlags(fs)
	return lc
}

// config turns the flags into a cluster run of load. set holds the flags
// given on the command line.
func (lc *localClusterFlags) config(load bench.Config, set map[string]bool, stdout, stderr io.Writer) (*bench.ClusterRun, error) {
	sc := bench.ScenarioNone
	if lc.scenario != "none" {
		var err error
		if sc, err = bench.ParseScenario(lc.scenario); err != nil {
			return nil, fmt.Errorf("--scenario %v", err)
		}
	}
	policy, err := xfer.ParsePolicy(lc.releasePolicy)
	if err != nil {
		return nil, fmt.Errorf("--release-policy %q: want lease, vllm, vllm-lease or legacy-timeout", lc.releasePolicy)
	}
	switch {
	case lc.prefill < 1 || lc.prefill > localcluster.MaxEngines:
		return nil, fmt.Errorf("--prefill %d: want 1..%d engines", lc.prefill, localcluster.MaxEngines)
	case lc.decode < 1 || lc.decode > localcluster.MaxEngines:
		return nil, fmt.Errorf("--decode %d: want 1..%d engines", lc.decode, localcluster.MaxEngines)
	case lc.profile == "":
		return nil, errors.New("--profile: name a profile, e.g. --profile tiny")
	case lc.kvLease < 0:
		return nil, fmt.Errorf("--kv-lease %v: want a positive duration such as 5s, or 0 for serve's default", lc.kvLease)
	case lc.settleTimeout < 0:
		return nil, fmt.Errorf("--settle-timeout %v: want a positive duration, or 0 for the lease plus 10s", lc.settleTimeout)
	case lc.engineReadyTimeout <= 0:
		return nil, fmt.Errorf("--ready-timeout %v: want a positive duration such as 60s", lc.engineReadyTimeout)
	}
	if err := lc.model.check(); err != nil {
		return nil, err
	}
	cc := &bench.ClusterRun{Load: load, SettleTimeout: lc.settleTimeout,
		PrefillArgs: strings.Fields(lc.prefillArgs), DecodeArgs: strings.Fields(lc.decodeArgs)}
	cc.Cluster = localcluster.Options{Prefill: lc.prefill, Decode: lc.decode, Profile: lc.profile, LogDir: lc.logDir,
		Binary: lc.binary, ReadyTimeout: lc.engineReadyTimeout,
		// Engines dying unasked are in the report; the proxy's warnings
		// about each request a fault cut would drown the progress.
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))}
	cc.Cluster.ExtraServeArgs = append([]string{"--release-policy", policy.String()}, lc.model.serveArgs()...)
	cc.Cluster.ExtraServeArgs = append(cc.Cluster.ExtraServeArgs, strings.Fields(lc.serveArgs)...)
	lease := lc.kvLease
	if lease > 0 {
		cc.Cluster.ExtraServeArgs = append(cc.Cluster.ExtraServeArgs, "--kv-lease", lease.String())
	} else {
		lease = xfer.DefaultConfig(policy).LeaseDuration
	}
	if cc.SettleTimeout == 0 {
		cc.SettleTimeout = lease + settleMargin
	}
	if err := sc.Apply(cc); err != nil {
		return nil, fmt.Errorf("--scenario: %v", err)
	}
	if set["decode"] && cc.Cluster.Decode != lc.decode {
		return nil, fmt.Errorf("--decode %d: scenario %s needs at least %d decode engines", lc.decode, sc, cc.Cluster.Decode)
	}
	cc.OnStart = func(c *localcluster.Cluster) {
		fmt.Fprintf(stdout, "local cluster up (%s, release policy %s, kv lease %v): proxy %s\n", lc.model.describe(lc.profile), policy, lease, c.URL())
		for _, e := range c.Engines() {
			fmt.Fprintf(stdout, "  %-9s %s (pid %d)\n", e.Name(), e.URL, c.PID(e.Index))
		}
		for _, f := range cc.Faults {
			fmt.Fprintf(stdout, "  fault planned: %s\n", f)
		}
	}
	var last time.Duration = -time.Hour
	cc.Settling = func(since time.Duration, f bench.LeaseFigures) {
		if f.Settled() || since-last < 2*time.Second {
			return
		}
		last = since
		fmt.Fprintf(stdout, "settling %4.1fs: %.0f KV blocks held, %.0f leases active (waiting up to %v)\n",
			since.Seconds(), f.HeldBlocks, f.LeasesActive, cc.SettleTimeout)
	}
	return cc, nil
}

// flagError renames a bench.ConfigError after the flag that set the field.
func flagError(err error) error {
	var ce *bench.ConfigError
	if errors.As(err, &ce) {
		if name, ok := benchFlags[ce.Field]; ok {
			return fmt.Errorf("%s %s", name, ce.Problem)
		}
	}
	return err
}
