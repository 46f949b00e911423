package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Version is the protocol version this package speaks, sent in Hello and
// HelloAck. Version 2 seals every frame after the handshake (Sealer); a
// version 1 peer, whose frames were plain, is refused at HELLO.
const Version uint16 = 2

// Bounds. Decode enforces each on every frame from a peer; Validate checks
// them and AppendFrame panics on a message that breaks one. Every message
// within these bounds fits in MaxFrameBytes.
const (
	// MaxFrameBytes bounds a frame's payload (the bytes after the type
	// byte): the most a peer can make ReadFrame buffer.
	MaxFrameBytes = 64 << 20
	// MaxEngineIDBytes bounds Hello.EngineID and HelloAck.EngineID.
	MaxEngineIDBytes = 256
	// MaxLeasesPerRenew bounds Renew.Leases and RenewAck.Results.
	MaxLeasesPerRenew = 65536
	// MaxIndexesPerRead bounds Read.Indexes.
	MaxIndexesPerRead = 65536
	// MaxBlockBytes bounds Block.Data.
	MaxBlockBytes = 32 << 20
	// MaxDigestsPerBlock bounds Block.Tokens and so Block.Digests; it is
	// kvblock's largest block size in tokens.
	MaxDigestsPerBlock = 1024
)

// Errors. Every error of this package wraps exactly one of these; check with
// errors.Is.
var (
	// ErrFrameTooLarge: a frame's length is over the limit.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrTruncated: a frame ends inside a field, or a stream ends inside a
	// frame (ReadFrame's error then also matches io.ErrUnexpectedEOF).
	ErrTruncated = errors.New("wire: truncated frame")
	// ErrUnknownType: a type byte, or a Message implementation, that this
	// version does not define.
	ErrUnknownType = errors.New("wire: unknown message type")
	// ErrBadLength: a byte length over its bound (EngineID, Block.Data), or
	// Block.Digests whose length is not Block.Tokens.
	ErrBadLength = errors.New("wire: bad length")
	// ErrTooMany: an element count over its bound (leases, indexes,
	// digests).
	ErrTooMany = errors.New("wire: too many elements")
	// ErrTrailingBytes: a payload goes on after its last field.
	ErrTrailingBytes = errors.New("wire: trailing bytes after message")
	// ErrBadValue: a Status or Reason field holds a value this version does
	// not define (the zero Reason included).
	ErrBadValue = errors.New("wire: undefined field value")
	// ErrBadToken: ParseToken's input is not 32 hex characters.
	ErrBadToken = errors.New("wire: malformed lease token")
)

// Encoded sizes of fixed parts, in bytes.
const (
	headerBytes      = 4 + 1 // length prefix + type byte
	leaseRefBytes    = 8 + 16
	renewResultBytes = 8 + 1 + 4
	blockFixedBytes  = 8 + 8 + 4 + 2 + 8
)

// Validate reports the first reason m cannot be encoded: a bound broken
// (ErrBadLength, ErrTooMany), an undefined Status or Reason (ErrBadValue),
// or a Message type of another package (ErrUnknownType). Messages built from
// untrusted input (for example block ids from an HTTP request) should be
// checked with Validate before AppendFrame, which panics instead.
func Validate(m Message) error {
	switch m := m.(type) {
	case *Hello:
		return checkEngineID(MsgHello, m.EngineID)
	case *HelloAck:
		if err := checkEngineID(MsgHelloAck, m.EngineID); err != nil {
			return err
		}
		return checkStatus(MsgHelloAck, m.Status)
	case *Auth:
		return nil
	case *AuthAck:
		return checkStatus(MsgAuthAck, m.Status)
	case *Renew:
		return checkCount(MsgRenew, "leases", len(m.Leases), MaxLeasesPerRenew)
	case *RenewAck:
		if err := checkCount(MsgRenewAck, "results", len(m.Results), MaxLeasesPerRenew); err != nil {
			return err
		}
		for i := range m.Results {
			if err := checkStatus(MsgRenewAck, m.Results[i].Status); err != nil {
				return err
			}
		}
		return nil
	case *Read:
		return checkCount(MsgRead, "indexes", len(m.Indexes), MaxIndexesPerRead)
	case *Block:
		if err := checkCount(MsgBlock, "tokens", int(m.Tokens), MaxDigestsPerBlock); err != nil {
			return err
		}
		if len(m.Digests) != int(m.Tokens) {
			return fmt.Errorf("%w: BLOCK has %d digests for %d tokens", ErrBadLength, len(m.Digests), m.Tokens)
		}
		if len(m.Data) > MaxBlockBytes {
			return fmt.Errorf("%w: BLOCK data is %d bytes, limit %d", ErrBadLength, len(m.Data), MaxBlockBytes)
		}
		return nil
	case *ReadEnd:
		return checkStatus(MsgReadEnd, m.Status)
	case *Release:
		return checkReason(MsgRelease, m.Reason)
	case *ReleaseAck:
		return checkStatus(MsgReleaseAck, m.Status)
	case *Revoked:
		return checkReason(MsgRevoked, m.Reason)
	}
	return fmt.Errorf("%w: %T", ErrUnknownType, m)
}

func checkEngineID(t MsgType, id string) error {
	if len(id) > MaxEngineIDBytes {
		return fmt.Errorf("%w: %v engine id is %d bytes, limit %d", ErrBadLength, t, len(id), MaxEngineIDBytes)
	}
	return nil
}

func checkCount(t MsgType, what string, n, limit int) error {
	if n > limit {
		return fmt.Errorf("%w: %v has %d %s, limit %d", ErrTooMany, t, n, what, limit)
	}
	return nil
}

func checkStatus(t MsgType, s Status) error {
	if !s.Valid() {
		return fmt.Errorf("%w: %v status %v", ErrBadValue, t, s)
	}
	return nil
}

func checkReason(t MsgType, r Reason) error {
	if !r.Valid() {
		return fmt.Errorf("%w: %v reason %v", ErrBadValue, t, r)
	}
	return nil
}

// payloadBytes is the encoded size of m's payload, Block.Data included.
// m must be valid.
func payloadBytes(m Message) int {
	switch m := m.(type) {
	case *Hello:
		return 2 + 2 + len(m.EngineID) + 16
	case *HelloAck:
		return 2 + 2 + len(m.EngineID) + 16 + 32 + 1
	case *Auth:
		return 32
	case *AuthAck:
		return 1
	case *Renew:
		return 8 + 4 + leaseRefBytes*len(m.Leases)
	case *RenewAck:
		return 8 + 4 + renewResultBytes*len(m.Results)
	case *Read:
		return 8 + 8 + 16 + 4 + 4*len(m.Indexes)
	case *Block:
		return blockFixedBytes + 8*len(m.Digests) + len(m.Data)
	case *ReadEnd:
		return 8 + 8 + 1
	case *Release:
		return 8 + 16 + 1
	case *ReleaseAck:
		return 8 + 1
	case *Revoked:
		return 8 + 1
	}
	panic(fmt.Sprintf("wire: payloadBytes of %T", m))
}

// FrameBytes is the size of m's complete frame: what AppendFrame appends.
// It panics if m is invalid (see Validate).
func FrameBytes(m Message) int {
	mustValidate(m)
	return headerBytes + payloadBytes(m)
}

func mustValidate(m Message) {
	if err := Validate(m); err != nil {
		// A message this process built breaks the protocol: a bug of the
		// caller, not an outcome (see Validate for untrusted input).
		panic(err)
	}
}

// AppendFrame appends m's complete frame to dst and returns the extended
// slice: [4-byte big-endian payload length][type byte][payload]. It grows dst
// at most once.
//
// AppendFrame panics if Validate(m) fails: encoding a message that breaks a
// bound is a bug of the caller, and a frame the peer would refuse must not
// leave this process.
func AppendFrame(dst []byte, m Message) []byte {
	mustValidate(m)
	n := payloadBytes(m)
	dst = slices.Grow(dst, headerBytes+n)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, byte(m.Type()))
	be := binary.BigEndian
	switch m := m.(type) {
	case *Hello:
		dst = be.AppendUint16(dst, m.Version)
		dst = appendString(dst, m.EngineID)
		dst = append(dst, m.Nonce[:]...)
	case *HelloAck:
		dst = be.AppendUint16(dst, m.Version)
		dst = appendString(dst, m.EngineID)
		dst = append(dst, m.Nonce[:]...)
		dst = append(dst, m.MAC[:]...)
		dst = append(dst, byte(m.Status))
	case *Auth:
		dst = append(dst, m.MAC[:]...)
	case *AuthAck:
		dst = append(dst, byte(m.Status))
	case *Renew:
		dst = be.AppendUint64(dst, m.Seq)
		dst = be.AppendUint32(dst, uint32(len(m.Leases)))
		for i := range m.Leases {
			l := &m.Leases[i]
			dst = be.AppendUint64(dst, uint64(l.ID))
			dst = append(dst, l.Token[:]...)
		}
	case *RenewAck:
		dst = be.AppendUint64(dst, m.Seq)
		dst = be.AppendUint32(dst, uint32(len(m.Results)))
		for i := range m.Results {
			r := &m.Results[i]
			dst = be.AppendUint64(dst, uint64(r.ID))
			dst = append(dst, byte(r.Status))
			dst = be.AppendUint32(dst, r.ExpiresInMs)
		}
	case *Read:
		dst = be.AppendUint64(dst, m.ReadID)
		dst = be.AppendUint64(dst, uint64(m.Lease))
		dst = append(dst, m.Token[:]...)
		dst = be.AppendUint32(dst, uint32(len(m.Indexes)))
		for _, x := range m.Indexes {
			dst = be.AppendUint32(dst, x)
		}
	case *Block:
		dst = appendBlockFields(dst, m)
		dst = append(dst, m.Data...)
	case *ReadEnd:
		dst = be.AppendUint64(dst, m.ReadID)
		dst = be.AppendUint64(dst, uint64(m.Lease))
		dst = append(dst, byte(m.Status))
	case *Release:
		dst = be.AppendUint64(dst, uint64(m.Lease))
		dst = append(dst, m.Token[:]...)
		dst = append(dst, byte(m.Reason))
	case *ReleaseAck:
		dst = be.AppendUint64(dst, uint64(m.Lease))
		dst = append(dst, byte(m.Status))
	case *Revoked:
		dst = be.AppendUint64(dst, uint64(m.Lease))
		dst = append(dst, byte(m.Reason))
	}
	return dst
}

// AppendBlockHeader appends the whole frame of m except m.Data: the length
// prefix counts len(m.Data), so writing the result followed by m.Data (for
// example as net.Buffers, one writev) puts exactly AppendFrame(nil, m) on
// the wire without copying the data. It panics if Validate(m) fails.
func AppendBlockHeader(dst []byte, m *Block) []byte {
	mustValidate(m)
	n := payloadBytes(m)
	dst = slices.Grow(dst, headerBytes+n-len(m.Data))
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, byte(MsgBlock))
	return appendBlockFields(dst, m)
}

// appendBlockFields appends everything of a BLOCK payload before Data. Data
// needs no length of its own: it is the rest of the payload.
func appendBlockFields(dst []byte, m *Block) []byte {
	be := binary.BigEndian
	dst = be.AppendUint64(dst, m.ReadID)
	dst = be.AppendUint64(dst, uint64(m.Lease))
	dst = be.AppendUint32(dst, m.Index)
	dst = be.AppendUint16(dst, m.Tokens)
	dst = be.AppendUint64(dst, m.Checksum)
	for _, d := range m.Digests {
		dst = be.AppendUint64(dst, d)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// Decode parses one frame: the type byte followed by the payload, without
// the length prefix (what ReadFrame returns). Every bound is enforced, every
// Status and Reason must be defined, and the payload must end exactly after
// the last field, so Decode accepts only what AppendFrame produces and
// AppendFrame(nil, m) reproduces the frame byte for byte.
//
// The returned message does not alias frame, except a *Block's Data, which
// is a subslice of frame (see Block). Slices of length zero decode as nil.
func Decode(frame []byte) (Message, error) {
	if len(frame) == 0 {
		return nil, fmt.Errorf("%w: empty frame, no type byte", ErrTruncated)
	}
	t := MsgType(frame[0])
	if !t.Valid() {
		return nil, fmt.Errorf("%w: %v", ErrUnknownType, t)
	}
	if len(frame)-1 > MaxFrameBytes {
		return nil, fmt.Errorf("%w: %v payload is %d bytes, limit %d", ErrFrameTooLarge, t, len(frame)-1, MaxFrameBytes)
	}
	d := decoder{b: frame[1:], size: len(frame) - 1, t: t}
	var m Message
	switch t {
	case MsgHello:
		m = &Hello{Version: d.u16(), EngineID: d.engineID(), Nonce: d.nonce()}
	case MsgHelloAck:
		m = &HelloAck{Version: d.u16(), EngineID: d.engineID(), Nonce: d.nonce(), MAC: d.mac(), Status: d.status()}
	case MsgAuth:
		m = &Auth{MAC: d.mac()}
	case MsgAuthAck:
		m = &AuthAck{Status: d.status()}
	case MsgRenew:
		m = d.renew()
	case MsgRenewAck:
		m = d.renewAck()
	case MsgRead:
		m = d.read()
	case MsgBlock:
		m = d.block()
	case MsgReadEnd:
		m = &ReadEnd{ReadID: d.u64(), Lease: LeaseID(d.u64()), Status: d.status()}
	case MsgRelease:
		m = &Release{Lease: LeaseID(d.u64()), Token: d.token(), Reason: d.reason()}
	case MsgReleaseAck:
		m = &ReleaseAck{Lease: LeaseID(d.u64()), Status: d.status()}
	case MsgRevoked:
		m = &Revoked{Lease: LeaseID(d.u64()), Reason: d.reason()}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(ErrTrailingBytes, fmt.Sprintf("%d bytes", len(d.b)))
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// decoder reads fields off a payload. The first failure sticks: later reads
// return zero values and consume nothing, so a message constructor can read
// all its fields and check once.
type decoder struct {
	b    []byte // the unread rest of the payload
	size int    // the payload's full size, for offsets in errors
	t    MsgType
	err  error
}

func (d *decoder) fail(sentinel error, detail string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %v at payload byte %d: %s", sentinel, d.t, d.size-len(d.b), detail)
	}
	d.b = nil
}

// take consumes n bytes, or fails with ErrTruncated and returns nil.
func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail(ErrTruncated, fmt.Sprintf("need %d bytes, have %d", n, len(d.b)))
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) nonce() (n [16]byte) {
	copy(n[:], d.take(16))
	return n
}

func (d *decoder) token() (t Token) {
	copy(t[:], d.take(16))
	return t
}

func (d *decoder) mac() (m [32]byte) {
	copy(m[:], d.take(32))
	return m
}

func (d *decoder) engineID() string {
	n := int(d.u16())
	if d.err == nil && n > MaxEngineIDBytes {
		d.fail(ErrBadLength, fmt.Sprintf("engine id of %d bytes, limit %d", n, MaxEngineIDBytes))
	}
	return string(d.take(n))
}

func (d *decoder) status() Status {
	s := Status(d.u8())
	if d.err == nil && !s.Valid() {
		d.fail(ErrBadValue, fmt.Sprintf("status %v", s))
	}
	return s
}

func (d *decoder) reason() Reason {
	r := Reason(d.u8())
	if d.err == nil && !r.Valid() {
		d.fail(ErrBadValue, fmt.Sprintf("reason %v", r))
	}
	return r
}

// elems reads a u32 element count, checks it against limit (ErrTooMany) and
// against the bytes left (ErrTruncated, before anything is allocated), and
// consumes the elements' bytes. It returns the count and those bytes; on
// failure 0 and nil.
func (d *decoder) elems(what string, limit, elemBytes int) (int, []byte) {
	n := d.u32()
	if d.err != nil {
		return 0, nil
	}
	if uint64(n) > uint64(limit) {
		d.fail(ErrTooMany, fmt.Sprintf("%d %s, limit %d", n, what, limit))
		return 0, nil
	}
	p := d.take(int(n) * elemBytes)
	if p == nil {
		return 0, nil
	}
	return int(n), p
}

func (d *decoder) renew() *Renew {
	m := &Renew{Seq: d.u64()}
	n, p := d.elems("leases", MaxLeasesPerRenew, leaseRefBytes)
	if n == 0 {
		return m
	}
	m.Leases = make([]LeaseRef, n)
	for i := range m.Leases {
		e := p[i*leaseRefBytes : (i+1)*leaseRefBytes]
		m.Leases[i].ID = LeaseID(binary.BigEndian.Uint64(e))
		copy(m.Leases[i].Token[:], e[8:])
	}
	return m
}

func (d *decoder) renewAck() *RenewAck {
	m := &RenewAck{Seq: d.u64()}
	n, p := d.elems("results", MaxLeasesPerRenew, renewResultBytes)
	if n == 0 {
		return m
	}
	m.Results = make([]RenewResult, n)
	for i := range m.Results {
		e := p[i*renewResultBytes : (i+1)*renewResultBytes]
		s := Status(e[8])
		if !s.Valid() {
			d.b = p[i*renewResultBytes+8:] // for the offset in the error
			d.fail(ErrBadValue, fmt.Sprintf("result %d status %v", i, s))
			return nil
		}
		m.Results[i] = RenewResult{
			ID:          LeaseID(binary.BigEndian.Uint64(e)),
			Status:      s,
			ExpiresInMs: binary.BigEndian.Uint32(e[9:]),
		}
	}
	return m
}

func (d *decoder) read() *Read {
	m := &Read{ReadID: d.u64(), Lease: LeaseID(d.u64()), Token: d.token()}
	n, p := d.elems("indexes", MaxIndexesPerRead, 4)
	if n == 0 {
		return m
	}
	m.Indexes = make([]uint32, n)
	for i := range m.Indexes {
		m.Indexes[i] = binary.BigEndian.Uint32(p[4*i:])
	}
	return m
}

func (d *decoder) block() *Block {
	m := &Block{ReadID: d.u64(), Lease: LeaseID(d.u64()), Index: d.u32(), Tokens: d.u16(), Checksum: d.u64()}
	if d.err != nil {
		return nil
	}
	if m.Tokens > MaxDigestsPerBlock {
		d.fail(ErrTooMany, fmt.Sprintf("%d tokens, limit %d", m.Tokens, MaxDigestsPerBlock))
		return nil
	}
	if m.Tokens > 0 {
		p := d.take(8 * int(m.Tokens))
		if p == nil {
			return nil
		}
		m.Digests = make([]uint64, m.Tokens)
		for i := range m.Digests {
			m.Digests[i] = binary.BigEndian.Uint64(p[8*i:])
		}
	}
	if len(d.b) > MaxBlockBytes {
		d.fail(ErrBadLength, fmt.Sprintf("data of %d bytes, limit %d", len(d.b), MaxBlockBytes))
		return nil
	}
	if len(d.b) > 0 {
		m.Data = d.b[:len(d.b):len(d.b)]
		d.b = d.b[len(d.b):]
	}
	return m
}

// MaxHandshakePayloadBytes is the largest payload of a handshake message
// (HELLO, HELLO_ACK, AUTH, AUTH_ACK; HELLO_ACK with the longest engine id
// is the largest): all an unauthenticated peer ever needs to send.
const MaxHandshakePayloadBytes = 2 + 2 + MaxEngineIDBytes + 16 + 32 + 1

// MaxPayloadBytes is the largest payload a valid message of type t can
// have, with every list and byte string at its bound; 0 for a type this
// version does not define. A receiver that knows which types its peer
// may send bounds its frames by the largest of theirs.
func MaxPayloadBytes(t MsgType) int {
	switch t {
	case MsgHello:
		return 2 + 2 + MaxEngineIDBytes + 16
	case MsgHelloAck:
		return MaxHandshakePayloadBytes
	case MsgAuth:
		return 32
	case MsgAuthAck:
		return 1
	case MsgRenew:
		return 8 + 4 + leaseRefBytes*MaxLeasesPerRenew
	case MsgRenewAck:
		return 8 + 4 + renewResultBytes*MaxLeasesPerRenew
	case MsgRead:
		return 8 + 8 + 16 + 4 + 4*MaxIndexesPerRead
	case MsgBlock:
		return BlockPayloadBytes(MaxDigestsPerBlock, MaxBlockBytes)
	case MsgReadEnd:
		return 8 + 8 + 1
	case MsgRelease:
		return 8 + 16 + 1
	case MsgReleaseAck, MsgRevoked:
		return 8 + 1
	}
	return 0
}

// BlockPayloadBytes is the payload of a BLOCK of tokens filled slots and
// dataBytes KV bytes: a decode engine whose blocks hold at most that
// receives no larger BLOCK from an honest prefill engine.
func BlockPayloadBytes(tokens, dataBytes int) int {
	return blockFixedBytes + 8*tokens + dataBytes
}
