package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The load: 16-token prompts, 16 output tokens, zero-latency model.
const (
	benchCompletion = `{"prompt":"0123456789abcdef","max_tokens":16,"ignore_eos":true}`
	benchChatStream = `{"messages":[{"role":"user","content":"0123"}],"max_tokens":16,"ignore_eos":true,"stream":true}`
)

// BenchmarkHTTPCompletion measures the cost of one non-streaming completion
// through the whole stack over loopback HTTP (keep-alive client, 32
// concurrent clients), with the zero profile so only kvlease's own overhead
// counts. ns/op is the inverse of throughput.
func BenchmarkHTTPCompletion(b *testing.B) {
	benchHTTP(b, "/v1/completions", benchCompletion)
}

// BenchmarkHTTPChatStream is the same for streaming chat completions.
func BenchmarkHTTPChatStream(b *testing.B) {
	benchHTTP(b, "/v1/chat/completions", benchChatStream)
}

func benchHTTP(b *testing.B, path, body string) {
	n := newNode(b, nodeOpts{numBlocks: 4096})
	_, url := newServer(b, n, nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	b.SetParallelism(16) // × GOMAXPROCS(2) = 32 clients
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url+path, "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkCompletionHandler is the handler alone, without sockets: the
// server's and the engine's share of a request.
func BenchmarkCompletionHandler(b *testing.B) {
	n := newNode(b, nodeOpts{numBlocks: 4096})
	s, _ := newServer(b, n, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(benchCompletion)))
			if w.Code != 200 {
				b.Errorf("status %d", w.Code)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
