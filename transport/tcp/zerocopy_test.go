package tcp

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// doneLog records the done calls of SendBlock by block index.
type doneLog struct {
	mu    sync.Mutex
	calls map[int][]bool
}

func newDoneLog() *doneLog { return &doneLog{calls: make(map[int][]bool)} }

func (l *doneLog) fn(i int) func(bool) {
	return func(ok bool) {
		l.mu.Lock()
		l.calls[i] = append(l.calls[i], ok)
		l.mu.Unlock()
	}
}

func (l *doneLog) get(i int) []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.calls[i]...)
}

// waitFor polls cond until it holds, failing after waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
		<-tick.C
	}
}

// SendBlock puts on the wire exactly what Send does, interleaved with
// copied frames, and calls each done once with true after the write; the
// sender may then change the data.
func TestSendBlockRoundTrip(t *testing.T) {
	noLeaks(t)
	for _, lend := range []bool{false, true} {
		cfg := Config{LendBlockData: lend}
		p, d := newEnd(t, cfg, true), newEnd(t, cfg, false)
		pc, dc := connect(t, p, d)
		log := newDoneLog()
		sizes := []int{0, 1, 4096, 2 << 20, 3 << 20, 17}
		blocks := make([]*wire.Block, len(sizes))
		for i, size := range sizes {
			data := make([]byte, size)
			for j := range data {
				data[j] = byte(j*7 + i)
			}
			blocks[i] = &wire.Block{ReadID: uint64(i), Lease: 3, Index: uint32(i), Tokens: 2,
				Checksum: 99, Digests: []uint64{uint64(i), 5}, Data: data}
			if !p.tr.SendBlock(pc, blocks[i], log.fn(i)) {
				t.Fatalf("SendBlock %d failed", i)
			}
			if !p.tr.Send(pc, &wire.ReadEnd{ReadID: uint64(i), Lease: 3}) {
				t.Fatalf("Send %d failed", i)
			}
		}
		for i := range sizes {
			ev := d.expect(transport.Received, dc)
			got, ok := ev.Msg.(*wire.Block)
			if !ok {
				t.Fatalf("got %v, want block %d", ev, i)
			}
			if !bytes.Equal(wire.AppendFrame(nil, got), wire.AppendFrame(nil, blocks[i])) {
				t.Fatalf("block %d (%d bytes) differs from what was sent", i, sizes[i])
			}
			if end, ok := d.expect(transport.Received, dc).Msg.(*wire.ReadEnd); !ok || end.ReadID != uint64(i) {
				t.Fatalf("want READ_END %d", i)
			}
		}
		for i := range sizes {
			waitFor(t, "done", func() bool { return len(log.get(i)) > 0 })
			if c := log.get(i); len(c) != 1 || !c[0] {
				t.Errorf("block %d: done calls %v, want [true]", i, c)
			}
		}
	}
}

// A connection that breaks with zero-copy blocks queued calls every done
// exactly once, with false for those not written, before its Closed event;
// SendBlock on a broken or closed connection returns false and never calls
// done.
func TestSendBlockDoneOnFailure(t *testing.T) {
	noLeaks(t)
	addr, _ := silentListener(t)
	d := newEnd(t, Config{MaxQueuedBytes: 16 << 20, WindowBytes: 1 << 20, WriteTimeout: time.Minute}, false)
	dc := d.tr.Dial(context.Background(), addr)
	d.expect(transport.Dialed, dc)
	log := newDoneLog()
	data := make([]byte, 1<<20)
	// The peer never reads: after the socket buffers fill, the queue
	// overflows, the connection breaks, and SendBlock refuses.
	sent := 0
	for ; sent < 1000; sent++ {
		if !d.tr.SendBlock(dc, &wire.Block{Index: uint32(sent), Data: data}, log.fn(sent)) {
			break
		}
	}
	if sent == 1000 {
		t.Fatal("1000 zero-copy sends of 1 MiB to a peer that never reads all succeeded")
	}
	ev := d.expect(transport.Closed, dc)
	if !strings.HasPrefix(ev.Reason, ReasonQueueOverflow) {
		t.Errorf("closed with %q, want %q", ev.Reason, ReasonQueueOverflow)
	}
	// Closed comes after every done: no waiting here.
	failed := 0
	for i := range sent {
		c := log.get(i)
		if len(c) != 1 {
			t.Fatalf("block %d: done calls %v, want exactly one before Closed", i, c)
		}
		if !c[0] {
			failed++
		}
	}
	if failed == 0 {
		t.Error("no block was reported failed")
	}
	if c := log.get(sent); len(c) != 0 {
		t.Errorf("refused block: done calls %v, want none", c)
	}
	if d.tr.SendBlock(dc, &wire.Block{Data: data}, log.fn(-1)) {
		t.Error("SendBlock on a broken connection succeeded")
	}
	if c := log.get(-1); len(c) != 0 {
		t.Errorf("refused block: done calls %v, want none", c)
	}
}

// Shutdown with zero-copy blocks queued calls every done before it returns.
func TestSendBlockDoneOnShutdown(t *testing.T) {
	noLeaks(t)
	addr, _ := silentListener(t)
	d := newEnd(t, Config{WriteTimeout: time.Minute}, false)
	dc := d.tr.Dial(context.Background(), addr)
	d.expect(transport.Dialed, dc)
	log := newDoneLog()
	data := make([]byte, 2<<20)
	const n = 16 // 32 MiB: more than loopback buffers, less than the queue
	for i := range n {
		if !d.tr.SendBlock(dc, &wire.Block{Data: data}, log.fn(i)) {
			t.Fatalf("SendBlock %d failed", i)
		}
	}
	d.tr.Shutdown()
	failed := 0
	for i := range n {
		c := log.get(i)
		if len(c) != 1 {
			t.Fatalf("block %d: done calls %v after Shutdown, want one", i, c)
		}
		if !c[0] {
			failed++
		}
	}
	if failed == 0 {
		t.Error("32 MiB to a peer that never reads: no block reported failed")
	}
}

// An owner Close flushes zero-copy blocks like copied frames: the peer gets
// them, then end of stream, and every done reports true.
func TestSendBlockOwnerCloseFlushes(t *testing.T) {
	noLeaks(t)
	p, d := newEnd(t, Config{}, true), newEnd(t, Config{}, false)
	pc, dc := connect(t, p, d)
	log := newDoneLog()
	data := bytes.Repeat([]byte{7}, 1<<20)
	const n = 8
	for i := range n {
		if !p.tr.SendBlock(pc, &wire.Block{Index: uint32(i), Data: data}, log.fn(i)) {
			t.Fatalf("SendBlock %d failed", i)
		}
	}
	p.tr.Close(pc)
	for i := range n {
		b, ok := d.expect(transport.Received, dc).Msg.(*wire.Block)
		if !ok || b.Index != uint32(i) || !bytes.Equal(b.Data, data) {
			t.Fatalf("block %d missing or different", i)
		}
	}
	d.expect(transport.Closed, dc)
	for i := range n {
		waitFor(t, "done", func() bool { return len(log.get(i)) > 0 })
		if c := log.get(i); len(c) != 1 || !c[0] {
			t.Errorf("block %d: done calls %v, want [true]", i, c)
		}
	}
}
