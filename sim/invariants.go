package sim

import (
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// Expiry invariants (S24; xfer/doc.go, "Expiry"), checked on every message
// an engine handles, not only after a Step's sweep: P may handle a RENEW,
// READ or RELEASE after a lease's due instant and before its next Tick (a
// hung engine resuming, a message delivered at the instant of the
// deadline), and what it does then must be what it would do after the
// sweep.
//
//   - A RENEW of a lease that was due when P handled it does not extend or
//     rebind it, and its RENEW_ACK result is not OK.
//   - A READ of such a lease pins nothing and streams no block; its
//     READ_END is not OK.
//   - Any message naming such a lease ends it (now, or when its reads end)
//     as expired, peer_lost or unclaimed, never for another reason (a
//     claim that arrives at or after the claim deadline is too late) —
//     or for the reason of an injected end (the fault API) due first.
//   - No RENEW_ACK carries an ExpiresInMs beyond the policy's maximum
//     (xfer.Config.MaxExpiresIn): a negative remainder wrapped to ~49 days
//     would be one.
//
//   - A message that reached P before a lease's due instant does not end
//     it as expired, peer_lost or unclaimed, however late P's loop handles
//     it (issue 29: timing is judged on arrival, not on processing).
//
// "Due when P handled it" is due at the message's arrival at P's edge
// (transport.Event.At), which is also when the loop handles it unless the
// loop was busy (World.Pause). The first four are checked on P's state
// around the message; the answers are checked when D receives them,
// matched by connection and RENEW sequence or read id (a dropped answer is
// simply not checked).

// expiryWatch is the cluster's bookkeeping for the expiry invariants.
type expiryWatch struct {
	// renews: RENEWs that named a due lease, by (connection, Seq), with
	// the due leases; reads: READs of a due lease, by (connection, ReadID).
	// An entry goes when D receives the answer. Both stay small: only
	// messages that reach P late are recorded.
	renews map[watchKey][]wire.LeaseID
	reads  map[watchKey]wire.LeaseID
	named  []dueLease // leasesNamed's buffer
	// claims are the claims each P received (a message that made an
	// unclaimed lease claimed) within the last lease duration: when and
	// how long after the grant (checkClaimDeadline).
	claims map[transport.Addr][]claimObs
}

type claimObs struct {
	at  clock.Instant
	lat time.Duration
}

// noteClaims records the leases of named (unclaimed before P handled the
// message that reached it at arrived) that the message claimed.
func (c *World) noteClaims(n *Node, named []dueLease, arrived clock.Instant) {
	p := n.Core.Producer()
	for _, d := range named {
		if d.info.ClaimBy == clock.Never {
			continue
		}
		info, live := p.Lease(d.id)
		q := c.byLease[leaseKey{n.Name, d.id}]
		if !live || info.ClaimBy != clock.Never || q == nil {
			continue
		}
		if c.expiry.claims == nil {
			c.expiry.claims = map[transport.Addr][]claimObs{}
		}
		c.expiry.claims[n.Name] = append(c.expiry.claims[n.Name], claimObs{arrived, arrived.Sub(q.GrantedAt)})
	}
}

// checkClaimDeadline checks the claim deadline P node n gave lease l,
// granted now (issue 31): within [ClaimTimeout, MaxClaimTimeout], and at
// least twice the longest claim latency P saw over the last lease
// duration (capped at MaxClaimTimeout), so that a path whose claims are
// slow keeps the leases that will be claimed.
func (c *World) checkClaimDeadline(n *Node, l wire.LeaseID) {
	tc := c.Spec.Transfer
	info, live := n.Core.Producer().Lease(l)
	if !tc.ClaimsLeases() || !live || info.ClaimBy == clock.Never {
		return
	}
	obs := c.expiry.claims[n.Name]
	i := 0
	for i < len(obs) && obs[i].at < c.Now.Add(-tc.LeaseDuration) {
		i++
	}
	if i > 0 {
		obs = append(obs[:0], obs[i:]...)
		c.expiry.claims[n.Name] = obs
	}
	var slowest time.Duration
	for _, o := range obs {
		slowest = max(slowest, o.lat)
	}
	got, hi := info.ClaimBy.Sub(c.Now), tc.MaxClaimTimeout()
	if want := min(max(2*slowest, tc.ClaimTimeout), hi); got < want || got > hi {
		c.violate("%s: lease %d granted at %v has a claim deadline of %v; want %v..%v (claims took up to %v over the last %v)",
			n.Name, l, c.Now, got, want, hi, slowest, tc.LeaseDuration)
	}
}

type watchKey struct {
	conn transport.ConnID
	id   uint64
}

// dueLease is a lease named by a message to P that was live, and not yet
// decided, when P was handed the message.
type dueLease struct {
	id   wire.LeaseID
	info xfer.LeaseInfo
}

// leasesNamed lists the leases named by message m to node n that are live
// and whose fate is not decided yet, in the cluster's scratch buffer
// (valid until the next call).
func (c *World) leasesNamed(n *Node, m wire.Message) []dueLease {
	p := n.Core.Producer()
	if p == nil {
		return nil
	}
	named := c.expiry.named[:0]
	switch m := m.(type) {
	case *wire.Renew:
		for _, r := range m.Leases {
			named = appendLive(named, p, r.ID)
		}
	case *wire.Read:
		named = appendLive(named, p, m.Lease)
	case *wire.Release:
		named = appendLive(named, p, m.Lease)
	}
	c.expiry.named = named
	return named
}

// appendLive appends lease id of p to named if it is live and undecided.
func appendLive(named []dueLease, p *xfer.Producer, id wire.LeaseID) []dueLease {
	if info, live := p.Lease(id); live && info.Pending == 0 {
		named = append(named, dueLease{id, info})
	}
	return named
}

// checkExpiry runs the expiry invariants around message m, received by
// node n on connection conn, which reached n's edge at arrived: named is
// what leasesNamed found before n handled it.
func (c *World) checkExpiry(n *Node, conn transport.ConnID, m wire.Message, named []dueLease, arrived clock.Instant) {
	var due []dueLease
	for _, d := range named {
		if dueAt(d.info) <= arrived {
			due = append(due, d)
			continue
		}
		// On time at arrival: the message may release it (a RELEASE),
		// never end it as due.
		if rel, ok := n.ReleasedAt[d.id]; ok && rel.At == c.Now {
			switch rel.Reason {
			case wire.ReasonExpired, wire.ReasonPeerLost, wire.ReasonUnclaimed:
				c.violate("%s: %T of lease %d reached P at %v, before its due instant %v, yet ended it as %s when handled at %v",
					n.Name, m, d.id, arrived, dueAt(d.info), rel.Reason, c.Now)
			}
		}
	}
	if len(due) > 0 {
		c.checkDueHandled(n, conn, m, due)
	}
	switch m := m.(type) {
	case *wire.RenewAck:
		max := c.Spec.Transfer.MaxExpiresIn()
		var late []wire.LeaseID
		if c.expiry.renews != nil {
			k := watchKey{conn, m.Seq}
			late = c.expiry.renews[k]
			delete(c.expiry.renews, k)
		}
		for _, r := range m.Results {
			if r.Status != wire.StatusOK {
				continue
			}
			if left := time.Duration(r.ExpiresInMs) * time.Millisecond; left > max {
				c.violate("%s: RENEW_ACK gives lease %d %d ms, beyond the policy's maximum %v", n.Name, r.ID, r.ExpiresInMs, max)
			}
			for _, id := range late {
				if id == r.ID {
					c.violate("%s: RENEW of lease %d that was due at P answered OK (%d ms)", n.Name, r.ID, r.ExpiresInMs)
				}
			}
		}
	case *wire.Block:
		if id, ok := c.expiry.reads[watchKey{conn, m.ReadID}]; ok {
			c.violate("%s: block %d of lease %d streamed for a READ that reached P after the lease was due", n.Name, m.Index, id)
		}
	case *wire.ReadEnd:
		k := watchKey{conn, m.ReadID}
		if id, ok := c.expiry.reads[k]; ok {
			delete(c.expiry.reads, k)
			if m.Status == wire.StatusOK {
				c.violate("%s: READ of lease %d that was due at P ended OK", n.Name, id)
			}
		}
	}
}

// checkDueHandled checks what P did with the due leases a RENEW, READ or
// RELEASE named, and records the message so that its answer is checked.
func (c *World) checkDueHandled(n *Node, conn transport.ConnID, m wire.Message, due []dueLease) {
	p := n.Core.Producer()
	for _, d := range due {
		was := dueAt(d.info)
		after, live := p.Lease(d.id)
		var reason wire.Reason
		switch {
		case live && after.Pending != 0:
			reason = after.Pending
		case live:
			// Untouched is allowed (an unauthenticated session's message
			// reaches no lease; the sweep ends it): extended, rebound or
			// pinned is not.
			if after.Deadline != d.info.Deadline || after.LostAt != d.info.LostAt || after.ClaimBy != d.info.ClaimBy || after.Session != d.info.Session {
				c.violate("%s: %T of lease %d, due at %v, renewed it at %v (or claimed it; deadline %v → %v, lost at %v → %v, claim by %v → %v)",
					n.Name, m, d.id, was, c.Now, d.info.Deadline, after.Deadline, d.info.LostAt, after.LostAt, d.info.ClaimBy, after.ClaimBy)
			}
			if after.Reads > d.info.Reads {
				c.violate("%s: READ of lease %d, due at %v, served at %v", n.Name, d.id, was, c.Now)
			}
		default:
			if rel, ok := n.ReleasedAt[d.id]; ok && rel.At == c.Now {
				reason = rel.Reason
			}
		}
		injected := d.info.FaultReason != 0 && d.info.FaultAt <= min(d.info.Deadline, d.info.LostAt, d.info.ClaimBy)
		if reason != 0 && reason != wire.ReasonExpired && reason != wire.ReasonPeerLost && reason != wire.ReasonUnclaimed &&
			!(injected && reason == d.info.FaultReason) {
			c.violate("%s: %T of lease %d, due at %v, ended it as %s at %v", n.Name, m, d.id, was, reason, c.Now)
		}
	}
	switch m := m.(type) {
	case *wire.Renew:
		if c.expiry.renews == nil {
			c.expiry.renews = map[watchKey][]wire.LeaseID{}
		}
		ids := make([]wire.LeaseID, len(due))
		for i, d := range due {
			ids[i] = d.id
		}
		c.expiry.renews[watchKey{conn, m.Seq}] = ids
	case *wire.Read:
		if c.expiry.reads == nil {
			c.expiry.reads = map[watchKey]wire.LeaseID{}
		}
		c.expiry.reads[watchKey{conn, m.ReadID}] = m.Lease
	}
}

// dueAt is when the lease info describes falls due: its deadline, the end
// of the peer grace after its session was lost, its claim deadline while
// no D session has claimed it, or the end an injected fault set (the fault
// API), whichever is first.
func dueAt(info xfer.LeaseInfo) clock.Instant {
	return min(info.Deadline, info.LostAt, info.ClaimBy, info.FaultAt)
}
