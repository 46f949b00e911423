package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kvlease/kvlease/bench"
)

func init() {
	register(command{
		name:    "bench",
		summary: "load against an OpenAI-compatible endpoint: progress, percentiles, JSON and PNG",
		run:     runBench,
	})
}

// benchFlags maps bench.Config fields to the flags that set them, so that a
// bad value is reported under the name the user typed.
var benchFlags = map[string]string{
	"URL": "--url", "API": "--api", "Rate": "--rate", "Concurrency": "--concurrency",
	"MaxInflight": "--max-inflight", "Requests": "--requests", "Duration": "--duration",
	"Timeout": "--timeout", "AbortRate": "--abort-rate", "InvalidRate": "--invalid-rate", "AbortMaxDelay": "--abort-max-delay",
	"MetricsInterval": "--metrics-interval", "MetricsURLs": "--metrics-url",
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
	fs := newFlagSet("bench", stderr)
	cfg := bench.DefaultConfig()
	wl := &cfg.Workload
	fs.StringVar(&cfg.URL, "url", "", "base URL of the OpenAI-compatible server (http://host:port); required")
	api := fs.String("api", string(cfg.API), "endpoint: completions or chat")
	fs.StringVar(&cfg.Model, "model", "", "model name (default: the first of GET /v1/models)")
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
	fs.BoolVar(&cfg.RecordOutputs, "record-outputs", false, "keep each request's generated text in results.json")
	out := fs.String("out", "", "directory for results.json and PNG plots (none if empty)")
	progress := fs.String("progress", "auto", "auto (a bar on a terminal, lines otherwise), bar, lines or none")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["duration"] && !set["requests"] {
		cfg.Requests = 0
	}
	cfg.API, wl.Kind = bench.API(*api), bench.WorkloadKind(*workload)
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
	if err := cfg.Validate(); err != nil {
		return flagError(err)
	}

	res, err := bench.Run(ctx, cfg)
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
	return nil
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
