package metrics

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
