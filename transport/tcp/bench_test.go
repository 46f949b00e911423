package tcp

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/plainsock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// benchPair is a connected P (listening) and D (dialing) over loopback.
type benchPair struct {
	p, d     *Transport
	pc, dc   transport.ConnID
	zeroCopy bool // stream with SendBlock instead of Send
}

func newBenchPair(b *testing.B, cfg Config) *benchPair {
	b.Helper()
	p, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Shutdown)
	if err := p.Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	d, _ := New(cfg)
	b.Cleanup(d.Shutdown)
	bp := &benchPair{p: p, d: d, dc: d.Dial(context.Background(), p.Addr())}
	bp.pc = awaitEvent(b, p, transport.Accepted, 0).Conn
	awaitEvent(b, d, transport.Dialed, bp.dc)
	// Authenticate as the engines' handshake does (HELLO, HELLO_ACK, AUTH,
	// AUTH_ACK OK): before it the transport takes no frame larger than a
	// handshake's, so a block would close the connection; with
	// Config.Secret the frames after it are sealed.
	for _, step := range []struct {
		from, to *Transport
		fc, tc   transport.ConnID
		m        wire.Message
	}{
		{d, p, bp.dc, bp.pc, &wire.Hello{Version: wire.Version, EngineID: "d0", Nonce: [16]byte{1}}},
		{p, d, bp.pc, bp.dc, &wire.HelloAck{Version: wire.Version, EngineID: "p0", Nonce: [16]byte{2}, Status: wire.StatusOK}},
		{d, p, bp.dc, bp.pc, &wire.Auth{}},
		{p, d, bp.pc, bp.dc, &wire.AuthAck{Status: wire.StatusOK}},
	} {
		if !step.from.Send(step.fc, step.m) {
			b.Fatalf("Send %v failed", step.m.Type())
		}
		if ev := awaitEvent(b, step.to, transport.Received, step.tc); ev.Msg.Type() != step.m.Type() {
			b.Fatalf("received %v, want %v", ev.Msg, step.m.Type())
		}
	}
	return bp
}

// awaitEvent polls t until an event of kind arrives (on conn id, or any
// connection when id is 0) and returns it; a Closed event fails b.
func awaitEvent(b *testing.B, t *Transport, kind transport.EventKind, id transport.ConnID) transport.Event {
	b.Helper()
	for {
		<-t.Ready()
		for _, ev := range t.Poll(nil) {
			if ev.Kind == transport.Closed {
				b.Fatalf("connection closed: %v", ev)
			}
			if ev.Kind == kind && (id == 0 || ev.Conn == id) {
				return ev
			}
		}
	}
}

// stream sends n copies of block from P to D the way an engine node
// streams a read (P's loop sends while Writable and waits on Ready
// otherwise; D's loop polls) and returns when D has received them all.
func (bp *benchPair) stream(b *testing.B, block *wire.Block, n int) {
	sendErr := make(chan error, 1)
	go func() {
		for i := 0; i < n; {
			if !bp.p.Writable(bp.pc) {
				<-bp.p.Ready()
				bp.p.Poll(nil)
				continue
			}
			block.Index = uint32(i)
			var sent bool
			if bp.zeroCopy {
				// block.Data never changes: nothing waits for done.
				sent = bp.p.SendBlock(bp.pc, block, func(bool) {})
			} else {
				sent = bp.p.Send(bp.pc, block)
			}
			if !sent {
				sendErr <- fmt.Errorf("Send %d failed", i)
				return
			}
			i++
		}
		sendErr <- nil
	}()
	var evs []transport.Event
	for got := 0; got < n; {
		<-bp.d.Ready()
		evs = bp.d.Poll(evs[:0])
		for _, ev := range evs {
			switch ev.Kind {
			case transport.Received:
				got++
			case transport.Closed:
				b.Fatalf("connection closed: %v", ev)
			}
		}
		clear(evs)
	}
	if err := <-sendErr; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTransfer streams BLOCK frames from P to D over loopback. MB/s is
// block payload throughput. Block sizes: the tiny profile's 16-token block
// (4 KiB), a mid size, and an 8B-class model's 16-token block (2 MiB).
//
// The "1GiB" cases move 1 GiB of llama-8b blocks (512 × 2 MiB) per
// iteration through the transport, then the same bytes over a plain
// loopback TCP socket pair (the writer writes each 2 MiB block with one
// Write, the reader reads it into one reused buffer), and report both
// throughputs and their ratio (target: kvlease ≥ 0.8 × plain):
// "lend+zerocopy" as the engine node streams (the sender writes each block
// from its own memory with SendBlock, the receiver lends), "lend" with
// Config.LendBlockData (the receiver reuses its frame buffers), "own"
// without (a fresh buffer per block), "lend+zerocopy+sealed" as the engines
// stream with a cluster secret (Config.Secret: every frame encrypted and
// authenticated, the sender copying each block to seal it). Each also
// reports the process's CPU time per GiB moved (user + system, both ends)
// of either. Run them alone with
// -bench 'Transfer/1GiB' -benchtime 3x.
func BenchmarkTransfer(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10, 2 << 20} {
		b.Run(fmt.Sprintf("block=%dKiB", size>>10), func(b *testing.B) {
			bp := newBenchPair(b, Config{})
			block := &wire.Block{ReadID: 1, Lease: 1, Tokens: 16, Digests: make([]uint64, 16), Data: make([]byte, size)}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			bp.stream(b, block, b.N)
		})
	}
	for _, c := range []struct {
		name           string
		lend, zeroCopy bool
		sealed         bool
	}{{"lend+zerocopy", true, true, false}, {"lend+zerocopy+sealed", true, true, true}, {"lend", true, false, false},
		{"own", false, false, false}} {
		b.Run("1GiB/block=2MiB/"+c.name, func(b *testing.B) {
			cfg := Config{LendBlockData: c.lend}
			if c.sealed {
				cfg.Secret = []byte("benchmark cluster secret")
			}
			benchmarkGiB(b, cfg, c.zeroCopy)
		})
	}
}

// benchmarkGiB is BenchmarkTransfer's 1 GiB case under cfg, the sender
// using SendBlock if zeroCopy.
func benchmarkGiB(b *testing.B, cfg Config, zeroCopy bool) {
	const (
		blockBytes = 2 << 20
		totalBytes = 1 << 30
		numBlocks  = totalBytes / blockBytes
	)
	bp := newBenchPair(b, cfg)
	bp.zeroCopy = zeroCopy
	pw, pr := plainsock.Pair(b)
	data := make([]byte, blockBytes)
	for i := range data {
		data[i] = byte(i * 7)
	}
	block := &wire.Block{ReadID: 1, Lease: 1, Tokens: 16, Digests: make([]uint64, 16), Data: data}
	readBuf := make([]byte, blockBytes)
	// The two alternate every 64 MiB, so that both see the same machine:
	// on a shared machine the load changes from second to second.
	const roundBlocks = 32
	var kv, plain, kvCPU, plainCPU time.Duration
	b.ResetTimer()
	for range b.N {
		for range numBlocks / roundBlocks {
			start, cpu := time.Now(), processCPU(b)
			bp.stream(b, block, roundBlocks)
			kv += time.Since(start)
			kvCPU += processCPU(b) - cpu

			start, cpu = time.Now(), processCPU(b)
			plainsock.Stream(b, pw, pr, data, readBuf, roundBlocks)
			plain += time.Since(start)
			plainCPU += processCPU(b) - cpu
		}
	}
	b.StopTimer()
	mb := float64(b.N) * totalBytes / 1e6
	kvRate, plainRate := mb/kv.Seconds(), mb/plain.Seconds()
	b.ReportMetric(kvRate, "kvlease-MB/s")
	b.ReportMetric(plainRate, "plain-MB/s")
	b.ReportMetric(kvRate/plainRate, "ratio")
	// CPU per GiB (both ends, user + system): what a loaded machine's
	// rates follow, whatever else runs on it.
	gib := float64(b.N) * totalBytes / (1 << 30)
	b.ReportMetric(kvCPU.Seconds()/gib, "kvlease-cpu-s/GiB")
	b.ReportMetric(plainCPU.Seconds()/gib, "plain-cpu-s/GiB")
}

// processCPU is this process's CPU time so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
