package xfer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
)

func TestProducerWrongTokenLeavesLeaseUntouched(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	s := e.connect()
	bad := g.Token
	bad[0] ^= 1
	e.advance(at(300))
	before, _ := e.p.Lease(g.Lease)
	msgs := []struct {
		m    wire.Message
		want wire.Status
	}{
		{&wire.Read{ReadID: 1, Lease: g.Lease, Token: bad, Indexes: []uint32{0}}, wire.StatusBadToken},
		{&wire.Renew{Leases: []wire.LeaseRef{{ID: g.Lease, Token: bad}}}, wire.StatusBadToken},
		{&wire.Release{Lease: g.Lease, Token: bad, Reason: wire.ReasonReadDone}, wire.StatusBadToken},
		{&wire.Read{ReadID: 2, Lease: g.Lease + 1, Token: g.Token, Indexes: []uint32{0}}, wire.StatusUnknownLease},
		{&wire.Read{ReadID: 3, Lease: g.Lease, Token: g.Token, Indexes: []uint32{2}}, wire.StatusBadIndex},
		{&wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonExpired}, wire.StatusBadRequest}, // not D's to say
	}
	for i, m := range msgs {
		out := e.send(s, m.m)
		var st wire.Status
		switch a := out[0].Msg.(type) {
		case *wire.ReadEnd:
			st = a.Status
		case *wire.RenewAck:
			st = a.Results[0].Status
		case *wire.ReleaseAck:
			st = a.Status
		}
		if len(out) != 1 || st != m.want || out[0].Close {
			t.Fatalf("message %d: %+v, want %v", i, out, m.want)
		}
	}
	after, ok := e.p.Lease(g.Lease)
	if !ok || after != before || len(e.takeReads()) != 0 || len(e.rel) != 0 {
		t.Fatalf("lease changed: %+v → %+v", before, after)
	}
	if e.p.Stats().ReadsRefused != 3 {
		t.Fatalf("refused %d", e.p.Stats().ReadsRefused)
	}
}

func TestProducerRefusesUnauthenticated(t *testing.T) {
	hello := &wire.Hello{Version: wire.Version, EngineID: "d", Nonce: [16]byte{9}}
	cases := []struct {
		name  string
		pre   []wire.Message
		m     func(g Grant, pNonce [16]byte) wire.Message
		check func(t *testing.T, out []Envelope)
	}{
		{"read before hello", nil, func(g Grant, _ [16]byte) wire.Message {
			return &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}}
		}, func(t *testing.T, out []Envelope) {
			if re, ok := out[0].Msg.(*wire.ReadEnd); !ok || re.Status != wire.StatusUnauthenticated {
				t.Fatalf("%+v", out)
			}
		}},
		{"renew before auth", []wire.Message{hello}, func(g Grant, _ [16]byte) wire.Message {
			return &wire.Renew{Leases: []wire.LeaseRef{ref(g)}}
		}, func(t *testing.T, out []Envelope) {
			if a, ok := out[0].Msg.(*wire.RenewAck); !ok || a.Results[0].Status != wire.StatusUnauthenticated {
				t.Fatalf("%+v", out)
			}
		}},
		{"bad MAC", []wire.Message{hello}, func(g Grant, n [16]byte) wire.Message {
			return &wire.Auth{MAC: wire.ComputeMAC([]byte("wrong secret"), wire.RoleD, n, "p", "d")}
		}, nil},
		{"release before hello", nil, func(g Grant, _ [16]byte) wire.Message {
			return &wire.Release{Lease: g.Lease, Token: g.Token, Reason: wire.ReasonReadDone}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newPEnv(t, testConfig(PolicyLease))
			g := e.grant("r", 8)
			before, _ := e.p.Lease(g.Lease)
			e.p.Connected(e.now, 1)
			var pNonce [16]byte
			for _, m := range tc.pre {
				out := e.send(1, m)
				if a, ok := out[0].Msg.(*wire.HelloAck); ok {
					pNonce = a.Nonce
				}
			}
			out := e.send(1, tc.m(g, pNonce))
			last := out[len(out)-1]
			if a, ok := last.Msg.(*wire.AuthAck); !ok || a.Status != wire.StatusUnauthenticated || !last.Close {
				t.Fatalf("no refusal and close: %+v", out)
			}
			if tc.check != nil {
				tc.check(t, out)
			}
			after, ok := e.p.Lease(g.Lease)
			if !ok || after != before || len(e.takeReads()) != 0 || e.p.Stats().AuthFailures != 1 {
				t.Fatalf("lease touched: %+v → %+v", before, after)
			}
			// The session is gone: later messages are ignored.
			if out := e.send(1, &wire.Read{ReadID: 2, Lease: g.Lease, Token: g.Token}); len(out) != 0 {
				t.Fatalf("served a closed session: %+v", out)
			}
		})
	}
}

func TestProducerBadVersion(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	e.p.Connected(e.now, 1)
	out := e.send(1, &wire.Hello{Version: wire.Version + 1, EngineID: "d"})
	if a, ok := only[*wire.HelloAck](t, out); !ok || a.Status != wire.StatusBadVersion || !out[0].Close || a.Version != wire.Version {
		t.Fatalf("%+v", out)
	}
}

func TestProducerDuplicateHandshakeAndRead(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	e.p.Connected(e.now, 1)
	hello := &wire.Hello{Version: wire.Version, EngineID: "d", Nonce: [16]byte{4}}
	out := e.send(1, hello)
	ack := out[0].Msg.(*wire.HelloAck)
	if out := e.send(1, hello); len(out) != 0 {
		t.Fatalf("duplicate hello answered %+v", out)
	}
	auth := &wire.Auth{MAC: wire.ComputeMAC(testSecret, wire.RoleD, ack.Nonce, "p", "d")}
	e.send(1, auth)
	if out := e.send(1, auth); len(out) != 0 {
		t.Fatalf("duplicate auth answered %+v", out)
	}
	if out := e.send(1, hello); len(out) != 0 {
		t.Fatalf("hello after auth answered %+v", out)
	}
	rd := &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0, 1}}
	e.send(1, rd)
	if out := e.send(1, rd); len(out) != 0 {
		t.Fatalf("duplicate read answered %+v", out)
	}
	if w := e.takeReads(); len(w) != 1 || e.p.NumPinned() != 1 {
		t.Fatalf("reads %d pinned %d", len(w), e.p.NumPinned())
	}
}

func TestProducerBogusMessageClosesSession(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	s := e.connect()
	e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
	w := e.takeReads()
	out := e.send(s, &wire.Block{})
	if a, ok := only[*wire.AuthAck](t, out); !ok || a.Status != wire.StatusBadRequest || !out[0].Close {
		t.Fatalf("%+v", out)
	}
	// The session ended and its lease gets the grace, but its read stays
	// pinned until the edge says it is over: the edge may still be
	// sending the blocks' bytes straight from the pool.
	if e.p.NumPinned() != 1 {
		t.Fatal("read unpinned before the edge finished it")
	}
	info, _ := e.p.Lease(g.Lease)
	if info.LostAt != e.now.Add(40*time.Millisecond) {
		t.Fatalf("lease %+v", info)
	}
	e.p.ReadFinished(e.now, s, w[0].ReadID, false)
	if e.p.NumPinned() != 0 {
		t.Fatal("read still pinned after ReadFinished")
	}
	e.advance(at(40))
	if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonPeerLost {
		t.Fatalf("%+v", e.rel)
	}
}

func TestProducerPeerGraceAndRebind(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 8)
	s1 := e.connect()
	e.send(s1, &wire.Renew{Leases: []wire.LeaseRef{ref(g)}})
	e.advance(at(10))
	e.p.Disconnected(e.now, s1)
	e.p.Disconnected(e.now, s1) // twice: no-op
	e.advance(at(49))           // grace ends at 50
	s2 := e.connect()
	e.send(s2, &wire.Renew{Leases: []wire.LeaseRef{ref(g)}})
	info, _ := e.p.Lease(g.Lease)
	if info.Session != s2 || info.LostAt != clock.Never {
		t.Fatalf("not rebound: %+v", info)
	}
	e.advance(at(60))
	if len(e.rel) != 0 {
		t.Fatalf("released after rebinding: %+v", e.rel)
	}
	// Reading from a new session also rebinds.
	e.p.Disconnected(e.now, s2)
	s3 := e.connect()
	e.send(s3, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
	e.advance(at(200))
	if len(e.rel) != 0 {
		t.Fatalf("released: %+v", e.rel)
	}
	// The session breaks during the read: the read ends unsuccessfully,
	// the grace runs.
	e.p.Disconnected(e.now, s3)
	if e.p.NumPinned() != 0 || e.p.Stats().ReadsServed != 0 {
		t.Fatal("broken read still pinned or counted served")
	}
	e.advance(at(240))
	if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonPeerLost || r.at != at(240) {
		t.Fatalf("%+v", e.rel)
	}
}

// TestProducerDuplicateRequestID: a request id reused while the first
// lease of that id lives (S29) leaves the first lease alone; the id names
// the newest lease, and each lease is addressed exactly by its LeaseID.
func TestProducerDuplicateRequestID(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g1 := e.grant("r", 8)
	s := e.connect()
	e.send(s, &wire.Read{ReadID: 1, Lease: g1.Lease, Token: g1.Token, Indexes: []uint32{0, 1}})
	g2 := e.grant("r", 8) // another request with the same id finishes
	g3 := e.grant("r", 8) // and a third
	e.p.ReadFinished(e.now, s, 1, true)
	e.check()
	if len(e.rel) != 0 || e.p.NumLeases() != 3 {
		t.Fatalf("a reused id released a lease: %+v, %d live", e.rel, e.p.NumLeases())
	}
	// The first request's handler: its answer was delivered, then its
	// client aborts; only its own lease is revoked.
	e.p.DeliveredLease(e.now, g1.Lease, true)
	if !e.p.AbortLease(e.now, g1.Lease) {
		t.Fatal("AbortLease of a live lease reported none")
	}
	if r, ok := released(e, g1.Lease); !ok || r.reason != wire.ReasonAborted || len(e.rel) != 1 {
		t.Fatalf("%+v", e.rel)
	}
	// The second's answer was not delivered: only its lease goes.
	e.p.DeliveredLease(e.now, g2.Lease, false)
	if r, ok := released(e, g2.Lease); !ok || r.reason != wire.ReasonUndelivered || len(e.rel) != 2 {
		t.Fatalf("%+v", e.rel)
	}
	// Addressing released leases again changes nothing.
	e.p.DeliveredLease(e.now, g1.Lease, false)
	if e.p.AbortLease(e.now, g2.Lease) || len(e.rel) != 2 {
		t.Fatalf("a released lease was addressed: %+v", e.rel)
	}
	// The request id names the newest lease.
	e.p.Delivered(e.now, "r", false)
	if r, ok := released(e, g3.Lease); !ok || r.reason != wire.ReasonUndelivered || len(e.rel) != 3 {
		t.Fatalf("%+v", e.rel)
	}
	e.check()
}

func TestProducerMaxServedReads(t *testing.T) {
	cfg := testConfig(PolicyLease)
	cfg.MaxServedReads = 2
	e := newPEnv(t, cfg)
	g := e.grant("r", 8)
	s := e.connect()
	for id := uint64(1); id <= 3; id++ {
		out := e.send(s, &wire.Read{ReadID: id, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}})
		if id <= 2 && len(out) != 0 {
			t.Fatalf("read %d refused: %+v", id, out)
		}
		if id == 3 {
			if re, ok := only[*wire.ReadEnd](t, out); !ok || re.Status != wire.StatusBusy {
				t.Fatalf("read beyond the bound: %+v", out)
			}
		}
	}
	if e.p.NumPinned() != 2 || e.p.Stats().ReadsBusy != 1 {
		t.Fatalf("pinned %d stats %+v", e.p.NumPinned(), e.p.Stats())
	}
	e.p.ReadFinished(e.now, s, 1, true)
	if out := e.send(s, &wire.Read{ReadID: 4, Lease: g.Lease, Token: g.Token, Indexes: []uint32{0}}); len(out) != 0 {
		t.Fatalf("read after room refused: %+v", out)
	}
	e.p.ReadFinished(e.now, s, 99, true) // unknown: no-op
	e.check()
}

func TestProducerReadContent(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	g := e.grant("r", 10)
	s := e.connect()
	e.send(s, &wire.Read{ReadID: 1, Lease: g.Lease, Token: g.Token, Indexes: []uint32{2, 0}})
	w := e.takeReads()[0]
	if w.Session != s || w.ReadID != 1 || w.Lease != g.Lease || len(w.Blocks) != 2 {
		t.Fatalf("%+v", w)
	}
	for _, b := range w.Blocks {
		filled := min(testBlockSize, 10-int(b.Index)*testBlockSize)
		if int(b.Tokens) != filled || len(b.Digests) != filled || len(b.Data) != filled*testBPT || b.Checksum != kvblock.Checksum(b.Digests) {
			t.Fatalf("block %d: %+v", b.Index, b)
		}
		for pos := 0; pos < filled; pos++ {
			slot := b.Data[pos*testBPT : (pos+1)*testBPT]
			if slot[3] != slotByte("r", int(b.Index)*testBlockSize+pos, 3) || b.Digests[pos] != kvblock.SlotDigest(slot) {
				t.Fatalf("block %d slot %d content", b.Index, pos)
			}
		}
	}
	if w.Bytes() != (4+2)*testBPT+8*6 {
		t.Fatalf("bytes %d", w.Bytes())
	}
}

func TestProducerPolicies(t *testing.T) {
	t.Run("vllm-lease ignores aborts after finish and does not bind", func(t *testing.T) {
		e := newPEnv(t, testConfig(PolicyVLLMLease))
		g := e.grant("r", 8)
		e.p.Delivered(e.now, "r", false) // undelivered: ignored
		if !e.p.Abort(e.now, "r") {
			t.Fatal("abort did not find the lease")
		}
		s := e.connect()
		e.advance(at(300))
		e.send(s, &wire.Renew{Leases: []wire.LeaseRef{ref(g)}})
		info, _ := e.p.Lease(g.Lease)
		if info.Session != 0 || info.Deadline != at(700) {
			t.Fatalf("lease %+v", info)
		}
		e.p.Disconnected(e.now, s)
		e.advance(at(699))
		if len(e.rel) != 0 {
			t.Fatalf("released early: %+v", e.rel)
		}
		e.advance(at(700))
		if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired {
			t.Fatalf("%+v", e.rel)
		}
		// Rejections are honoured.
		g2 := e.grant("r2", 4)
		e.send(e.connect(), &wire.Release{Lease: g2.Lease, Token: g2.Token, Reason: wire.ReasonRejected})
		if r, ok := released(e, g2.Lease); !ok || r.reason != wire.ReasonRejected {
			t.Fatalf("%+v", e.rel)
		}
	})
	t.Run("legacy-timeout: one fixed timeout", func(t *testing.T) {
		e := newPEnv(t, testConfig(PolicyLegacyTimeout))
		g := e.grant("r", 8)
		if g.ExpiresIn != 480*time.Second {
			t.Fatalf("lease %v", g.ExpiresIn)
		}
		e.p.Delivered(e.now, "r", false)
		e.p.Abort(e.now, "r")
		s := e.connect()
		e.advance(at(400_000))
		e.send(s, &wire.Renew{Leases: []wire.LeaseRef{ref(g)}}) // no extension
		e.p.Disconnected(e.now, s)
		e.advance(at(479_999))
		if len(e.rel) != 0 {
			t.Fatalf("released early: %+v", e.rel)
		}
		e.advance(at(480_000))
		if r, ok := released(e, g.Lease); !ok || r.reason != wire.ReasonExpired {
			t.Fatalf("%+v", e.rel)
		}
	})
}

func TestProducerReleaseAllOrder(t *testing.T) {
	e := newPEnv(t, testConfig(PolicyLease))
	for i := range 5 {
		e.grant(fmt.Sprintf("r%d", i), 4)
	}
	e.p.ReleaseAll(e.now, wire.ReasonShutdown)
	if len(e.rel) != 5 || e.p.Stats().Released[wire.ReasonShutdown] != 5 || e.pool.NumHeld() != 0 {
		t.Fatalf("%+v", e.rel)
	}
	for i := 1; i < len(e.rel); i++ {
		if e.rel[i].lease < e.rel[i-1].lease {
			t.Fatal("ReleaseAll not in lease-id order")
		}
	}
}

func TestProducerDueHeapBound(t *testing.T) {
	// Renewals, session losses and rebinding re-key leases in place: the
	// heap never holds more entries than live leases.
	cfg := testConfig(PolicyLease)
	cfg.MaxLeases = 16
	e := newPEnv(t, cfg)
	var gs []Grant
	for i := range 16 {
		gs = append(gs, e.grant(fmt.Sprintf("r%d", i), 4))
	}
	for round := range 50 {
		s := e.connect()
		var refs []wire.LeaseRef
		for _, g := range gs {
			refs = append(refs, ref(g))
		}
		e.send(s, &wire.Renew{Leases: refs})
		e.p.Disconnected(e.now, s)
		if len(e.p.due) != 16 {
			t.Fatalf("round %d: %d heap entries for 16 leases", round, len(e.p.due))
		}
		e.advance(e.now + clock.Instant(time.Millisecond))
	}
}

func TestProducerCheckDue(t *testing.T) {
	// CheckDue finds a lease left live past its due instant (a sweep that
	// did not run, or stopped early), and accepts one that is due but
	// pinned by a read: it ends when the read does.
	e := newPEnv(t, testConfig(PolicyLease))
	s := e.connect()
	g1 := e.grant("a", 4)
	e.advance(at(10))
	g2 := e.grant("b", 4)
	if err := e.p.CheckDue(at(600)); err == nil || !strings.Contains(err.Error(), fmt.Sprint(g1.Lease)) {
		t.Fatalf("no tick at 600 ms: CheckDue = %v, want lease %d overdue", err, g1.Lease)
	}
	if err := e.p.CheckDue(at(599)); err != nil {
		t.Fatalf("nothing due before 600 ms: %v", err)
	}
	e.send(s, &wire.Read{ReadID: 1, Lease: g2.Lease, Token: g2.Token, Indexes: []uint32{0}})
	e.advance(at(700)) // a expires; b falls due while pinned
	if _, live := e.p.Lease(g2.Lease); !live {
		t.Fatal("pinned lease released")
	}
	e.p.ReadFinished(e.now, s, 1, true)
	if _, live := e.p.Lease(g2.Lease); live {
		t.Fatal("lease outlived its read")
	}
}
