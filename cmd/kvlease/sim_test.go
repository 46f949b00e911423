package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/sim"
	"github.com/kvlease/kvlease/xfer"
)

func TestSimFlagsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--policy", "forever"}, "--policy"},
		{[]string{"sim", "--seeds", "-1"}, "--seeds"},
		{[]string{"sim", "--requests", "-3"}, "--requests"},
		{[]string{"sim", "--seeds", "2", "--workers", "0"}, "--workers"},
		{[]string{"sim", "--json", "-"}, "--json"},
		{[]string{"sim", "--report", "--seeds", "3"}, "--report"},
		{[]string{"sim", "--report", "--policy", "lease"}, "--report"},
		{[]string{"sim", "--liveness-limit", "-1s"}, "--liveness-limit"},
		{[]string{"sim", "--offload", "sometimes"}, "--offload"},
		{[]string{"sim", "--report", "--offload", "any"}, "--report"},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q: want 1 and a message naming %s", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, _ := runCmd(t, "sim", "stray"); code != 2 {
		t.Errorf("positional argument: exit %d, want 2", code)
	}
}

var traceHashRE = regexp.MustCompile(`trace hash ([0-9a-f]{16})`)

func TestSimReplaysASeed(t *testing.T) {
	var hashes []string
	for range 2 {
		code, stdout, stderr := runCmd(t, "sim", "--seed", "7")
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
		for _, want := range []string{"seed 7, policy lease, digest-only", "profile: ", "requests ", "PASS"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, stdout)
			}
		}
		m := traceHashRE.FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("no trace hash:\n%s", stdout)
		}
		hashes = append(hashes, m[1])
	}
	if hashes[0] != hashes[1] {
		t.Errorf("same seed, trace hashes %s and %s", hashes[0], hashes[1])
	}
	res, _ := sim.RunSeed(7, sim.Options{})
	if want := fmt.Sprintf("%016x", res.TraceHash); hashes[0] != want {
		t.Errorf("command's trace hash %s, RunSeed's %s", hashes[0], want)
	}
}

func TestSimSweep(t *testing.T) {
	code, stdout, stderr := runCmd(t, "sim", "--seeds", "6", "--seed", "20", "--workers", "2", "--policy", "vllm-lease")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"6 seeds from 20, policy vllm-lease, digest-only, 2 workers", "seeds/s", "simulated requests per wall second", "failures: none"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestSimSweepFailuresNameTheirReplay(t *testing.T) {
	// A liveness bound nobody meets: every seed fails. The sweep stops
	// after the first (the seeds already running finish), or with
	// --keep-going runs and lists all; either way it exits 1 and prints
	// each failure's replay command.
	args := []string{"sim", "--seeds", "5", "--seed", "3", "--safety-phase", "1ms", "--liveness-limit", "1ns", "--policy", "legacy-timeout", "--progress", "0"}
	code, stdout, stderr := runCmd(t, append(args, "--workers", "1")...)
	if code != 1 || strings.Contains(stdout, "failures: 5") || !strings.Contains(stdout, "seed 3: liveness") {
		t.Fatalf("stop at the first failure: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "replay: go run ./cmd/kvlease sim --seed 3 --policy legacy-timeout --safety-phase 1ms --liveness-limit 1ns") {
		t.Errorf("no replay command:\n%s", stdout)
	}
	code, stdout, stderr = runCmd(t, append(args, "--workers", "2", "--keep-going")...)
	if code != 1 || !strings.Contains(stdout, "failures: 5") || !strings.Contains(stderr, "5 of 5 seeds failed") {
		t.Fatalf("--keep-going: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, seed := range []string{"3", "4", "5", "6", "7"} {
		if !strings.Contains(stdout, "seed "+seed+": liveness") {
			t.Errorf("seed %s not listed:\n%s", seed, stdout)
		}
	}
}

func TestSimReport(t *testing.T) {
	code, stdout, stderr := runCmd(t, "sim", "--report", "--json", "-")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var rep struct {
		FaultMix    faultMix    `json:"fault_mix"`
		Policies    []policyRow `json:"policies"`
		Partitioned []policyRow `json:"partitioned_policies"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(rep.Policies) != 4 || len(rep.Partitioned) != 4 || rep.FaultMix.Requests != 400 {
		t.Fatalf("report %+v", rep)
	}
	lease, merged, vllm, legacy := rep.Policies[0], rep.Policies[1], rep.Policies[2], rep.Policies[3]
	if lease.Policy != "lease" || merged.Policy != "vllm" || vllm.Policy != "vllm-lease" || legacy.Policy != "legacy-timeout" {
		t.Fatalf("policies %s %s %s %s", lease.Policy, merged.Policy, vllm.Policy, legacy.Policy)
	}
	// A partition longer than the lease: vLLM's design reads freed blocks
	// when it heals; every other policy tells D and reads none.
	for _, r := range rep.Partitioned {
		if (r.Policy == "vllm") != (r.FreedReads > 0) {
			t.Errorf("partitioned %s: %d reads of freed blocks", r.Policy, r.FreedReads)
		}
	}
	if lease.EarlyFrees != 0 {
		t.Errorf("lease freed %d leases early", lease.EarlyFrees)
	}
	// The point of the product: the lease policy strands far less memory
	// under the same faults (issue 7's targets: ≤ 1% of legacy-timeout's,
	// ≤ 10% of vllm-lease's).
	if !(lease.UnreadBlockSeconds <= 0.01*legacy.UnreadBlockSeconds && lease.UnreadBlockSeconds <= 0.1*vllm.UnreadBlockSeconds) {
		t.Errorf("unread lease block-seconds: lease %.1f, vllm-lease %.1f, legacy-timeout %.1f",
			lease.UnreadBlockSeconds, vllm.UnreadBlockSeconds, legacy.UnreadBlockSeconds)
	}
	for _, r := range append(rep.Policies, rep.Partitioned...) {
		if r.HeldAtEnd != 0 || r.Mismatches != 0 || r.Violations != 0 || r.Completed == 0 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
	}
}

func TestSimReportIsTheSwarmsCode(t *testing.T) {
	// The report's rows are sim.RunSeed results on sim.StandardFaults: the
	// same run, event for event, as the swarm's code gives.
	mix := defaultFaultMix()
	mix.Requests = 60
	row := runPolicy(xfer.PolicyLease, mix)
	res, err := sim.RunSeed(mix.Seed, mix.options(xfer.PolicyLease))
	if err != nil {
		t.Fatal(err)
	}
	if row.TraceHash != fmt.Sprintf("%016x", res.TraceHash) || row.Completed != res.Completed {
		t.Errorf("report row %+v, swarm result %x %d", row, res.TraceHash, res.Completed)
	}
	std := sim.StandardFaults()
	if mix.Rate != std.Rate || mix.AbortShare != std.AbortShare || len(std.Script) != 1 || mix.CrashAt != std.Script[0].At {
		t.Errorf("demo's default mix %+v is not sim.StandardFaults %+v", mix, std)
	}
}

func TestSimFleetFlagsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--prefill", "4"}, "--fleet"},
		{[]string{"sim", "--fleet", "--report"}, "--fleet"},
		{[]string{"sim", "--fleet", "--policy", "vllm"}, "--fleet"},
		{[]string{"sim", "--fleet", "--policies", "lease,forever"}, "--policies"},
		{[]string{"sim", "--fleet", "--decode", "0"}, "--decode"},
		{[]string{"sim", "--fleet", "--duration", "-1s"}, "--duration"},
		{[]string{"sim", "--fleet", "--rate", "0"}, "--rate"},
		{[]string{"sim", "--fleet", "--crashes-per-hour", "-1"}, "--crashes-per-hour"},
		{[]string{"sim", "--fleet", "--rate", "1", "--aborts-per-hour", "4000"}, "--aborts-per-hour"},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q: want 1 and a message naming %s", tc.args, code, stderr, tc.want)
		}
	}
}

func TestSimFleet(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sim", "--fleet", "--prefill", "2", "--decode", "8", "--rate", "28", "--duration", "1m",
		"--crashes-per-hour", "60", "--partitions-per-hour", "60", "--policies", "lease,legacy-timeout", "--out", dir}
	code, stdout, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"fleet: 2 prefill × 8 decode engines", "lease", "legacy-timeout", "heartbeats per P",
		"P's lease releases by reason", "fleet.json", "fleet-stranded.png"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []fleetRun
	if err := json.Unmarshal(b, &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Policy != "lease" || runs[1].Policy != "legacy-timeout" || len(runs[0].Result.Series) != 6 {
		t.Fatalf("fleet.json: %+v", runs)
	}
	if st, err := os.Stat(filepath.Join(dir, "fleet-stranded.png")); err != nil || st.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}
	// The table is the same whatever the number of workers.
	_, again, _ := runCmd(t, append(args[:len(args)-2], "--workers", "1")...)
	if table(again) != table(stdout) {
		t.Errorf("one worker:\n%s\ntwo:\n%s", again, stdout)
	}
}

// table is the fleet output up to the wall time line.
func table(s string) string {
	if i := strings.Index(s, "\n2 policies in"); i >= 0 {
		return s[:i]
	}
	return s
}
