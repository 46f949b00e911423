package xfer

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

// checkPulled verifies a pulled request: a request hold over the prefix
// whose KV equals P's, bytes and digests.
func checkPulled(t *testing.T, e *pairEnv, d Done, name string, tokens int) {
	t.Helper()
	if d.Outcome != Pulled || d.NumComputed != tokens-1 || d.Hold == 0 {
		t.Fatalf("done %+v", d)
	}
	blocks := e.dpool.Blocks(d.Hold)
	if e.dpool.Kind(d.Hold) != kvblock.HoldRequest || len(blocks) != (tokens+testBlockSize-1)/testBlockSize {
		t.Fatalf("hold of %d blocks", len(blocks))
	}
	for pos := 0; pos < tokens; pos++ {
		b := blocks[pos/testBlockSize]
		slot := e.dpool.SlotBytes(b, pos%testBlockSize)
		for i := range slot {
			if slot[i] != slotByte(name, pos, i) {
				t.Fatalf("%s: slot %d byte %d differs from P's", name, pos, i)
			}
		}
		if e.dpool.Digests(b)[pos%testBlockSize] != kvblock.SlotDigest(slot) {
			t.Fatalf("%s: slot %d digest", name, pos)
		}
	}
}

func TestConsumerPullHappyPath(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueue(1, "r", 10)
	e.run(at(0), true)
	d, ok := e.doneOf(1)
	if !ok {
		t.Fatalf("not done; sent %v", e.sent)
	}
	checkPulled(t, e, d, "r", 10)
	r, ok := released(e.P, g.Lease)
	if !ok || r.reason != wire.ReasonReadDone || r.at != at(0) {
		t.Fatalf("P: %+v", e.P.rel)
	}
	// The full blocks joined D's prefix cache; the partial one did not.
	e.dpool.Release(d.Hold)
	if e.dpool.NumEvictable() != 2 {
		t.Fatalf("evictable %d", e.dpool.NumEvictable())
	}
	s := e.c.Stats()
	if s.Pulls != 1 || s.PulledBlocks != 3 || s.Bytes == 0 || s.ReleasesSent[wire.ReasonReadDone] != 1 || e.c.notices != 0 {
		t.Fatalf("stats %+v notices %d", s, e.c.notices)
	}
	// Acknowledged: the release is not sent again.
	e.runUntil(at(500), true)
	if n := len(sentOf[*wire.Release](e)); n != 1 {
		t.Fatalf("%d releases sent", n)
	}
}

func TestConsumerPullsOnlyMissingBlocks(t *testing.T) {
	e := newPair(t, testConfig(PolicyLease))
	e.enqueue(1, "r", 16)
	e.run(at(0), true)
	d, _ := e.doneOf(1)
	e.dpool.Release(d.Hold) // 4 cached blocks on D now
	// The same prompt extended by 6 tokens: D has its first 4 blocks.
	e.P.now = e.now
	h := e.P.pool.NewHold(kvblock.HoldRequest, 1)
	e.P.pool.Allocate(h, 6)
	fill(e.P.pool, "r", e.P.pool.Blocks(h), 22)
	g, _ := e.P.p.Grant(e.now, "r-long", e.P.pool.Blocks(h), 22)
	e.P.pool.Release(h)
	e.c.Enqueue(e.now, PullRequest{Req: 2, Prompt: prompt("r", 22), Remote: e.remote(g)})
	e.sent = nil
	e.run(at(10), true)
	reads := sentOf[*wire.Read](e)
	if len(reads) != 1 || fmt.Sprint(reads[0].Indexes) != "[4 5]" {
		t.Fatalf("reads %+v", reads)
	}
	d2, ok := e.doneOf(2)
	if !ok || d2.Outcome != Pulled {
		t.Fatalf("%+v", e.done)
	}
	checkPulled(t, e, d2, "r", 22)
	if e.c.Stats().HitBlocks != 4 {
		t.Fatalf("hits %d", e.c.Stats().HitBlocks)
	}
	// Fully cached: no READ at all, but P still hears it may free.
	e.dpool.Release(d2.Hold)
	g3 := e.P.grant("again", 16)
	e.c.Enqueue(e.now, PullRequest{Req: 3, Prompt: prompt("r", 16), Remote: e.remote(g3)})
	e.sent = nil
	e.run(at(20), true)
	if len(sentOf[*wire.Read](e)) != 0 {
		t.Fatal("read sent for a cached prefix")
	}
	if r, ok := released(e.P, g3.Lease); !ok || r.reason != wire.ReasonReadDone {
		t.Fatalf("%+v", e.P.rel)
	}
	if d3, ok := e.doneOf(3); !ok || d3.Outcome != Pulled {
		t.Fatalf("%+v", e.done)
	}
}

func TestConsumerBatchedRenew(t *testing.T) {
	cfg := testConfig(PolicyLease)
	e := newPair(t, cfg)
	var gs []Grant
	for i := range 3 {
		gs = append(gs, e.enqueue(uint64(i+1), fmt.Sprintf("q%d", i), 4))
	}
	// Not admitted (D congested): the requests wait and renew.
	e.run(at(0), false)
	renews := sentOf[*wire.Renew](e)
	if len(renews) != 1 || len(renews[0].Leases) != 3 {
		t.Fatalf("renews %+v", renews)
	}
	// One RENEW for all three every other heartbeat once they are within
	// renewMargin (200 ms) of their end (from 400 ms), none before, and
	// they outlive the 600 ms lease many times over.
	e.runUntil(at(350), false)
	if n := len(sentOf[*wire.Renew](e)); n != 1 {
		t.Fatalf("%d renews by 350 ms, want only the claim", n)
	}
	e.runUntil(at(3000), false)
	renews = sentOf[*wire.Renew](e)
	if len(renews) != 15 {
		t.Fatalf("%d renews in 3 s, want 15", len(renews))
	}
	for _, r := range renews {
		if len(r.Leases) != 3 {
			t.Fatalf("renew of %d leases", len(r.Leases))
		}
	}
	if len(e.P.rel) != 0 || e.P.p.NumLeases() != 3 {
		t.Fatalf("P released %+v", e.P.rel)
	}
	info, _ := e.P.p.Lease(gs[0].Lease)
	if info.Deadline != at(3400) || info.Session == 0 {
		t.Fatalf("lease %+v", info)
	}
	e.run(at(3001), true)
	for i := range 3 {
		if d, ok := e.doneOf(uint64(i + 1)); !ok || d.Outcome != Pulled {
			t.Fatalf("%d: %+v", i, e.done)
		}
	}
	if e.P.p.Stats().Released[wire.ReasonReadDone] != 3 {
		t.Fatalf("%+v", e.P.rel)
	}
}

// TestClaimRenewsOnlyItsLease: under PolicyLease a lease admitted while
// D renews others on the same P is claimed by the peer's next heartbeat
// (no message of its own), and that heartbeat names only what P needs:
// the new lease, not the ones a renewal would not extend. Under
// vllm-lease the claim leaves at once and renews every lease.
func TestClaimRenewsOnlyItsLease(t *testing.T) {
	for _, pol := range []Policy{PolicyLease, PolicyVLLMLease} {
		t.Run(pol.String(), func(t *testing.T) {
			e := newPair(t, testConfig(pol))
			g1 := e.enqueue(1, "a", 4)
			e.run(at(0), false) // claims a at once: nothing else to ride
			e.runUntil(at(150), false)
			e.sent = nil
			g2 := e.enqueue(2, "b", 4)
			e.run(at(150), false)
			renews := sentOf[*wire.Renew](e)
			if pol == PolicyVLLMLease {
				if len(renews) != 1 || len(renews[0].Leases) != 2 {
					t.Fatalf("vllm-lease claim: %+v", renews)
				}
				return
			}
			if len(renews) != 0 {
				t.Fatalf("a claim sent a RENEW of its own: %+v", renews)
			}
			e.runUntil(at(200), false)
			renews = sentOf[*wire.Renew](e)
			if len(renews) != 1 || len(renews[0].Leases) != 1 || renews[0].Leases[0].ID != g2.Lease {
				t.Fatalf("heartbeat at 200 ms: %+v", renews)
			}
			if info, _ := e.P.p.Lease(g2.Lease); info.Session == 0 {
				t.Fatal("the claim did not bind the lease")
			}
			// Both outlive their lease: a renewal extends a from 300 ms,
			// b from 450 ms.
			e.runUntil(at(2000), false)
			if len(e.P.rel) != 0 || len(e.done) != 0 {
				t.Fatalf("released %+v, done %+v", e.P.rel, e.done)
			}
			e.run(at(2001), true)
			for _, g := range []Grant{g1, g2} {
				if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonReadDone {
					t.Fatalf("%+v", e.P.rel)
				}
			}
		})
	}
}

// TestMaxQueueWait: a pull queued (D congested) past MaxQueueWait gives
// its lease back (RELEASE fallback) and falls back (queue_wait), renewed
// until then; one that starts reading before it is pulled.
func TestMaxQueueWait(t *testing.T) {
	cfg := testConfig(PolicyLease)
	cfg.MaxQueueWait = 1500 * time.Millisecond
	e := newPair(t, cfg)
	g := e.enqueue(1, "a", 8)
	e.run(at(0), false)
	if err := e.c.CheckWait(at(1499)); err != nil {
		t.Fatal(err)
	}
	e.runUntil(at(1499), false)
	if len(e.done) != 0 || len(e.P.rel) != 0 {
		t.Fatalf("gone before the max queue wait: %+v %+v", e.done, e.P.rel)
	}
	e.now = at(1500)
	g2 := e.enqueue(2, "b", 8)
	e.run(at(1500), false)
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackQueueWait {
		t.Fatalf("done %+v", e.done)
	}
	if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonFallback {
		t.Fatalf("released %+v", e.P.rel)
	}
	if err := e.c.CheckWait(at(1500)); err != nil {
		t.Fatal(err)
	}
	e.run(at(1600), true) // b reads at once
	if d, ok := e.doneOf(2); !ok || d.Outcome != Pulled {
		t.Fatalf("done %+v", e.done)
	}
	if r, _ := released(e.P, g2.Lease); r.reason != wire.ReasonReadDone {
		t.Fatalf("released %+v", e.P.rel)
	}
}

func TestConsumerRenewPerPeer(t *testing.T) {
	// Two P engines: one RENEW each per heartbeat, each naming its own.
	cfg := testConfig(PolicyLease)
	pool := testPool()
	c := NewConsumer(cfg, pool, "d", testSecret, nil)
	for i := range 5 {
		addr := fmt.Sprintf("p%d", i%2)
		c.Enqueue(0, PullRequest{Req: uint64(i + 1), Prompt: prompt("x", 4),
			Remote: Remote{Addr: addr, Lease: wire.LeaseID(i + 1), NumBlocks: 1, NumTokens: 4, ExpiresIn: time.Second}})
	}
	c.Tick(0, false)
	acts, _ := c.Take()
	if len(acts) != 2 || acts[0].Addr != "p0" || acts[1].Addr != "p1" {
		t.Fatalf("dials %+v", acts)
	}
	// Skip the handshake: mark both up.
	for i, addr := range []string{"p0", "p1"} {
		pr := c.peers[addr]
		pr.state, pr.session = peerUp, SessionID(i+1)
		c.bySession[pr.session] = pr
	}
	c.Tick(1, false)
	acts, _ = c.Take()
	if len(acts) != 2 {
		t.Fatalf("%+v", acts)
	}
	for _, a := range acts {
		r := a.Msg.(*wire.Renew)
		want := map[SessionID]int{1: 3, 2: 2}[a.Session]
		if len(r.Leases) != want {
			t.Fatalf("session %d renews %d leases, want %d", a.Session, len(r.Leases), want)
		}
	}
}

func TestConsumerRejectionNotice(t *testing.T) {
	t.Run("retried until acknowledged", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.P.grant("r", 8)
		e.reachable = false
		e.c.Reject(e.now, e.remote(g))
		e.runUntil(at(200), true)
		if e.c.Stats().Failures[FailureUnreachable] < 2 || len(e.P.rel) != 0 {
			t.Fatalf("stats %+v", e.c.Stats())
		}
		// P reachable but its acks are lost: D resends every 50 ms.
		e.reachable = true
		e.alter = func(m wire.Message) wire.Message {
			if _, ok := m.(*wire.ReleaseAck); ok {
				return nil
			}
			return m
		}
		e.runUntil(at(349), true)
		rels := sentOf[*wire.Release](e)
		if len(rels) < 3 || rels[0].Reason != wire.ReasonRejected {
			t.Fatalf("releases %+v", rels)
		}
		if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonRejected {
			t.Fatalf("%+v", e.P.rel)
		}
		e.alter = nil
		n := len(rels)
		e.runUntil(at(1000), true)
		if len(sentOf[*wire.Release](e)) != n+1 || e.c.notices != 0 {
			t.Fatalf("not stopped by the ack: %d → %d", n, len(sentOf[*wire.Release](e)))
		}
	})
	t.Run("given up at the lease deadline", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.P.grant("r", 8)
		e.reachable = false
		e.c.Reject(e.now, e.remote(g))
		e.runUntil(at(599), true)
		if e.c.notices != 1 {
			t.Fatal("notice dropped early")
		}
		e.runUntil(at(600), true)
		if e.c.notices != 0 || len(e.c.peers) != 0 || e.c.NextDeadline() != clock.Never {
			t.Fatalf("notices %d peers %d next %v", e.c.notices, len(e.c.peers), e.c.NextDeadline())
		}
		if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonExpired || r.at != at(600) {
			t.Fatalf("%+v", e.P.rel)
		}
		// No more dials.
		e.sent = nil
		e.runUntil(at(2000), true)
		if acts, _ := e.c.Take(); len(acts) != 0 {
			t.Fatalf("%+v", acts)
		}
	})
	t.Run("legacy-timeout sends none", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLegacyTimeout))
		g := e.P.grant("r", 8)
		e.c.Reject(e.now, e.remote(g))
		e.runUntil(at(100), true)
		if len(e.sent) != 0 || e.P.p.NumLeases() != 1 {
			t.Fatalf("%+v", e.sent)
		}
	})
	t.Run("duplicates coalesce, bound drops", func(t *testing.T) {
		cfg := testConfig(PolicyLease)
		cfg.MaxWaiting = 2
		c := NewConsumer(cfg, testPool(), "d", testSecret, nil)
		r := Remote{Addr: "p", Lease: 1, ExpiresIn: time.Second}
		c.Reject(0, r)
		c.Reject(0, r)
		r.Lease = 2
		c.Reject(0, r)
		r.Lease = 3
		c.Reject(0, r)
		if c.notices != 2 || c.Stats().Failures[FailureReleaseDropped] != 1 {
			t.Fatalf("notices %d stats %+v", c.notices, c.Stats())
		}
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConsumerBoundedReads(t *testing.T) {
	cfg := testConfig(PolicyLease)
	cfg.MaxInflightReads = 2
	e := newPair(t, cfg)
	for i := range 5 {
		e.enqueue(uint64(i+1), fmt.Sprintf("r%d", i), 8)
	}
	e.stall = true
	e.run(at(0), true)
	if n := len(sentOf[*wire.Read](e)); n != 2 || e.c.Stats().Reading != 2 || e.c.Stats().Waiting != 3 {
		t.Fatalf("reads %d stats %+v", n, e.c.Stats())
	}
	// Reads end: the next ones start, still two at a time, in order.
	for round := range 3 {
		e.unstall()
		e.stall = true
		e.run(e.now+1, true)
		if e.c.Stats().Reading > 2 {
			t.Fatalf("round %d: %d reading", round, e.c.Stats().Reading)
		}
	}
	e.stall = false
	e.run(e.now+1, true)
	for i := range 5 {
		if d, ok := e.doneOf(uint64(i + 1)); !ok || d.Outcome != Pulled {
			t.Fatalf("%d: %+v", i, e.done)
		}
	}
	if e.dpool.NumHolds(kvblock.HoldInbound) != 0 {
		t.Fatal("inbound holds left")
	}
}

func TestConsumerNoRoomWaits(t *testing.T) {
	// D's pool cannot take the prefix yet: the pull waits (FIFO) and
	// renews rather than failing.
	e := newPair(t, testConfig(PolicyLease))
	h := e.dpool.NewHold(kvblock.HoldRequest, 99)
	e.dpool.Allocate(h, testBlocks-1)
	e.enqueue(1, "r", 8)
	e.runUntil(at(1000), true)
	if _, ok := e.doneOf(1); ok || len(sentOf[*wire.Renew](e)) == 0 {
		t.Fatalf("%+v", e.done)
	}
	e.dpool.Release(h)
	e.run(at(1001), true)
	if d, ok := e.doneOf(1); !ok || d.Outcome != Pulled {
		t.Fatalf("%+v", e.done)
	}
}

func corruptOnce(indexes map[uint32]int) func(m wire.Message) wire.Message {
	return func(m wire.Message) wire.Message {
		b, ok := m.(*wire.Block)
		if !ok || indexes[b.Index] == 0 {
			return m
		}
		indexes[b.Index]--
		bad := *b
		bad.Data = append([]byte(nil), b.Data...)
		bad.Data[3] ^= 0x40
		return &bad
	}
}

func TestConsumerChecksumMismatch(t *testing.T) {
	t.Run("retry the bad block", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.enqueue(1, "r", 12)
		e.alter = corruptOnce(map[uint32]int{1: 1})
		e.run(at(0), true)
		reads := sentOf[*wire.Read](e)
		if len(reads) != 2 || fmt.Sprint(reads[1].Indexes) != "[1]" {
			t.Fatalf("reads %+v", reads)
		}
		d, _ := e.doneOf(1)
		checkPulled(t, e, d, "r", 12)
		if e.c.Stats().Failures[FailureCorrupt] != 1 {
			t.Fatalf("%+v", e.c.Stats())
		}
		if r, _ := released(e.P, g.Lease); r.reason != wire.ReasonReadDone {
			t.Fatalf("%+v", e.P.rel)
		}
	})
	for _, fb := range []Fallback{FallbackRecompute, FallbackFail} {
		t.Run("always corrupt: "+fb.String(), func(t *testing.T) {
			cfg := testConfig(PolicyLease)
			cfg.Fallback = fb
			e := newPair(t, cfg)
			g := e.enqueue(1, "r", 12)
			e.alter = corruptOnce(map[uint32]int{2: 1000})
			e.run(at(0), true)
			d, ok := e.doneOf(1)
			want := map[Fallback]Outcome{FallbackRecompute: FellBack, FallbackFail: Failed}[fb]
			if !ok || d.Outcome != want || d.Why != FallbackCorrupt || d.Hold != 0 {
				t.Fatalf("%+v", e.done)
			}
			if n := len(sentOf[*wire.Read](e)); n != 3 {
				t.Fatalf("%d reads, want MaxReadAttempts=3", n)
			}
			if e.dpool.NumHeld() != 0 {
				t.Fatalf("D holds %d blocks", e.dpool.NumHeld())
			}
			// The corrupt block never entered D's prefix cache.
			if e.dpool.NumEvictable() != 0 {
				t.Fatalf("evictable %d", e.dpool.NumEvictable())
			}
			if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonFallback {
				t.Fatalf("%+v", e.P.rel)
			}
		})
	}
}

func TestConsumerAbort(t *testing.T) {
	t.Run("while waiting", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.enqueue(1, "r", 8)
		e.run(at(0), false)
		if !e.c.Abort(e.now, 1) || e.c.Abort(e.now, 1) {
			t.Fatal("abort result")
		}
		e.run(at(1), false)
		if d, ok := e.doneOf(1); !ok || d.Outcome != Dropped {
			t.Fatalf("%+v", e.done)
		}
		if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonAborted || r.at != at(1) {
			t.Fatalf("%+v", e.P.rel)
		}
	})
	t.Run("while reading", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.enqueue(1, "r", 8)
		e.stall = true
		e.run(at(0), true)
		e.c.Abort(e.now, 1)
		e.run(at(10), true)
		// Nothing ends before the read does: D's inbound blocks may still
		// be written, P's are pinned.
		if _, ok := e.doneOf(1); ok || len(sentOf[*wire.Release](e)) != 0 || e.dpool.NumHeld() != 2 {
			t.Fatalf("done %+v sent %+v", e.done, e.sent)
		}
		if len(e.P.rel) != 0 {
			t.Fatal("P freed during the read")
		}
		e.unstall()
		e.run(at(20), true)
		if d, ok := e.doneOf(1); !ok || d.Outcome != Dropped || e.dpool.NumHeld() != 0 {
			t.Fatalf("%+v", e.done)
		}
		if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonAborted {
			t.Fatalf("%+v", e.P.rel)
		}
	})
	t.Run("while reading, the session breaks", func(t *testing.T) {
		cfg := testConfig(PolicyLease)
		cfg.PeerGrace = 200 * time.Millisecond // longer than D's redial
		e := newPair(t, cfg)
		g := e.enqueue(1, "r", 8)
		e.stall = true
		e.run(at(0), true)
		e.c.Abort(e.now, 1)
		s := e.sess
		e.c.Disconnected(e.now, s)
		e.P.p.Disconnected(e.now, s)
		e.sess = 0
		e.stalled = nil
		e.stall = false
		e.run(at(1), true)
		if d, ok := e.doneOf(1); !ok || d.Outcome != Dropped || e.dpool.NumHeld() != 0 {
			t.Fatalf("%+v", e.done)
		}
		e.runUntil(at(100), true) // redial, deliver the release
		if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonAborted {
			t.Fatalf("%+v", e.P.rel)
		}
	})
	if c := NewConsumer(testConfig(PolicyLease), testPool(), "d", testSecret, nil); c.Abort(0, 7) {
		t.Fatal("abort of an unknown request")
	}
}

func TestConsumerLeaseGone(t *testing.T) {
	t.Run("renew says revoked", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.enqueue(1, "r", 8)
		e.P.p.Delivered(e.now, "r", true)
		e.run(at(0), false)
		e.P.p.Abort(e.now, "r") // REVOKED to the bound session
		e.run(at(1), false)
		if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackLeaseGone {
			t.Fatalf("%+v", e.done)
		}
		if r, _ := released(e.P, g.Lease); r.reason != wire.ReasonAborted {
			t.Fatalf("%+v", e.P.rel)
		}
	})
	t.Run("renew ack unknown", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		e.P.grant("r", 8)
		// D names a lease P never granted.
		e.c.Enqueue(e.now, PullRequest{Req: 1, Prompt: prompt("r", 8),
			Remote: Remote{EngineID: "p", Addr: "p:9000", Lease: 12345, NumBlocks: 2, NumTokens: 8, ExpiresIn: time.Second}})
		e.run(at(0), false)
		if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackLeaseGone {
			t.Fatalf("%+v", e.done)
		}
	})
	t.Run("read refused", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.enqueue(1, "r", 8)
		e.dropToP = func(m wire.Message) bool { _, ok := m.(*wire.Renew); return ok }
		e.P.p.Delivered(e.now, "r", false) // P freed before D's read arrives
		e.run(at(0), true)
		if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackLeaseGone || e.dpool.NumHeld() != 0 {
			t.Fatalf("%+v", e.done)
		}
		if r, _ := released(e.P, g.Lease); r.reason != wire.ReasonUndelivered {
			t.Fatalf("%+v", e.P.rel)
		}
	})
	t.Run("partitioned past the lease", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.enqueue(1, "r", 8)
		e.run(at(0), false) // renewed once: deadline 400 ms on P
		e.hold = true
		e.runUntil(at(1000), false)
		if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackExpired {
			t.Fatalf("%+v", e.done)
		}
		if r, _ := released(e.P, g.Lease); r.reason != wire.ReasonExpired {
			t.Fatalf("%+v", e.P.rel)
		}
		// P's deadline is 600 ms (the renewal at 0 could not extend it);
		// D's view of it is never earlier.
		if e.P.rel[0].at != at(600) {
			t.Fatalf("P released at %v", e.P.rel[0].at)
		}
	})
}

func TestConsumerUnreachableFallsBack(t *testing.T) {
	for _, fb := range []Fallback{FallbackRecompute, FallbackFail} {
		t.Run(fb.String(), func(t *testing.T) {
			cfg := testConfig(PolicyLease)
			cfg.Fallback = fb
			e := newPair(t, cfg)
			e.enqueue(1, "r", 8)
			e.reachable = false
			e.runUntil(at(300), true)
			d, ok := e.doneOf(1)
			want := map[Fallback]Outcome{FallbackRecompute: FellBack, FallbackFail: Failed}[fb]
			if !ok || d.Outcome != want || d.Why != FallbackUnreachable || e.dpool.NumHeld() != 0 {
				t.Fatalf("%+v", e.done)
			}
			// Three failed dials, then the fallback; D keeps dialing only to
			// deliver RELEASE(fallback) until the lease would have expired.
			if e.c.Stats().Fallbacks[FallbackUnreachable] != 1 || e.c.notices != 1 {
				t.Fatalf("%+v", e.c.Stats())
			}
		})
	}
}

func TestConsumerReadTimeout(t *testing.T) {
	// P answers renewals but its reads never stream: each read times out
	// after a lease duration without news, and after MaxReadAttempts D
	// falls back and frees its inbound blocks.
	e := newPair(t, testConfig(PolicyLease))
	e.enqueue(1, "r", 8)
	e.stall = true
	e.run(at(0), true)
	e.runUntil(at(1799), true)
	if _, ok := e.doneOf(1); ok || len(sentOf[*wire.Read](e)) != 3 {
		t.Fatalf("gave up early, or %d reads", len(sentOf[*wire.Read](e)))
	}
	e.runUntil(at(1800), true)
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackTimeout || e.dpool.NumHeld() != 0 {
		t.Fatalf("%+v", e.done)
	}
	// The stalled stream arrives late: ignored, no double free.
	e.unstall()
	e.run(at(1900), true)
	if e.dpool.NumHeld() != 0 || e.c.Stats().Pulls != 0 {
		t.Fatalf("held %d", e.dpool.NumHeld())
	}
}

func TestConsumerDuplicatedMessages(t *testing.T) {
	// Every message in both directions arrives twice: one pull, one
	// release, one free on each side.
	e := newPair(t, testConfig(PolicyLease))
	for i := range 4 {
		e.enqueue(uint64(i+1), fmt.Sprintf("r%d", i), 4+3*i)
	}
	e.dup = true
	e.run(at(0), false)
	e.runUntil(at(250), false)
	e.run(at(251), true)
	e.runUntil(at(400), true)
	for i := range 4 {
		d, ok := e.doneOf(uint64(i + 1))
		if !ok {
			t.Fatalf("%d not done", i)
		}
		checkPulled(t, e, d, fmt.Sprintf("r%d", i), 4+3*i)
	}
	if len(e.done) != 4 || len(e.P.rel) != 4 || e.P.p.Stats().Released[wire.ReasonReadDone] != 4 {
		t.Fatalf("done %d releases %+v", len(e.done), e.P.rel)
	}
}

func TestConsumerHandshakeFailures(t *testing.T) {
	t.Run("wrong secret", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		e.c.secret = []byte("another cluster")
		e.enqueue(1, "r", 8)
		e.run(at(0), true)
		if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackUnauthenticated || e.dpool.NumHeld() != 0 {
			t.Fatalf("%+v", e.done)
		}
		if len(sentOf[*wire.Read](e)) != 0 {
			t.Fatal("read sent to an unauthenticated peer")
		}
	})
	t.Run("engine id mismatch", func(t *testing.T) {
		e := newPair(t, testConfig(PolicyLease))
		g := e.P.grant("r", 8)
		rm := e.remote(g)
		rm.EngineID = "p-old"
		e.c.Enqueue(e.now, PullRequest{Req: 1, Prompt: prompt("r", 8), Remote: rm})
		e.run(at(0), true)
		if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || d.Why != FallbackEngineMismatch {
			t.Fatalf("%+v", e.done)
		}
	})
}

func TestConsumerMaxWaiting(t *testing.T) {
	cfg := testConfig(PolicyLease)
	cfg.MaxWaiting = 2
	c := NewConsumer(cfg, testPool(), "d", testSecret, nil)
	for i := range 3 {
		ok := c.Enqueue(0, PullRequest{Req: uint64(i + 1), Prompt: prompt("x", 4),
			Remote: Remote{Addr: "p", Lease: wire.LeaseID(i + 1), NumBlocks: 1, NumTokens: 4, ExpiresIn: time.Second}})
		if ok != (i < 2) {
			t.Fatalf("enqueue %d: %v", i, ok)
		}
	}
	if c.NumWaiting() != 2 || !c.Has(1) || c.Has(3) {
		t.Fatal("queue")
	}
}

func TestConsumerLegacySendsNoRenew(t *testing.T) {
	e := newPair(t, testConfig(PolicyLegacyTimeout))
	g := e.enqueue(1, "r", 8)
	e.runUntil(at(5000), false)
	if len(sentOf[*wire.Renew](e)) != 0 {
		t.Fatal("legacy-timeout renewed")
	}
	e.run(at(5001), true)
	if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonReadDone {
		t.Fatalf("%+v", e.P.rel)
	}
}

func TestConsumerHungPeerReadFallsBackAtLease(t *testing.T) {
	// P hangs entirely (no renewal answered, no stream): D gives up when
	// the lease it knows of runs out — 800 ms: its renewal at 400 ms
	// counts (it heard P at 0, within LeaseExtension), later ones do not
	// — at the read's retry (1,200 ms, the first read's deadline 600 ms).
	e := newPair(t, testConfig(PolicyLease))
	e.enqueue(1, "r", 8)
	e.stall = true
	e.run(at(0), true)
	e.hold = true
	e.runUntil(at(1199), true)
	if _, ok := e.doneOf(1); ok {
		t.Fatalf("fell back before the retried read's deadline: %+v", e.done)
	}
	e.runUntil(at(1200), true)
	if d, ok := e.doneOf(1); !ok || d.Outcome != FellBack || e.dpool.NumHeld() != 0 {
		t.Fatalf("%+v", e.done)
	}
}

func TestConsumerNextDeadline(t *testing.T) {
	c := NewConsumer(testConfig(PolicyLease), testPool(), "d", testSecret, nil)
	if c.NextDeadline() != clock.Never {
		t.Fatal("idle consumer has a deadline")
	}
	c.Enqueue(0, PullRequest{Req: 1, Prompt: prompt("x", 4),
		Remote: Remote{Addr: "p", Lease: 1, NumBlocks: 1, NumTokens: 4, ExpiresIn: 300 * time.Millisecond}})
	c.Tick(0, false)
	c.Take()
	if c.NextDeadline() != at(300) { // dialing: only the queued deadline
		t.Fatalf("%v", c.NextDeadline())
	}
	c.DialFailed(at(10), "p")
	if c.NextDeadline() != at(60) { // retry after 50 ms
		t.Fatalf("%v", c.NextDeadline())
	}
}
