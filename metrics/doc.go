// Package metrics is the Prometheus face of an engine (EDGE): vLLM's metric
// names, so dashboards, autoscalers and the Gateway API Inference Extension
// work against kvlease unchanged, plus kvlease's own kvlease_* metrics.
//
// Two kinds of metrics live here:
//
//   - Gauges and counters that the engine already keeps (running and
//     waiting requests, cache usage, token and request counters, block
//     states) are read at scrape time from one engine.NodeStats snapshot by
//     a custom Collector. Nothing is updated on the hot path, and the
//     scrape's figures are mutually consistent because they come from one
//     snapshot. To add such a metric (leases, transfers, offload), add one
//     row to snapshotMetrics in collector.go.
//   - Latency histograms (TTFT, inter-token latency, end-to-end latency,
//     queue time) are observed by the HTTP layer as requests progress,
//     through Metrics.ObserveRequest and Metrics.ObserveInterToken, with
//     vLLM's bucket boundaries (vllm/v1/metrics/loggers.py).
//
// Every vllm:* series carries the label model_name, as vLLM's do.
package metrics
