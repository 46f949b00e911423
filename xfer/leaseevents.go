package xfer

import (
	"fmt"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// LeaseEventKind is a step in a lease's life on P.
type LeaseEventKind uint8

const (
	// LeaseGranted: a finished prefill's blocks are leased.
	LeaseGranted LeaseEventKind = iota + 1
	// LeaseClaimed: a decode engine presented the lease's token for the
	// first time (a renewal, a read or a release on an authenticated
	// session): the request reached a decoder.
	LeaseClaimed
	// LeaseRenewed: a decode engine's heartbeat renewed the lease.
	LeaseRenewed
	// LeaseReleased: the lease ended and its hold on the blocks was
	// dropped, for Reason.
	LeaseReleased
)

func (k LeaseEventKind) String() string {
	switch k {
	case LeaseGranted:
		return "LeaseGranted"
	case LeaseClaimed:
		return "LeaseClaimed"
	case LeaseRenewed:
		return "LeaseRenewed"
	case LeaseReleased:
		return "LeaseReleased"
	}
	return fmt.Sprintf("LeaseEventKind(%d)", uint8(k))
}

// LeaseEvent is one step of a lease's life, recorded by the Producer when
// Config.LeaseEvents is set (for `--kv-events-lease-topic`: no engine
// publishes its KV leases, so routers and operators cannot see why memory
// is held). Times are durations, not instants: the core has no wall clock.
type LeaseEvent struct {
	Kind    LeaseEventKind
	Lease   wire.LeaseID
	Request string
	// Blocks and Tokens are what a LeaseGranted leases.
	Blocks, Tokens int
	// ExpiresIn is the time left until the lease's deadline, after a
	// LeaseGranted or a LeaseRenewed.
	ExpiresIn time.Duration
	// Peer is the decode engine's id on LeaseClaimed and LeaseRenewed.
	Peer string
	// Reason, Held (since the grant) and Read (some read completed) are a
	// LeaseReleased's.
	Reason wire.Reason
	Held   time.Duration
	Read   bool
}

// TakeLeaseEvents returns the lease events recorded since the previous
// call and hands their slice to the caller; nil when Config.LeaseEvents is
// off or nothing happened.
func (p *Producer) TakeLeaseEvents() []LeaseEvent {
	evs := p.levents
	p.levents = nil
	return evs
}

func (p *Producer) leaseEvent(ev LeaseEvent) {
	if p.cfg.LeaseEvents {
		p.levents = append(p.levents, ev)
	}
}

// peerOf is session s's decode engine id, "" before its handshake.
func (p *Producer) peerOf(s SessionID) string {
	if ss, ok := p.sessions[s]; ok {
		return ss.peer
	}
	return ""
}

// untilDeadline is the lease's time left at now, never negative.
func untilDeadline(l *leaseState, now clock.Instant) time.Duration {
	return max(l.deadline.Sub(now), 0)
}
