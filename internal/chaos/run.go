package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvlease/kvlease/internal/chaos/netem"
	"github.com/kvlease/kvlease/proxy"
)

// RunConfig configures Run: a cluster in namespaces under load, with a
// random fault schedule drawn from Seed, then a settle phase and checks.
type RunConfig struct {
	Harness  Options
	Seed     uint64
	Duration time.Duration // of the fault phase
	Workers  int           // clients, each with one request in flight
	// Kinds are the fault kinds drawn from, each as likely; nil is
	// FaultKinds.
	Kinds []string
	// Log receives one line per fault as it starts and heals.
	Log io.Writer
}

// FaultKinds are the faults Run draws from, each as likely.
var FaultKinds = []string{
	"partition-short", // P↔D, shorter than the peer grace
	"partition-long",  // P↔D, longer than the lease
	"cut-p-to-d",      // one way: what P sends D is lost
	"cut-d-to-p",      // one way: what D sends P is lost
	"isolate",         // one engine cut from everything
	"loss",            // 10–30% loss and a 20 Mbit/s cap on one engine's link (tc)
	"jitter-loss",     // netem: 10–30% loss and 50 ms ± 50 ms delay on one engine's link
	"reorder",         // netem: 10–30 ms ± as much delay, a quarter of the packets sent at once
	"duplicate",       // netem: 10–30% of the packets twice, 5 ms ± 5 ms delay
	"corrupt",         // netem: 1–5% of the packets with one bit flipped, 5 ms ± 5 ms delay
	"kill-decode",     // kill -9 of a decode engine, restarted after a while
	"kill-prefill",    // kill -9 of the prefill engine, restarted after a while
	"stop-prefill",    // SIGSTOP of the prefill engine, then SIGCONT
	"stop-decode",     // SIGSTOP of a decode engine, then SIGCONT
	"drain",           // SIGTERM of an engine mid-load (it drains), restarted
	"kill-proxy",      // kill -9 of the proxy, restarted
}

// Fault is one injected fault.
type Fault struct {
	Kind   string
	Target string
	At     time.Duration // since the run started
	For    time.Duration // how long it was in force
	// Release is how long after its start P was first seen to release a
	// lease for one of faultReasons, and whether it was (before the next
	// fault).
	Release       time.Duration
	Released      bool
	ReleaseReason string // of that first release
	startedAt     time.Time
}

// Report is the outcome of Run.
type Report struct {
	Seed                  uint64
	Lease, Grace          time.Duration
	Duration              time.Duration
	Faults                []Fault
	Sent, Answered, Equal int
	ClientAborts          int // requests the clients hung up on purpose
	Errors                map[string]int
	Released              map[string]float64 // seen by the watch, over restarts
	// ClaimedAfterRelease: leases a decode engine claimed (RENEW or
	// READ) after P had released them, by release reason; such a D
	// recomputes. Unclaimed ones are leases the claim deadline freed too
	// early for the path.
	ClaimedAfterRelease       map[string]float64
	Leftover                  []string // after settling; must be empty
	Unasked                   []string // processes that died on their own
	Different                 []Result
	SettleErr                 error
	ActiveAfter, HeldAfter    float64
	FaultsByKind              map[string]int
	ReleaseP99, ReleaseMedian map[string]time.Duration
	// Unexplained are the releases of a fault's reason (faultReasons)
	// seen by reason while no fault was in force nor had healed within
	// twice the lease.
	Unexplained map[string]float64
	// Netem is what the userspace netem did to the packets of impaired
	// links; ChecksumIP and ChecksumTCP are the corrupted packets the
	// nodes' kernels dropped by their IP header and TCP checksums.
	Netem                   netem.ForwardStats
	ChecksumIP, ChecksumTCP int
}

// OK reports whether every check held: every answer equal, nothing left
// held, no process died unasked.
func (r *Report) OK() bool {
	return len(r.Different) == 0 && len(r.Leftover) == 0 && len(r.Unasked) == 0 && r.SettleErr == nil && r.Answered > 0
}

// Run starts a harness, runs the workload with a random fault schedule for
// cfg.Duration, heals everything, lets the cluster settle and checks it.
// The schedule (kinds, targets, durations, gaps) comes from cfg.Seed; the
// instants it lands on do not.
func Run(ctx context.Context, cfg RunConfig) (*Report, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Harness.Decode == 0 {
		cfg.Harness.Decode = 2
	}
	cfg.Harness.Seed = cfg.Seed
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = FaultKinds
	}
	for _, k := range kinds {
		if !slices.Contains(FaultKinds, k) {
			return nil, fmt.Errorf("chaos: no fault kind %q (kinds: %s)", k, strings.Join(FaultKinds, ", "))
		}
	}
	if err := NetemAvailable(); err != nil {
		// Draw the other kinds only, and say why.
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return slices.Contains(netemKinds, k) })
		fmt.Fprintf(cfg.Log, "%v: no %s faults\n", err, strings.Join(netemKinds, ", "))
		if len(kinds) == 0 {
			return nil, err
		}
	}
	h, err := Start(ctx, cfg.Harness)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	lease := h.Lease()
	rep := &Report{Seed: cfg.Seed, Lease: lease, Grace: lease / 15, Duration: cfg.Duration}
	w := h.WatchReleases(100 * time.Millisecond)
	defer w.Stop()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var tally Tally
	loadDone := make(chan error, 1)
	go func() { loadDone <- h.Load(loadCtx, cfg.Seed, cfg.Workers, &tally) }()

	rng := rand.New(rand.NewPCG(cfg.Seed, 0xc4a05))
	begin := time.Now()
	var runErr error
	for time.Since(begin) < cfg.Duration && ctx.Err() == nil {
		if err := sleep(ctx, lease/2+time.Duration(rng.Int64N(int64(lease)))); err != nil {
			break
		}
		f, err := inject(ctx, h, rng, kinds, begin, cfg.Log)
		if err != nil {
			runErr = err
			break
		}
		rep.Faults = append(rep.Faults, f)
		for _, x := range h.Exited() {
			rep.Unasked = append(rep.Unasked, x.String())
		}
	}
	// Heal whatever a cancelled run left in force, then let the load end.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if err := h.Net.HealAll(hctx); err != nil && runErr == nil {
		runErr = err
	}
	stopLoad()
	if err := <-loadDone; err != nil && runErr == nil {
		runErr = err
	}
	rep.SettleErr = h.Settle(hctx, 3*lease+time.Minute)
	rep.Leftover, _ = h.Leftover(hctx)
	for _, x := range h.Exited() {
		rep.Unasked = append(rep.Unasked, x.String())
	}
	for _, e := range h.Cluster.Engines() {
		if m, err := Scrape(hctx, e.URL); err == nil {
			rep.ActiveAfter += m.Sum("kvlease_leases_active")
			rep.HeldAfter += m.Sum("kvlease_kv_blocks", `state="held"`)
		}
	}
	rep.Netem = h.Net.NetemStats()
	rep.ChecksumIP, rep.ChecksumTCP, _ = h.Net.ChecksumErrors(hctx)
	w.Stop()
	rep.Released = w.Totals()
	rep.ClaimedAfterRelease = w.ClaimedAfterRelease()
	rep.Sent, rep.Answered, rep.Equal, rep.Errors, rep.Different = tally.Snapshot()
	rep.ClientAborts = tally.Aborted
	summarize(rep, w)
	return rep, runErr
}

// inject draws one fault, applies it, holds it and heals it.
func inject(ctx context.Context, h *Harness, rng *rand.Rand, kinds []string, begin time.Time, log io.Writer) (Fault, error) {
	lease := h.Lease()
	grace := lease / 15
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	decodes := h.Cluster.URLs(proxy.RoleDecode)
	dName := fmt.Sprintf("decode%d", rng.IntN(len(decodes)))
	P, D := h.Node("prefill0"), h.Node(dName)
	f := Fault{Kind: kinds[rng.IntN(len(kinds))]}
	var apply, heal func() error
	healLinks := func() error { return errors.Join(h.Net.Heal(ctx, P), h.Net.Heal(ctx, D)) }
	restart := func(name string) func() error {
		return func() error { return h.Cluster.Restart(ctx, h.Index(name)) }
	}
	switch f.Kind {
	case "partition-short":
		f.Target, f.For = "prefill0<->"+dName, between(grace/4, grace/2)
		apply, heal = func() error { return h.Net.Partition(ctx, P, D) }, healLinks
	case "partition-long":
		f.Target, f.For = "prefill0<->"+dName, between(lease*6/5, lease*5/2)
		apply, heal = func() error { return h.Net.Partition(ctx, P, D) }, healLinks
	case "cut-p-to-d":
		f.Target, f.For = "prefill0->"+dName, between(lease/2, 2*lease)
		apply, heal = func() error { return h.Net.Cut(ctx, P, D) }, healLinks
	case "cut-d-to-p":
		f.Target, f.For = dName+"->prefill0", between(lease/2, 2*lease)
		apply, heal = func() error { return h.Net.Cut(ctx, D, P) }, healLinks
	case "isolate":
		nd := []*Node{P, D}[rng.IntN(2)]
		f.Target, f.For = nd.Name, between(lease/2, 2*lease)
		apply, heal = func() error { return h.Net.Isolate(ctx, nd) }, func() error { return h.Net.Heal(ctx, nd) }
	case "loss":
		nd := []*Node{P, D}[rng.IntN(2)]
		pct := 10 + rng.IntN(21)
		f.Target, f.For = fmt.Sprintf("%s %d%%", nd.Name, pct), between(lease, 3*lease)
		apply = func() error { return errors.Join(h.Net.Lossy(ctx, nd, pct), h.Net.Slow(ctx, nd, "20mbit")) }
		heal = func() error { return h.Net.Heal(ctx, nd) }
	case "jitter-loss", "reorder", "duplicate", "corrupt": // netemKinds
		nd := []*Node{P, D}[rng.IntN(2)]
		fault := netemFault(f.Kind, rng)
		f.Target, f.For = nd.Name+" "+fault.String(), between(lease, 3*lease)
		apply = func() error { return h.Net.Impair(ctx, nd, fault) }
		heal = func() error { return h.Net.Heal(ctx, nd) }
	case "kill-decode":
		f.Target, f.For = dName, between(lease/5, lease)
		apply, heal = func() error { return h.Cluster.Kill(h.Index(dName)) }, restart(dName)
	case "kill-prefill":
		f.Target, f.For = "prefill0", between(lease/5, lease)
		apply, heal = func() error { return h.Cluster.Kill(h.Index("prefill0")) }, restart("prefill0")
	case "stop-prefill":
		f.Target, f.For = "prefill0", between(lease/2, 2*lease)
		apply = func() error { return h.Cluster.Pause(h.Index("prefill0")) }
		heal = func() error { return h.Cluster.Resume(h.Index("prefill0")) }
	case "stop-decode":
		f.Target, f.For = dName, between(lease/2, 2*lease)
		apply = func() error { return h.Cluster.Pause(h.Index(dName)) }
		heal = func() error { return h.Cluster.Resume(h.Index(dName)) }
	case "drain":
		name := []string{"prefill0", dName}[rng.IntN(2)]
		f.Target = name
		apply, heal = func() error { return h.Cluster.Stop(h.Index(name)) }, restart(name)
	case "kill-proxy":
		f.Target, f.For = "proxy0", between(lease/10, lease/2)
		idx := h.Cluster.ProxyIndex()
		apply, heal = func() error { return h.Cluster.Kill(idx) }, func() error { return h.Cluster.Restart(ctx, idx) }
	default:
		panic("chaos: unknown fault " + f.Kind)
	}
	f.startedAt = time.Now()
	f.At = f.startedAt.Sub(begin)
	hold := "for " + f.For.Round(time.Millisecond).String()
	if f.For == 0 {
		hold = "until it has drained, then restarted"
	}
	fmt.Fprintf(log, "+%7.1fs  %-15s %-22s %s\n", f.At.Seconds(), f.Kind, f.Target, hold)
	before := h.Net.NetemStats()
	if err := apply(); err != nil {
		return f, fmt.Errorf("chaos: %s %s: %w", f.Kind, f.Target, err)
	}
	if f.For > 0 {
		sleep(ctx, f.For)
	} else {
		f.For = time.Since(f.startedAt) // drain: as long as the engine took to stop
	}
	if err := heal(); err != nil {
		return f, fmt.Errorf("chaos: healing %s %s: %w", f.Kind, f.Target, err)
	}
	if after := h.Net.NetemStats(); after.Offered > before.Offered {
		fmt.Fprintf(log, "           netem on %s: %s\n", f.Target, netemCounts(after.Stats, before.Stats))
	}
	return f, nil
}

// netemKinds are the FaultKinds made by the userspace netem.
var netemKinds = []string{"jitter-loss", "reorder", "duplicate", "corrupt"}

// netemFault draws the netem fault of one of the netem kinds.
func netemFault(kind string, rng *rand.Rand) netem.Fault {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	pct := func(lo, hi int) float64 { return float64(lo+rng.IntN(hi-lo+1)) / 100 }
	switch kind {
	case "jitter-loss":
		return netem.Fault{Delay: ms(50), Jitter: ms(50), Loss: pct(10, 30)}
	case "reorder":
		d := ms(10 + rng.IntN(21))
		return netem.Fault{Delay: d, Jitter: d, Reorder: 0.25}
	case "duplicate":
		return netem.Fault{Delay: ms(5), Jitter: ms(5), Duplicate: pct(10, 30)}
	case "corrupt":
		return netem.Fault{Delay: ms(5), Jitter: ms(5), Corrupt: pct(1, 5)}
	}
	panic("chaos: no netem fault " + kind)
}

// netemCounts is what the netem did between two snapshots of its counts.
func netemCounts(after, before netem.Stats) string {
	d := netem.Stats{Offered: after.Offered - before.Offered, Lost: after.Lost - before.Lost,
		Duplicated: after.Duplicated - before.Duplicated, Reordered: after.Reordered - before.Reordered,
		Corrupted: after.Corrupted - before.Corrupted, Overflow: after.Overflow - before.Overflow}
	return fmt.Sprintf("%d packets: %d lost, %d duplicated, %d reordered, %d corrupted, %d overflowed",
		d.Offered, d.Lost, d.Duplicated, d.Reordered, d.Corrupted, d.Overflow)
}

// faultReasons are the release reasons only a fault explains: with no
// fault at all, a lease ends read (read_done) or aborted, as the clients
// hang up one stream in ten. The time from a fault to P's release is
// measured to the first release of one of these.
var faultReasons = []string{"rejected", "undelivered", "peer_lost", "expired", "fallback", "shutdown", "unclaimed"}

// summarize counts faults by kind, the time from each fault's start to
// P's first release of a fault's reason before the next fault started,
// and the releases of a fault's reason seen while no fault was in force
// nor had healed within twice the lease.
func summarize(rep *Report, w *Watch) {
	rep.FaultsByKind = map[string]int{}
	byKind := map[string][]time.Duration{}
	for i := range rep.Faults {
		f := &rep.Faults[i]
		rep.FaultsByKind[f.Kind]++
		e, ok := w.firstAfter(f.startedAt, faultReasons)
		if ok && (i+1 == len(rep.Faults) || e.At.Before(rep.Faults[i+1].startedAt)) {
			d := e.At.Sub(f.startedAt)
			f.Release, f.Released, f.ReleaseReason = d, true, e.Reason
			byKind[f.Kind] = append(byKind[f.Kind], d)
		}
	}
	rep.ReleaseP99, rep.ReleaseMedian = map[string]time.Duration{}, map[string]time.Duration{}
	for k, ds := range byKind {
		slices.Sort(ds)
		rep.ReleaseP99[k] = ds[min(len(ds)-1, len(ds)*99/100)]
		rep.ReleaseMedian[k] = ds[len(ds)/2]
	}
	rep.Unexplained = map[string]float64{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		if !slices.Contains(faultReasons, e.Reason) {
			continue
		}
		explained := false
		for _, f := range rep.Faults {
			if !e.At.Before(f.startedAt) && !e.At.After(f.startedAt.Add(f.For+2*rep.Lease)) {
				explained = true
				break
			}
		}
		if !explained {
			rep.Unexplained[e.Reason] += e.N
		}
	}
}

// Write prints the report as the issue asks for it.
func (r *Report) Write(out io.Writer) {
	fmt.Fprintf(out, "seed %d, %v of faults, lease %v (heartbeat %v, peer grace %v)\n",
		r.Seed, r.Duration, r.Lease, r.Lease/6, r.Grace)
	fmt.Fprintf(out, "requests: %d sent, %d completed, %d/%d answers equal to the single engine, %d hung up by their client; errors %v\n",
		r.Sent, r.Answered, r.Equal, r.Answered, r.ClientAborts, r.Errors)
	fmt.Fprintf(out, "leases released by reason: %v; of a fault's reason with no fault in force nor healed within 2 leases: %v\n",
		nonZero(r.Released), nonZero(r.Unexplained))
	fmt.Fprintf(out, "released as unclaimed and later claimed by a decode engine (which recomputed): %v of %v; claimed after release by reason: %v\n",
		r.ClaimedAfterRelease["unclaimed"], r.Released["unclaimed"], nonZero(r.ClaimedAfterRelease))
	fmt.Fprintf(out, "after settling: %v active leases, %v held blocks; unasked exits %d\n", r.ActiveAfter, r.HeldAfter, len(r.Unasked))
	if r.Netem.Offered > 0 {
		fmt.Fprintf(out, "netem: %s, %d unroutable, %d refused by the device; the kernels dropped %d by the IP header checksum and %d by TCP's\n",
			netemCounts(r.Netem.Stats, netem.Stats{}), r.Netem.Unroutable, r.Netem.WriteErrors, r.ChecksumIP, r.ChecksumTCP)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tinjected\tfollowed by a release\tfirst release's reason\tmedian to release\tp99 to release")
	kinds := make([]string, 0, len(r.FaultsByKind))
	for k := range r.FaultsByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		n := 0
		reasons := map[string]int{}
		for _, f := range r.Faults {
			if f.Kind == k && f.Released {
				n++
				reasons[f.ReleaseReason]++
			}
		}
		var rs []string
		for reason, c := range reasons {
			rs = append(rs, fmt.Sprintf("%s %d", reason, c))
		}
		sort.Strings(rs)
		first := "-"
		if len(rs) > 0 {
			first = strings.Join(rs, ", ")
		}
		med, p99 := "-", "-"
		if n > 0 {
			med, p99 = r.ReleaseMedian[k].Round(10*time.Millisecond).String(), r.ReleaseP99[k].Round(10*time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", k, r.FaultsByKind[k], n, first, med, p99)
	}
	tw.Flush()
	for _, d := range r.Different {
		fmt.Fprintf(out, "DIFFERENT: %+v got %q\n", d.Request, d.Got)
	}
	if len(r.Leftover) > 0 {
		fmt.Fprintf(out, "LEFT HELD:\n  %s\n", strings.Join(r.Leftover, "\n  "))
	}
	if r.SettleErr != nil {
		fmt.Fprintf(out, "SETTLE: %v\n", r.SettleErr)
	}
	for _, u := range r.Unasked {
		fmt.Fprintf(out, "UNASKED EXIT: %s\n", u)
	}
	if r.OK() {
		fmt.Fprintln(out, "OK: every answer equal, nothing held, no process died unasked")
	} else {
		fmt.Fprintln(out, "FAILED")
	}
}

// sleep waits d or until ctx ends: the schedule's gaps and the time a
// fault stays in force (what a fault is, not a wait for something).
func sleep(ctx context.Context, d time.Duration) error {
	sleepCtx(ctx, d)
	return ctx.Err()
}
