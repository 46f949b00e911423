//go:build kvlease_mutation

package sim

import (
	"strings"
	"testing"

	"github.com/kvlease/kvlease/xfer"
)

// maxMutationSeeds bounds how many swarm seeds a mutation may survive: each
// must be caught within it.
const maxMutationSeeds = 200

// TestMutationsCaught switches on one deliberate protocol break at a time
// (xfer's mutation switches, built only with -tags kvlease_mutation) and
// requires the swarm to fail within maxMutationSeeds seeds, for the reason
// that break must cause. A simulator that cannot fail proves nothing.
func TestMutationsCaught(t *testing.T) {
	tests := []struct {
		name string
		flag *bool
		// want is a piece of the failure the break must produce (the check
		// that catches it).
		want string
		// opts are the swarm's options (the zero value: the standard run).
		opts Options
	}{
		{"sweep stops at the first unexpired lease", &xfer.MutateSweepStopsEarly, "is still live", Options{}},
		{"release ignores an in-flight read", &xfer.MutateReleaseIgnoresRead, "not live and pinned", Options{}},
		{"consumer skips heartbeats while queued", &xfer.MutateSkipQueuedHeartbeats, "expired under a waiting, reachable decoder", Options{}},
		{"abort frees a finished request's blocks at once", &xfer.MutateNaiveAbort, "not live and pinned", Options{}},
		{"renew answered without the due check", &xfer.MutateRenewSkipsDueCheck, "renewed it at", Options{}},
		// Issue 29: a RENEW that reached a busy P on time is on time.
		{"lease timing judged on processing, not arrival", &xfer.MutateJudgeOnProcessing, "before its due instant", Options{}},
		// Issue 31: a queued pull past the max queue wait gives its lease back.
		{"decoder keeps a queued pull past the max queue wait", &xfer.MutateIgnoreQueueWait, "past the max queue wait", Options{}},
		{"claim deadline ignores the observed claim latency", &xfer.MutateFixedClaimTimeout, "has a claim deadline of", Options{}},
		// Lease spill (S26) on every seed, with small pools so that reads
		// run while spill stores end.
		{"spill drops a lease's blocks under a read", &xfer.MutateSpillIgnoresRead, "whose primary copy the lease no longer holds",
			Options{Offload: OffloadAny, LeaseSpill: "always", Blocks: 56}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			*tt.flag = true
			defer func() { *tt.flag = false }()
			for i := range maxMutationSeeds {
				seed := *seedFlag + uint64(i)
				res, err := RunSeed(seed, tt.opts)
				if err == nil {
					continue
				}
				first := res.Failures[0]
				if !strings.Contains(strings.Join(res.Failures, "\n"), tt.want) {
					t.Fatalf("seed %d failed, but not for the expected reason (%q):\n%v", seed, tt.want, err)
				}
				t.Logf("caught after %d seeds (seed %d): %s", i+1, seed, firstLine(first))
				return
			}
			t.Fatalf("not caught in %d seeds", maxMutationSeeds)
		})
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
