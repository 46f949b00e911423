package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/openai"
)

// TestAPIKey: with Config.APIKeys every /v1 path and the abort endpoint
// need "Authorization: Bearer <key>" (401 in OpenAI's shape before
// anything else is looked at); /health, /version and /metrics do not.
func TestAPIKey(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, func(c *Config) { c.APIKeys = openai.NewAPIKeys("sk-a", "sk-b") })
	do := func(method, path, auth, body string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			k, err := resp.Body.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String(), resp.Header
	}
	gen := `{"prompt":"hello","max_tokens":2}`
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/v1/completions", gen},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`},
		{"GET", "/v1/models", ""},
		{"GET", "/v1/nowhere", ""},
		{"POST", "/kvlease/v1/requests/some-id/abort", ""},
	} {
		for _, auth := range []string{"", "Bearer sk-c", "Bearer", "Basic sk-a", "sk-a"} {
			status, body, h := do(tt.method, tt.path, auth, tt.body)
			if status != 401 || !strings.Contains(body, `"code":"invalid_api_key"`) ||
				!strings.Contains(body, `"type":"invalid_request_error"`) || h.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("%s %s with Authorization %q: %d %s", tt.method, tt.path, auth, status, body)
			}
			if strings.Contains(body, "sk-") {
				t.Errorf("the 401 echoes the presented key: %s", body)
			}
		}
	}
	if st := n.Stats(); st.Requests != 0 || len(st.Finished) != 0 {
		t.Fatalf("the engine saw requests without a key: %d live, finished %v", st.Requests, st.Finished)
	}
	for _, key := range []string{"Bearer sk-a", "bearer sk-b"} {
		if status, body, _ := do("POST", "/v1/completions", key, gen); status != 200 {
			t.Errorf("with %q: %d %s", key, status, body)
		}
		if status, body, _ := do("GET", "/v1/models", key, ""); status != 200 {
			t.Errorf("models with %q: %d %s", key, status, body)
		}
		if status, body, _ := do("POST", "/kvlease/v1/requests/unknown-id/abort", key, ""); status != 404 {
			t.Errorf("abort with %q: %d %s, want 404 (unknown id)", key, status, body)
		}
	}
	for _, path := range []string{"/health", "/version", "/metrics"} {
		if status, body, _ := do("GET", path, "", ""); status != 200 {
			t.Errorf("GET %s without a key: %d %s", path, status, body)
		}
	}
	// OPTIONS is not authenticated (as in vLLM, for CORS preflights); it
	// gets the route's method answer.
	if status, _, _ := do("OPTIONS", "/v1/completions", "", ""); status != http.StatusMethodNotAllowed {
		t.Errorf("OPTIONS without a key: %d, want 405", status)
	}
}
