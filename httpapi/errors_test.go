package httpapi

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/xfer"
)

func TestErrors(t *testing.T) {
	n := newNode(t, nodeOpts{maxLen: 256})
	_, url := newServer(t, n, func(c *Config) { c.MaxBodyBytes = 4096 })
	long := strings.Repeat("x", 256)
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		param                    any // nil for JSON null
		code                     any
		msg                      string // a part of the message
	}{
		{"malformed", "POST", "/v1/completions", `{"prompt":`, nil, 400, nil, nil, "not valid JSON"},
		{"wrong type", "POST", "/v1/completions", `{"prompt":"x","max_tokens":"5"}`, nil, 400, "max_tokens", nil, "must be an integer"},
		{"unknown model", "POST", "/v1/completions", `{"model":"gpt-9","prompt":"x"}`, nil, 404, "model", "model_not_found", "gpt-9"},
		{"prompt too long", "POST", "/v1/completions", `{"prompt":"` + long + `"}`, nil, 400, "prompt", nil, "maximum context length is 256"},
		{"chat too long", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, nil, 400, "messages", nil, "maximum context length"},
		{"max_tokens over context", "POST", "/v1/completions", `{"prompt":"abc","max_tokens":254}`, nil, 400, "max_tokens", nil, "you requested 257 tokens"},
		{"prompt token over vocab", "POST", "/v1/completions", `{"prompt":[1,257]}`, nil, 400, "prompt", nil, "token id 257 is out of vocabulary (0..256)"},
		{"n over 128", "POST", "/v1/completions", `{"prompt":"x","n":200}`, nil, 400, "n", nil, "between 1 and 128"},
		{"bad role", "POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, nil, 400, "messages[0].role", nil, "robot"},
		{"too large", "POST", "/v1/completions", `{"prompt":"` + strings.Repeat("y", 5000) + `"}`, nil, 413, nil, "request_too_large", "at most 4096"},
		{"bad request id", "POST", "/v1/completions", `{"prompt":"x"}`, []string{"X-Request-Id", "a b"}, 400, "X-Request-Id", nil, "printable ASCII"},
		{"wrong method", "GET", "/v1/completions", ``, nil, 405, nil, nil, "use POST"},
		{"unknown path", "GET", "/v2/nothing", ``, nil, 404, nil, nil, "no route"},
		{"abort with GET", "GET", "/kvlease/v1/requests/x/abort", ``, nil, 405, nil, nil, "use POST"},
		{"abort without id", "POST", "/kvlease/v1/requests/abort", ``, nil, 404, nil, nil, "no route"},
		{"abort with empty id", "POST", "/kvlease/v1/requests//abort", ``, nil, 400, "id", nil, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			m := readJSON(t, resp)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d (%v)", resp.StatusCode, tc.status, m)
			}
			e, _ := m["error"].(map[string]any)
			if e == nil {
				t.Fatalf("no error object: %v", m)
			}
			if e["param"] != tc.param || e["code"] != tc.code || e["type"] == nil {
				t.Errorf("error %v, want param %v code %v", e, tc.param, tc.code)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q lacks %q", msg, tc.msg)
			}
		})
	}
	if s := n.Stats(); s.Requests != 0 || s.Pool.Held != 0 {
		t.Errorf("refused requests left %d requests, %d held blocks", s.Requests, s.Pool.Held)
	}
}

func TestShuttingDown(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	n.Drain()
	resp := post(t, url+"/v1/completions", `{"prompt":"x"}`)
	m := readJSON(t, resp)
	if resp.StatusCode != 503 || field(m, "error", "code") != "service_unavailable" {
		t.Errorf("%d %v", resp.StatusCode, m)
	}
}

// An X-Request-Id already in progress is refused; the first request goes on.
func TestDuplicateRequestID(t *testing.T) {
	n := newNode(t, nodeOpts{profile: "slow"})
	_, url := newServer(t, n, nil)
	first := post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":1000,"ignore_eos":true,"stream":true}`, "X-Request-Id", "dup")
	br := bufio.NewReader(first.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp := post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":2}`, "X-Request-Id", "dup")
	if m := readJSON(t, resp); resp.StatusCode != 400 || field(m, "error", "param") != "X-Request-Id" {
		t.Errorf("duplicate: %d %v", resp.StatusCode, m)
	}
	first.Body.Close()
	waitFor(t, "the first request to be aborted", func() bool { return n.Stats().Pool.Held == 0 })
}

// Every refusal answers the status of engine.AddResult.HTTPStatus (the
// mapping the simulator uses too), with the OpenAI error type of that status.
func TestRefusalStatus(t *testing.T) {
	s, _ := newServer(t, newNode(t, nodeOpts{profile: "tiny"}), nil)
	wantType := map[int]string{400: openai.TypeInvalidRequest, 429: openai.TypeRateLimit, 503: openai.TypeServer, 500: openai.TypeServer}
	for res := engine.RejectedInvalid; res <= engine.RejectedShuttingDown+1; res++ {
		for _, remote := range []*xfer.Remote{nil, {NumBlocks: 1, NumTokens: 40}} {
			e := s.refusal(res, 30, &engine.Request{Remote: remote})
			if e.Status != res.HTTPStatus() || e.Type != wantType[e.Status] || e.Message == "" {
				t.Errorf("%v (remote %v): %d %s %q, want %d %s", res, remote != nil, e.Status, e.Type, e.Message, res.HTTPStatus(), wantType[res.HTTPStatus()])
			}
		}
	}
}
