//go:build !kvlease_mutation

package xfer

// MutationsBuilt reports whether this build has the mutation switches
// (true only with the kvlease_mutation build tag).
const MutationsBuilt = false

// The mutation switches (see mutation.go): constants false in normal
// builds, so the mutated branches compile away.
const (
	MutateSweepStopsEarly      = false
	MutateReleaseIgnoresRead   = false
	MutateSkipQueuedHeartbeats = false
	MutateNaiveAbort           = false
	MutateRenewSkipsDueCheck   = false
	MutateSpillIgnoresRead     = false
	MutateJudgeOnProcessing    = false
	MutateIgnoreQueueWait      = false
	MutateFixedClaimTimeout    = false
)
