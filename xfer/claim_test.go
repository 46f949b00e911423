package xfer

import (
	"time"

	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// S25: a lease that no decode engine claims (renews, reads or releases
// with its token on an authenticated session) within the claim timeout is
// released unclaimed; a late claim gets "gone" and D falls back.

func TestS25UnclaimedLeaseReleasedAtClaimDeadline(t *testing.T) {
	e := newPEnv(t, claimConfig())
	g := e.grant("r", 8)
	e.p.Delivered(e.now, "r", true)
	if info, _ := e.p.Lease(g.Lease); info.ClaimBy != at(150) || e.p.NextDeadline() != at(150) {
		t.Fatalf("lease %+v next %v, want a claim deadline at 150 ms", info, e.p.NextDeadline())
	}
	// A message of a session that is not authenticated claims nothing (it
	// is refused), and neither does a wrong token.
	e.p.Connected(e.now, 99)
	e.p.Handle(e.now, 99, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
	e.p.Take()
	s := e.connect()
	bad := ref(g)
	bad.Token[0] ^= 1
	if ack, ok := only[*wire.RenewAck](t, e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{bad}})); !ok || ack.Results[0].Status != wire.StatusBadToken {
		t.Fatalf("renew with a wrong token: %+v", ack)
	}
	e.advance(at(149))
	if _, ok := released(e, g.Lease); ok {
		t.Fatal("released before its claim deadline")
	}
	e.advance(at(150))
	r, ok := released(e, g.Lease)
	if !ok || r.reason != wire.ReasonUnclaimed || r.at != at(150) || e.pool.NumHeld() != 0 {
		t.Fatalf("release %+v %v held %d, want unclaimed at 150 ms", r, ok, e.pool.NumHeld())
	}
	st := e.p.Stats()
	if st.Released[wire.ReasonUnclaimed] != 1 || st.BlockSecondsUnread == 0 || st.BlockSecondsRead != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Late claims: every one gets "expired", no data, no second release.
	e.advance(at(200))
	if ack, ok := only[*wire.RenewAck](t, e.send(s, &wire.Renew{Seq: 2, Leases: []wire.LeaseRef{ref(g)}})); !ok || ack.Results[0].Status != wire.StatusExpired {
		t.Fatalf("late renew: %+v", ack)
	}
	if re, ok := only[*wire.ReadEnd](t, e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})); !ok || re.Status != wire.StatusExpired || len(e.takeReads()) != 0 {
		t.Fatalf("late read: %+v", re)
	}
	if a, ok := only[*wire.ReleaseAck](t, e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})); !ok || a.Status != wire.StatusExpired {
		t.Fatalf("late release: %+v", a)
	}
	if len(e.rel) != 1 {
		t.Fatalf("releases %+v", e.rel)
	}
	// The late RENEW and READ count one lease claimed after its release
	// as unclaimed (the RELEASE is no claim).
	if n := e.p.Stats().ClaimedAfterRelease; n[wire.ReasonUnclaimed] != 1 || len(n) != 1 {
		t.Fatalf("claimed after release %v, want unclaimed 1", n)
	}
}

func TestS25ClaimKeepsLease(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim func(e *pEnv, s SessionID, g Grant)
		// until is when the claimed lease ends, and why.
		until  int
		reason wire.Reason
	}{
		{"renew", func(e *pEnv, s SessionID, g Grant) {
			e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
		}, 600, wire.ReasonExpired},
		{"read", func(e *pEnv, s SessionID, g Grant) {
			e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
			if w := e.takeReads(); len(w) != 1 {
				e.t.Fatalf("reads %+v", w)
			}
			e.p.ReadFinished(e.now, s, 1, true)
		}, 600, wire.ReasonExpired},
		{"release", func(e *pEnv, s SessionID, g Grant) {
			e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})
		}, 100, wire.ReasonReadDone},
		{"session lost after the claim", func(e *pEnv, s SessionID, g Grant) {
			e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
			e.advance(at(120))
			e.p.Disconnected(e.now, s) // grace 40 ms: peer_lost, not unclaimed
		}, 160, wire.ReasonPeerLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPEnv(t, claimConfig())
			g := e.grant("r", 8)
			s := e.connect()
			e.advance(at(100))
			tc.claim(e, s, g)
			if info, live := e.p.Lease(g.Lease); live && info.ClaimBy != clock.Never {
				t.Fatalf("not claimed: %+v", info)
			}
			for ms := 110; ms <= 700; ms += 10 {
				e.advance(at(ms))
			}
			r, ok := released(e, g.Lease)
			if !ok || r.reason != tc.reason || r.at != at(tc.until) {
				t.Fatalf("release %+v %v, want %v at %d ms", r, ok, tc.reason, tc.until)
			}
			if e.p.Stats().Released[wire.ReasonUnclaimed] != 0 {
				t.Fatal("counted unclaimed")
			}
		})
	}
}

// A claim handed to P at the claim deadline, before its Tick at that
// instant, finds the lease gone (xfer/doc.go, "Expiry").
func TestS25ClaimAtDeadlineBeforeTick(t *testing.T) {
	e := newPEnv(t, claimConfig())
	g := e.grant("r", 8)
	s := e.connect()
	e.now = at(150) // no Tick
	ack, ok := only[*wire.RenewAck](t, e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}}))
	if !ok || ack.Results[0].Status != wire.StatusExpired {
		t.Fatalf("renew at the claim deadline: %+v", ack)
	}
	if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonUnclaimed || r.at != at(150) {
		t.Fatalf("release %+v %v", r, ok)
	}
}

// Only the lease policy has a claim deadline.
func TestS25NoClaimDeadlineOutsideLeasePolicy(t *testing.T) {
	for _, p := range []Policy{PolicyVLLMLease, PolicyLegacyTimeout} {
		e := newPEnv(t, testConfig(p))
		g := e.grant("r", 8)
		if info, _ := e.p.Lease(g.Lease); info.ClaimBy != clock.Never {
			t.Fatalf("%v: %+v", p, info)
		}
		e.advance(at(590))
		if _, ok := released(e, g.Lease); ok {
			t.Fatalf("%v: released unclaimed", p)
		}
	}
}

// D claims when it enqueues a pull: at once when it must dial and
// handshake first, or retry a failed dial; with its next heartbeat when
// connected and that heartbeat leaves the claim half a heartbeat before
// the deadline (no RENEW of its own).
func TestS25ConsumerClaimsAtOnce(t *testing.T) {
	t.Run("dial and handshake first", func(t *testing.T) {
		e := newPair(t, claimConfig())
		e.run(at(10), false)
		g := e.enqueue(1, "a", 8)
		e.run(at(10), false) // D congested: no read starts
		if info, _ := e.P.p.Lease(g.Lease); info.ClaimBy != clock.Never || e.sess == 0 {
			t.Fatalf("not claimed at the enqueue's instant: %+v", info)
		}
		// Congested for 3 × the lease: the heartbeats keep it (S9).
		e.runUntil(at(10+3*600), false)
		if _, ok := released(e.P, g.Lease); ok {
			t.Fatalf("released under a waiting decoder: %+v", e.P.rel)
		}
		e.runUntil(at(1900), true)
		if d, ok := e.doneOf(1); !ok || d.Outcome != Pulled {
			t.Fatalf("done %+v %v", d, ok)
		}
		if r, _ := released(e.P, g.Lease); r.reason != wire.ReasonReadDone {
			t.Fatalf("release %+v", r)
		}
	})
	t.Run("connected, between heartbeats, deadline close", func(t *testing.T) {
		// A 150 ms claim deadline: the heartbeat at 100 ms would leave the
		// claim of a lease enqueued at 30 ms less than a heartbeat.
		e := newPair(t, claimConfig())
		e.enqueue(1, "a", 8)
		e.run(at(0), false)
		e.run(at(30), false)
		g := e.enqueue(2, "b", 8)
		renews := len(sentOf[*wire.Renew](e))
		e.run(at(30), false)
		rs := sentOf[*wire.Renew](e)
		if info, _ := e.P.p.Lease(g.Lease); info.ClaimBy != clock.Never || len(rs) != renews+1 || len(rs[renews].Leases) != 1 {
			t.Fatalf("not claimed at once, alone: %+v", info)
		}
	})
	t.Run("connected, between heartbeats", func(t *testing.T) {
		cfg := claimConfig()
		cfg.ClaimTimeout = 200 * time.Millisecond // two heartbeats, the default's share
		e := newPair(t, cfg)
		e.enqueue(1, "a", 8)
		e.run(at(0), false)
		e.run(at(30), false) // the next heartbeat is at 100 ms
		g := e.enqueue(2, "b", 8)
		renews := len(sentOf[*wire.Renew](e))
		e.run(at(30), false)
		if info, _ := e.P.p.Lease(g.Lease); info.ClaimBy == clock.Never || len(sentOf[*wire.Renew](e)) != renews {
			t.Fatalf("claimed with a RENEW of its own: %+v", info)
		}
		e.runUntil(at(100), false)
		rs := sentOf[*wire.Renew](e)
		if info, _ := e.P.p.Lease(g.Lease); info.ClaimBy != clock.Never || len(rs) != renews+1 || len(rs[renews].Leases) != 1 {
			t.Fatalf("not claimed by the heartbeat at 100 ms (deadline 230 ms): %+v, %d renews", info, len(rs)-renews)
		}
	})
	t.Run("after a failed dial", func(t *testing.T) {
		e := newPair(t, claimConfig())
		e.reachable = false
		g := e.enqueue(1, "a", 8)
		e.run(at(0), false)
		e.reachable = true
		e.runUntil(at(50), false) // the retry interval
		if info, _ := e.P.p.Lease(g.Lease); info.ClaimBy != clock.Never {
			t.Fatalf("not claimed on the redial: %+v", info)
		}
	})
}

// A claim that comes after the claim deadline gets "expired" and D falls
// back (recomputes): no block is read from the released lease.
func TestS25LateClaimFallsBack(t *testing.T) {
	e := newPair(t, claimConfig())
	e.P.now = 0
	g := e.P.grant("a", 8)
	e.runUntil(at(200), true) // the decode leg is late
	if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonUnclaimed {
		t.Fatalf("release %+v %v", r, ok)
	}
	if !e.c.Enqueue(e.now, PullRequest{Req: 1, Prompt: prompt("a", 8), Remote: e.remote(g)}) {
		t.Fatal("enqueue refused")
	}
	e.run(at(200), false)
	d, ok := e.doneOf(1)
	if !ok || d.Outcome != FellBack || d.Why != FallbackLeaseGone {
		t.Fatalf("done %+v %v, want a fallback (lease gone)", d, ok)
	}
	if e.P.p.Stats().ReadsServed != 0 || len(sentOf[*wire.Read](e)) != 0 || e.dpool.NumHeld() != 0 {
		t.Fatalf("read a released lease: served %d", e.P.p.Stats().ReadsServed)
	}
}

// TestAdaptiveClaimDeadline (issue 31): a lease's claim deadline is twice
// the slowest claim P saw over the last lease duration (600 ms here),
// never under ClaimTimeout (150 ms) nor over MaxClaimTimeout (400 ms), and
// comes back to ClaimTimeout once slow claims are two windows old.
func TestAdaptiveClaimDeadline(t *testing.T) {
	e := newPEnv(t, claimConfig())
	s := e.connect()
	claimBy := func(g Grant) time.Duration {
		info, _ := e.p.Lease(g.Lease)
		return info.ClaimBy.Sub(e.now)
	}
	g := e.grant("fast", 8)
	if d := claimBy(g); d != 150*time.Millisecond {
		t.Fatalf("first deadline %v, want the claim timeout", d)
	}
	e.advance(at(40))
	e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}}) // claimed after 40 ms: 2 × 40 < 150
	if d := claimBy(e.grant("a", 8)); d != 150*time.Millisecond {
		t.Fatalf("after a 40 ms claim: %v", d)
	}
	slow := e.grant("slow", 8)
	e.advance(at(140))
	e.send(s, &wire.Renew{Seq: 2, Leases: []wire.LeaseRef{ref(slow)}}) // 100 ms
	if d := claimBy(e.grant("b", 8)); d != 200*time.Millisecond {
		t.Fatalf("after a 100 ms claim: %v, want 200ms", d)
	}
	slower := e.grant("slower", 8) // deadline 200 ms
	e.advance(at(330))
	e.send(s, &wire.Renew{Seq: 3, Leases: []wire.LeaseRef{ref(slower)}}) // 190 ms: capped
	if _, ok := released(e, slower.Lease); ok {
		t.Fatal("a claim within the adapted deadline found its lease gone")
	}
	slowest := e.grant("c", 8)
	if d := claimBy(slowest); d != 380*time.Millisecond {
		t.Fatalf("after a 190 ms claim: %v, want 380ms", d)
	}
	e.advance(at(630))
	e.send(s, &wire.Renew{Seq: 4, Leases: []wire.LeaseRef{ref(slowest)}}) // 300 ms
	if d := claimBy(e.grant("d", 8)); d != 400*time.Millisecond {
		t.Fatalf("after a 300 ms claim: %v, want the 400 ms bound", d)
	}
	// Two windows later the slow claims are forgotten.
	e.advance(at(1900))
	if d := e.p.ClaimTimeout(e.now); d != 150*time.Millisecond {
		t.Fatalf("two windows on: %v, want the claim timeout", d)
	}
}
