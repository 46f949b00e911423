package engine

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// zeroCopyRig is a P loop over a real tcp transport (tcp.Port), driven by
// hand, with one accepted connection from a raw socket that reads only when
// told: blocks the loop streams stay referenced by the transport while it
// does not.
type zeroCopyRig struct {
	n    *Loop
	wake chan struct{}
	ptr  *tcp.Transport
	raw  net.Conn
	conn transport.ConnID
	w    xfer.ReadWork
}

func newZeroCopyRig(t *testing.T) *zeroCopyRig {
	t.Helper()
	// A window far above what loopback socket buffers hold: the whole read
	// is queued in one pump and most of it stays unwritten.
	ptr, err := tcp.New(tcp.Config{MaxQueuedBytes: 128 << 20, WindowBytes: 64 << 20, WriteTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ptr.Shutdown)
	if err := ptr.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", string(ptr.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	r := &zeroCopyRig{ptr: ptr, raw: raw, wake: make(chan struct{}, 1)}
	port := tcp.NewPort(ptr, t.Context(), func() {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	})
	r.n = prefillLoop(t, port, 8)
	r.waitEvent(t, "Accepted", func() bool { return len(r.n.conns) == 1 })
	for id := range r.n.conns {
		r.conn = id
	}
	// 16 × 2 MiB sharing one buffer: 32 MiB, more than the socket buffers.
	data := bytes.Repeat([]byte{5}, 2<<20)
	r.w = xfer.ReadWork{Session: xfer.SessionID(r.conn), ReadID: 1, Lease: 7, Blocks: make([]wire.Block, 16)}
	for i := range r.w.Blocks {
		r.w.Blocks[i] = wire.Block{ReadID: 1, Lease: 7, Index: uint32(i), Data: data}
	}
	r.n.startRead(0, r.w)
	if r.n.pump(0) {
		t.Fatal("a 32 MiB read to a peer that does not read ended at once")
	}
	if st := r.n.reads[0]; st.inflight == 0 || st.next != len(r.w.Blocks) {
		t.Fatalf("after the pump: %d blocks in flight, %d sent, want all sent and some in flight", st.inflight, st.next)
	}
	return r
}

// waitEvent polls the transport into the node until cond holds.
func (r *zeroCopyRig) waitEvent(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(loopWait)
	defer timer.Stop()
	for !cond() {
		select {
		case <-r.ptr.Ready():
			r.n.poll(0)
		case <-timer.C:
			t.Fatalf("no %s within %v", what, loopWait)
		}
	}
}

// pumpUntilEnded pumps, polling on the port's wake (a block reported) and the
// transport, until the read ends.
func (r *zeroCopyRig) pumpUntilEnded(t *testing.T) {
	t.Helper()
	timer := time.NewTimer(loopWait)
	defer timer.Stop()
	for !r.n.pump(0) {
		select {
		case <-r.wake:
			r.n.poll(0)
		case <-r.ptr.Ready():
			r.n.poll(0)
		case <-timer.C:
			t.Fatal("the read never ended")
		}
	}
	if len(r.n.reads) != 0 {
		t.Fatalf("%d reads left", len(r.n.reads))
	}
}

// A read streamed zero-copy ends, successfully, only once the peer has
// taken every block: until then its blocks are referenced.
func TestZeroCopyReadEndsAfterEveryBlockWritten(t *testing.T) {
	r := newZeroCopyRig(t)
	go io.Copy(io.Discard, r.raw) // ends when the rig's cleanup closes raw
	r.pumpUntilEnded(t)
	if got, want := r.n.core.producer.Stats().BytesServed, uint64(r.w.Bytes()); got != want {
		t.Errorf("BytesServed %d, want %d (a successful read)", got, want)
	}
}

// A connection that breaks mid-read: by the time the node handles its
// Closed event, the transport holds no block (every done ran), so the read
// ends there, unsuccessfully.
func TestZeroCopyReadConnectionLostMidRead(t *testing.T) {
	r := newZeroCopyRig(t)
	r.raw.(*net.TCPConn).SetLinger(0)
	r.raw.Close() // a reset: P's blocks can never be written
	r.waitEvent(t, "Closed", func() bool { _, live := r.n.conns[r.conn]; return !live })
	if len(r.n.reads) != 0 {
		t.Fatalf("%d reads left after Closed, want the read ended with it", len(r.n.reads))
	}
	if got := r.n.core.producer.Stats().BytesServed; got != 0 {
		t.Errorf("BytesServed %d after a lost read, want 0", got)
	}
}

// The node closing a connection mid-read (the core gave it up): the
// transport still flushes the queued blocks, so the read stays until their
// done has run, then ends unsuccessfully.
func TestZeroCopyReadOwnerCloseMidRead(t *testing.T) {
	r := newZeroCopyRig(t)
	r.n.closeConn(0, r.conn)
	if len(r.n.reads) != 1 {
		t.Fatalf("%d reads after closing with blocks in flight, want the read kept", len(r.n.reads))
	}
	go io.Copy(io.Discard, r.raw)
	r.pumpUntilEnded(t)
	if got := r.n.core.producer.Stats().BytesServed; got != 0 {
		t.Errorf("BytesServed %d after a read on a closed connection, want 0", got)
	}
}
