package xfer

import (
	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// PolicyVLLM is vLLM's merged lease design: one-way heartbeats (no
// RENEW_ACK), D keeps no view of a lease's expiry, its first heartbeat on
// the regular cadence, no notice of D's own aborts, and a READ after the
// lease ended counted as a read of freed blocks.

func TestVLLMHeartbeatsAreOneWay(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyVLLM))
	g := e.grant("r", 8)
	s := e.connect()
	e.advance(at(300))
	if out := e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}}); len(out) != 0 {
		t.Fatalf("P answered a heartbeat: %+v", out)
	}
	// max(old 600, 300+400) = 700.
	if info, _ := e.p.Lease(g.Lease); info.Deadline != at(700) || info.ClaimBy != clock.Never || info.Session != 0 {
		t.Fatalf("lease %+v, want deadline 700 ms, unbound", info)
	}
	e.p.Disconnected(e.now, s) // no binding: nothing happens
	e.advance(at(699))
	e.advance(at(700))
	if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired || r.at != at(700) {
		t.Fatalf("release %+v %v", r, ok)
	}
	// The late READ: counted as a read of freed blocks, refused.
	s = e.connect()
	if re, ok := only[*wire.ReadEnd](t, e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})); !ok || re.Status != wire.StatusExpired {
		t.Fatalf("late read: %+v", re)
	}
	if st := e.p.Stats(); st.FreedReads != 1 || st.ReadsRefused != 1 || len(e.takeReads()) != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Under the other policies the late READ is refused and not a read of
// freed blocks: D is told.
func TestLateReadNotFreedOutsideVLLM(t *testing.T) {
	for _, p := range []Policy{PolicyLease, PolicyVLLMLease, PolicyLegacyTimeout} {
		e := newPEnv(t, testConfig(p))
		g := e.grant("r", 8)
		e.advance(e.now.Add(e.p.Config().LeaseDuration))
		s := e.connect()
		if re, ok := only[*wire.ReadEnd](t, e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})); !ok || re.Status != wire.StatusExpired {
			t.Fatalf("%v: late read %+v", p, re)
		}
		if st := e.p.Stats(); st.FreedReads != 0 || st.ReadsRefused != 1 {
			t.Fatalf("%v: stats %+v", p, st)
		}
	}
}

// D under vLLM's design waits past the lease as it knew it (no RENEW_ACK
// tells it more) and reads when scheduled; a lease that expired meanwhile
// (D was cut off from P) costs a read of freed blocks, then a fallback.
// vllm-lease's D gives up by itself at its view of the deadline and reads
// nothing.
func TestVLLMDecoderNotToldOfExpiry(t *testing.T) {
	for _, tc := range []struct {
		p      Policy
		why    FallbackReason
		freed  uint64
		readsP int
	}{
		{PolicyVLLM, FallbackLeaseGone, 1, 1},
		{PolicyVLLMLease, FallbackExpired, 0, 0},
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			e := newPair(t, testConfig(tc.p))
			g := e.enqueue(1, "a", 8)
			e.run(at(0), false)
			if _, ok := released(e.P, g.Lease); ok {
				t.Fatal("released at once")
			}
			e.hold = true // a partition: heartbeats do not get through
			e.runUntil(at(1500), false)
			if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonExpired {
				t.Fatalf("P: %+v %v", r, ok)
			}
			e.hold = false
			e.runUntil(at(1600), true)
			d, ok := e.doneOf(1)
			if !ok || d.Outcome != FellBack || d.Why != tc.why {
				t.Fatalf("done %+v %v, want a fallback (%v)", d, ok, tc.why)
			}
			if st := e.P.p.Stats(); st.FreedReads != tc.freed || len(sentOf[*wire.Read](e)) != tc.readsP {
				t.Fatalf("freed reads %d, READs %d", st.FreedReads, len(sentOf[*wire.Read](e)))
			}
		})
	}
}

// vLLM's D sends its first heartbeat for a new request on its regular
// cadence, and does not tell P when it drops a pull.
func TestVLLMDecoderCadenceAndNoDropNotice(t *testing.T) {
	e := newPair(t, testConfig(PolicyVLLM))
	e.enqueue(1, "a", 8)
	e.run(at(0), false) // dial, handshake, first heartbeat
	e.run(at(30), false)
	renews := len(sentOf[*wire.Renew](e))
	g := e.enqueue(2, "b", 8)
	e.run(at(30), false)
	if len(sentOf[*wire.Renew](e)) != renews {
		t.Fatal("heartbeat sent at once on enqueue")
	}
	e.runUntil(at(100), false)
	if len(sentOf[*wire.Renew](e)) != renews+1 {
		t.Fatalf("no heartbeat at 100 ms: %d", len(sentOf[*wire.Renew](e)))
	}
	if !e.c.Abort(e.now, 2) {
		t.Fatal("abort found nothing")
	}
	e.run(e.now, false)
	if rel := sentOf[*wire.Release](e); len(rel) != 0 {
		t.Fatalf("RELEASE on a dropped pull: %+v", rel)
	}
	if _, ok := released(e.P, g.Lease); ok {
		t.Fatal("P released the dropped request's lease")
	}
	// A rejection is notified (vLLM PR #41269).
	e.c.Reject(e.now, e.remote(e.P.grant("c", 8)))
	e.run(e.now, false)
	if rel := sentOf[*wire.Release](e); len(rel) != 1 || rel[0].Reason != wire.ReasonRejected {
		t.Fatalf("RELEASE %+v", rel)
	}
}
