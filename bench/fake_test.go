package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer is an OpenAI-compatible server for tests. It answers
// /v1/models, /v1/completions and /v1/chat/completions, streaming or not,
// with max_tokens tokens "t0 ", "t1 ", ... It finds the job and turn of a
// request from the tag its prompt carries, and behaves as behave says for
// them. For a request the client plans to abandon (plan), it withholds the
// end of its answer and waits for the client to disconnect, failing the
// test if it does not within a generous deadline.
type fakeServer struct {
	t      *testing.T
	srv    *httptest.Server
	model  string
	behave func(job, turn int) string // "" (ok), "500", "429", "304", "close", "cut", "stream_error", "hang", "bad_json", "block"
	plan   func(job, turn int) abortPlan
	// release unblocks "block" requests when closed.
	release chan struct{}
	// metrics is served at /metrics.
	metrics string
	// apiKey, when set, is required as a Bearer token on /v1 (401 without).
	apiKey string

	requests    atomic.Int64
	planned     atomic.Int64 // requests received that the client plans to abandon
	disconnects atomic.Int64
	mu          sync.Mutex
	bodies      map[[2]int]map[string]any
}

func newFakeServer(t *testing.T) *fakeServer {
	f := &fakeServer{t: t, model: "fake-model", release: make(chan struct{}), bodies: map[[2]int]map[string]any{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

var tagRE = regexp.MustCompile(`q(\d+)\.(\d+):`)

// promptOf returns the whole prompt text of a request body.
func promptOf(body map[string]any) string {
	if p, ok := body["prompt"].(string); ok {
		return p
	}
	var b strings.Builder
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		c, _ := mm["content"].(string)
		b.WriteString(c)
		b.WriteString("\n")
	}
	return b.String()
}

// waitDisconnect waits for the client to go away.
func (f *fakeServer) waitDisconnect(r *http.Request, what string) {
	select {
	case <-r.Context().Done():
		f.disconnects.Add(1)
	case <-time.After(10 * time.Second):
		f.t.Errorf("fake server: the client never disconnected (%s)", what)
	}
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if f.apiKey != "" && strings.HasPrefix(r.URL.Path, "/v1") && r.Header.Get("Authorization") != "Bearer "+f.apiKey {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"no key","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"},{"id":"other"}]}`, f.model)
		return
	case "/metrics":
		io.WriteString(w, f.metrics)
		return
	case "/v1/completions", "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	f.requests.Add(1)
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	chat := r.URL.Path == "/v1/chat/completions"
	tags := tagRE.FindAllStringSubmatch(promptOf(body), -1)
	if len(tags) == 0 {
		f.t.Errorf("fake server: prompt without tag: %q", promptOf(body))
		http.Error(w, "no tag", http.StatusBadRequest)
		return
	}
	job, _ := strconv.Atoi(tags[len(tags)-1][1])
	turn, _ := strconv.Atoi(tags[len(tags)-1][2])
	f.mu.Lock()
	f.bodies[[2]int{job, turn}] = body
	f.mu.Unlock()
	if body["model"] != f.model || body["ignore_eos"] != true {
		f.t.Errorf("fake server: model %v, ignore_eos %v", body["model"], body["ignore_eos"])
	}
	maxTokens := int(body["max_tokens"].(float64))
	if minTokens, ok := body["min_tokens"].(float64); ok && int(minTokens) > maxTokens {
		http.Error(w, `{"error":{"message":"min_tokens must not exceed max_tokens","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	stream, _ := body["stream"].(bool)
	what := fmt.Sprintf("job %d turn %d", job, turn)

	var plan abortPlan
	if f.plan != nil {
		plan = f.plan(job, turn)
	}
	if plan.active {
		f.planned.Add(1)
	}
	behaviour := ""
	if f.behave != nil {
		behaviour = f.behave(job, turn)
	}
	switch behaviour {
	case "500":
		http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
		return
	case "429":
		http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
		return
	case "304":
		w.WriteHeader(http.StatusNotModified)
		return
	case "close":
		panic(http.ErrAbortHandler) // closes the connection with no response
	case "hang":
		f.waitDisconnect(r, what)
		return
	case "block":
		select {
		case <-f.release:
		case <-time.After(10 * time.Second):
			f.t.Errorf("fake server: never released (%s)", what)
		}
	case "bad_json":
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {not json\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices": [`)
		return
	}

	tok := func(i int) string { return "t" + strconv.Itoa(i) + " " }
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, len(promptOf(body)), maxTokens, len(promptOf(body))+maxTokens)
	if !stream {
		if plan.active {
			f.waitDisconnect(r, what)
			return
		}
		var text strings.Builder
		for i := range maxTokens {
			text.WriteString(tok(i))
		}
		w.Header().Set("Content-Type", "application/json")
		if chat {
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"length"}],"usage":%s}`, text.String(), usage)
		} else {
			fmt.Fprintf(w, `{"id":"x","object":"text_completion","choices":[{"index":0,"text":%q,"finish_reason":"length"}],"usage":%s}`, text.String(), usage)
		}
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	// Chat streams use CRLF line ends and comments, to exercise the parser.
	eol := "\n"
	if chat {
		eol = "\r\n"
		io.WriteString(w, ": keep-alive"+eol+eol)
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+eol+eol)
	}
	fl.Flush()
	if plan.active && plan.afterTokens == 0 {
		f.waitDisconnect(r, what)
		return
	}
	for i := range maxTokens {
		if behaviour == "stream_error" && i == 1 {
			io.WriteString(w, `data: {"error":{"message":"engine died","code":500}}`+eol+eol)
			fl.Flush()
			return
		}
		if behaviour == "cut" && i == 1 {
			fl.Flush()
			panic(http.ErrAbortHandler) // mid-stream connection loss
		}
		if chat {
			fmt.Fprintf(w, `data: {"choices":[{"index":0,"delta":{"content":%q}}]}`+eol+eol, tok(i))
		} else {
			fmt.Fprintf(w, `data: {"choices":[{"index":0,"text":%q}]}`+eol+eol, tok(i))
		}
		fl.Flush()
	}
	if plan.active {
		f.waitDisconnect(r, what)
		return
	}
	if chat {
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`+eol+eol)
	} else {
		io.WriteString(w, `data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}`+eol+eol)
	}
	io.WriteString(w, `data: {"choices":[],"usage":`+usage+`}`+eol+eol)
	io.WriteString(w, "data: [DONE]"+eol+eol)
}

func (f *fakeServer) body(job, turn int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[[2]int{job, turn}]
}
