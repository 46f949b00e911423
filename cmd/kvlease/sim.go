package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func init() {
	register(command{
		name:    "sim",
		summary: "deterministic cluster simulation: policy report on a standard fault mix",
		run:     runSim,
	})
}

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim", stderr)
	mix := defaultFaultMix()
	report := fs.Bool("report", false, "run the standard fault mix under lease, vllm-lease and legacy-timeout and print a table")
	jsonOut := fs.String("json", "", "with --report: also write the report as JSON to this file (- for stdout)")
	fs.Uint64Var(&mix.Seed, "seed", mix.Seed, "seed of the workload and of every fault")
	fs.IntVar(&mix.Requests, "requests", mix.Requests, "requests in the report's workload")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !*report {
		fmt.Fprintln(stderr, "kvlease sim: give --report")
		return errUsage
	}
	if mix.Requests < 1 || mix.Requests > 100000 {
		return fmt.Errorf("--requests %d: want 1..100000", mix.Requests)
	}
	rows := policyReport(mix)
	if err := ctx.Err(); err != nil {
		return err
	}
	if *jsonOut == "-" {
		if err := writePolicyJSON(stdout, mix, rows); err != nil {
			return err
		}
	} else {
		writePolicyTable(stdout, rows)
		if *jsonOut != "" {
			f, err := os.Create(*jsonOut)
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
		}
	}
	if !reportOK(rows) {
		return errors.New("a block leaked, an output differed from the single-engine run, or an invariant broke")
	}
	return nil
}
