package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// rawDial opens a plain TCP connection to p from local IP from (""
// for any), as an unauthenticated stranger would.
func rawDial(t *testing.T, p *end, from string) net.Conn {
	t.Helper()
	var d net.Dialer
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", string(p.tr.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// lengthPrefix is a frame header announcing a payload of n bytes.
func lengthPrefix(n uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return b[:]
}

// waitClosed reads raw until the transport closes it, within waitLimit.
func waitClosed(t *testing.T, raw net.Conn) {
	t.Helper()
	raw.SetReadDeadline(time.Now().Add(waitLimit))
	buf := make([]byte, 512)
	for {
		if _, err := raw.Read(buf); err != nil {
			if errors.Is(err, io.EOF) || isReset(err) {
				return
			}
			t.Fatalf("the transport did not close the connection: %v", err)
		}
	}
}

// TestFrameCapBeforeAuthentication: before its handshake, a connection
// gets at most a handshake message's frame, whatever it announces; after
// it, its role's cap.
func TestFrameCapBeforeAuthentication(t *testing.T) {
	noLeaks(t)
	p := newEnd(t, Config{}, true)
	raw := rawDial(t, p, "")
	raw.Write(lengthPrefix(wire.MaxHandshakePayloadBytes + 1))
	acc := p.expect(transport.Accepted, 0)
	ev := p.expect(transport.Closed, acc.Conn)
	if !strings.HasPrefix(ev.Reason, ReasonFrameTooLarge) || !strings.Contains(ev.Reason, "before authentication") {
		t.Fatalf("closed with %q", ev.Reason)
	}
	waitClosed(t, raw)
	st := p.tr.Stats()
	if st.Dropped[DropFrameTooLarge] != 1 || st.HandshakeFailures[HandshakeFailure{"accepted", "protocol"}] != 1 {
		t.Fatalf("%+v", st)
	}

	// Authenticated, the same connection takes a RENEW far larger than
	// a handshake (P's side), and D's side a large BLOCK.
	d := newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	renew := &wire.Renew{Seq: 1, Leases: make([]wire.LeaseRef, 10000)}
	if !d.tr.Send(dc, renew) {
		t.Fatal("send")
	}
	if ev := p.expect(transport.Received, pc); ev.Msg.Type() != wire.MsgRenew {
		t.Fatalf("%v", ev)
	}
	if !p.tr.Send(pc, &wire.Block{Data: make([]byte, 1<<20)}) {
		t.Fatal("send")
	}
	if ev := d.expect(transport.Received, dc); ev.Msg.Type() != wire.MsgBlock {
		t.Fatalf("%v", ev)
	}
	if st := p.tr.Stats(); st.Authenticated != 1 || st.Unauthenticated != 0 {
		t.Fatalf("%+v", st)
	}
	// A BLOCK is over P's accepted cap (only RENEW, READ, RELEASE come
	// that way).
	if !d.tr.Send(dc, &wire.Block{Data: make([]byte, MaxDecoderFrameBytes)}) {
		t.Fatal("send")
	}
	if ev := p.expect(transport.Closed, pc); !strings.HasPrefix(ev.Reason, ReasonFrameTooLarge) {
		t.Fatalf("%v", ev)
	}
}

// TestDialedNamesAnotherProtocol: D dialing a port that answers in text (an
// HTTP server's "HTTP/1.1 400") closes at the length prefix and says what
// it saw.
func TestDialedNamesAnotherProtocol(t *testing.T) {
	noLeaks(t)
	var logs syncBuffer
	d := newEnd(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, false)
	addr, conns := silentListener(t)
	dc := d.tr.Dial(context.Background(), addr)
	d.expect(transport.Dialed, dc)
	c := <-conns
	c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	ev := d.expect(transport.Closed, dc)
	if !strings.HasPrefix(ev.Reason, ReasonFrameTooLarge) || !strings.Contains(ev.Reason, `"HTTP"`) {
		t.Fatalf("closed with %q", ev.Reason)
	}
	if st := d.tr.Stats(); st.HandshakeFailures[HandshakeFailure{"dialed", "protocol"}] != 1 {
		t.Fatalf("%+v", st)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "another protocol") {
		t.Fatalf("logs: %s", logs.String())
	}
}

// TestHandshakeTimeout: an accepted connection that says nothing is closed
// at the handshake deadline, and so is one that keeps sending keepalives
// (valid frames, but no handshake).
func TestHandshakeTimeout(t *testing.T) {
	noLeaks(t)
	p := newEnd(t, Config{HandshakeTimeout: 200 * time.Millisecond}, true)
	for _, keepalives := range []bool{false, true} {
		raw := rawDial(t, p, "")
		acc := p.expect(transport.Accepted, 0)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if keepalives {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-tick.C:
						if _, err := raw.Write(keepaliveFrame); err != nil {
							return
						}
					case <-stop:
						return
					}
				}
			}()
		}
		ev := p.expect(transport.Closed, acc.Conn)
		close(stop)
		wg.Wait()
		if !strings.HasPrefix(ev.Reason, ReasonHandshakeTimeout) {
			t.Fatalf("closed with %q", ev.Reason)
		}
		waitClosed(t, raw)
	}
	if st := p.tr.Stats(); st.Dropped[DropHandshakeTimeout] != 2 || st.HandshakeFailures[HandshakeFailure{"accepted", "timeout"}] != 2 {
		t.Fatalf("%+v", st)
	}
}

// TestSlowFrame: a peer trickling a frame (a byte every 20 ms) loses the
// connection once the frame's deadline (IdleTimeout + size / rate) passes,
// although bytes keep arriving.
func TestSlowFrame(t *testing.T) {
	noLeaks(t)
	p := newEnd(t, Config{KeepaliveInterval: 50 * time.Millisecond, IdleTimeout: 300 * time.Millisecond,
		HandshakeTimeout: time.Hour, MinReceiveRate: 1 << 20}, true)
	raw := rawDial(t, p, "")
	acc := p.expect(transport.Accepted, 0)
	hello := wire.AppendFrame(nil, &wire.Hello{Version: wire.Version, EngineID: strings.Repeat("d", 200)})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range hello {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := raw.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	ev := p.expect(transport.Closed, acc.Conn)
	close(stop)
	<-done
	if !strings.HasPrefix(ev.Reason, ReasonSlowFrame) {
		t.Fatalf("closed with %q", ev.Reason)
	}
	if st := p.tr.Stats(); st.Dropped[DropSlowFrame] != 1 {
		t.Fatalf("%+v", st)
	}
}

// TestUnauthenticatedBounds: beyond MaxUnauthenticatedPerSource from one
// address, or MaxUnauthenticated in all, the oldest unauthenticated
// connection goes; authenticated ones do not count.
func TestUnauthenticatedBounds(t *testing.T) {
	noLeaks(t)
	p := newEnd(t, Config{MaxUnauthenticated: 4, MaxUnauthenticatedPerSource: 2}, true)
	d := newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d) // from 127.0.0.1, authenticated

	// open dials from an address and returns the Accepted connection;
	// Closed events of evicted connections, which may come before or after
	// it, are collected in closed.
	var closed []transport.Event
	open := func(from string) (net.Conn, transport.ConnID) {
		raw := rawDial(t, p, from)
		for {
			ev := p.next()
			switch ev.Kind {
			case transport.Accepted:
				return raw, ev.Conn
			case transport.Closed:
				closed = append(closed, ev)
			default:
				t.Fatalf("%v", ev)
			}
		}
	}
	// evicted waits for the n-th Closed event and checks it.
	evicted := func(n int, not transport.ConnID, want string) transport.Event {
		for len(closed) < n {
			ev := p.expect(transport.Closed, 0)
			closed = append(closed, ev)
		}
		ev := closed[n-1]
		if !strings.HasPrefix(ev.Reason, ReasonEvicted) || !strings.Contains(ev.Reason, want) || ev.Conn == not {
			t.Fatalf("%v", ev)
		}
		return ev
	}
	a1, id1 := open("127.0.0.1")
	_, id2 := open("127.0.0.1")
	_, _ = open("127.0.0.1") // a third from 127.0.0.1: a1 goes
	if ev := evicted(1, 0, "from 127.0.0.1"); ev.Conn != id1 {
		t.Fatalf("evicted %v, want the oldest %d", ev, id1)
	}
	waitClosed(t, a1)
	_, _ = open("127.0.0.2")
	_, _ = open("127.0.0.3") // four unauthenticated now
	_, _ = open("127.0.0.4") // a fifth: the oldest of all goes (the second from 127.0.0.1)
	if ev := evicted(2, 0, "unauthenticated connections, the oldest"); ev.Conn != id2 {
		t.Fatalf("evicted %v, want the oldest %d", ev, id2)
	}
	st := p.tr.Stats()
	if st.Unauthenticated != 4 || st.Authenticated != 1 || st.Dropped[DropSource] != 1 || st.Dropped[DropUnauthenticated] != 1 {
		t.Fatalf("%+v", st)
	}
	// The authenticated connection still works.
	if !d.tr.Send(dc, &wire.ReadEnd{ReadID: 7}) {
		t.Fatal("send")
	}
	if ev := p.expect(transport.Received, pc); ev.Msg.Type() != wire.MsgReadEnd {
		t.Fatalf("%v", ev)
	}
}

// TestReceiveBudget: frames beyond the budget wait for others to be done;
// one alone always passes; a dead connection stops waiting.
func TestReceiveBudget(t *testing.T) {
	b := budget{limit: 100}
	dead := make(chan struct{})
	if !b.acquire(60, dead) || !b.acquire(40, dead) {
		t.Fatal("within the limit")
	}
	got := make(chan bool)
	go func() { got <- b.acquire(10, dead) }()
	select {
	case <-got:
		t.Fatal("acquired over the limit")
	case <-time.After(20 * time.Millisecond):
	}
	b.release(40)
	if !<-got || b.inUse() != 70 || b.waits.Load() != 1 {
		t.Fatalf("in use %d, waits %d", b.inUse(), b.waits.Load())
	}
	b.release(70)
	if !b.acquire(1000, dead) {
		t.Fatal("a frame alone is always admitted")
	}
	go func() { got <- b.acquire(1, dead) }()
	close(dead)
	if <-got {
		t.Fatal("acquired on a dead connection")
	}
	b.release(1000)
	if b.inUse() != 0 {
		t.Fatal(b.inUse())
	}
}

// TestRefusalIsLogged: P's owner refusing a handshake (AUTH_ACK
// unauthenticated: a wrong cluster secret) is counted and logged at WARN
// with the peer.
func TestRefusalIsLogged(t *testing.T) {
	noLeaks(t)
	var logs syncBuffer
	p := newEnd(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, true)
	d := newEnd(t, Config{}, false)
	pc, _ := connectRaw(t, p, d)
	p.tr.Send(pc, &wire.AuthAck{Status: wire.StatusUnauthenticated})
	p.tr.Close(pc)
	deadline := time.Now().Add(waitLimit)
	for p.tr.Stats().HandshakeFailures[HandshakeFailure{"accepted", "refused"}] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%+v", p.tr.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "different cluster secrets") ||
		!strings.Contains(logs.String(), "peer=127.0.0.1:") {
		t.Fatalf("logs: %s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
