package kvevents

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzZMTPPeer feeds arbitrary bytes to the ZMTP reading a subscriber's
// connection goes through (greeting, READY, then frames and their
// commands): it refuses what is malformed without panicking, never
// returns a frame over its bound, and a READY it accepts names a
// Socket-Type that is in the bytes. Frames it wrote itself read back
// unchanged.
func FuzzZMTPPeer(f *testing.F) {
	hello := append(greeting(), readyCommand("SUB")...)
	f.Add(hello)
	f.Add(append(bytes.Clone(hello), appendMessage(nil, []byte{1, 'k', 'v'}, bytes.Repeat([]byte("x"), 300))...))
	f.Add(append(bytes.Clone(hello), appendFrame(nil, flagCommand, append([]byte{4}, "PING\x00\x10ctx"...))...))
	f.Add([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 1 << 10
		// What appendMessage writes, next reads back.
		parts := bytes.SplitN(in, []byte{0}, 4)
		rt := &frameReader{r: bufio.NewReader(bytes.NewReader(appendMessage(nil, parts...))), max: len(in) + 1}
		for i, p := range parts {
			fm, err := rt.next()
			if err != nil || !bytes.Equal(fm.body, p) || fm.more() != (i < len(parts)-1) {
				t.Fatalf("part %d: %v %q more=%v, want %q", i, err, fm.body, fm.more(), p)
			}
		}
		br := bufio.NewReader(bytes.NewReader(in))
		if readGreeting(br) != nil {
			return
		}
		fr := &frameReader{r: br, max: max}
		st, err := readReady(fr)
		if err != nil {
			return
		}
		if st == "" || !bytes.Contains(in, []byte(st)) {
			t.Fatalf("READY accepted with Socket-Type %q", st)
		}
		for {
			fm, err := fr.next()
			if err != nil {
				break
			}
			limit := max
			if fm.command() {
				limit = maxCommandBytes
				if name, data, err := commandName(fm.body); err == nil && name == "PING" {
					if p := pongFor(data); len(p) > 2+1+4+16 {
						t.Fatalf("PONG of %d bytes", len(p))
					}
				}
			}
			if len(fm.body) > limit {
				t.Fatalf("a %d-byte frame past the bound %d", len(fm.body), limit)
			}
		}
	})
}
