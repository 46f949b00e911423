package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/openai"
)

// TestAPIKeys: with Config.APIKeys a client without the key gets 401 in
// OpenAI's shape and no engine hears of the request; /health and /metrics
// stay open; with the key the request goes through and the engines get the
// client's Authorization header (legs and aborts), or the proxy's own
// EngineAPIKey when that is set.
func TestAPIKeys(t *testing.T) {
	rejectOnD := func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"message":"no","type":"invalid_request_error","param":null,"code":null}}`))
		return true
	}
	for _, tt := range []struct {
		name, engineKey, wantAuth string
	}{
		{"forwards the client's key", "", "Bearer sk-proxy"},
		{"uses its own engine key", "sk-engine", "Bearer sk-engine"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, 1, 1, func(c *Config) {
				c.APIKeys = openai.NewAPIKeys("sk-proxy")
				c.EngineAPIKey = tt.engineKey
			})
			for _, auth := range []string{"", "Bearer sk-wrong", "Basic sk-proxy"} {
				hdr := []string{"X-Request-Id", "no-key"}
				if auth != "" {
					hdr = append(hdr, "Authorization", auth)
				}
				resp := r.post("/v1/completions", `{"prompt":"x","max_tokens":2}`, hdr...)
				body := readAll(t, resp)
				if resp.StatusCode != 401 || !strings.Contains(body, `"code":"invalid_api_key"`) ||
					!strings.Contains(body, `"type":"invalid_request_error"`) || resp.Header.Get("WWW-Authenticate") != "Bearer" {
					t.Errorf("Authorization %q: %d %s", auth, resp.StatusCode, body)
				}
			}
			if len(r.pre[0].requests()) != 0 || len(r.dec[0].requests()) != 0 {
				t.Fatal("an engine saw a request that had no valid key")
			}
			for _, path := range []string{"/health", "/metrics"} {
				resp, err := http.Get(r.srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("GET %s without a key: %d, want 200", path, resp.StatusCode)
				}
			}
			resp := r.post("/v1/completions", `{"prompt":"x","max_tokens":2}`, "Authorization", "Bearer sk-proxy")
			if body := readAll(t, resp); resp.StatusCode != 200 {
				t.Fatalf("with the key: %d %s", resp.StatusCode, body)
			}
			for _, q := range []*fakeReq{r.pre[0].requests()[0], r.dec[0].requests()[0]} {
				if got := q.header.Get("Authorization"); got != tt.wantAuth {
					t.Errorf("%s leg: Authorization %q, want %q", q.path, got, tt.wantAuth)
				}
			}
			// D rejects: the proxy aborts the request on P with the same
			// credentials.
			r.dec[0].hook = rejectOnD
			resp = r.post("/v1/completions", `{"prompt":"x"}`, "Authorization", "Bearer sk-proxy", "X-Request-Id", "rej")
			readAll(t, resp)
			if r.pre[0].abortCount("rej") != 1 {
				t.Fatal("P not told to abort")
			}
			if got := r.pre[0].abortAuthorization("rej"); got != tt.wantAuth {
				t.Errorf("abort: Authorization %q, want %q", got, tt.wantAuth)
			}
		})
	}
}
