package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// interTokenBounds is InterTokenBuckets as an array, so that InterTokens
// can size its counts by it.
var interTokenBounds = [...]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
	0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}

// Bucket boundaries in seconds, as vLLM's (vllm/v1/metrics/loggers.py).
var (
	TTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	InterTokenBuckets     = interTokenBounds[:]
	RequestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
		20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	// TransferBuckets span a few small blocks on loopback (sub-millisecond)
	// to a long prompt of 8B-class KV over a slow link.
	TransferBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
		0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0}
)

// Metrics is an engine's registry: the snapshot collector over a Source,
// the latency histograms, and the Go runtime and process collectors. The
// Observe methods are safe for concurrent use.
type Metrics struct {
	reg   *prometheus.Registry
	model string

	// The per-request latencies: histograms over atomic bucket counts
	// (intertoken.go), one atomic add and a sum update an observation;
	// inter-token gaps also come in batches (InterTokens).
	ttft, itl, e2e, queue *batchHistogram
	transfer              prometheus.Histogram
}

// New returns the metrics of the engine serving modelName, reading gauges
// and counters from src at scrape time.
func New(modelName string, src Source) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), model: modelName}
	labels := prometheus.Labels{"model_name": modelName}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: name, Help: help, Buckets: buckets, ConstLabels: labels,
		})
	}
	m.ttft = newBatchHistogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFTBuckets, labels)
	m.itl = newBatchHistogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", InterTokenBuckets, labels)
	m.e2e = newBatchHistogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", RequestLatencyBuckets, labels)
	m.queue = newBatchHistogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", RequestLatencyBuckets, labels)
	m.transfer = hist("kvlease_transfer_seconds",
		"Histogram of the time a decode engine took to pull a remote prefix (all reads of one request), in seconds.",
		TransferBuckets)
	m.reg.MustRegister(
		newSnapshotCollector(modelName, src),
		m.ttft, m.itl, m.e2e, m.queue, m.transfer,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry is the registry, for adding collectors of other modules.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveFirstToken records a request's time to first token.
func (m *Metrics) ObserveFirstToken(ttft time.Duration) { m.ttft.observe(ttft.Seconds()) }

// ObserveInterToken records the time between two consecutive tokens of a
// request.
func (m *Metrics) ObserveInterToken(d time.Duration) { m.itl.observe(d.Seconds()) }

// ObserveFinished records a finished request's end-to-end latency and the
// time it waited before it was first scheduled (queued is negative when it
// never was, and is then not recorded).
func (m *Metrics) ObserveFinished(e2e, queued time.Duration) {
	m.e2e.observe(e2e.Seconds())
	if queued >= 0 {
		m.queue.observe(queued.Seconds())
	}
}

// ObserveTransfer records the duration of one completed remote-prefix pull
// (xfer.Done.Duration of a pulled request).
func (m *Metrics) ObserveTransfer(d time.Duration) { m.transfer.Observe(d.Seconds()) }
