package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUnknownCommandAndUsage(t *testing.T) {
	if code, _, stderr := runCmd(t, "frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCmd(t); code != 2 || !strings.Contains(stderr, "demo") {
		t.Errorf("no command: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := runCmd(t, "help"); code != 0 {
		t.Errorf("help: exit %d", code)
	}
}

func TestDemoFlagsAreValidated(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--requests", "0"},
		{"demo", "--rate", "-1"},
		{"demo", "--abort-rate", "2"},
	} {
		code, _, stderr := runCmd(t, args...)
		if code != 1 || !strings.Contains(stderr, args[1]) {
			t.Errorf("%v: exit %d, stderr %q: want 1 and a message naming the flag", args, code, stderr)
		}
	}
	if code, _, _ := runCmd(t, "demo", "stray"); code != 2 {
		t.Errorf("positional argument: exit %d, want 2", code)
	}
}

func TestDemoComparesPoliciesAndWritesJSON(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "demo", "--requests", "240", "--out", dir)
	if code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"lease", "vllm-lease", "legacy-timeout", "OK: no block leaked"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Policies []policyRow `json:"policies"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Policies) != 3 {
		t.Fatalf("%d policies in the report", len(rep.Policies))
	}
	lease, legacy := rep.Policies[0], rep.Policies[2]
	// The point of the product: under the same faults, the lease policy
	// strands far less memory than a fixed timeout, and nothing leaks.
	if !(lease.UnreadBlockSeconds < legacy.UnreadBlockSeconds) {
		t.Errorf("unread lease block-seconds: lease %.1f, legacy-timeout %.1f", lease.UnreadBlockSeconds, legacy.UnreadBlockSeconds)
	}
	for _, r := range rep.Policies {
		if r.HeldAtEnd != 0 || r.Mismatches != 0 || r.Violations != 0 || r.Completed == 0 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
	}
}
