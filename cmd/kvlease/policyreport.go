package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/sim"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// faultMix is the standard faulty workload the policies are compared on, in
// simulated time: Poisson arrivals, client aborts at random moments, a
// decode engine that crashes and restarts, and a congested decode engine
// whose bounded queue rejects requests.
type faultMix struct {
	Seed        uint64        `json:"seed"`
	Requests    int           `json:"requests"`
	Rate        float64       `json:"rate_per_s"`       // arrivals per simulated second
	AbortShare  float64       `json:"abort_share"`      // share of clients that leave at a random moment
	CrashAt     time.Duration `json:"crash_d0_at_ns"`   // d0 is killed then (0: never)
	RestartFor  time.Duration `json:"restart_after_ns"` // and restarted this much later
	ObserveAt   time.Duration `json:"observe_at_ns"`    // when stranded memory is sampled
	SettleLimit time.Duration `json:"settle_limit_ns"`  // how long the liveness phase may take
}

func defaultFaultMix() faultMix {
	return faultMix{
		Seed: 1, Requests: 400, Rate: 200, AbortShare: 0.1,
		CrashAt: 800 * time.Millisecond, RestartFor: 400 * time.Millisecond,
		ObserveAt: 4 * time.Second, SettleLimit: 20 * time.Minute,
	}
}

// policyRow is one policy's outcome under the fault mix.
type policyRow struct {
	Policy    string  `json:"policy"`
	Requests  int     `json:"requests"`
	Completed int     `json:"completed"`
	Failed    int     `json:"failed"`
	Aborted   int     `json:"aborted_by_client"`
	Goodput   float64 `json:"goodput_req_per_s"`
	P99TTFTms float64 `json:"p99_ttft_ms"`
	// UnreadBlockSeconds is lease-held memory nobody ever read: stranded.
	UnreadBlockSeconds float64 `json:"unread_lease_block_seconds"`
	// HeldAtObserve is P's held blocks at ObserveAt, after the workload:
	// with nothing left to read, every one of them is stranded.
	HeldAtObserve int `json:"p_blocks_held_after_workload"`
	// HeldAtEnd is every engine's held blocks once the cluster is idle: a
	// leak if not zero.
	HeldAtEnd   int               `json:"blocks_held_at_end"`
	SettledIn   float64           `json:"all_leases_ended_after_s"`
	Fallbacks   uint64            `json:"fallbacks"`
	Released    map[string]uint64 `json:"released_by_reason"`
	Mismatches  int               `json:"outputs_differing_from_single_engine"`
	Violations  int               `json:"invariant_violations"`
	MismatchLog []string          `json:"mismatches,omitempty"`
}

// runPolicy runs the fault mix under one release policy.
func runPolicy(pol xfer.Policy, mix faultMix) policyRow {
	spec := sim.DefaultSpec()
	spec.Seed = mix.Seed
	spec.Decode = 2
	t := xfer.DefaultConfig(pol)
	if pol != xfer.PolicyLegacyTimeout {
		t = t.WithLease(3 * time.Second)
	}
	spec.Transfer = t
	spec.DecodeSched = spec.Sched
	spec.DecodeSched.MaxNumSeqs = 4
	spec.DecodeSched.MaxWaiting = 6
	c := sim.New(spec)

	rng := rand.New(rand.NewPCG(mix.Seed, 0x64656d6f))
	var reqs []*sim.Req
	at := clock.Instant(0)
	for i := range mix.Requests {
		at = at.Add(time.Duration(rng.ExpFloat64() / mix.Rate * float64(time.Second)))
		n := 32 + rng.IntN(480)
		prompt := make([]int32, n)
		for j := range prompt {
			prompt[j] = int32(32 + rng.IntN(90))
		}
		r := &sim.Req{
			ID: fmt.Sprintf("req-%04d", i), Prompt: prompt, MaxTokens: 8 + rng.IntN(24), IgnoreEOS: true,
			P: c.Node("p0"), D: c.Nodes[1+rng.IntN(spec.Decode)],
		}
		reqs = append(reqs, r)
		c.Submit(at, r)
		if rng.Float64() < mix.AbortShare {
			c.Abort(at.Add(time.Duration(rng.IntN(300))*time.Millisecond), r)
		}
	}
	if mix.CrashAt > 0 {
		c.Crash(clock.Instant(mix.CrashAt), "d0")
		c.Restart(clock.Instant(mix.CrashAt+mix.RestartFor), "d0")
	}

	c.RunUntil(clock.Instant(mix.ObserveAt))
	row := policyRow{Policy: pol.String(), Requests: len(reqs), HeldAtObserve: c.Held("p0")}
	settled := c.RunIdle(mix.SettleLimit)
	row.SettledIn = time.Duration(c.Now).Seconds()
	if !settled {
		row.Violations++
	}
	row.Violations += len(c.Violations)

	var ttft []time.Duration
	var last clock.Instant
	for _, r := range reqs {
		switch {
		case r.Error != "":
			row.Failed++
		case r.Status == sched.FinishedAborted:
			row.Aborted++
		case r.Done:
			row.Completed++
			ttft = append(ttft, r.FirstAt.Sub(r.SentAt))
			last = clock.Max(last, r.DoneAt)
		}
	}
	if last > 0 {
		row.Goodput = float64(row.Completed) / time.Duration(last).Seconds()
	}
	if len(ttft) > 0 {
		slices.Sort(ttft)
		row.P99TTFTms = float64(ttft[(len(ttft)*99+99)/100-1]) / float64(time.Millisecond)
	}
	for _, n := range c.Nodes {
		if !n.Crashed {
			row.HeldAtEnd += n.Core.Pool().NumHeld()
		}
		if cons := n.Core.Consumer(); cons != nil {
			for _, k := range cons.Stats().Fallbacks {
				row.Fallbacks += k
			}
		}
	}
	ps := c.Node("p0").Core.Producer().Stats()
	row.UnreadBlockSeconds = ps.BlockSecondsUnread
	row.Released = map[string]uint64{}
	for r, k := range c.Node("p0").Released {
		row.Released[r.String()] = uint64(k)
	}
	row.MismatchLog = sim.NewOracle(spec).Verify(c)
	row.Mismatches = len(row.MismatchLog)
	return row
}

// policyReport runs the fault mix under every policy.
func policyReport(mix faultMix) []policyRow {
	var rows []policyRow
	for _, p := range []xfer.Policy{xfer.PolicyLease, xfer.PolicyVLLMLease, xfer.PolicyLegacyTimeout} {
		rows = append(rows, runPolicy(p, mix))
	}
	return rows
}

// reportOK reports whether no row leaked a block, differed from the oracle
// or broke an invariant.
func reportOK(rows []policyRow) bool {
	for _, r := range rows {
		if r.HeldAtEnd != 0 || r.Mismatches != 0 || r.Violations != 0 {
			return false
		}
	}
	return true
}

func writePolicyTable(w io.Writer, rows []policyRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcompleted\tfailed\taborted\tgoodput req/s\tp99 TTFT ms\tunread lease block·s\tP held after workload\tall leases ended at s\theld at end\toutputs differing\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%d\t%.1f\t%d\t%d\t\n",
			r.Policy, r.Completed, r.Failed, r.Aborted, r.Goodput, r.P99TTFTms, r.UnreadBlockSeconds,
			r.HeldAtObserve, r.SettledIn, r.HeldAtEnd, r.Mismatches)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "P's lease releases by reason:")
	var reasons []string
	for r := wire.ReasonReadDone; r.Valid(); r++ {
		reasons = append(reasons, r.String())
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-15s", r.Policy)
		for _, name := range reasons {
			if k := r.Released[name]; k > 0 {
				fmt.Fprintf(w, " %s=%d", name, k)
			}
		}
		fmt.Fprintln(w)
	}
}

func writePolicyJSON(w io.Writer, mix faultMix, rows []policyRow) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		FaultMix faultMix    `json:"fault_mix"`
		Policies []policyRow `json:"policies"`
	}{mix, rows})
}
