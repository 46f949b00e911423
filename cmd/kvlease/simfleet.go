package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kvlease/kvlease/bench"
	"github.com/kvlease/kvlease/bench/stats"
	"github.com/kvlease/kvlease/sim"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// fleetFlags are kvlease sim --fleet's inputs.
type fleetFlags struct {
	on       bool
	opts     sim.FleetOptions
	policies string
	out      string
}

// addFleetFlags defines the --fleet flags on fs; their defaults are
// sim.DefaultFleetOptions.
func addFleetFlags(fs *flag.FlagSet) *fleetFlags {
	f := &fleetFlags{opts: sim.DefaultFleetOptions()}
	o := &f.opts
	fs.BoolVar(&f.on, "fleet", false, "run a fleet: many engines, a steady load and per-hour fault rates for simulated hours, under every policy, and print what leases cost")
	fs.IntVar(&o.Prefill, "prefill", o.Prefill, "with --fleet: prefill engines")
	fs.IntVar(&o.Decode, "decode", o.Decode, "with --fleet: decode engines")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "with --fleet: simulated time")
	fs.Float64Var(&o.Rate, "rate", o.Rate, "with --fleet: client requests per simulated second (Poisson)")
	fs.Float64Var(&o.CrashesPerHour, "crashes-per-hour", o.CrashesPerHour, "with --fleet: engines killed per simulated hour (each restarted a minute later)")
	fs.Float64Var(&o.PartitionsPerHour, "partitions-per-hour", o.PartitionsPerHour, "with --fleet: engines cut off from every engine of the other role per simulated hour, for 5-90s")
	fs.Float64Var(&o.AbortsPerHour, "aborts-per-hour", o.AbortsPerHour, "with --fleet: clients that disconnect per simulated hour (half after the prefill answered, behind a proxy that drops the decode leg silently)")
	fs.StringVar(&f.policies, "policies", "lease,vllm,vllm-lease,legacy-timeout", "with --fleet: release policies to run, comma-separated")
	fs.StringVar(&f.out, "out", "", "with --fleet: directory for fleet.json and the PNG plot of stranded lease memory over time (empty: none)")
	return f
}

// validate checks the --fleet flags (given only with --fleet) and returns
// the policies to run.
func (f *fleetFlags) validate(set map[string]bool) ([]xfer.Policy, error) {
	if !f.on {
		for _, name := range []string{"prefill", "decode", "duration", "rate", "crashes-per-hour", "partitions-per-hour", "aborts-per-hour", "policies", "out"} {
			if set[name] {
				return nil, fmt.Errorf("--%s needs --fleet", name)
			}
		}
		return nil, nil
	}
	var pols []xfer.Policy
	for _, name := range strings.Split(f.policies, ",") {
		p, err := xfer.ParsePolicy(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("--policies %q: %q is not one of %s", f.policies, name, policyNames())
		}
		pols = append(pols, p)
	}
	o := f.opts
	switch {
	case o.Prefill < 1 || o.Prefill > 1000:
		return nil, fmt.Errorf("--prefill %d: want 1..1000", o.Prefill)
	case o.Decode < 1 || o.Decode > 10000:
		return nil, fmt.Errorf("--decode %d: want 1..10000", o.Decode)
	case o.Duration <= 0 || o.Duration > 7*24*time.Hour:
		return nil, fmt.Errorf("--duration %v: want a positive duration up to a week", o.Duration)
	case !(o.Rate > 0) || o.Rate > 1e6:
		return nil, fmt.Errorf("--rate %g: want 0 < rate ≤ 1e6", o.Rate)
	case !(o.CrashesPerHour >= 0) || o.CrashesPerHour > 1e6:
		return nil, fmt.Errorf("--crashes-per-hour %g: want 0..1e6", o.CrashesPerHour)
	case !(o.PartitionsPerHour >= 0) || o.PartitionsPerHour > 1e6:
		return nil, fmt.Errorf("--partitions-per-hour %g: want 0..1e6", o.PartitionsPerHour)
	case !(o.AbortsPerHour >= 0) || o.AbortsPerHour > o.Rate*3600:
		return nil, fmt.Errorf("--aborts-per-hour %g: want 0..%g (the arrivals per hour)", o.AbortsPerHour, o.Rate*3600)
	}
	for _, p := range pols {
		o.Policy = p
		if err := o.Validate(); err != nil {
			return nil, err
		}
	}
	return pols, nil
}

// fleetRun is one policy's fleet result and the wall time it took.
type fleetRun struct {
	Policy string          `json:"policy"`
	Wall   time.Duration   `json:"wall_ns"`
	Result sim.FleetResult `json:"result"`
}

// simFleet runs the fleet under each policy, workers at a time (each run
// in one goroutine; the results do not depend on the number of workers),
// prints the table and writes the plot.
func simFleet(ctx context.Context, f *fleetFlags, pols []xfer.Policy, workers int, stdout, stderr io.Writer) error {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	runs := make([]fleetRun, len(pols))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex // stderr: the workers report as they finish (a test's buffer is not safe for concurrent writes)
	start := time.Now()
	for range min(workers, len(pols)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := f.opts
				o.Policy = pols[i]
				t0 := time.Now()
				res, _ := sim.RunFleet(o) // the failures are in res
				runs[i] = fleetRun{Policy: pols[i].String(), Wall: time.Since(t0), Result: res}
				mu.Lock()
				fmt.Fprintf(stderr, "%s: %v wall, %d events\n", pols[i], runs[i].Wall.Round(time.Millisecond), res.Events)
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range pols {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	wall := time.Since(start)
	o := f.opts
	fmt.Fprintf(stdout, "fleet: %d prefill × %d decode engines (%s), %v simulated, %g requests/s, seed %d; per hour: %g crashes, %g partitions, %g client aborts\n\n",
		o.Prefill, o.Decode, sim.FleetProfile().Name, o.Duration, o.Rate, o.Seed, o.CrashesPerHour, o.PartitionsPerHour, o.AbortsPerHour)
	writeFleetTable(stdout, runs)
	var events uint64
	for _, r := range runs {
		events += r.Result.Events
	}
	fmt.Fprintf(stdout, "\n%d policies in %v wall with %d workers (%d events, %.0f per wall second)\n", len(runs), wall.Round(time.Second), min(workers, len(pols)),
		events, float64(events)/max(wall.Seconds(), 1e-9))
	if f.out != "" {
		paths, err := writeFleetOut(f.out, runs)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintf(stdout, "wrote %s\n", p)
		}
	}
	var bad []string
	for _, r := range runs {
		for _, s := range r.Result.Failures {
			bad = append(bad, fmt.Sprintf("%s: %s", r.Policy, firstLine(s)))
		}
	}
	if len(bad) > 0 {
		for _, s := range bad {
			fmt.Fprintln(stdout, s)
		}
		return errors.New("a fleet run broke an invariant or differed from the single-engine run")
	}
	return nil
}

func writeFleetTable(w io.Writer, runs []fleetRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcompleted\tfailed\taborted\tin flight\tgoodput\tp99 TTFT\tunread lease\tunread, never read\tleased blocks\tleased blocks\theartbeats per P\theartbeats per D\trenewals per P\tfallbacks\tclaim deadline\treads of\tfailures\t")
	fmt.Fprintln(tw, "\t\t\t\tmean / peak\treq/s\ts\tblock·s/req\tblock·s/req\t/ P pool, peak\t/ P pool, p99\tmsg/s  B/s\tmsg/s  B/s\t/s\tall  queue wait\tmean / max s\tfreed blocks\t\t")
	for _, r := range runs {
		s := r.Result
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f / %d\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f%%\t%.1f%%\t%.2f  %.0f\t%.2f  %.0f\t%.1f\t%d  %d\t%.1f / %.1f\t%d\t%d\t\n",
			r.Policy, s.Completed, s.Failed, s.Aborted, s.InFlightMean, s.InFlightPeak, s.Goodput, s.P99TTFT.Seconds(),
			s.StrandedPerRequest, s.WastedPerRequest, 100*s.PeakLeaseOccupancy, 100*s.P99LeaseOccupancy,
			s.HeartbeatMsgsPerP, s.HeartbeatBytesPerP, s.HeartbeatMsgsPerD, s.HeartbeatBytesPerD, s.RenewalsPerP,
			s.Fallbacks, s.QueueWaits, s.ClaimTimeoutMean.Seconds(), s.ClaimTimeoutMax.Seconds(), s.FreedReads, len(s.Failures))
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "P's lease releases by reason:")
	for _, r := range runs {
		fmt.Fprintf(w, "  %-15s", r.Policy)
		for _, reason := range wire.Reasons() {
			if k := r.Result.Released[reason.String()]; k > 0 {
				fmt.Fprintf(w, " %s=%d", reason, k)
			}
		}
		fmt.Fprintf(w, "  (early frees %d; %d crashes, %d partitions; %d outputs checked against the oracle)\n",
			r.Result.EarlyFrees, r.Result.Crashes, r.Result.Partitions, r.Result.OracleChecked)
	}
}

// writeFleetOut writes fleet.json and fleet-stranded.png to dir.
func writeFleetOut(dir string, runs []fleetRun) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	js := filepath.Join(dir, "fleet.json")
	b, err := json.MarshalIndent(runs, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(js, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	paths := []string{js}
	var curves []bench.Curve
	for _, r := range runs {
		c := bench.Curve{Name: r.Policy}
		for _, s := range r.Result.Series {
			c.Points = append(c.Points, stats.Point{X: s.At.Seconds(), Y: float64(s.Stranded)})
		}
		curves = append(curves, c)
	}
	png := filepath.Join(dir, "fleet-stranded.png")
	ok, err := bench.PlotSeries(png, "Stranded memory: blocks held by leases no read completed, all prefill engines", "blocks", curves)
	if err != nil {
		return nil, err
	}
	if ok {
		paths = append(paths, png)
	}
	return paths, nil
}
