package engine

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/constrain"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/tokenizer"
)

// runConstrained runs requests with grammar g on one core (several at a
// time, greedy and sampled) and returns each one's text and status.
func runConstrained(t *testing.T, g *constrain.Grammar, n, maxTokens int) ([]string, []sched.Status) {
	t.Helper()
	prof, _ := synth.LookupProfile("tiny")
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: 512, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sched.DefaultConfig(),
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS, RecentFinished: 16,
	}, rand.New(rand.NewPCG(1, 2)))
	exec := synth.New(prof, core.Pool(), 5)
	texts := make([]string, n)
	status := make([]sched.Status, n)
	idx := map[string]int{}
	now := clock.Instant(0)
	for i := 0; i < n; i++ {
		id := string(rune('a'+i%26)) + string(rune('a'+i/26))
		idx[id] = i
		req := &Request{ID: id, Prompt: tokenizer.Encode("Answer in JSON: " + id), MaxTokens: maxTokens, Grammar: g,
			Sampling: model.Sampling{Temperature: float64(i % 2), TopP: 1}}
		if res := core.Add(now, req); res != Accepted {
			t.Fatal(res)
		}
	}
	var res model.StepResult
	done := 0
	for step := 0; done < n; step++ {
		if step > 100000 {
			t.Fatal("requests did not finish")
		}
		rd := core.Step(now)
		for _, o := range rd.Outputs {
			i := idx[o.ID]
			if o.Token != model.NoToken {
				texts[i] += string(tokenizer.Decode([]int32{o.Token}))
			}
			if o.Finished {
				status[i] = o.Status
				done++
			}
		}
		if rd.Batch != nil {
			exec.Execute(rd.Batch, &res)
			now = now.Add(res.Duration)
			core.Complete(now, &res)
		}
	}
	if err := core.pool.Check(); err != nil {
		t.Fatal(err)
	}
	if core.constrained != 0 {
		t.Fatalf("%d constrained requests left after all finished", core.constrained)
	}
	return texts, status
}

func TestCoreConstrainedOutputParses(t *testing.T) {
	_, err := constrain.Compile(json.RawMessage(`{"type":"object","properties":{
		"name":{"type":"string"},"n":{"type":"integer"},"xs":{"type":"array","items":{"type":"number"}},
		"sub":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}},
		"required":["name","n","xs","sub"],"additionalProperties":false}`), true)
	if err == nil {
		t.Fatal("strict accepted optional properties")
	}
	g, err := constrain.Compile(json.RawMessage(`{"type":"object","properties":{
		"name":{"type":"string"},"n":{"type":"integer"},"xs":{"type":"array","items":{"type":"number"}},
		"sub":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}},
		"required":["name","n","xs","sub"]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, gr := range []*constrain.Grammar{g, constrain.Any()} {
		texts, status := runConstrained(t, gr, 40, 2000)
		for i, txt := range texts {
			if i < 3 {
				t.Logf("%s", txt)
			}
			if status[i] != sched.FinishedStopped {
				t.Fatalf("request %d: %v after %q", i, status[i], txt)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(txt), &v); err != nil {
				t.Fatalf("request %d: %q: %v", i, txt, err)
			}
			if gr == g {
				if _, ok := v["sub"].(map[string]any)["ok"].(bool); !ok {
					t.Fatalf("request %d: %q lacks sub.ok", i, txt)
				}
			}
		}
	}
	// max_tokens mid-text: finished as length.
	_, status := runConstrained(t, g, 4, 3)
	for i, st := range status {
		if st != sched.FinishedLength {
			t.Errorf("request %d: %v, want length", i, st)
		}
	}
}

// A constrained request the core refuses leaves no constraint behind;
// an aborted one gives its up.
func TestCoreConstrainedRefusedAndAborted(t *testing.T) {
	prof, _ := synth.LookupProfile("tiny")
	sc := sched.DefaultConfig()
	sc.MaxWaiting = 1
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: 64, BlockSizeTokens: 16},
		Sched:       sc,
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS, RecentFinished: 16,
	}, rand.New(rand.NewPCG(1, 2)))
	g := constrain.Any()
	if res := core.Add(0, &Request{ID: "a", Prompt: []int32{1, 2}, MaxTokens: 9, Grammar: g}); res != Accepted {
		t.Fatal(res)
	}
	if res := core.Add(0, &Request{ID: "b", Prompt: []int32{1, 2}, MaxTokens: 9, Grammar: g}); res != RejectedQueueFull {
		t.Fatal(res)
	}
	if core.constrained != 1 {
		t.Fatalf("%d constrained requests, want 1", core.constrained)
	}
	core.Abort(0, "a")
	if core.constrained != 0 {
		t.Fatalf("%d constrained requests after the abort, want 0", core.constrained)
	}
}

// A grammar that the vocabulary cannot continue (no token for '"' or '}'
// after '{') ends the request with an error, marked Stuck, and nothing is
// left held.
func TestCoreConstrainedStuck(t *testing.T) {
	prof, _ := synth.LookupProfile("tiny")
	text := make([][]byte, prof.VocabSize)
	for b := 0; b < 256; b++ {
		if b != '"' && b != '}' {
			text[b] = []byte{byte(b)}
		}
	}
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: 64, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sched.DefaultConfig(),
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS, RecentFinished: 16,
		Vocab: constrain.NewVocab(text, []int32{prof.EOS}),
	}, rand.New(rand.NewPCG(1, 2)))
	exec := synth.New(prof, core.Pool(), 5)
	if res := core.Add(0, &Request{ID: "a", Prompt: []int32{1, 2}, MaxTokens: 50, Grammar: constrain.Any()}); res != Accepted {
		t.Fatal(res)
	}
	var res model.StepResult
	var fin *Output
	var toks []int32
	now := clock.Instant(0)
	for step := 0; fin == nil; step++ {
		if step > 100 {
			t.Fatal("the request did not finish")
		}
		rd := core.Step(now)
		for i, o := range rd.Outputs {
			if o.Token != model.NoToken {
				toks = append(toks, o.Token)
			}
			if o.Finished {
				fin = &rd.Outputs[i]
			}
		}
		if rd.Batch != nil {
			exec.Execute(rd.Batch, &res)
			now = now.Add(res.Duration)
			core.Complete(now, &res)
		}
	}
	if fin.Status != sched.FinishedError || !fin.Stuck || string(tokenizer.Decode(toks)) != "{" {
		t.Fatalf("finished %v stuck %v after %q", fin.Status, fin.Stuck, tokenizer.Decode(toks))
	}
	for range 3 {
		core.Step(now)
	}
	if err := core.pool.Check(); err != nil || core.pool.NumFree() != 64 || core.constrained != 0 {
		t.Fatalf("after the stuck request: %v, %d free, %d constrained", err, core.pool.NumFree(), core.constrained)
	}
}
