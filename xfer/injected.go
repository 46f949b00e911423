package xfer

import (
	"fmt"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// Injected faults (package faultapi decides which request they hit; the HTTP
// edge hands them over with the request). They change when things happen,
// never the rules: an early end goes through the due sweep and end (a
// read in flight defers it), a stalled read keeps its lease pinned, a
// corrupted block is a wrong checksum on a copy of the block's header
// (the pool's bytes are untouched) that D's check catches.

// LeaseFaults are the faults injected on one lease (P side). The zero
// value injects nothing.
type LeaseFaults struct {
	// EndReason, when set (ReasonExpired or ReasonAborted), ends the lease
	// EndAfter after its grant with that reason, whatever renewals move
	// its deadline to: expired as at its deadline, aborted as a revocation
	// after the response was delivered.
	EndReason wire.Reason
	EndAfter  time.Duration
	// RefuseReads answers every READ of the lease with StatusInternal.
	RefuseReads bool
	// StallReads holds each read's blocks this long before they are
	// streamed; the read pins the lease meanwhile.
	StallReads time.Duration
	// CorruptReads is how many of the lease's first reads carry a checksum
	// that does not match their blocks.
	CorruptReads int
}

// Zero reports whether f injects nothing.
func (f *LeaseFaults) Zero() bool { return *f == LeaseFaults{} }

// PullFaults are the faults injected on one pull (D side), carried in
// Remote. The zero value injects nothing.
type PullFaults struct {
	// NoHeartbeats: D neither claims nor renews the lease while the pull
	// waits or reads.
	NoHeartbeats bool
	// Stall: the pull does not start before this long after it was
	// enqueued (heartbeats go on meanwhile, unless NoHeartbeats).
	Stall time.Duration
	// Fallback: the pull gives up at once without reading, as a failed one
	// would (RELEASE fallback to P; FallbackInjected).
	Fallback bool
}

// stalledRead is a read held back by LeaseFaults.StallReads.
type stalledRead struct {
	at clock.Instant
	w  ReadWork
}

// GrantWith is Grant with faults injected on the new lease.
func (p *Producer) GrantWith(now clock.Instant, req string, blocks []kvblock.BlockID, numTokens int, f LeaseFaults) (Grant, bool) {
	g, ok := p.Grant(now, req, blocks, numTokens)
	if !ok || f.Zero() {
		return g, ok
	}
	l := p.leases[g.Lease]
	switch f.EndReason {
	case 0:
	case wire.ReasonExpired, wire.ReasonAborted:
		l.faultAt, l.faultReason = now.Add(max(f.EndAfter, 0)), f.EndReason
		p.schedule(l) // earlier: re-keyed at once
	default:
		panic(fmt.Sprintf("xfer: injected lease end with reason %v", f.EndReason))
	}
	l.refuseReads = f.RefuseReads
	l.stallReads = max(f.StallReads, 0)
	l.corruptReads = max(f.CorruptReads, 0)
	return g, ok
}

// serveRead queues read w of l, pinned by the caller, for the edge to
// stream: at once, or after l's injected stall, its blocks' checksums
// inverted while l has injected corrupt reads left.
func (p *Producer) serveRead(now clock.Instant, l *leaseState, w ReadWork) {
	if l.corruptReads > 0 {
		// w's blocks are copies of their headers: the pool and other
		// reads keep the true checksum.
		l.corruptReads--
		for i := range w.Blocks {
			w.Blocks[i].Checksum = ^w.Blocks[i].Checksum
		}
	}
	if l.stallReads > 0 {
		p.stalled = append(p.stalled, stalledRead{at: now.Add(l.stallReads), w: w})
		return
	}
	p.work = append(p.work, w)
}

// releaseStalled moves the stalled reads due at now to the work list. A
// read that ended meanwhile (its session was lost) is dropped; one whose
// session the core closed ends unsuccessfully now, as the edge would have
// reported it.
func (p *Producer) releaseStalled(now clock.Instant) {
	j := 0
	for _, sr := range p.stalled {
		if sr.at > now {
			p.stalled[j] = sr
			j++
			continue
		}
		key := readKey{sr.w.Session, sr.w.ReadID}
		l, ok := p.reads[key]
		switch {
		case !ok || l.id != sr.w.Lease:
		case p.sessions[sr.w.Session] == nil:
			p.finishRead(now, key, l, false)
		default:
			p.work = append(p.work, sr.w)
		}
	}
	clear(p.stalled[j:])
	p.stalled = p.stalled[:j]
}

// nextStalled is the earliest instant a stalled read is due, or
// clock.Never.
func (p *Producer) nextStalled() clock.Instant {
	t := clock.Never
	for _, sr := range p.stalled {
		t = min(t, sr.at)
	}
	return t
}

// injected carries out the pull faults due at now: a stalled pull may
// start from now on; a pull told to fall back does, telling P.
func (c *Consumer) injected(now clock.Instant) {
	if c.nheld == 0 {
		return
	}
	var fall []*pull
	for p := c.head; p != nil; p = p.next {
		if !p.held || p.notBefore > now {
			continue
		}
		p.held = false
		c.nheld--
		c.touch(p)
		if p.Remote.Faults.Fallback && p.state == pullQueued {
			fall = append(fall, p)
		}
	}
	for _, p := range fall {
		c.finish(now, p, c.fallbackOutcome(), wire.ReasonFallback, FallbackInjected)
	}
}
