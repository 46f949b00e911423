package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/offload"
)

// TestOffloadTiers runs a P/D workload on engines with offload tiers under
// each store policy, with a pool small enough to preempt and evict and
// copies that fail part way: every output equals the oracle's, the tiers
// were used, and no hold is left (store holds end with their copies, failed
// or not).
func TestOffloadTiers(t *testing.T) {
	for _, pol := range []offload.PolicyKind{offload.StoreOnCompute, offload.PreemptionOnly, offload.Spillover} {
		for _, fail := range []float64{0, 0.3} {
			t.Run(fmt.Sprintf("%v/fail=%v", pol, fail), func(t *testing.T) {
				spec := DefaultSpec()
				spec.Blocks = 96
				cfg := offload.DefaultConfig([]offload.TierConfig{
					{Medium: offload.MediumCPU, Blocks: 48},
					{Medium: offload.MediumDisk, Path: "sim", Blocks: 256},
				})
				cfg.Policy = pol
				spec.Offload = &cfg
				spec.OffloadLatency, spec.OffloadBandwidth, spec.OffloadFailProb = 200*time.Microsecond, 1e9, fail
				spec.DecodeSched = spec.Sched
				spec.DecodeSched.MaxNumSeqs = 3
				c := New(spec)
				var rs []*Req
				for i := range 48 {
					// Eight conversations taking turns: each turn extends
					// its conversation's prompt, and the pool cannot keep
					// all eight prefixes, so later turns find theirs in
					// the tiers.
					r := newReq(c, fmt.Sprintf("r%02d", i), 0, 60)
					r.Prompt = prompt(i%8, 200+16*(i/8))
					rs = append(rs, r)
					c.Submit(clock.Instant(i)*clock.Instant(15*ms), r)
				}
				settle(t, c, 2*time.Minute)
				stores, loads := 0, 0
				for _, n := range c.Nodes {
					for _, ts := range n.Core.Offload().Stats().Tiers {
						stores += int(ts.StoredBlocks)
						loads += int(ts.LoadedBlocks)
					}
				}
				for _, r := range rs {
					if !r.Done || r.Error != "" {
						t.Errorf("%s: done %v error %q", r.ID, r.Done, r.Error)
					}
				}
				if stores == 0 || (pol == offload.StoreOnCompute && loads == 0) {
					t.Errorf("stored %d blocks, loaded %d", stores, loads)
				}
				t.Logf("stored %d blocks, loaded %d", stores, loads)
			})
		}
	}
}
