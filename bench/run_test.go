package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testConfig(f *fakeServer) Config {
	c := DefaultConfig()
	c.URL = f.srv.URL
	c.Concurrency = 4
	c.Requests = 20
	c.Workload.InputLen = Fixed(32)
	c.Workload.OutputLen = Fixed(5)
	c.HTTPClient = f.srv.Client()
	c.Timeout = 10 * time.Second
	c.AbortMaxDelay = 20 * time.Millisecond
	return c
}

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunCountsAndTokens(t *testing.T) {
	for _, tc := range []struct {
		api    API
		stream bool
	}{{APICompletions, true}, {APICompletions, false}, {APIChat, true}, {APIChat, false}} {
		t.Run(string(tc.api)+"/stream="+map[bool]string{true: "yes", false: "no"}[tc.stream], func(t *testing.T) {
			f := newFakeServer(t)
			cfg := testConfig(f)
			cfg.API, cfg.Stream = tc.api, tc.stream
			res := run(t, cfg)
			s := res.Summary
			if s.Requests != 20 || s.Completed != 20 || s.Errors != 0 || s.Aborted != 0 || f.requests.Load() != 20 {
				t.Fatalf("summary %+v, server saw %d requests", s, f.requests.Load())
			}
			if s.Model != "fake-model" {
				t.Fatalf("model %q, want the first of /v1/models", s.Model)
			}
			if s.OutputTokens != 100 || s.E2E.Count != 20 {
				t.Fatalf("output tokens %d, e2e count %d; want 100, 20", s.OutputTokens, s.E2E.Count)
			}
			for i, rec := range res.Records {
				if rec.ID != i || rec.Outcome != OutcomeOK || rec.OutputTokens != 5 || rec.PromptTokens == 0 {
					t.Fatalf("record %d: %+v", i, rec)
				}
				if tc.stream && (rec.Chunks != 5 || len(rec.InterTokenSeconds) != 4 || rec.TTFTSeconds <= 0) {
					t.Fatalf("stream record %d: chunks %d, itl %d, ttft %v (the role chunk must not count)", i, rec.Chunks, len(rec.InterTokenSeconds), rec.TTFTSeconds)
				}
			}
			if tc.stream && (s.TTFT.Count != 20 || s.InterToken.Count != 80 || s.TPOT.Count != 20) {
				t.Fatalf("ttft %d, itl %d, tpot %d samples", s.TTFT.Count, s.InterToken.Count, s.TPOT.Count)
			}
			if !tc.stream && s.TTFT.Count != 0 {
				t.Fatalf("non-streaming run has TTFT samples")
			}
			if s.GoodputRequests != 20 || s.RequestsPerSecond <= 0 {
				t.Fatalf("goodput %d, rate %v", s.GoodputRequests, s.RequestsPerSecond)
			}
		})
	}
}

func TestRunErrorsByKind(t *testing.T) {
	kinds := []string{"", "500", "429", "304", "close", "cut", "stream_error", "bad_json", "hang"}
	want := map[string]int{
		ErrHTTP5xx: 4, ErrHTTP4xx: 4, ErrHTTPOther: 4, ErrConnection: 8,
		ErrStream: 4, ErrBadResponse: 4, ErrTimeout: 4,
	}
	f := newFakeServer(t)
	f.behave = func(job, _ int) string { return kinds[job%len(kinds)] }
	cfg := testConfig(f)
	cfg.Requests = 4 * len(kinds)
	cfg.Concurrency = 8
	// Only the "hang" requests may reach it, however loaded the machine:
	// the others are answered at once by a server on loopback. The hangs
	// run side by side, so the test waits about one Timeout.
	cfg.Timeout = 2 * time.Second
	res := run(t, cfg)
	s := res.Summary
	if !reflect.DeepEqual(s.ErrorsByKind, want) || s.Errors != 32 || s.Completed != 4 || s.Aborted != 0 {
		t.Fatalf("errors %v (total %d), completed %d, aborted %d; want %v", s.ErrorsByKind, s.Errors, s.Completed, s.Aborted, want)
	}
	// The jobs issued are 0 … Requests-1, each once: a worker that lost
	// the last ticket used to start a job anyway, and the run then held
	// job 36 (an "ok" one) in place of a failing one.
	jobs := map[int]bool{}
	for _, rec := range res.Records {
		jobs[rec.Job] = true
	}
	for j := range cfg.Requests {
		if !jobs[j] {
			t.Fatalf("job %d never issued; jobs %v", j, jobs)
		}
	}
	for _, rec := range res.Records {
		if rec.Outcome == OutcomeError && rec.Error == "" {
			t.Fatalf("error without message: %+v", rec)
		}
		if rec.ErrorKind == ErrHTTP5xx && (rec.HTTPStatus != 500 || !strings.Contains(rec.Error, "boom")) {
			t.Fatalf("5xx record: %+v", rec)
		}
	}
	var out bytes.Buffer
	if err := res.Table(&out); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"errors 32", "http_4xx 4", "http_5xx 4", "connection 8", "timeout 4", "stream_error 4", "bad_response 4", "aborted by client: none"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, out.String())
		}
	}
}

// TestRunAPIKey: against a server that requires a key, --api-key makes
// every request (and the model lookup) carry it; without it the lookup
// fails with the server's 401 and requests are HTTP 4xx errors. The key is
// never written to the results.
func TestRunAPIKey(t *testing.T) {
	f := newFakeServer(t)
	f.apiKey = "sk-bench-secret"
	cfg := testConfig(f)
	cfg.APIKey = f.apiKey
	res := run(t, cfg)
	if s := res.Summary; s.Completed != 20 || s.Errors != 0 || s.Model != "fake-model" {
		t.Fatalf("with the key: %+v", s)
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(js.String(), f.apiKey) {
		t.Fatal("the results hold the API key")
	}
	cfg.APIKey = ""
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("model lookup without the key: %v", err)
	}
	cfg.Model = "fake-model"
	if s := run(t, cfg).Summary; s.Completed != 0 || s.ErrorsByKind[ErrHTTP4xx] != 20 {
		t.Fatalf("without the key: %+v", s)
	}
}

func TestRunAbortsAreNotErrors(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "nostream"}[stream], func(t *testing.T) {
			f := newFakeServer(t)
			cfg := testConfig(f)
			cfg.Stream = stream
			cfg.Requests = 40
			cfg.Concurrency = 8
			cfg.AbortRate = 0.5
			wl := newWorkload(cfg.withDefaults())
			planned := map[string]int{}
			for n := range cfg.Requests {
				p := wl.job(n).turns[0].abort
				switch {
				case !p.active:
				case p.afterTokens == 0:
					planned[AbortBeforeFirstToken]++
				default:
					planned[AbortMidStream]++
				}
			}
			f.plan = func(job, turn int) abortPlan { return wl.job(job).turns[turn].abort }
			res := run(t, cfg)
			s := res.Summary
			total := planned[AbortBeforeFirstToken] + planned[AbortMidStream]
			if total == 0 || total == cfg.Requests || (stream && planned[AbortMidStream] == 0) {
				t.Fatalf("seed gives a degenerate plan %v", planned)
			}
			if s.Errors != 0 || s.Aborted != total || s.Completed != cfg.Requests-total {
				t.Fatalf("errors %d %v, aborted %d, completed %d; want 0, %d, %d", s.Errors, s.ErrorsByKind, s.Aborted, s.Completed, total, cfg.Requests-total)
			}
			if !reflect.DeepEqual(s.AbortsByPhase, planned) {
				t.Fatalf("aborts by phase %v, want %v", s.AbortsByPhase, planned)
			}
			f.srv.Close() // waits for the handlers, which count the disconnects
			// A request abandoned at once may never reach the server; every
			// one that did must have ended in a disconnect.
			if got, seen := f.disconnects.Load(), f.planned.Load(); got != seen || seen == 0 || f.requests.Load() != int64(s.Completed)+seen {
				t.Fatalf("server saw %d disconnects of %d abandoned requests received, %d requests; want all", got, seen, f.requests.Load())
			}
			for _, rec := range res.Records {
				p := wl.job(rec.Job).turns[0].abort
				if rec.AbortPlanned != p.active {
					t.Fatalf("record %+v, plan %+v", rec, p)
				}
				if rec.AbortPhase == AbortMidStream && rec.Chunks != p.afterTokens {
					t.Fatalf("mid-stream abort after %d chunks, planned %d", rec.Chunks, p.afterTokens)
				}
			}
		})
	}
}

func TestOpenLoopPoissonCount(t *testing.T) {
	f := newFakeServer(t)
	cfg := testConfig(f)
	cfg.Stream = false
	cfg.Requests = 0
	cfg.Rate = 400
	cfg.Duration = 250 * time.Millisecond
	cfg.Seed = 7
	// The schedule depends on the seed only: count its arrivals before
	// Duration.
	a := newArrivals(cfg.Seed, cfg.Rate)
	want := 0
	for a.next() < cfg.Duration {
		want++
	}
	if want < 50 || want > 160 {
		t.Fatalf("%d arrivals in 250 ms at 400/s: the generator is off", want)
	}
	res := run(t, cfg)
	if res.Summary.Requests != want || res.Summary.Completed != want || f.requests.Load() != int64(want) {
		t.Fatalf("requests %d, completed %d, server saw %d; want %d", res.Summary.Requests, res.Summary.Completed, f.requests.Load(), want)
	}
	for _, rec := range res.Records {
		if rec.StartSeconds < 0 {
			t.Fatalf("record %+v", rec)
		}
	}
}

func TestOpenLoopDropsAtMaxInflight(t *testing.T) {
	f := newFakeServer(t)
	f.behave = func(job, _ int) string {
		if job == 0 {
			return "block"
		}
		return ""
	}
	cfg := testConfig(f)
	cfg.Rate = 1000
	cfg.Requests = 10
	cfg.MaxInflight = 1
	cfg.ProgressInterval = time.Millisecond
	var once bool
	cfg.Progress = func(p Progress) {
		// Job 0 blocks the only slot until every other arrival was dropped.
		if !once && p.Done == cfg.Requests-1 {
			once = true
			close(f.release)
		}
	}
	res := run(t, cfg)
	s := res.Summary
	if s.Completed != 1 || s.Errors != 9 || s.ErrorsByKind[ErrDropped] != 9 || f.requests.Load() != 1 {
		t.Fatalf("summary %+v, server saw %d", s, f.requests.Load())
	}
}

func TestMultiTurnReusesPreviousTurns(t *testing.T) {
	for _, api := range []API{APICompletions, APIChat} {
		t.Run(string(api), func(t *testing.T) {
			f := newFakeServer(t)
			cfg := testConfig(f)
			cfg.API = api
			cfg.Workload.Kind = WorkloadMultiTurn
			cfg.Workload.Turns = 3
			cfg.Requests = 12
			cfg.Concurrency = 1 // so that the budget of 12 makes exactly 4 conversations
			res := run(t, cfg)
			if res.Summary.Completed != 12 {
				t.Fatalf("summary %+v", res.Summary)
			}
			jobs := map[int][]int{}
			for _, rec := range res.Records {
				jobs[rec.Job] = append(jobs[rec.Job], rec.Turn)
			}
			if len(jobs) != 4 {
				t.Fatalf("conversations %v, want 4 of 3 turns", jobs)
			}
			for j := range jobs {
				prev := promptOf(f.body(j, 1))
				last := promptOf(f.body(j, 2))
				first := promptOf(f.body(j, 0))
				if !strings.Contains(prev, first) || !strings.Contains(last, prev[:len(prev)-20]) {
					t.Fatalf("job %d: a turn does not carry the previous ones:\n%q\n%q\n%q", j, first, prev, last)
				}
				if !strings.Contains(last, "t0 t1 t2 t3 t4") {
					t.Fatalf("job %d: the answers received are not in the next turn: %q", j, last)
				}
			}
			if api == APIChat {
				msgs := f.body(0, 2)["messages"].([]any)
				if len(msgs) != 5 || msgs[1].(map[string]any)["role"] != "assistant" {
					t.Fatalf("turn 3 messages: %v", msgs)
				}
			}
		})
	}
}

func TestSharedPrefixGroups(t *testing.T) {
	f := newFakeServer(t)
	cfg := testConfig(f)
	cfg.API = APIChat
	cfg.Workload.Kind = WorkloadSharedPrefix
	cfg.Workload.Groups = 2
	cfg.Workload.PrefixLen = 100
	cfg.Requests = 16
	res := run(t, cfg)
	systems := map[int]map[string]bool{}
	for _, rec := range res.Records {
		msgs := f.body(rec.Job, 0)["messages"].([]any)
		sys := msgs[0].(map[string]any)
		if sys["role"] != "system" || len(sys["content"].(string)) != 100 {
			t.Fatalf("system message %v", sys)
		}
		if systems[rec.Group] == nil {
			systems[rec.Group] = map[string]bool{}
		}
		systems[rec.Group][sys["content"].(string)] = true
	}
	if len(systems) != 2 || len(systems[0]) != 1 || len(systems[1]) != 1 {
		t.Fatalf("groups and their system prompts: %v", systems)
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	f := newFakeServer(t)
	f.metrics = "vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\nkvlease_kv_blocks{state=\"held\"} 12\nkvlease_kv_blocks{state=\"free\"} 100\nkvlease_leases_active 3\n"
	cfg := testConfig(f)
	cfg.AbortRate = 0.3
	cfg.RecordOutputs = true
	cfg.MetricsURLs = []string{f.srv.URL}
	cfg.Workload.InputLen, _ = ParseDist("normal:40,5")
	cfg.Workload.OutputLen, _ = ParseDist("3-6")
	cfg.SLO = SLO{TTFT: time.Minute}
	wl := newWorkload(cfg.withDefaults())
	f.plan = func(job, turn int) abortPlan { return wl.job(job).turns[turn].abort }
	res := run(t, cfg)
	if len(res.Metrics) != 3 {
		t.Fatalf("metrics %+v", res.Metrics)
	}
	for _, m := range res.Metrics {
		want := map[string]float64{MetricKVUsage: 0.25, MetricHeldBlocks: 12, MetricLeasesActive: 3}[m.Metric]
		if len(m.Points) < 2 || m.Points[0].Y != want || !strings.HasSuffix(m.URL, "/metrics") {
			t.Fatalf("series %+v, want ≥ 2 points of %v", m, want)
		}
	}
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	res.Config.HTTPClient, res.Config.ProgressInterval = nil, 0 // not encoded
	if !reflect.DeepEqual(back, res) {
		for name, pair := range map[string][2]any{
			"config":  {back.Config, res.Config},
			"summary": {back.Summary, res.Summary},
			"records": {back.Records, res.Records},
			"metrics": {back.Metrics, res.Metrics},
			"scrapes": {back.ScrapeErrors, res.ScrapeErrors},
		} {
			if !reflect.DeepEqual(pair[0], pair[1]) {
				t.Errorf("round trip changes the %s:\n%+v\n%+v", name, pair[0], pair[1])
			}
		}
		t.FailNow()
	}
	if back.Records[0].Text == "" && back.Records[0].Outcome == OutcomeOK {
		t.Fatal("outputs not recorded")
	}
	if _, err := ReadJSON(strings.NewReader(`{"config": {"workload": {"input_len": "bogus"}}}`)); err == nil {
		t.Fatal("a bad distribution was read")
	}
}

func TestRunFailsToStart(t *testing.T) {
	f := newFakeServer(t)
	f.model = ""
	cfg := testConfig(f)
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrNoModel) {
		t.Fatalf("err %v, want ErrNoModel", err)
	}
	cfg.URL = "ftp://x"
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "URL") {
		t.Fatalf("err %v", err)
	}
}

func TestRunInterrupted(t *testing.T) {
	f := newFakeServer(t)
	f.behave = func(int, int) string { return "hang" }
	cfg := testConfig(f)
	cfg.Model = "fake-model"
	cfg.ProgressInterval = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Progress = func(p Progress) {
		if p.Inflight == cfg.Concurrency {
			cancel()
		}
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if !s.Interrupted || s.Canceled != cfg.Concurrency || s.Errors != 0 || s.Requests != cfg.Concurrency {
		t.Fatalf("summary %+v", s)
	}
}

func TestInvalidRequestsAreRejectedNotErrors(t *testing.T) {
	f := newFakeServer(t)
	cfg := testConfig(f)
	cfg.Requests = 60
	cfg.InvalidRate = 0.3
	cfg.AbortRate = 0.2
	wl := newWorkload(cfg.withDefaults())
	invalid, aborts := 0, 0
	for n := range cfg.Requests {
		tr := wl.job(n).turns[0]
		if tr.invalid {
			invalid++
			if tr.abort.active {
				t.Fatalf("job %d is invalid and also planned to be abandoned", n)
			}
		}
		if tr.abort.active {
			aborts++
		}
	}
	if invalid == 0 || invalid == cfg.Requests {
		t.Fatalf("seed gives a degenerate plan: %d invalid of %d", invalid, cfg.Requests)
	}
	f.plan = func(job, turn int) abortPlan { return wl.job(job).turns[turn].abort }
	res := run(t, cfg)
	s := res.Summary
	if s.Rejected != invalid || s.Errors != 0 || s.Aborted != aborts || s.Completed != cfg.Requests-invalid-aborts {
		t.Fatalf("summary %+v; want %d rejected, %d aborted, no error", s, invalid, aborts)
	}
	for _, rec := range res.Records {
		body := f.body(rec.Job, rec.Turn)
		_, hasMin := body["min_tokens"]
		if rec.InvalidPlanned != hasMin || rec.InvalidPlanned != (rec.Outcome == OutcomeRejected) {
			t.Fatalf("record %+v: body min_tokens %v", rec, body["min_tokens"])
		}
		if rec.Outcome == OutcomeRejected && rec.HTTPStatus != 400 {
			t.Fatalf("rejected record %+v", rec)
		}
	}
	// The plan is drawn from a stream of its own: without invalid requests
	// every job is the same.
	plain := cfg
	plain.InvalidRate = 0
	wl0 := newWorkload(plain.withDefaults())
	for n := range cfg.Requests {
		a, b := wl.job(n).turns[0], wl0.job(n).turns[0]
		if a.user != b.user || a.outputTokens != b.outputTokens || (!a.invalid && a.abort != b.abort) {
			t.Fatalf("job %d changes with InvalidRate", n)
		}
	}
	var b bytes.Buffer
	if err := res.Table(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), fmt.Sprintf("rejected as planned %d", invalid)) {
		t.Fatalf("table:\n%s", b.String())
	}
}
