package proxy

import (
	"bytes"
	"math"

	"github.com/kvlease/kvlease/internal/promtext"
)

// engineLoad is what a scrape of an engine's /metrics tells the router.
type engineLoad struct {
	waiting float64 // vllm:num_requests_waiting, summed over label sets
	kvUsage float64 // vllm:kv_cache_usage_perc, the largest over label sets
}

const (
	metricWaiting = "vllm:num_requests_waiting"
	metricKVUsage = "vllm:kv_cache_usage_perc"
)

var loadMetrics = []string{metricWaiting, metricKVUsage}

// parseLoad reads the Prometheus text exposition format for the two
// metrics the least-loaded policy uses (promtext: expfmt, line by line,
// skipping lines it cannot read); ok is false when neither metric was
// found.
func parseLoad(text []byte) (l engineLoad, ok bool) {
	promtext.Each(bytes.NewReader(text), loadMetrics, func(name string, _ map[string]string, v float64) {
		switch name {
		case metricWaiting:
			l.waiting += v
		case metricKVUsage:
			l.kvUsage = math.Max(l.kvUsage, v)
		}
		ok = true
	})
	return l, ok
}
