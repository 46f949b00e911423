package scenarios

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/wire"
)

// rawPeer is a hand-driven transfer client of P: wire frames over a plain
// TCP connection, no transport package in between.
type rawPeer struct {
	t   testing.TB
	c   net.Conn
	buf []byte
	// After a handshake, frames are sealed with the session's keys (as the
	// engines' transports seal them).
	sealer *wire.Sealer
	opener *wire.Opener
}

func dialRaw(t testing.TB, addr string) *rawPeer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawPeer{t: t, c: c}
}

func (r *rawPeer) send(m wire.Message) {
	r.t.Helper()
	frame := wire.AppendFrame(nil, m)
	if r.sealer != nil {
		frame = r.sealer.Seal(frame)
	}
	if _, err := r.c.Write(frame); err != nil {
		r.t.Fatalf("send %v: %v", m.Type(), err)
	}
}

// recv returns the next message, skipping the transport's keepalives (type
// 0, no payload); io.EOF when P closed the connection.
func (r *rawPeer) recv() (wire.Message, error) {
	r.c.SetReadDeadline(time.Now().Add(e2e.Timeout))
	for {
		var frame []byte
		var err error
		if r.opener != nil {
			if frame, err = wire.ReadSealedFrame(r.c, r.buf[:0], 0); err == nil {
				r.buf = frame
				frame, err = r.opener.Open(frame)
			}
		} else if frame, err = wire.ReadFrame(r.c, r.buf[:0], 0); err == nil {
			r.buf = frame
		}
		if err != nil {
			return nil, err
		}
		if len(frame) == 1 && frame[0] == 0 {
			continue
		}
		return wire.Decode(frame)
	}
}

// expect receives a message of m's type and decodes it into m.
func expect[M wire.Message](r *rawPeer) M {
	r.t.Helper()
	got, err := r.recv()
	if err != nil {
		r.t.Fatalf("waiting for a %T: %v", *new(M), err)
	}
	m, ok := got.(M)
	if !ok {
		r.t.Fatalf("got %v %+v, want a %T", got.Type(), got, *new(M))
	}
	return m
}

// expectClosed checks that P closes the connection with nothing more sent.
func (r *rawPeer) expectClosed() {
	r.t.Helper()
	m, err := r.recv()
	if err == nil {
		r.t.Fatalf("got %v %+v, want the connection closed", m.Type(), m)
	}
	// EOF or a reset: closed either way. A timeout means it stayed open.
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatalf("P left the connection open: %v", err)
	}
}

// hello sends HELLO as D id and checks P's proof with key; it returns P's
// answer and D's nonce.
func (r *rawPeer) hello(id string) (*wire.HelloAck, [16]byte) {
	r.t.Helper()
	h := &wire.Hello{Version: wire.Version, EngineID: id}
	rand.Read(h.Nonce[:])
	r.send(h)
	ack := expect[*wire.HelloAck](r)
	if ack.Status != wire.StatusOK || !wire.VerifyMAC(secret, wire.RoleP, h.Nonce, ack.EngineID, id, ack.MAC) {
		r.t.Fatalf("HELLO_ACK %v, or P's proof does not verify", ack.Status)
	}
	return ack, h.Nonce
}

// handshake authenticates as D id with the cluster secret; the frames
// after it are sealed.
func (r *rawPeer) handshake(id string) {
	r.t.Helper()
	ack, nonce := r.hello(id)
	r.send(&wire.Auth{MAC: wire.ComputeMAC(secret, wire.RoleD, ack.Nonce, ack.EngineID, id)})
	k := wire.DeriveSessionKeys(secret, nonce, ack.Nonce, ack.EngineID, id)
	r.sealer = wire.NewSealer(k.DToP)
	if st := expect[*wire.AuthAck](r).Status; st != wire.StatusOK {
		r.t.Fatalf("AUTH_ACK %v", st)
	}
	r.opener = wire.NewOpener(k.PToD)
}

// leaseOf parses the lease id and token of P's kv_transfer_params.
func leaseOf(t testing.TB, kv json.RawMessage) (wire.LeaseID, wire.Token) {
	t.Helper()
	var f struct {
		ID    string `json:"lease_id"`
		Token string `json:"lease_token"`
	}
	if err := json.Unmarshal(kv, &f); err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseUint(f.ID, 16, 64)
	if err != nil {
		t.Fatalf("lease_id %q: %v", f.ID, err)
	}
	tok, err := wire.ParseToken(f.Token)
	if err != nil {
		t.Fatal(err)
	}
	return wire.LeaseID(id), tok
}

// S17: requests from a peer that cannot prove the right to a lease get a
// clear refusal and no data, and leave the lease untouched:
//   - an authenticated peer (real handshake with the cluster secret)
//     presenting a forged token: READ → READ_END bad_token with no BLOCK,
//     RENEW → bad_token, RELEASE → bad_token;
//   - a peer that skips the handshake, presenting the right token: READ →
//     READ_END unauthenticated, AUTH_ACK unauthenticated, connection closed;
//   - a peer whose AUTH proof is made with a wrong secret: AUTH_ACK
//     unauthenticated, connection closed.
//
// Then a real D pulls the lease (--fallback fail: the pull must succeed)
// and its tokens equal the single engine's; P releases on read_done only.
func TestE2ES17ForgedTokenRefused(t *testing.T) {
	skipShort(t)
	p := startP(t)
	// D starts before the lease is granted: the forgeries and D's pull must
	// fit in the 3 s lease (D runs --fallback fail), a process start need
	// not.
	d := startD(t, "D", "--fallback", "fail")
	j := job{id: "s17", prompt: pdPrompt, maxTokens: 16, seed: 17}
	kv := p.prefill(t, j)
	leaseID, token := leaseOf(t, kv)
	forged := token
	forged[0] ^= 1
	before := p.metrics(t)
	if before.held() == 0 {
		t.Fatal("P holds nothing for the lease")
	}

	t.Run("forged token", func(t *testing.T) {
		r := dialRaw(t, p.transfer)
		r.handshake("forger")
		r.send(&wire.Read{ReadID: 1, Lease: leaseID, Token: forged, Indexes: []uint32{0, 1}})
		if end := expect[*wire.ReadEnd](r); end.ReadID != 1 || end.Status != wire.StatusBadToken {
			t.Errorf("READ with a forged token: %+v, want READ_END bad_token", end)
		}
		r.send(&wire.Renew{Seq: 1, Leases: []wire.LeaseRef{{ID: leaseID, Token: forged}}})
		if ack := expect[*wire.RenewAck](r); len(ack.Results) != 1 || ack.Results[0].Status != wire.StatusBadToken {
			t.Errorf("RENEW with a forged token: %+v, want bad_token", ack)
		}
		r.send(&wire.Release{Lease: leaseID, Token: forged, Reason: wire.ReasonReadDone})
		if ack := expect[*wire.ReleaseAck](r); ack.Status != wire.StatusBadToken {
			t.Errorf("RELEASE with a forged token: %+v, want bad_token", ack)
		}
	})
	t.Run("no handshake", func(t *testing.T) {
		r := dialRaw(t, p.transfer)
		r.send(&wire.Read{ReadID: 2, Lease: leaseID, Token: token, Indexes: []uint32{0}})
		if end := expect[*wire.ReadEnd](r); end.Status != wire.StatusUnauthenticated {
			t.Errorf("READ before the handshake: %+v, want READ_END unauthenticated", end)
		}
		if ack := expect[*wire.AuthAck](r); ack.Status != wire.StatusUnauthenticated {
			t.Errorf("AUTH_ACK %v, want unauthenticated", ack.Status)
		}
		r.expectClosed()
	})
	t.Run("wrong secret", func(t *testing.T) {
		r := dialRaw(t, p.transfer)
		ack, _ := r.hello("impostor")
		r.send(&wire.Auth{MAC: wire.ComputeMAC([]byte("not the cluster secret, guessed"), wire.RoleD, ack.Nonce, ack.EngineID, "impostor")})
		if st := expect[*wire.AuthAck](r).Status; st != wire.StatusUnauthenticated {
			t.Errorf("AUTH_ACK %v, want unauthenticated", st)
		}
		r.expectClosed()
	})

	m := p.metrics(t)
	if m.held() != before.held() || m.get("kvlease_leases_active") != 1 || len(m.released()) != 0 {
		t.Errorf("P after the forgeries: %v held (was %v), %v leases, released %v",
			m.held(), before.held(), m.get("kvlease_leases_active"), m.released())
	}
	if got := m.get("kvlease_transfer_auth_failures_total"); got != 2 {
		t.Errorf("auth failures %v, want 2", got)
	}
	if got := m.get("kvlease_lease_reads_total", "result", "refused"); got != 1 {
		t.Errorf("refused reads %v, want 1", got)
	}
	if got := m.get("kvlease_transfer_bytes_total", "direction", "out"); got != 0 {
		t.Errorf("P served %v bytes", got)
	}

	decodeMatches(t, d, j, kv)
	e2e.WaitFor(t, "P to free the read blocks", func() bool { return p.metrics(t).held() == 0 })
	wantReleased(t, p, map[string]float64{"read_done": 1})
	checkSettled(t, p, d)
}
