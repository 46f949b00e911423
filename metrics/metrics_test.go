package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/xfer"
)

func fixed(s engine.NodeStats) Source { return SourceFunc(func() engine.NodeStats { return s }) }

func TestScrapeExportsVLLMNames(t *testing.T) {
	src := fixed(engine.NodeStats{
		Stats: engine.Stats{
			Running: 3, Waiting: 2,
			Sched: sched.Stats{PrefixQueryTokens: 100, PrefixHitTokens: 40, PromptTokens: 90,
				PromptComputedTokens: 35, GeneratedTokens: 70, Preemptions: 5},
			PulledPromptTokens: 15,
			Finished:           map[sched.Status]uint64{sched.FinishedStopped: 7, sched.FinishedAborted: 1},
		},
		Pool: engine.PoolStats{Capacity: 100, BlockSizeTokens: 16, Free: 60, Evictable: 15, Held: 25, Usage: 0.25},
	})
	m := New("kvlease-tiny", src)
	m.ObserveFirstToken(30 * time.Millisecond)
	m.ObserveInterToken(5 * time.Millisecond)
	m.ObserveFinished(time.Second, 2*time.Millisecond)
	m.ObserveFinished(time.Second, -1) // never scheduled: no queue sample

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`vllm:num_requests_running{model_name="kvlease-tiny"} 3`,
		`vllm:num_requests_waiting{model_name="kvlease-tiny"} 2`,
		`vllm:kv_cache_usage_perc{model_name="kvlease-tiny"} 0.25`,
		`vllm:cache_config_info{block_size="16",model_name="kvlease-tiny",num_gpu_blocks="100"} 1`,
		`vllm:prefix_cache_queries_total{model_name="kvlease-tiny"} 100`,
		`vllm:prefix_cache_hits_total{model_name="kvlease-tiny"} 40`,
		`vllm:prompt_tokens_total{model_name="kvlease-tiny"} 90`,
		`vllm:generation_tokens_total{model_name="kvlease-tiny"} 70`,
		`vllm:prompt_tokens_by_source_total{model_name="kvlease-tiny",source="local_compute"} 35`,
		`vllm:prompt_tokens_by_source_total{model_name="kvlease-tiny",source="local_cache_hit"} 40`,
		`vllm:prompt_tokens_by_source_total{model_name="kvlease-tiny",source="external_kv_transfer"} 15`,
		`vllm:request_success_total{finished_reason="stop",model_name="kvlease-tiny"} 7`,
		`vllm:request_success_total{finished_reason="length",model_name="kvlease-tiny"} 0`,
		`vllm:request_success_total{finished_reason="abort",model_name="kvlease-tiny"} 1`,
		`vllm:num_preemptions_total{model_name="kvlease-tiny"} 5`,
		`kvlease_kv_blocks{model_name="kvlease-tiny",state="free"} 60`,
		`kvlease_kv_blocks{model_name="kvlease-tiny",state="evictable"} 15`,
		`kvlease_kv_blocks{model_name="kvlease-tiny",state="held"} 25`,
		`vllm:time_to_first_token_seconds_bucket{model_name="kvlease-tiny",le="0.04"} 1`,
		`vllm:time_to_first_token_seconds_bucket{model_name="kvlease-tiny",le="0.02"} 0`,
		`vllm:inter_token_latency_seconds_count{model_name="kvlease-tiny"} 1`,
		`vllm:e2e_request_latency_seconds_count{model_name="kvlease-tiny"} 2`,
		`vllm:request_queue_time_seconds_count{model_name="kvlease-tiny"} 1`,
		`# TYPE vllm:prompt_tokens_total counter`,
		`# TYPE vllm:num_requests_running gauge`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

func TestRegistryIsConsistent(t *testing.T) {
	m := New("m", fixed(engine.NodeStats{}))
	if _, err := testutil.GatherAndCount(m.Registry()); err != nil {
		t.Fatalf("gather: %v", err)
	}
}

func TestScrapeExportsOffloadTiers(t *testing.T) {
	st := engine.NodeStats{Offload: &offload.Stats{Policy: "spillover", Tiers: []offload.TierStats{
		{Medium: offload.MediumCPU, StoredBlocks: 10, LoadedBlocks: 4, EvictedBlocks: 2, HitBlocks: 5, RefusedBlocks: 3, StoreFailures: [4]uint64{6, 1, 0, 2}},
		{Medium: offload.MediumDisk, StoredBlocks: 9, LoadedBlocks: 1, EvictedBlocks: 0, HitBlocks: 1},
	}}}
	text := scrape(t, New("m", fixed(st)))
	for _, want := range []string{
		`kvlease_offload_stored_blocks_total{medium="CPU",model_name="m",policy="spillover"} 10`,
		`kvlease_offload_stored_blocks_total{medium="DISK",model_name="m",policy="spillover"} 9`,
		`kvlease_offload_loaded_blocks_total{medium="CPU",model_name="m",policy="spillover"} 4`,
		`kvlease_offload_evicted_blocks_total{medium="CPU",model_name="m",policy="spillover"} 2`,
		`kvlease_offload_evicted_blocks_total{medium="DISK",model_name="m",policy="spillover"} 0`,
		`kvlease_offload_hits_total{medium="CPU",model_name="m",policy="spillover"} 5`,
		`kvlease_offload_refused_blocks_total{medium="CPU",model_name="m",policy="spillover"} 3`,
		`kvlease_offload_store_failed_blocks_total{medium="CPU",model_name="m",outcome="retried",policy="spillover"} 6`,
		`kvlease_offload_store_failed_blocks_total{medium="CPU",model_name="m",outcome="refused",policy="spillover"} 2`,
		`kvlease_offload_hits_total{medium="DISK",model_name="m",policy="spillover"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	// Without offload: no series at all.
	if text := scrape(t, New("m", fixed(engine.NodeStats{}))); strings.Contains(text, "kvlease_offload_stored_blocks_total{") {
		t.Errorf("an engine without offload exports offload series")
	}
}

// TestScrapeExportsLeaseSpill: a prefill engine with offload exports its
// lease spill counters; a decode engine (no producer) does not.
func TestScrapeExportsLeaseSpill(t *testing.T) {
	st := &offload.Stats{Policy: "preemption-only", LeaseSpill: "pressure", LeasePinnedBlocks: 7,
		LeaseRestoreHitBlocks: 3, LeaseRestoreLoadedBlocks: 11, LeaseRestoreFailures: 1}
	text := scrape(t, New("m", fixed(engine.NodeStats{Offload: st, Producer: &xfer.ProducerStats{SpilledBlocks: 20}})))
	for _, want := range []string{
		`kvlease_lease_spilled_blocks_total{model_name="m",policy="pressure"} 20`,
		`kvlease_lease_spilled_blocks{model_name="m",policy="pressure"} 7`,
		`kvlease_lease_restored_blocks_total{model_name="m",policy="pressure",source="pool"} 3`,
		`kvlease_lease_restored_blocks_total{model_name="m",policy="pressure",source="tier"} 11`,
		`kvlease_lease_restore_failures_total{model_name="m",policy="pressure"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if text := scrape(t, New("m", fixed(engine.NodeStats{Offload: st}))); strings.Contains(text, "kvlease_lease_spilled_blocks_total{") {
		t.Errorf("an engine without a producer exports lease spill series")
	}
}

// TestLoRARequestsInfo: vllm:lora_requests_info as vLLM writes it and
// llm-d's endpoint picker reads it: the adapters' names comma-separated,
// max_lora, no model_name label, the time as its value.
func TestLoRARequestsInfo(t *testing.T) {
	stats := engine.NodeStats{Stats: engine.Stats{RunningAdapters: []string{"chat", "sql"}, WaitingAdapters: []string{"sql"}}}
	at := time.Unix(1789828498, 500_000_000)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLoRACollector(fixed(stats), 2, func() time.Time { return at }))
	want := `# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="chat,sql",waiting_lora_adapters="sql"} 1.7898284985e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	reg = prometheus.NewRegistry()
	reg.MustRegister(newLoRACollector(fixed(engine.NodeStats{}), 1, func() time.Time { return at }))
	want = strings.Replace(strings.Replace(want, `"chat,sql"`, `""`, 1), `waiting_lora_adapters="sql"`, `waiting_lora_adapters=""`, 1)
	want = strings.Replace(want, `max_lora="2"`, `max_lora="1"`, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
