package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvlease/kvlease/sim"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// faultMix is the policy report's workload: sim.StandardFaults with the
// knobs the demo exposes. It runs through sim.RunSeed, the code of the
// swarm, so the report and kvlease sim --seeds test the same thing.
type faultMix struct {
	Seed       uint64        `json:"seed"`
	Requests   int           `json:"requests"`
	Rate       float64       `json:"rate_per_s"`       // arrivals per simulated second
	AbortShare float64       `json:"abort_share"`      // share of clients that leave early
	CrashAt    time.Duration `json:"crash_d0_at_ns"`   // d0 is killed then (0: never)
	RestartFor time.Duration `json:"restart_after_ns"` // and restarted this much later
	// PartitionAt, PartitionFor: p0 and d1 are cut off from each other
	// then, for this long (0: never). The report's second table cuts them
	// for longer than a lease: leases of requests waiting at d1 expire.
	PartitionAt  time.Duration `json:"partition_p0_d1_at_ns,omitempty"`
	PartitionFor time.Duration `json:"partition_for_ns,omitempty"`
}

// partitioned is m with p0 and d1 cut off from each other from 1 s for
// 4 s, longer than the 3 s lease: under every policy the leases of
// requests waiting at d1 expire; under vllm d1 is not told and reads
// them when the partition heals (reads of freed blocks).
func (m faultMix) partitioned() faultMix {
	m.PartitionAt, m.PartitionFor = time.Second, 4*time.Second
	return m
}

// defaultFaultMix is sim.StandardFaults with 400 requests from seed 1.
func defaultFaultMix() faultMix {
	p := sim.StandardFaults()
	m := faultMix{Seed: 1, Requests: 400, Rate: p.Rate, AbortShare: p.AbortShare}
	for _, f := range p.Script {
		if f.Kind == sim.FaultCrash && f.Node == "d0" {
			m.CrashAt, m.RestartFor = f.At, f.For
		}
	}
	return m
}

// profile is the sim profile of the mix: StandardFaults with the mix's
// rate, abort share and d0 crash.
func (m faultMix) profile() sim.Profile {
	p := sim.StandardFaults()
	p.Rate, p.AbortShare = m.Rate, m.AbortShare
	p.Script = nil
	if m.CrashAt > 0 {
		p.Script = []sim.Fault{{Kind: sim.FaultCrash, Node: "d0", At: m.CrashAt, For: m.RestartFor}}
	}
	if m.PartitionFor > 0 {
		p.Script = append(p.Script, sim.Fault{Kind: sim.FaultPartition, Node: "p0", Peer: "d1", At: m.PartitionAt, For: m.PartitionFor})
	}
	return p
}

// options are the sim options of the mix under policy pol: the faulty
// phase covers the arrivals.
func (m faultMix) options(pol xfer.Policy) sim.Options {
	p := m.profile()
	safety := 3 * time.Second
	if p.Rate > 0 {
		safety = max(safety, time.Duration(1.25*float64(m.Requests)/p.Rate*float64(time.Second)), m.CrashAt+m.RestartFor, m.PartitionAt+m.PartitionFor)
	}
	return sim.Options{Policy: pol, Requests: m.Requests, Profile: &p, SafetyPhase: safety}
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
	ReadBlockSeconds   float64 `json:"read_lease_block_seconds"`
	// EarlyFrees are leases that expired while a reachable decoder waited
	// for them (must be 0 under lease).
	EarlyFrees int `json:"early_frees"`
	// FreedReads are READs of ended leases that vLLM's design serves from
	// freed blocks (policy vllm: silent corruption risked); the other
	// policies tell D the lease is gone.
	FreedReads int `json:"reads_of_freed_blocks"`
	// Fallbacks are requests whose decoder could not pull the prefix and
	// recomputed it (or failed).
	Fallbacks int            `json:"fallbacks"`
	Released  map[string]int `json:"released_by_reason"`
	// LastReleaseS is when the last lease ended, in simulated seconds.
	LastReleaseS float64 `json:"all_leases_ended_after_s"`
	// HeldAtEnd is every engine's held blocks once the cluster is idle: a
	// leak if not zero.
	HeldAtEnd  int `json:"blocks_held_at_end"`
	Mismatches int `json:"outputs_differing_from_single_engine"`
	// Violations counts the other failures (invariants, liveness).
	Violations  int      `json:"invariant_violations"`
	MismatchLog []string `json:"failures,omitempty"`
	TraceHash   string   `json:"trace_hash"`
}

func rowOf(res sim.Result) policyRow {
	r := policyRow{
		Policy: res.Policy.String(), Requests: res.Requests, Completed: res.Completed, Failed: res.Failed,
		Aborted: res.Aborted, Goodput: res.Goodput, P99TTFTms: float64(res.P99TTFT) / float64(time.Millisecond),
		UnreadBlockSeconds: res.UnreadBlockSeconds, ReadBlockSeconds: res.ReadBlockSeconds,
		EarlyFrees: res.EarlyFrees, FreedReads: res.FreedReads, Fallbacks: res.Fallbacks, Released: res.Released,
		LastReleaseS: res.LastRelease.Seconds(), HeldAtEnd: res.HeldAtEnd, Mismatches: res.Mismatches,
		Violations: len(res.Failures) - res.Mismatches, MismatchLog: res.Failures,
		TraceHash: fmt.Sprintf("%016x", res.TraceHash),
	}
	return r
}

// runPolicy runs the fault mix under one release policy.
func runPolicy(pol xfer.Policy, mix faultMix) policyRow {
	res, _ := sim.RunSeed(mix.Seed, mix.options(pol)) // the failures are in res
	return rowOf(res)
}

// policyReport runs the fault mix under every policy.
func policyReport(mix faultMix) []policyRow {
	var rows []policyRow
	for _, p := range xfer.Policies {
		rows = append(rows, runPolicy(p, mix))
	}
	return rows
}

// reportOK reports whether no row leaked a block, differed from the oracle,
// broke an invariant or (under lease) freed a lease early.
func reportOK(rows []policyRow) bool {
	for _, r := range rows {
		if r.HeldAtEnd != 0 || r.Mismatches != 0 || r.Violations != 0 || len(r.MismatchLog) != 0 {
			return false
		}
		if r.Policy == xfer.PolicyLease.String() && r.EarlyFrees != 0 {
			return false
		}
	}
	return true
}

func writePolicyTable(w io.Writer, rows []policyRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcompleted\tfailed\taborted\tgoodput req/s\tp99 TTFT ms\tunread lease block·s\tearly frees\treads of freed blocks\tfallbacks\tlast lease ended s\theld at end\tfailures\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t%d\t%.1f\t%d\t%d\t\n",
			r.Policy, r.Completed, r.Failed, r.Aborted, r.Goodput, r.P99TTFTms, r.UnreadBlockSeconds,
			r.EarlyFrees, r.FreedReads, r.Fallbacks, r.LastReleaseS, r.HeldAtEnd, len(r.MismatchLog))
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "P's lease releases by reason:")
	var reasons []string
	for _, r := range wire.Reasons() {
		reasons = append(reasons, r.String())
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-15s", r.Policy)
		seen := map[string]bool{}
		for _, name := range reasons {
			seen[name] = true
			if k := r.Released[name]; k > 0 {
				fmt.Fprintf(w, " %s=%d", name, k)
			}
		}
		var other []string // reasons this version of wire does not name
		for name := range r.Released {
			if !seen[name] {
				other = append(other, name)
			}
		}
		sort.Strings(other)
		for _, name := range other {
			fmt.Fprintf(w, " %s=%d", name, r.Released[name])
		}
		fmt.Fprintln(w)
	}
}

// writePolicyJSON writes the mix (with its full sim profile) and the rows,
// then the partitioned mix and its rows.
func writePolicyJSON(w io.Writer, mix faultMix, rows []policyRow, part faultMix, partRows []policyRow) error {
	p := mix.profile()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		FaultMix    faultMix    `json:"fault_mix"`
		Profile     sim.Profile `json:"profile"`
		Summary     string      `json:"profile_summary"`
		Policies    []policyRow `json:"policies"`
		Partitioned faultMix    `json:"partitioned_fault_mix"`
		PartRows    []policyRow `json:"partitioned_policies"`
	}{mix, p, strings.TrimSpace(p.String()), rows, part, partRows})
}
