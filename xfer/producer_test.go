package xfer

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

func TestProducerGrantHoldsBlocks(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r1", 10) // 3 blocks, the last partly filled
	if len(g.BlockIDs) != 3 || g.NumTokens != 10 || g.ExpiresIn != 600*time.Millisecond || g.Token.IsZero() || g.Lease == 0 {
		t.Fatalf("grant %+v", g)
	}
	if e.pool.NumHeld() != 3 || e.p.NumLeases() != 1 || e.pool.NumHolds(kvblock.HoldLease) != 1 {
		t.Fatalf("held %d, leases %d", e.pool.NumHeld(), e.p.NumLeases())
	}
	info, ok := e.p.Lease(g.Lease)
	if !ok || info.Deadline != at(600) || info.Session != 0 || info.LostAt != clock.Never || info.Req != "r1" || info.Blocks != 3 {
		t.Fatalf("lease %+v", info)
	}
	// The grant's block ids are the caller's: a later hold reusing the
	// pool's slot must not change them.
	want := append([]kvblock.BlockID(nil), g.BlockIDs...)
	e.send(e.connect(), &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})
	e.grant("r2", 16)
	for i := range want {
		if g.BlockIDs[i] != want[i] {
			t.Fatalf("grant's block ids changed: %v, were %v", g.BlockIDs, want)
		}
	}
	if _, ok := e.p.Grant(e.now, "r3", nil, 0); ok {
		t.Fatal("a grant of no blocks succeeded")
	}
	if s := e.p.Stats(); s.Granted != 2 || s.Refused != 1 || s.Active != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestProducerMaxLeases(t *testing.T) {
	cfg := testConfig(PolicyLease)
	cfg.MaxLeases = 3
	e := newPEnv(t, cfg)
	for i := range 3 {
		e.grant(fmt.Sprintf("r%d", i), 4)
	}
	h := e.pool.NewHold(kvblock.HoldRequest, 9)
	e.pool.Allocate(h, 1)
	if _, ok := e.p.Grant(e.now, "r3", e.pool.Blocks(h), 4); ok {
		t.Fatal("grant beyond MaxLeases succeeded")
	}
	e.pool.Release(h)
	if e.pool.NumHeld() != 3 || e.p.NumLeases() != 3 || e.p.Stats().Refused != 1 {
		t.Fatalf("held %d leases %d stats %+v", e.pool.NumHeld(), e.p.NumLeases(), e.p.Stats())
	}
	// A release makes room again.
	e.p.Abort(e.now, "r0")
	e.grant("r3", 4)
}

// TestRenewAnsweredWhenNeeded: under PolicyLease P answers a RENEW only
// with the leases that are gone, and a RENEW whose leases were all renewed
// with an empty RENEW_ACK only once it has been silent towards that D for
// renewAckEvery (300 ms here), so D knows P still hears it.
func TestRenewAnsweredWhenNeeded(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	s := e.connect() // the handshake is P's last answer
	renew := func(ms int, seq uint64, refs ...wire.LeaseRef) []Envelope {
		e.advance(at(ms))
		return e.send(s, &wire.Renew{Seq: seq, Leases: refs})
	}
	if out := renew(100, 1, ref(g)); len(out) != 0 {
		t.Fatalf("RENEW at 100 ms answered: %+v", out)
	}
	out := renew(350, 2, ref(g))
	if a, ok := only[*wire.RenewAck](t, out); !ok || a.Seq != 2 || len(a.Results) != 0 {
		t.Fatalf("RENEW after 350 ms of silence: %+v", out)
	}
	if out := renew(450, 3, ref(g)); len(out) != 0 {
		t.Fatalf("RENEW at 450 ms answered: %+v", out)
	}
	// A lease that is gone is always named, the renewed ones never.
	out = renew(500, 4, ref(g), wire.LeaseRef{ID: g.Lease + 1})
	a, ok := only[*wire.RenewAck](t, out)
	if !ok || len(a.Results) != 1 || a.Results[0].ID != g.Lease+1 || a.Results[0].Status != wire.StatusUnknownLease {
		t.Fatalf("RENEW naming an unknown lease: %+v", out)
	}
	if info, _ := e.p.Lease(g.Lease); info.Deadline != at(900) || info.Session != s {
		t.Fatalf("lease %+v", info)
	}
}

func TestProducerRenewExtendsAndBinds(t *testing.T) {
	// Extension is 400 ms: a renewal moves the deadline to
	// max(old, now+400ms); leases only extend.
	cases := []struct {
		name     string
		renewAt  []int // ms
		deadline int   // ms, after the renewals
	}{
		{"no renewal", nil, 600},
		{"early renewal keeps the later deadline", []int{100}, 600},
		{"renewal past old-extension extends", []int{300}, 700},
		{"two renewals", []int{300, 500}, 900},
		{"a late renewal cannot shorten", []int{500, 510}, 910},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newPEnv(t, testConfig(PolicyLease))
			g := e.grant("r", 8)
			s := e.connect()
			for _, ms := range tc.renewAt {
				e.advance(at(ms))
				out := e.send(s, &wire.Renew{Seq: 7, Leases: []wire.LeaseRef{ref(g)}})
				if !renewedOK(e.p.cfg, out, g.Lease) {
					t.Fatalf("ack %+v", out)
				}
				info, _ := e.p.Lease(g.Lease)
				if ack, ok := only[*wire.RenewAck](t, out); ok && len(ack.Results) > 0 {
					if got := time.Duration(ack.Results[0].ExpiresInMs) * time.Millisecond; e.now.Add(got) != info.Deadline {
						t.Fatalf("ack says %v left, deadline %v at %v", got, info.Deadline, e.now)
					}
				}
				if info.Session != s {
					t.Fatalf("lease bound to %d, want %d", info.Session, s)
				}
			}
			info, _ := e.p.Lease(g.Lease)
			if info.Deadline != at(tc.deadline) {
				t.Fatalf("deadline %v, want %v", info.Deadline, at(tc.deadline))
			}
			e.advance(at(tc.deadline) - 1)
			if e.p.NumLeases() != 1 {
				t.Fatal("released before its deadline")
			}
			e.advance(at(tc.deadline))
			if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired || r.at != at(tc.deadline) {
				t.Fatalf("release %+v %v", r, ok)
			}
			if e.pool.NumHeld() != 0 {
				t.Fatal("blocks still held")
			}
		})
	}
}

func TestProducerExpiryHasNoHeadOfLine(t *testing.T) {
	// Leases granted in order, some renewed so that renewed (later) leases
	// sit before expired ones in grant order: each is released exactly at
	// its own deadline, whatever the order.
	e := newPEnv(t, testConfig(PolicyLease))
	s := e.connect()
	var gs []Grant
	for i := range 8 {
		e.advance(at(i * 10))
		gs = append(gs, e.grant(fmt.Sprintf("r%d", i), 4))
	}
	// Renew the even leases at 300 ms: their deadline becomes 700 ms; the
	// odd ones expire at 610, 630, 650, 670.
	e.advance(at(300))
	var refs []wire.LeaseRef
	for i := 0; i < 8; i += 2 {
		refs = append(refs, ref(gs[i]))
	}
	e.send(s, &wire.Renew{Leases: refs})
	for ms := 300; ms <= 700; ms++ {
		e.advance(at(ms))
	}
	for i, g := range gs {
		want := at(i*10 + 600)
		if i%2 == 0 {
			want = at(700)
		}
		r, ok := released(e, g.Lease)
		if !ok || r.at != want || r.reason != wire.ReasonExpired {
			t.Errorf("lease %d: released %v at %v (%v), want expired at %v", i, ok, r.at, r.reason, want)
		}
	}
	if len(e.p.due) != 0 || e.pool.NumHeld() != 0 {
		t.Fatalf("due %d held %d", len(e.p.due), e.pool.NumHeld())
	}
}

func TestProducerNextDeadlineIsExact(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	if e.p.NextDeadline() != clock.Never {
		t.Fatal("deadline without leases")
	}
	g1 := e.grant("a", 4)
	e.advance(at(50))
	e.grant("b", 4)
	if e.p.NextDeadline() != at(600) {
		t.Fatalf("next %v", e.p.NextDeadline())
	}
	s := e.connect()
	e.advance(at(300))
	e.send(s, &wire.Renew{Leases: []wire.LeaseRef{ref(g1)}})
	if e.p.NextDeadline() != at(650) { // b's; a's moved to 700
		t.Fatalf("next %v after renewal", e.p.NextDeadline())
	}
	e.p.Disconnected(e.now, s) // a is bound to s: grace 40 ms
	if e.p.NextDeadline() != at(340) {
		t.Fatalf("next %v after session loss", e.p.NextDeadline())
	}
}

func TestProducerReadPinsLease(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during func(e *pEnv, s SessionID, g Grant) // while the read is in flight
		reason wire.Reason
	}{
		{"expiry", func(e *pEnv, s SessionID, g Grant) { e.advance(at(900)) }, wire.ReasonExpired},
		{"abort (revocation)", func(e *pEnv, s SessionID, g Grant) { e.p.Abort(e.now, "r") }, wire.ReasonAborted},
		{"release by D", func(e *pEnv, s SessionID, g Grant) {
			out := e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})
			if a, ok := only[*wire.ReleaseAck](e.t, out); !ok || a.Status != wire.StatusOK {
				e.t.Fatalf("ack %+v", out)
			}
		}, wire.ReasonReadDone},
		{"shutdown", func(e *pEnv, s SessionID, g Grant) { e.p.ReleaseAll(e.now, wire.ReasonShutdown) }, wire.ReasonShutdown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPEnv(t, testConfig(PolicyLease))
			g := e.grant("r", 12)
			e.p.Delivered(e.now, "r", true)
			s := e.connect()
			e.advance(at(100))
			e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1, 2}})
			w := e.takeReads()
			if len(w) != 1 || len(w[0].Blocks) != 3 || e.p.NumPinned() != 1 {
				t.Fatalf("reads %+v pinned %d", w, e.p.NumPinned())
			}
			// The read's data aliases the pool: it must stay valid.
			tc.during(e, s, g)
			if _, ok := released(e, g.Lease); ok || e.pool.NumHeld() != 3 {
				t.Fatalf("released during the read (held %d)", e.pool.NumHeld())
			}
			info, _ := e.p.Lease(g.Lease)
			if info.Pending != tc.reason || info.Reads != 1 {
				t.Fatalf("lease %+v, want pending %v", info, tc.reason)
			}
			// The lease is decided: no new read or renewal is served, and the
			// answer is the one it gets once the read ended and the lease is
			// released (expired, released, revoked).
			out := e.send(s, &wire.Read{ReadID: 2, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
			if re, ok := only[*wire.ReadEnd](t, out); !ok || re.Status != goneStatus(tc.reason) {
				t.Fatalf("second read: %+v, want %v", out, goneStatus(tc.reason))
			}
			if len(e.takeReads()) != 0 {
				t.Fatal("a decided lease served a read")
			}
			for i, blk := range w[0].Blocks {
				for pos := 0; pos < int(blk.Tokens); pos++ {
					if blk.Data[pos*testBPT] != slotByte("r", i*testBlockSize+pos, 0) {
						t.Fatalf("block %d changed during the read", i)
					}
				}
			}
			e.advance(e.now + 1)
			e.p.ReadFinished(e.now, s, 1, true)
			e.check()
			r, ok := released(e, g.Lease)
			if !ok || r.reason != tc.reason || r.at != e.now || e.pool.NumHeld() != 0 {
				t.Fatalf("after the read: %+v %v held %d", r, ok, e.pool.NumHeld())
			}
			if e.p.Stats().BlockSecondsRead == 0 || e.p.Stats().BlockSecondsUnread != 0 {
				t.Fatalf("block-seconds %+v", e.p.Stats())
			}
		})
	}
}

func TestProducerReleaseReasons(t *testing.T) {
	// Each counted reason, from the event that causes it.
	cases := []struct {
		name   string
		do     func(e *pEnv, g Grant)
		reason wire.Reason
		at     int
	}{
		{"read_done", func(e *pEnv, g Grant) {
			s := e.connect()
			e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})
		}, wire.ReasonReadDone, 100},
		{"rejected", func(e *pEnv, g Grant) {
			e.send(e.connect(), &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonRejected})
		}, wire.ReasonRejected, 100},
		{"aborted by D", func(e *pEnv, g Grant) {
			e.send(e.connect(), &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonAborted})
		}, wire.ReasonAborted, 100},
		{"fallback", func(e *pEnv, g Grant) {
			e.send(e.connect(), &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonFallback})
		}, wire.ReasonFallback, 100},
		{"aborted after delivery", func(e *pEnv, g Grant) {
			e.p.Delivered(e.now, "r", true)
			if !e.p.Abort(e.now, "r") {
				e.t.Fatal("abort found no lease")
			}
		}, wire.ReasonAborted, 100},
		{"undelivered response", func(e *pEnv, g Grant) { e.p.Delivered(e.now, "r", false) }, wire.ReasonUndelivered, 100},
		{"abort before delivery", func(e *pEnv, g Grant) { e.p.Abort(e.now, "r") }, wire.ReasonUndelivered, 100},
		{"peer lost", func(e *pEnv, g Grant) {
			s := e.connect()
			e.send(s, &wire.Renew{Leases: []wire.LeaseRef{ref(g)}})
			e.p.Disconnected(e.now, s)
			e.advance(at(139))
			e.advance(at(140))
		}, wire.ReasonPeerLost, 140},
		{"expired", func(e *pEnv, g Grant) { e.advance(at(599)); e.advance(at(600)) }, wire.ReasonExpired, 600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newPEnv(t, testConfig(PolicyLease))
			g := e.grant("r", 8)
			e.advance(at(100))
			tc.do(e, g)
			r, ok := released(e, g.Lease)
			if !ok || r.reason != tc.reason || r.at != at(tc.at) {
				t.Fatalf("release %+v %v, want %v at %v", r, ok, tc.reason, at(tc.at))
			}
			if len(e.rel) != 1 || e.p.Stats().Released[tc.reason] != 1 || e.p.NumLeases() != 0 || e.pool.NumHeld() != 0 {
				t.Fatalf("releases %v stats %v leases %d held %d", e.rel, e.p.Stats().Released, e.p.NumLeases(), e.pool.NumHeld())
			}
			if e.p.Stats().BlockSecondsUnread == 0 {
				t.Fatal("unread block-seconds not counted")
			}
		})
	}
}

func TestProducerRevokedNotifiesBoundSession(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	e.p.Delivered(e.now, "r", true)
	s := e.connect()
	e.send(s, &wire.Renew{Leases: []wire.LeaseRef{ref(g)}})
	e.p.Abort(e.now, "r")
	out, _ := e.p.Take()
	if rv, ok := only[*wire.Revoked](t, out); !ok || rv.Lease != g.Lease || rv.Reason != wire.ReasonAborted || out[0].Session != s {
		t.Fatalf("revocation %+v", out)
	}
	// D's own release is not echoed back.
	g2 := e.grant("r2", 4)
	e.send(s, &wire.Renew{Leases: []wire.LeaseRef{ref(g2)}})
	if out := e.send(s, &wire.Release{Lease: g2.Lease, Token: g2.Token, Reason: wire.ReasonReadDone}); len(out) != 1 {
		t.Fatalf("release answered with %+v", out)
	}
}

func TestProducerTombstones(t *testing.T) {
	// A released lease never comes back: every late or duplicate message
	// gets a clear status and changes nothing.
	for _, tc := range []struct {
		reason wire.Reason
		status wire.Status // for READ and RENEW
	}{
		{wire.ReasonReadDone, wire.StatusReleased},
		{wire.ReasonRejected, wire.StatusReleased},
		{wire.ReasonAborted, wire.StatusRevoked},
		{wire.ReasonUndelivered, wire.StatusRevoked},
		{wire.ReasonExpired, wire.StatusExpired},
		{wire.ReasonPeerLost, wire.StatusExpired},
	} {
		t.Run(tc.reason.String(), func(t *testing.T) {
			e := newPEnv(t, testConfig(PolicyLease))
			g := e.grant("r", 8)
			s := e.connect()
			switch tc.reason {
			case wire.ReasonReadDone, wire.ReasonRejected:
				e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: tc.reason})
			case wire.ReasonAborted:
				e.p.Delivered(e.now, "r", true)
				e.p.Abort(e.now, "r")
			case wire.ReasonUndelivered:
				e.p.Delivered(e.now, "r", false)
			case wire.ReasonExpired:
				e.advance(at(600))
			case wire.ReasonPeerLost:
				e.send(s, &wire.Renew{Leases: []wire.LeaseRef{ref(g)}})
				e.p.Disconnected(e.now, s)
				e.advance(at(40))
				s = e.connect()
			}
			e.p.Take()
			if e.p.NumLeases() != 0 || e.pool.NumHeld() != 0 {
				t.Fatal("not released")
			}
			out := e.send(s, &wire.Read{ReadID: 5, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
			if re, ok := only[*wire.ReadEnd](t, out); !ok || re.Status != tc.status || re.ReadID != 5 {
				t.Fatalf("late read: %+v", out)
			}
			if len(e.takeReads()) != 0 {
				t.Fatal("a released lease served data")
			}
			out = e.send(s, &wire.Renew{Seq: 3, Leases: []wire.LeaseRef{ref(g)}})
			if a, ok := only[*wire.RenewAck](t, out); !ok || a.Results[0].Status != tc.status {
				t.Fatalf("late renew: %+v", out)
			}
			// Duplicate releases, any reason: satisfied, no double free. An
			// expired lease says so (the release came too late).
			wantRel := wire.StatusReleased
			if tc.status == wire.StatusExpired {
				wantRel = wire.StatusExpired
			}
			for range 2 {
				out = e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonAborted})
				if a, ok := only[*wire.ReleaseAck](t, out); !ok || a.Status != wantRel {
					t.Fatalf("late release: %+v, want %v", out, wantRel)
				}
			}
			e.p.Abort(e.now, "r")
			e.p.Delivered(e.now, "r", false)
			e.advance(at(5000))
			if len(e.rel) != 1 || e.p.NumLeases() != 0 {
				t.Fatalf("releases %v", e.rel)
			}
			total := uint64(0)
			for _, n := range e.p.Stats().Released {
				total += n
			}
			if total != 1 {
				t.Fatalf("released counted %d times", total)
			}
		})
	}
}

func TestProducerTombstoneBound(t *testing.T) {
	cfg := testConfig(PolicyLease)
	cfg.Tombstones = 2
	e := newPEnv(t, cfg)
	s := e.connect()
	var gs []Grant
	for i := range 3 {
		g := e.grant(fmt.Sprintf("r%d", i), 4)
		e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})
		gs = append(gs, g)
	}
	if len(e.p.tomb.m) != 2 {
		t.Fatalf("%d tombstones, bound 2", len(e.p.tomb.m))
	}
	// The oldest fell out of the ring: it is unknown now, still not live.
	want := []wire.Status{wire.StatusUnknownLease, wire.StatusReleased, wire.StatusReleased}
	for i, g := range gs {
		out := e.send(s, &wire.Read{ReadID: uint64(10 + i), Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
		if re, ok := only[*wire.ReadEnd](t, out); !ok || re.Status != want[i] {
			t.Fatalf("lease %d: %+v, want %v", i, out, want[i])
		}
	}
	cfg.Tombstones = 0 // no memory at all still never serves a released lease
	e = newPEnv(t, cfg)
	s = e.connect()
	g := e.grant("x", 4)
	e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})
	out := e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
	if re, ok := only[*wire.ReadEnd](t, out); !ok || re.Status != wire.StatusUnknownLease {
		t.Fatalf("%+v", out)
	}
}
