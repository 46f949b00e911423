package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlease/kvlease/clock"
)

// Outcomes of a proxied request, the values of the outcome label of
// kvlease_proxy_requests_total.
const (
	OutcomeOK                 = "ok"
	OutcomeClientCancelled    = "client_cancelled"
	OutcomeBadRequest         = "bad_request"
	OutcomeOverloaded         = "overloaded"
	OutcomePrefillError       = "prefill_error"
	OutcomePrefillUnreachable = "prefill_unreachable"
	OutcomePrefillTimeout     = "prefill_timeout"
	OutcomeDecodeError        = "decode_error"
	OutcomeDecodeUnavailable  = "decode_unavailable"
	OutcomeDecodeFailed       = "decode_failed"
	OutcomeDecodeTimeout      = "decode_timeout"
	// OutcomeLoopDetected: the request came back to the proxy that sent
	// it (Via), or an engine leg was answered so (via.go).
	OutcomeLoopDetected = "loop_detected"
)

var outcomes = []string{OutcomeOK, OutcomeClientCancelled, OutcomeBadRequest, OutcomeOverloaded,
	OutcomePrefillError, OutcomePrefillUnreachable, OutcomePrefillTimeout, OutcomeDecodeError,
	OutcomeDecodeUnavailable, OutcomeDecodeFailed, OutcomeDecodeTimeout, OutcomeLoopDetected}

// Legs are the values of the leg label of kvlease_proxy_leg_duration_seconds.
const (
	legPrefill          = "prefill"            // request sent to P until its answer is read
	legDecodeFirstEvent = "decode_first_event" // request sent to D until its first byte of answer
	legDecode           = "decode"             // request sent to D until its answer ended
	legTotal            = "total"              // client's request received until answered
)

// latencyBuckets span a zero-latency loopback leg (tens of µs) to a long
// generation (minutes).
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

type proxyMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec   // outcome
	legs     *prometheus.HistogramVec // leg
	retries  *prometheus.CounterVec   // leg
	aborts   *prometheus.CounterVec   // role, result
	inflight prometheus.Gauge

	// The children the request path uses, bound once: WithLabelValues
	// hashes the labels and takes the vector's lock on every call.
	outcome                                           map[string]prometheus.Counter
	legPrefill, legDecodeFirstEvent, legDecode, total prometheus.Observer
	retryPrefill, retryDecode                         prometheus.Counter
}

func newProxyMetrics(engines []*engine, now func() clock.Instant) *proxyMetrics {
	m := &proxyMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlease_proxy_requests_total",
			Help: "Generation requests answered by the proxy, by outcome.",
		}, []string{"outcome"}),
		legs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kvlease_proxy_leg_duration_seconds",
			Help:    "Latency of each leg of a proxied request: prefill, decode_first_event, decode, total.",
			Buckets: latencyBuckets,
		}, []string{"leg"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlease_proxy_retries_total",
			Help: "Legs sent again to another engine after the first one could not take them.",
		}, []string{"leg"}),
		aborts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlease_proxy_aborts_total",
			Help: "Abort calls sent to engines, by role and result (ok, failed).",
		}, []string{"role", "result"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvlease_proxy_requests_in_flight",
			Help: "Generation requests being proxied now.",
		}),
	}
	m.outcome = make(map[string]prometheus.Counter, len(outcomes))
	for _, o := range outcomes {
		m.outcome[o] = m.requests.WithLabelValues(o)
	}
	m.legPrefill = m.legs.WithLabelValues(legPrefill)
	m.legDecodeFirstEvent = m.legs.WithLabelValues(legDecodeFirstEvent)
	m.legDecode = m.legs.WithLabelValues(legDecode)
	m.total = m.legs.WithLabelValues(legTotal)
	m.retryPrefill = m.retries.WithLabelValues(legPrefill)
	m.retryDecode = m.retries.WithLabelValues(legDecode)
	engineInflight := prometheus.NewDesc("kvlease_proxy_engine_in_flight",
		"Legs outstanding at each engine.", []string{"role", "engine"}, nil)
	engineUp := prometheus.NewDesc("kvlease_proxy_engine_up",
		"1 unless the engine failed to answer recently (a leg or a scrape).", []string{"role", "engine"}, nil)
	m.reg.MustRegister(m.requests, m.legs, m.retries, m.aborts, m.inflight,
		collectorFunc{descs: []*prometheus.Desc{engineInflight, engineUp}, collect: func(ch chan<- prometheus.Metric) {
			for _, e := range engines {
				ch <- prometheus.MustNewConstMetric(engineInflight, prometheus.GaugeValue, float64(e.inflight.Load()), e.role, e.hostPort)
				up := 1.0
				if e.isDown(now()) {
					up = 0
				}
				ch <- prometheus.MustNewConstMetric(engineUp, prometheus.GaugeValue, up, e.role, e.hostPort)
			}
		}})
	return m
}

// countOutcome counts a request's outcome.
func (m *proxyMetrics) countOutcome(o string) {
	if c, ok := m.outcome[o]; ok {
		c.Inc()
		return
	}
	m.requests.WithLabelValues(o).Inc()
}

// collectorFunc is a prometheus.Collector from a list of descriptions and
// a function.
type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
