package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
)

// runCore drives a core with the sim executor until every request
// finishes, and returns each request's tokens and the core's stats.
func runCore(t *testing.T, blocks int, maxSeqs int, reqs []*Request) (map[string][]int32, Stats) {
	t.Helper()
	prof, ok := synth.LookupProfile("tiny")
	if !ok {
		t.Fatal("no tiny profile")
	}
	sc := sched.DefaultConfig()
	sc.MaxNumSeqs = maxSeqs
	sc.MaxNumBatchedTokens = 256 // chunked prefill of the longer prompts
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: blocks, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sc,
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 16,
	}, rand.New(rand.NewPCG(3, 4)))
	exec := synth.New(prof, core.Pool(), 11)
	now := clock.Instant(0)
	for _, r := range reqs {
		if res := core.Add(now, r); res != Accepted {
			t.Fatalf("%s: %v", r.ID, res)
		}
	}
	out := map[string][]int32{}
	finished := 0
	var res model.StepResult
	for steps := 0; finished < len(reqs); steps++ {
		if steps > 100000 {
			t.Fatalf("no progress: %d of %d finished", finished, len(reqs))
		}
		rd := core.Step(now)
		for _, o := range rd.Outputs {
			if o.Token != model.NoToken {
				out[o.ID] = append(out[o.ID], o.Token)
			}
			if o.Finished {
				finished++
				if o.Status != sched.FinishedLength {
					t.Fatalf("%s finished %v", o.ID, o.Status)
				}
			}
		}
		if err := core.Check(); err != nil {
			t.Fatal(err)
		}
		if rd.Batch == nil {
			continue
		}
		exec.Execute(rd.Batch, &res)
		now = now.Add(res.Duration)
		core.Complete(now, &res)
	}
	if held := core.Pool().NumHeld(); held != 0 {
		t.Fatalf("%d blocks held after every request finished", held)
	}
	return out, core.Stats()
}

// TestTokensIndependentOfBatchAndPreemption: a request's tokens are the
// same whether it runs alone on a roomy pool or in a crowd on a pool too
// small for everyone, where the scheduler chunks prompts, batches
// requests together and preempts them (recomputing their KV). Greedy and
// seeded sampled requests alike, with shared prefixes so prefix-cache hits
// happen too.
func TestTokensIndependentOfBatchAndPreemption(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shared := make([]int32, 48)
	for i := range shared {
		shared[i] = int32(32 + rng.IntN(90))
	}
	mk := func() []*Request {
		r := rand.New(rand.NewPCG(7, 8))
		var reqs []*Request
		for i := range 40 {
			n := 16 + r.IntN(300)
			p := make([]int32, n)
			for j := range p {
				p[j] = int32(32 + r.IntN(90))
			}
			if i%3 == 0 {
				p = append(slices.Clone(shared), p...)
			}
			req := &Request{ID: fmt.Sprintf("r%02d", i), Prompt: p, MaxTokens: 20 + r.IntN(40), IgnoreEOS: true}
			if i%2 == 1 {
				req.Sampling = model.Sampling{Temperature: 0.8, TopP: 0.9, Seed: uint64(i)}
				req.SeedSet = true
			}
			reqs = append(reqs, req)
		}
		return reqs
	}
	alone := map[string][]int32{}
	for _, r := range mk() {
		got, _ := runCore(t, 64, 1, []*Request{r})
		alone[r.ID] = got[r.ID]
	}
	crowd, st := runCore(t, 48, 32, mk())
	if st.Sched.Preemptions == 0 {
		t.Fatal("the crowded run preempted nothing: the test does not test preemption")
	}
	if st.Sched.PrefixHitTokens == 0 {
		t.Fatal("no prefix-cache hit in the crowded run")
	}
	for id, want := range alone {
		if !slices.Equal(crowd[id], want) {
			t.Errorf("%s: crowded run %v, alone %v", id, crowd[id], want)
		}
	}
	again, _ := runCore(t, 48, 32, mk())
	for id := range crowd {
		if !slices.Equal(crowd[id], again[id]) {
			t.Errorf("%s: two identical runs differ", id)
		}
	}
	t.Logf("preemptions %d, recomputed prompt tokens %d, prefix hits %d tokens",
		st.Sched.Preemptions, st.Sched.RecomputedPrefill, st.Sched.PrefixHitTokens)
}
