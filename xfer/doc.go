// Package xfer is the P/D transfer lifecycle: the Producer (P side) grants,
// renews, binds, serves and releases leases on finished prefills' blocks;
// the Consumer (D side) waits for remote prefixes, renews their leases in
// one batched heartbeat per P, pulls the blocks with a bounded number of
// reads in flight, verifies each block's checksum, and tells P when it may
// free (RELEASE) — or falls back by policy when it cannot get them.
//
// Both are pure cores (DESIGN.md, "pure cores, thin edges"): no I/O, no
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
// # Bounds
//
// Live leases (MaxLeases), the due heap (one entry per live lease),
// tombstones (Tombstones), reads P streams at once (MaxServedReads), D's
// waiting requests (MaxWaiting), D's reads in flight (MaxInflightReads),
// D's pending release notices (MaxWaiting over all peers), read attempts
// and consecutive failed dials (MaxReadAttempts).
package xfer
