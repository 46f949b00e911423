package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlease/kvlease/transport/tcp"
)

// TransportSource supplies the transfer transport's counters at scrape
// time. *tcp.Transport implements it.
type TransportSource interface {
	Stats() tcp.Stats
}

// transportMetric is one metric read from the transport's Stats.
type transportMetric struct {
	name   string
	help   string
	kind   prometheus.ValueType
	labels []string
	read   func(s *tcp.Stats, emit emitFunc)
}

// transportMetrics are the transfer port's bounds (docs/security.md, "The transfer port").
var transportMetrics = []transportMetric{
	{
		name: "kvlease_transfer_connections", kind: gauge,
		help:   "Transfer connections: authenticated (past the cluster-secret handshake, either side) and unauthenticated (accepted, handshake not done; bounded, the oldest dropped first).",
		labels: []string{"state"},
		read: func(s *tcp.Stats, emit emitFunc) {
			emit(float64(s.Authenticated), "authenticated")
			emit(float64(s.Unauthenticated), "unauthenticated")
		},
	},
	{
		name: "kvlease_transfer_connections_dropped_total", kind: counter,
		help: "Transfer connections this engine closed to bound what a peer can make it hold, by reason: frame_too_large, bad_frame, slow_frame, idle_timeout, " +
			"handshake_timeout, too_many_unauthenticated, too_many_from_source, too_many_connections.",
		labels: []string{"reason"},
		read: func(s *tcp.Stats, emit emitFunc) {
			for _, k := range tcp.DropKinds {
				emit(float64(s.Dropped[k]), k)
			}
		},
	},
	{
		name: "kvlease_transfer_handshake_failures_total", kind: counter,
		help: "Transfer connections that ended before authenticating, by side (accepted: this engine serves leases; dialed: it pulls) and reason: " +
			"timeout, protocol (another protocol on that port), slow, closed, refused (a wrong cluster secret or protocol version), evicted.",
		labels: []string{"side", "reason"},
		read: func(s *tcp.Stats, emit emitFunc) {
			for _, side := range []string{"accepted", "dialed"} {
				for _, r := range tcp.HandshakeFailureReasons {
					emit(float64(s.HandshakeFailures[tcp.HandshakeFailure{Side: side, Reason: r}]), side, r)
				}
			}
		},
	},
	{
		name: "kvlease_transfer_receive_buffer_bytes", kind: gauge,
		help: "Bytes of transfer frames being received now, over all connections (from a frame's length prefix until it is handed to the engine).",
		read: func(s *tcp.Stats, emit emitFunc) { emit(float64(s.ReceiveBytes)) },
	},
	{
		name: "kvlease_transfer_receive_buffer_limit_bytes", kind: gauge,
		help: "The bound on kvlease_transfer_receive_buffer_bytes; a frame beyond it waits.",
		read: func(s *tcp.Stats, emit emitFunc) { emit(float64(s.ReceiveLimit)) },
	},
	{
		name: "kvlease_transfer_receive_waits_total", kind: counter,
		help: "Transfer frames that waited for room under kvlease_transfer_receive_buffer_limit_bytes.",
		read: func(s *tcp.Stats, emit emitFunc) { emit(float64(s.ReceiveWaits)) },
	},
}

type transportCollector struct {
	src   TransportSource
	descs []*prometheus.Desc // parallel to transportMetrics
}

// AddTransport exports the transfer transport's bounds and counters
// (kvlease_transfer_connections, ..._dropped_total,
// ..._handshake_failures_total, ..._receive_buffer_*), read from src at
// scrape time. Call it once, before serving.
func (m *Metrics) AddTransport(src TransportSource) {
	c := &transportCollector{src: src}
	for _, tm := range transportMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(tm.name, tm.help, tm.labels,
			prometheus.Labels{"model_name": m.model}))
	}
	m.reg.MustRegister(c)
}

func (c *transportCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *transportCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	for i := range transportMetrics {
		tm, d := &transportMetrics[i], c.descs[i]
		tm.read(&s, func(v float64, lv ...string) {
			ch <- prometheus.MustNewConstMetric(d, tm.kind, v, lv...)
		})
	}
}
