package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlease/kvlease/httpserver/httpservertest"
	"github.com/kvlease/kvlease/proxy/route"
)

type rig struct {
	t   *testing.T
	p   *Proxy
	srv *httpservertest.Server
	pre []*fakeEngine
	dec []*fakeEngine
}

func newRig(t *testing.T, nP, nD int, tweak func(*Config)) *rig {
	return newRigOver(t, nP, nD, false, tweak)
}

// newRigOver is newRig, its engines serving HTTPS when tls is set.
func newRigOver(t *testing.T, nP, nD int, tls bool, tweak func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t}
	cfg := DefaultConfig()
	cfg.ScrapeInterval = 0
	for range nP {
		f := newFakeOver(t, RolePrefill, tls)
		r.pre = append(r.pre, f)
		cfg.Prefill = append(cfg.Prefill, f.url())
	}
	for range nD {
		f := newFakeOver(t, RoleDecode, tls)
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
	r.srv = httpservertest.NewServer(p)
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
		k = append(k, f.name())
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
	// P: the client's members in order, edited as docs/protocol.md says.
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
	got := prefillBody(nil, mustObject(t, `{"messages":[],"stream":true,"stream_options":{"include_usage":true},`+
		`"max_completion_tokens":50,"min_completion_tokens":3,"max_tokens":9}`))
	want := `{"messages":[],"stream":false,"max_completion_tokens":1,"max_tokens":1,"kv_transfer_params":` + string(prefillKV) + `}`
	if string(got) != want {
		t.Errorf("prefill body\n got %s\nwant %s", got, want)
	}
	if got := decodeBody(nil, mustObject(t, `{"a":1,"kv_transfer_params":{"x":1}}`), nil); string(got) != `{"a":1}` {
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

// TestEngineCAsReloaded: with EngineRootCAs each new connection to an
// https engine is verified against the CAs of that moment: refused while
// they do not hold the engine's, served once they do (a rotated bundle,
// no new proxy), legs and the transport's requests (/v1/models) alike;
// and the engine's name is still checked.
func TestEngineCAsReloaded(t *testing.T) {
	var roots atomic.Pointer[x509.CertPool]
	roots.Store(x509.NewCertPool()) // trusts no one
	r := newRigOver(t, 1, 1, true, func(c *Config) {
		c.EngineRootCAs = roots.Load
		c.DownFor = time.Nanosecond // a refused engine is tried again at once
	})
	body := `{"model":"m","prompt":"hello","max_tokens":3}`
	get := func(path string) (int, string) {
		resp, err := http.Get(r.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, readAll(t, resp)
	}
	resp := r.post("/v1/completions", body)
	if text := readAll(t, resp); resp.StatusCode == http.StatusOK || !strings.Contains(text, "certificate") {
		t.Fatalf("engines of an untrusted CA: %d %s, want a certificate error", resp.StatusCode, text)
	}
	if code, text := get("/v1/models"); code == http.StatusOK || !strings.Contains(text, "certificate") {
		t.Fatalf("/v1/models from an untrusted engine: %d %s, want a certificate error", code, text)
	}
	pool := x509.NewCertPool()
	pool.AddCert(r.dec[0].srv.Certificate()) // every httptest server's
	roots.Store(pool)
	resp = r.post("/v1/completions", body)
	if text := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(text, fakeText(3)) {
		t.Fatalf("once the CA is trusted: %d %s", resp.StatusCode, text)
	}
	if code, text := get("/v1/models"); strings.Contains(text, "certificate") {
		t.Fatalf("/v1/models once the CA is trusted: %d %s", code, text)
	}
	// The right CAs for another name: refused.
	other := newRigOver(t, 1, 1, true, func(c *Config) {
		c.EngineRootCAs = roots.Load
		c.EngineTLS = &tls.Config{ServerName: "kvlease.invalid"}
	})
	resp = other.post("/v1/completions", body)
	if text := readAll(t, resp); resp.StatusCode == http.StatusOK || !strings.Contains(text, "kvlease.invalid") {
		t.Fatalf("an engine whose certificate is not for the name: %d %s, want a name error", resp.StatusCode, text)
	}
}
