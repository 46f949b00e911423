package xfer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// S24 (docs/scenarios.md): a RENEW and a READ reach P after the lease's due
// instant but before P's next sweep. Both are refused as expired, no block
// is sent, and the time left P reports is never negative or wrapped. The
// tests hand P the messages at an instant past the due one without calling
// Tick first, as the node does when transport input is ready at the same
// time as the sweep.

// totalReleased is the number of releases the producer counted, all
// reasons.
func totalReleased(p *Producer) uint64 {
	n := uint64(0)
	for _, c := range p.Stats().Released {
		n += c
	}
	return n
}

func TestS24RenewAndReadAfterDueBeforeSweep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		bound  bool // renewed (bound under PolicyLease) before the deadline
		// readFirst sends the READ before the RENEW.
		readFirst bool
	}{
		{"lease unbound", PolicyLease, false, false},
		{"lease bound", PolicyLease, true, false},
		{"lease bound, read first", PolicyLease, true, true},
		{"vllm-lease renewed", PolicyVLLMLease, true, false},
		{"legacy-timeout", PolicyLegacyTimeout, false, false},
		{"legacy-timeout, read first", PolicyLegacyTimeout, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPEnv(t, testConfig(tc.policy))
			g := e.grant("r", 12)
			e.p.Delivered(e.now, "r", true)
			s := e.connect()
			e.advance(at(100))
			if tc.bound {
				out := e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
				if !renewedOK(e.p.cfg, out, g.Lease) {
					t.Fatalf("renewal before the deadline: %+v", out)
				}
			}
			info, _ := e.p.Lease(g.Lease)
			late := info.Deadline.Add(5 * time.Millisecond)
			e.now = late // no Tick: the sweep has not run at this instant

			renew := func() {
				out := e.send(s, &wire.Renew{Seq: 2, Leases: []wire.LeaseRef{ref(g)}})
				var ack *wire.RenewAck
				for _, env := range out {
					switch m := env.Msg.(type) {
					case *wire.RenewAck:
						ack = m
					case *wire.Revoked:
						// The bound session hears why its lease went.
						if !tc.bound || tc.policy != PolicyLease || m.Reason != wire.ReasonExpired || env.Session != s {
							t.Fatalf("unexpected %+v", m)
						}
					default:
						t.Fatalf("RENEW answered with %T", m)
					}
				}
				if ack == nil || len(ack.Results) != 1 || ack.Results[0].Status != wire.StatusExpired {
					t.Fatalf("late RENEW: %+v", out)
				}
				if ms := ack.Results[0].ExpiresInMs; ms != 0 {
					t.Fatalf("late RENEW reports %d ms left", ms)
				}
			}
			read := func() {
				out := e.send(s, &wire.Read{ReadID: 9, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1, 2}})
				var end *wire.ReadEnd
				for _, env := range out {
					switch m := env.Msg.(type) {
					case *wire.ReadEnd:
						end = m
					case *wire.Revoked:
						if !tc.bound || tc.policy != PolicyLease {
							t.Fatalf("unexpected %+v", m)
						}
					default:
						t.Fatalf("READ answered with %T", m)
					}
				}
				if end == nil || end.Status != wire.StatusExpired || end.ReadID != 9 {
					t.Fatalf("late READ: %+v", out)
				}
				if w := e.takeReads(); len(w) != 0 {
					t.Fatalf("a late READ was served: %+v", w)
				}
			}
			if tc.readFirst {
				read()
				renew()
			} else {
				renew()
				read()
			}
			// Released by the first of them, as expired, at that instant.
			r, ok := released(e, g.Lease)
			if !ok || r.reason != wire.ReasonExpired || r.at != late || e.pool.NumHeld() != 0 {
				t.Fatalf("release %+v %v, held %d", r, ok, e.pool.NumHeld())
			}
			// The sweep that follows finds nothing: counted once.
			e.advance(late + 1)
			if len(e.rel) != 1 || totalReleased(e.p) != 1 || e.p.Stats().Released[wire.ReasonExpired] != 1 {
				t.Fatalf("releases %+v, counted %v", e.rel, e.p.Stats().Released)
			}
			if e.p.Stats().ReadsServed != 0 || e.p.Stats().ReadsRefused != 1 {
				t.Fatalf("stats %+v", e.p.Stats())
			}
		})
	}
}

func TestS24AtTheDueInstant(t *testing.T) {
	// The due instant itself is expired (the sweep ends a lease at
	// due <= now); one nanosecond before it is not.
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	s := e.connect()
	e.now = at(600) - 1
	out := e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
	info, _ := e.p.Lease(g.Lease)
	if !renewedOK(e.p.cfg, out, g.Lease) || info.Deadline != at(1000)-1 {
		t.Fatalf("renewal just before the deadline: %+v, deadline %v", out, info.Deadline)
	}
	e.now = info.Deadline
	out = e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
	// The renewal bound the lease: the session hears REVOKED, then READ_END.
	if len(out) != 2 {
		t.Fatalf("READ at the deadline: %+v", out)
	}
	if rv, ok := out[0].Msg.(*wire.Revoked); !ok || rv.Reason != wire.ReasonExpired {
		t.Fatalf("READ at the deadline: %+v", out)
	}
	if end, ok := only[*wire.ReadEnd](t, out[1:]); !ok || end.Status != wire.StatusExpired {
		t.Fatalf("READ at the deadline: %+v", out)
	}
	if len(e.takeReads()) != 0 {
		t.Fatal("served at the deadline")
	}
}

func TestS24ReleaseAfterDueBeforeSweep(t *testing.T) {
	// D's RELEASE after the due instant is not applied: the lease ends as
	// expired, once, and the answer says so.
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	s := e.connect()
	e.now = at(605)
	out := e.send(s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone})
	if a, ok := only[*wire.ReleaseAck](t, out); !ok || a.Status != wire.StatusExpired {
		t.Fatalf("late RELEASE: %+v", out)
	}
	e.advance(at(700))
	if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired || r.at != at(605) || totalReleased(e.p) != 1 {
		t.Fatalf("%+v, counted %v", e.rel, e.p.Stats().Released)
	}
}

func TestS24PeerGraceOverBeforeSweep(t *testing.T) {
	// The due instant may be the end of the peer grace: a RENEW on a new
	// session after it does not rebind the lease.
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	s1 := e.connect()
	e.send(s1, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
	e.advance(at(10))
	e.p.Disconnected(e.now, s1) // grace 40 ms: due at 50
	e.now = at(60)
	s2 := e.connect()
	out := e.send(s2, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
	if a, ok := only[*wire.RenewAck](t, out); !ok || a.Results[0].Status != wire.StatusExpired || a.Results[0].ExpiresInMs != 0 {
		t.Fatalf("RENEW after the grace: %+v", out)
	}
	if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonPeerLost || r.at != at(60) {
		t.Fatalf("%+v", e.rel)
	}
}

func TestS24PinnedLeaseDueDuringRead(t *testing.T) {
	// A read in flight pins the lease: a lease that falls due during the
	// read is decided (expired) by the first message that names it, and
	// released when the read ends — whether or not the sweep ran.
	for _, msgs := range []bool{true, false} {
		t.Run(fmt.Sprintf("messages=%v", msgs), func(t *testing.T) {
			e := newPEnv(t, testConfig(PolicyLease))
			g := e.grant("r", 12)
			s := e.connect()
			e.advance(at(100))
			e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1, 2}})
			if len(e.takeReads()) != 1 {
				t.Fatal("read not served")
			}
			e.now = at(650) // due at 600; no sweep
			if msgs {
				out := e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
				if a, ok := only[*wire.RenewAck](t, out); !ok || a.Results[0].Status != wire.StatusExpired || a.Results[0].ExpiresInMs != 0 {
					t.Fatalf("RENEW of a pinned due lease: %+v", out)
				}
				out = e.send(s, &wire.Read{ReadID: 2, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
				if end, ok := only[*wire.ReadEnd](t, out); !ok || end.Status != wire.StatusExpired {
					t.Fatalf("second READ of a pinned due lease: %+v", out)
				}
				// A duplicate of the read in flight is answered by that read.
				if out := e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}}); len(out) != 0 {
					t.Fatalf("duplicate READ: %+v", out)
				}
				if len(e.takeReads()) != 0 {
					t.Fatal("a due lease served a read")
				}
				info, live := e.p.Lease(g.Lease)
				if !live || info.Reads != 1 || info.Pending != wire.ReasonExpired || e.pool.NumHeld() != 3 {
					t.Fatalf("pinned lease %+v live %v held %d", info, live, e.pool.NumHeld())
				}
			}
			e.now = at(660)
			e.p.ReadFinished(e.now, s, 1, true)
			e.check()
			if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired || r.at != at(660) || e.pool.NumHeld() != 0 {
				t.Fatalf("after the read: %+v held %d", e.rel, e.pool.NumHeld())
			}
			e.advance(at(700))
			if totalReleased(e.p) != 1 {
				t.Fatalf("counted %v", e.p.Stats().Released)
			}
		})
	}
}

func TestS24OtherEntryPointsAfterDue(t *testing.T) {
	// Every entry point that takes now and acts on a lease finds a due
	// lease expired, not aborted, undelivered, shut down or rebound.
	for _, tc := range []struct {
		name string
		do   func(e *pEnv, s SessionID)
	}{
		{"abort", func(e *pEnv, s SessionID) {
			if e.p.Abort(e.now, "r") {
				e.t.Fatal("Abort found a due lease live")
			}
		}},
		{"undelivered", func(e *pEnv, s SessionID) { e.p.Delivered(e.now, "r", false) }},
		// A grant under a reused request id leaves the older lease alone
		// (S29); the handler's lease-addressed calls are entry points.
		{"abort by lease", func(e *pEnv, s SessionID) {
			if e.p.AbortLease(e.now, e.p.byReq["r"].id) {
				e.t.Fatal("AbortLease found a due lease live")
			}
		}},
		{"undelivered by lease", func(e *pEnv, s SessionID) { e.p.DeliveredLease(e.now, e.p.byReq["r"].id, false) }},
		{"shutdown", func(e *pEnv, s SessionID) { e.p.ReleaseAll(e.now, wire.ReasonShutdown) }},
		{"session lost", func(e *pEnv, s SessionID) { e.p.Disconnected(e.now, s) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPEnv(t, testConfig(PolicyLease))
			g := e.grant("r", 8)
			s := e.connect()
			e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}}) // bound, deadline 600
			e.now = at(610)
			tc.do(e, s)
			e.check()
			if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired || r.at != at(610) {
				t.Fatalf("%+v", e.rel)
			}
			if c := e.p.Stats().Released; c[wire.ReasonExpired] != 1 || totalReleased(e.p) != uint64(len(e.rel)) {
				t.Fatalf("counted %v for %+v", c, e.rel)
			}
		})
	}
}

func TestS24RemainingNeverWraps(t *testing.T) {
	for _, tc := range []struct {
		left time.Duration
		want uint32
	}{
		{-5 * time.Millisecond, 0},
		{-480 * time.Second, 0},
		{0, 0},
		{999 * time.Microsecond, 0},
		{time.Millisecond, 1},
		{480 * time.Second, 480_000},
		{1000 * time.Hour, 1 << 31},
	} {
		now := at(1_000_000)
		if got := remainingMs(now.Add(tc.left), now); got != tc.want {
			t.Errorf("remainingMs(now%+v) = %d, want %d", tc.left, got, tc.want)
		}
	}
	// Under legacy-timeout (no extension) a RENEW reports the time left;
	// past the due instant it reports 0, never 4294967295.
	e := newPEnv(t, testConfig(PolicyLegacyTimeout))
	g := e.grant("r", 8)
	s := e.connect()
	e.advance(at(400_000))
	out := e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
	if a, ok := only[*wire.RenewAck](t, out); !ok || a.Results[0].Status != wire.StatusOK || a.Results[0].ExpiresInMs != 80_000 {
		t.Fatalf("%+v", out)
	}
	e.now = at(480_005)
	out = e.send(s, &wire.Renew{Seq: 2, Leases: []wire.LeaseRef{ref(g)}})
	if a, ok := only[*wire.RenewAck](t, out); !ok || a.Results[0].Status != wire.StatusExpired || a.Results[0].ExpiresInMs != 0 {
		t.Fatalf("past due: %+v", out)
	}
}

// TestS24OrderIndependent drives two producers through the same random
// inputs at the same instants: one sweeps (Tick) before every input, the
// other only after it. What each input gets back, what is streamed and
// what is released (lease, reason, instant) must be the same: expiry is a
// function of (due instant, now), not of the order in which the edge hands
// the core its inputs.
func TestS24OrderIndependent(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 24))
		cfg := testConfig([]Policy{PolicyLease, PolicyVLLMLease, PolicyLegacyTimeout}[seed%3])
		if cfg.Policy == PolicyLegacyTimeout {
			cfg.LeaseDuration = 600 * time.Millisecond
		}
		first, after := newPEnv(t, cfg), newPEnv(t, cfg)
		var grants []Grant
		var sessions []SessionID
		step := func(e *pEnv, now clock.Instant, sweepFirst bool, in func(e *pEnv) string) string {
			e.now = now
			if sweepFirst {
				e.p.Tick(now)
			}
			got := in(e)
			if !sweepFirst {
				e.p.Tick(now)
			}
			e.check()
			if err := e.p.CheckDue(now); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			out, work := e.p.Take()
			var msgs []string
			for _, env := range out {
				msgs = append(msgs, fmt.Sprintf("%d %T %+v", env.Session, env.Msg, env.Msg))
			}
			for _, w := range work {
				msgs = append(msgs, fmt.Sprintf("read %d %d %d %d", w.Session, w.ReadID, w.Lease, len(w.Blocks)))
			}
			slices.Sort(msgs) // a sweep's REVOKEDs come before or after the input's answer
			return fmt.Sprint(got, msgs)
		}
		now := clock.Instant(0)
		readID := uint64(0)
		var inflight []readKey
		for i := range 120 {
			now = now.Add(time.Duration(rng.IntN(120)) * time.Millisecond)
			var in func(e *pEnv) string
			pick := func() Grant { return grants[rng.IntN(len(grants))] }
			switch k := rng.IntN(10); {
			case k == 0 || len(grants) == 0 || len(sessions) == 0:
				req, tokens := fmt.Sprintf("r%d", rng.IntN(8)), 1+rng.IntN(12)
				in = func(e *pEnv) string { return fmt.Sprint(e.grant(req, tokens).Lease) }
				r1, r2 := step(first, now, true, in), step(after, now, false, in)
				if r1 != r2 {
					t.Fatalf("seed %d input %d (grant): %s != %s", seed, i, r1, r2)
				}
				g := first.p.byReq[req]
				grants = append(grants, Grant{Lease: g.id, Token: g.token})
				if len(sessions) == 0 {
					for _, e := range []*pEnv{first, after} {
						e.connect()
					}
					sessions = append(sessions, first.sess)
				}
				continue
			case k == 1:
				for _, e := range []*pEnv{first, after} {
					e.now = now
					e.connect()
				}
				sessions = append(sessions, first.sess)
				continue
			case k <= 3:
				g, s := pick(), sessions[rng.IntN(len(sessions))]
				in = func(e *pEnv) string {
					e.p.Handle(now, s, &wire.Renew{Seq: uint64(i), Leases: []wire.LeaseRef{ref(g)}})
					return ""
				}
			case k <= 5:
				g, s := pick(), sessions[rng.IntN(len(sessions))]
				readID++
				id := readID
				inflight = append(inflight, readKey{s, id})
				in = func(e *pEnv) string {
					e.p.Handle(now, s, &wire.Read{ReadID: id, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
					return ""
				}
			case k == 6 && len(inflight) > 0:
				j := rng.IntN(len(inflight))
				key := inflight[j]
				inflight = slices.Delete(inflight, j, j+1)
				ok := rng.IntN(4) > 0
				in = func(e *pEnv) string { e.p.ReadFinished(now, key.s, key.id, ok); return "" }
			case k == 7:
				g, s := pick(), sessions[rng.IntN(len(sessions))]
				r := []wire.Reason{wire.ReasonReadDone, wire.ReasonRejected, wire.ReasonAborted, wire.ReasonFallback}[rng.IntN(4)]
				in = func(e *pEnv) string {
					e.p.Handle(now, s, &wire.Release{Lease: g.Lease, Token: g.Token, Reason: r})
					return ""
				}
			case k == 8:
				req := fmt.Sprintf("r%d", rng.IntN(8))
				switch rng.IntN(3) {
				case 0:
					in = func(e *pEnv) string { return fmt.Sprint(e.p.Abort(now, req)) }
				case 1:
					in = func(e *pEnv) string { e.p.Delivered(now, req, true); return "" }
				default:
					in = func(e *pEnv) string { e.p.Delivered(now, req, false); return "" }
				}
			default:
				s := sessions[rng.IntN(len(sessions))]
				in = func(e *pEnv) string { e.p.Disconnected(now, s); return "" }
			}
			r1, r2 := step(first, now, true, in), step(after, now, false, in)
			if r1 != r2 {
				t.Fatalf("seed %d input %d at %v: sweep first %s, sweep after %s", seed, i, now, r1, r2)
			}
		}
		sortRel := func(rs []relEvent) []string {
			var out []string
			for _, r := range rs {
				out = append(out, fmt.Sprint(r))
			}
			slices.Sort(out)
			return out
		}
		if a, b := sortRel(first.rel), sortRel(after.rel); !slices.Equal(a, b) {
			t.Fatalf("seed %d: releases differ:\nsweep first %v\nsweep after %v", seed, a, b)
		}
	}
}

// TestRenewJudgedOnArrival (issue 29): a RENEW and a READ that reached P
// before the lease's due instant are on time, even when P's loop hands
// them to the producer after that instant (it was busy): the RENEW
// extends the lease from its arrival, the READ pins it. The same messages
// arriving after the due instant find it expired.
func TestRenewJudgedOnArrival(t *testing.T) {
	for _, onTime := range []bool{true, false} {
		t.Run(fmt.Sprintf("on time %v", onTime), func(t *testing.T) {
			e := newPEnv(t, testConfig(PolicyLease))
			g := e.grant("r", 12)
			e.p.Delivered(e.now, "r", true)
			s := e.connect()
			info, _ := e.p.Lease(g.Lease)
			due := info.Deadline
			arrived := due.Add(-time.Millisecond)
			if !onTime {
				arrived = due.Add(time.Millisecond)
			}
			e.now = due.Add(50 * time.Millisecond) // P's loop gets to it late; no sweep ran since
			e.p.HandleArrived(e.now, arrived, s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g)}})
			e.p.HandleArrived(e.now, arrived, s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
			out, reads := e.p.Take()
			after, live := e.p.Lease(g.Lease)
			if onTime {
				if !renewedOK(e.p.cfg, out, g.Lease) || !live || after.Deadline != arrived.Add(e.p.cfg.LeaseExtension) || len(reads) != 1 {
					t.Fatalf("RENEW that arrived on time: %+v, live %v, deadline %v (want %v), %d reads", out, live, after.Deadline, arrived.Add(e.p.cfg.LeaseExtension), len(reads))
				}
				return
			}
			a, ok := only[*wire.RenewAck](t, out[:1])
			if !ok {
				t.Fatalf("no RENEW_ACK first: %+v", out)
			}
			if a.Results[0].Status != wire.StatusExpired || live || len(reads) != 0 {
				t.Fatalf("RENEW that arrived late: ack %+v, live %v, %d reads", a.Results[0], live, len(reads))
			}
			if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired {
				t.Fatalf("late RENEW: release %+v, want expired", r)
			}
		})
	}
}
