package node

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/sched"
)

// offloadNode starts a node over a core with the zero-latency simulated
// model, a pool of poolBlocks and offload cfg (nil: off), its tiers opened
// with OpenOffload.
func offloadNode(t *testing.T, poolBlocks int, cfg *offload.Config) (*Node, context.CancelFunc) {
	t.Helper()
	prof, _ := synth.LookupProfile("zero")
	core := engine.NewCore(engine.Config{
		Pool:        kvblock.Config{NumBlocks: poolBlocks, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sched.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 256, MaxWaiting: 64, ChunkedPrefill: true},
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 16, Offload: cfg,
	}, rand.New(rand.NewPCG(3, 4)))
	set, err := OpenOffload(core)
	if err != nil {
		t.Fatal(err)
	}
	if (set == nil) != (cfg == nil) {
		t.Fatalf("OpenOffload: %v for config %v", set, cfg)
	}
	n := New(core, synth.New(prof, core.Pool(), 11), Config{Offload: set})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := n.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-n.Done() })
	return n, cancel
}

// nodeConversations runs nConv conversations of turns turns through n,
// round-robin (turn k of every conversation, then turn k+1), one request at
// a time: between two turns of a conversation the others push its blocks
// out of the small pool. It returns each turn's tokens and the cached
// tokens of every usage.
func nodeConversations(t *testing.T, n *Node, nConv, turns int) (map[string][]int32, int) {
	t.Helper()
	history := make([][]int32, nConv)
	user := func(c, k int) []int32 {
		r := rand.New(rand.NewPCG(uint64(c), uint64(k)))
		out := make([]int32, 20+r.IntN(24))
		for i := range out {
			out[i] = int32(32 + r.IntN(200))
		}
		return out
	}
	out := map[string][]int32{}
	cached := 0
	for k := range turns {
		for c := range nConv {
			history[c] = append(history[c], user(c, k)...)
			id := fmt.Sprintf("%d/%d", c, k)
			s, res := n.Submit(&engine.Request{ID: id, Prompt: slices.Clone(history[c]), MaxTokens: 8, IgnoreEOS: true})
			if res != engine.Accepted {
				t.Fatalf("%s: %v", id, res)
			}
			for _, o := range drain(t, s) {
				if o.Token != model.NoToken {
					out[id] = append(out[id], o.Token)
				}
				if o.Finished {
					cached += o.Usage.CachedTokens
					if o.Status != sched.FinishedLength {
						t.Fatalf("%s: %v", id, o.Status)
					}
				}
			}
			history[c] = append(history[c], out[id]...)
			waitCopies(t, n)
		}
	}
	return out, cached
}

// waitCopies waits until n has no offload copy in flight, so that what a
// test's next request finds in the tiers does not depend on how fast the
// tiers' goroutines ran.
func waitCopies(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o := n.Stats().Offload
		if o == nil || o.InflightStoreBlocks+o.InflightLoadBlocks == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("offload copies still in flight after 10 s: %+v", o)
		}
		runtime.Gosched()
	}
}

// TestNodeOffloadMemoryAndDiskTiers: a node with a host-memory tier and a
// disk tier (real files) serves a multi-turn workload on a pool too small
// to keep the conversations with exactly the tokens of a node without
// offload, loading blocks back (from both tiers' stores) and reporting them
// as cached tokens and in engine.NodeStats.Offload; when it stops, no block is
// held and no copy is in flight.
func TestNodeOffloadMemoryAndDiskTiers(t *testing.T) {
	const nConv, turns, poolBlocks = 4, 4, 16
	off, _ := offloadNode(t, poolBlocks, nil)
	want, cachedOff := nodeConversations(t, off, nConv, turns)

	tiers, err := offload.ParseTiers("cpu:8blocks,disk:" + t.TempDir() + ":256blocks")
	if err != nil {
		t.Fatal(err)
	}
	cfg := offload.DefaultConfig(tiers)
	// Stores run concurrently with the steps; with room for a pool's
	// worth in flight, few offers wait for a slot.
	cfg.MaxInflightStoreBlocks = poolBlocks
	n, cancel := offloadNode(t, poolBlocks, &cfg)
	got, cached := nodeConversations(t, n, nConv, turns)
	if !maps.EqualFunc(got, want, slices.Equal[[]int32]) {
		t.Fatal("outputs differ from offload off")
	}
	st := n.Stats()
	o := st.Offload
	if o == nil || len(o.Tiers) != 2 || o.Tiers[0].Medium != offload.MediumCPU || o.Tiers[1].Medium != offload.MediumDisk {
		t.Fatalf("offload stats %+v", o)
	}
	loaded := loadedBlocks(*o)
	t.Logf("cached tokens %d (off %d); tiers %+v", cached, cachedOff, o.Tiers)
	if loaded == 0 || o.Tiers[1].StoredBlocks == 0 || cached <= cachedOff {
		t.Fatalf("loaded %d blocks, disk stored %d, cached tokens %d (off %d)", loaded, o.Tiers[1].StoredBlocks, cached, cachedOff)
	}
	cancel()
	<-n.Done()
	st = n.Stats()
	if st.Pool.Held != 0 || st.Offload.InflightStoreBlocks != 0 || st.Offload.InflightLoadBlocks != 0 {
		t.Fatalf("after stop: held %d, in flight %d stores %d loads", st.Pool.Held, st.Offload.InflightStoreBlocks, st.Offload.InflightLoadBlocks)
	}
}

func TestNewNodeNeedsOffloadSet(t *testing.T) {
	cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 8}})
	core := engine.NewCore(engine.Config{
		Pool: kvblock.Config{NumBlocks: 8, BlockSizeTokens: 4}, Sched: sched.DefaultConfig(),
		MaxModelLen: 64, VocabSize: 257, EOS: 256, Offload: &cfg,
	}, rand.New(rand.NewPCG(1, 2)))
	defer func() {
		if recover() == nil {
			t.Fatal("New without the offload set did not panic")
		}
	}()
	New(core, stepExec{}, Config{})
}

// TestNodeOffloadShutdownMidway: a node stopped while requests run, load
// and store leaves no block held and no copy in flight, whatever the
// copies were doing.
func TestNodeOffloadShutdownMidway(t *testing.T) {
	cfg := offload.DefaultConfig([]offload.TierConfig{
		{Medium: offload.MediumCPU, Blocks: 32},
		{Medium: offload.MediumDisk, Path: t.TempDir(), Blocks: 128},
	})
	cfg.MaxInflightStoreBlocks = 24
	for round := range 4 {
		n, cancel := offloadNode(t, 24, &cfg)
		shared := make([]int32, 40)
		for i := range shared {
			shared[i] = int32(50 + i)
		}
		var streams []*Stream
		for i := range 12 {
			p := append(slices.Clone(shared), int32(100+i), int32(100+round))
			s, res := n.Submit(&engine.Request{ID: fmt.Sprint(i), Prompt: p, MaxTokens: 40, IgnoreEOS: true})
			if res != engine.Accepted {
				t.Fatal(res)
			}
			streams = append(streams, s)
		}
		// Stop after some request has made progress.
		if _, err := streams[round].Recv(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		cancel()
		for _, s := range streams {
			drain(t, s)
		}
		<-n.Done()
		st := n.Stats()
		if st.Pool.Held != 0 || st.Offload.InflightStoreBlocks != 0 || st.Offload.InflightLoadBlocks != 0 || st.Requests != 0 {
			t.Fatalf("round %d after stop: held %d, in flight %d stores %d loads, %d requests",
				round, st.Pool.Held, st.Offload.InflightStoreBlocks, st.Offload.InflightLoadBlocks, st.Requests)
		}
	}
}

// TestOffloadMultiTurnFigures runs the offload issue's workload through
// the engine core — 64 conversations of 8 turns with a growing history
// behind a shared system prompt, on the llama-8b shape (digest-only) with a
// pool four times too small for the conversations' KV — with offload off
// and with each policy (copies complete two steps after they are handed
// out), and reports the prompt tokens recomputed: computed beyond what a
// pool big enough for everything computes. The target: at least
// 3 x fewer with store-on-compute than with offload off. (The offload
// package's TestMultiTurnFigures adds time to first token under modelled
// copy bandwidths.)

// loadedBlocks sums the blocks loaded from every tier.
func loadedBlocks(st offload.Stats) uint64 {
	var loaded uint64
	for _, ts := range st.Tiers {
		loaded += ts.LoadedBlocks
	}
	return loaded
}
