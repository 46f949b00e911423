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
	var pols []offload.PolicyKind
	for i := range offload.PolicyNames {
		pols = append(pols, offload.PolicyKind(i+1))
	}
	for _, pol := range pols {
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

// headPolicy is a store policy defined outside package offload: it offers
// the first max full blocks of each request (a shared system prompt, say)
// as they are computed, and counts its triggers.
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

// TestOffloadCustomPolicy: a policy defined in a test, outside offload,
// runs in every engine of the simulator through Config.NewPolicy — each
// engine builds its own — with no change to the simulator or the engine:
// the tiers take only the blocks it offers, answers equal the oracle's and
// nothing is left held.
func TestOffloadCustomPolicy(t *testing.T) {
	spec := DefaultSpec()
	spec.Blocks = 96
	cfg := offload.DefaultConfig([]offload.TierConfig{{Medium: offload.MediumCPU, Blocks: 256}})
	var built []*headPolicy
	cfg.NewPolicy = func(env offload.PolicyEnv) offload.Policy {
		p := &headPolicy{max: 2, calls: map[offload.Trigger]int{}}
		built = append(built, p)
		return p
	}
	spec.Offload = &cfg
	spec.OffloadLatency, spec.OffloadBandwidth = 200*time.Microsecond, 1e9
	c := New(spec)
	var rs []*Req
	for i := range 16 {
		r := newReq(c, fmt.Sprintf("r%02d", i), 0, 20)
		r.Prompt = prompt(i, 200)
		rs = append(rs, r)
		c.Submit(clock.Instant(i)*clock.Instant(15*ms), r)
	}
	settle(t, c, 2*time.Minute)
	if len(built) != len(c.Nodes) {
		t.Fatalf("%d policies built for %d engines", len(built), len(c.Nodes))
	}
	stored, calls := 0, 0
	for i, n := range c.Nodes {
		st := n.Core.Offload().Stats()
		if st.Policy != "head" {
			t.Fatalf("%s runs policy %q", n.Name, st.Policy)
		}
		stored += int(st.Tiers[0].StoredBlocks)
		calls += built[i].calls[offload.OnCompute]
	}
	for _, r := range rs {
		if !r.Done || r.Error != "" {
			t.Errorf("%s: done %v error %q", r.ID, r.Done, r.Error)
		}
	}
	// At most two blocks per request and engine (P computes the prompt, D
	// holds it after its pull), and the prompts are distinct.
	if calls == 0 || stored == 0 || stored > 2*len(rs)*len(c.Nodes) {
		t.Fatalf("%d compute triggers, %d blocks stored for %d requests", calls, stored, len(rs))
	}
}
