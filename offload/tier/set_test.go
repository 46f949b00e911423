package tier

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
)

// fill gives block b of pool deterministic bytes and matching digests.
func fill(pool *kvblock.Pool, b kvblock.BlockID, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	data := pool.Bytes(b)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	bpt := pool.Config().BytesPerToken
	for s := range pool.Digests(b) {
		pool.Digests(b)[s] = kvblock.SlotDigest(data[s*bpt : (s+1)*bpt])
	}
}

func receiveSet(t *testing.T, s *Set) Completion {
	t.Helper()
	select {
	case c, ok := <-s.Completions():
		if !ok {
			t.Fatal("completions closed")
		}
		return c
	case <-time.After(waitTimeout):
		t.Fatal("no completion within the deadline")
	}
	return Completion{}
}

// TestSetRoundTrip: blocks stored through a Set (cpu and disk tiers, real
// runners) and evicted from the pool come back byte for byte; every work
// gets exactly one completion; no hold is left. A job that cannot be
// queued fails at once and releases its hold.
func TestSetRoundTrip(t *testing.T) {
	pc := kvblock.Config{NumBlocks: 16, BlockSizeTokens: 4, BytesPerToken: 64}
	for _, tiers := range [][]offload.TierConfig{
		{{Medium: offload.MediumCPU, Blocks: 8}},
		{{Medium: offload.MediumDisk, Path: filepath.Join(t.TempDir(), "kv"), Blocks: 8}},
		{{Medium: offload.MediumCPU, Blocks: 2}, {Medium: offload.MediumDisk, Path: filepath.Join(t.TempDir(), "kv"), Blocks: 8}},
	} {
		t.Run(tiers[len(tiers)-1].Medium+"/"+string(rune('0'+len(tiers))), func(t *testing.T) {
			pool := kvblock.New(pc)
			cfg := offload.DefaultConfig(tiers)
			cfg.MaxInflightStoreBlocks = 16 // both tiers at once
			coord := offload.NewCoordinator(cfg, pool)
			set, err := Open(cfg, pc, RunnerConfig{Workers: 2, QueueLen: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				set.Close()
				for range set.Completions() {
				}
			}()
			toks := make([]int32, 17)
			for i := range toks {
				toks[i] = int32(i * 3)
			}
			hashes := kvblock.AppendHashes(nil, toks, 4, kvblock.Extras{})
			hold := pool.NewHold(kvblock.HoldRequest, 1)
			pool.Allocate(hold, 5)
			blocks := slices.Clone(pool.Blocks(hold))
			want := map[kvblock.Hash][]byte{}
			for i, b := range blocks {
				fill(pool, b, uint64(i))
				if i < 4 {
					want[hashes[i]] = slices.Clone(pool.Bytes(b))
				}
			}
			pool.CacheRun(blocks[:4], hashes, kvblock.RootHash, nil)
			coord.Finished(1, blocks, hashes, 17)
			pool.Release(hold)
			w := coord.Take()
			if len(w.Stores) != len(tiers) {
				t.Fatalf("%d store works for %d tiers", len(w.Stores), len(tiers))
			}
			if failed := set.Submit(pool, &w); len(failed) != 0 {
				t.Fatalf("submit failed: %+v", failed)
			}
			for range w.Stores {
				c := receiveSet(t, set)
				if !c.OK {
					t.Fatalf("store: %+v", c)
				}
				Apply(coord, c)
			}
			if pool.NumHeld() != 0 || !coord.Idle() {
				t.Fatal("holds left after the stores")
			}
			pool.ResetCache()
			for _, b := range blocks {
				clear(pool.Bytes(b))
				clear(pool.Digests(b))
			}
			if !coord.Lookup(2, toks, hashes) {
				t.Fatal("no load planned")
			}
			w = coord.Take()
			if failed := set.Submit(pool, &w); len(failed) != 0 {
				t.Fatalf("submit failed: %+v", failed)
			}
			ready := false
			for range w.Loads {
				c := receiveSet(t, set)
				if !c.OK {
					t.Fatalf("load: %+v", c)
				}
				req, r := Apply(coord, c)
				if r && req != 2 {
					t.Fatalf("ready request %d", req)
				}
				ready = ready || r
			}
			if !ready {
				t.Fatal("request never ready")
			}
			hits := pool.Lookup(nil, hashes)
			if len(hits) != 4 {
				t.Fatalf("primary hit %d blocks after loading, want 4", len(hits))
			}
			for i, b := range hits {
				if !bytes.Equal(pool.Bytes(b), want[hashes[i]]) {
					t.Fatalf("block %d came back different", i)
				}
				for s, d := range pool.Digests(b) {
					if d != kvblock.SlotDigest(pool.SlotBytes(b, s)) {
						t.Fatalf("block %d slot %d digest does not match its bytes", i, s)
					}
				}
			}
			if err := pool.Check(); err != nil {
				t.Fatal(err)
			}
			if err := coord.Check(); err != nil {
				t.Fatal(err)
			}
			// The loaded prefix is held until the request's admission.
			if pool.NumHeld() != 4 || coord.NumHeld() != 1 {
				t.Fatalf("%d blocks held for %d requests after the loads, want the 4 of request 2", pool.NumHeld(), coord.NumHeld())
			}
			coord.Admitted(2)
			if pool.NumHeld() != 0 {
				t.Fatal("holds left after the admission")
			}
		})
	}
}

// TestSetSubmitAtBound: a Set whose runner queue is full fails the extra
// jobs at once; applying the failures releases their holds, and every job
// gets exactly one completion.
//
// How many jobs one Submit gets in depends on the worker's speed: a
// runner's bound counts a job until its completion leaves the runner, and
// the Set's forwarder takes completions at once into the Set's own channel
// (capacity QueueLen per tier). With QueueLen 1 and one tier, at most
// three jobs are outstanding (queued or running, one in the forwarder's
// hand, one in the Set's channel), so of four at least one fails.
func TestSetSubmitAtBound(t *testing.T) {
	const jobs = 4
	pc := kvblock.Config{NumBlocks: 16, BlockSizeTokens: 4}
	pool := kvblock.New(pc)
	cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 16}})
	coord := offload.NewCoordinator(cfg, pool)
	set, err := Open(cfg, pc, RunnerConfig{Workers: 1, QueueLen: 1})
	if err != nil {
		t.Fatal(err)
	}
	var all offload.Work
	for r := range uint64(jobs) {
		toks := make([]int32, 5)
		for i := range toks {
			toks[i] = int32(r*100) + int32(i)
		}
		hashes := kvblock.AppendHashes(nil, toks, 4, kvblock.Extras{})
		hold := pool.NewHold(kvblock.HoldRequest, r)
		pool.Allocate(hold, 2)
		pool.CacheRun(pool.Blocks(hold)[:1], hashes, kvblock.RootHash, nil)
		coord.Finished(r, pool.Blocks(hold), hashes, 5)
		pool.Release(hold)
		w := coord.Take()
		all.Stores = append(all.Stores, w.Stores...)
	}
	if len(all.Stores) != jobs {
		t.Fatalf("%d stores, want %d", len(all.Stores), jobs)
	}
	failed := set.Submit(pool, &all)
	if len(failed) < jobs-3 {
		t.Fatalf("%d of %d jobs failed, want at least %d", len(failed), jobs, jobs-3)
	}
	for _, f := range failed {
		if !errors.Is(f.Err, ErrQueueFull) || f.Kind != JobStore {
			t.Fatalf("failed %+v, want ErrQueueFull", f)
		}
		Apply(coord, f)
	}
	set.Close()
	n := 0
	for c := range set.Completions() {
		Apply(coord, c)
		n++
	}
	if n != jobs-len(failed) || pool.NumHeld() != 0 || !coord.Idle() {
		t.Fatalf("%d completions for %d accepted jobs, %d blocks held, idle %v", n, jobs-len(failed), pool.NumHeld(), coord.Idle())
	}
	if err := coord.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(offload.Config{}, pc, DefaultRunnerConfig()); err == nil {
		t.Fatal("Open with no tier succeeded")
	}
}
