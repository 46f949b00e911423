package tcp

import (
	"net"
	"testing"
	"time"

	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// FuzzUnauthenticatedStream writes arbitrary bytes to a listening transport
// from a stranger's connection, then ends it. Whatever the bytes, the
// transport delivers nothing larger than a handshake message, reports the
// connection Closed exactly once, and afterwards holds nothing for it: no
// unauthenticated connection, no byte of the receive budget.
func FuzzUnauthenticatedStream(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Add(append([]byte{4, 0, 0, 0}, 1, 2, 3))                           // a 64 MiB announcement
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))                    // another protocol
	f.Add(wire.AppendFrame(nil, &wire.Hello{Version: 1, EngineID: "d"})) // a valid HELLO
	f.Add(wire.AppendFrame(nil, &wire.Read{ReadID: 1, Lease: 2, Indexes: []uint32{1, 2}}))
	tr, err := New(Config{HandshakeTimeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	defer tr.Shutdown()
	if err := tr.Listen("127.0.0.1:0"); err != nil {
		f.Fatal(err)
	}
	p := &end{t: &testing.T{}, tr: tr}
	f.Fuzz(func(t *testing.T, data []byte) {
		p.t = t
		raw, err := net.Dial("tcp", string(tr.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		raw.Write(data)
		raw.(*net.TCPConn).CloseWrite()
		defer raw.Close()
		id := p.expect(transport.Accepted, 0).Conn
		for {
			ev := p.next()
			if ev.Conn != id {
				t.Fatalf("event of another connection: %v", ev)
			}
			if ev.Kind == transport.Closed {
				break
			}
			if ev.Kind != transport.Received {
				t.Fatalf("%v", ev)
			}
			if n := wire.FrameBytes(ev.Msg) - 5; n > wire.MaxHandshakePayloadBytes {
				t.Fatalf("delivered a %d-byte %v before authentication", n, ev.Msg.Type())
			}
		}
		deadline := time.Now().Add(waitLimit)
		for {
			st := tr.Stats()
			if st.Unauthenticated == 0 && st.ReceiveBytes == 0 && tr.Conns() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the connection: %+v, %d connections", st, tr.Conns())
			}
			time.Sleep(time.Millisecond)
		}
	})
}
