package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlease/kvlease/proxy/route"
)

type rig struct {
	t   *testing.T
	p   *Proxy
	srv *httptest.Server
	pre []*fakeEngine
	dec []*fakeEngine
}

func newRig(t *testing.T, nP, nD int, tweak func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t}
	cfg := DefaultConfig()
	cfg.ScrapeInterval = 0
	for range nP {
		f := newFake(t, RolePrefill)
		r.pre = append(r.pre, f)
		cfg.Prefill = append(cfg.Prefill, f.url())
	}
	for range nD {
		f := newFake(t, RoleDecode)
		r.dec = append(r.dec, f)
		cfg.Decode = append(cfg.Decode, f.url())
	}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	r.srv = httptest.NewServer(p)
	t.Cleanup(func() {
		r.srv.Close()
		p.Close()
	})
	return r
}

func (r *rig) post(path, body string, header ...string) *http.Response {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (r *rig) outcome(o string) float64 {
	return testutil.ToFloat64(r.p.m.requests.WithLabelValues(o))
}

func (r *rig) aborts(role, result string) float64 {
	return testutil.ToFloat64(r.p.m.aborts.WithLabelValues(role, result))
}

// keys returns an object's keys in order.
func keys(o object) []string {
	var k []string
	for _, f := range o {
		k = append(k, f.key)
	}
	return k
}

func TestLegsNonStreaming(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	body := `{"model":"m","prompt":"hello","max_tokens":3,"min_tokens":2,"temperature":0,"kv_transfer_params":{"junk":1},"user":"u"}`
	resp := r.post("/v1/completions", body, "Authorization", "Bearer k")
	text := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, text)
	}
	var ans struct {
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.Unmarshal([]byte(text), &ans); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	if ans.Choices[0].Text != fakeText(3) || ans.Usage.PromptTokensDetails.CachedTokens != fakeCachedTokens {
		t.Errorf("answer %s: want D's text and P's cached tokens %d", text, fakeCachedTokens)
	}
	pr, dr := r.pre[0].requests(), r.dec[0].requests()
	if len(pr) != 1 || len(dr) != 1 {
		t.Fatalf("P saw %d requests, D %d", len(pr), len(dr))
	}
	id := resp.Header.Get("X-Request-Id")
	if id == "" || pr[0].id != id || dr[0].id != id {
		t.Errorf("X-Request-Id: client got %q, P %q, D %q", id, pr[0].id, dr[0].id)
	}
	for _, q := range []*fakeReq{pr[0], dr[0]} {
		if q.header.Get("Authorization") != "Bearer k" {
			t.Errorf("a leg lost the Authorization header")
		}
	}
	// P: the client's members in order, edited as DESIGN.md says.
	wantP := `{"model":"m","prompt":"hello","max_tokens":1,"temperature":0,"kv_transfer_params":` + string(prefillKV) +
		`,"user":"u","stream":false}`
	if string(pr[0].raw) != wantP {
		t.Errorf("prefill leg body\n got %s\nwant %s", pr[0].raw, wantP)
	}
	// D: the client's request with P's kv_transfer_params verbatim.
	wantD := `{"model":"m","prompt":"hello","max_tokens":3,"min_tokens":2,"temperature":0,"kv_transfer_params":` +
		fakeKV(id) + `,"user":"u"}`
	if string(dr[0].raw) != wantD {
		t.Errorf("decode leg body\n got %s\nwant %s", dr[0].raw, wantD)
	}
	if n := r.pre[0].totalAborts() + r.dec[0].totalAborts(); n != 0 {
		t.Errorf("%d aborts after a request that succeeded", n)
	}
	if r.outcome(OutcomeOK) != 1 {
		t.Errorf("ok outcomes = %v", r.outcome(OutcomeOK))
	}
}

func TestPrefillLegEdits(t *testing.T) {
	got := prefillBody(mustObject(t, `{"messages":[],"stream":true,"stream_options":{"include_usage":true},`+
		`"max_completion_tokens":50,"min_completion_tokens":3,"max_tokens":9}`))
	want := `{"messages":[],"stream":false,"max_completion_tokens":1,"max_tokens":1,"kv_transfer_params":` + string(prefillKV) + `}`
	if string(got) != want {
		t.Errorf("prefill body\n got %s\nwant %s", got, want)
	}
	if got := decodeBody(mustObject(t, `{"a":1,"kv_transfer_params":{"x":1}}`), nil); string(got) != `{"a":1}` {
		t.Errorf("decode body without P's params = %s", got)
	}
}

func mustObject(t *testing.T, s string) object {
	t.Helper()
	o, err := parseObject([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// streamEvents reads an SSE answer into its data payloads.
func streamEvents(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestEndpointsAndModes(t *testing.T) {
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", path, stream), func(t *testing.T) {
				r := newRig(t, 1, 1, nil)
				body := `{"model":"m","prompt":"p","messages":[{"role":"user","content":"hi"}],"max_tokens":5`
				if stream {
					body += `,"stream":true,"stream_options":{"include_usage":true}`
				}
				resp := r.post(path, body+"}")
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, readAll(t, resp))
				}
				var text string
				var cached int
				if !stream {
					var ans map[string]any
					json.Unmarshal([]byte(readAll(t, resp)), &ans)
					c := ans["choices"].([]any)[0].(map[string]any)
					if m, ok := c["message"].(map[string]any); ok {
						text = m["content"].(string)
					} else {
						text = c["text"].(string)
					}
					cached = int(ans["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64))
				} else {
					if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
						t.Errorf("Content-Type %q", ct)
					}
					evs := streamEvents(t, resp)
					if len(evs) != 5+2 || evs[len(evs)-1] != "[DONE]" {
						t.Fatalf("events %q: want 5 tokens, usage, [DONE]", evs)
					}
					for _, e := range evs[:5] {
						var ch struct {
							Choices []struct {
								Text  string
								Delta struct{ Content string }
							}
						}
						json.Unmarshal([]byte(e), &ch)
						text += ch.Choices[0].Text + ch.Choices[0].Delta.Content
					}
					var u struct {
						Usage struct {
							PromptTokensDetails struct {
								CachedTokens int `json:"cached_tokens"`
							} `json:"prompt_tokens_details"`
						}
					}
					json.Unmarshal([]byte(evs[5]), &u)
					cached = u.Usage.PromptTokensDetails.CachedTokens
				}
				if text != fakeText(5) || cached != fakeCachedTokens {
					t.Errorf("text %q cached %d, want %q and %d", text, cached, fakeText(5), fakeCachedTokens)
				}
				pre := r.pre[0].requests()[0]
				if pre.path != path || string(pre.body.get("stream")) != "false" || pre.body.has("stream_options") {
					t.Errorf("prefill leg %s: %s", pre.path, pre.raw)
				}
				dec := r.dec[0].requests()[0]
				if dec.path != path || (stream && string(dec.body.get("stream_options")) != `{"include_usage":true}`) {
					t.Errorf("decode leg %s lost its stream settings: %s", dec.path, dec.raw)
				}
			})
		}
	}
}

// TestStreamFlushesEachEvent: the fake decode engine sends its second
// event only after the client has received the first, so a proxy that
// buffered would hang here.
func TestStreamFlushesEachEvent(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	gate := make(chan struct{})
	r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-gate:
		case <-ctx.Done():
			return true
		}
		fmt.Fprint(w, ": a comment\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n")
		return true
	}
	resp := r.post("/v1/completions", `{"prompt":"x","stream":true}`)
	br := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "data: {\"choices\":[{\"text\":\"a\"}]}\n" {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event did not reach the client before the second was sent: not flushed")
	}
	close(gate)
	rest, _ := io.ReadAll(br)
	if want := "\n: a comment\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n"; string(rest) != want {
		t.Errorf("rest of the stream %q, want %q", rest, want)
	}
}

func TestRequestID(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	resp := r.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", "client-id-1")
	readAll(t, resp)
	pr, dr := r.pre[0].requests()[0], r.dec[0].requests()[0]
	if resp.Header.Get("X-Request-Id") != "client-id-1" || pr.id != "client-id-1" || dr.engineID != pr.engineID ||
		!strings.HasPrefix(pr.engineID, "client-id-1-") || len(pr.engineID) != len("client-id-1")+17 {
		t.Errorf("echoed %q, P saw %q, D %q: want the client's id echoed, and on both legs with one random suffix",
			resp.Header.Get("X-Request-Id"), pr.engineID, dr.engineID)
	}
	// The same id again (S29): another request to the engines.
	readAll(t, r.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", "client-id-1"))
	if again := r.pre[0].requests()[1]; again.id != "client-id-1" || again.engineID == pr.engineID {
		t.Errorf("a reused client id reached P as %q, the first as %q", again.engineID, pr.engineID)
	}
	// A client id of the maximum length is cut to leave room.
	long := strings.Repeat("y", maxRequestIDBytes)
	readAll(t, r.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", long))
	if got := r.pre[0].requests()[2].engineID; len(got) != maxRequestIDBytes || !strings.HasPrefix(got, long[:maxRequestIDBytes-17]+"-") {
		t.Errorf("a %d-byte client id reached P as %d bytes: %.40q", maxRequestIDBytes, len(got), got)
	}
	for _, bad := range []string{"has space", "a/b", strings.Repeat("x", 300), "50%"} {
		resp := r.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", bad)
		if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "X-Request-Id") {
			t.Errorf("X-Request-Id %.20q: %d %s", bad, resp.StatusCode, body)
		}
	}
	a, _ := requestID("")
	b, _ := requestID("")
	if a == b || len(a) != 36 || a[14] != '4' {
		t.Errorf("generated ids %q %q: want distinct UUIDv4s", a, b)
	}
	if got := AbortPath("a b/c"); got != "/kvlease/v1/requests/a%20b%2Fc/abort" {
		t.Errorf("AbortPath = %q", got)
	}
}

func TestPrefillerHostPortHeader(t *testing.T) {
	r := newRig(t, 3, 1, nil)
	for range 3 {
		readAll(t, r.post("/v1/completions", `{"prompt":"x"}`, route.HeaderPrefillerHostPort, r.pre[1].hostPort()))
	}
	if n0, n1, n2 := len(r.pre[0].requests()), len(r.pre[1].requests()), len(r.pre[2].requests()); n0 != 0 || n1 != 3 || n2 != 0 {
		t.Errorf("header named P1: prefill engines got %d %d %d", n0, n1, n2)
	}
	readAll(t, r.post("/v1/completions", `{"prompt":"x"}`, route.HeaderPrefillerHostPort,
		r.pre[0].hostPort()+", "+r.pre[2].hostPort()))
	readAll(t, r.post("/v1/completions", `{"prompt":"x"}`, route.HeaderPrefillerHostPort,
		r.pre[0].hostPort()+", "+r.pre[2].hostPort()))
	if n0, n1, n2 := len(r.pre[0].requests()), len(r.pre[1].requests()), len(r.pre[2].requests()); n0 != 1 || n1 != 3 || n2 != 1 {
		t.Errorf("header named P0,P2 twice: prefill engines got %d %d %d", n0, n1, n2)
	}
	for _, bad := range []string{"10.0.0.1:1", "nonsense"} {
		resp := r.post("/v1/completions", `{"prompt":"x"}`, route.HeaderPrefillerHostPort, bad)
		if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, route.HeaderPrefillerHostPort) {
			t.Errorf("header %q: %d %s", bad, resp.StatusCode, body)
		}
	}
}

func TestRoundRobinSpreadsLegs(t *testing.T) {
	r := newRig(t, 2, 3, nil)
	for range 6 {
		readAll(t, r.post("/v1/completions", `{"prompt":"x"}`))
	}
	for i, f := range append(append([]*fakeEngine{}, r.pre...), r.dec...) {
		want := 3
		if i >= 2 {
			want = 2
		}
		if n := len(f.requests()); n != want {
			t.Errorf("engine %d (%s) got %d legs, want %d", i, f.role, n, want)
		}
	}
}

func TestLeastLoadedUsesInFlight(t *testing.T) {
	r := newRig(t, 1, 2, func(c *Config) { c.Route.Policy = route.LeastLoaded })
	held := make(chan struct{})
	r.dec[0].seen = make(chan string, 1)
	r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		if req.str("user") == "hold" {
			select {
			case <-held:
			case <-ctx.Done():
			}
		}
		return false
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp := r.post("/v1/completions", `{"prompt":"x","user":"hold"}`)
		io.Copy(io.Discard, resp.Body)
	}()
	<-r.dec[0].seen
	r.dec[0].seen = nil
	for range 3 {
		readAll(t, r.post("/v1/completions", `{"prompt":"x"}`))
	}
	if n0, n1 := len(r.dec[0].requests()), len(r.dec[1].requests()); n0 != 1 || n1 != 3 {
		t.Errorf("with D0 busy, legs went %d to D0 and %d to D1; want 1 and 3", n0, n1)
	}
	close(held)
	<-done
}

func TestLeastLoadedUsesScrapes(t *testing.T) {
	r := newRig(t, 1, 2, func(c *Config) {
		c.Route.Policy = route.LeastLoaded
		c.ScrapeInterval = time.Millisecond
	})
	r.dec[0].waiting.Store(10)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		r.p.RunScraper(ctx)
		close(stopped)
	}()
	waitFor(t, "a scrape of D0", func() bool {
		r.p.mu.Lock()
		defer r.p.mu.Unlock()
		return r.p.decode.engines[0].load.waiting == 10
	})
	cancel()
	<-stopped
	for range 4 {
		readAll(t, r.post("/v1/completions", `{"prompt":"x"}`))
	}
	if n0, n1 := len(r.dec[0].requests()), len(r.dec[1].requests()); n0 != 0 || n1 != 4 {
		t.Errorf("D0 reports 10 waiting: legs went %d to D0, %d to D1", n0, n1)
	}
}

// deadURL returns the URL of a port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
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
		srv := httptest.NewServer(px)
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
		srv := httptest.NewServer(px)
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
		srv := httptest.NewServer(px)
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
	t.Run("timeout", func(t *testing.T) {
		r := newRig(t, 1, 1, func(c *Config) { c.PrefillTimeout = 20 * time.Millisecond })
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
	t.Run("timeout", func(t *testing.T) {
		r := newRig(t, 1, 1, func(c *Config) { c.DecodeTimeout = 50 * time.Millisecond })
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

func TestHealthAndMetrics(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	readAll(t, r.post("/v1/completions", `{"prompt":"x"}`))
	resp, err := http.Get(r.srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Status  string
		Prefill []struct {
			URL string
			Up  bool
		}
		Decode []struct{ URL string }
	}
	json.Unmarshal([]byte(readAll(t, resp)), &h)
	if resp.StatusCode != 200 || h.Status != "ok" || len(h.Prefill) != 1 || h.Prefill[0].URL != r.pre[0].url() ||
		!h.Prefill[0].Up || len(h.Decode) != 1 {
		t.Errorf("health %d %+v", resp.StatusCode, h)
	}
	resp, _ = http.Get(r.srv.URL + "/metrics")
	text := readAll(t, resp)
	for _, want := range []string{
		`kvlease_proxy_requests_total{outcome="ok"} 1`,
		`kvlease_proxy_leg_duration_seconds_count{leg="prefill"} 1`,
		`kvlease_proxy_leg_duration_seconds_count{leg="decode"} 1`,
		`kvlease_proxy_leg_duration_seconds_count{leg="total"} 1`,
		`kvlease_proxy_retries_total{leg="decode"} 0`,
		`kvlease_proxy_requests_in_flight 0`,
		`kvlease_proxy_engine_in_flight{engine="` + r.dec[0].hostPort() + `",role="decode"} 0`,
		`kvlease_proxy_engine_up{engine="` + r.pre[0].hostPort() + `",role="prefill"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	resp, _ = http.Get(r.srv.URL + "/v1/models")
	if resp.StatusCode != 404 { // the fake engine has no /v1/models: its answer passes through
		t.Errorf("/v1/models: %d", resp.StatusCode)
	}
	resp.Body.Close()
	r.p.Close()
	resp, _ = http.Get(r.srv.URL + "/health")
	if resp.StatusCode != 503 {
		t.Errorf("health after Close: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestServeShutdownAbortsWhatIsLeft(t *testing.T) {
	p := newFake(t, RolePrefill)
	d := newFake(t, RoleDecode)
	d.seen = make(chan string, 1)
	d.hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		d.answerDecode(ctx, w, req, time.Millisecond)
		return true
	}
	cfg := DefaultConfig()
	cfg.Prefill, cfg.Decode = []string{p.url()}, []string{d.url()}
	cfg.ScrapeInterval = time.Millisecond
	px, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- px.Serve(ctx, ln, 10*time.Millisecond) }()
	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/completions",
		strings.NewReader(`{"prompt":"x","stream":true,"max_tokens":-1}`))
	req.Header.Set("X-Request-Id", "forever")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-d.seen
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	// Serve returned only after the stream's handler ended and aborted.
	if p.abortCount("forever") != 1 || d.abortCount("forever") != 1 || px.InFlight() != 0 {
		t.Errorf("aborts P %d D %d, in flight %d", p.abortCount("forever"), d.abortCount("forever"), px.InFlight())
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("still listening after Serve returned")
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	px, err := New(Config{Prefill: []string{"http://a:1"}, Decode: []string{"http://b:1"}, Route: route.DefaultConfig(),
		MaxRequestBytes: 1, MaxPrefillResponseBytes: 1, MaxResponseBytes: 1, MaxEventBytes: 1, MaxConcurrentRequests: 1,
		MaxPrefillAttempts: 1, MaxDecodeAttempts: 1, DialTimeout: 1, PrefillTimeout: 1, DecodeTimeout: 1, AbortTimeout: 1, DownFor: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ln.Close()
	if err := px.Serve(context.Background(), ln, time.Millisecond); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("Serve on a closed listener = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Prefill, ok.Decode = []string{"http://127.0.0.1:8001"}, []string{"http://127.0.0.1:8002/"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	many := make([]string, MaxEngines+1)
	for i := range many {
		many[i] = fmt.Sprintf("http://h:%d", i+1)
	}
	cases := map[string]func(c *Config){
		"Prefill: at least one":  func(c *Config) { c.Prefill = nil },
		"Decode: at least one":   func(c *Config) { c.Decode = nil },
		"Decode[0]":              func(c *Config) { c.Decode = []string{"ftp://x:1"} },
		"listed twice":           func(c *Config) { c.Prefill = []string{"http://a:1", "http://A:01/"} },
		"at most 256":            func(c *Config) { c.Decode = many },
		"Route":                  func(c *Config) { c.Route.StaleAfter = 0 },
		"MaxRequestBytes":        func(c *Config) { c.MaxRequestBytes = 0 },
		"MaxDecodeAttempts":      func(c *Config) { c.MaxDecodeAttempts = -1 },
		"AbortTimeout":           func(c *Config) { c.AbortTimeout = 0 },
		"ScrapeInterval":         func(c *Config) { c.ScrapeInterval = -1 },
		"MaxPrefillAttempts and": func(c *Config) { c.MaxPrefillAttempts = MaxEngines + 1 },
	}
	for want, f := range cases {
		c := ok
		f(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate = %v", want, err)
		}
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v", want, err)
		}
	}
}

func TestParseEngineURL(t *testing.T) {
	good := map[string]string{
		"http://127.0.0.1:8000":  "http://127.0.0.1:8000",
		" http://Host:080/ ":     "http://host:80",
		"https://x":              "https://x:443",
		"http://x":               "http://x:80",
		"http://[::1]:9":         "http://[::1]:9",
		"http://[fe80::1%25]:90": "",
	}
	for in, want := range good {
		got, err := ParseEngineURL(in)
		if want == "" {
			if err == nil {
				t.Errorf("ParseEngineURL(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseEngineURL(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "127.0.0.1:8000", "http://", "http://x:1/v1", "http://x:1?a=b", "http://u@x:1",
		"http://x:0", "http://x:99999", "ftp://x:1", "http://x:1#f", "::"} {
		if got, err := ParseEngineURL(in); err == nil {
			t.Errorf("ParseEngineURL(%q) = %q, want an error", in, got)
		}
	}
}

func TestJSONObject(t *testing.T) {
	o := mustObject(t, ` {"b":1, "a" : [1, 2] ,"b":{"x":null},"c":"\u00e9\"<"} `)
	if got := string(o.appendJSON(nil)); got != `{"b":{"x":null},"a":[1, 2],"c":"\u00e9\"<"}` {
		t.Errorf("round trip %s", got)
	}
	if !slices.Equal(keys(o), []string{"b", "a", "c"}) {
		t.Errorf("keys %v", keys(o))
	}
	o.del("a")
	o.del("zz")
	o.set("d", json.RawMessage("true"))
	if got := string(o.appendJSON(nil)); got != `{"b":{"x":null},"c":"\u00e9\"<","d":true}` {
		t.Errorf("after edits %s", got)
	}
	esc := mustObject(t, `{"a\u0062":{"x":"}"},"\u007f":[1,{"]":2}]}`)
	if esc.get("ab") == nil || string(esc.get("\x7f")) != `[1,{"]":2}]` ||
		string(esc.appendJSON(nil)) != `{"a\u0062":{"x":"}"},"\u007f":[1,{"]":2}]}` {
		t.Errorf("escaped keys: %q -> %s", keys(esc), esc.appendJSON(nil))
	}
	if o, err := parseObject([]byte(" {} ")); err != nil || len(o) != 0 {
		t.Errorf("empty object: %v, %v", o, err)
	}
	for _, bad := range []string{"", "[]", "{", `{"a":}`, `{"a":1}x`, `{"a":1,}`, `"s"`, `{1:2}`} {
		if _, err := parseObject([]byte(bad)); err == nil {
			t.Errorf("parseObject(%q) succeeded", bad)
		}
	}
	body := []byte(`{"id":"x","usage":{"prompt_tokens":3,"prompt_tokens_details":null}}`)
	got, ok := withCachedTokens(body, 5)
	if !ok || string(got) != `{"id":"x","usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":5}}}` {
		t.Errorf("withCachedTokens = %s, %v", got, ok)
	}
	for _, b := range []string{`{"usage":null}`, `[1]`, `{"usage":{"prompt_tokens_details":7}}`} {
		if got, ok := withCachedTokens([]byte(b), 5); ok || string(got) != b {
			t.Errorf("withCachedTokens(%s) = %s, %v: want it unchanged", b, got, ok)
		}
	}
	if n, ok := cachedTokens(mustObject(t, `{"usage":{"prompt_tokens_details":{"cached_tokens":9}}}`)); !ok || n != 9 {
		t.Errorf("cachedTokens = %d, %v", n, ok)
	}
	if _, ok := cachedTokens(mustObject(t, `{"usage":{"prompt_tokens_details":{"cached_tokens":"9"}}}`)); ok {
		t.Error("cachedTokens of a string")
	}
}

func TestEventReader(t *testing.T) {
	in := "data: a\n\n\n: c\ndata: b\r\n\r\ndata: [DONE]\n\ndata: tail"
	er := newEventReader(strings.NewReader(in), 64)
	var got []string
	for {
		ev, err := er.next()
		if len(ev) > 0 {
			got = append(got, string(ev))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	want := []string{"data: a\n\n", ": c\ndata: b\r\n\r\n", "data: [DONE]\n\n", "data: tail"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if d := eventData([]byte(": c\ndata: b\r\n\r\n")); string(d) != "b" {
		t.Errorf("eventData = %q", d)
	}
	long := "data: " + strings.Repeat("x", 40000) + "\n\n"
	if _, err := newEventReader(strings.NewReader(long), 30000).next(); !errors.Is(err, errEventTooLong) {
		t.Errorf("a 40 kB line with a 30 kB bound: %v", err)
	}
	if ev, err := newEventReader(strings.NewReader(long), 50000).next(); err != nil || len(ev) != len(long) {
		t.Errorf("a 40 kB line with a 50 kB bound: %d, %v", len(ev), err)
	}
	ev := rewriteUsageEvent([]byte(`data: {"choices":[],"usage":{"prompt_tokens":1}}`+"\n\n"), 4)
	if string(ev) != `data: {"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":4}}}`+"\n\n" {
		t.Errorf("rewritten %q", ev)
	}
	for _, same := range []string{"data: [DONE]\n\n", `data: {"usage":null}` + "\n\n", ": usage\n\n"} {
		if got := rewriteUsageEvent([]byte(same), 4); string(got) != same {
			t.Errorf("rewriteUsageEvent(%q) = %q", same, got)
		}
	}
}

func TestParseLoad(t *testing.T) {
	text := `# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m {odd} \"q\""} 3
vllm:num_requests_waiting{model_name="n"} 2 1700000000
vllm:kv_cache_usage_perc{model_name="m"} 0.5
vllm:kv_cache_usage_perc{model_name="n"} 0.75
vllm:kv_cache_usage_perc{model_name="broken" 9
vllm:num_requests_waiting NaN
vllm:num_requests_running 99
garbage
`
	l, ok := parseLoad([]byte(text))
	if !ok || l.waiting != 5 || l.kvUsage != 0.75 {
		t.Errorf("parseLoad = %+v, %v", l, ok)
	}
	if _, ok := parseLoad([]byte("other 1\n")); ok {
		t.Error("parseLoad found metrics in text without them")
	}
}

func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,{"c":null}],"a":"x"}`, `{}`, `{"usage":{"prompt_tokens_details":{}}}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseObject(b)
		if err != nil {
			return
		}
		out := o.appendJSON(nil)
		var want, got map[string]any
		if json.Unmarshal(b, &want) != nil {
			t.Fatalf("parseObject accepted what encoding/json refuses: %q", b)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendJSON wrote invalid JSON %q: %v", out, err)
		}
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if string(wb) != string(gb) {
			t.Fatalf("round trip changed the object: %s -> %s", wb, gb)
		}
		if r, ok := withCachedTokens(b, 3); ok && json.Valid(r) == false {
			t.Fatalf("withCachedTokens wrote invalid JSON %q", r)
		}
	})
}

func FuzzEventStream(f *testing.F) {
	f.Add([]byte("data: {\"usage\":{}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("\n\n\r\n: x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		er := newEventReader(strings.NewReader(string(b)), 64)
		for range len(b) + 2 {
			ev, err := er.next()
			if len(ev) > 0 {
				rewriteUsageEvent(ev, 1)
			}
			if err != nil {
				return
			}
		}
		t.Fatal("the reader did not end")
	})
}
