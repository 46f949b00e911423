package node

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/sched"
)

// TestNodeHandsEventsToOnEvents: with pool events on, the node hands every
// turn's KV cache events to OnEvents, in order: the prompt's full blocks
// stored as one chain from the root.
func TestNodeHandsEventsToOnEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := engine.NewCore(engine.Config{
			Pool:        kvblock.Config{NumBlocks: 64, BlockSizeTokens: 4, Events: true},
			Sched:       sched.DefaultConfig(),
			MaxModelLen: 128, VocabSize: 257, EOS: 256, RecentFinished: 16,
		}, rand.New(rand.NewPCG(1, 2)))
		var mu sync.Mutex
		var got []kvblock.Event
		n := New(core, stepExec{time.Millisecond}, Config{OnEvents: func(evs []kvblock.Event) {
			mu.Lock()
			got = append(got, evs...) // the events' slices are not kept beyond the test's reads
			mu.Unlock()
		}})
		ctx, cancel := context.WithCancel(context.Background())
		go n.Run(ctx)
		defer func() { cancel(); <-n.Done() }()

		prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
		s, res := n.Submit(&engine.Request{ID: "r", Prompt: prompt, MaxTokens: 1, IgnoreEOS: true})
		if res != engine.Accepted {
			t.Fatal(res)
		}
		drain(t, s)
		if err := n.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := kvblock.AppendHashes(nil, prompt, 4, kvblock.Extras{})
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 || got[0].Kind != kvblock.BlockStored {
			t.Fatalf("events %+v, want BlockStored first", got)
		}
		ev := got[0]
		if ev.Parent != kvblock.RootHash || len(ev.Hashes) != 2 || ev.Hashes[0] != want[0] || ev.Hashes[1] != want[1] ||
			len(ev.Tokens) != 8 || ev.BlockSize != 4 {
			t.Fatalf("BlockStored %+v, want the prompt's two full blocks %v from the root", ev, want)
		}
	})
}
