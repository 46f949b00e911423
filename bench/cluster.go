package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/proxy"
)

// Scenario names a preset of faults for a run against a local cluster
// (RunCluster); see Apply.
type Scenario string

// The scenarios.
const (
	ScenarioNone            Scenario = ""
	ScenarioDecodeCrash     Scenario = "decode-crash"
	ScenarioDecodeHang      Scenario = "decode-hang"
	ScenarioDecodeReject    Scenario = "decode-reject"
	ScenarioDecodeCongested Scenario = "decode-congested"
	ScenarioClientAbort     Scenario = "client-abort"
)

// Scenarios lists the named scenarios.
var Scenarios = []Scenario{ScenarioDecodeCrash, ScenarioDecodeHang, ScenarioDecodeReject, ScenarioDecodeCongested, ScenarioClientAbort}

// ParseScenario parses a --scenario value.
func ParseScenario(s string) (Scenario, error) {
	if slices.Contains(Scenarios, Scenario(s)) {
		return Scenario(s), nil
	}
	names := make([]string, len(Scenarios))
	for i, sc := range Scenarios {
		names[i] = string(sc)
	}
	return "", fmt.Errorf("%q: want one of %s", s, strings.Join(names, ", "))
}

// The scenarios' parameters.
const (
	// A crashed or hung decode engine is out between these points of the
	// run.
	faultFrom, faultUntil = 0.3, 0.6
	// scenarioInvalidRate and scenarioAbortRate are the shares of
	// decode-reject and client-abort when the load sets none.
	scenarioInvalidRate = 0.25
	scenarioAbortRate   = 0.3
	// congestedMaxNumSeqs is each decode engine's batch in
	// decode-congested.
	congestedMaxNumSeqs = 2
)

// Apply sets s up on c, which must not have its own faults yet:
//
//   - decode-crash: the first decode engine is killed (SIGKILL) at 30% of
//     the run and restarted at 60%; at least 2 decode engines, so the
//     proxy has one to route to meanwhile.
//   - decode-hang: the same engine is stopped (SIGSTOP) at 30% and
//     continued (SIGCONT) at 60%: it keeps its connections but answers
//     nothing.
//   - decode-reject: a share of the requests (Load.InvalidRate, 25% if
//     unset) is invalid for the decode leg only, so each is rejected by a
//     decode engine after its prefill ran.
//   - decode-congested: every decode engine runs at most 2 requests at a
//     time (--max-num-seqs 2), far below any load of more than a few
//     requests in flight: requests wait in the decode queues, their leases
//     renewed.
//   - client-abort: the client abandons a share of the requests
//     (Load.AbortRate, 30% if unset) at random moments.
func (s Scenario) Apply(c *ClusterRun) error {
	if len(c.Faults) > 0 {
		return errors.New("bench: a scenario brings its own faults; the config has some already")
	}
	prefill := max(c.Cluster.Prefill, 1)
	decode0 := Fault{Engine: prefill, EngineName: proxy.RoleDecode + "0"}
	at := func(f Fault, point float64, a FaultAction) Fault {
		f.At, f.Action = point, a
		return f
	}
	switch s {
	case ScenarioNone:
	case ScenarioDecodeCrash, ScenarioDecodeHang:
		c.Cluster.Decode = max(c.Cluster.Decode, 2)
		stop, start := FaultKill, FaultRestart
		if s == ScenarioDecodeHang {
			stop, start = FaultPause, FaultResume
		}
		c.Faults = []Fault{at(decode0, faultFrom, stop), at(decode0, faultUntil, start)}
	case ScenarioDecodeReject:
		if c.Load.InvalidRate == 0 {
			c.Load.InvalidRate = scenarioInvalidRate
		}
	case ScenarioDecodeCongested:
		c.DecodeArgs = append(c.DecodeArgs, "--max-num-seqs", fmt.Sprint(congestedMaxNumSeqs))
	case ScenarioClientAbort:
		if c.Load.AbortRate == 0 {
			c.Load.AbortRate = scenarioAbortRate
		}
	default:
		_, err := ParseScenario(string(s))
		return err
	}
	c.Scenario = s
	return nil
}

// ClusterRun is a run against a local P/D cluster that RunCluster
// starts for it and stops after it.
type ClusterRun struct {
	// Load is the load; its URL is set to the cluster's proxy and every
	// engine is added to its MetricsURLs.
	Load Config
	// Cluster configures the cluster (counts, profile, engine flags such
	// as --release-policy in ExtraServeArgs).
	Cluster localcluster.Options
	// PrefillArgs and DecodeArgs are added to the command line of the
	// prefill engines, or of the decode engines, only.
	PrefillArgs, DecodeArgs []string
	// Faults are done to the engines during the load.
	Faults []Fault
	// Scenario is recorded in the report; Apply sets it.
	Scenario Scenario
	// SettleTimeout bounds the wait, after the load, for every engine to
	// hold no block and no lease; 0 is 10 s.
	SettleTimeout time.Duration
	// OnStart, when set, is called once the cluster is up, before the
	// load (to print its URLs).
	OnStart func(*localcluster.Cluster)
	// Settling, when set, is called at each look while the cluster
	// settles, with the time since the load ended and the figures seen.
	Settling func(since time.Duration, f LeaseFigures)
}

// ClusterReport is what happened to the cluster of a run: the faults done,
// the lease figures right after the load and once settled.
type ClusterReport struct {
	Scenario Scenario `json:"scenario,omitempty"`
	// Engines are "name url" of each engine, prefill first.
	Engines []string      `json:"engines"`
	Faults  []FaultRecord `json:"faults,omitempty"`
	// AfterLoad is read as soon as the load ended; End once every engine
	// held no block and no lease, or at SettleTimeout.
	AfterLoad LeaseFigures `json:"after_load"`
	End       LeaseFigures `json:"end"`
	// Settled reports whether End has no held block and no lease;
	// SettleSeconds is how long after the load it took (or the timeout).
	Settled       bool    `json:"settled"`
	SettleSeconds float64 `json:"settle_s"`
	// Exits are the engines that ended without being asked to.
	Exits []string `json:"unexpected_exits,omitempty"`
}

// Problems lists what went wrong on the cluster's side: blocks or leases
// still held once settled (a leak), engines that could not be read or
// that died unasked, faults that failed. None is an empty list.
func (r *ClusterReport) Problems() []string {
	var out []string
	if r.End.HeldBlocks > 0 || r.End.LeasesActive > 0 {
		out = append(out, fmt.Sprintf("%.0f blocks still held and %.0f leases active %.1f s after the load", r.End.HeldBlocks, r.End.LeasesActive, r.SettleSeconds))
	}
	for _, u := range r.End.Unreachable {
		out = append(out, "could not read "+u+" after the load")
	}
	out = append(out, r.Exits...)
	for _, f := range r.Faults {
		if f.Error != "" {
			out = append(out, "fault "+f.String())
		}
	}
	return out
}

// RunCluster starts the cluster of c, runs the load against its proxy
// while doing c's faults, waits for the cluster to settle (every lease
// ended and no block held, or SettleTimeout), reads every engine's lease
// figures, stops the cluster and returns the result with Result.Cluster
// set. The time series scraped from the engines go on through the settle.
// It returns an error when the cluster or the load cannot start; what
// happens during the run is in the result (see ClusterReport.Problems).
func RunCluster(ctx context.Context, c ClusterRun) (*Result, error) {
	opt := c.Cluster
	opt.Prefill, opt.Decode = max(opt.Prefill, 1), max(opt.Decode, 1)
	if err := validateFaults(c.Faults, opt.Prefill+opt.Decode); err != nil {
		return nil, err
	}
	if c.SettleTimeout <= 0 {
		c.SettleTimeout = 10 * time.Second
	}
	if len(c.PrefillArgs)+len(c.DecodeArgs) > 0 {
		base := opt.ServeArgs
		if base == nil {
			base = localcluster.DefaultServeArgs
		}
		pre, dec := slices.Clone(c.PrefillArgs), slices.Clone(c.DecodeArgs)
		opt.ServeArgs = func(e localcluster.Engine, secretFile string) []string {
			args := base(e, secretFile)
			if e.Role == proxy.RolePrefill {
				return append(args, pre...)
			}
			return append(args, dec...)
		}
	}
	cl, err := localcluster.Start(ctx, opt)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rep := &ClusterReport{Scenario: c.Scenario}
	var urls []string
	for _, e := range cl.Engines() {
		rep.Engines = append(rep.Engines, e.Name()+" "+e.URL)
		urls = append(urls, e.URL)
	}
	if c.OnStart != nil {
		c.OnStart(cl)
	}

	load := c.Load
	load.URL = cl.URL()
	load.MetricsURLs = append(slices.Clone(load.MetricsURLs), urls...)
	load.Processes = slices.Clone(load.Processes)
	for i, e := range cl.Engines() {
		if pid := cl.PID(i); pid > 0 {
			load.Processes = append(load.Processes, Process{Name: e.Name(), PID: pid})
		}
	}
	if i := cl.ProxyIndex(); i >= 0 {
		load.Processes = append(load.Processes, Process{Name: "proxy", PID: cl.PID(i)})
	} else if load.SelfName == "" {
		load.SelfName = "bench+proxy" // the proxy runs in this process
	}
	faulter := &clusterFaulter{c: cl}
	defer faulter.resumeAll() // never leave a stopped engine behind
	driver := newFaultDriver(ctx, faulter, c.Faults)
	user := load.Progress
	load.Progress = func(p Progress) {
		if user != nil {
			user(p)
		}
		driver.observe(p)
	}
	res, err := Run(ctx, load)
	rep.Faults = driver.finish()
	if err != nil {
		return nil, err
	}
	client := load.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	loadEnd := time.Now()
	rep.AfterLoad = ScrapeLeases(ctx, client, urls, 2*time.Second)
	rep.End, rep.Settled = settle(ctx, client, urls, res, c, rep.AfterLoad)
	rep.SettleSeconds = time.Since(loadEnd).Seconds()
exits:
	for {
		select {
		case x := <-cl.Exits():
			rep.Exits = append(rep.Exits, x.String())
		default:
			break exits
		}
	}
	res.Cluster = rep
	return res, nil
}

// settle looks at the engines until none holds a block or a lease, or
// c.SettleTimeout passes, or ctx ends, and returns the last figures. The
// engines' time series, scraped at each look, are added to res.Metrics.
func settle(ctx context.Context, client *http.Client, urls []string, res *Result, c ClusterRun, first LeaseFigures) (LeaseFigures, bool) {
	interval := min(res.Config.MetricsInterval, 250*time.Millisecond)
	scr := newScraper(client, urls, res.Started)
	defer func() {
		series, _ := scr.results()
		res.Metrics = mergeSeries(res.Metrics, series)
	}()
	start := time.Now()
	deadline := start.Add(c.SettleTimeout)
	f := first
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if c.Settling != nil {
			c.Settling(time.Since(start), f)
		}
		if f.Settled() || !time.Now().Before(deadline) || ctx.Err() != nil {
			return f, f.Settled()
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		scr.scrapeAll(ctx, interval)
		f = ScrapeLeases(ctx, client, urls, 2*time.Second)
	}
}

// mergeSeries appends the points of more to the series of the same URL
// and metric in into, or adds them.
func mergeSeries(into, more []MetricSeries) []MetricSeries {
	for _, m := range more {
		i := slices.IndexFunc(into, func(s MetricSeries) bool { return s.URL == m.URL && s.Metric == m.Metric })
		if i < 0 {
			into = append(into, m)
			continue
		}
		if room := maxMetricsPoints - len(into[i].Points); room > 0 {
			into[i].Points = append(into[i].Points, m.Points[:min(room, len(m.Points))]...)
		}
	}
	return into
}

// clusterFaulter is the Faulter of a running cluster. Pause and Resume
// signal the engine's process by its pid; resumeAll continues every engine
// still stopped.
type clusterFaulter struct {
	c      *localcluster.Cluster
	paused []int // engine indexes, in pause order
}

func (f *clusterFaulter) Kill(i int) error                         { return f.c.Kill(i) }
func (f *clusterFaulter) Restart(ctx context.Context, i int) error { return f.c.Restart(ctx, i) }

func (f *clusterFaulter) Pause(i int) error {
	pid := f.c.PID(i)
	if pid == 0 || !f.c.Running(i) {
		return localcluster.ErrNotRunning
	}
	if err := signalStop(pid); err != nil {
		return fmt.Errorf("bench: stopping engine %d (pid %d): %w", i, pid, err)
	}
	f.paused = append(f.paused, i)
	return nil
}

func (f *clusterFaulter) Resume(i int) error {
	pid := f.c.PID(i)
	if pid == 0 || !f.c.Running(i) {
		return localcluster.ErrNotRunning
	}
	f.paused = slices.DeleteFunc(f.paused, func(j int) bool { return j == i })
	if err := signalContinue(pid); err != nil {
		return fmt.Errorf("bench: continuing engine %d (pid %d): %w", i, pid, err)
	}
	return nil
}

// resumeAll continues the engines still paused. The fault driver has
// finished when it runs, so nothing else touches paused.
func (f *clusterFaulter) resumeAll() {
	for _, i := range slices.Clone(f.paused) {
		f.Resume(i)
	}
}

// writeClusterReport writes the part of Table about the cluster.
func writeClusterReport(w io.Writer, r *ClusterReport) {
	if r.Scenario != "" {
		fmt.Fprintf(w, "scenario %s on a local cluster: %s\n", r.Scenario, strings.Join(r.Engines, ", "))
	} else {
		fmt.Fprintf(w, "local cluster: %s\n", strings.Join(r.Engines, ", "))
	}
	for _, f := range r.Faults {
		fmt.Fprintf(w, "fault: %s\n", f)
	}
	a, e := r.AfterLoad, r.End
	fmt.Fprintf(w, "leases: granted %.0f; released %s\n", e.Granted, e.ReleasedText())
	fmt.Fprintf(w, "lease block-seconds: unread %.1f (stranded), read %.1f; remote-prefill fallbacks %.0f\n",
		e.BlockSecondsUnread, e.BlockSecondsRead, e.Fallbacks)
	state := fmt.Sprintf("settled in %.2f s", r.SettleSeconds)
	if !r.Settled {
		state = fmt.Sprintf("NOT settled after %.2f s", r.SettleSeconds)
	}
	fmt.Fprintf(w, "held KV blocks: %.0f right after the load (%.0f leases active), %.0f at the end (%.0f leases); %s\n",
		a.HeldBlocks, a.LeasesActive, e.HeldBlocks, e.LeasesActive, state)
	for _, p := range r.Problems() {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
}
