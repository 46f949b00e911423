package kvevents

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/kvevents/kveventstest"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/sched"
)

// benchExec samples token 1 + position % 100 for every sequence.
type benchExec struct{}

func (benchExec) Execute(b *model.Batch, out *model.StepResult) {
	out.Tokens = out.Tokens[:0]
	for _, s := range b.Seqs {
		tok := model.NoToken
		if s.Sample {
			tok = 1 + int32(len(s.Tokens)%100)
		}
		out.Tokens = append(out.Tokens, tok)
	}
	out.Duration = time.Millisecond
}

// BenchmarkEngineStepKVEvents measures one engine step (engine.Core: 256
// running requests, a stream of new 64-token prompts, pool events on), plus
// handing the step's events to the publisher as the node does, with no
// publisher, with a publisher and no subscriber, with a stalled subscriber
// (connected, subscribed, never reading) and with a subscriber that reads.
// A stalled subscriber must cost the step nothing more than a reading one.
func BenchmarkEngineStepKVEvents(b *testing.B) {
	for _, mode := range []string{"none", "no-subscriber", "stalled-subscriber", "reading-subscriber"} {
		b.Run(mode, func(b *testing.B) {
			var p *Publisher
			if mode != "none" {
				var err error
				p, err = New(Config{Endpoint: "tcp://127.0.0.1:0"})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
			}
			switch mode {
			case "stalled-subscriber":
				c := rawSubscriber(b, p.Addr())
				defer c.Close()
			case "reading-subscriber":
				sub, err := kveventstest.Subscribe("tcp://"+p.Addr().String(), "")
				if err != nil {
					b.Fatal(err)
				}
				defer sub.Close()
				go func() {
					for {
						if _, err := sub.Next(time.Hour); err != nil {
							return
						}
					}
				}()
			}
			if p != nil && mode != "no-subscriber" {
				waitFor(b, "the subscriber", func() bool {
					p.mu.Lock()
					defer p.mu.Unlock()
					for s := range p.subs {
						if s.matches("") {
							return true
						}
					}
					return false
				})
			}
			const running, prompt, maxTokens = 256, 64, 64
			sc := sched.DefaultConfig()
			sc.MaxNumSeqs = running
			sc.MaxNumBatchedTokens = running * prompt
			core := engine.NewCore(engine.Config{
				Pool:  kvblock.Config{NumBlocks: running * (prompt + maxTokens) / 16 * 2, BlockSizeTokens: 16, Events: true},
				Sched: sc, MaxModelLen: 1024, VocabSize: 257, EOS: 256, RecentFinished: 16,
			}, rand.New(rand.NewPCG(1, 2)))
			next := 0
			add := func(now clock.Instant) {
				pr := make([]int32, prompt)
				for i := range pr {
					pr[i] = int32(1 + (next*31+i*7)%250)
				}
				pr[0], pr[1] = int32(next%250), int32(next/250%250)
				core.Add(now, &engine.Request{ID: "r" + strconv.Itoa(next), Prompt: pr, MaxTokens: 1 + next%maxTokens, IgnoreEOS: true})
				next++
			}
			var now clock.Instant
			for range running {
				add(now)
			}
			var res model.StepResult
			events, published := 0, 0
			step := func() {
				rd := core.Step(now)
				events += len(rd.Events)
				if p != nil {
					p.Publish(time.Now(), rd.Events)
				}
				finished := 0
				for _, o := range rd.Outputs {
					if o.Finished {
						finished++
					}
				}
				if rd.Batch != nil {
					benchExec{}.Execute(rd.Batch, &res)
					now = now.Add(res.Duration)
					core.Complete(now, &res)
				}
				for range finished {
					add(now)
				}
			}
			for range 2 * maxTokens { // steady state
				step()
			}
			events = 0
			b.ResetTimer()
			for b.Loop() {
				step()
			}
			b.StopTimer()
			if p != nil {
				published = int(p.Stats().Published)
			}
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
			_ = published
		})
	}
}
