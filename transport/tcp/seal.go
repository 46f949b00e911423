package tcp

import (
	"fmt"

	"github.com/kvlease/kvlease/wire"
)

// sealing is a connection's frame authentication (Config.Secret): the
// handshake's values as they pass, then the session's sealer and opener
// (see wire.Sealer). Guarded by conn.mu, except as noted.
type sealing struct {
	dNonce, pNonce  [16]byte
	dID, pID        string
	hello, helloAck bool
	sealer          *wire.Sealer // the writer's once out is set
	opener          *wire.Opener // the reader's once it switches
	out             bool         // frames enqueued from now on are sealed
	in              bool         // reader-owned: frames read from now on are sealed
}

// sealsAfter reports whether m, sent by this end, is the last plain frame
// of its direction: AUTH from D, AUTH_ACK with StatusOK from P.
func sealsAfter(m wire.Message, accepted bool) bool {
	switch m := m.(type) {
	case *wire.Auth:
		return !accepted
	case *wire.AuthAck:
		return accepted && m.Status == wire.StatusOK
	}
	return false
}

// opensAfter reports whether m, received, is the last plain frame of the
// peer's direction.
func opensAfter(m wire.Message, accepted bool) bool {
	switch m := m.(type) {
	case *wire.Auth:
		return accepted
	case *wire.AuthAck:
		return !accepted && m.Status == wire.StatusOK
	}
	return false
}

// recordHandshake keeps the nonce and engine id of a HELLO or HELLO_ACK
// this end sent or received, and derives the session's keys once it has
// both. The caller holds c.mu.
func (c *conn) recordHandshakeLocked(m wire.Message) {
	s := &c.seal
	switch m := m.(type) {
	case *wire.Hello:
		s.dNonce, s.dID, s.hello = m.Nonce, m.EngineID, true
	case *wire.HelloAck:
		if m.Status != wire.StatusOK {
			return
		}
		s.pNonce, s.pID, s.helloAck = m.Nonce, m.EngineID, true
	default:
		return
	}
	if !s.hello || !s.helloAck {
		return
	}
	k := wire.DeriveSessionKeys(c.t.cfg.Secret, s.dNonce, s.pNonce, s.pID, s.dID)
	send, recv := k.DToP, k.PToD
	if c.accepted {
		send, recv = k.PToD, k.DToP
	}
	s.sealer, s.opener = wire.NewSealer(send), wire.NewOpener(recv)
}

// observeReceived follows the handshake in a frame received, with
// Config.Secret: it records HELLO and HELLO_ACK, and switches the reader
// to sealed frames after the peer's last plain one. It returns why the
// connection must fail, or "".
func (c *conn) observeReceived(m wire.Message) string {
	if c.t.cfg.Secret == nil || c.seal.in {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recordHandshakeLocked(m)
	if opensAfter(m, c.accepted) {
		if c.seal.opener == nil {
			return fmt.Sprintf("%s: %s before the handshake's HELLO and HELLO_ACK", ReasonBadFrame, m.Type())
		}
		c.seal.in = true
	}
	return ""
}

// sealFrame seals the queued frame f for the writer as frame seq of the
// direction: a zero-copy BLOCK is copied into a buffer of its own first
// (its Data is the sender's). Frames of a batch are sealed concurrently,
// each by one goroutine.
func (c *conn) sealFrame(f *outFrame, seq uint64) {
	buf := f.buf
	if len(f.data) > 0 {
		buf = append(getBuf(len(f.buf)+len(f.data)+wire.SealOverhead), f.buf...)
		buf = append(buf, f.data...)
		putBuf(f.buf)
		f.data = nil
	}
	f.buf = c.seal.sealer.SealSeq(buf, seq)
	f.seal = false
}
