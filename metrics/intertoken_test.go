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
	if len(InterTokenBuckets) != numInterTokenBuckets {
		t.Fatalf("numInterTokenBuckets %d, InterTokenBuckets has %d", numInterTokenBuckets, len(InterTokenBuckets))
	}
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
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.Contains(l, "vllm:inter_token_latency_seconds") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("no inter-token latency in the scrape:\n%s", body)
	}
	return strings.Join(lines, "\n")
}
