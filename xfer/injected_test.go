package xfer

import (
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// enqueueFaulty is enqueue with faults injected on the lease (P) and the
// pull (D).
func (e *pairEnv) enqueueFaulty(req uint64, name string, tokens int, lf LeaseFaults, pf PullFaults) Grant {
	e.t.Helper()
	e.P.now = e.now
	pool := e.P.pool
	h := pool.NewHold(kvblock.HoldRequest, 1)
	if !pool.Allocate(h, (tokens+testBlockSize-1)/testBlockSize) {
		e.t.Fatal("pool full")
	}
	fill(pool, name, pool.Blocks(h), tokens)
	g, ok := e.P.p.GrantWith(e.now, name, pool.Blocks(h), tokens, lf)
	pool.Release(h)
	if !ok {
		e.t.Fatalf("grant of %s refused", name)
	}
	r := e.remote(g)
	r.Faults = pf
	if !e.c.Enqueue(e.now, PullRequest{Req: req, Prompt: prompt(name, tokens), Remote: r}) {
		e.t.Fatalf("enqueue %s refused", name)
	}
	return g
}

// settled checks that neither side holds a block any more.
func (e *pairEnv) settled() {
	e.t.Helper()
	if n := e.P.p.NumLeases(); n != 0 {
		e.t.Fatalf("P has %d leases", n)
	}
	for _, pool := range []*kvblock.Pool{e.P.pool, e.dpool} {
		for h := range pool.Holds() {
			if h.Kind != kvblock.HoldRequest {
				e.t.Fatalf("a %v hold is left", h.Kind)
			}
		}
	}
}

func wantRelease(t *testing.T, e *pairEnv, g Grant, reason wire.Reason, notBefore clock.Instant) {
	t.Helper()
	r, ok := released(e.P, g.Lease)
	if !ok || r.reason != reason || r.at < notBefore {
		t.Fatalf("release %+v (found %v), want %v at or after %v", r, ok, reason, notBefore)
	}
}

// An injected expiry ends the lease at its instant although D renews it;
// D, told by REVOKED, falls back.
func TestInjectedExpiryBeatsRenewals(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{EndReason: wire.ReasonExpired, EndAfter: 300 * time.Millisecond},
		PullFaults{Stall: time.Second})
	e.runUntil(at(299), true)
	if _, ok := released(e.P, g.Lease); ok {
		t.Fatal("released before the injected expiry")
	}
	if len(sentOf[*wire.Renew](e)) == 0 {
		t.Fatal("D sent no RENEW while its pull was stalled")
	}
	e.runUntil(at(1500), true)
	wantRelease(t, e, g, wire.ReasonExpired, at(300))
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackLeaseGone {
		t.Fatalf("D's outcome %+v, want a fallback (lease gone)", d)
	}
	if len(sentOf[*wire.Read](e)) != 0 {
		t.Fatal("D read a lease P had expired")
	}
	e.settled()
}

// An injected expiry falls due while a (stalled) read pins the lease: the
// lease ends when the read does, never under it, and D's read succeeds.
func TestInjectedExpiryWaitsForStalledRead(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{EndReason: wire.ReasonExpired, EndAfter: 100 * time.Millisecond,
		StallReads: 200 * time.Millisecond}, PullFaults{})
	e.runUntil(at(150), true)
	if _, ok := released(e.P, g.Lease); ok || e.P.p.NumPinned() != 1 {
		t.Fatalf("at 150 ms: released %v, %d reads pinned; want the read to pin the due lease", ok, e.P.p.NumPinned())
	}
	e.runUntil(at(400), true)
	wantRelease(t, e, g, wire.ReasonExpired, at(200))
	if d, ok := e.doneOf(1); !ok || d.Outcome != Pulled {
		t.Fatalf("D's outcome %+v, want the pull to complete", d)
	}
	e.settled()
}

// An injected revocation is a revocation: reason aborted, D told.
func TestInjectedRevocation(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{EndReason: wire.ReasonAborted}, PullFaults{Stall: 50 * time.Millisecond})
	e.runUntil(at(1000), true)
	wantRelease(t, e, g, wire.ReasonAborted, 0)
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackLeaseGone {
		t.Fatalf("D's outcome %+v, want a fallback (lease gone)", d)
	}
	e.settled()
}

// Refused reads: D retries MaxReadAttempts times, then falls back and
// releases.
func TestInjectedReadRefusal(t *testing.T) {
	cfg := testConfig(PolicyLease)
	e := newPair(t, cfg)
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{RefuseReads: true}, PullFaults{})
	e.runUntil(at(1000), true)
	wantRelease(t, e, g, wire.ReasonFallback, 0)
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackReadInternal {
		t.Fatalf("D's outcome %+v, want a fallback (read_internal)", d)
	}
	if n := len(sentOf[*wire.Read](e)); n != cfg.MaxReadAttempts {
		t.Fatalf("D sent %d READs, want %d", n, cfg.MaxReadAttempts)
	}
	e.settled()
}

// A corrupted read is caught by D's checksum and read again; P's pool is
// untouched, so the second read is good.
func TestInjectedCorruption(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{CorruptReads: 1}, PullFaults{})
	e.runUntil(at(1000), true)
	wantRelease(t, e, g, wire.ReasonReadDone, 0)
	if d, ok := e.doneOf(1); !ok || d.Outcome != Pulled {
		t.Fatalf("D's outcome %+v, want the pull to complete", d)
	}
	if n := e.c.Stats().Failures[FailureCorrupt]; n != 3 {
		t.Fatalf("D counted %d corrupt blocks, want the 3 of the first read", n)
	}
	if n := len(sentOf[*wire.Read](e)); n != 2 {
		t.Fatalf("D sent %d READs, want 2", n)
	}
	e.settled()
}

// Every read corrupted: D falls back (corrupt) and never uses a block.
func TestInjectedCorruptionExhaustsAttempts(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{CorruptReads: 100}, PullFaults{})
	e.runUntil(at(1000), true)
	wantRelease(t, e, g, wire.ReasonFallback, 0)
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackCorrupt {
		t.Fatalf("D's outcome %+v, want a fallback (corrupt)", d)
	}
	e.settled()
}

// An injected fallback gives the prefix up without reading and tells P.
func TestInjectedFallback(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{}, PullFaults{Fallback: true})
	if next := e.c.NextDeadline(); next != e.now {
		t.Fatalf("D's next deadline %v, want now (%v)", next, e.now)
	}
	e.runUntil(at(100), true)
	wantRelease(t, e, g, wire.ReasonFallback, 0)
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackInjected {
		t.Fatalf("D's outcome %+v, want a fallback (injected)", d)
	}
	if len(sentOf[*wire.Read](e)) != 0 {
		t.Fatal("D read a prefix it was told to give up")
	}
	e.settled()
}

// Without heartbeats a stalled pull outlives the lease: P expires it at its
// deadline, D falls back on its own view of that deadline.
func TestInjectedHeartbeatStop(t *testing.T) {
	cfg := testConfig(PolicyLease)
	e := newPair(t, cfg)
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{}, PullFaults{NoHeartbeats: true, Stall: time.Second})
	e.runUntil(at(2000), true)
	wantRelease(t, e, g, wire.ReasonExpired, at(600))
	for _, r := range sentOf[*wire.Renew](e) {
		for _, l := range r.Leases {
			if l.ID == g.Lease {
				t.Fatal("D renewed a lease whose heartbeats were stopped")
			}
		}
	}
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackExpired {
		t.Fatalf("D's outcome %+v, want a fallback (expired)", d)
	}
	e.settled()
}

// A stalled pull starts at its instant, not before; heartbeats keep the
// lease meanwhile, past its first deadline.
func TestInjectedPullStall(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{}, PullFaults{Stall: 900 * time.Millisecond})
	e.runUntil(at(899), true)
	if len(sentOf[*wire.Read](e)) != 0 {
		t.Fatal("D read before the stall ended")
	}
	e.runUntil(at(1200), true)
	wantRelease(t, e, g, wire.ReasonReadDone, at(900))
	if d, ok := e.doneOf(1); !ok || d.Outcome != Pulled {
		t.Fatalf("D's outcome %+v, want the pull to complete", d)
	}
	e.settled()
}

// A stalled read whose session is lost ends with it, unserved, and its
// lease is released by the peer grace, not streamed to nobody.
func TestInjectedStallSessionLost(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueueFaulty(1, "a", 10, LeaseFaults{StallReads: 300 * time.Millisecond}, PullFaults{})
	e.runUntil(at(50), true)
	if e.P.p.NumPinned() != 1 {
		t.Fatalf("%d reads pinned, want the stalled one", e.P.p.NumPinned())
	}
	e.P.p.Disconnected(e.now, e.sess)
	e.c.Disconnected(e.now, e.sess)
	e.sess = 0
	e.reachable = false
	e.runUntil(at(2000), true)
	if _, work := e.P.p.Take(); len(work) != 0 {
		t.Fatal("a stalled read of a lost session was streamed")
	}
	if r, ok := released(e.P, g.Lease); !ok || (r.reason != wire.ReasonPeerLost && r.reason != wire.ReasonExpired) {
		t.Fatalf("release %+v (found %v), want peer_lost or expired", r, ok)
	}
	e.settled()
}
