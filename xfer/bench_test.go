package xfer_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// BenchmarkRenew measures P's side of one batched heartbeat: a Producer
// holding 10,000 granted leases, all bound to one authenticated D session,
// gets a RENEW of all 10,000 and answers it. One op is what P's node does
// per heartbeat: decode the frame, Handle (look up, check the token, extend
// and re-key every lease in the expiry heap, bind), Take the RENEW_ACK and
// encode it. Time advances between heartbeats, so every renewal moves
// every deadline. Target: ≤ 1 ms per op. Under the lease policy P answers
// only the leases that are gone (none here): no RENEW_ACK; vllm-lease
// answers every lease.
func BenchmarkRenew(b *testing.B) {
	for _, pol := range []xfer.Policy{xfer.PolicyLease, xfer.PolicyVLLMLease} {
		b.Run(pol.String(), func(b *testing.B) { benchRenew(b, pol) })
	}
}

func benchRenew(b *testing.B, pol xfer.Policy) {
	const (
		numLeases = 10_000
		pEngineID = "p-bench"
		dEngineID = "d-bench"
		session   = xfer.SessionID(1)
	)
	secret := []byte("0123456789abcdef0123456789abcdef")
	pool := kvblock.New(kvblock.Config{NumBlocks: numLeases, BlockSizeTokens: 16})
	cfg := xfer.DefaultConfig(pol)
	p := xfer.NewProducer(cfg, pool, pEngineID, secret, rand.New(rand.NewPCG(1, 2)))
	now := clock.Instant(0)

	refs := make([]wire.LeaseRef, 0, numLeases)
	for i := range numLeases {
		h := pool.NewHold(kvblock.HoldRequest, uint64(i))
		if !pool.Allocate(h, 1) {
			b.Fatal("pool exhausted")
		}
		g, ok := p.Grant(now, "req-"+strconv.Itoa(i), pool.Blocks(h), 16)
		if !ok {
			b.Fatalf("grant %d refused", i)
		}
		pool.Release(h)
		refs = append(refs, wire.LeaseRef{ID: g.Lease, Token: g.Token})
	}

	// The handshake, as D does it.
	p.Connected(now, session)
	hello := &wire.Hello{Version: wire.Version, EngineID: dEngineID, Nonce: [16]byte{1}}
	p.Handle(now, session, hello)
	ack := only[*wire.HelloAck](b, p)
	p.Handle(now, session, &wire.Auth{MAC: wire.ComputeMAC(secret, wire.RoleD, ack.Nonce, pEngineID, dEngineID)})
	if st := only[*wire.AuthAck](b, p).Status; st != wire.StatusOK {
		b.Fatalf("AUTH_ACK %v", st)
	}

	frame := wire.AppendFrame(nil, &wire.Renew{Seq: 1, Leases: refs})[4:] // as wire.ReadFrame returns it
	var ackBuf []byte
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now = now.Add(100 * time.Millisecond) // stays well within the 20 s extension
		m, err := wire.Decode(frame)
		if err != nil {
			b.Fatal(err)
		}
		p.Handle(now, session, m)
		out, _ := p.Take()
		if cfg.RenewsWhenDue() {
			if len(out) != 0 {
				b.Fatalf("op %d: %d messages, want none (every lease renewed)", i, len(out))
			}
			continue
		}
		if len(out) != 1 {
			b.Fatalf("op %d: %d messages, want one RENEW_ACK", i, len(out))
		}
		ra, ok := out[0].Msg.(*wire.RenewAck)
		if !ok || len(ra.Results) != numLeases || ra.Results[numLeases-1].Status != wire.StatusOK {
			b.Fatalf("op %d: %+v", i, out[0].Msg)
		}
		ackBuf = wire.AppendFrame(ackBuf[:0], ra)
	}
	b.StopTimer()
	if n := p.NumLeases(); n != numLeases {
		b.Fatalf("%d leases live after the renewals, want %d", n, numLeases)
	}
	if info, _ := p.Lease(refs[numLeases-1].ID); info.Deadline != now.Add(cfg.LeaseExtension) && now.Add(cfg.LeaseExtension) > clock.Instant(cfg.LeaseDuration) {
		b.Fatalf("last lease's deadline %v, want %v", info.Deadline, now.Add(cfg.LeaseExtension))
	}
}

// only takes the producer's outgoing messages and returns the one there
// must be, of type M.
func only[M wire.Message](b *testing.B, p *xfer.Producer) M {
	b.Helper()
	out, _ := p.Take()
	if len(out) != 1 {
		b.Fatalf("%d messages, want one %T", len(out), *new(M))
	}
	m, ok := out[0].Msg.(M)
	if !ok {
		b.Fatalf("got %T, want %T", out[0].Msg, *new(M))
	}
	return m
}
