package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
)

// TestCoreAdapterIsPartOfThePrefixKey: a request with a LoRA adapter never
// reuses the base model's cached blocks for the same prompt (nor the
// reverse) and answers differently; a second request with the same adapter
// hits the first one's blocks and answers alike. While they run, Stats
// names the adapters as vLLM's lora_requests_info does.
func TestCoreAdapterIsPartOfThePrefixKey(t *testing.T) {
	prof, _ := synth.LookupProfile("tiny")
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: 64, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sched.DefaultConfig(),
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS, RecentFinished: 16,
	}, rand.New(rand.NewPCG(1, 2)))
	exec := synth.New(prof, core.Pool(), 5)
	prompt := make([]int32, 50)
	for i := range prompt {
		prompt[i] = int32(60 + i)
	}
	sql := kvblock.Adapter{Name: "sql", ID: 1, Digest: 0xabc}
	now := clock.Instant(0)
	run := func(id string, a kvblock.Adapter) ([]int32, Usage) {
		t.Helper()
		if res := core.Add(now, &Request{ID: id, Prompt: prompt, MaxTokens: 8, IgnoreEOS: true, Adapter: a}); res != Accepted {
			t.Fatal(res)
		}
		var toks []int32
		var res model.StepResult
		for range 100 {
			rd := core.Step(now)
			for _, o := range rd.Outputs {
				if o.Token != model.NoToken {
					toks = append(toks, o.Token)
				}
				if o.Finished {
					return toks, o.Usage
				}
			}
			if rd.Batch != nil {
				if st := core.Stats(); a.IsBase() && (st.RunningAdapters != nil || st.WaitingAdapters != nil) ||
					!a.IsBase() && !slices.Equal(st.RunningAdapters, []string{a.Name}) {
					t.Fatalf("%s: running adapters %q, waiting %q", id, st.RunningAdapters, st.WaitingAdapters)
				}
				exec.Execute(rd.Batch, &res)
				now = now.Add(res.Duration)
				core.Complete(now, &res)
			}
		}
		t.Fatalf("%s did not finish", id)
		return nil, Usage{}
	}
	base, _ := run("base", kvblock.Adapter{})
	adapted, u := run("sql-1", sql)
	if u.CachedTokens != 0 {
		t.Fatalf("the adapter's request hit %d tokens of the base model's blocks", u.CachedTokens)
	}
	if slices.Equal(base, adapted) {
		t.Fatalf("the adapter answered as the base model: %v", base)
	}
	again, u := run("sql-2", sql)
	if u.CachedTokens == 0 || !slices.Equal(again, adapted) {
		t.Fatalf("the adapter's second request hit %d tokens and answered %v, want a hit and %v", u.CachedTokens, again, adapted)
	}
	if st := core.Stats(); st.RunningAdapters != nil || st.WaitingAdapters != nil || core.adapters != 0 {
		t.Fatalf("after the requests: running %q waiting %q (%d live)", st.RunningAdapters, st.WaitingAdapters, core.adapters)
	}
}
