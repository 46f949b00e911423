package promtext

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

type sample struct {
	name   string
	labels string
	v      float64
}

func collect(t *testing.T, text string, names ...string) []sample {
	t.Helper()
	var out []sample
	err := Each(strings.NewReader(text), names, func(name string, labels map[string]string, v float64) {
		out = append(out, sample{name, fmt.Sprint(labels), v})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEach(t *testing.T) {
	text := `# HELP a An a.
# TYPE a gauge
a{l="x {odd} \"q\" \\ \n"} 3
a{l="y"} 2 1700000000
a 1.5e0
a{l="broken" 9
a NaN
a{l="dup",l="dup"} 4
a 7 trailing-junk
b 99
garbage
`
	got := collect(t, text, "a")
	want := []sample{
		{"a", fmt.Sprint(map[string]string{"l": "x {odd} \"q\" \\ \n"}), 3},
		{"a", fmt.Sprint(map[string]string{"l": "y"}), 2},
		{"a", fmt.Sprint(map[string]string(nil)), 1.5},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// A sample followed by something that is not a timestamp is malformed;
// the hand-written parsers this package replaced read its first field as
// the value, a number the engine never wrote as such.
func TestEachSkipsTrailingJunk(t *testing.T) {
	if got := collect(t, "vllm:num_requests_waiting 7 x\n", "vllm:num_requests_waiting"); len(got) != 0 {
		t.Errorf("read %v from a malformed line", got)
	}
}

// What client_golang writes, read back.
func TestEachReadsClientGolang(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:kv_cache_usage_perc", Help: "h"}, []string{"model_name"})
	reg.MustRegister(g)
	g.WithLabelValues(`m "1"`).Set(0.25)
	g.WithLabelValues("n").Set(0.5)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	got := collect(t, b.String(), "vllm:kv_cache_usage_perc")
	if len(got) != 2 || got[0].v+got[1].v != 0.75 {
		t.Errorf("read %v from\n%s", got, b.String())
	}
}

// BenchmarkEach reads a /metrics page of 300 lines for the 2 metrics the
// proxy's least-loaded router scrapes.
func BenchmarkEach(b *testing.B) {
	var sb strings.Builder
	for i := range 100 {
		fmt.Fprintf(&sb, "# HELP other_%d x\n# TYPE other_%d gauge\nother_%d{model_name=\"m\"} %d\n", i, i, i, i)
	}
	sb.WriteString("vllm:num_requests_waiting{model_name=\"m\"} 3\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n")
	text := sb.String()
	names := []string{"vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Each(strings.NewReader(text), names, func(string, map[string]string, float64) {})
	}
}
