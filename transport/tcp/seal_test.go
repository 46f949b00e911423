package tcp

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// tap forwards connections to target and keeps a copy of what flows from
// target back (P to D).
type tap struct {
	ln net.Listener
	mu sync.Mutex
	pd bytes.Buffer
	// flipAt, when positive, is the offset in the P-to-D stream of a byte
	// the tap flips on its way.
	flipAt atomic.Int64
}

func startTap(t *testing.T, target transport.Addr) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{ln: ln}
	var wg sync.WaitGroup
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		tp.mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		tp.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			d, err := ln.Accept()
			if err != nil {
				return
			}
			p, err := net.Dial("tcp", string(target))
			if err != nil {
				d.Close()
				return
			}
			tp.mu.Lock()
			conns = append(conns, d, p)
			tp.mu.Unlock()
			wg.Go(func() { io.Copy(p, d); p.Close() })
			wg.Go(func() { io.Copy(io.MultiWriter(d, tp), &flipper{r: p, tp: tp}); d.Close() })
		}
	})
	return tp
}

// flipper reads the P-to-D stream and flips the byte at tp.flipAt.
type flipper struct {
	r   io.Reader
	tp  *tap
	off int64
}

func (f *flipper) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if at := f.tp.flipAt.Load(); at > 0 && at >= f.off && at < f.off+int64(n) {
		b[at-f.off] ^= 0x20
	}
	f.off += int64(n)
	return n, err
}

func (tp *tap) Write(b []byte) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.pd.Write(b)
}

func (tp *tap) seen() []byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return bytes.Clone(tp.pd.Bytes())
}

// handshake runs the engines' handshake on a new connection from d to
// addr (HELLO, HELLO_ACK, AUTH, AUTH_ACK OK), as far as the transport
// follows it: the MACs are not checked here, the owners' job.
func handshake(t *testing.T, p, d *end, addr transport.Addr) (pc, dc transport.ConnID) {
	t.Helper()
	dc = d.tr.Dial(context.Background(), addr)
	d.expect(transport.Dialed, dc)
	pc = p.expect(transport.Accepted, 0).Conn
	for _, step := range []struct {
		from, to *end
		fc, tc   transport.ConnID
		m        wire.Message
	}{
		{d, p, dc, pc, &wire.Hello{Version: wire.Version, EngineID: "d0", Nonce: [16]byte{1}}},
		{p, d, pc, dc, &wire.HelloAck{Version: wire.Version, EngineID: "p0", Nonce: [16]byte{2}, Status: wire.StatusOK}},
		{d, p, dc, pc, &wire.Auth{}},
		{p, d, pc, dc, &wire.AuthAck{Status: wire.StatusOK}},
	} {
		if !step.from.tr.Send(step.fc, step.m) {
			t.Fatalf("Send %v failed", step.m.Type())
		}
		if ev := step.to.expect(transport.Received, step.tc); ev.Msg.Type() != step.m.Type() {
			t.Fatalf("received %v, want %v", ev.Msg, step.m.Type())
		}
	}
	return pc, dc
}

// TestSealedFrames: with Config.Secret, frames after the handshake are
// encrypted and authenticated: blocks (copied and zero-copy), keepalives
// and D's requests arrive intact, and none of a block's bytes cross the
// wire in clear.
func TestSealedFrames(t *testing.T) {
	noLeaks(t)
	secret := []byte("seal test cluster secret")
	cfg := Config{Secret: secret, KeepaliveInterval: 10 * time.Millisecond}
	p, d := newEnd(t, cfg, true), newEnd(t, cfg, false)
	tp := startTap(t, p.tr.Addr())
	pc, dc := handshake(t, p, d, transport.Addr(tp.ln.Addr().String()))
	// Keepalives pass sealed (they keep the sequence).
	before := len(tp.seen())
	waitCond(t, func() bool { return len(tp.seen()) >= before+3*(5+wire.SealOverhead) })
	kv := bytes.Repeat([]byte("plain KV bytes!!"), 256)
	blk := &wire.Block{ReadID: 1, Lease: 2, Tokens: 1, Digests: []uint64{3}, Data: kv}
	if !p.tr.Send(pc, blk) {
		t.Fatal("Send")
	}
	done := make(chan bool, 1)
	if !p.tr.SendBlock(pc, &wire.Block{ReadID: 1, Lease: 2, Index: 1, Tokens: 1, Digests: []uint64{3}, Data: kv}, func(ok bool) { done <- ok }) {
		t.Fatal("SendBlock")
	}
	for i := range 2 {
		ev := d.expect(transport.Received, dc)
		b, ok := ev.Msg.(*wire.Block)
		if !ok || b.Index != uint32(i) || !bytes.Equal(b.Data, kv) {
			t.Fatalf("block %d: received %v", i, ev.Msg)
		}
	}
	if !<-done {
		t.Fatal("zero-copy block not written")
	}
	if !d.tr.Send(dc, &wire.Release{Lease: 2, Token: tok(1), Reason: wire.ReasonReadDone}) {
		t.Fatal("Send RELEASE")
	}
	if ev := p.expect(transport.Received, pc); ev.Msg.Type() != wire.MsgRelease {
		t.Fatalf("P received %v", ev.Msg)
	}
	if bytes.Contains(tp.seen(), kv[:16]) {
		t.Error("a block's bytes crossed the wire in clear")
	}
}

// TestSealedFramesPipelined: large frames are sealed and opened on
// goroutines of their own, several at once, beside small ones sealed in
// line: all arrive intact and in order. A byte flipped inside one large
// frame closes the connection as tampered after the frames before it
// were delivered, and none after it.
func TestSealedFramesPipelined(t *testing.T) {
	noLeaks(t)
	cfg := Config{Secret: []byte("pipelined cluster secret"), LendBlockData: true}
	p, d := newEnd(t, cfg, true), newEnd(t, cfg, false)
	tp := startTap(t, p.tr.Addr())
	pc, dc := handshake(t, p, d, transport.Addr(tp.ln.Addr().String()))
	hs := int64(len(tp.seen()))
	kv := make([]byte, 4*parallelSealBytes)
	for i := range kv {
		kv[i] = byte(i * 13)
	}
	block := func(i int) *wire.Block {
		return &wire.Block{ReadID: 1, Lease: 2, Index: uint32(i), Tokens: 1, Digests: []uint64{uint64(i)}, Data: kv}
	}
	frame := int64(len(wire.AppendFrame(nil, block(0))) + wire.SealOverhead)
	small := int64(len(wire.AppendFrame(nil, &wire.ReadEnd{ReadID: 1, Lease: 2})) + wire.SealOverhead)
	const n, tampered = 12, 8
	// Each round: a large block (copied or zero-copy), then a small frame.
	tp.flipAt.Store(hs + tampered*(frame+small) + frame/2)
	for i := range n {
		if i%2 == 0 {
			p.tr.Send(pc, block(i))
		} else {
			p.tr.SendBlock(pc, block(i), func(bool) {})
		}
		p.tr.Send(pc, &wire.ReadEnd{ReadID: uint64(i), Lease: 2})
	}
	for i := range tampered {
		ev := d.expect(transport.Received, dc)
		if b, ok := ev.Msg.(*wire.Block); !ok || b.Index != uint32(i) || !bytes.Equal(b.Data, kv) {
			t.Fatalf("frame %d: received %v", 2*i, ev.Msg)
		}
		if ev := d.expect(transport.Received, dc); ev.Msg.(*wire.ReadEnd).ReadID != uint64(i) {
			t.Fatalf("frame %d: received %v", 2*i+1, ev.Msg)
		}
	}
	ev := d.expect(transport.Closed, dc)
	if !ev.Tampered || !strings.HasPrefix(ev.Reason, ReasonTampered) {
		t.Fatalf("D: %v, want closed as tampered after %d blocks", ev, tampered)
	}
}

// TestSealedFramesNeedTheSecret: ends with different secrets pass the
// handshake's frames (the owners would refuse the MACs), but D cannot
// open P's first sealed frame: the connection closes as tampered.
func TestSealedFramesNeedTheSecret(t *testing.T) {
	noLeaks(t)
	p := newEnd(t, Config{Secret: []byte("one cluster secret")}, true)
	d := newEnd(t, Config{Secret: []byte("another cluster secret")}, false)
	pc, dc := handshake(t, p, d, p.tr.Addr())
	if !p.tr.Send(pc, &wire.ReadEnd{ReadID: 1, Lease: 2, Status: wire.StatusOK}) {
		t.Fatal("Send")
	}
	ev := d.expect(transport.Closed, dc)
	if !ev.Tampered || !bytes.HasPrefix([]byte(ev.Reason), []byte(ReasonTampered)) {
		t.Fatalf("D: %v, want closed as tampered", ev)
	}
	if n := d.tr.Stats().Dropped[DropTampered]; n != 1 {
		t.Errorf("Dropped[tampered] = %d", n)
	}
}

func waitCond(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(time.Millisecond)
	}
}
