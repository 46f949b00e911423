package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func tok(b byte) Token {
	var t Token
	for i := range t {
		t[i] = b + byte(i)
	}
	return t
}

func nonce(b byte) (n [16]byte) {
	for i := range n {
		n[i] = b ^ byte(i*7)
	}
	return n
}

func mac32(b byte) (m [32]byte) {
	for i := range m {
		m[i] = b + byte(3*i)
	}
	return m
}

// sampleMessages covers every type, with empty and non-empty lists and
// extreme field values.
func sampleMessages() []struct {
	name string
	m    Message
} {
	return []struct {
		name string
		m    Message
	}{
		{"hello", &Hello{Version: Version, EngineID: "decode-0", Nonce: nonce(1)}},
		{"hello/empty-id", &Hello{Version: 0, EngineID: "", Nonce: [16]byte{}}},
		{"hello/max-id", &Hello{Version: 0xffff, EngineID: strings.Repeat("d", MaxEngineIDBytes), Nonce: nonce(2)}},
		{"hello/utf8-id", &Hello{Version: Version, EngineID: "décode-π", Nonce: nonce(3)}},
		{"hello_ack", &HelloAck{Version: Version, EngineID: "prefill-7", Nonce: nonce(4), MAC: mac32(5), Status: StatusOK}},
		{"hello_ack/bad-version", &HelloAck{Version: Version, EngineID: "p", Status: StatusBadVersion}},
		{"auth", &Auth{MAC: mac32(9)}},
		{"auth_ack/ok", &AuthAck{Status: StatusOK}},
		{"auth_ack/unauthenticated", &AuthAck{Status: StatusUnauthenticated}},
		{"renew/empty", &Renew{Seq: 0}},
		{"renew", &Renew{Seq: 42, Leases: []LeaseRef{{ID: 1, Token: tok(1)}, {ID: 1<<64 - 1, Token: tok(200)}}}},
		{"renew_ack/empty", &RenewAck{Seq: 1<<64 - 1}},
		{"renew_ack", &RenewAck{Seq: 42, Results: []RenewResult{
			{ID: 1, Status: StatusOK, ExpiresInMs: 20000},
			{ID: 2, Status: StatusExpired},
			{ID: 3, Status: StatusBadIndex, ExpiresInMs: 1<<32 - 1},
		}}},
		{"read/empty", &Read{ReadID: 7, Lease: 8, Token: tok(3)}},
		{"read", &Read{ReadID: 7, Lease: 8, Token: tok(3), Indexes: []uint32{0, 1, 2, 1<<32 - 1}}},
		{"block/digest-only", &Block{ReadID: 7, Lease: 8, Index: 2, Tokens: 3, Checksum: 0xdeadbeef, Digests: []uint64{1, 2, 1<<64 - 1}}},
		{"block/data", &Block{ReadID: 7, Lease: 8, Index: 3, Tokens: 2, Checksum: 99, Digests: []uint64{5, 6}, Data: []byte("kv bytes of the block")}},
		{"block/empty", &Block{}},
		{"read_end", &ReadEnd{ReadID: 7, Lease: 8, Status: StatusOK}},
		{"read_end/revoked", &ReadEnd{ReadID: 7, Lease: 8, Status: StatusRevoked}},
		{"release", &Release{Lease: 8, Token: tok(3), Reason: ReasonReadDone}},
		{"release/fallback", &Release{Lease: 9, Token: tok(4), Reason: ReasonFallback}},
		{"release_ack", &ReleaseAck{Lease: 8, Status: StatusReleased}},
		{"revoked", &Revoked{Lease: 8, Reason: ReasonPeerLost}},
	}
}

func TestRoundTrip(t *testing.T) {
	seen := map[MsgType]bool{}
	for _, tc := range sampleMessages() {
		t.Run(tc.name, func(t *testing.T) {
			seen[tc.m.Type()] = true
			prefix := []byte("keep")
			frame := AppendFrame(prefix, tc.m)
			if !bytes.Equal(frame[:4], []byte("keep")) {
				t.Fatalf("AppendFrame overwrote dst: %q", frame[:4])
			}
			frame = frame[4:]
			if got, want := len(frame), FrameBytes(tc.m); got != want {
				t.Fatalf("frame is %d bytes, FrameBytes says %d", got, want)
			}
			if got, want := binary.BigEndian.Uint32(frame), uint32(len(frame)-5); got != want {
				t.Fatalf("length prefix %d, payload is %d bytes", got, want)
			}
			if got := MsgType(frame[4]); got != tc.m.Type() {
				t.Fatalf("type byte %v, want %v", got, tc.m.Type())
			}
			got, err := Decode(frame[4:])
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, tc.m)
			}
			if b, ok := tc.m.(*Block); ok {
				hdr := AppendBlockHeader([]byte("xy"), b)
				if !bytes.Equal(hdr[:2], []byte("xy")) {
					t.Fatalf("AppendBlockHeader overwrote dst")
				}
				if whole := append(hdr[2:], b.Data...); !bytes.Equal(whole, frame) {
					t.Fatalf("header+data differs from AppendFrame:\n%x\n%x", whole, frame)
				}
			}
		})
	}
	for mt := MsgHello; mt < numMsgTypes; mt++ {
		if !seen[mt] {
			t.Errorf("no sample of %v", mt)
		}
	}
}

// TestGoldenEncoding pins the byte layout, so a change of the format is a
// deliberate act (and a Version bump), not an accident.
func TestGoldenEncoding(t *testing.T) {
	for _, tc := range []struct {
		m    Message
		want string // hex
	}{
		{&AuthAck{Status: StatusBadToken}, "00000001" + "04" + "05"},
		{&Revoked{Lease: 0x0102030405060708, Reason: ReasonExpired}, "00000009" + "0c" + "0102030405060708" + "06"},
		{&Hello{Version: 1, EngineID: "ab", Nonce: [16]byte{15: 0xff}}, "00000016" + "01" + "0001" + "0002" + "6162" + "000000000000000000000000000000ff"},
		{&Read{ReadID: 1, Lease: 2, Token: Token{0: 0xaa}, Indexes: []uint32{5, 6}},
			"0000002c" + "07" + "0000000000000001" + "0000000000000002" + "aa000000000000000000000000000000" + "00000002" + "00000005" + "00000006"},
		{&Block{ReadID: 1, Lease: 2, Index: 3, Tokens: 1, Checksum: 4, Digests: []uint64{5}, Data: []byte{0xee}},
			"00000027" + "08" + "0000000000000001" + "0000000000000002" + "00000003" + "0001" + "0000000000000004" + "0000000000000005" + "ee"},
	} {
		if got := fmt.Sprintf("%x", AppendFrame(nil, tc.m)); got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.m.Type(), got, tc.want)
		}
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrTruncated},
		{"type zero", []byte{0, 1, 2}, ErrUnknownType},
		{"type past last", []byte{byte(numMsgTypes)}, ErrUnknownType},
		{"type 255", []byte{255}, ErrUnknownType},
		{"no payload", []byte{byte(MsgAuthAck)}, ErrTruncated},
		{"status undefined", []byte{byte(MsgAuthAck), byte(numStatuses)}, ErrBadValue},
		{"status 255", []byte{byte(MsgAuthAck), 255}, ErrBadValue},
		{"reason zero", append([]byte{byte(MsgRevoked)}, 0, 0, 0, 0, 0, 0, 0, 1, 0), ErrBadValue},
		{"reason past last", append([]byte{byte(MsgRevoked)}, 0, 0, 0, 0, 0, 0, 0, 1, byte(numReasons)), ErrBadValue},
		{"retired reason 9", append([]byte{byte(MsgRevoked)}, 0, 0, 0, 0, 0, 0, 0, 1, 9), ErrBadValue},
		{"renew count lies", []byte{byte(MsgRenew), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, ErrTruncated},
		{"renew count huge", []byte{byte(MsgRenew), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, ErrTooMany},
		{"renew_ack bad status in list", func() []byte {
			f := AppendFrame(nil, &RenewAck{Results: []RenewResult{{ID: 1}, {ID: 2}}})[4:]
			f[1+8+4+renewResultBytes+8] = 77
			return f
		}(), ErrBadValue},
		{"engine id length lies", []byte{byte(MsgHello), 0, 1, 0, 5, 'a'}, ErrTruncated},
		{"block tokens huge", func() []byte {
			f := AppendFrame(nil, &Block{})[4:]
			binary.BigEndian.PutUint16(f[1+20:], 0xffff)
			return f
		}(), ErrTooMany},
		{"block digests missing", func() []byte {
			f := AppendFrame(nil, &Block{})[4:]
			binary.BigEndian.PutUint16(f[1+20:], 2)
			return append(f, 1, 2, 3) // 3 bytes of data, not 16 of digests
		}(), ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.frame)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode(%x) = %v, %v; want %v", tc.frame, m, err, tc.want)
			}
			if m != nil {
				t.Fatalf("Decode returned a message with an error: %#v", m)
			}
			if !strings.HasPrefix(err.Error(), "wire: ") {
				t.Fatalf("error %q is not package-prefixed", err)
			}
		})
	}
}

// TestDecodeTruncatedAndTrailing cuts every sample at every length and adds a
// byte to each: only the whole frame decodes. A BLOCK's data is the rest of
// the payload, so cutting into it gives a shorter block, not an error.
func TestDecodeTruncatedAndTrailing(t *testing.T) {
	for _, tc := range sampleMessages() {
		frame := AppendFrame(nil, tc.m)[4:]
		complete := len(frame)
		if b, ok := tc.m.(*Block); ok {
			complete -= len(b.Data)
		}
		for n := range complete {
			if _, err := Decode(frame[:n]); !errors.Is(err, ErrTruncated) {
				t.Errorf("%s cut to %d of %d bytes: %v, want ErrTruncated", tc.name, n, len(frame), err)
			}
		}
		if _, ok := tc.m.(*Block); ok {
			continue
		}
		if _, err := Decode(append(frame[:len(frame):len(frame)], 0)); !errors.Is(err, ErrTrailingBytes) {
			t.Errorf("%s with a trailing byte: %v, want ErrTrailingBytes", tc.name, err)
		}
	}
}

func TestDecodeFrameTooLarge(t *testing.T) {
	frame := make([]byte, 1+MaxFrameBytes+1)
	frame[0] = byte(MsgBlock)
	if _, err := Decode(frame); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("payload of MaxFrameBytes+1: %v, want ErrFrameTooLarge", err)
	}
}

func TestBlockDataAliasesFrame(t *testing.T) {
	frame := AppendFrame(nil, &Block{Tokens: 1, Digests: []uint64{1}, Data: []byte("abc")})[4:]
	m, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	b := m.(*Block)
	frame[len(frame)-1] = 'z'
	if string(b.Data) != "abz" {
		t.Fatalf("Data does not alias the frame: %q", b.Data)
	}
	if cap(b.Data) != len(b.Data) {
		t.Fatalf("Data has spare capacity %d: an append would scribble on the caller's buffer", cap(b.Data))
	}
}

// boundCase builds a message at a bound (n = limit) or over it (n = limit+1).
type boundCase struct {
	name  string
	limit int
	build func(n int) Message
	want  error
}

func boundCases() []boundCase {
	return []boundCase{
		{"hello engine id", MaxEngineIDBytes, func(n int) Message {
			return &Hello{EngineID: strings.Repeat("x", n)}
		}, ErrBadLength},
		{"hello_ack engine id", MaxEngineIDBytes, func(n int) Message {
			return &HelloAck{EngineID: strings.Repeat("x", n)}
		}, ErrBadLength},
		{"renew leases", MaxLeasesPerRenew, func(n int) Message {
			return &Renew{Leases: make([]LeaseRef, n)}
		}, ErrTooMany},
		{"renew_ack results", MaxLeasesPerRenew, func(n int) Message {
			return &RenewAck{Results: make([]RenewResult, n)}
		}, ErrTooMany},
		{"read indexes", MaxIndexesPerRead, func(n int) Message {
			return &Read{Indexes: make([]uint32, n)}
		}, ErrTooMany},
		{"block digests", MaxDigestsPerBlock, func(n int) Message {
			return &Block{Tokens: uint16(n), Digests: make([]uint64, n)}
		}, ErrTooMany},
		{"block data", MaxBlockBytes, func(n int) Message {
			return &Block{Data: make([]byte, n)}
		}, ErrBadLength},
	}
}

// overEncode encodes m, whose one bounded length is limit+1, as a peer that
// ignores the bound would: it encodes the same message with the length at
// the limit, then adds one element and fixes up the count.
func overEncode(t *testing.T, bc boundCase) []byte {
	t.Helper()
	f := AppendFrame(nil, bc.build(bc.limit))[4:]
	switch m := bc.build(bc.limit).(type) {
	case *Hello, *HelloAck:
		f = append(f[:1+2+2+bc.limit], append([]byte{'x'}, f[1+2+2+bc.limit:]...)...)
		binary.BigEndian.PutUint16(f[1+2:], uint16(bc.limit+1))
	case *Renew:
		binary.BigEndian.PutUint32(f[1+8:], uint32(bc.limit+1))
		f = append(f, make([]byte, leaseRefBytes)...)
	case *RenewAck:
		binary.BigEndian.PutUint32(f[1+8:], uint32(bc.limit+1))
		f = append(f, make([]byte, renewResultBytes)...)
	case *Read:
		binary.BigEndian.PutUint32(f[1+8+8+16:], uint32(bc.limit+1))
		f = append(f, make([]byte, 4)...)
	case *Block:
		if m.Tokens > 0 {
			binary.BigEndian.PutUint16(f[1+20:], uint16(bc.limit+1))
		}
		f = append(f, make([]byte, 8)...) // a digest, or a data byte more
		if m.Tokens == 0 {
			f = f[:len(f)-7]
		}
	default:
		t.Fatalf("overEncode: %T", m)
	}
	return f
}

func TestBounds(t *testing.T) {
	for _, bc := range boundCases() {
		t.Run(bc.name, func(t *testing.T) {
			at := bc.build(bc.limit)
			if err := Validate(at); err != nil {
				t.Fatalf("at the limit: Validate: %v", err)
			}
			frame := AppendFrame(nil, at)
			if len(frame)-5 > MaxFrameBytes {
				t.Fatalf("a message at its bounds is %d bytes, over MaxFrameBytes", len(frame)-5)
			}
			got, err := Decode(frame[4:])
			if err != nil {
				t.Fatalf("at the limit: Decode: %v", err)
			}
			if !reflect.DeepEqual(got, at) {
				t.Fatalf("at the limit: round trip differs")
			}

			over := bc.build(bc.limit + 1)
			if err := Validate(over); !errors.Is(err, bc.want) {
				t.Fatalf("over the limit: Validate = %v, want %v", err, bc.want)
			}
			assertEncodePanics(t, bc.want, func() { AppendFrame(nil, over) })
			assertEncodePanics(t, bc.want, func() { FrameBytes(over) })
			if b, ok := over.(*Block); ok {
				assertEncodePanics(t, bc.want, func() { AppendBlockHeader(nil, b) })
			}
			if _, err := Decode(overEncode(t, bc)); !errors.Is(err, bc.want) {
				t.Fatalf("over the limit: Decode = %v, want %v", err, bc.want)
			}
		})
	}
}

func assertEncodePanics(t *testing.T, want error, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		err, ok := r.(error)
		if !ok || !errors.Is(err, want) {
			t.Fatalf("panic value %v, want an error matching %v", r, want)
		}
	}()
	f()
}

type alien struct{}

func (alien) Type() MsgType { return MsgAuth }

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Message
		want error
	}{
		{"foreign type", alien{}, ErrUnknownType},
		{"nil", nil, ErrUnknownType},
		{"unset reason", &Release{Lease: 1}, ErrBadValue},
		{"undefined reason", &Revoked{Reason: numReasons}, ErrBadValue},
		{"undefined status", &ReadEnd{Status: numStatuses}, ErrBadValue},
		{"undefined status in list", &RenewAck{Results: []RenewResult{{}, {Status: 200}}}, ErrBadValue},
		{"hello_ack undefined status", &HelloAck{Status: 99}, ErrBadValue},
		{"digests short of tokens", &Block{Tokens: 2, Digests: []uint64{1}}, ErrBadLength},
		{"digests beyond tokens", &Block{Tokens: 0, Digests: []uint64{1}}, ErrBadLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Validate(tc.m); !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			assertEncodePanics(t, tc.want, func() { AppendFrame(nil, tc.m) })
		})
	}
}

// TestAppendFrameAllocations checks the encoder sizes its output up front
// and the decoder allocates only what the message owns.
func TestAppendFrameAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	m := &Renew{Seq: 1, Leases: make([]LeaseRef, 1000)}
	if n := testing.AllocsPerRun(20, func() { _ = AppendFrame(nil, m) }); n != 1 {
		t.Errorf("AppendFrame into a nil slice allocates %v times, want 1", n)
	}
	buf := make([]byte, 0, FrameBytes(m))
	if n := testing.AllocsPerRun(20, func() { buf = AppendFrame(buf[:0], m) }); n != 0 {
		t.Errorf("AppendFrame into a big enough slice allocates %v times, want 0", n)
	}
	frame := AppendFrame(nil, m)[4:]
	if n := testing.AllocsPerRun(20, func() { _, _ = Decode(frame) }); n != 2 {
		t.Errorf("Decode of a RENEW allocates %v times, want 2 (message, lease list)", n)
	}
}

// TestMaxPayloadBytes checks the bounds against messages at their limits.
func TestMaxPayloadBytes(t *testing.T) {
	id := strings.Repeat("e", MaxEngineIDBytes)
	at := map[MsgType]Message{
		MsgHello:      &Hello{EngineID: id},
		MsgHelloAck:   &HelloAck{EngineID: id},
		MsgAuth:       &Auth{},
		MsgAuthAck:    &AuthAck{},
		MsgRenew:      &Renew{Leases: make([]LeaseRef, MaxLeasesPerRenew)},
		MsgRenewAck:   &RenewAck{Results: make([]RenewResult, MaxLeasesPerRenew)},
		MsgRead:       &Read{Indexes: make([]uint32, MaxIndexesPerRead)},
		MsgBlock:      &Block{Tokens: MaxDigestsPerBlock, Digests: make([]uint64, MaxDigestsPerBlock), Data: make([]byte, MaxBlockBytes)},
		MsgReadEnd:    &ReadEnd{},
		MsgRelease:    &Release{Reason: ReasonRejected},
		MsgReleaseAck: &ReleaseAck{},
		MsgRevoked:    &Revoked{Reason: ReasonExpired},
	}
	for mt := MsgHello; mt < numMsgTypes; mt++ {
		m, ok := at[mt]
		if !ok {
			t.Fatalf("no message at the bounds for %v", mt)
		}
		if got, want := MaxPayloadBytes(mt), FrameBytes(m)-headerBytes; got != want {
			t.Errorf("MaxPayloadBytes(%v) = %d, a message at the bounds has %d", mt, got, want)
		}
		if mt <= MsgAuthAck && MaxPayloadBytes(mt) > MaxHandshakePayloadBytes {
			t.Errorf("%v is over MaxHandshakePayloadBytes", mt)
		}
	}
	if MaxPayloadBytes(numMsgTypes) != 0 || MaxHandshakePayloadBytes > 512 {
		t.Error("bounds")
	}
}
