package xfer

import (
	"fmt"
	"slices"

	"github.com/kvlease/kvlease/clock"
)

// D's pulls in order and by timer: a step's transfer work is
// proportional to what changed, not to D's queue. The queue and each
// peer's pulls are linked lists in enqueue order (O(1) to leave); every
// pull sits in one heap by the earliest of its timers (Consumer.timers)
// and in its peer's heap by when its lease needs a RENEW (peer.renew);
// each peer counts its reads not sent yet. touch re-keys a pull after any
// change to what its timers read.

// dueBefore orders pulls by due instant, then enqueue order.
func dueBefore(a, b *pull) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

// renewBefore orders pulls by renewAt, then enqueue order.
func renewBefore(a, b *pull) bool {
	if a.renewAt != b.renewAt {
		return a.renewAt < b.renewAt
	}
	return a.seq < b.seq
}

// bySeq orders pulls by enqueue order (the queue's), for a batch of due
// ones to be handled as a walk of the queue would.
func bySeq(a, b *pull) int {
	if a.seq < b.seq {
		return -1
	}
	if a.seq > b.seq {
		return 1
	}
	return 0
}

// timerDue is the earliest instant at which one of p's timers falls due:
// its held start (notBefore), its max queue wait, its lease as D knows it
// while no read pins it, or its read's deadline once sent.
func (c *Consumer) timerDue(p *pull) clock.Instant {
	t := clock.Never
	if p.held {
		t = min(t, p.notBefore)
	}
	if p.state == pullQueued && c.cfg.MaxQueueWait > 0 {
		t = min(t, p.enqueued.Add(c.cfg.MaxQueueWait))
	}
	if p.state == pullQueued || !p.sent {
		t = min(t, p.deadline)
	} else {
		t = min(t, p.readDeadline)
	}
	return t
}

// renewAtOf is the first instant at which a heartbeat to p's peer must
// carry a RENEW for p under RenewsWhenDue (renewDue): when its claim can
// no longer wait for the next heartbeat (now + HeartbeatInterval past
// claimBy), or when its lease as D knows it is within renewMargin.
func (c *Consumer) renewAtOf(p *pull) clock.Instant {
	if p.aborted || p.Remote.Faults.NoHeartbeats {
		return clock.Never
	}
	t := clock.Never
	if !p.claimed {
		t = c.claimBy(p).Add(-c.cfg.HeartbeatInterval) + 1
	}
	if p.deadline != clock.Never {
		t = min(t, p.deadline.Add(-c.cfg.renewMargin()))
	}
	return t
}

// link adds a new pull at the tail of the queue and of its peer's pulls.
func (c *Consumer) link(p *pull) {
	c.seq++
	p.seq = c.seq
	p.prev, p.next = c.tail, nil
	if c.tail != nil {
		c.tail.next = p
	} else {
		c.head = p
	}
	c.tail = p
	c.n++
	pr := p.peer
	p.pprev, p.pnext = pr.tail, nil
	if pr.tail != nil {
		pr.tail.pnext = p
	} else {
		pr.head = p
	}
	pr.tail = p
	pr.npulls++
	c.touch(p)
}

// unlink takes p out of the queue, its peer's pulls and the heaps.
func (c *Consumer) unlink(p *pull) {
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		c.head = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		c.tail = p.prev
	}
	c.n--
	pr := p.peer
	if p.pprev != nil {
		p.pprev.pnext = p.pnext
	} else {
		pr.head = p.pnext
	}
	if p.pnext != nil {
		p.pnext.pprev = p.pprev
	} else {
		pr.tail = p.pprev
	}
	pr.npulls--
	p.prev, p.next, p.pprev, p.pnext = nil, nil, nil, nil
	c.timers.remove(p)
	pr.renew.remove(p)
	if p.unsent {
		p.unsent = false
		pr.nunsent--
	}
	if p.held {
		p.held = false
		c.nheld--
	}
}

// touch re-keys p after a change to what its timers read (state, sent,
// held, aborted, claimed, deadline, readDeadline), and counts it among
// its peer's unsent reads or not.
func (c *Consumer) touch(p *pull) {
	p.due = c.timerDue(p)
	c.timers.fix(p)
	p.renewAt = c.renewAtOf(p)
	p.peer.renew.fix(p)
	unsent := p.state == pullReading && !p.sent && !p.aborted
	if unsent != p.unsent {
		p.unsent = unsent
		if unsent {
			p.peer.nunsent++
			if !p.listed {
				p.listed = true
				p.peer.unsentList = append(p.peer.unsentList, p)
				if len(p.peer.unsentList) > 2*p.peer.nunsent+32 {
					c.compactUnsent(p.peer) // pulls that left unsent
				}
			}
		} else {
			p.peer.nunsent--
		}
	}
}

// pullsOf returns pr's pulls in enqueue order (a snapshot: handling one
// may end others). O(pr's pulls).
func (c *Consumer) pullsOf(pr *peer) []*pull {
	ps := make([]*pull, 0, pr.npulls)
	for p := pr.head; p != nil; p = p.pnext {
		ps = append(ps, p)
	}
	return ps
}

// unsentReads returns pr's reads not sent yet, in enqueue order (a
// snapshot: a tick nested in sending one, after a read with nothing to
// fetch completed, sees the others too and sends them first, as a walk of
// the peer's pulls would). O(reads that became unsent since the last
// compactUnsent).
func (c *Consumer) unsentReads(pr *peer) []*pull {
	var list []*pull
	for _, p := range pr.unsentList {
		if p.unsent {
			list = append(list, p)
		}
	}
	slices.SortFunc(list, bySeq)
	return list
}

// compactUnsent keeps in pr's list only its reads still not sent.
func (c *Consumer) compactUnsent(pr *peer) {
	j := 0
	for _, p := range pr.unsentList {
		if p.unsent {
			pr.unsentList[j] = p
			j++
		} else {
			p.listed = false
		}
	}
	clear(pr.unsentList[j:])
	pr.unsentList = pr.unsentList[:j]
}

// duePulls returns the pulls whose timers are due at now, in enqueue
// order. The slice is the consumer's, valid until the next call.
func (c *Consumer) duePulls(now clock.Instant) []*pull {
	c.dueBuf = c.timers.appendDue(c.dueBuf[:0], func(p *pull) bool { return p.due <= now })
	slices.SortFunc(c.dueBuf, bySeq)
	return c.dueBuf
}

// checkTimers verifies the lists, counts and heaps against the pulls.
func (c *Consumer) checkTimers() error {
	n := 0
	for p := c.head; p != nil; p = p.next {
		n++
		if c.byReq[p.Req] != p {
			return fmt.Errorf("xfer: queued request %d is not the consumer's", p.Req)
		}
		if !c.timers.has(p) || p.due != c.timerDue(p) || !p.peer.renew.has(p) || p.renewAt != c.renewAtOf(p) {
			return fmt.Errorf("xfer: request %d's timers are stale (due %v, want %v)", p.Req, p.due, c.timerDue(p))
		}
	}
	if n != c.n || n != len(c.byReq) || c.timers.len() != n {
		return fmt.Errorf("xfer: %d pulls queued, counted %d, %d by request, %d timers", n, c.n, len(c.byReq), c.timers.len())
	}
	for _, pr := range c.peers {
		k, u := 0, 0
		for p := pr.head; p != nil; p = p.pnext {
			k++
			if p.peer != pr {
				return fmt.Errorf("xfer: request %d listed under peer %s", p.Req, pr.addr)
			}
			if p.state == pullReading && !p.sent && !p.aborted {
				u++
			}
		}
		if k != pr.npulls || u != pr.nunsent || pr.renew.len() != k {
			return fmt.Errorf("xfer: peer %s has %d pulls (counted %d), %d unsent (counted %d)", pr.addr, k, pr.npulls, u, pr.nunsent)
		}
		if pr.noteHeap.len() != len(pr.notes) {
			return fmt.Errorf("xfer: peer %s has %d notices, %d timed", pr.addr, len(pr.notes), pr.noteHeap.len())
		}
	}
	return nil
}
