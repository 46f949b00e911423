package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlease/kvlease/engine"
)

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
