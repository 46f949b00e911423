package engine

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/sched"
)

// BenchmarkLoopSmallBatch is the loop's own cost per request (ns/op: one
// request) when a zero-latency model steps back to back with two requests
// live, as a served engine of issue 16's load runs (about 2.3 sequences a
// step): 16-token prompts, 16 output tokens, an executor that does nothing.
func BenchmarkLoopSmallBatch(b *testing.B) { benchLoop(b, 2) }

// BenchmarkLoopOneSeq is the same with one request live: every step is
// one sequence's, as a served engine runs when its HTTP side cannot keep
// it busier (about 1.1 sequences a step measured under load).
func BenchmarkLoopOneSeq(b *testing.B) { benchLoop(b, 1) }

func benchLoop(b *testing.B, live int) {
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: 4096, BlockSizeTokens: 16},
		Sched:       sched.DefaultConfig(),
		MaxModelLen: 4096, VocabSize: 257, EOS: 256, RecentFinished: 4096,
	}, rand.New(rand.NewPCG(1, 2)))
	l := NewLoop(core, stepExec{}, LoopConfig{})
	prompt := make([]int32, 16)
	reqs := make([]Request, live)
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	live, next := 0, 0
	now := clock.Instant(0)
	b.ReportAllocs()
	for b.Loop() {
		for done := false; !done; {
			for live < len(reqs) {
				r := &reqs[next%len(reqs)]
				*r = Request{ID: ids[next%len(ids)], Prompt: prompt, MaxTokens: 16, IgnoreEOS: true}
				if res, _ := l.Add(now, r); res != Accepted {
					b.Fatalf("Add: %v", res)
				}
				live++
				next++
			}
			now++
			for _, o := range l.Turn(now).Outputs {
				if o.Finished {
					live--
					done = true
				}
			}
		}
	}
}
