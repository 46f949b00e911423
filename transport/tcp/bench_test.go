package tcp

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// BenchmarkTransfer streams BLOCK frames from P to D over loopback, the way
// an engine node streams a read: P's loop sends while Writable and waits on
// Ready otherwise; D's loop polls. MB/s is block payload throughput. Block
// sizes: the tiny profile's 16-token block (4 KiB), a mid size, and an
// 8B-class model's 16-token block (2 MiB).
func BenchmarkTransfer(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10, 2 << 20} {
		b.Run(fmt.Sprintf("block=%dKiB", size>>10), func(b *testing.B) {
			p, err := New(Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Shutdown()
			if err := p.Listen("127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			d, _ := New(Config{})
			defer d.Shutdown()
			dc := d.Dial(context.Background(), p.Addr())
			var pc transport.ConnID
			var evs []transport.Event
			for pc == 0 {
				<-p.Ready()
				for _, ev := range p.Poll(evs[:0]) {
					if ev.Kind == transport.Accepted {
						pc = ev.Conn
					}
				}
			}
			block := &wire.Block{ReadID: 1, Lease: 1, Tokens: 16, Digests: make([]uint64, 16), Data: make([]byte, size)}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			sendErr := make(chan error, 1)
			go func() {
				for i := 0; i < b.N; {
					if !p.Writable(pc) {
						<-p.Ready()
						p.Poll(nil)
						continue
					}
					block.Index = uint32(i)
					if !p.Send(pc, block) {
						sendErr <- fmt.Errorf("Send %d failed", i)
						return
					}
					i++
				}
				sendErr <- nil
			}()
			got := 0
			for got < b.N {
				<-d.Ready()
				evs = d.Poll(evs[:0])
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
			_ = dc
		})
	}
}
