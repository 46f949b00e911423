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
//     snapshot. The P/D transfer counters (kvlease_leases_*,
//     kvlease_transfer_*, kvlease_remote_prefill_*) come from the same
//     snapshot (NodeStats.Producer and Consumer) and read as zeros on an
//     engine without that side, so every series exists whatever the
//     engine's role. The offload counters
//     (kvlease_offload_{stored,loaded,evicted}_blocks_total and
//     kvlease_offload_hits_total) come from NodeStats.Offload, one series
//     per configured tier with label medium "CPU" or "DISK" (the medium
//     names of vLLM's KV events and of kvblock's); an engine without
//     offload has none. To add such a metric, add one row to
//     engineMetrics (collector.go), transferMetrics (transfer.go) or
//     offloadMetrics (offload.go).
//   - Latency histograms (TTFT, inter-token latency, end-to-end latency,
//     queue time) are observed by the HTTP layer as requests progress,
//     through Metrics.ObserveFirstToken, ObserveInterToken (or a
//     request's gaps at once: InterTokens and AddInterTokens) and
//     ObserveFinished, with vLLM's bucket boundaries
//     (vllm/v1/metrics/loggers.py); kvlease_transfer_seconds is observed by
//     whoever sees a decode engine's finished pulls (ObserveTransfer;
//     kvlease serve feeds it from node.Config.OnTransfer).
//
// Every vllm:* series carries the label model_name, as vLLM's do.
package metrics
