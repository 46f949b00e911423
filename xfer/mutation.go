package xfer

import "github.com/kvlease/kvlease/clock"

// Mutation switches break the protocol on purpose, so that a test can show
// the simulator (package sim) catches each break: a simulator that cannot
// fail proves nothing.
//
// They exist only in builds with the kvlease_mutation tag
// (mutation_on.go), where each is a package-level variable that a test sets
// and resets. In every other build (mutation_off.go) they are constants
// false: the mutated branches are dead code the compiler drops, and no
// caller can switch one on by accident.
//
//	go test -tags kvlease_mutation ./sim/
//
// The nine breaks:
//
//   - MutateSweepStopsEarly: the expiry sweep walks leases in grant order
//     and stops at the first one not yet due, so a renewed lease hides an
//     expired one behind it (head-of-line stall; docs/protocol.md,
//     "Expiry": the sweep ends every due lease, whatever the order of the
//     deadlines).
//   - MutateReleaseIgnoresRead: a release frees the lease's blocks at once
//     even while a read of them is in flight (no pin).
//   - MutateSkipQueuedHeartbeats: D renews only the leases it is reading,
//     not those of requests still queued, so a congested D loses them.
//   - MutateNaiveAbort: a client abort after the prefill finished frees the
//     request's blocks at once, as an engine without a transfer module
//     would: whatever the policy, pinned or bound, with no REVOKED.
//   - MutateRenewSkipsDueCheck: a RENEW is answered from the lease table
//     without the due check (Producer.find instead of lookup), so a RENEW
//     that reaches P after the lease's due instant but before the next sweep
//     gets StatusOK and extends a lease that had expired (S24).
//   - MutateSpillIgnoresRead: a lease spill drops the lease's primary
//     copies when its store ends even while a read streams them from the
//     pool (SpillReady ignores the read's pin), so the read sends memory
//     the pool may reuse (S26).
//   - MutateJudgeOnProcessing: a message's lease timing is judged at the
//     instant P's loop handles it rather than when it reached P
//     (Producer.HandleArrived ignores the arrival stamp), so a RENEW or
//     READ that arrived before the lease's due instant, while P's loop was
//     busy, finds the lease expired (issue 29).
//   - MutateIgnoreQueueWait: D keeps a queued pull past MaxQueueWait
//     (issue 31), renewing its lease for as long as its queue lasts.
//   - MutateFixedClaimTimeout: P's claim deadline stays the configured
//     one whatever the claim latencies it observes (issue 31), so slow
//     claims find their leases freed as unclaimed.

// grantOrderSweep is the mutated expiry sweep (MutateSweepStopsEarly):
// leases in grant order, stopping at the first that is not due. Leases
// waiting for their reads are skipped as the real sweep skips them.
func (p *Producer) grantOrderSweep(now clock.Instant) {
	ls := p.sortedLeases()
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].granted < ls[j-1].granted; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
	for _, l := range ls {
		if l.pending != 0 {
			continue
		}
		if l.due() > now {
			return
		}
		p.end(now, l, p.dueReason(now, l))
	}
}
