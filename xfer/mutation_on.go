//go:build kvlease_mutation

package xfer

// MutationsBuilt reports whether this build has the mutation switches
// (true only with the kvlease_mutation build tag).
const MutationsBuilt = true

// The mutation switches (see mutation.go). Tests set one, run the
// simulator, and reset it; all are off by default.
var (
	MutateSweepStopsEarly      bool
	MutateReleaseIgnoresRead   bool
	MutateSkipQueuedHeartbeats bool
	MutateNaiveAbort           bool
	MutateRenewSkipsDueCheck   bool
	MutateSpillIgnoresRead     bool
	MutateJudgeOnProcessing    bool
	MutateIgnoreQueueWait      bool
	MutateFixedClaimTimeout    bool
)
