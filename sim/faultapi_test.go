package sim

import (
	"strings"
	"testing"

	"github.com/kvlease/kvlease/faultapi"
	"github.com/kvlease/kvlease/xfer"
)

// TestSwarmAPIFaults runs swarm seeds with the fault API's faults on top of
// their own: every invariant, the oracle check and the liveness phase hold
// (a fault changes when things happen, not what may be freed), every kind
// hits some request, and a seed replays to the same trace.
func TestSwarmAPIFaults(t *testing.T) {
	n := max(swarmSeeds()/3, 20)
	hit := map[string]int{}
	for _, pol := range []xfer.Policy{xfer.PolicyLease, xfer.PolicyVLLMLease} {
		for i := range n {
			seed := *seedFlag + 3_000_000 + uint64(i)
			res, err := RunSeed(seed, Options{Policy: pol, APIFaults: true, FullKV: i%4 == 0, Sparse: i%2 == 1})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range res.Injected {
				hit[k] += v
			}
		}
	}
	for _, k := range faultapi.Kinds() {
		if hit[k.String()] == 0 {
			t.Errorf("no request was hit by %s over %d seeds", k, n)
		}
	}
	t.Logf("faults injected over %d seeds per policy: %v", n, hit)

	a, errA := RunSeed(3, Options{APIFaults: true})
	b, errB := RunSeed(3, Options{APIFaults: true})
	if errA != nil || errB != nil || a.TraceHash != b.TraceHash || len(a.Injected) == 0 {
		t.Fatalf("seed 3 with API faults: %x %v, %x %v, injected %v", a.TraceHash, errA, b.TraceHash, errB, a.Injected)
	}
	plain, _ := RunSeed(3, Options{})
	if plain.Profile.String() != a.Profile.String() {
		t.Errorf("API faults changed the seed's profile:\n%s\n%s", plain.Profile, a.Profile)
	}
	if !strings.Contains(ReplayCommand(3, Options{APIFaults: true}), "--api-faults") {
		t.Error("the replay command leaves --api-faults out")
	}
}
