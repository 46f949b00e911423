package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/bench/stats"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="tiny"} 0.25
kvlease_kv_blocks{state="free"} 100
kvlease_kv_blocks{state="held",engine="p0"} 7 1712345678000
kvlease_kv_blocks{engine="p1", state="held"} 3
kvlease_kv_blocks{state="held\"x"} 1000
kvlease_leases_active 4
kvlease_leases_active_total 99
kvlease_leases_active{broken="x 5
garbage
vllm:kv_cache_usage_perc NaN
`
	got, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{MetricKVUsage: 0.75, MetricHeldBlocks: 10, MetricLeasesActive: 4}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestMetricsURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:1":          "http://h:1/metrics",
		"http://h:1/":         "http://h:1/metrics",
		"http://h:1/m":        "http://h:1/m",
		"http://h:1/metrics/": "http://h:1/metrics/",
	} {
		if got := metricsURL(in); got != want {
			t.Errorf("metricsURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEngineRates(t *testing.T) {
	pts := func(ys ...float64) []stats.Point {
		var out []stats.Point
		for i, y := range ys {
			out = append(out, stats.Point{X: float64(i) - 0.5, Y: y})
		}
		return out
	}
	series := []MetricSeries{
		{URL: "p", Metric: MetricPromptComputed, Points: pts(100, 300, 612)},
		{URL: "p", Metric: MetricGenerated, Points: pts(7, 7, 8)},
		{URL: "p", Metric: MetricKVUsage, Points: pts(0.5, 0.9, 0)},
		// d restarted between the second and third look: 40 before, 25 after.
		{URL: "d", Metric: MetricGenerated, Points: pts(10, 50, 25)},
		{URL: "other", Metric: MetricHeldBlocks, Points: pts(1, 2)},
	}
	got := EngineRates(series, 4)
	want := []EngineRate{
		{URL: "p", Seconds: 4, PromptTokens: 512, GenerationTokens: 1, PromptTokensPerSecond: 128, GenerationTokensPerSecond: 0.25},
		{URL: "d", Seconds: 4, GenerationTokens: 65, GenerationTokensPerSecond: 16.25},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("EngineRates = %+v, want %+v", got, want)
	}
}
