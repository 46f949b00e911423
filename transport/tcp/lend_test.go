package tcp

import (
	"bytes"
	"testing"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// With LendBlockData, every block is intact while the owner handles the
// Poll that returned it, whatever mix of sizes and other frames precedes
// it (pooled buffers are recycled one Poll later, never sooner).
func TestLendBlockDataIntactUntilNextPoll(t *testing.T) {
	noLeaks(t)
	cfg := Config{LendBlockData: true}
	p, d := newEnd(t, cfg, true), newEnd(t, cfg, false)
	pc, dc := connect(t, p, d)
	sizes := []int{2 << 20, 3, 2 << 20, 1 << 20, 3 << 20, 2 << 20, 4096, 2 << 20, 2 << 20}
	content := func(i, size int) []byte {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(j*7 + i*13)
		}
		return b
	}
	go func() {
		for round := range 3 {
			for i, size := range sizes {
				k := round*len(sizes) + i
				for !p.tr.Writable(pc) {
					<-p.tr.Ready()
				}
				p.tr.Send(pc, &wire.Block{ReadID: uint64(k), Data: content(k, size)})
				p.tr.Send(pc, &wire.ReadEnd{ReadID: uint64(k)})
			}
		}
	}()
	for k := range 3 * len(sizes) {
		ev := d.expect(transport.Received, dc)
		b, ok := ev.Msg.(*wire.Block)
		if !ok || b.ReadID != uint64(k) {
			t.Fatalf("event %v, want block %d", ev, k)
		}
		if !bytes.Equal(b.Data, content(k, sizes[k%len(sizes)])) {
			t.Fatalf("block %d (%d bytes) differs while its Poll is handled", k, len(b.Data))
		}
		if end, ok := d.expect(transport.Received, dc).Msg.(*wire.ReadEnd); !ok || end.ReadID != uint64(k) {
			t.Fatalf("want READ_END %d", k)
		}
	}
}

// pooledBuffer takes a pool buffer on the length prefix alone only for a
// small frame or one no larger than what the peer has already delivered;
// otherwise wire.ReadFrame grows a buffer as the bytes arrive, so a peer
// announcing a huge frame and sending nothing gets nothing allocated.
func TestPooledBufferBounds(t *testing.T) {
	tr, err := New(Config{LendBlockData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	for _, tc := range []struct {
		name              string
		payload, maxDeliv int
		pooled            bool
	}{
		{"small frame", 100, 0, true},
		{"1 MiB frame", pooledFrameBytes - 1, 0, true},
		{"large frame, nothing delivered yet", 8 << 20, 0, false},
		{"large frame, smaller ones delivered", 8 << 20, 2 << 20, false},
		{"large frame, as large delivered", 8 << 20, 8<<20 + 1, true},
	} {
		c := newConn(tr, 1, "peer")
		c.maxDelivered.Store(int64(tc.maxDeliv))
		buf := c.pooledBuffer(tc.payload+1, nil)
		if got := cap(buf) >= tc.payload+1; got != tc.pooled || (!tc.pooled && buf != nil) {
			t.Errorf("%s: buffer of capacity %d for a %d-byte payload, want pooled %v", tc.name, cap(buf), tc.payload, tc.pooled)
		}
	}

	c := newConn(tr, 1, "peer")
	kept := make([]byte, 0, 64)
	if buf := c.pooledBuffer(11, kept); cap(buf) != 64 {
		t.Errorf("a large enough buffer is not kept: capacity %d", cap(buf))
	}
}
