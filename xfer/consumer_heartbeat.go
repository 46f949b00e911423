package xfer

import (
	"fmt"
	"slices"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// D's timers per prefill engine: when a claim and the renewals of that
// peer's leases are due (the heartbeat), the dials, handshakes and reads a
// tick starts, and the RELEASE notices that wait for P's acknowledgement.

// claimBy is the latest instant at which D's claim of p's lease leaves:
// under RenewsWhenDue, a heartbeat before its claim deadline as D knows it
// (ClaimTimeout after the enqueue; P's runs from the grant, a network hop
// earlier), which leaves the claim a heartbeat to reach P. The next
// heartbeat to that P carries the claim; with the default claim timeout
// of two heartbeats a claim never needs a RENEW of its own, and its
// latency (at most a heartbeat and the network) keeps P's adaptive claim
// deadline (Producer.ClaimTimeout) at the configured one. Without
// RenewsWhenDue, at once. Without a claim timeout, the claim rides the
// next heartbeat.
func (c *Consumer) claimBy(p *pull) clock.Instant {
	if !c.cfg.RenewsWhenDue() {
		return p.enqueued
	}
	h := c.cfg.HeartbeatInterval
	if c.cfg.ClaimTimeout <= 0 {
		return p.enqueued.Add(h)
	}
	return p.enqueued.Add(max(c.cfg.ClaimTimeout-h, 0))
}

// renewDue reports whether pr's heartbeat at now must carry a RENEW under
// RenewsWhenDue: a claim cannot wait for the next heartbeat (claimBy), or
// a claimed lease's view of its deadline is within renewMargin of now (a
// renewal extends it by at least LeaseExtension − renewMargin). When one
// is due, the RENEW names every lease a renewal extends, so that the
// leases of a P are renewed together: about one RENEW per P every
// LeaseExtension − renewMargin (two heartbeats by default) rather than
// one per heartbeat. O(1): the peer's pulls are in a heap by the instant
// each becomes due (renewAtOf).
func (c *Consumer) renewDue(now clock.Instant, pr *peer) bool {
	return pr.renew.len() > 0 && pr.renew.top().renewAt <= now
}

// tickPeer advances pr's timers: its dial, handshake, reads waiting for
// the connection, heartbeat and release notices.
func (c *Consumer) tickPeer(now clock.Instant, pr *peer) {
	pulls, unsent := pr.npulls > 0, pr.nunsent > 0
	if pr.state != peerUp {
		// Notices past their deadline are dropped: P has expired the lease.
		c.dropNotices(now, pr)
	}
	wants := len(pr.notes) > 0 || pulls
	switch pr.state {
	case peerHello, peerAuth:
		if now >= pr.handshakeBy {
			c.handshakeFailed(now, pr, FailureHandshakeTimeout,
				fmt.Sprintf("no handshake answer within %v: not a kvlease prefill engine, or a stopped or overloaded one", c.cfg.HandshakeTimeout))
		}
		return
	case peerIdle:
		if !wants {
			delete(c.peers, pr.addr) // nothing to do there: forget it
			c.addrs = nil
			return
		}
		if now >= pr.retryAt {
			pr.state = peerDialing
			c.actions = append(c.actions, Action{Kind: ActionDial, Addr: pr.addr})
		}
		return
	case peerUp:
	default:
		return
	}
	// Reads waiting for the connection (a snapshot: a read with nothing to
	// fetch completes and leaves the queue).
	if unsent {
		for _, p := range c.unsentReads(pr) {
			if p.unsent { // not sent by a nested tick meanwhile
				c.sendRead(now, pr, p)
			}
		}
		c.compactUnsent(pr)
	}
	if c.cfg.Heartbeats() && now >= pr.heartbeat {
		// One RENEW for the leases of this P that D still needs: queued
		// pulls and reads in progress (a read pins the lease only while P
		// streams it; D needs it until its RELEASE). Under RenewsWhenDue
		// only those P needs to hear of (claims, and leases the renewal
		// extends), and none at all when there are none. Split only at
		// the wire's bound.
		all := pr.renewAll || !c.cfg.RenewsWhenDue()
		lazy := !all && !c.renewDue(now, pr)
		pr.renewAll = false
		var refs []wire.LeaseRef
		flush := func() {
			if len(refs) > 0 {
				pr.renewSeq++
				c.send(pr, &wire.Renew{Seq: pr.renewSeq, Leases: refs})
				c.stats.RenewsSent++
				refs = nil
			}
		}
		for p := pr.head; p != nil && !lazy; p = p.pnext {
			if MutateSkipQueuedHeartbeats && p.state == pullQueued {
				continue
			}
			if !p.aborted && !p.Remote.Faults.NoHeartbeats {
				if lazy || (!all && p.claimed && now.Add(c.cfg.LeaseExtension) <= p.deadline) {
					continue // nothing due, or claimed and a renewal would not extend it
				}
				if c.cfg.RenewsWhenDue() {
					// P answers only a lease that is gone: the renewal
					// moves P's deadline to at least now+LeaseExtension
					// (it reaches P after now), and D's view follows while
					// P is heard (it answers at least every
					// renewAckEvery).
					p.claimed = true
					if now.Sub(pr.heard) <= c.cfg.heardWithin() {
						p.deadline = clock.Max(p.deadline, now.Add(c.cfg.LeaseExtension))
					}
					c.touch(p)
				}
				refs = append(refs, wire.LeaseRef{ID: p.Remote.Lease, Token: p.Remote.Token})
				if len(refs) == wire.MaxLeasesPerRenew {
					flush()
				}
			}
		}
		flush()
		pr.heartbeat = now.Add(c.cfg.HeartbeatInterval)
	}
	// The notices due now (to send, or past their deadline), in the order
	// they were queued.
	for _, r := range c.dueNotes(now, pr) {
		if now >= r.next {
			c.send(pr, &wire.Release{Lease: r.lease, Token: r.token, Reason: r.reason})
			c.stats.ReleasesSent[r.reason]++
			r.next = now.Add(c.cfg.RetryInterval)
			r.sent = true
		}
		if now >= r.deadline {
			c.dropNote(pr, r) // P has expired the lease
		} else {
			c.fixNote(pr, r)
		}
	}
}

// dropNotices forgets notices whose lease P has expired by now. A notice
// is sent at least once while P is connected, even late: D's view of the
// deadline is never earlier than P's, but the message costs little.
func (c *Consumer) dropNotices(now clock.Instant, pr *peer) {
	for _, r := range c.dueNotes(now, pr) {
		if now >= r.deadline && (r.sent || pr.state != peerUp) {
			c.dropNote(pr, r)
		}
	}
}

// noteBefore orders notices by due instant, then the order they were
// queued in.
func noteBefore(a, b *relNotice) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

// noteDue is when notice r of pr next needs a tick: its next send or its
// deadline while P is connected, its deadline otherwise.
func noteDue(pr *peer, r *relNotice) clock.Instant {
	if pr.state == peerUp {
		return min(r.next, r.deadline)
	}
	return r.deadline
}

// fixNote re-keys r in pr's notices.
func (c *Consumer) fixNote(pr *peer, r *relNotice) {
	r.due = noteDue(pr, r)
	pr.noteHeap.fix(r)
}

// dropNote forgets notice r of pr.
func (c *Consumer) dropNote(pr *peer, r *relNotice) {
	pr.noteHeap.remove(r)
	delete(pr.notes, r.lease)
	c.notices--
}

// dueNotes returns pr's notices due at now, in the order they were
// queued. The slice is the consumer's, valid until the next call.
func (c *Consumer) dueNotes(now clock.Instant, pr *peer) []*relNotice {
	c.noteBuf = pr.noteHeap.appendDue(c.noteBuf[:0], func(r *relNotice) bool { return r.due <= now })
	slices.SortFunc(c.noteBuf, func(a, b *relNotice) int {
		if a.seq < b.seq {
			return -1
		}
		return 1
	})
	return c.noteBuf
}

// setState moves pr to state st; its notices' keys follow whether it is
// connected (noteDue).
func (c *Consumer) setState(pr *peer, st peerState) {
	up := pr.state == peerUp
	pr.state = st
	if up != (st == peerUp) {
		for _, r := range pr.notes {
			c.fixNote(pr, r)
		}
	}
}
