package xfer

import (
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// S24 on D's side (xfer/doc.go, "Expiry"): a message or a call that
// reaches the consumer after one of its timers fell due, before Tick ran
// at that instant, finds the timer's effect already applied.

func TestS24ConsumerRenewAckAfterDeadline(t *testing.T) {
	// D believes the lease expired at 600 ms; a RENEW_ACK that arrives at
	// 605 ms does not bring the pull back: it falls back as expired.
	e := newPair(t, testConfig(PolicyLease))
	g := e.enqueue(1, "r", 8)
	e.run(at(0), false) // connected and renewed; queued (no room)
	if len(sentOf[*wire.Renew](e)) != 1 {
		t.Fatalf("renewals %+v", sentOf[*wire.Renew](e))
	}
	e.c.Handle(at(605), e.sess, &wire.RenewAck{Seq: 1, Results: []wire.RenewResult{{ID: g.Lease, Status: wire.StatusOK, ExpiresInMs: 400}}})
	_, done := e.c.Take()
	if len(done) != 1 || done[0].Outcome != FellBack || done[0].Why != FallbackExpired || e.c.Has(1) {
		t.Fatalf("done %+v, still waiting %v", done, e.c.Has(1))
	}
}

func TestS24ConsumerBlockAfterReadDeadline(t *testing.T) {
	// A sent read with no news by its read deadline has failed; a block of
	// it that arrives after the deadline, before Tick, is ignored and the
	// read is retried as Tick would have retried it.
	e := newPair(t, testConfig(PolicyLease))
	e.enqueue(1, "r", 8)
	e.stall = true
	e.run(at(0), true)
	e.runUntil(at(550), true) // renewals keep the lease (to 950 ms); the read has no news since 0
	if len(e.stalled) != 1 || len(sentOf[*wire.Read](e)) != 1 {
		t.Fatalf("stalled %d reads %d", len(e.stalled), len(sentOf[*wire.Read](e)))
	}
	b := e.stalled[0].Blocks[0]
	b.Data = append([]byte(nil), b.Data...)
	b.Digests = append([]uint64(nil), b.Digests...)
	e.c.Handle(at(605), e.sess, &b) // the read's deadline was 600 ms
	acts, _ := e.c.Take()
	var reads []*wire.Read
	for _, a := range acts {
		if r, ok := a.Msg.(*wire.Read); ok {
			reads = append(reads, r)
		}
	}
	if e.c.Stats().Failures[FailureTimeout] != 1 || len(reads) != 1 || reads[0].ReadID == b.ReadID {
		t.Fatalf("failures %v, new reads %+v", e.c.Stats().Failures, reads)
	}
	if p := e.c.byReq[1]; p == nil || p.got[0] {
		t.Fatal("a block of the timed-out read was taken")
	}
	// The retried read completes the pull.
	e.stall = false
	e.P.p.ReadFinished(at(605), e.stalled[0].Session, e.stalled[0].ReadID, false)
	e.stalled = nil
	e.toP = append(e.toP, reads[0])
	e.runUntil(at(700), true)
	if d, ok := e.doneOf(1); !ok || d.Outcome != Pulled {
		t.Fatalf("%+v", e.done)
	}
}

func TestS24ConsumerAbortAfterDeadline(t *testing.T) {
	// An abort of a pull whose lease D believes expired finds it gone (as
	// expired): no RELEASE(aborted) for a lease P has already freed.
	e := newPair(t, testConfig(PolicyLease))
	e.enqueue(1, "r", 8)
	e.run(at(0), false)
	if e.c.Abort(at(605), 1) {
		t.Fatal("abort found the expired pull")
	}
	_, done := e.c.Take()
	if len(done) != 1 || done[0].Outcome != FellBack || done[0].Why != FallbackExpired || e.c.NumNotices() != 0 {
		t.Fatalf("done %+v notices %d", done, e.c.NumNotices())
	}
}

func TestS24ConsumerNoticeDueBeforeHandshake(t *testing.T) {
	// A rejection notice whose deadline passed while P was unreachable is
	// dropped when the session comes up after it, as Tick would have
	// dropped it: no late RELEASE.
	e := newPair(t, testConfig(PolicyLease))
	g := e.P.grant("r", 8)
	e.reachable = false
	e.c.Reject(e.now, e.remote(g)) // the notice's deadline: 600 ms
	e.runUntil(at(500), true)
	var authAck wire.Message
	e.alter = func(m wire.Message) wire.Message {
		if _, ok := m.(*wire.AuthAck); ok {
			authAck = m
			return nil
		}
		return m
	}
	e.reachable = true
	e.runUntil(at(560), true) // a dial at 550 ms; P's AUTH_ACK is held
	if authAck == nil || e.c.NumNotices() != 1 {
		t.Fatalf("handshake %v, notices %d", authAck, e.c.NumNotices())
	}
	e.c.Handle(at(605), e.sess, authAck)
	acts, _ := e.c.Take()
	for _, a := range acts {
		if _, ok := a.Msg.(*wire.Release); ok {
			t.Fatalf("late RELEASE sent: %+v", a.Msg)
		}
	}
	if e.c.NumNotices() != 0 {
		t.Fatalf("%d notices", e.c.NumNotices())
	}
}

func TestS24ConsumerEnqueueAfterDeadline(t *testing.T) {
	// A full consumer whose oldest pull's lease D believes expired admits a
	// new pull at that instant, as it would after Tick.
	cfg := testConfig(PolicyLease)
	cfg.MaxWaiting = 2
	c := NewConsumer(cfg, testPool(), "d", testSecret, nil)
	enqueue := func(now clock.Instant, req uint64, expiresIn time.Duration) bool {
		return c.Enqueue(now, PullRequest{Req: req, Prompt: prompt("x", 4),
			Remote: Remote{Addr: "p", Lease: wire.LeaseID(req), NumBlocks: 1, NumTokens: 4, ExpiresIn: expiresIn}})
	}
	if !enqueue(0, 1, 100*time.Millisecond) || !enqueue(0, 2, time.Second) {
		t.Fatal("enqueue refused")
	}
	if enqueue(at(99), 3, time.Second) {
		t.Fatal("enqueued beyond MaxWaiting")
	}
	if !enqueue(at(100), 4, time.Second) || c.Has(1) || !c.Has(2) || !c.Has(4) {
		t.Fatalf("after the first pull's deadline: has 1 %v, 2 %v, 4 %v", c.Has(1), c.Has(2), c.Has(4))
	}
	if _, done := c.Take(); len(done) != 1 || done[0].Req != 1 || done[0].Why != FallbackExpired {
		t.Fatalf("done %+v", done)
	}
}
