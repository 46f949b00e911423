package chaos

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/kvleasebin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kvleasebin.Remove()
	os.Exit(code)
}

// kvleaseBinary is the kvlease binary (built once per test process).
func kvleaseBinary(t testing.TB) string {
	t.Helper()
	return kvleasebin.Build(t)
}

// start skips the test when the harness cannot run here, and otherwise
// starts one whose cleanup reports engines that died unasked, and their
// logs when the test failed.
func start(t *testing.T, opt Options) *Harness {
	t.Helper()
	if testing.Short() {
		t.Skip("runs engines in network namespaces")
	}
	if err := Available(); err != nil {
		t.Skip(err)
	}
	opt.Binary = kvleaseBinary(t)
	opt.LogDir = t.TempDir()
	opt.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, x := range h.Exited() {
			t.Errorf("%s; log:\n%s", x, x.LogTail)
		}
		h.Close()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(opt.LogDir, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("--- %s (last 3000 bytes)\n%s", filepath.Base(l), tailString(string(b), 3000))
			}
		}
	})
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// must fails t on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// settle waits for every engine to hold nothing: the lease is the longest
// anything may rightly stay held once the load stopped; the rest is room
// for a loaded machine.
func settle(t *testing.T, h *Harness) {
	t.Helper()
	must(t, h.Settle(context.Background(), 3*h.Lease()+60*time.Second))
}

// released reads P's release reasons; allowed are the reasons the fault
// explains. It fails t on any other, and returns the counts.
func released(t *testing.T, h *Harness, allowed ...string) map[string]float64 {
	t.Helper()
	got, err := h.Released(context.Background())
	must(t, err)
	ok := map[string]bool{}
	for _, r := range allowed {
		ok[r] = true
	}
	var reasons []string
	for r, v := range got {
		if v > 0 {
			reasons = append(reasons, r)
			if !ok[r] {
				t.Errorf("P released %v leases as %q, which this fault does not explain (allowed %v)", v, r, allowed)
			}
		}
	}
	sort.Strings(reasons)
	t.Logf("released: %v", nonZero(got))
	return got
}

// checkAnswers fails t on any answer that differs from the reference and
// on any error not in allowedErrors (all errors with "*").
func checkAnswers(t *testing.T, tally *Tally, allowedErrors ...string) {
	t.Helper()
	sent, answered, equal, errs, diff := tally.Snapshot()
	t.Logf("workload: %s", tally)
	for _, d := range diff {
		t.Errorf("answer differs from the single engine: %+v got %q", d.Request, d.Got)
	}
	if answered == 0 {
		t.Errorf("no request answered of %d", sent)
	}
	_ = equal
	allow := map[string]bool{}
	for _, k := range allowedErrors {
		allow[k] = true
	}
	for k, v := range errs {
		if !allow[k] && !allow["*"] {
			t.Errorf("%d requests failed with %s", v, k)
		}
	}
}
