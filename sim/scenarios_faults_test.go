package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

func TestScenarioS12PartitionLongerThanLease(t *testing.T) {
	for _, fb := range []xfer.Fallback{xfer.FallbackRecompute, xfer.FallbackFail} {
		t.Run(fb.String(), func(t *testing.T) {
			spec := congested()
			spec.Transfer.Fallback = fb
			c := New(spec)
			hog(c, "hog", 0, 8*time.Second)
			r := newReq(c, "r", 100, 8)
			c.Submit(inst(10*ms), r)
			part := inst(time.Second)
			c.Partition(part, "d0", "p0", 2*spec.Transfer.LeaseDuration)
			settle(t, c, 60*time.Second)
			verify(t, c)
			rel := releaseOf(t, c, "p0", r)
			// Expired on P's own deadline: the grant's, or the last renewal's
			// before the partition, whichever is later.
			limit := clock.Max(r.GrantedAt.Add(spec.Transfer.LeaseDuration), part.Add(spec.Transfer.LeaseExtension))
			if rel.Reason != wire.ReasonExpired || rel.At > limit {
				t.Fatalf("release %+v", rel)
			}
			switch fb {
			case xfer.FallbackRecompute:
				wantDone(t, r, false, xfer.FallbackExpired)
			case xfer.FallbackFail:
				if r.Error == "" || r.HTTPStatus != 502 || len(r.Tokens) != 0 {
					t.Fatalf("client: %d %q tokens %d", r.HTTPStatus, r.Error, len(r.Tokens))
				}
			}
		})
	}
}

func TestScenarioS13ShortPartition(t *testing.T) {
	cases := []struct {
		name  string
		spec  func(s *Spec)
		cut   time.Duration
		redia bool // the connection breaks and D reconnects
	}{
		{"traffic held", nil, 150 * ms, false},
		{"connection broken", func(s *Spec) {
			s.Network.PartitionTimeout = 10 * ms
			s.Transfer.RetryInterval = 50 * ms
		}, 60 * ms, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := congested()
			if tc.spec != nil {
				tc.spec(&spec)
			}
			if tc.cut >= spec.Transfer.PeerGrace {
				t.Fatal("partition not shorter than the grace")
			}
			c := New(spec)
			hog(c, "hog", 0, time.Second)
			r := newReq(c, "r", 100, 8)
			c.Submit(inst(10*ms), r)
			// Just after a heartbeat (every 500 ms from ~11 ms): the next
			// one is not due before the grace would end.
			c.Partition(inst(520*ms), "d0", "p0", tc.cut)
			settle(t, c, 10*time.Second)
			verify(t, c)
			wantDone(t, r, true, 0)
			if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonReadDone {
				t.Fatalf("release %+v", rel)
			}
			if len(c.Node("p0").Released) != 1 {
				t.Fatalf("releases %v", c.Node("p0").Released)
			}
			if disc := c.Node("d0").Core.Consumer().Stats().Failures[xfer.FailureDisconnected]; (disc > 0) != tc.redia {
				t.Fatalf("disconnections %d", disc)
			}
		})
	}
}

func TestScenarioS14PrefillCrashAfterGrant(t *testing.T) {
	for _, fb := range []xfer.Fallback{xfer.FallbackRecompute, xfer.FallbackFail} {
		t.Run(fb.String(), func(t *testing.T) {
			spec := DefaultSpec()
			spec.ReadBandwidth = 2e6 // the read takes ~25 ms
			spec.Transfer.Fallback = fb
			c := New(spec)
			log := logMessages(c)
			r := newReq(c, "r", 200, 8)
			c.Submit(0, r)
			var crashed bool
			c.OnInstant = func(c *World) {
				if !crashed && r.Grant != nil && len(log.reads(r.Grant.Lease)) > 0 {
					crashed = true
					c.Crash(c.Now.Add(5*ms), "p0")
				}
			}
			var inboundSeen bool
			prev := c.OnInstant
			c.OnInstant = func(c *World) {
				prev(c)
				if c.Node("d0").Core.Pool().NumHolds(kvblock.HoldInbound) > 0 {
					inboundSeen = true
				}
			}
			settle(t, c, 10*time.Second)
			verify(t, c)
			if !inboundSeen || c.Node("d0").Core.Pool().NumHolds(kvblock.HoldInbound) != 0 {
				t.Fatal("D's inbound blocks not held during the read, or not freed")
			}
			switch fb {
			case xfer.FallbackRecompute:
				wantDone(t, r, false, xfer.FallbackUnreachable)
			case xfer.FallbackFail:
				if r.HTTPStatus != 502 || len(r.Tokens) != 0 {
					t.Fatalf("client: %d %q", r.HTTPStatus, r.Error)
				}
			}
		})
	}
}

func TestScenarioS15AbortWhileQueuedOnD(t *testing.T) {
	c := New(congested())
	log := logMessages(c)
	hog(c, "hog", 0, time.Second)
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	c.Abort(inst(300*ms), r)
	settle(t, c, 10*time.Second)
	rel := releaseOf(t, c, "p0", r)
	rels := log.releases(r.Grant.Lease)
	if rel.Reason != wire.ReasonAborted || len(rels) != 1 || rels[0].m.(*wire.Release).Reason != wire.ReasonAborted || rel.At != rels[0].at {
		t.Fatalf("release %+v, RELEASE %+v", rel, rels)
	}
	if rel.At > inst(301*ms) {
		t.Fatalf("freed at %v", rel.At)
	}
}

func TestScenarioS16DuplicateLateReordered(t *testing.T) {
	spec := congested()
	spec.Network.DupProb = 0.3
	spec.Network.ReorderProb = 0.3
	c := New(spec)
	log := logMessages(c)
	hog(c, "hog", 0, 2*time.Second)
	var rs []*Req
	for i := range 6 {
		r := newReq(c, fmt.Sprintf("r%d", i), 40+17*i, 6)
		rs = append(rs, r)
		c.Submit(inst(time.Duration(10+i)*ms), r)
	}
	c.Abort(inst(900*ms), rs[5])
	settle(t, c, 30*time.Second)
	verify(t, c)
	st := c.Net.Stats()
	if st.Duplicated == 0 || st.Reordered == 0 {
		t.Fatalf("no duplicates or reorders: %+v", st)
	}
	p := c.Node("p0")
	before := fmt.Sprint(p.Released)
	// Every lease (the hog's and the six) was released exactly once.
	if len(p.ReleasedAt) != 7 {
		t.Fatalf("%d leases released: %v", len(p.ReleasedAt), p.Released)
	}
	// Replay everything D ever sent P, late: nothing comes back.
	for i, e := range log.entries {
		if e.to == "p0" {
			switch e.m.(type) {
			case *wire.Release, *wire.Renew, *wire.Read:
				c.Inject(c.Now.Add(time.Duration(i)*time.Microsecond), "d0", "p0", e.m)
			}
		}
	}
	served := p.Core.Producer().Stats().ReadsServed
	settle(t, c, 10*time.Second)
	if p.Core.Producer().NumLeases() != 0 || fmt.Sprint(p.Released) != before || p.Core.Producer().Stats().ReadsServed != served {
		t.Fatalf("late messages changed P: leases %d releases %v (was %s)", p.Core.Producer().NumLeases(), p.Released, before)
	}
}

func TestScenarioS17WrongTokenOrUnauthenticated(t *testing.T) {
	c := New(congested())
	hog(c, "hog", 0, time.Second)
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	var before, after xfer.LeaseInfo
	c.At(inst(300*ms), func() { before, _ = c.Node("p0").Core.Producer().Lease(r.Grant.Lease) })
	// D's own connection carries a forged READ and RENEW with a wrong token.
	c.At(inst(301*ms), func() {
		bad := r.Grant.Token
		bad[3] ^= 0x10
		c.Inject(c.Now, "d0", "p0", &wire.Read{ReadID: 1 << 40, Lease: r.Grant.Lease, Token: bad, Indexes: []uint32{0}})
		c.Inject(c.Now, "d0", "p0", &wire.Renew{Seq: 1 << 40, Leases: []wire.LeaseRef{{ID: r.Grant.Lease, Token: bad}}})
		c.Inject(c.Now, "d0", "p0", &wire.Release{Lease: r.Grant.Lease, Token: bad, Reason: wire.ReasonReadDone})
	})
	// A stranger with the right token but no handshake, and one with a
	// wrong secret.
	stranger := c.NewProbe("stranger")
	c.ProbeDial(inst(300*ms), stranger, "p0")
	c.At(inst(302*ms), func() {
		c.Net.Send(c.Now, stranger.Conn, stranger.Name, &wire.Read{ReadID: 1, Lease: r.Grant.Lease, Token: r.Grant.Token, Indexes: []uint32{0}})
	})
	impostor := c.NewProbe("impostor")
	impostor.Secret = []byte("not the cluster secret")
	c.ProbeDial(inst(300*ms), impostor, "p0")
	c.At(inst(303*ms), func() {
		c.Net.Send(c.Now, impostor.Conn, impostor.Name, &wire.Read{ReadID: 1, Lease: r.Grant.Lease, Token: r.Grant.Token, Indexes: []uint32{0}})
	})
	c.At(inst(304*ms), func() { after, _ = c.Node("p0").Core.Producer().Lease(r.Grant.Lease) })
	settle(t, c, 10*time.Second)
	verify(t, c)
	if before.Deadline == 0 || before != after {
		t.Fatalf("lease changed: %+v → %+v", before, after)
	}
	wantDone(t, r, true, 0)
	if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonReadDone {
		t.Fatalf("release %+v", rel)
	}
	for _, p := range []*Probe{stranger, impostor} {
		if p.Authed || !p.Closed {
			t.Fatalf("%s: authed %v closed %v", p.Name, p.Authed, p.Closed)
		}
		var sawRefusal bool
		for _, m := range p.Received {
			switch m := m.(type) {
			case *wire.Block:
				t.Fatalf("%s got data", p.Name)
			case *wire.AuthAck:
				sawRefusal = sawRefusal || m.Status == wire.StatusUnauthenticated
			case *wire.ReadEnd:
				sawRefusal = sawRefusal || m.Status == wire.StatusUnauthenticated
			}
		}
		if !sawRefusal {
			t.Fatalf("%s: no clear refusal in %+v", p.Name, p.Received)
		}
	}
	if f := c.Node("p0").Core.Producer().Stats().AuthFailures; f != 2 {
		t.Fatalf("auth failures %d", f)
	}
}

// corrupter flips a KV byte of the first n blocks delivered to D.
func corrupter(n int) func(c *World, from, to transport.Addr, m wire.Message) wire.Message {
	return func(c *World, from, to transport.Addr, m wire.Message) wire.Message {
		b, ok := m.(*wire.Block)
		if !ok || n == 0 {
			return m
		}
		n--
		bad := *b
		bad.Data = append([]byte(nil), b.Data...)
		bad.Data[len(bad.Data)/2] ^= 0x01
		return &bad
	}
}

func TestScenarioS18CorruptBlock(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		c := New(DefaultSpec())
		c.Intercept = corrupter(1)
		r := newReq(c, "r", 100, 12)
		c.Submit(0, r)
		settle(t, c, 10*time.Second)
		verify(t, c)
		wantDone(t, r, true, 0)
		if f := c.Node("d0").Core.Consumer().Stats().Failures[xfer.FailureCorrupt]; f != 1 {
			t.Fatalf("corrupt %d", f)
		}
		if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonReadDone {
			t.Fatalf("release %+v", rel)
		}
	})
	t.Run("always corrupt: fall back", func(t *testing.T) {
		c := New(DefaultSpec())
		c.Intercept = corrupter(1000)
		r := newReq(c, "r", 100, 12)
		c.Submit(0, r)
		settle(t, c, 10*time.Second)
		verify(t, c) // never decoded from bad KV: the output is the oracle's
		wantDone(t, r, false, xfer.FallbackCorrupt)
		if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonFallback {
			t.Fatalf("release %+v", rel)
		}
	})
}

func TestScenarioS19MixedDeadlinesNoHeadOfLine(t *testing.T) {
	spec := congested()
	c := New(spec)
	hog(c, "hog", 0, 5*time.Second)
	var kept, lost []*Req
	for i := range 8 {
		r := newReq(c, fmt.Sprintf("r%d", i), 40+9*i, 4)
		if i%2 == 1 {
			r.LostAfterPrefill = true // never reaches D: its lease is unclaimed
			lost = append(lost, r)
		} else {
			kept = append(kept, r)
		}
		c.Submit(inst(time.Duration(10+100*i)*ms), r)
	}
	settle(t, c, 30*time.Second)
	verify(t, c)
	for _, r := range lost {
		rel := releaseOf(t, c, "p0", r)
		if want := r.GrantedAt.Add(spec.Transfer.ClaimTimeout); rel.Reason != wire.ReasonUnclaimed || rel.At != want {
			t.Errorf("%s: release %+v, want unclaimed at %v", r.ID, rel, want)
		}
	}
	for _, r := range kept {
		wantDone(t, r, true, 0)
		if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonReadDone {
			t.Errorf("%s: release %+v", r.ID, rel)
		}
	}
}

func TestScenarioS22PrefillRestartSameID(t *testing.T) {
	spec := congested()
	c := New(spec)
	hog(c, "hog", 0, 2*time.Second)
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	c.Crash(inst(500*ms), "p0")
	c.Restart(inst(600*ms), "p0")
	settle(t, c, 10*time.Second)
	verify(t, c)
	wantDone(t, r, false, xfer.FallbackLeaseGone)
	p := c.Node("p0")
	// r's lease died with P: never released, never served again.
	if _, ok := p.ReleasedAt[r.Grant.Lease]; ok || p.Restarts != 1 || p.Core.Producer().NumLeases() != 0 {
		t.Fatalf("restarts %d leases %d releases %v", p.Restarts, p.Core.Producer().NumLeases(), p.Released)
	}
}

func TestScenarioS23DrainWithLeases(t *testing.T) {
	t.Run("leases read before the deadline", func(t *testing.T) {
		c := New(congested())
		hog(c, "hog", 0, 2*time.Second)
		r1 := newReq(c, "r1", 100, 8)
		r2 := newReq(c, "r2", 120, 8)
		c.Submit(inst(10*ms), r1)
		c.Submit(inst(20*ms), r2)
		c.Drain(inst(500*ms), "p0", 10*time.Second)
		late := newReq(c, "late", 60, 4)
		c.Submit(inst(600*ms), late)
		var exitAt clock.Instant
		c.OnInstant = func(c *World) {
			if exitAt == 0 && c.Node("p0").Exited {
				exitAt = c.Now
			}
		}
		settle(t, c, 30*time.Second)
		verify(t, c)
		if late.HTTPStatus != 503 {
			t.Fatalf("new request during the drain: %d %q", late.HTTPStatus, late.Error)
		}
		wantDone(t, r1, true, 0)
		wantDone(t, r2, true, 0)
		last := clock.Max(releaseOf(t, c, "p0", r1).At, releaseOf(t, c, "p0", r2).At)
		if exitAt != last {
			t.Fatalf("exited at %v, last lease ended %v", exitAt, last)
		}
	})
	t.Run("unread lease ends at the deadline", func(t *testing.T) {
		c := New(DefaultSpec())
		r := newReq(c, "r", 100, 8)
		r.LostAfterPrefill = true
		c.Submit(0, r)
		// The drain deadline comes before the claim deadline (500 ms).
		c.Drain(inst(100*ms), "p0", 300*ms)
		settle(t, c, 30*time.Second)
		rel := releaseOf(t, c, "p0", r)
		if rel.Reason != wire.ReasonShutdown || rel.At != inst(400*ms) || !c.Node("p0").Exited {
			t.Fatalf("release %+v exited %v", rel, c.Node("p0").Exited)
		}
	})
}
