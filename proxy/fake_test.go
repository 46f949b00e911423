package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeEngine is a kvlease engine as the proxy sees it, following the
// contract of httpapi: a prefill engine answers a do_remote_decode request
// with kv_transfer_params, a decode engine checks them and generates
// "tok0 tok1 ..." (max_tokens words, default 4), streamed or not. Both
// record every request and every abort, serve /health and /metrics, and
// abort a request in flight when its abort arrives.
type fakeEngine struct {
	t    *testing.T
	role string
	srv  *httptest.Server

	// hook, when set, may answer a generation request itself (it returns
	// true); ctx is done when the proxy leaves or the request is aborted.
	hook func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool
	// waiting is reported as vllm:num_requests_waiting.
	waiting atomic.Int64

	active atomic.Int64 // generation handlers running
	mu     sync.Mutex
	reqs   []*fakeReq
	aborts map[string]int
	// abortAuth is the Authorization header of each id's last abort.
	abortAuth map[string]string
	cancel    map[string]context.CancelFunc
	seen      chan string // each generation request's id, when non-nil
}

type fakeReq struct {
	// id is the client's X-Request-Id: engineID without the proxy's
	// random suffix (clientIDOf).
	id       string
	engineID string
	path     string
	header   http.Header
	raw      []byte
	body     object
	kv       map[string]any
}

func (r *fakeReq) str(key string) string {
	var s string
	json.Unmarshal(r.body.get(key), &s)
	return s
}

func (r *fakeReq) num(key string, def int) int {
	n, err := strconv.Atoi(string(r.body.get(key)))
	if err != nil {
		return def
	}
	return n
}

const (
	fakeCachedTokens = 7
	fakeLeaseToken   = "0123456789abcdef0123456789abcdef"
)

func newFake(t *testing.T, role string) *fakeEngine {
	return newFakeOver(t, role, false)
}

// newFakeOver is newFake, serving HTTPS with httptest's certificate
// (for 127.0.0.1) when tls is set.
func newFakeOver(t *testing.T, role string, tls bool) *fakeEngine {
	f := &fakeEngine{t: t, role: role, aborts: map[string]int{}, abortAuth: map[string]string{}, cancel: map[string]context.CancelFunc{}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	if tls {
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEngine) url() string { return f.srv.URL }

func (f *fakeEngine) hostPort() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/health":
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == "/metrics":
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} %d\n"+
			"vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\nkvlease_leases_active 0\n", f.waiting.Load())
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/kvlease/v1/requests/") && strings.HasSuffix(r.URL.Path, "/abort"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/kvlease/v1/requests/"), "/abort")
		if h := r.Header.Get("X-Request-Id"); h != id {
			f.t.Errorf("%s: abort of %q carries X-Request-Id %q", f.role, id, h)
		}
		f.mu.Lock()
		f.aborts[clientIDOf(id)]++
		f.abortAuth[clientIDOf(id)] = r.Header.Get("Authorization")
		if c := f.cancel[id]; c != nil {
			c()
		}
		f.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && (r.URL.Path == "/v1/completions" || r.URL.Path == "/v1/chat/completions"):
		f.generate(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeEngine) generate(w http.ResponseWriter, r *http.Request) {
	f.active.Add(1)
	defer f.active.Add(-1)
	raw := make([]byte, 0, 512)
	buf := make([]byte, 512)
	for {
		n, err := r.Body.Read(buf)
		raw = append(raw, buf[:n]...)
		if err != nil {
			break
		}
	}
	body, err := parseObject(raw)
	if err != nil {
		f.t.Errorf("%s got a body that is not an object: %v: %s", f.role, err, raw)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	eid := r.Header.Get("X-Request-Id")
	req := &fakeReq{id: clientIDOf(eid), engineID: eid, path: r.URL.Path, header: r.Header.Clone(), raw: raw, body: body}
	if kv := body.get("kv_transfer_params"); kv != nil {
		json.Unmarshal(kv, &req.kv)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.cancel[req.engineID] = cancel
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.cancel, req.engineID)
		f.mu.Unlock()
	}()
	if f.seen != nil {
		f.seen <- req.id
	}
	if f.hook != nil && f.hook(ctx, w, req) {
		return
	}
	if f.role == RolePrefill {
		f.answerPrefill(w, req)
		return
	}
	f.answerDecode(ctx, w, req, 0)
}

// fakeKV is the kv_transfer_params the fake prefill engine grants.
func fakeKV(id string) string {
	return `{"do_remote_decode":false,"do_remote_prefill":true,"remote_engine_id":"p-engine","remote_request_id":"` + id +
		`","remote_host":"127.0.0.1","remote_port":9000,"remote_block_ids":[3,4],"tp_size":1,"lease_id":42,` +
		`"lease_token":"` + fakeLeaseToken + `","lease_expires_in_ms":30000,"extra_field":{"kept":true}}`
}

func (f *fakeEngine) answerPrefill(w http.ResponseWriter, req *fakeReq) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"cmpl-%s","object":"text_completion","created":1,"model":"m",`+
		`"choices":[{"index":0,"text":"x","finish_reason":"length"}],`+
		`"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":%d}},`+
		`"kv_transfer_params":%s}`, req.id, fakeCachedTokens, fakeKV(req.id))
}

// fakeText is what the fake decode engine generates for n tokens.
func fakeText(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "tok%d ", i)
	}
	return b.String()
}

// answerDecode generates max_tokens words. With pace > 0 each event
// waits that long after the previous one (a generating engine); with
// max_tokens -1 it streams until its context ends.
func (f *fakeEngine) answerDecode(ctx context.Context, w http.ResponseWriter, req *fakeReq, pace time.Duration) {
	n := req.num("max_tokens", 4)
	chat := req.path == "/v1/chat/completions"
	usage := func(cached int) string {
		return fmt.Sprintf(`{"prompt_tokens":12,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
			n, 12+n, cached)
	}
	if string(req.body.get("stream")) != "true" {
		w.Header().Set("Content-Type", "application/json")
		text, _ := json.Marshal(fakeText(n))
		if chat {
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,`+
				`"message":{"role":"assistant","content":%s},"finish_reason":"length"}],"usage":%s}`, text, usage(0))
		} else {
			fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,`+
				`"text":%s,"finish_reason":"length"}],"usage":%s}`, text, usage(0))
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for i := 0; n < 0 || i < n; i++ {
		word, _ := json.Marshal(fmt.Sprintf("tok%d ", i))
		if chat {
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%s},"finish_reason":null}]}`+"\n\n", word)
		} else {
			fmt.Fprintf(w, `data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":%s,"finish_reason":null}]}`+"\n\n", word)
		}
		if rc.Flush() != nil || ctx.Err() != nil {
			return
		}
		if pace > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pace):
			}
		}
	}
	if string(req.body.get("stream_options")) == `{"include_usage":true}` {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"x\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":%s}\n\n", usage(0))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (f *fakeEngine) requests() []*fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeReq(nil), f.reqs...)
}

// clientIDOf is the client's X-Request-Id of an engine-side id: without
// the "-" and 16 hex digits the proxy appends (engineRequestID).
func clientIDOf(engineID string) string {
	n := len(engineID) - 17
	if n < 0 || engineID[n] != '-' {
		return engineID
	}
	for _, c := range engineID[n+1:] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return engineID
		}
	}
	return engineID[:n]
}

// abortCount is the number of aborts of the requests whose client id is
// id.
func (f *fakeEngine) abortCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.aborts[id]
}

func (f *fakeEngine) abortAuthorization(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.abortAuth[id]
}

func (f *fakeEngine) totalAborts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.aborts {
		n += c
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
