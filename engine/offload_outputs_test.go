package engine

// Offloading never changes an output: the simulated model derives every
// token from the KV it reads, so a block stored, evicted, loaded back (or
// lost, corrupted, recomputed) with the wrong content, or freed while a copy
// still used it, would change the tokens. These tests run workloads through
// the Core with offload off and on and compare.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/sched"
)

// TestOffloadOutputsEqualOffloadOff: a multi-turn workload on a pool far
// too small for it (with preemptions) gives exactly the tokens of offload
// off with every policy, with a cpu tier and with cpu+disk tiers, whether
// blocks carry KV bytes or only digests, and with the disk tier's records
// corrupted, truncated and deleted while it runs (the loads that hit them
// fail and the blocks are recomputed). The runs that keep prompts in a tier
// load blocks back, compute fewer prompt tokens and report more cached
// tokens in Usage.
func TestOffloadOutputsEqualOffloadOff(t *testing.T) {
	const nConv, turns, maxTokens, poolBlocks = 12, 4, 16, 40
	sc := sched.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 256, MaxWaiting: 1 << 10, ChunkedPrefill: true}
	cpu := func(p offload.PolicyKind) func(string) *offload.Config {
		return func(string) *offload.Config {
			c := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 512}})
			c.Policy = p
			return &c
		}
	}
	cpuDisk := func(dir string) *offload.Config {
		c := offload.DefaultConfig([]offload.TierConfig{
			{Medium: offload.MediumCPU, Blocks: 24},
			{Medium: offload.MediumDisk, Path: dir, Blocks: 512},
		})
		c.MaxInflightStoreBlocks = poolBlocks
		return &c
	}
	for _, full := range []bool{true, false} {
		mode := map[bool]string{false: "digest-only", true: "full"}[full]
		base := newOffloadCoreProfile(t, "tiny", full, poolBlocks, sc, nil)
		want := base.conversations(nConv, turns, maxTokens)
		big := newOffloadCoreProfile(t, "tiny", full, 4096, sc, nil)
		if !sameTokens(big.conversations(nConv, turns, maxTokens), want) {
			t.Fatalf("%s: outputs depend on the pool size", mode)
		}
		if base.core.Stats().Sched.Preemptions == 0 {
			t.Fatalf("%s: the workload preempts nothing", mode)
		}
		t.Logf("%s offload off: %d prompt tokens computed (%d on a pool big enough), %d cached, %d preemptions",
			mode, base.promptComputed, big.promptComputed, base.cachedTokens(), base.core.Stats().Sched.Preemptions)
		for _, tc := range []struct {
			name   string
			cfg    func(dir string) *offload.Config
			helps  bool // must load blocks back and compute fewer prompt tokens
			damage bool // the disk tier's records are damaged while it runs
		}{
			{"store-on-compute", cpu(offload.StoreOnCompute), true, false},
			{"preemption-only", cpu(offload.PreemptionOnly), false, false},
			{"spillover", cpu(offload.Spillover), true, false},
			{"store-on-finish", cpu(offload.StoreOnFinish), true, false},
			{"request-level", cpu(offload.RequestLevel), true, false},
			{"cpu+disk", cpuDisk, true, false},
			{"cpu+disk damaged", cpuDisk, false, true},
		} {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				h := newOffloadCoreProfile(t, "tiny", full, poolBlocks, sc, tc.cfg(t.TempDir()))
				if tc.damage {
					h.damage = damageDisk(h, rand.New(rand.NewPCG(5, 5)))
				}
				if !sameTokens(h.conversations(nConv, turns, maxTokens), want) {
					t.Fatal("outputs differ from offload off")
				}
				st := h.core.Offload().Stats()
				loaded, stored := loadedBlocks(st)
				t.Logf("%d prompt tokens computed (off %d), %d cached (off %d), stored %d blocks, loaded %d, %d preemptions",
					h.promptComputed, base.promptComputed, h.cachedTokens(), base.cachedTokens(), stored, loaded, h.core.Stats().Sched.Preemptions)
				if stored == 0 {
					t.Fatal("nothing stored")
				}
				if tc.helps {
					if loaded == 0 || h.promptComputed >= base.promptComputed {
						t.Fatalf("offload did not help: %d blocks loaded, %d prompt tokens computed (off %d)", loaded, h.promptComputed, base.promptComputed)
					}
					// Loaded blocks are admitted as prefix-cache hits.
					if h.cachedTokens() <= base.cachedTokens() {
						t.Fatalf("cached tokens %d, offload off %d", h.cachedTokens(), base.cachedTokens())
					}
				}
				if tc.damage {
					var failed uint64
					for _, ts := range st.Tiers {
						failed += ts.LoadFailedBlocks
					}
					if failed == 0 {
						t.Fatal("no load hit a damaged record: the damage did not bite")
					}
				}
			})
		}
	}
}

// TestOffloadOutputsEqualUnderPreemption: with long outputs and more
// requests running than the pool can hold, requests are preempted (their
// blocks offered at the next step, under store holds until stored) and
// recomputed or loaded back; the outputs still equal offload off.
func TestOffloadOutputsEqualUnderPreemption(t *testing.T) {
	const poolBlocks = 24
	sc := sched.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 128, MaxWaiting: 1 << 10, ChunkedPrefill: true}
	wl := chatLoad{conv: 8, turns: 3, maxTokens: 40, system: 2 * 16, userMin: 8, userSpread: 16}
	base := newOffloadCore(t, poolBlocks, sc, nil)
	want := base.workload(wl)
	if base.core.Stats().Sched.Preemptions == 0 {
		t.Fatal("the workload preempts nothing")
	}
	for _, p := range []offload.PolicyKind{offload.PreemptionOnly, offload.StoreOnCompute} {
		t.Run(p.String(), func(t *testing.T) {
			cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 256}})
			cfg.Policy = p
			h := newOffloadCore(t, poolBlocks, sc, &cfg)
			if !sameTokens(h.workload(wl), want) {
				t.Fatal("outputs differ from offload off")
			}
			st := h.core.Offload().Stats()
			preempted := h.core.Stats().Sched.Preemptions
			t.Logf("%d preemptions (off: %d), %d prompt tokens computed (off: %d), stored %d blocks, loaded %d tokens",
				preempted, base.core.Stats().Sched.Preemptions, h.promptComputed, base.promptComputed, st.Tiers[0].StoredBlocks, st.LoadedTokens)
			if preempted == 0 || st.Tiers[0].StoredBlocks == 0 {
				t.Fatal("no preemption or nothing stored")
			}
		})
	}
}

// TestOffloadMultiTurnFigures runs the offload issue's workload through
// the engine core — 64 conversations of 8 turns with a growing history
// behind a shared system prompt, on the llama-8b shape (digest-only) with a
// pool four times too small for the conversations' KV — with offload off
// and with each policy, and reports the prompt tokens recomputed (computed
// beyond what a pool big enough for everything computes). It runs under two
// copy models: copies that complete two steps after they are handed out,
// and copies timed on the simulated clock by modelled bandwidths
// (host memory at 25 GB/s, disk at 3 GB/s, 2 MiB per block), which also
// gives the mean time to first token. Outputs are the same in every run.
// The target, under both models: at least 3 x fewer recomputed
// prompt tokens with store-on-compute than with offload off.
func TestOffloadMultiTurnFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of simulation")
	}
	// Full size under the race detector too: the test is deterministic, and
	// its per-policy assertions (loaded blocks evicted before admission)
	// hold at this size, not at a quarter of it.
	wl := chatLoad{conv: 64, turns: 8, maxTokens: 32, system: 256, userMin: 32, userSpread: 64}
	// Final history ≈ 256 + 8 × (64 + 32) ≈ 1024 tokens = 64 blocks per
	// conversation; without the shared system prompt, 48 each: ~3100
	// blocks of working set.
	const poolBlocks = 3100 / 4
	sc := sched.Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 2048, MaxWaiting: 1 << 12, ChunkedPrefill: true}
	prof, _ := synth.LookupProfile("llama-8b")
	copyBytes := int64(prof.BytesPerToken() * 16)
	bandwidth := map[string]float64{offload.MediumCPU: 25e9, offload.MediumDisk: 3e9}
	cpu := offload.TierConfig{Medium: offload.MediumCPU, Blocks: 4096} // 8 GiB of 2 MiB blocks
	for _, timed := range []bool{false, true} {
		copies := map[bool]string{false: "copies after 2 steps", true: "copies timed"}[timed]
		run := func(poolBlocks int, cfg *offload.Config) (*offloadCore, map[string][]int32) {
			h := newOffloadCoreProfile(t, "llama-8b", false, poolBlocks, sc, cfg)
			if timed {
				h.setTimed(copyBytes, bandwidth)
			}
			return h, h.workload(wl)
		}
		floor, want := run(1<<14, nil)
		offH, off := run(poolBlocks, nil)
		if !sameTokens(off, want) {
			t.Fatalf("%s: outputs depend on the pool size", copies)
		}
		recomputedOff := offH.promptComputed - floor.promptComputed
		t.Logf("%s: pool %d blocks; a big pool computes %d prompt tokens, mean TTFT %v, p99 %v", copies, poolBlocks, floor.promptComputed,
			meanDuration(floor.ttft), p99Duration(floor.ttft))
		t.Logf("  %-30s recomputed %7d prompt tokens, mean TTFT %v, p99 %v, %d cached, %d preemptions",
			"offload off", recomputedOff, meanDuration(offH.ttft), p99Duration(offH.ttft), offH.cachedTokens(), offH.core.Stats().Sched.Preemptions)
		type row struct {
			name    string
			p       offload.PolicyKind
			tiers   []offload.TierConfig
			noHolds bool // loaded prefixes not held until admission
		}
		var rows []row
		for i, name := range offload.PolicyNames {
			rows = append(rows, row{name: name, p: offload.PolicyKind(i + 1), tiers: []offload.TierConfig{cpu}})
		}
		rows = append(rows,
			// Without holds, for comparison: the loads evicted before
			// their requests' admission.
			row{name: "store-on-compute, no holds", p: offload.StoreOnCompute, tiers: []offload.TierConfig{cpu}, noHolds: true},
			// The disk is modelled by its bandwidth; its records live in
			// memory (a disk store is exercised by
			// TestOffloadOutputsEqualOffloadOff).
			row{name: "store-on-compute disk", p: offload.StoreOnCompute, tiers: []offload.TierConfig{{Medium: offload.MediumDisk, Path: modelledDisk, Blocks: 4096}}})
		for _, tc := range rows {
			cfg := offload.DefaultConfig(tc.tiers)
			cfg.Policy = tc.p
			if tc.noHolds {
				cfg.LoadHoldSteps = -1
			}
			h, got := run(poolBlocks, &cfg)
			if !sameTokens(got, want) {
				t.Fatalf("%s, %s: outputs differ from offload off", copies, tc.name)
			}
			rec := h.promptComputed - floor.promptComputed
			st := h.core.Offload().Stats()
			loadedBlocks := st.LoadedTokens / 16
			t.Logf("  %-30s recomputed %7d prompt tokens (%.1fx fewer), mean TTFT %v, p99 %v, %d cached, %d preemptions, loaded %d tokens, stored %d blocks, loaded then evicted %d blocks (%.1f%%), holds dropped %s",
				tc.name, rec, float64(recomputedOff)/float64(max(rec, 1)), meanDuration(h.ttft), p99Duration(h.ttft), h.cachedTokens(),
				h.core.Stats().Sched.Preemptions, st.LoadedTokens, st.Tiers[0].StoredBlocks, st.LoadedEvictedBlocks,
				100*float64(st.LoadedEvictedBlocks)/float64(max(loadedBlocks, 1)), fmt.Sprintf("%d expired, %d valve, %d bound", st.LoadHoldsExpired, st.LoadHoldsValved, st.LoadHoldsBounded))
			if tc.name == "store-on-compute" && rec*3 > recomputedOff {
				t.Errorf("%s: store-on-compute recomputes %d prompt tokens, offload off %d: want at least 3x fewer", copies, rec, recomputedOff)
			}
			if !tc.noHolds && st.LoadedEvictedBlocks != 0 {
				t.Errorf("%s, %s: %d loaded blocks evicted before their requests' admission, with held loads", copies, tc.name, st.LoadedEvictedBlocks)
			}
		}
	}
}
