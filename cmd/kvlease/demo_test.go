package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/kvleasebin"
	"github.com/kvlease/kvlease/xfer"
)

func TestDemoFlagsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--duration", "-1s"}, "--duration"},
		{[]string{"demo", "--duration", "0s"}, "--duration 0"},
		{[]string{"demo", "--requests", "-1"}, "--requests -1"},
		{[]string{"demo", "--concurrency", "0"}, "--concurrency 0"},
		{[]string{"demo", "--kv-lease", "1ms"}, "--kv-lease"},
		{[]string{"demo", "--legacy-timeout", "0s"}, "--legacy-timeout"},
		{[]string{"demo", "--abort-rate", "2"}, "--abort-rate 2"},
		{[]string{"demo", "--invalid-rate", "-0.5"}, "--invalid-rate"},
		{[]string{"demo", "--decode-max-num-seqs", "0"}, "--decode-max-num-seqs"},
		{[]string{"demo", "--prefill-num-blocks", "8"}, "--prefill-num-blocks"},
		{[]string{"demo", "--policies", "lease,fastest"}, "--policies"},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q: want 1 and a message naming %s", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, _ := runCmd(t, "demo", "stray"); code != 2 {
		t.Errorf("positional argument: exit %d, want 2", code)
	}
}

func TestDemoOptions(t *testing.T) {
	o, err := parseDemoFlags([]string{"--requests", "40", "--policies", "legacy-timeout, lease"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	// --requests alone bounds the run by requests only.
	if o.duration != 0 || o.requests != 40 || len(o.policies) != 2 || o.policies[0] != xfer.PolicyLegacyTimeout {
		t.Fatalf("options %+v", o)
	}
	cr := o.clusterRun(xfer.PolicyLegacyTimeout)
	if got := strings.Join(cr.Cluster.ExtraServeArgs, " "); got != "--release-policy legacy-timeout --kv-lease 10s" {
		t.Fatalf("legacy-timeout engines run with %q", got)
	}
	if got := strings.Join(o.clusterRun(xfer.PolicyLease).Cluster.ExtraServeArgs, " "); got != "--release-policy lease --kv-lease 3s" {
		t.Fatalf("lease engines run with %q", got)
	}
	if cr.SettleTimeout <= o.legacyTimeout {
		t.Fatalf("settle timeout %v: the policy's own timeout %v must fit in it", cr.SettleTimeout, o.legacyTimeout)
	}
	// The crash hits the first decode engine, and it comes back.
	if len(cr.Faults) != 2 || cr.Faults[0].Engine != demoPrefill || cr.Faults[1].Engine != demoPrefill || cr.Faults[0].At >= cr.Faults[1].At {
		t.Fatalf("faults %+v", cr.Faults)
	}
	load := cr.Load
	if !load.RecordOutputs || load.AbortRate == 0 || load.InvalidRate == 0 || load.Requests != 40 || load.Duration != 0 {
		t.Fatalf("load %+v", load)
	}
}

// kvleaseBinary is this command built once for the test process (or
// KVLEASE_BINARY): package localcluster runs engines with the current
// executable, which in a test is the test binary, so end-to-end tests run
// the real one.
func kvleaseBinary(t *testing.T) string {
	t.Helper()
	return kvleasebin.Build(t)
}

// runBinary runs the built kvlease with args, bounded by limit.
func runBinary(t *testing.T, bin string, limit time.Duration, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("kvlease %v did not end within %v\nstdout:\n%s\nstderr:\n%s", args, limit, out.String(), errb.String())
	}
	return out.String(), errb.String(), err
}

// TestDemoEndToEnd runs a short demo with the kvlease binary, as a user
// would: real engines as child processes, every policy, the single-engine
// check, the plots.
func TestDemoEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kvlease binary and runs three local clusters")
	}
	bin := kvleaseBinary(t)
	out := filepath.Join(t.TempDir(), "out")
	text, stderr, err := runBinary(t, bin, 4*time.Minute, "demo", "--duration", "1s", "--concurrency", "8",
		"--kv-lease", "900ms", "--legacy-timeout", "1500ms", "--out", out)
	if err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, text, stderr)
	}
	for _, want := range []string{
		"--kv-lease 900ms", "1.5s timeout", "decode0 killed",
		"unread lease", "held blocks", "outputs equal to",
		"OK: no block leaked", "kvlease sim --report",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// One table row per policy of the demo's default --policies, every
	// output verified, nothing held.
	for _, p := range xfer.Policies {
		var row []string
		for _, line := range strings.Split(text, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == p.String() && len(f) >= 12 {
				row = f
			}
		}
		if row == nil {
			t.Errorf("no table row for %s:\n%s", p, text)
			continue
		}
		if held, verdict := row[10], row[11]; held != "0" || !strings.Contains(verdict, "/") {
			t.Errorf("%s: held at the end %s, outputs %s", p, held, verdict)
		}
	}
	var rep struct {
		Policies []demoRow `json:"policies"`
	}
	b, err := os.ReadFile(filepath.Join(out, demoJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Policies) != len(xfer.Policies) {
		t.Fatalf("%d policies in %s", len(rep.Policies), demoJSON)
	}
	for _, r := range rep.Policies {
		if r.Completed == 0 || r.Verified != r.Completed || r.Differed != 0 || r.HeldAtEnd != 0 || r.LeasesAtEnd != 0 || len(r.Problems) > 0 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
		if len(r.Faults) != 2 || strings.Contains(strings.Join(r.Faults, " "), "failed") {
			t.Errorf("%s: faults %v", r.Policy, r.Faults)
		}
	}
	for _, name := range []string{demoLatencyPlot, demoHeldPlot, demoLeasesPlot} {
		path := filepath.Join(out, name)
		if !strings.Contains(text, "wrote "+path) {
			t.Errorf("output does not name %s", path)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			continue
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width < 100 {
			t.Errorf("%s: not a PNG plot (%v, %+v)", name, err, cfg)
		}
	}
}

// TestDemoLegendExplainsEveryColumn: every column the demo's table prints
// has a line in the legend under it.
func TestDemoLegendExplainsEveryColumn(t *testing.T) {
	var table, legend strings.Builder
	writeDemoTable(&table, nil)
	writeDemoLegend(&legend, demoOptions{abortRate: 0.15, invalidRate: 0.1, kvLease: 3 * time.Second, legacyTimeout: 10 * time.Second})
	header := strings.Split(table.String(), "\n")[0]
	cols := regexp.MustCompile(`\S+(?: \S+)*`).FindAllString(header, -1)
	if len(cols) != 12 {
		t.Fatalf("header %q: %d columns", header, len(cols))
	}
	for _, c := range cols {
		if !regexp.MustCompile(`\n  ` + regexp.QuoteMeta(c) + `  +\S`).MatchString(legend.String()) {
			t.Errorf("the legend does not explain column %q:\n%s", c, legend.String())
		}
	}
}
