package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// instantServer answers every completion at once with a fixed body: a
// non-streaming completion, or a stream of tokens events, a usage event and
// [DONE]. It parses nothing, so that a benchmark's time is mostly the
// client's.
func instantServer(b *testing.B, tokens int) *httptest.Server {
	completion := fmt.Sprintf(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":%q,"finish_reason":"length"}],"usage":{"prompt_tokens":16,"completion_tokens":%d,"total_tokens":%d}}`,
		strings.Repeat("ab ", tokens), tokens, 16+tokens)
	var sse strings.Builder
	for i := range tokens {
		finish := "null"
		if i == tokens-1 {
			finish = `"length"`
		}
		fmt.Fprintf(&sse, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d \"},\"finish_reason\":%s}]}\n\n", i, finish)
	}
	fmt.Fprintf(&sse, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", tokens, 16+tokens)
	stream := sse.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completion)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchmarkRun runs b.N requests through Run against instantServer; ns/op
// is the client's and the server's time together (allocs/op mostly the
// client's: the handler allocates little).
func benchmarkRun(b *testing.B, api API, stream bool) {
	srv := instantServer(b, 16)
	cfg := DefaultConfig()
	cfg.URL, cfg.Model, cfg.API, cfg.Stream = srv.URL, "m", api, stream
	cfg.Concurrency = 8
	cfg.Workload.InputLen, cfg.Workload.OutputLen = Fixed(16), Fixed(16)
	cfg.Requests = min(b.N, MaxRequests)
	b.ReportAllocs()
	b.ResetTimer()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if s := res.Summary; s.Completed != cfg.Requests || s.OutputTokens != 16*cfg.Requests {
		b.Fatalf("summary %+v", s)
	}
}

func BenchmarkRunCompletions(b *testing.B) { benchmarkRun(b, APICompletions, false) }
func BenchmarkRunChatStream(b *testing.B)  { benchmarkRun(b, APIChat, true) }
