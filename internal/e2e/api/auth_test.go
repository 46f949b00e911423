package api

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/httpserver/httpservertest"
	"github.com/kvlease/kvlease/internal/e2e"
	kvopenai "github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/proxy"
)

// startProxy serves a kvlease proxy over p and d on loopback.
func startProxy(t *testing.T, p, d *testEngine, mut func(*proxy.Config)) string {
	t.Helper()
	cfg := proxy.DefaultConfig()
	cfg.Prefill, cfg.Decode, cfg.ScrapeInterval = []string{p.url}, []string{d.url}, 0
	if mut != nil {
		mut(&cfg)
	}
	px, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httpservertest.NewServer(px)
	t.Cleanup(func() { ts.Close(); px.Close() })
	return ts.URL
}

func sdkClient(baseURL, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(baseURL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// wantUnauthorized checks err is the SDK's 401 with OpenAI's code.
func wantUnauthorized(t *testing.T, what string, err error) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != kvopenai.CodeInvalidAPIKey {
		t.Errorf("%s: %v, want a 401 with code %s", what, err, kvopenai.CodeInvalidAPIKey)
	}
}

// TestSDKAPIKey: the official SDK works against an engine started with an
// API key when it presents the key, and gets 401 (OpenAI's shape) when it
// does not; the abort endpoint needs the key too; /health and /metrics do
// not.
func TestSDKAPIKey(t *testing.T) {
	e := startEngine(t, engineOpts{profile: "zero", apiKeys: []string{"sk-e2e"}})
	ctx := context.Background()
	good := sdkClient(e.url, "sk-e2e")
	r, err := good.Completions.New(ctx, completion("With a key", 4))
	if err != nil || len(r.Choices) != 1 {
		t.Fatalf("with the key: %v", err)
	}
	stream := good.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: modelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		MaxCompletionTokens: openai.Int(4),
	})
	chunks := 0
	for stream.Next() {
		chunks++
	}
	if err := stream.Err(); err != nil || chunks == 0 {
		t.Fatalf("streaming with the key: %d chunks, %v", chunks, err)
	}
	if _, err := good.Models.List(ctx); err != nil {
		t.Fatalf("models with the key: %v", err)
	}

	bad := sdkClient(e.url, "sk-wrong")
	_, err = bad.Completions.New(ctx, completion("Without the key", 4))
	wantUnauthorized(t, "completion with a wrong key", err)
	_, err = bad.Models.List(ctx)
	wantUnauthorized(t, "models with a wrong key", err)
	bad = sdkClient(e.url, "")
	_, err = bad.Completions.New(ctx, completion("No key", 4))
	wantUnauthorized(t, "completion without a key", err)

	if status, m := e2e.PostJSON(t, e.url+"/kvlease/v1/requests/x1/abort", ""); status != 401 {
		t.Errorf("abort without the key: %d %v", status, m)
	}
	if status, m := e2e.PostJSON(t, e.url+"/kvlease/v1/requests/x1/abort", "", "Authorization", "Bearer sk-e2e"); status != 404 {
		t.Errorf("abort of an unknown id with the key: %d %v, want 404", status, m)
	}
	for _, path := range []string{"/health", "/metrics"} {
		resp, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s without a key: %d", path, resp.StatusCode)
		}
	}
}

// TestSDKAPIKeyThroughProxy: engines with a key behind the proxy. Either
// the proxy forwards the client's key, or it checks its own client key and
// presents --engine-api-key to the engines; both serve the SDK, and a
// client without the right key gets 401.
func TestSDKAPIKeyThroughProxy(t *testing.T) {
	p := startEngine(t, engineOpts{profile: "zero", role: engine.RolePrefill, apiKeys: []string{"sk-engine"}})
	d := startEngine(t, engineOpts{profile: "zero", role: engine.RoleDecode, apiKeys: []string{"sk-engine"}})
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		mut       func(*proxy.Config)
		clientKey string
	}{
		{"forwarded", nil, "sk-engine"},
		{"own key", func(c *proxy.Config) {
			c.APIKeys, c.EngineAPIKey = kvopenai.NewAPIKeys("sk-client"), "sk-engine"
		}, "sk-client"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := startProxy(t, p, d, tt.mut)
			good, bad := sdkClient(url, tt.clientKey), sdkClient(url, "sk-wrong")
			r, err := good.Completions.New(ctx, completion("Through the proxy with a key", 6))
			// Not the text: an unseeded request draws EOS first once in 96.
			if err != nil || len(r.Choices) != 1 || r.Usage.CompletionTokens == 0 {
				t.Fatalf("with the key: %+v, %v", r, err)
			}
			_, err = bad.Completions.New(ctx, completion("Through the proxy without", 6))
			wantUnauthorized(t, "through the proxy with a wrong key", err)
		})
	}
	// D's RELEASE(read_done) may still be on its way when the answer is
	// in: wait for P to free the blocks rather than read them at once.
	e2e.WaitFor(t, "P to hold no block", func() bool { return p.held(t) == 0 })
}
