package interop

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend"
	backendmetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend/metrics"
)

// The metric names the endpoint picker reads as llm-d deploys it
// (--total-queued-requests-metric, --kv-cache-usage-percentage-metric,
// --lora-info-metric, --cache-info-metric). They are the Default*Metric
// constants of gateway-api-inference-extension's pkg/epp/server (not
// imported for them alone: it brings the whole EPP server) except the KV
// cache usage: v1.2.0's default is still vLLM's old
// vllm:gpu_cache_usage_perc, which vLLM no longer exports (renamed
// vllm:kv_cache_usage_perc, as kvlease exports it); llm-d's deployment
// passes the new name (llm-d/llm-d#509) and the extension's later
// releases default to it (gateway-api-inference-extension#1905).
const (
	eppQueuedMetric    = "vllm:num_requests_waiting"
	eppKVUsageMetric   = "vllm:kv_cache_usage_perc"
	eppLoraInfoMetric  = "vllm:lora_requests_info"
	eppCacheInfoMetric = "vllm:cache_config_info"
)

// TestEPPScrapesMetrics scrapes `kvlease serve`'s /metrics with the
// endpoint picker's own client (gateway-api-inference-extension's
// PodMetricsClientImpl, the version llm-d-inference-scheduler v0.4.0
// builds on) and its default metric mapping: every metric the EPP reads is
// found and parsed (FetchMetrics errs on a missing or malformed one), and
// the values are the engine's: the queue, the KV cache usage and the cache
// geometry. The engine serves LoRA (vllm:lora_requests_info, like vLLM's,
// exists only then); the EPP reads its max_lora only from a series naming
// a running or waiting adapter, which an idle engine has none of.
func TestEPPScrapesMetrics(t *testing.T) {
	e := serve(t, "--profile", "zero", "--model", "m", "--transfer-port", "0", "--num-blocks", "96",
		"--block-size", "32", "--enable-lora", "--max-loras", "3")
	completeTokens(t, e.URL, conversationPrompts(1)[0])

	mapping, err := backendmetrics.NewMetricMapping(eppQueuedMetric, eppKVUsageMetric, eppLoraInfoMetric, eppCacheInfoMetric)
	if err != nil {
		t.Fatal(err)
	}
	client := &backendmetrics.PodMetricsClientImpl{MetricMapping: mapping, ModelServerMetricsPath: "/metrics",
		ModelServerMetricsScheme: "http", Client: http.DefaultClient}
	host := strings.TrimPrefix(e.URL, "http://")
	pod := &backend.Pod{NamespacedName: types.NamespacedName{Namespace: "default", Name: "kvlease-0"}, Address: "127.0.0.1",
		MetricsHost: host}
	got, err := client.FetchMetrics(context.Background(), pod, backendmetrics.NewMetricsState())
	if err != nil {
		t.Fatalf("the EPP's scrape of kvlease's /metrics: %v", err)
	}
	if got.WaitingQueueSize != 0 || got.CacheBlockSize != 32 || got.CacheNumGPUBlocks != 96 {
		t.Errorf("the EPP read waiting %d, block size %d, GPU blocks %d; want 0, 32, 96",
			got.WaitingQueueSize, got.CacheBlockSize, got.CacheNumGPUBlocks)
	}
	if got.KVCacheUsagePercent < 0 || got.KVCacheUsagePercent > 1 || len(got.ActiveModels) != 0 {
		t.Errorf("the EPP read KV cache usage %v, active models %v", got.KVCacheUsagePercent, got.ActiveModels)
	}
	t.Logf("the EPP's scrape of kvlease: %s", got)
}
