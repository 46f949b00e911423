package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

var sentinels = []error{ErrFrameTooLarge, ErrTruncated, ErrUnknownType, ErrBadLength, ErrTooMany, ErrTrailingBytes, ErrBadValue}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// FuzzDecode: no input panics; every error is one of the sentinels; whatever
// decodes re-encodes to the same bytes and decodes again to an equal message.
func FuzzDecode(f *testing.F) {
	for _, tc := range sampleMessages() {
		f.Add(AppendFrame(nil, tc.m)[4:])
	}
	for _, bc := range boundCases() {
		if bc.limit <= MaxDigestsPerBlock {
			f.Add(AppendFrame(nil, bc.build(bc.limit))[4:])
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{255, 1, 2, 3})
	f.Add([]byte{byte(MsgRenew), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{byte(MsgHello), 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := Decode(frame)
		if err != nil {
			if m != nil {
				t.Fatalf("message and error: %#v, %v", m, err)
			}
			if !isSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if err := Validate(m); err != nil {
			t.Fatalf("decoded message does not validate: %v", err)
		}
		re := AppendFrame(nil, m)
		if !bytes.Equal(re[4:], frame) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", frame, re[4:])
		}
		m2, err := Decode(re[4:])
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("second decode: %v\n%#v\n%#v", err, m, m2)
		}
		// The same bytes as a stream: ReadFrame must not panic either.
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(frame)-1))
		got, err := ReadFrame(bytes.NewReader(append(hdr[:], frame...)), nil, 0)
		if err != nil || !bytes.Equal(got, frame) {
			t.Fatalf("ReadFrame: %v", err)
		}
	})
}

// FuzzReadFrame: a stream of arbitrary bytes yields frames or sentinel or
// EOF errors, never a panic, and frames never exceed the limit.
func FuzzReadFrame(f *testing.F) {
	// Small seeds: the fuzzer minimizes every new input it finds, and
	// minimizing kilobytes of block data is slow.
	f.Add(streamOf(&Hello{EngineID: "d"}, &Block{Tokens: 1, Digests: []uint64{9}, Data: []byte{7, 7}}, &AuthAck{}), 100)
	f.Add([]byte{0, 0, 0, 5, 1}, 0)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 10)
	f.Fuzz(func(t *testing.T, stream []byte, maxPayload int) {
		maxPayload %= 1 << 16
		r := bytes.NewReader(stream)
		var buf []byte
		for range len(stream) + 1 {
			frame, err := ReadFrame(r, buf, maxPayload)
			if err != nil {
				if err.Error() != "EOF" && !isSentinel(err) {
					t.Fatalf("error %v", err)
				}
				return
			}
			if lim := maxPayload; lim > 0 && len(frame)-1 > lim {
				t.Fatalf("frame of %d bytes over limit %d", len(frame)-1, lim)
			}
			_, _ = Decode(frame)
			buf = frame[:0]
		}
		t.Fatal("ReadFrame returned more frames than bytes")
	})
}

// FuzzRoundTrip builds a valid message of every type from fuzzed fields and
// checks AppendFrame → ReadFrame → Decode gives it back, and that a BLOCK's
// header plus its data is its frame.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(0), uint64(1), uint64(2), uint32(3), "decode-0", []byte("0123456789abcdef0123456789abcdef"))
	for k := range uint8(numMsgTypes) {
		f.Add(k, uint64(k)<<60, ^uint64(k), uint32(k)*1e6, "p", bytes.Repeat([]byte{k}, int(k)*30))
	}
	f.Fuzz(func(t *testing.T, kind uint8, a, b uint64, c uint32, s string, raw []byte) {
		m := buildMessage(kind, a, b, c, s, raw)
		frame := AppendFrame(nil, m)
		if len(frame) != FrameBytes(m) {
			t.Fatalf("FrameBytes %d, frame %d", FrameBytes(m), len(frame))
		}
		stream := append(frame[:len(frame):len(frame)], frame...)
		r := bytes.NewReader(stream)
		var buf []byte
		for i := range 2 {
			got, err := ReadFrame(r, buf, 0)
			if err != nil {
				t.Fatalf("ReadFrame %d: %v", i, err)
			}
			dm, err := Decode(got)
			if err != nil {
				t.Fatalf("Decode %d: %v", i, err)
			}
			if !reflect.DeepEqual(dm, m) {
				t.Fatalf("round trip %d:\n got %#v\nwant %#v", i, dm, m)
			}
			buf = got[:0]
		}
		if blk, ok := m.(*Block); ok {
			if whole := append(AppendBlockHeader(nil, blk), blk.Data...); !bytes.Equal(whole, frame) {
				t.Fatal("header + data differs from the frame")
			}
		}
	})
}

// buildMessage makes a valid message of type kind mod the number of types
// from fuzzed fields. Lists are cut from raw, with nil for empty (as Decode
// returns them).
func buildMessage(kind uint8, a, b uint64, c uint32, s string, raw []byte) Message {
	if len(s) > MaxEngineIDBytes {
		s = s[:MaxEngineIDBytes]
	}
	var n16 [16]byte
	copy(n16[:], raw)
	var m32 [32]byte
	copy(m32[:], raw)
	status := Status(c % uint32(numStatuses))
	rs := Reasons()
	reason := rs[c%uint32(len(rs))]
	switch MsgType(1 + kind%uint8(numMsgTypes-1)) {
	case MsgHello:
		return &Hello{Version: uint16(c), EngineID: s, Nonce: n16}
	case MsgHelloAck:
		return &HelloAck{Version: uint16(c >> 16), EngineID: s, Nonce: n16, MAC: m32, Status: status}
	case MsgAuth:
		return &Auth{MAC: m32}
	case MsgAuthAck:
		return &AuthAck{Status: status}
	case MsgRenew:
		m := &Renew{Seq: a}
		for i := 0; i+8 <= len(raw); i += 8 {
			m.Leases = append(m.Leases, LeaseRef{ID: LeaseID(binary.BigEndian.Uint64(raw[i:]) ^ b), Token: Token(n16)})
		}
		return m
	case MsgRenewAck:
		m := &RenewAck{Seq: a}
		for i, x := range raw {
			m.Results = append(m.Results, RenewResult{ID: LeaseID(b + uint64(i)), Status: Status(x % uint8(numStatuses)), ExpiresInMs: c * uint32(x)})
		}
		return m
	case MsgRead:
		m := &Read{ReadID: a, Lease: LeaseID(b), Token: Token(n16)}
		for i := 0; i+4 <= len(raw); i += 4 {
			m.Indexes = append(m.Indexes, binary.BigEndian.Uint32(raw[i:]))
		}
		return m
	case MsgBlock:
		m := &Block{ReadID: a, Lease: LeaseID(b), Index: c, Checksum: a ^ b}
		nd := min(len(raw)/8, MaxDigestsPerBlock, int(c%17))
		for i := range nd {
			m.Digests = append(m.Digests, binary.BigEndian.Uint64(raw[8*i:]))
		}
		m.Tokens = uint16(nd)
		if rest := raw[8*nd:]; len(rest) > 0 {
			m.Data = rest
		}
		return m
	case MsgReadEnd:
		return &ReadEnd{ReadID: a, Lease: LeaseID(b), Status: status}
	case MsgRelease:
		return &Release{Lease: LeaseID(a), Token: Token(n16), Reason: reason}
	case MsgReleaseAck:
		return &ReleaseAck{Lease: LeaseID(a), Status: status}
	case MsgRevoked:
		return &Revoked{Lease: LeaseID(a), Reason: reason}
	}
	panic("unreachable")
}
