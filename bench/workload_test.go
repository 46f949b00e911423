package bench

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestJobsDependOnSeedAndIndexOnly(t *testing.T) {
	cfg := DefaultConfig()
	cfg.URL = "http://x:1"
	cfg.AbortRate = 0.3
	cfg.Workload.Kind = WorkloadMultiTurn
	cfg.Workload.InputLen = Dist{DistUniform, 20, 200}
	w1, w2 := newWorkload(cfg), newWorkload(cfg)
	for _, n := range []int{5, 0, 3, 5} {
		if !reflect.DeepEqual(w1.job(n), w2.job(n)) {
			t.Fatalf("job %d differs between workloads of one seed", n)
		}
	}
	cfg.Seed++
	if reflect.DeepEqual(newWorkload(cfg).job(5), w1.job(5)) {
		t.Fatal("job 5 is the same under another seed")
	}
	// The abort rate changes which requests abort, not their content.
	cfg.Seed--
	cfg.AbortRate = 0
	j0, j1 := newWorkload(cfg).job(5), w1.job(5)
	for i := range j0.turns {
		if j0.turns[i].user != j1.turns[i].user || j0.turns[i].outputTokens != j1.turns[i].outputTokens {
			t.Fatal("the abort rate changed a prompt")
		}
	}
}

func TestPromptLengths(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workload.InputLen = Dist{DistUniform, 1, 300}
	for _, cpt := range []float64{1, 4, 0.5} {
		cfg.Workload.CharsPerToken = cpt
		w := newWorkload(cfg)
		for n := range 50 {
			tr := w.job(n).turns[0]
			want := max(1, int(math.Round(float64(tr.inputTokens)*cpt)))
			if len(tr.user) != want {
				t.Fatalf("cpt %v: %d tokens gave %d characters, want %d", cpt, tr.inputTokens, len(tr.user), want)
			}
		}
	}
}

func TestAbortPlans(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AbortRate = 0.4
	cfg.AbortMaxDelay = 100 * time.Millisecond
	cfg.Workload.OutputLen = Dist{DistUniform, 1, 10}
	w := newWorkload(cfg)
	var aborts, before, mid int
	const n = 5000
	for i := range n {
		tr := w.job(i).turns[0]
		p := tr.abort
		if !p.active {
			continue
		}
		aborts++
		switch {
		case p.afterTokens == 0:
			before++
			if p.delay < 0 || p.delay > cfg.AbortMaxDelay {
				t.Fatalf("delay %v", p.delay)
			}
		default:
			mid++
			if p.afterTokens < 1 || p.afterTokens >= tr.outputTokens {
				t.Fatalf("mid-stream abort after %d of %d tokens", p.afterTokens, tr.outputTokens)
			}
		}
	}
	if math.Abs(float64(aborts)/n-0.4) > 0.03 || before < aborts/3 || mid < aborts/3 {
		t.Fatalf("%d aborts of %d (%d before the first token, %d mid-stream)", aborts, n, before, mid)
	}
	cfg.Stream = false
	w = newWorkload(cfg)
	for i := range 200 {
		if p := w.job(i).turns[0].abort; p.active && p.afterTokens != 0 {
			t.Fatal("a non-streaming request plans a mid-stream abort")
		}
	}
}

func TestRequestBody(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workload.Kind = WorkloadSharedPrefix
	cfg.Workload.PrefixLen = 30
	w := newWorkload(cfg)
	j := w.job(2)
	var body map[string]any
	if err := json.Unmarshal(requestBody(cfg, "m", &j, nil, &j.turns[0]), &body); err != nil {
		t.Fatal(err)
	}
	if body["model"] != "m" || body["max_tokens"] != float64(64) || body["ignore_eos"] != true || body["stream"] != true ||
		body["stream_options"].(map[string]any)["include_usage"] != true || !strings.HasPrefix(body["prompt"].(string), j.system+"\n\n") {
		t.Fatalf("body %v", body)
	}
	// A later turn of a completions workload: the earlier turns and their
	// answers as text (answers follow "Assistant:" as generated).
	want := j.system + "\n\nUser: u0\nAssistant: a0\nUser: " + j.turns[0].user + "\nAssistant:"
	if got := completionPrompt(&j, []string{"u0", " a0"}, &j.turns[0]); got != want {
		t.Fatalf("prompt %q, want %q", got, want)
	}
	cfg.Stream, cfg.API = false, APIChat
	body = nil
	if err := json.Unmarshal(requestBody(cfg, "m", &j, []string{"u0", "a0"}, &j.turns[0]), &body); err != nil {
		t.Fatal(err)
	}
	msgs := body["messages"].([]any)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if !reflect.DeepEqual(roles, []string{"system", "user", "assistant", "user"}) || body["stream_options"] != nil {
		t.Fatalf("roles %v, body %v", roles, body)
	}
}

func TestArrivalsArePoisson(t *testing.T) {
	a := newArrivals(3, 50)
	const horizon = 100 * time.Second
	n, prev := 0, time.Duration(0)
	for {
		at := a.next()
		if at < prev {
			t.Fatal("arrivals go back in time")
		}
		prev = at
		if at >= horizon {
			break
		}
		n++
	}
	// 5000 expected, standard deviation about 71.
	if n < 5000-400 || n > 5000+400 {
		t.Fatalf("%d arrivals in 100 s at 50/s", n)
	}
	b, c := newArrivals(3, 50), newArrivals(3, 50)
	for range 100 {
		if b.next() != c.next() {
			t.Fatal("one seed, two schedules")
		}
	}
}
