//go:build !kvlease_mutation

package xfer

import "testing"

// TestMutationsOff: in a normal build the mutation switches are constants
// false (mutation_off.go), so no protocol break can be switched on and the
// mutated branches compile away.
func TestMutationsOff(t *testing.T) {
	if MutationsBuilt {
		t.Fatal("mutation switches built without the kvlease_mutation tag")
	}
	for name, on := range map[string]bool{
		"MutateSweepStopsEarly":      MutateSweepStopsEarly,
		"MutateReleaseIgnoresRead":   MutateReleaseIgnoresRead,
		"MutateSkipQueuedHeartbeats": MutateSkipQueuedHeartbeats,
		"MutateNaiveAbort":           MutateNaiveAbort,
		"MutateRenewSkipsDueCheck":   MutateRenewSkipsDueCheck,
		"MutateSpillIgnoresRead":     MutateSpillIgnoresRead,
	} {
		if on {
			t.Errorf("%s is on in a normal build", name)
		}
	}
}
