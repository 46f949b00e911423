package metrics

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/sched"
)

// Source supplies the snapshot a scrape reads. node.Node implements it.
type Source interface {
	Stats() engine.NodeStats
}

// SourceFunc adapts a function to Source.
type SourceFunc func() engine.NodeStats

// Stats calls f.
func (f SourceFunc) Stats() engine.NodeStats { return f() }

// emitFunc reports one sample of a snapshot metric with the values of its
// variable labels, in the order of the row's labels.
type emitFunc func(value float64, labelValues ...string)

// snapshotMetric is one metric read from a snapshot at scrape time.
type snapshotMetric struct {
	name   string
	help   string
	kind   prometheus.ValueType
	labels []string // variable labels; model_name is added to every row
	read   func(s *engine.NodeStats, emit emitFunc)
}

// finishReasons are vLLM's finished_reason label values, always exported
// (with zeros) so the series exist from the first scrape.
var finishReasons = []sched.Status{sched.FinishedStopped, sched.FinishedLength, sched.FinishedAborted, sched.FinishedError}

// Value types, short.
const (
	gauge   = prometheus.GaugeValue
	counter = prometheus.CounterValue
)

// snapshotMetrics are the gauges and counters read from a snapshot: the
// engine's (below), the transfer's (transferMetrics) and the offload
// tiers' (offloadMetrics). These tables are the one place to add more:
// extend the snapshot, add a row.
var snapshotMetrics = slices.Concat(engineMetrics, transferMetrics, offloadMetrics)

// engineMetrics are vLLM's names and kvlease's block states.
var engineMetrics = []snapshotMetric{
	{
		name: "vllm:num_requests_running", kind: gauge,
		help: "Number of requests in model execution batches.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(s.Running)) },
	},
	{
		name: "vllm:num_requests_waiting", kind: gauge,
		help: "Number of requests waiting to be processed.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(s.Waiting)) },
	},
	{
		name: "vllm:kv_cache_usage_perc", kind: gauge,
		help: "KV-cache usage. 1 means 100 percent usage.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(s.Pool.Usage) },
	},
	{
		name: "vllm:cache_config_info", kind: gauge,
		help:   "Information of the LLMEngine CacheConfig.",
		labels: []string{"block_size", "num_gpu_blocks"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emit(1, strconv.Itoa(s.Pool.BlockSizeTokens), strconv.Itoa(s.Pool.Capacity))
		},
	},
	{
		name: "vllm:prefix_cache_queries_total", kind: counter,
		help: "Prefix cache queries, in terms of number of queried tokens.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(s.Sched.PrefixQueryTokens)) },
	},
	{
		name: "vllm:prefix_cache_hits_total", kind: counter,
		help: "Prefix cache hits, in terms of number of cached tokens.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(s.Sched.PrefixHitTokens)) },
	},
	{
		name: "vllm:prompt_tokens_total", kind: counter,
		help: "Number of prefill tokens processed.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(s.Sched.PromptTokens)) },
	},
	{
		name: "vllm:prompt_tokens_by_source_total", kind: counter,
		help:   "Number of prompt tokens by source: computed here (local_compute), found in the prefix cache (local_cache_hit) or pulled from a prefill engine (external_kv_transfer).",
		labels: []string{"source"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emit(float64(s.Sched.PromptComputedTokens), "local_compute")
			emit(float64(s.Sched.PrefixHitTokens), "local_cache_hit")
			emit(float64(s.PulledPromptTokens), "external_kv_transfer")
		},
	},
	{
		name: "vllm:generation_tokens_total", kind: counter,
		help: "Number of generation tokens processed.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(s.Sched.GeneratedTokens)) },
	},
	{
		name: "vllm:request_success_total", kind: counter,
		help:   "Count of successfully processed requests.",
		labels: []string{"finished_reason"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			for _, st := range finishReasons {
				emit(float64(s.Finished[st]), st.FinishReason())
			}
		},
	},
	{
		name: "vllm:num_preemptions_total", kind: counter,
		help: "Cumulative number of preemption from the engine.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(s.Sched.Preemptions)) },
	},
	{
		name: "kvlease_kv_blocks", kind: gauge,
		help:   "KV blocks of the primary pool by state: free (no hold, no cached prefix), evictable (cached prefix, no hold), held (at least one hold).",
		labels: []string{"state"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emit(float64(s.Pool.Free), "free")
			emit(float64(s.Pool.Evictable), "evictable")
			emit(float64(s.Pool.Held), "held")
		},
	},
}

// snapshotCollector exports snapshotMetrics from one Source snapshot per
// scrape.
type snapshotCollector struct {
	src   Source
	descs []*prometheus.Desc // parallel to snapshotMetrics
}

func newSnapshotCollector(modelName string, src Source) *snapshotCollector {
	c := &snapshotCollector{src: src}
	for _, m := range snapshotMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, m.labels,
			prometheus.Labels{"model_name": modelName}))
	}
	return c
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	for i := range snapshotMetrics {
		m, d := &snapshotMetrics[i], c.descs[i]
		m.read(&s, func(v float64, lv ...string) {
			ch <- prometheus.MustNewConstMetric(d, m.kind, v, lv...)
		})
	}
}

// loraCollector exports vLLM's vllm:lora_requests_info gauge, which
// llm-d's endpoint picker and the Gateway API Inference Extension read for
// LoRA affinity: labels running_lora_adapters and waiting_lora_adapters
// (the adapters' names, comma-separated) and max_lora (--max-loras); the
// value is the current time in seconds since the epoch, by which a reader
// picks the newest series. vLLM's gauge has no model_name label, nor has
// this one. kvlease exports one series, the current one (vLLM's
// prometheus_client keeps every label set it ever set, at its last time).
type loraCollector struct {
	src      Source
	maxLoRAs string
	now      func() time.Time
	desc     *prometheus.Desc
}

// RegisterLoRA adds vllm:lora_requests_info to m, read from src at scrape
// time; maxLoRAs is its max_lora label. Call it once, on an engine that
// serves LoRA adapters (vLLM exports the gauge only with --enable-lora).
func (m *Metrics) RegisterLoRA(src Source, maxLoRAs int) {
	m.reg.MustRegister(newLoRACollector(src, maxLoRAs, time.Now))
}

func newLoRACollector(src Source, maxLoRAs int, now func() time.Time) *loraCollector {
	return &loraCollector{src: src, maxLoRAs: strconv.Itoa(maxLoRAs), now: now,
		desc: prometheus.NewDesc("vllm:lora_requests_info", "Running stats on lora requests.",
			[]string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, nil)}
}

func (c *loraCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *loraCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	t := float64(c.now().UnixNano()) / 1e9
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, t, c.maxLoRAs,
		strings.Join(s.RunningAdapters, ","), strings.Join(s.WaitingAdapters, ","))
}
