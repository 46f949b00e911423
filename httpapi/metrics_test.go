package httpapi

import (
	"io"
	"strings"
	"testing"
)

// The latency histograms count every request and every gap between two
// tokens: whole, streamed and n > 1 answers alike (the inter-token gaps of
// a request reach the histogram together, not one by one).
func TestLatencyHistogramsCountTokens(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	for _, r := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"abc","max_tokens":8,"ignore_eos":true}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"abc"}],"max_tokens":8,"ignore_eos":true,"stream":true}`},
		{"/v1/completions", `{"prompt":"abc","max_tokens":8,"ignore_eos":true,"n":2}`},
	} {
		resp := post(t, url+r.path, r.body)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", r.path, resp.StatusCode, body)
		}
	}
	_, body := get(t, url+"/metrics")
	for _, want := range []string{
		`vllm:time_to_first_token_seconds_count{model_name="kvlease-test"} 4`,
		`vllm:inter_token_latency_seconds_count{model_name="kvlease-test"} 28`,
		`vllm:e2e_request_latency_seconds_count{model_name="kvlease-test"} 4`,
		`vllm:request_queue_time_seconds_count{model_name="kvlease-test"} 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
