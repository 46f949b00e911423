// Package xfer is the P/D transfer lifecycle: the Producer (P side) grants,
// renews, binds, serves and releases leases on finished prefills' blocks;
// the Consumer (D side) waits for remote prefixes, renews their leases in
// one batched heartbeat per P, pulls the blocks with a bounded number of
// reads in flight, verifies each block's checksum, and tells P when it may
// free (RELEASE) — or falls back by policy when it cannot get them.
//
// Both are pure cores (docs/design.md, "Pure cores, thin edges"): no I/O, no
// clock, no goroutine, randomness from an injected *rand.Rand. Neither is
// safe for concurrent use; engine.Core owns them.
//
// # Driving loop (P)
//
//	p.Connected(now, s)         // an inbound connection
//	p.Handle(now, s, msg)       // every message received on it
//	p.Disconnected(now, s)      // when it is gone
//	p.Tick(now)                 // at p.NextDeadline() or later: expiry
//	msgs, reads := p.Take()     // send msgs; stream each read, then
//	p.ReadFinished(now, s, id, ok)
//
// # Driving loop (D)
//
//	c.Enqueue(now, pull) / c.Reject(now, remote) / c.Abort(now, req)
//	c.Tick(now, admit)          // at c.NextDeadline() or later
//	actions, done := c.Take()   // dial, send, close; done requests
//	c.Dialed / c.DialFailed / c.Handle / c.Disconnected
//
// # Lease rules (P)
//
// A lease holds its blocks in the pool (a kvblock.HoldLease hold) until it
// is released, for one of the counted reasons of wire.Reason. Leases only
// extend: a RENEW moves the deadline to max(old, now+LeaseExtension) and,
// under PolicyLease, binds the lease to the renewing session; a lost session
// releases its leases after PeerGrace. A READ pins the lease: an expiry,
// revocation or release decided during the read takes effect when the read
// ends. A released lease is remembered (a bounded ring of tombstones) so
// late messages get "released", "expired" or "revoked", never data.
//
// # Claim deadline
//
// Under PolicyLease with a ClaimTimeout, a lease must be claimed — renewed,
// read or released with its token on an authenticated session — within
// its claim deadline (Producer.ClaimTimeout after its grant: twice the
// slowest claim P saw over the last lease duration, within
// [ClaimTimeout, Config.MaxClaimTimeout]), or it is released as unclaimed
// (wire.ReasonUnclaimed): its request never reached a decoder, typically
// because a proxy dropped the decode leg after P answered, and without the
// deadline its blocks would stay stranded for the whole lease. The
// Consumer claims when a pull is enqueued: the claim rides the peer's
// next heartbeat when that leaves a heartbeat before the claim deadline
// (Config.RenewsWhenDue), else Enqueue makes the heartbeat due at once
// (with no connection it dials, and the handshake's end renews at once
// too), so only leases nobody holds are affected.
//
// # Heartbeats
//
// D renews per P, at most one RENEW per HeartbeatInterval. Under
// PolicyLease (Config.RenewsWhenDue) the RENEW goes only when a claim or
// a renewal is due (Consumer.renewDue) and then names every unclaimed
// lease and every lease a renewal extends (every lease after a new
// session), so a P's leases renew together; P's RENEW_ACK names only the
// leases that are gone, or is empty when P had been silent towards D for
// LeaseExtension − HeartbeatInterval; D extends its view of a deadline by
// a renewal it sends only while it heard from P recently. The other
// heartbeat policies renew every lease at every heartbeat. A claim after the deadline gets StatusExpired, and D
// falls back (FallbackLeaseGone). Config.Validate requires ClaimTimeout ≥
// HeartbeatInterval (a connected D's regular heartbeat claims within one
// interval even without the immediate claim) and < LeaseDuration.
//
// # Lease spill
//
// Under memory pressure a P engine may move a lease's unread blocks to an
// offload tier (offload.Config.LeaseSpill). Lease spill is the engine's
// (engine/spill.go decides when and runs the copies); the Producer's part: which leases
// may spill (SpillCandidates: no read in flight or waiting, fate not
// decided, nothing spilled already); when their primary copies may go
// (SpillReady, at the end of the spill store: a read that started
// meanwhile streams them from the pool, so the spill is abandoned); and
// SpillDone, which replaces the lease's hold with one naming only its
// resident blocks. A READ naming a spilled block pins the lease as any
// read does and waits (TakeRestores hands the lease to the core, which
// brings the blocks back into the pool); Restored puts them under the
// lease's hold again and streams the waiting reads from the pool, with
// the same checksums; RestoreFailed ends them with READ_END busy or
// internal. A released lease with spilled blocks calls the OnUnspill
// function, so their tier copies go with it. Expiry, revocation, tokens
// and tombstones are unchanged: a spilled lease is a lease.
//
// # Expiry
//
// Expiry is a function of (due instant, now), whatever the order in which
// inputs arrive. A lease's due instant is the earliest of its deadline, the
// end of the peer grace after its session was lost, and its claim deadline
// while no session has claimed it; at any now at or after it the lease is
// expired. Tick sweeps such leases, but the edge
// may hand P a message, an abort or a read's end before it calls Tick at
// that instant (the node handles transport input before it steps), so
// every Producer entry point that takes now and acts on a lease first ends
// it if it is due, exactly as the sweep would (Producer.expireDue):
//
//   - RENEW gets StatusExpired, extends nothing and binds nothing;
//   - READ gets a READ_END with StatusExpired and no block is sent;
//   - RELEASE is not applied (the lease ends as expired, not for D's
//     reason) and answers StatusExpired;
//   - Abort, Delivered, a reused request id, a lost session and ReleaseAll
//     (shutdown) find the lease expired rather than aborted, undelivered,
//     peer-lost later, or shut down.
//
// The lease is released with reason expired (peer_lost when the grace ran
// out first, unclaimed when the claim deadline did), counted once: an ended lease leaves the due heap, so the
// sweep never sees it again. The check comes before the token's, so every
// message naming a due lease gets the answer it would get after the sweep.
// Pins are kept exactly: a lease due while a read is in flight is only
// decided (later messages get StatusExpired); it is released when its last
// read ends, whether or not the sweep ran during the read.
//
// The time left that a RENEW_ACK reports (ExpiresInMs) is deadline − now in
// whole milliseconds, clamped at 0 and at 1<<31, never a negative value
// wrapped to ~49 days; with the due check it is positive whenever the
// status is OK. The Consumer does the same with its own timers (see
// Consumer.expire): a pull whose lease D believes expired, or whose read
// passed its read deadline, is treated so by every entry point before the
// message it handles, not only by Tick.
//
// # Bounds
//
// Live leases (MaxLeases), the due heap (one entry per live lease),
// tombstones (Tombstones), reads P streams at once (MaxServedReads), D's
// waiting requests (MaxWaiting), D's reads in flight (MaxInflightReads),
// D's pending release notices (MaxWaiting over all peers), read attempts
// and consecutive failed dials or handshakes (MaxReadAttempts), a handshake
// (HandshakeTimeout), the failing-peer records and their rate-limited
// warnings (1024 peers).
package xfer
