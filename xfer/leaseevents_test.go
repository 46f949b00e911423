package xfer

import (
	"reflect"
	"testing"
	"time"

	"github.com/kvlease/kvlease/wire"
)

func TestProducerLeaseEvents(t *testing.T) {
	cfg := testConfig(PolicyLease)
	cfg.LeaseEvents = true
	e := newPEnv(t, cfg)
	g1 := e.grant("r1", 10) // 3 blocks
	g2 := e.grant("r2", 4)  // 1 block, never claimed
	s := e.connect()
	e.advance(at(300))
	e.send(s, &wire.Renew{Seq: 1, Leases: []wire.LeaseRef{ref(g1)}})
	e.advance(at(350))
	e.send(s, &wire.Renew{Seq: 2, Leases: []wire.LeaseRef{ref(g1)}})
	e.advance(at(400))
	e.send(s, &wire.Release{Lease: g1.Lease, Token: g1.Token, Reason: wire.ReasonReadDone})
	e.advance(at(600)) // r2's deadline
	peer := e.p.peerOf(s)
	if peer == "" {
		t.Fatal("the test session has no peer id")
	}
	want := []LeaseEvent{
		{Kind: LeaseGranted, Lease: g1.Lease, Request: "r1", Blocks: 3, Tokens: 10, ExpiresIn: 600 * time.Millisecond},
		{Kind: LeaseGranted, Lease: g2.Lease, Request: "r2", Blocks: 1, Tokens: 4, ExpiresIn: 600 * time.Millisecond},
		{Kind: LeaseClaimed, Lease: g1.Lease, Request: "r1", Peer: peer},
		{Kind: LeaseRenewed, Lease: g1.Lease, Request: "r1", ExpiresIn: 400 * time.Millisecond, Peer: peer}, // 300+400 = 700
		{Kind: LeaseRenewed, Lease: g1.Lease, Request: "r1", ExpiresIn: 400 * time.Millisecond, Peer: peer}, // 350+400 = 750
		{Kind: LeaseReleased, Lease: g1.Lease, Request: "r1", Reason: wire.ReasonReadDone, Held: 400 * time.Millisecond},
		{Kind: LeaseReleased, Lease: g2.Lease, Request: "r2", Reason: wire.ReasonExpired, Held: 600 * time.Millisecond},
	}
	if got := e.p.TakeLeaseEvents(); !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %+v\nwant %+v", got, want)
	}
	if got := e.p.TakeLeaseEvents(); got != nil {
		t.Errorf("taken twice: %+v", got)
	}

	// Off (the default), nothing is recorded.
	e = newPEnv(t, testConfig(PolicyLease))
	e.grant("r1", 4)
	e.advance(at(600))
	if got := e.p.TakeLeaseEvents(); got != nil {
		t.Errorf("recorded with LeaseEvents off: %+v", got)
	}
}
