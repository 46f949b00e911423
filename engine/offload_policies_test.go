package engine

import (
	"fmt"
	"testing"

	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/sched"
)

// headPolicy is a store policy defined outside package offload: on every
// trigger it offers a request's first max full blocks (a shared system
// prompt, say), and it counts its triggers.
type headPolicy struct {
	offload.PolicyBase
	max   int
	calls map[offload.Trigger]int
}

func (p *headPolicy) Name() string { return "head" }

func (p *headPolicy) Request(ev offload.RequestEvent) offload.Offer {
	p.calls[ev.Trigger]++
	return offload.Offer{To: min(p.max, len(ev.Hashes))}
}

// everyPolicy is the five built-in policies and headPolicy.
func everyPolicy() []string { return append(append([]string(nil), offload.PolicyNames...), "head") }

func policyConfig(name string, tiers []offload.TierConfig) (*offload.Config, *headPolicy) {
	cfg := offload.DefaultConfig(tiers)
	if name == "head" {
		hp := &headPolicy{max: 4, calls: map[offload.Trigger]int{}}
		cfg.NewPolicy = func(offload.PolicyEnv) offload.Policy { return hp }
		return &cfg, hp
	}
	k, err := offload.ParsePolicy(name)
	if err != nil {
		panic(err)
	}
	cfg.Policy = k
	return &cfg, nil
}

// TestScenarioS20S21EveryPolicy (docs/scenarios.md S20, S21) under every
// policy, the custom one included, through engine.Core: a multi-turn
// workload on a pool that preempts and evicts, copies completed two steps
// late, a tier too small for the working set and a reuse filter, so the
// tier refuses offers. After every step the core's checks pass and every
// block of every store in flight is held (S20: requests finish with their
// stores in flight, and under store-on-finish and request-level every
// store starts at a finish); the tier refuses blocks and still stores
// others (S21: the watermark passes no refused block, and refused blocks
// are offered again — by the same request at its next trigger, or by a
// later request computing them); outputs equal offload off; nothing is
// left held.
func TestScenarioS20S21EveryPolicy(t *testing.T) {
	const nConv, turns, maxTokens, poolBlocks = 12, 4, 16, 40
	sc := sched.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 256, MaxWaiting: 1 << 10, ChunkedPrefill: true}
	want := newOffloadCoreProfile(t, "tiny", false, poolBlocks, sc, nil).conversations(nConv, turns, maxTokens)
	for _, name := range everyPolicy() {
		for _, threshold := range []int{0, 2} {
			if threshold > 0 && name == offload.RequestLevel.String() {
				continue // refused by Validate: the filter would refuse every unit
			}
			t.Run(fmt.Sprintf("%s/threshold=%d", name, threshold), func(t *testing.T) {
				cfg, hp := policyConfig(name, []offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 20}})
				cfg.StoreThreshold = threshold
				cfg.MaxInflightStoreBlocks = 12
				h := newOffloadCoreProfile(t, "tiny", false, poolBlocks, sc, cfg)
				if !sameTokens(h.conversations(nConv, turns, maxTokens), want) {
					t.Fatal("outputs differ from offload off")
				}
				st := h.core.Offload().Stats()
				if st.Policy != name {
					t.Fatalf("policy %q, want %q", st.Policy, name)
				}
				ts := st.Tiers[0]
				t.Logf("stored %d, refused %d, evicted %d, loaded %d blocks", ts.StoredBlocks, ts.RefusedBlocks, ts.EvictedBlocks, ts.LoadedBlocks)
				// The reuse filter refuses first offers; request-level's
				// whole units do not fit the tier's room.
				refuses := threshold > 0 || name == offload.RequestLevel.String()
				if ts.StoredBlocks == 0 || (refuses && ts.RefusedBlocks == 0) {
					t.Fatalf("stored %d, refused %d: the tier must take some and refuse some", ts.StoredBlocks, ts.RefusedBlocks)
				}
				if st.Requests != 0 {
					t.Fatalf("%d requests still tracked", st.Requests)
				}
				if hp != nil && (hp.calls[offload.OnCompute] == 0 || hp.calls[offload.OnFinish] == 0) {
					t.Fatalf("custom policy triggers %v", hp.calls)
				}
			})
		}
	}
}
