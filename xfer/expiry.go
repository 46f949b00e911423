package xfer

import (
	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// Expiry as a function of (due instant, now), whatever the order of inputs
// (doc.go, "Expiry"): the helpers every entry point of the Producer and
// the Consumer calls before it acts, so that an input handed to a core
// after a timer fell due, before Tick ran at that instant, finds the
// timer's effect already applied.

// expireDue ends lease l as Tick would at now if its due instant (deadline
// or lost-session grace) has passed and its fate is not decided yet, and
// reports whether it did: l is then released, or waits for its reads with
// the expiry pending. Every entry point that acts on a particular lease
// calls it first, so that what a message or a call does to a lease is a
// function of (due instant, now) and never of whether the sweep ran before
// it (xfer/doc.go, "Expiry"). The release is counted once: a released lease
// leaves the due heap, a pending one leaves it too.
func (p *Producer) expireDue(now clock.Instant, l *leaseState) bool {
	if l.pending != 0 || l.due() > now {
		return false
	}
	p.end(now, l, p.dueReason(now, l))
	return true
}

// liveAfterDue applies expireDue to l and reports whether l is still live
// (not due, or due and pinned by a read, its expiry pending).
func (p *Producer) liveAfterDue(now clock.Instant, l *leaseState) bool {
	p.expireDue(now, l)
	return p.leases[l.id] == l
}

// goneStatus is what a READ or RENEW of a lease released for reason r (or
// decided to be, once its reads end) gets: the same answer before and
// after the reads end.
func goneStatus(r wire.Reason) wire.Status {
	switch r {
	case wire.ReasonExpired, wire.ReasonPeerLost, wire.ReasonUnclaimed:
		return wire.StatusExpired
	case wire.ReasonAborted, wire.ReasonUndelivered, wire.ReasonShutdown:
		return wire.StatusRevoked
	}
	return wire.StatusReleased
}

// remainingMs is the time from now to deadline in whole milliseconds, as a
// RENEW_ACK carries it: 0 once the deadline has passed (a negative
// remainder is never converted, which would wrap to ~49 days), at most
// 1<<31. Truncation rounds down, so D's view of the deadline is never later
// than P's by the rounding.
func remainingMs(deadline, now clock.Instant) uint32 {
	d := deadline.Sub(now)
	if d <= 0 {
		return 0
	}
	return uint32(min(d.Milliseconds(), 1<<31))
}

// expire applies p's timers that are due at now, exactly as Tick does, and
// reports whether p left the consumer. A queued pull whose lease D
// believes expired falls back without trying: P has freed, or will free,
// the blocks. A read not yet sent (P not connected) cannot pin the lease
// either. A sent read with no news past its read deadline has failed and
// is retried (with a new read id: the old read's late blocks are ignored).
//
// Tick calls it for every pull, and so does every entry point that acts on
// pulls (expireAll), before it acts: what a message or a call does to a
// pull is then a function of (deadline, now), never of whether Tick ran
// first at that instant (xfer/doc.go, "Expiry"). Block, the hot path,
// checks only its own pull.
func (c *Consumer) expire(now clock.Instant, p *pull) bool {
	switch {
	case p.state == pullQueued && c.cfg.MaxQueueWait > 0 && now >= p.enqueued.Add(c.cfg.MaxQueueWait) && !MutateIgnoreQueueWait:
		// Waited too long for room to read: give the lease back and
		// recompute.
		if p.aborted {
			c.finish(now, p, Dropped, wire.ReasonAborted, 0)
		} else {
			c.finish(now, p, c.fallbackOutcome(), wire.ReasonFallback, FallbackQueueWait)
		}
		return true
	case (p.state == pullQueued || !p.sent) && now >= p.deadline:
		if p.aborted {
			c.finish(now, p, Dropped, wire.ReasonAborted, 0)
		} else {
			c.finish(now, p, c.fallbackOutcome(), 0, FallbackExpired)
		}
		return true
	case p.state == pullReading && p.sent && now >= p.readDeadline:
		c.stats.Failures[FailureTimeout]++
		c.retry(now, p, FallbackTimeout)
		return c.byReq[p.Req] != p
	}
	return false
}

// expireAll applies the due timers (expire) of every pull that has one,
// in queue order, exactly as a walk of the whole queue would. O(due pulls
// × log pulls).
func (c *Consumer) expireAll(now clock.Instant) {
	if c.timers.len() == 0 || c.timers.top().due > now {
		return
	}
	due := c.duePulls(now)
	for i, p := range due {
		if c.byReq[p.Req] == p {
			c.expire(now, p)
		}
		due[i] = nil
	}
}
