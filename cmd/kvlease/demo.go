package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

func init() {
	register(command{
		name:    "demo",
		summary: "the main job on defaults: one faulty workload under each release policy, compared",
		run:     runDemo,
	})
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	mix := defaultFaultMix()
	fs.Uint64Var(&mix.Seed, "seed", mix.Seed, "seed of the workload and of every fault")
	fs.IntVar(&mix.Requests, "requests", mix.Requests, "requests in the workload")
	fs.Float64Var(&mix.Rate, "rate", mix.Rate, "arrivals per (simulated) second")
	fs.Float64Var(&mix.AbortShare, "abort-rate", mix.AbortShare, "share of clients that disconnect at a random moment")
	out := fs.String("out", "", "directory for report.json (none if empty)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case mix.Requests < 1 || mix.Requests > 100000:
		return fmt.Errorf("--requests %d: want 1..100000", mix.Requests)
	case !(mix.Rate > 0):
		return fmt.Errorf("--rate %v: want a positive rate", mix.Rate)
	case !(mix.AbortShare >= 0 && mix.AbortShare <= 1):
		return fmt.Errorf("--abort-rate %v: want a share in [0, 1]", mix.AbortShare)
	}
	fmt.Fprintf(stdout, "kvlease demo: %d requests at %.0f/s on 1 prefill and 2 decode engines (tiny profile),\n", mix.Requests, mix.Rate)
	fmt.Fprintf(stdout, "%.0f%% client aborts, decode d0 killed at %v and restarted %v later, decode engines congested (4 running slots each).\n",
		mix.AbortShare*100, mix.CrashAt, mix.RestartFor)
	fmt.Fprintf(stdout, "Same seed (%d), same faults, under each release policy; time is simulated.\n\n", mix.Seed)
	start := time.Now()
	rows := policyReport(mix)
	if err := ctx.Err(); err != nil {
		return err
	}
	writePolicyTable(stdout, rows)
	fmt.Fprintf(stdout, "\n(%s of wall time)\n", time.Since(start).Round(time.Millisecond))
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		path := filepath.Join(*out, "report.json")
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		err = writePolicyJSON(f, mix, rows)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "report: %s\n", path)
	}
	if !reportOK(rows) {
		for _, r := range rows {
			for _, m := range r.MismatchLog {
				fmt.Fprintf(stderr, "%s: %s\n", r.Policy, m)
			}
		}
		return errors.New("a block leaked, an output differed from the single-engine run, or an invariant broke (see the table)")
	}
	fmt.Fprintln(stdout, "OK: no block leaked, every output equals the single-engine run, no invariant broke.")
	return nil
}
