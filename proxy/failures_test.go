package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlease/kvlease/httpserver/httpservertest"
	"github.com/kvlease/kvlease/internal/refused"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// deadURL returns the URL of a port that refuses connections while the
// test runs (held, so no server of the test can be handed it: the proxy
// given its own port as a "dead" P would call itself until it overflows).
func deadURL(t *testing.T) string {
	return "http://" + refused.Addr(t)
}

func TestDecodeRetry(t *testing.T) {
	breakers := map[string]func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool{
		"503": func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.WriteHeader(503)
			w.Write([]byte(`{"error":{"message":"shutting down","type":"server_error","param":null,"code":null}}`))
			return true
		},
		"429": func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.WriteHeader(429)
			return true
		},
		"connection closed before the first event": func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			http.NewResponseController(w).Flush()
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return true
		},
	}
	for name, hook := range breakers {
		for _, stream := range []bool{false, true} {
			if name == "connection closed before the first event" && !stream {
				continue
			}
			t.Run(fmt.Sprintf("%s stream=%v", name, stream), func(t *testing.T) {
				r := newRig(t, 1, 2, nil)
				r.dec[0].hook = hook
				resp := r.post("/v1/completions", fmt.Sprintf(`{"prompt":"x","stream":%v}`, stream))
				body := readAll(t, resp)
				if resp.StatusCode != 200 || !strings.Contains(body, "tok3") {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				d0, d1 := r.dec[0].requests(), r.dec[1].requests()
				if len(d0) != 1 || len(d1) != 1 || string(d0[0].raw) != string(d1[0].raw) {
					t.Fatalf("D0 and D1 did not both get the same decode leg: %d, %d", len(d0), len(d1))
				}
				if d1[0].kv["lease_token"] != fakeLeaseToken {
					t.Errorf("the retry lost P's kv_transfer_params: %v", d1[0].kv)
				}
				if got := testutil.ToFloat64(r.p.m.retries.WithLabelValues(legDecode)); got != 1 {
					t.Errorf("decode retries = %v", got)
				}
				if n := r.pre[0].totalAborts(); n != 0 {
					t.Errorf("P got %d aborts though the retry succeeded", n)
				}
			})
		}
	}
	t.Run("unreachable", func(t *testing.T) {
		f := newFake(t, RoleDecode)
		cfg := DefaultConfig()
		cfg.ScrapeInterval = 0
		p := newFake(t, RolePrefill)
		cfg.Prefill = []string{p.url()}
		cfg.Decode = []string{deadURL(t), f.url()}
		cfg.DownFor = time.Hour // passed over for the whole test
		px, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httpservertest.NewServer(px)
		defer srv.Close()
		for range 3 {
			resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			resp.Body.Close()
		}
		// The dead engine was tried once, then passed over while down.
		if got := testutil.ToFloat64(px.m.retries.WithLabelValues(legDecode)); got != 1 {
			t.Errorf("decode retries = %v, want 1", got)
		}
		if len(f.requests()) != 3 {
			t.Errorf("the live decode engine got %d legs", len(f.requests()))
		}
	})
}

func TestDecodeNoneLeft(t *testing.T) {
	r := newRig(t, 1, 3, func(c *Config) { c.MaxDecodeAttempts = 2 })
	for _, d := range r.dec {
		d.hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.WriteHeader(500)
			w.Write([]byte(`{"error":{"message":"boom","type":"server_error"}}`))
			return true
		}
	}
	resp := r.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", "r1")
	body := readAll(t, resp)
	if resp.StatusCode != 503 || !strings.Contains(body, "no decode engine could take the request") ||
		!strings.Contains(body, "500 boom") || !strings.Contains(body, "released") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	tried := 0
	for _, d := range r.dec {
		tried += len(d.requests())
	}
	if tried != 2 {
		t.Errorf("%d decode engines tried, want MaxDecodeAttempts = 2", tried)
	}
	if r.pre[0].abortCount("r1") != 1 {
		t.Error("P's lease was not released (no abort)")
	}
	if r.outcome(OutcomeDecodeUnavailable) != 1 || r.aborts(RolePrefill, "ok") != 1 {
		t.Error("outcome or abort not counted")
	}
}

func TestDecodeRejects(t *testing.T) {
	r := newRig(t, 1, 2, nil)
	r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"message":"max_tokens too large","type":"invalid_request_error","param":"max_tokens","code":null}}`))
		return true
	}
	resp := r.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", "r1")
	if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "max_tokens too large") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	if len(r.dec[1].requests()) != 0 {
		t.Error("a 4xx from D was retried")
	}
	if r.pre[0].abortCount("r1") != 1 {
		t.Error("P not told to abort after D rejected")
	}
}

func TestPrefillFailures(t *testing.T) {
	t.Run("status passes through", func(t *testing.T) {
		for _, status := range []int{400, 404, 500, 503} {
			r := newRig(t, 1, 1, nil)
			msg := fmt.Sprintf(`{"error":{"message":"P says %d","type":"x","param":null,"code":null}}`, status)
			r.pre[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(status)
				w.Write([]byte(msg))
				return true
			}
			resp := r.post("/v1/completions", `{"prompt":"x"}`)
			if body := readAll(t, resp); resp.StatusCode != status || body != msg || resp.Header.Get("Retry-After") != "3" {
				t.Errorf("P answered %d: client got %d %s", status, resp.StatusCode, body)
			}
			if len(r.dec[0].requests()) != 0 || r.pre[0].totalAborts() != 0 {
				t.Errorf("P answered %d: decode leg sent or P aborted", status)
			}
			if r.outcome(OutcomePrefillError) != 1 {
				t.Error("outcome not counted")
			}
		}
	})
	t.Run("empty error body", func(t *testing.T) {
		r := newRig(t, 1, 1, nil)
		r.pre[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.WriteHeader(500)
			return true
		}
		resp := r.post("/v1/completions", `{"prompt":"x"}`)
		if body := readAll(t, resp); resp.StatusCode != 500 || !strings.Contains(body, "prefill engine") {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("unreachable then another", func(t *testing.T) {
		p := newFake(t, RolePrefill)
		d := newFake(t, RoleDecode)
		cfg := DefaultConfig()
		cfg.ScrapeInterval = 0
		cfg.Prefill = []string{deadURL(t), p.url()}
		cfg.Decode = []string{d.url()}
		px, _ := New(cfg)
		srv := httpservertest.NewServer(px)
		defer srv.Close()
		resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || len(p.requests()) != 1 {
			t.Errorf("status %d; live P got %d", resp.StatusCode, len(p.requests()))
		}
	})
	t.Run("none reachable", func(t *testing.T) {
		d := newFake(t, RoleDecode)
		cfg := DefaultConfig()
		cfg.ScrapeInterval = 0
		cfg.Prefill = []string{deadURL(t), deadURL(t)}
		cfg.Decode = []string{d.url()}
		px, _ := New(cfg)
		srv := httpservertest.NewServer(px)
		defer srv.Close()
		resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || !strings.Contains(string(b), "no prefill engine could be reached") {
			t.Errorf("%d %s", resp.StatusCode, b)
		}
	})
	for _, tr := range legTransports {
		t.Run("timeout/"+tr.name, func(t *testing.T) {
			r := newRig(t, 1, 1, func(c *Config) { tr.set(c); c.PrefillTimeout = 20 * time.Millisecond })
			r.pre[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
				<-ctx.Done()
				return true
			}
			resp := r.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", "slow")
			if body := readAll(t, resp); resp.StatusCode != 504 || !strings.Contains(body, "did not finish within 20ms") {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
			if r.pre[0].abortCount("slow") != 1 || r.outcome(OutcomePrefillTimeout) != 1 {
				t.Error("no abort to P after its timeout, or outcome not counted")
			}
		})
	}
	bad := map[string]string{
		"invalid JSON":            `{"kv_transfer_params":`,
		"params not an object":    `{"kv_transfer_params":[1]}`,
		"answer over the maximum": `{"pad":"` + strings.Repeat("x", 2000) + `"}`,
	}
	for name, answer := range bad {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 1, 1, func(c *Config) { c.MaxPrefillResponseBytes = 1000 })
			r.pre[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
				w.Write([]byte(answer))
				return true
			}
			resp := r.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", "r")
			if body := readAll(t, resp); resp.StatusCode != 502 {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
			if r.pre[0].abortCount("r") != 1 || len(r.dec[0].requests()) != 0 {
				t.Error("P not aborted, or decode leg sent")
			}
		})
	}
	t.Run("no kv_transfer_params: D prefills itself", func(t *testing.T) {
		r := newRig(t, 1, 1, nil)
		r.pre[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.Write([]byte(`{"choices":[],"kv_transfer_params":null}`))
			return true
		}
		resp := r.post("/v1/completions", `{"prompt":"x","kv_transfer_params":{"a":1}}`)
		readAll(t, resp)
		if resp.StatusCode != 200 || r.dec[0].requests()[0].body.has("kv_transfer_params") {
			t.Errorf("%d; decode leg %s", resp.StatusCode, r.dec[0].requests()[0].raw)
		}
	})
}

func TestMidStreamFailures(t *testing.T) {
	t.Run("D breaks", func(t *testing.T) {
		r := newRig(t, 1, 2, nil)
		r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
			http.NewResponseController(w).Flush()
			conn, buf, _ := http.NewResponseController(w).Hijack()
			buf.Flush()
			conn.Close()
			return true
		}
		resp := r.post("/v1/completions", `{"prompt":"x","stream":true}`, "X-Request-Id", "r")
		evs := streamEvents(t, resp)
		if len(evs) != 2 || !strings.Contains(evs[1], `"error"`) || !strings.Contains(evs[1], "decode engine") {
			t.Errorf("events %q: want the token then an error event", evs)
		}
		if len(r.dec[1].requests()) != 0 {
			t.Error("retried after the stream started")
		}
		if r.pre[0].abortCount("r") != 1 || r.dec[0].abortCount("r") != 1 || r.outcome(OutcomeDecodeFailed) != 1 {
			t.Error("both engines must get an abort and the outcome be decode_failed")
		}
	})
	t.Run("D ends without DONE", func(t *testing.T) {
		r := newRig(t, 1, 1, nil)
		r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
			return true
		}
		evs := streamEvents(t, r.post("/v1/completions", `{"prompt":"x","stream":true}`, "X-Request-Id", "r"))
		if len(evs) != 2 || !strings.Contains(evs[1], "without [DONE]") {
			t.Errorf("events %q", evs)
		}
		if r.pre[0].abortCount("r") != 1 {
			t.Error("P not aborted")
		}
	})
	for _, tr := range legTransports {
		t.Run("timeout/"+tr.name, func(t *testing.T) {
			r := newRig(t, 1, 1, func(c *Config) { tr.set(c); c.DecodeTimeout = 50 * time.Millisecond })
			r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "data: {}\n\n")
				http.NewResponseController(w).Flush()
				<-ctx.Done()
				return true
			}
			evs := streamEvents(t, r.post("/v1/completions", `{"prompt":"x","stream":true}`, "X-Request-Id", "r"))
			if len(evs) != 2 || !strings.Contains(evs[1], "did not finish within 50ms") {
				t.Errorf("events %q", evs)
			}
			if r.pre[0].abortCount("r") != 1 || r.dec[0].abortCount("r") != 1 || r.outcome(OutcomeDecodeTimeout) != 1 {
				t.Error("aborts or outcome missing")
			}
		})
	}
	t.Run("event over the bound", func(t *testing.T) {
		r := newRig(t, 1, 1, func(c *Config) { c.MaxEventBytes = 100 })
		r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"x\":\"%s\"}\n\n", strings.Repeat("y", 200))
			return true
		}
		resp := r.post("/v1/completions", `{"prompt":"x","stream":true}`, "X-Request-Id", "r")
		if body := readAll(t, resp); resp.StatusCode != 502 || !strings.Contains(body, "too long") {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
		if r.pre[0].abortCount("r") != 1 || r.dec[0].abortCount("r") != 1 {
			t.Error("aborts missing")
		}
	})
}

func TestBadRequests(t *testing.T) {
	r := newRig(t, 1, 1, func(c *Config) { c.MaxRequestBytes = 100 })
	cases := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 200) + `"}`, 413, "over 100 bytes"},
		{"POST", "/v1/completions", `[1]`, 400, "JSON object"},
		{"POST", "/v1/completions", `{"a":1} {}`, 400, "JSON object"},
		{"POST", "/v1/chat/completions", ``, 400, "JSON object"},
		{"GET", "/v1/completions", ``, 405, "takes POST"},
		{"POST", "/v1/models", ``, 405, "takes GET"},
		{"GET", "/v2/nothing", ``, 404, "no route"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, r.srv.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s %.30q: %d %s, want %d with %q", c.method, c.path, c.body, resp.StatusCode, body, c.status, c.want)
		}
	}
	if len(r.pre[0].requests()) != 0 {
		t.Error("a bad request reached P")
	}
	if r.outcome(OutcomeBadRequest) != 4 {
		t.Errorf("bad_request outcomes = %v, want 4", r.outcome(OutcomeBadRequest))
	}
}

func TestConcurrencyBound(t *testing.T) {
	r := newRig(t, 1, 1, func(c *Config) { c.MaxConcurrentRequests = 2 })
	release := make(chan struct{})
	r.pre[0].seen = make(chan string, 2)
	r.pre[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return false
	}
	done := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.Post(r.srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
			if err != nil {
				done <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	<-r.pre[0].seen
	<-r.pre[0].seen
	resp := r.post("/v1/completions", `{"prompt":"x"}`)
	if body := readAll(t, resp); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "limit of 2") {
		t.Errorf("third request at the bound: %d %s", resp.StatusCode, body)
	}
	if r.p.InFlight() != 2 {
		t.Errorf("InFlight = %d", r.p.InFlight())
	}
	close(release)
	if a, b := <-done, <-done; a != 200 || b != 200 {
		t.Errorf("held requests ended %d %d", a, b)
	}
	if r.outcome(OutcomeOverloaded) != 1 {
		t.Error("overloaded not counted")
	}
}

// TestClientCancelAtEachStage cancels a request at each stage and checks
// which engines get an abort and that no leg is left running.
func TestClientCancelAtEachStage(t *testing.T) {
	stages := []struct {
		name      string
		holdP     bool
		holdD     bool
		stream    int // events to read before cancelling, when streaming
		wantDAbrt bool
	}{
		{name: "while P prefills", holdP: true},
		{name: "while D queues", holdD: true, wantDAbrt: true},
		{name: "mid-stream", stream: 3, wantDAbrt: true},
	}
	for _, s := range stages {
		t.Run(s.name, func(t *testing.T) {
			r := newRig(t, 1, 1, nil)
			hold := func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
				<-ctx.Done()
				return true
			}
			pSeen, dSeen := make(chan string, 1), make(chan string, 1)
			r.pre[0].seen, r.dec[0].seen = pSeen, dSeen
			if s.holdP {
				r.pre[0].hook = hook(hold)
			}
			if s.holdD {
				r.dec[0].hook = hook(hold)
			}
			if s.stream > 0 {
				r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
					r.dec[0].answerDecode(ctx, w, req, time.Millisecond)
					return true
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", r.srv.URL+"/v1/chat/completions",
				strings.NewReader(`{"messages":[],"stream":true,"max_tokens":-1}`))
			req.Header.Set("X-Request-Id", "c1")
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					br := bufio.NewReader(resp.Body)
					for n := 0; n < s.stream*2; n++ { // a data line and a blank line per event
						if _, err := br.ReadString('\n'); err != nil {
							break
						}
					}
					cancel()
					resp.Body.Close()
				}
				errc <- err
			}()
			switch {
			case s.holdP:
				<-pSeen
				cancel()
			case s.holdD:
				<-dSeen
				cancel()
			}
			<-errc
			cancel()
			waitFor(t, "the proxy to finish the request", func() bool {
				return r.outcome(OutcomeClientCancelled) == 1 && r.p.InFlight() == 0
			})
			if r.pre[0].abortCount("c1") != 1 {
				t.Error("P got no abort")
			}
			if got := r.dec[0].abortCount("c1"); (got == 1) != s.wantDAbrt {
				t.Errorf("D got %d aborts, want %v", got, s.wantDAbrt)
			}
			waitFor(t, "every leg to end", func() bool { return r.pre[0].active.Load() == 0 && r.dec[0].active.Load() == 0 })
		})
	}
}

func hook(f func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool) func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
	return f
}

// TestLegReplayedWhenKeptAliveConnectionCloses: an engine that closes a
// kept-alive connection after reading a request without answering it (a
// graceful shutdown closing idle connections races the proxy's reuse of
// one) costs the client nothing: the leg is replayed on a new connection.
func TestLegReplayedWhenKeptAliveConnectionCloses(t *testing.T) {
	type connKey struct{}
	p := &fakeEngine{t: t, role: RolePrefill, aborts: map[string]int{}, abortAuth: map[string]string{}, cancel: map[string]context.CancelFunc{}}
	var closed atomic.Int64
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" && r.Context().Value(connKey{}).(*atomic.Int64).Add(1) == 2 {
			io.Copy(io.Discard, r.Body)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			closed.Add(1)
			return
		}
		p.serve(w, r)
	}))
	p.srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Int64))
	}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	d := newFake(t, RoleDecode)
	cfg := DefaultConfig()
	cfg.ScrapeInterval = 0
	cfg.Prefill = []string{p.url()}
	cfg.Decode = []string{d.url()}
	px, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	srv := httpservertest.NewServer(px)
	defer srv.Close()
	// Requests one after another reuse the proxy's connection to P, so its
	// second request meets the close; a few more cover a dial racing the
	// return of the connection to the idle pool.
	for i := 0; i < 20 && closed.Load() == 0; i++ {
		resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "tok3") {
			t.Fatalf("request %d (%d closed so far): %d %s", i, closed.Load(), resp.StatusCode, b)
		}
	}
	if closed.Load() == 0 {
		t.Fatal("no request reached P on a reused connection in 20 tries")
	}
}

// TestConfiguredTransport runs a request through a Transport of the
// configuration (legs on net/http's client, bounded by a context instead
// of the connection's deadline; the timeout tests run both).
func TestConfiguredTransport(t *testing.T) {
	r := newRig(t, 1, 1, func(c *Config) { c.Transport = &http.Transport{} })
	resp := r.post("/v1/completions", `{"prompt":"x","max_tokens":3}`)
	if body := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, fakeText(3)) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

// legTransports are the two ways legs go: the proxy's own connections, and
// a Transport of the configuration.
var legTransports = []struct {
	name string
	set  func(*Config)
}{{"own", func(*Config) {}}, {"configured", func(c *Config) { c.Transport = &http.Transport{} }}}
