package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvlease/kvlease/engine"
)

// Inter-token latencies added in batches (InterTokens) and one by one
// (ObserveInterToken) scrape exactly as a Prometheus histogram fed the
// same values, bucket boundaries included.
func TestInterTokensMatchPrometheusHistogram(t *testing.T) {
	m := New("m", fixed(engine.NodeStats{}))
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "vllm:inter_token_latency_seconds", Help: "Histogram of inter-token latency in seconds.",
		Buckets: InterTokenBuckets, ConstLabels: prometheus.Labels{"model_name": "m"},
	})
	gaps := []time.Duration{0, time.Microsecond, 10 * time.Millisecond, 10*time.Millisecond + 1,
		250 * time.Millisecond, 3 * time.Second, 80 * time.Second, 5 * time.Minute}
	var b InterTokens
	for i, d := range gaps {
		ref.Observe(d.Seconds())
		if i%3 == 0 {
			m.ObserveInterToken(d)
			continue
		}
		b.Observe(d)
		if b.Len() == 3 {
			m.AddInterTokens(&b)
		}
	}
	m.AddInterTokens(&b)
	if b.Len() != 0 {
		t.Fatalf("AddInterTokens left %d gaps", b.Len())
	}
	m.AddInterTokens(&b) // empty: nothing
	refReg := prometheus.NewRegistry()
	refReg.MustRegister(ref)
	got := itlLines(t, m.Handler())
	want := itlLines(t, promhttp.HandlerFor(refReg, promhttp.HandlerOpts{}))
	if got != want {
		t.Errorf("batched histogram:\n%s\nprometheus histogram:\n%s", got, want)
	}
	if !strings.Contains(got, `vllm:inter_token_latency_seconds_count{model_name="m"} 8`) {
		t.Errorf("count is not 8:\n%s", got)
	}
}

// itlLines are the inter-token latency histogram's lines of a scrape of h.
func itlLines(t *testing.T, h http.Handler) string {
	t.Helper()
	return histLines(t, h, "vllm:inter_token_latency_seconds")
}

// histLines are the lines of metric name in a scrape of h.
func histLines(t *testing.T, h http.Handler, name string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.Contains(l, name+"_") || strings.Contains(l, name+" ") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("no %s in the scrape:\n%s", name, body)
	}
	return strings.Join(lines, "\n")
}

// The other latency histograms scrape exactly as Prometheus histograms
// fed the same values.
func TestLatencyHistogramsMatchPrometheus(t *testing.T) {
	m := New("m", fixed(engine.NodeStats{}))
	refReg := prometheus.NewRegistry()
	ref := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets,
			ConstLabels: prometheus.Labels{"model_name": "m"}})
		refReg.MustRegister(h)
		return h
	}
	ttft := ref("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFTBuckets)
	e2e := ref("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", RequestLatencyBuckets)
	queue := ref("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", RequestLatencyBuckets)
	for _, d := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 300 * time.Millisecond, 300*time.Millisecond + 1,
		2 * time.Second, time.Hour, 5 * time.Hour} {
		m.ObserveFirstToken(d)
		ttft.Observe(d.Seconds())
		m.ObserveFinished(2*d, d/2)
		e2e.Observe((2 * d).Seconds())
		queue.Observe((d / 2).Seconds())
	}
	m.ObserveFinished(time.Second, -1) // never scheduled: no queue sample
	e2e.Observe(1)
	for _, name := range []string{"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds"} {
		got := histLines(t, m.Handler(), name)
		want := histLines(t, promhttp.HandlerFor(refReg, promhttp.HandlerOpts{}), name)
		if got != want {
			t.Errorf("%s:\n%s\nprometheus histogram:\n%s", name, got, want)
		}
	}
}
