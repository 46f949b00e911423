package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kvlease/kvlease/httpserver/httpservertest"
)

// benchEngines are minimal instant engines: P answers with fixed
// kv_transfer_params, D with a fixed completion or a 16-event stream. They
// are served by httpserver, as kvlease serve's engines are, so what the proxy adds
// is not hidden behind a costlier engine server.
func benchEngines(b *testing.B) (p, d *httpservertest.Server) {
	b.Helper()
	pAns := []byte(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":16,"completion_tokens":1,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":0}},"kv_transfer_params":` + fakeKV("r") + `}`)
	dAns := []byte(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"` + fakeText(16) +
		`","finish_reason":"length"}],"usage":{"prompt_tokens":16,"completion_tokens":16,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":16}}}`)
	var stream bytes.Buffer
	for i := range 16 {
		fmt.Fprintf(&stream, `data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"tok%d ","finish_reason":null}]}`+"\n\n", i)
	}
	stream.WriteString(`data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":16,"completion_tokens":16,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":16}}}` + "\n\ndata: [DONE]\n\n")
	p = httpservertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(pAns)
	}))
	d = httpservertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(dAns)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for ev := range bytes.SplitAfterSeq(stream.Bytes(), []byte("\n\n")) {
			w.Write(ev)
			rc.Flush()
		}
	}))
	b.Cleanup(p.Close)
	b.Cleanup(d.Close)
	return p, d
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProxy measures a whole request (both legs) through the proxy
// against instant engines, against the same request sent straight to the
// decode engine; p50-µs and p99-µs are per-request latencies at the
// benchmark's parallelism (GOMAXPROCS goroutines), cpu-µs/op the CPU time
// of the whole process (client, proxy and both engines) per request,
// which depends less than latency on what else runs on the machine.
func BenchmarkProxy(b *testing.B) {
	for _, stream := range []bool{false, true} {
		body := []byte(fmt.Sprintf(`{"model":"m","prompt":"0123456789abcdef","max_tokens":16,"stream":%v,"stream_options":{"include_usage":true}}`, stream))
		for _, via := range []string{"direct", "proxy"} {
			b.Run(fmt.Sprintf("stream=%v/%s", stream, via), func(b *testing.B) {
				pe, de := benchEngines(b)
				url := de.URL
				if via == "proxy" {
					cfg := DefaultConfig()
					cfg.Prefill, cfg.Decode, cfg.ScrapeInterval = []string{pe.URL}, []string{de.URL}, 0
					px, err := New(cfg)
					if err != nil {
						b.Fatal(err)
					}
					srv := httpservertest.NewServer(px)
					b.Cleanup(srv.Close)
					url = srv.URL
				}
				tr := &http.Transport{MaxIdleConnsPerHost: 256}
				client := &http.Client{Transport: tr}
				b.Cleanup(tr.CloseIdleConnections)
				lat := make(chan []time.Duration, 64)
				b.ReportAllocs()
				cpu0 := processCPU()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var mine []time.Duration
					for pb.Next() {
						start := time.Now()
						resp, err := client.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
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
						mine = append(mine, time.Since(start))
					}
					lat <- mine
				})
				b.StopTimer()
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
				close(lat)
				var all []time.Duration
				for l := range lat {
					all = append(all, l...)
				}
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				}
			})
		}
	}
}
