package tcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/refused"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// waitLimit bounds every wait of these tests: far above what a loopback
// test needs, so it only fires on a hang.
const waitLimit = 10 * time.Second

// noLeaks fails the test if goroutines started during it are still alive
// at its end (after the cleanups registered later, which run first).
func noLeaks(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(waitLimit)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines leaked:\n%s", runtime.NumGoroutine()-base, buf[:runtime.Stack(buf, true)])
				return
			}
			<-tick.C
		}
	})
}

// end is one transport as a test sees it: events in arrival order.
type end struct {
	t       *testing.T
	tr      *Transport
	pending []transport.Event
}

func newEnd(t *testing.T, cfg Config, listen bool) *end {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Shutdown)
	if listen {
		if err := tr.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	return &end{t: t, tr: tr}
}

// next returns the next event, waiting for it.
func (e *end) next() transport.Event {
	e.t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for len(e.pending) == 0 {
		select {
		case <-e.tr.Ready():
			e.pending = e.tr.Poll(e.pending)
		case <-timer.C:
			e.t.Fatalf("no event within %v", waitLimit)
		}
	}
	ev := e.pending[0]
	e.pending = e.pending[1:]
	return ev
}

// expect returns the next event and checks its kind and connection.
func (e *end) expect(kind transport.EventKind, id transport.ConnID) transport.Event {
	e.t.Helper()
	ev := e.next()
	if ev.Kind != kind || (id != 0 && ev.Conn != id) {
		e.t.Fatalf("got event %v, want %v on conn %d", ev, kind, id)
	}
	return ev
}

// connect dials p from d, authenticates the connection as the engines'
// handshake does (D sends AUTH, P answers AUTH_ACK OK; the transport
// follows these two) and returns both ends' connection ids.
func connect(t *testing.T, p, d *end) (pc, dc transport.ConnID) {
	t.Helper()
	pc, dc = connectRaw(t, p, d)
	if !d.tr.Send(dc, &wire.Auth{}) {
		t.Fatal("Send AUTH failed")
	}
	if ev := p.expect(transport.Received, pc); ev.Msg.Type() != wire.MsgAuth {
		t.Fatalf("P received %v, want AUTH", ev.Msg)
	}
	if !p.tr.Send(pc, &wire.AuthAck{Status: wire.StatusOK}) {
		t.Fatal("Send AUTH_ACK failed")
	}
	if ev := d.expect(transport.Received, dc); ev.Msg.Type() != wire.MsgAuthAck {
		t.Fatalf("D received %v, want AUTH_ACK", ev.Msg)
	}
	return pc, dc
}

// connectRaw dials p from d and returns both ends' connection ids, not
// authenticated.
func connectRaw(t *testing.T, p, d *end) (pc, dc transport.ConnID) {
	t.Helper()
	dc = d.tr.Dial(context.Background(), p.tr.Addr())
	ev := d.expect(transport.Dialed, dc)
	if ev.Remote != p.tr.Addr() {
		t.Fatalf("Dialed remote %q, want the dialed address %q", ev.Remote, p.tr.Addr())
	}
	acc := p.expect(transport.Accepted, 0)
	if acc.Local != p.tr.Addr() {
		t.Errorf("Accepted local %q, want %q", acc.Local, p.tr.Addr())
	}
	return acc.Conn, dc
}

func tok(b byte) wire.Token {
	var t wire.Token
	for i := range t {
		t[i] = b + byte(i)
	}
	return t
}

// everyMessage returns one message of every type, every field set.
func everyMessage() []wire.Message {
	return []wire.Message{
		&wire.Hello{Version: wire.Version, EngineID: "d-1", Nonce: [16]byte{1, 2, 3}},
		&wire.HelloAck{Version: wire.Version, EngineID: "p-1", Nonce: [16]byte{4}, MAC: [32]byte{5, 6}, Status: wire.StatusBusy},
		&wire.Auth{MAC: [32]byte{7, 8, 9}},
		&wire.AuthAck{Status: wire.StatusUnauthenticated},
		&wire.Renew{Seq: 10, Leases: []wire.LeaseRef{{ID: 1, Token: tok(1)}, {ID: 2, Token: tok(2)}}},
		&wire.RenewAck{Seq: 10, Results: []wire.RenewResult{{ID: 1, Status: wire.StatusOK, ExpiresInMs: 2000}, {ID: 2, Status: wire.StatusExpired}}},
		&wire.Read{ReadID: 11, Lease: 1, Token: tok(3), Indexes: []uint32{0, 2, 5}},
		&wire.Block{ReadID: 11, Lease: 1, Index: 2, Tokens: 3, Checksum: 0xfeed, Digests: []uint64{7, 8, 9}, Data: []byte("kv bytes")},
		&wire.ReadEnd{ReadID: 11, Lease: 1, Status: wire.StatusBadIndex},
		&wire.Release{Lease: 1, Token: tok(4), Reason: wire.ReasonRejected},
		&wire.ReleaseAck{Lease: 1, Status: wire.StatusReleased},
		&wire.Revoked{Lease: 2, Reason: wire.ReasonPeerLost},
	}
}

func TestRoundTripEveryMessageType(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{}, true), newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	msgs := everyMessage()
	if len(msgs) != int(wire.MsgRevoked) {
		t.Fatalf("everyMessage has %d messages, the wire defines %d types", len(msgs), wire.MsgRevoked)
	}
	for _, dir := range []struct {
		name     string
		from, to *end
		fc, tc   transport.ConnID
	}{{"D to P", d, p, dc, pc}, {"P to D", p, d, pc, dc}} {
		for _, m := range msgs {
			if !dir.from.tr.Send(dir.fc, m) {
				t.Fatalf("%s: Send %v failed", dir.name, m.Type())
			}
		}
		for _, m := range msgs {
			ev := dir.to.expect(transport.Received, dir.tc)
			if !reflect.DeepEqual(ev.Msg, m) {
				t.Errorf("%s: got %#v, want %#v", dir.name, ev.Msg, m)
			}
		}
	}
}

func TestLargeBlockFrames(t *testing.T) {
	noLeaks(t)
	// Filling 32 MiB takes seconds on a loaded machine under -race: the
	// idle timeout must not end the connection meanwhile (that is another
	// test's subject).
	cfg := Config{IdleTimeout: time.Minute}
	p, d := newEnd(t, cfg, true), newEnd(t, cfg, false)
	pc, dc := connect(t, p, d)
	var sent []*wire.Block
	for i, size := range []int{wire.MaxBlockBytes, 1 << 20, 3, 2 << 20} {
		b := &wire.Block{ReadID: 1, Lease: 9, Index: uint32(i), Tokens: wire.MaxDigestsPerBlock,
			Digests: make([]uint64, wire.MaxDigestsPerBlock), Data: make([]byte, size)}
		for j := range b.Data {
			b.Data[j] = byte(j*7 + i)
		}
		for j := range b.Digests {
			b.Digests[j] = uint64(j) << 32
		}
		if !p.tr.Send(pc, b) {
			t.Fatalf("Send of a %d-byte block failed", size)
		}
		// Send copied the block: scribbling on it now must not matter.
		want := &wire.Block{ReadID: b.ReadID, Lease: b.Lease, Index: b.Index, Tokens: b.Tokens,
			Digests: append([]uint64(nil), b.Digests...), Data: bytes.Clone(b.Data)}
		clear(b.Data)
		sent = append(sent, want)
	}
	for _, want := range sent {
		ev := d.next()
		if ev.Kind != transport.Received || ev.Conn != dc {
			pe := p.next()
			t.Fatalf("D got %v; P got %v", ev, pe)
		}
		got, ok := ev.Msg.(*wire.Block)
		if !ok || !bytes.Equal(got.Data, want.Data) || !reflect.DeepEqual(got.Digests, want.Digests) || got.Index != want.Index {
			t.Fatalf("block %d of %d bytes came back different", want.Index, len(want.Data))
		}
	}
}

// TestReceivedBlocksAreOwned checks that a received block's Data is not
// overwritten by the frames that follow it (the reader reuses buffers).
func TestReceivedBlocksAreOwned(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{}, true), newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	const n = 50
	for i := range n {
		data := bytes.Repeat([]byte{byte(i)}, 4096)
		if !p.tr.Send(pc, &wire.Block{ReadID: uint64(i), Data: data}) || !p.tr.Send(pc, &wire.ReadEnd{ReadID: uint64(i)}) {
			t.Fatal("Send failed")
		}
	}
	var blocks []*wire.Block
	for range 2 * n {
		if b, ok := d.expect(transport.Received, dc).Msg.(*wire.Block); ok {
			blocks = append(blocks, b)
		}
	}
	for i, b := range blocks {
		if !bytes.Equal(b.Data, bytes.Repeat([]byte{byte(i)}, 4096)) {
			t.Fatalf("block %d's data changed after later frames arrived", i)
		}
	}
}

func TestOversizeFrameClosesConnection(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{MaxAcceptedFrameBytes: 1024}, true), newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	if !d.tr.Send(dc, &wire.ReadEnd{ReadID: 1}) || !d.tr.Send(dc, &wire.Block{Data: make([]byte, 4096)}) {
		t.Fatal("Send failed")
	}
	p.expect(transport.Received, pc) // the small frame before it arrives
	ev := p.expect(transport.Closed, pc)
	if !strings.HasPrefix(ev.Reason, ReasonFrameTooLarge+": ") || !strings.Contains(ev.Reason, "limit 1024") {
		t.Errorf("P closed with %q, want %q with the sizes", ev.Reason, ReasonFrameTooLarge)
	}
	ev = d.expect(transport.Closed, dc)
	if !peerGone(ev.Reason) {
		t.Errorf("D closed with %q, want the peer's close", ev.Reason)
	}
	if d.tr.Send(dc, &wire.ReadEnd{}) {
		t.Error("Send on a closed connection succeeded")
	}
}

// peerGone reports whether reason says that the other end closed or reset.
func peerGone(reason string) bool {
	return reason == ReasonClosedByPeer || reason == ReasonTruncated || strings.HasPrefix(reason, ReasonReadError) ||
		strings.HasPrefix(reason, ReasonWriteError)
}

// TestGarbageClosesConnection writes raw bytes to a listener: anything that
// is not a valid frame closes the connection with a clear reason.
func TestGarbageClosesConnection(t *testing.T) {
	noLeaks(t)
	cases := []struct {
		name   string
		bytes  []byte
		reason string
	}{
		{"unknown type", []byte{0, 0, 0, 3, 99, 1, 2, 3}, ReasonBadFrame + ": wire: unknown message type"},
		{"bad payload", []byte{0, 0, 0, 2, byte(wire.MsgAuthAck), 0, 0}, ReasonBadFrame + ": wire: trailing bytes"},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff, 1}, ReasonFrameTooLarge + ": payload of 4294967295 bytes"},
		{"truncated", []byte{0, 0, 0, 10, byte(wire.MsgRead), 1, 2}, ReasonTruncated},
		{"keepalive then eof", []byte{0, 0, 0, 0, 0}, ReasonClosedByPeer},
	}
	p := newEnd(t, Config{}, true)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := net.Dial("tcp", string(p.tr.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if tc.reason == ReasonTruncated || tc.reason == ReasonClosedByPeer {
				raw.(*net.TCPConn).CloseWrite()
			}
			acc := p.expect(transport.Accepted, 0)
			ev := p.expect(transport.Closed, acc.Conn)
			if !strings.HasPrefix(ev.Reason, tc.reason) {
				t.Errorf("closed with %q, want %q", ev.Reason, tc.reason)
			}
			// The transport hung up: the raw peer reads to the end.
			raw.SetReadDeadline(time.Now().Add(waitLimit))
			if _, err := io.Copy(io.Discard, raw); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Errorf("raw peer did not see the close: %v", err)
			}
		})
	}
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "reset") }

// TestOwnerCloseFlushesAndNotifiesPeer: frames sent before Close arrive,
// then the peer gets Closed; the closing end gets nothing more.
func TestOwnerCloseFlushesAndNotifiesPeer(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{}, true), newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	const n = 100
	for i := range n {
		if !d.tr.Send(dc, &wire.Block{ReadID: uint64(i), Data: make([]byte, 64<<10)}) {
			t.Fatal("Send failed")
		}
	}
	// P talks back while D closes: none of it may reach D's owner.
	p.tr.Send(pc, &wire.ReadEnd{ReadID: 1})
	d.tr.Close(dc)
	d.tr.Close(dc) // idempotent
	if d.tr.Send(dc, &wire.ReadEnd{}) {
		t.Error("Send after Close succeeded")
	}
	for i := range n {
		ev := p.expect(transport.Received, pc)
		if b := ev.Msg.(*wire.Block); b.ReadID != uint64(i) {
			t.Fatalf("frame %d arrived as %d", i, b.ReadID)
		}
	}
	if ev := p.expect(transport.Closed, pc); ev.Reason != ReasonClosedByPeer {
		t.Errorf("P closed with %q, want %q", ev.Reason, ReasonClosedByPeer)
	}
	// D's connection ends without an event: the next event D sees is of a
	// new connection.
	_, dc2 := connect(t, p, d)
	if dc2 == dc {
		t.Fatal("connection id reused")
	}
}

// TestPeerShutdownDetected: a transport that dies (process killed) is seen
// by its peers as closed.
func TestPeerShutdownDetected(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{}, true), newEnd(t, Config{}, false)
	pc, _ := connect(t, p, d)
	d.tr.Shutdown()
	ev := p.expect(transport.Closed, pc)
	if !peerGone(ev.Reason) {
		t.Errorf("P closed with %q, want the peer's close", ev.Reason)
	}
	if p.tr.Send(pc, &wire.ReadEnd{}) {
		t.Error("Send to a dead peer's connection succeeded after Closed")
	}
}

// TestDeadPeerIdleTimeout: a peer that accepts and then says nothing, not
// even keepalives (a hung host, a black-holed route), is detected.
func TestDeadPeerIdleTimeout(t *testing.T) {
	noLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	// Keepalives are due 50 times before the timeout: the silent peer gets
	// some however late a loaded machine runs them.
	d := newEnd(t, Config{KeepaliveInterval: 20 * time.Millisecond, IdleTimeout: time.Second}, false)
	dc := d.tr.Dial(context.Background(), transport.Addr(ln.Addr().String()))
	d.expect(transport.Dialed, dc)
	silent := <-accepted
	defer silent.Close()
	ev := d.expect(transport.Closed, dc)
	if !strings.HasPrefix(ev.Reason, ReasonIdleTimeout) {
		t.Errorf("closed with %q, want %q", ev.Reason, ReasonIdleTimeout)
	}
	// The silent peer did receive keepalives before the timeout.
	silent.SetReadDeadline(time.Now().Add(waitLimit))
	got, _ := io.ReadAll(silent)
	if len(got) < 5 || len(got)%5 != 0 || !bytes.Equal(got[:5], keepaliveFrame) {
		t.Errorf("silent peer read %d bytes (% x...), want keepalive frames", len(got), got[:min(len(got), 10)])
	}
}

// TestKeepaliveKeepsIdleConnectionOpen: two live ends that exchange no
// messages for longer than the idle timeout stay connected.
//
// The idle timeout is 50 × the keepalive interval, so a keepalive delayed
// by a loaded machine (or the race detector) by most of a second still
// arrives in time: the test shows keepalives work, not how promptly a
// loaded scheduler runs them.
func TestKeepaliveKeepsIdleConnectionOpen(t *testing.T) {
	noLeaks(t)
	cfg := Config{KeepaliveInterval: 20 * time.Millisecond, IdleTimeout: time.Second}
	p, d := newEnd(t, cfg, true), newEnd(t, cfg, false)
	pc, dc := connect(t, p, d)
	// Without keepalives, each end would close within IdleTimeout; a
	// Closed would be the next event.
	<-time.After(cfg.IdleTimeout * 3 / 2)
	if !d.tr.Send(dc, &wire.AuthAck{}) {
		t.Fatalf("Send failed: the connection broke while idle: %v", d.next())
	}
	if ev := p.next(); ev.Kind != transport.Received || ev.Conn != pc {
		t.Fatalf("after an idle period P got %v, want the message", ev)
	}
}

// silentListener accepts connections and never reads from them.
func silentListener(t *testing.T) (addr transport.Addr, conns <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(ch)
		for c := range ch {
			c.Close()
		}
	})
	return transport.Addr(ln.Addr().String()), ch
}

// TestSlowPeerOverflowsQueue: a peer that does not read makes Send fail
// and the connection break once the send queue is full; the sender never
// blocks.
func TestSlowPeerOverflowsQueue(t *testing.T) {
	noLeaks(t)
	addr, _ := silentListener(t)
	d := newEnd(t, Config{MaxQueuedBytes: 1 << 20, WindowBytes: 256 << 10, WriteTimeout: time.Minute}, false)
	dc := d.tr.Dial(context.Background(), addr)
	d.expect(transport.Dialed, dc)
	block := &wire.Block{Data: make([]byte, 64<<10)}
	sawFull := false
	sent := 0
	for ; sent < 10000 && d.tr.Send(dc, block); sent++ {
		sawFull = sawFull || !d.tr.Writable(dc)
	}
	if sent == 10000 {
		t.Fatal("10000 sends of 64 KiB to a peer that never reads all succeeded")
	}
	if !sawFull {
		t.Error("Writable never reported a full window")
	}
	ev := d.expect(transport.Closed, dc)
	if !strings.HasPrefix(ev.Reason, ReasonQueueOverflow) {
		t.Errorf("closed with %q, want %q", ev.Reason, ReasonQueueOverflow)
	}
	if d.tr.Send(dc, block) {
		t.Error("Send after the overflow succeeded")
	}
}

// TestSlowPeerWriteTimeout: a peer that stops reading breaks the connection
// after the write timeout even if the queue never overflows.
func TestSlowPeerWriteTimeout(t *testing.T) {
	noLeaks(t)
	addr, _ := silentListener(t)
	d := newEnd(t, Config{WriteTimeout: 100 * time.Millisecond}, false)
	dc := d.tr.Dial(context.Background(), addr)
	d.expect(transport.Dialed, dc)
	// 48 MiB: more than loopback socket buffers hold, less than the queue.
	// The timeout may break the connection before the last sends (slow
	// encoding under the race detector): those then fail.
	block := &wire.Block{Data: make([]byte, 2<<20)}
	for i := 0; i < 24 && d.tr.Send(dc, block); i++ {
	}
	ev := d.expect(transport.Closed, dc)
	if !strings.HasPrefix(ev.Reason, ReasonWriteTimeout) {
		t.Errorf("closed with %q, want %q", ev.Reason, ReasonWriteTimeout)
	}
}

// TestWritableWakesWhenDrained: after Writable says no, Ready fires once
// the backlog is written.
func TestWritableWakesWhenDrained(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{MaxQueuedBytes: 8 << 20, WindowBytes: 1 << 20}, true), newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	block := &wire.Block{Data: make([]byte, 1<<20)}
	n := 0
	for p.tr.Writable(pc) {
		if !p.tr.Send(pc, block) {
			t.Fatal("Send failed")
		}
		n++
	}
	// D reads everything; P's window must open again.
	for range n {
		d.expect(transport.Received, dc)
	}
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for !p.tr.Writable(pc) {
		select {
		case <-p.tr.Ready():
		case <-timer.C:
			t.Fatal("the window never opened")
		}
	}
}

func TestConcurrentSenders(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{}, true), newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	const senders, each = 8, 500
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				var m wire.Message = &wire.ReadEnd{ReadID: uint64(i), Lease: wire.LeaseID(s)}
				if i%10 == 0 {
					m = &wire.Block{ReadID: uint64(i), Lease: wire.LeaseID(s), Data: make([]byte, 8<<10)}
				}
				if !d.tr.Send(dc, m) {
					t.Errorf("sender %d: Send %d failed", s, i)
					return
				}
			}
		})
	}
	next := make([]uint64, senders)
	for range senders * each {
		ev := p.expect(transport.Received, pc)
		var lease wire.LeaseID
		var id uint64
		switch m := ev.Msg.(type) {
		case *wire.ReadEnd:
			lease, id = m.Lease, m.ReadID
		case *wire.Block:
			lease, id = m.Lease, m.ReadID
		}
		if id != next[lease] {
			t.Fatalf("sender %d: got message %d, want %d (per-sender order broken)", lease, id, next[lease])
		}
		next[lease]++
	}
	wg.Wait()
}

// TestSmallEventQueue: a full event queue stops the reader (backpressure),
// and nothing is lost or reordered.
func TestSmallEventQueue(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{MaxEvents: 2}, true), newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	const n = 300
	for i := range n {
		if !d.tr.Send(dc, &wire.ReadEnd{ReadID: uint64(i)}) {
			t.Fatal("Send failed")
		}
	}
	for i := range n {
		ev := p.expect(transport.Received, pc)
		if id := ev.Msg.(*wire.ReadEnd).ReadID; id != uint64(i) {
			t.Fatalf("message %d arrived as %d", i, id)
		}
		if len(p.pending) > 2 {
			t.Fatalf("Poll returned %d events, above MaxEvents", len(p.pending)+1)
		}
	}
}

func TestDialFailures(t *testing.T) {
	noLeaks(t)
	// A port that refuses connections (held, so nothing else gets it).
	free := transport.Addr(refused.Addr(t))

	d := newEnd(t, Config{MaxConns: 1}, false)
	id := d.tr.Dial(context.Background(), free)
	ev := d.expect(transport.DialFailed, id)
	if !strings.HasPrefix(ev.Reason, ReasonDialError) || ev.Remote != free {
		t.Errorf("DialFailed %v, want %q from %s", ev, ReasonDialError, free)
	}
	if d.tr.Send(id, &wire.AuthAck{}) {
		t.Error("Send on a failed dial succeeded")
	}

	p := newEnd(t, Config{}, true)
	ok := d.tr.Dial(context.Background(), p.tr.Addr())
	d.expect(transport.Dialed, ok)
	over := d.tr.Dial(context.Background(), p.tr.Addr())
	if ev := d.expect(transport.DialFailed, over); ev.Reason != ReasonTooManyConns {
		t.Errorf("dial over MaxConns failed with %q, want %q", ev.Reason, ReasonTooManyConns)
	}
	if d.tr.Send(999, &wire.AuthAck{}) {
		t.Error("Send on an unknown id succeeded")
	}
	d.tr.Close(999) // unknown: nothing happens
}

// TestAcceptBeyondMaxConns: an inbound connection over the bound is closed
// at once and never reported to the listener's owner.
func TestAcceptBeyondMaxConns(t *testing.T) {
	noLeaks(t)
	p := newEnd(t, Config{MaxConns: 1}, true)
	d1, d2 := newEnd(t, Config{}, false), newEnd(t, Config{}, false)
	pc, _ := connect(t, p, d1)
	id := d2.tr.Dial(context.Background(), p.tr.Addr())
	d2.expect(transport.Dialed, id) // TCP accepted it in the kernel
	if ev := d2.expect(transport.Closed, id); !peerGone(ev.Reason) {
		t.Errorf("refused connection closed with %q", ev.Reason)
	}
	// P's owner saw only the first connection, which still works.
	if !p.tr.Send(pc, &wire.AuthAck{}) {
		t.Fatal("Send on the first connection failed")
	}
	if p.tr.Conns() != 1 {
		t.Errorf("P has %d connections, want 1", p.tr.Conns())
	}
}

// TestCloseCancelsDial: closing a dial in progress delivers nothing for it.
func TestCloseCancelsDial(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{}, true), newEnd(t, Config{}, false)
	for range 20 {
		id := d.tr.Dial(context.Background(), p.tr.Addr())
		d.tr.Close(id)
	}
	// A last connection that stays: every event D sees is about it.
	last := d.tr.Dial(context.Background(), p.tr.Addr())
	d.expect(transport.Dialed, last)
	if len(d.pending) != 0 {
		t.Errorf("events of closed dials were delivered: %v", d.pending)
	}
	d.tr.Shutdown()
	p.tr.Shutdown()
	if pend := d.tr.Poll(nil); len(pend) != 0 {
		for _, ev := range pend {
			if ev.Conn != last {
				t.Errorf("event of a closed dial: %v", ev)
			}
		}
	}
}

func TestShutdownIsIdempotentAndFinal(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{}, true), newEnd(t, Config{}, false)
	connect(t, p, d)
	p.tr.Shutdown()
	p.tr.Shutdown()
	if err := p.tr.Listen("127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Errorf("Listen after Shutdown: %v", err)
	}
	p.tr.Dial(context.Background(), "127.0.0.1:1") // delivers nothing, leaks nothing
	if p.tr.Conns() != 0 {
		t.Errorf("%d connections after Shutdown", p.tr.Conns())
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{MaxFrameBytes: wire.MaxFrameBytes + 1},
		{MaxQueuedBytes: 1 << 20, WindowBytes: 1 << 20},
		{KeepaliveInterval: time.Second, IdleTimeout: time.Second},
		{MaxConns: -1},
		{WriteTimeout: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", c)
		}
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) succeeded", c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	if c := (Config{MaxQueuedBytes: 1 << 20}).withDefaults(); c.WindowBytes >= c.MaxQueuedBytes {
		t.Errorf("default window %d not under a small queue %d", c.WindowBytes, c.MaxQueuedBytes)
	}
}

func TestBufClasses(t *testing.T) {
	for _, n := range []int{0, 1, 4096, 4097, 1 << 20, wire.MaxFrameBytes + 5} {
		b := getBuf(n)
		if len(b) != 0 || cap(b) < n {
			t.Errorf("getBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		putBuf(b)
	}
	putBuf(make([]byte, 5000)) // not a class size: dropped, no panic
	putBuf(nil)
}

func ExampleTransport() {
	p, _ := New(Config{})
	defer p.Shutdown()
	p.Listen("127.0.0.1:0")
	d, _ := New(Config{})
	defer d.Shutdown()
	d.Dial(context.Background(), p.Addr())
	var evs []transport.Event
	for len(evs) == 0 {
		<-p.Ready()
		evs = p.Poll(evs)
	}
	fmt.Println(evs[0].Kind)
	// Output: accepted
}
