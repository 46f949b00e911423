package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kvlease/kvlease/cmd/internal/cli"
	"github.com/kvlease/kvlease/internal/chaos"
)

func init() {
	cli.Register(cli.Command{
		Name:    "chaos",
		Summary: "a P/D cluster across network namespaces under load and a random fault schedule (root; ip, tc)",
		Run:     runChaos,
	})
}

// chaosOptions are kvlease chaos's flags, checked.
type chaosOptions struct {
	cfg    chaos.RunConfig
	logDir string
}

func parseChaosFlags(args []string, stderr io.Writer) (chaosOptions, error) {
	fs := cli.NewFlagSet("chaos", stderr)
	var o chaosOptions
	fs.DurationVar(&o.cfg.Duration, "duration", 2*time.Minute, "time under faults (then every fault heals and the cluster settles)")
	fs.Uint64Var(&o.cfg.Seed, "seed", 1, "seed of the fault schedule (kinds, targets, durations, gaps) and of the workload")
	fs.IntVar(&o.cfg.Workers, "workers", 4, "clients, each with one request in flight through the proxy")
	fs.DurationVar(&o.cfg.Harness.Lease, "kv-lease", 3*time.Second, "the engines' --kv-lease; fault durations scale with it")
	fs.IntVar(&o.cfg.Harness.Decode, "decode", 2, "decode engines (one prefill engine)")
	faults := fs.String("faults", "", "comma-separated fault kinds to draw from (default: all): "+strings.Join(chaos.FaultKinds, ", "))
	fs.StringVar(&o.logDir, "log-dir", "", "directory for the engines' and the proxy's logs (default: a temporary one, removed)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.cfg.Duration <= 0:
		return o, errors.New("--duration: want a positive duration such as 10m")
	case o.cfg.Workers < 1 || o.cfg.Workers > 256:
		return o, errors.New("--workers: want 1..256")
	case o.cfg.Harness.Lease < time.Second:
		return o, errors.New("--kv-lease: want at least 1s (the faults are drawn around it)")
	case o.cfg.Harness.Decode < 1 || o.cfg.Harness.Decode > chaos.MaxNodes/2:
		return o, fmt.Errorf("--decode: want 1..%d", chaos.MaxNodes/2)
	}
	if *faults != "" {
		for _, k := range strings.Split(*faults, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(chaos.FaultKinds, k) {
				return o, fmt.Errorf("--faults: no fault kind %q; want some of %s", k, strings.Join(chaos.FaultKinds, ", "))
			}
			o.cfg.Kinds = append(o.cfg.Kinds, k)
		}
	}
	o.cfg.Harness.LogDir = o.logDir
	return o, nil
}

func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseChaosFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := chaos.Available(); err != nil {
		return err
	}
	o.cfg.Log = stdout
	o.cfg.Harness.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if o.logDir == "" {
		dir, err := os.MkdirTemp("", "kvlease-chaos-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.cfg.Harness.LogDir = dir
	}
	fmt.Fprintf(stdout, "kvlease chaos: seed %d, %v of faults, --kv-lease %v, 1 prefill + %d decode engines, %d clients\n",
		o.cfg.Seed, o.cfg.Duration, o.cfg.Harness.Lease, o.cfg.Harness.Decode, o.cfg.Workers)
	rep, err := chaos.Run(ctx, o.cfg)
	if rep != nil {
		fmt.Fprintln(stdout)
		rep.Write(stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("chaos: checks failed (seed %d)", o.cfg.Seed)
	}
	return nil
}
