package cli

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestAPIKeyFlagsAndEnvironment: --api-key (repeatable) wins over
// KVLEASE_API_KEY, which wins over VLLM_API_KEY; an empty --api-key is
// refused; the proxy takes the same keys and --engine-api-key.
func TestAPIKeyFlagsAndEnvironment(t *testing.T) {
	t.Setenv(secretEnv, "")
	for _, tt := range []struct {
		args       []string
		ours, vllm string
		want       []string
	}{
		{nil, "", "", nil},
		{nil, "", "sk-vllm", []string{"sk-vllm"}},
		{nil, "sk-ours", "sk-vllm", []string{"sk-ours"}},
		{[]string{"--api-key", "sk-1", "--api-key", "sk-2"}, "sk-ours", "sk-vllm", []string{"sk-1", "sk-2"}},
	} {
		t.Setenv(APIKeyEnv, tt.ours)
		t.Setenv(VLLMAPIKeyEnv, tt.vllm)
		f, err := parseServeFlags(tt.args, io.Discard)
		if err != nil || !slices.Equal(f.apiKeys, tt.want) {
			t.Errorf("serve %v with %s=%q %s=%q: keys %q (%v), want %q", tt.args, APIKeyEnv, tt.ours, VLLMAPIKeyEnv, tt.vllm, f.apiKeys, err, tt.want)
		}
		p, err := parseProxyFlags(append([]string{"--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2"}, tt.args...), io.Discard)
		if err != nil || p.cfg.APIKeys.Enabled() != (len(tt.want) > 0) {
			t.Errorf("proxy %v: keys enabled %v (%v)", tt.args, p.cfg.APIKeys.Enabled(), err)
		}
		for _, k := range tt.want {
			if !p.cfg.APIKeys.Allow("Bearer " + k) {
				t.Errorf("proxy %v: key %q refused", tt.args, k)
			}
		}
	}
	t.Setenv(APIKeyEnv, "")
	t.Setenv(VLLMAPIKeyEnv, "")
	if _, err := parseServeFlags([]string{"--api-key", ""}, io.Discard); err == nil || !strings.Contains(err.Error(), "-api-key") {
		t.Errorf("empty --api-key: %v", err)
	}
	p, err := parseProxyFlags([]string{"--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--engine-api-key", "sk-e"}, io.Discard)
	if err != nil || p.cfg.EngineAPIKey != "sk-e" {
		t.Errorf("--engine-api-key: %q (%v)", p.cfg.EngineAPIKey, err)
	}
}

// TestServeAPIKey: kvlease serve --api-key guards /v1 and leaves /health
// open.
func TestServeAPIKey(t *testing.T) {
	t.Setenv(secretEnv, "")
	url, _, _, _ := serveInProcess(t, "--profile", "zero", "--api-key", "sk-serve")
	get := func(path, auth string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/v1/models", ""); got != 401 {
		t.Errorf("/v1/models without the key: %d", got)
	}
	if got := get("/v1/models", "Bearer sk-serve"); got != 200 {
		t.Errorf("/v1/models with the key: %d", got)
	}
	if got := get("/health", ""); got != 200 {
		t.Errorf("/health without the key: %d", got)
	}
}
