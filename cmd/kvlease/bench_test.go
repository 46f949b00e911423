package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlease/kvlease/bench"
	"github.com/kvlease/kvlease/cmd/internal/cli"
)

// fakeOpenAI serves /v1/models, streaming /v1/completions of max_tokens
// tokens, and /metrics.
func fakeOpenAI(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"tiny"}]}`)
		case "/metrics":
			io.WriteString(w, "vllm:kv_cache_usage_perc 0.5\nkvlease_kv_blocks{state=\"held\"} 4\nkvlease_leases_active 1\n")
		case "/v1/completions":
			n.Add(1)
			var body struct {
				MaxTokens int `json:"max_tokens"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range body.MaxTokens {
				fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d \"}]}\n\n", i)
			}
			io.WriteString(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestBenchCommand(t *testing.T) {
	srv, n := fakeOpenAI(t)
	dir := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCmd(t, "bench", "--url", srv.URL+"/v1", "--requests", "12", "--concurrency", "3",
		"--output-len", "4", "--input-len", "20-40", "--metrics-url", srv.URL, "--metrics-interval", "10ms", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n.Load() != 12 {
		t.Fatalf("server saw %d requests, want 12", n.Load())
	}
	// stdout is not a terminal here: plain progress lines, then the table.
	for _, want := range []string{"bench finished", "done 12/12", "completed 12, errors 0, aborted 0",
		"TTFT", "inter-token", "end-to-end", "errors: none", "wrote " + filepath.Join(dir, "results.json"), bench.PlotLatencyCDF, bench.PlotHeldBlocks} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	res := readResults(t, dir)
	if res.Summary.Completed != 12 || res.Config.Model != "tiny" || res.Summary.OutputTokens != 48 || len(res.Metrics) != 3 {
		t.Fatalf("results.json: summary %+v, model %q, %d series", res.Summary, res.Config.Model, len(res.Metrics))
	}
}

func TestBenchDurationWithoutRequests(t *testing.T) {
	srv, n := fakeOpenAI(t)
	code, stdout, stderr := runCmd(t, "bench", "--url", srv.URL, "--rate", "200", "--duration", "100ms", "--output-len", "2", "--progress", "none")
	if code != 0 || n.Load() == 0 || strings.Contains(stdout, "bench finished") {
		t.Fatalf("exit %d, %d requests\nstdout:\n%s\nstderr:\n%s", code, n.Load(), stdout, stderr)
	}
}

func TestBenchFlagsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench"}, 1, "--url is required"},
		{[]string{"bench", "--url", "localhost:80"}, 1, "--url"},
		{[]string{"bench", "--url", "http://x:1", "--api", "embeddings"}, 1, "--api"},
		{[]string{"bench", "--url", "http://x:1", "--concurrency", "0"}, 1, "--concurrency 0"},
		{[]string{"bench", "--url", "http://x:1", "--abort-rate", "2"}, 1, "--abort-rate 2"},
		{[]string{"bench", "--url", "http://x:1", "--workload", "poems"}, 1, "--workload"},
		{[]string{"bench", "--url", "http://x:1", "--turns", "0"}, 1, "--turns 0"},
		{[]string{"bench", "--url", "http://x:1", "--metrics-url", "nope"}, 1, "--metrics-url"},
		{[]string{"bench", "--url", "http://x:1", "--progress", "fancy"}, 1, "--progress"},
		{[]string{"bench", "--url", "http://x:1", "--input-len", "9-3"}, 2, "input-len"},
		{[]string{"bench", "stray"}, 2, "unexpected argument"},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

func TestBenchUnreachableServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	code, _, stderr := runCmd(t, "bench", "--url", url, "--requests", "1")
	if code != 1 || !strings.Contains(stderr, "listing models") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestBenchScenarioFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--scenario", "decode-crash", "--url", "http://x:1"}, "--url: not with --scenario"},
		{[]string{"bench", "--scenario", "decode-explode"}, "--scenario"},
		{[]string{"bench", "--scenario", "none", "--release-policy", "fastest"}, "--release-policy"},
		{[]string{"bench", "--scenario", "none", "--decode", "0"}, "--decode 0"},
		{[]string{"bench", "--scenario", "decode-crash", "--decode", "1"}, "needs at least 2 decode engines"},
		{[]string{"bench", "--scenario", "none", "--kv-lease", "-1s"}, "--kv-lease"},
		{[]string{"bench", "--scenario", "none", "--concurrency", "0"}, "--concurrency 0"},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestBenchScenarioEndToEnd hangs a decode engine of a real local cluster
// (SIGSTOP, then SIGCONT) under load and checks the report.
func TestBenchScenarioEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kvlease binary and runs a local cluster")
	}
	bin := kvleaseBinary(t)
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runBinary(t, bin, 3*time.Minute, "bench", "--scenario", "decode-hang", "--requests", "60",
		"--concurrency", "6", "--output-len", "16", "--kv-lease", "2s", "--progress", "none", "--out", dir)
	if err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"local cluster up (profile tiny, release policy lease, kv lease 2s)", "scenario decode-hang",
		"fault: pause decode0 at 30%: at", "fault: resume decode0 at 60%: at", "leases: granted 60",
		"0 at the end (0 leases); settled in", "wrote " + filepath.Join(dir, bench.PlotHeldBlocks)} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	f, err := os.Open(filepath.Join(dir, bench.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := bench.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cluster
	if c == nil || !c.Settled || len(c.Faults) != 2 || c.End.Granted != 60 || len(c.Problems()) > 0 || res.Summary.Completed != 60 {
		t.Fatalf("cluster report %+v, summary %+v", c, res.Summary)
	}
}

func TestBenchCPUProfile(t *testing.T) {
	srv, _ := fakeOpenAI(t)
	path := filepath.Join(t.TempDir(), "cpu.prof")
	code, stdout, stderr := runCmd(t, "bench", "--url", srv.URL, "--requests", "4", "--output-len", "2", "--progress", "none", "--cpuprofile", path)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile %s: %v, %v", path, fi, err)
	}
}

// TestBenchAPIKey: kvlease bench against kvlease serve --api-key sends the
// key given by --api-key, or by OPENAI_API_KEY, and never prints it;
// without a key it fails naming the 401.
func TestBenchAPIKey(t *testing.T) {
	t.Setenv("KVLEASE_CLUSTER_SECRET", "")
	url, stop, err := cli.StartEngine(context.Background(), []string{"--host", "127.0.0.1", "--port", "0", "--profile", "zero",
		"--api-key", "sk-serve"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	t.Setenv(cli.APIKeyEnv, "")
	t.Setenv(cli.VLLMAPIKeyEnv, "")
	t.Setenv("OPENAI_API_KEY", "")
	args := []string{"bench", "--url", url, "--requests", "3", "--output-len", "2", "--progress", "none"}
	if code, stdout, stderr := runCmd(t, append(args, "--api-key", "sk-serve")...); code != 0 || strings.Contains(stdout+stderr, "sk-serve") {
		t.Errorf("bench --api-key: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Setenv("OPENAI_API_KEY", "sk-serve")
	if code, stdout, stderr := runCmd(t, args...); code != 0 {
		t.Errorf("bench with OPENAI_API_KEY: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Setenv("OPENAI_API_KEY", "")
	if code, _, stderr := runCmd(t, args...); code == 0 || !strings.Contains(stderr, "401") {
		t.Errorf("bench without a key: exit %d\n%s", code, stderr)
	}
}

// kvlease bench's per-engine rates, against a real engine: 12 requests of
// 5 generated tokens each, and prompts whose tokens the engine reports in
// usage. The generation counter rises by exactly 60 over the run, the
// prompt counter by the prompts' tokens less the engine's prefix-cache
// hits (the counters are read before the load and after it), and each rate
// is its count over the load's wall time.
func TestBenchEngineRates(t *testing.T) {
	t.Setenv("KVLEASE_CLUSTER_SECRET", "")
	url, stop, err := cli.StartEngine(context.Background(), []string{"--host", "127.0.0.1", "--port", "0", "--profile", "zero",
		"--model", "m"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dir := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCmd(t, "bench", "--url", url, "--requests", "12", "--concurrency", "3",
		"--output-len", "5", "--input-len", "40-80", "--metrics-url", url, "--metrics-interval", "10ms", "--progress", "none", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	res := readResults(t, dir)
	prompts := 0
	for _, r := range res.Records {
		prompts += r.PromptTokens
	}
	var hits float64
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(m), "\n") {
		if strings.HasPrefix(line, "vllm:prompt_tokens_by_source_total{") && strings.Contains(line, `source="local_cache_hit"`) {
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &hits)
		}
	}
	if len(res.Engines) != 1 || res.Summary.Completed != 12 || prompts == 0 {
		t.Fatalf("engines %+v, summary %+v, prompt tokens %d", res.Engines, res.Summary, prompts)
	}
	e := res.Engines[0]
	if e.GenerationTokens != 60 || e.PromptTokens != float64(prompts)-hits {
		t.Errorf("engine counted %v prompt and %v generated tokens, want %v (%d less %v cache hits) and 60",
			e.PromptTokens, e.GenerationTokens, float64(prompts)-hits, prompts, hits)
	}
	if e.Seconds != res.Summary.DurationSeconds ||
		e.PromptTokensPerSecond != e.PromptTokens/e.Seconds || e.GenerationTokensPerSecond != 60/e.Seconds {
		t.Errorf("rates %+v over a run of %.3f s", e, res.Summary.DurationSeconds)
	}
	if !strings.Contains(stdout, "generation tok/s") || !strings.Contains(stdout, e.URL) {
		t.Errorf("the table lacks the engine's rates:\n%s", stdout)
	}
}

// readResults reads the results.json bench wrote into dir.
func readResults(t *testing.T, dir string) *bench.Result {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := bench.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
