package xfer

import (
	"fmt"

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
// one per heartbeat.
func (c *Consumer) renewDue(now clock.Instant, pr *peer) bool {
	next := now.Add(c.cfg.HeartbeatInterval)
	for _, p := range c.queue {
		if p.peer != pr || p.aborted || p.Remote.Faults.NoHeartbeats {
			continue
		}
		if !p.claimed && next > c.claimBy(p) {
			return true
		}
		if p.deadline.Sub(now) <= c.cfg.renewMargin() {
			return true
		}
	}
	return false
}

func (c *Consumer) tickPeer(now clock.Instant, pr *peer) {
	var pulls, unsent bool
	for _, p := range c.queue {
		if p.peer == pr {
			pulls = true
			if p.state == pullReading && !p.sent && !p.aborted {
				unsent = true
				break
			}
		}
	}
	c.tickPeerMarked(now, pr, pulls, unsent)
}

// tickPeerMarked is tickPeer given whether pr has pulls and whether one
// of them is a read not sent yet.
func (c *Consumer) tickPeerMarked(now clock.Instant, pr *peer, pulls, unsent bool) {
	if pr.state != peerUp {
		// Notices past their deadline are dropped: P has expired the lease.
		c.dropNotices(now, pr)
	}
	wants := len(pr.releases) > 0 || pulls
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
		for _, p := range c.pullsOf(pr) {
			if p.state == pullReading && !p.sent && !p.aborted {
				c.sendRead(now, pr, p)
			}
		}
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
		for _, p := range c.queue {
			if MutateSkipQueuedHeartbeats && p.state == pullQueued {
				continue
			}
			if p.peer == pr && !p.aborted && !p.Remote.Faults.NoHeartbeats {
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
	for i := range pr.releases {
		r := &pr.releases[i]
		if now >= r.next {
			c.send(pr, &wire.Release{Lease: r.lease, Token: r.token, Reason: r.reason})
			c.stats.ReleasesSent[r.reason]++
			r.next = now.Add(c.cfg.RetryInterval)
			r.sent = true
		}
	}
	c.dropNotices(now, pr)
}

// dropNotices forgets notices whose lease P has expired by now. A notice
// is sent at least once while P is connected, even late: D's view of the
// deadline is never earlier than P's, but the message costs little.
func (c *Consumer) dropNotices(now clock.Instant, pr *peer) {
	j := 0
	for _, r := range pr.releases {
		if now < r.deadline || (!r.sent && pr.state == peerUp) {
			pr.releases[j] = r
			j++
		}
	}
	c.notices -= len(pr.releases) - j
	clear(pr.releases[j:])
	pr.releases = pr.releases[:j]
}
