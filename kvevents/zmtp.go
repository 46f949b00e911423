package kvevents

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// This file speaks the server side of ZMTP 3 (rfc.zeromq.org/spec/23 and
// /37) with the NULL mechanism, as far as a PUB socket and a ROUTER socket
// answering replay requests need: the greeting, the READY handshake,
// frames, subscriptions (as 3.0 messages and as 3.1 SUBSCRIBE/CANCEL
// commands) and PING/PONG. Every length a peer announces is checked against
// a bound before anything is allocated.

// greetingLen is the length of a ZMTP 3 greeting.
const greetingLen = 64

// Frame flags.
const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
)

// maxCommandBytes bounds a command frame a peer may send (READY with its
// metadata, SUBSCRIBE with a topic, PING).
const maxCommandBytes = 4096

// errProtocol wraps every protocol violation of a peer.
var errProtocol = errors.New("kvevents: zmtp protocol error")

// greeting is what this side sends: signature, version 3.0, mechanism
// NULL, as-server 0, filler. Version 3.0 asks 3.1 peers to send
// subscriptions as messages; both forms are accepted anyway.
func greeting() []byte {
	g := make([]byte, greetingLen)
	g[0] = 0xff
	g[9] = 0x7f
	g[10] = 3 // major
	g[11] = 0 // minor
	copy(g[12:32], "NULL")
	return g
}

// readGreeting reads and checks the peer's greeting.
func readGreeting(r io.Reader) error {
	var g [greetingLen]byte
	if _, err := io.ReadFull(r, g[:]); err != nil {
		return err
	}
	if g[0] != 0xff || g[9] != 0x7f {
		return fmt.Errorf("%w: not a ZMTP greeting", errProtocol)
	}
	if g[10] < 3 {
		return fmt.Errorf("%w: ZMTP version %d.%d, want 3.x", errProtocol, g[10], g[11])
	}
	mech := string(bytes.TrimRight(g[12:32], "\x00"))
	if mech != "NULL" {
		return fmt.Errorf("%w: security mechanism %q, want NULL", errProtocol, mech)
	}
	return nil
}

// appendFrame appends one frame with flags (flagMore, flagCommand) and body.
func appendFrame(dst []byte, flags byte, body []byte) []byte {
	if len(body) > 255 {
		dst = append(dst, flags|flagLong)
		dst = binary.BigEndian.AppendUint64(dst, uint64(len(body)))
	} else {
		dst = append(dst, flags, byte(len(body)))
	}
	return append(dst, body...)
}

// appendMessage appends a multipart message.
func appendMessage(dst []byte, frames ...[]byte) []byte {
	for i, f := range frames {
		var fl byte
		if i < len(frames)-1 {
			fl = flagMore
		}
		dst = appendFrame(dst, fl, f)
	}
	return dst
}

// readyCommand is a READY command announcing socketType.
func readyCommand(socketType string) []byte {
	var b []byte
	b = append(b, 5)
	b = append(b, "READY"...)
	b = append(b, byte(len("Socket-Type")))
	b = append(b, "Socket-Type"...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(socketType)))
	b = append(b, socketType...)
	return appendFrame(nil, flagCommand, b)
}

// frame is one frame read from a peer. body is only valid until the next
// read on the same frameReader.
type frame struct {
	flags byte
	body  []byte
}

func (f frame) more() bool    { return f.flags&flagMore != 0 }
func (f frame) command() bool { return f.flags&flagCommand != 0 }

// frameReader reads frames of at most max bytes (commands: at most
// maxCommandBytes) into one reused buffer.
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func (fr *frameReader) next() (frame, error) {
	fl, err := fr.r.ReadByte()
	if err != nil {
		return frame{}, err
	}
	if fl&^(flagMore|flagLong|flagCommand) != 0 {
		return frame{}, fmt.Errorf("%w: reserved frame flags %#x", errProtocol, fl)
	}
	var n uint64
	if fl&flagLong != 0 {
		var b [8]byte
		if _, err := io.ReadFull(fr.r, b[:]); err != nil {
			return frame{}, err
		}
		n = binary.BigEndian.Uint64(b[:])
	} else {
		b, err := fr.r.ReadByte()
		if err != nil {
			return frame{}, err
		}
		n = uint64(b)
	}
	limit := uint64(fr.max)
	if fl&flagCommand != 0 {
		limit = maxCommandBytes
	}
	if n > limit {
		return frame{}, fmt.Errorf("%w: a %d-byte frame, at most %d accepted", errProtocol, n, limit)
	}
	if uint64(cap(fr.buf)) < n {
		fr.buf = make([]byte, n)
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		return frame{}, err
	}
	return frame{flags: fl, body: fr.buf}, nil
}

// commandName splits a command body into its name and data.
func commandName(body []byte) (string, []byte, error) {
	if len(body) < 1 || int(body[0]) > len(body)-1 {
		return "", nil, fmt.Errorf("%w: malformed command", errProtocol)
	}
	n := int(body[0])
	return string(body[1 : 1+n]), body[1+n:], nil
}

// readReady reads the peer's READY command and returns its Socket-Type.
func readReady(fr *frameReader) (string, error) {
	f, err := fr.next()
	if err != nil {
		return "", err
	}
	if !f.command() {
		return "", fmt.Errorf("%w: expected READY, got a message", errProtocol)
	}
	name, data, err := commandName(f.body)
	if err != nil {
		return "", err
	}
	if name == "ERROR" {
		return "", fmt.Errorf("%w: peer sent ERROR", errProtocol)
	}
	if name != "READY" {
		return "", fmt.Errorf("%w: expected READY, got %q", errProtocol, name)
	}
	socketType := ""
	for len(data) > 0 {
		nl := int(data[0])
		if 1+nl+4 > len(data) {
			return "", fmt.Errorf("%w: malformed READY metadata", errProtocol)
		}
		key := string(data[1 : 1+nl])
		vl := int(binary.BigEndian.Uint32(data[1+nl:]))
		data = data[1+nl+4:]
		if vl < 0 || vl > len(data) {
			return "", fmt.Errorf("%w: malformed READY metadata", errProtocol)
		}
		if equalFoldASCII(key, "Socket-Type") {
			socketType = string(data[:vl])
		}
		data = data[vl:]
	}
	if socketType == "" {
		return "", fmt.Errorf("%w: READY without Socket-Type", errProtocol)
	}
	return socketType, nil
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// pongFor answers a PING command's data (TTL, then a context of at most
// 16 bytes) with a PONG carrying the context back.
func pongFor(data []byte) []byte {
	ctx := []byte(nil)
	if len(data) > 2 {
		ctx = data[2:]
		if len(ctx) > 16 {
			ctx = ctx[:16]
		}
	}
	b := append([]byte{4}, "PONG"...)
	b = append(b, ctx...)
	return appendFrame(nil, flagCommand, b)
}
