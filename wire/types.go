package wire

import (
	"crypto/subtle"
	"encoding/hex"
	"fmt"
)

// LeaseID names a lease granted by one prefill engine. Ids are unique per P
// process; they are not secrets (the Token is).
type LeaseID uint64

// Hex is id as kv_transfer_params' lease_id carries it: 16 lowercase hex
// digits.
func (id LeaseID) Hex() string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := range b {
		b[15-i] = digits[(id>>(4*i))&0xF]
	}
	return string(b[:])
}

// Token is a lease's 128-bit bearer secret. Only the HTTP response that
// carries the lease holds it; a READ, RENEW or RELEASE must present it.
//
// String reveals the secret: do not log tokens.
type Token [16]byte

// String returns t as 32 lowercase hex characters, the form used in
// kv_transfer_params.lease_token.
func (t Token) String() string { return hex.EncodeToString(t[:]) }

// IsZero reports whether t is the all-zero token, which is never granted.
func (t Token) IsZero() bool { return t == Token{} }

// Equal compares t and u in constant time, so a peer cannot learn a token
// byte by byte from response timing.
func (t Token) Equal(u Token) bool { return subtle.ConstantTimeCompare(t[:], u[:]) == 1 }

// ParseToken parses exactly 32 hex characters (either case) into a Token.
// Anything else is an error wrapping ErrBadToken.
func ParseToken(s string) (Token, error) {
	var t Token
	if len(s) != 2*len(t) {
		return Token{}, fmt.Errorf("%w: want %d hex characters, got %d", ErrBadToken, 2*len(t), len(s))
	}
	if _, err := hex.Decode(t[:], []byte(s)); err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	return t, nil
}

// MarshalText encodes t as String does, so a Token is a hex string in JSON.
func (t Token) MarshalText() ([]byte, error) {
	b := make([]byte, 2*len(t))
	hex.Encode(b, t[:])
	return b, nil
}

// UnmarshalText parses text as ParseToken does.
func (t *Token) UnmarshalText(text []byte) error {
	u, err := ParseToken(string(text))
	if err != nil {
		return err
	}
	*t = u
	return nil
}

// Status is the outcome a P engine reports for a request of a D engine
// (HELLO_ACK, AUTH_ACK, RENEW_ACK, READ_END, RELEASE_ACK). The zero value is
// StatusOK. Decode rejects values this version does not define (ErrBadValue).
type Status uint8

const (
	// StatusOK: the request succeeded.
	StatusOK Status = iota
	// StatusUnknownLease: P has no record of the lease id (never granted,
	// forgotten long ago, or granted by an earlier incarnation of P).
	StatusUnknownLease
	// StatusExpired: the lease's due instant (its deadline, or the grace
	// after its session was lost) was at or before the request's arrival;
	// its blocks are gone, or go when reads already in flight end. As the
	// answer to a RELEASE: nothing is left to release, and D treats it as
	// success.
	StatusExpired
	// StatusReleased: the lease was released (by a RELEASE of any reason);
	// a repeated RELEASE gets this status, which D treats as success.
	StatusReleased
	// StatusRevoked: P dropped the lease on its own (abort after finish,
	// undelivered response, shutdown); its blocks are gone.
	StatusRevoked
	// StatusBadToken: the token does not match the lease. The lease is
	// untouched.
	StatusBadToken
	// StatusUnauthenticated: the session has not completed the HMAC
	// handshake, or its proof was wrong (AUTH_ACK, HELLO_ACK).
	StatusUnauthenticated
	// StatusBusy: P refuses the request for now (too many reads in flight
	// or sessions); D may retry within the lease.
	StatusBusy
	// StatusBadRequest: the request is malformed at the protocol level
	// (for example a message that is not valid in the session's state).
	StatusBadRequest
	// StatusBadChecksum: a block's content does not match its checksum.
	// P reports it when its own check of the data it is about to send
	// fails; D never trusts such data.
	StatusBadChecksum
	// StatusInternal: P failed for a reason of its own; D falls back.
	StatusInternal
	// StatusShuttingDown: P is draining and grants or serves nothing new.
	StatusShuttingDown
	// StatusBadVersion: HELLO_ACK's answer to a HELLO whose protocol
	// version P does not speak; HELLO_ACK.Version carries P's version.
	StatusBadVersion
	// StatusBadIndex: a READ named a block index outside the lease's block
	// list. The lease is untouched.
	StatusBadIndex
	numStatuses
)

var statusNames = [...]string{
	StatusOK:              "ok",
	StatusUnknownLease:    "unknown_lease",
	StatusExpired:         "expired",
	StatusReleased:        "released",
	StatusRevoked:         "revoked",
	StatusBadToken:        "bad_token",
	StatusUnauthenticated: "unauthenticated",
	StatusBusy:            "busy",
	StatusBadRequest:      "bad_request",
	StatusBadChecksum:     "bad_checksum",
	StatusInternal:        "internal",
	StatusShuttingDown:    "shutting_down",
	StatusBadVersion:      "bad_version",
	StatusBadIndex:        "bad_index",
}

// Valid reports whether s is a status this version defines.
func (s Status) Valid() bool { return s < numStatuses }

func (s Status) String() string {
	if s.Valid() {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Reason says why a lease ended: sent by D in RELEASE, by P in REVOKED, and
// the label of kvlease_leases_released_total. The zero value is not a reason:
// encoding it panics and decoding it fails with ErrBadValue, so an unset
// field cannot travel.
type Reason uint8

const (
	// ReasonReadDone: D read the blocks it needed (RELEASE).
	ReasonReadDone Reason = iota + 1
	// ReasonRejected: D refused the request before admitting it (RELEASE).
	ReasonRejected
	// ReasonAborted: the client aborted the request (RELEASE from D, or
	// REVOKED when P learns of the abort itself).
	ReasonAborted
	// ReasonUndelivered: the HTTP response carrying the token never reached
	// the client, so nobody can present it (P-side only).
	ReasonUndelivered
	// ReasonPeerLost: the D session the lease was bound to went away and
	// did not come back within the grace period (REVOKED).
	ReasonPeerLost
	// ReasonExpired: the lease's deadline passed (REVOKED).
	ReasonExpired
	// ReasonFallback: D gave up on pulling (P unreachable, read failed) and
	// recomputes or fails the request (RELEASE).
	ReasonFallback
	// ReasonShutdown: P is shutting down and ends the leases it still holds
	// at its drain deadline (REVOKED).
	//
	// There is no "restart" reason: leases do not survive a restart of P,
	// and a restarted P knows nothing to revoke, so D learns it from the
	// answer to its next RENEW or READ ("unknown lease") and falls back.
	// Value 9 was ReasonRestart, which nothing sent; it is not reused.
	ReasonShutdown
	reasonRetired9 // was ReasonRestart: not a reason (Valid is false)
	// ReasonUnclaimed: no decode engine claimed the lease (renewed, read or
	// released it with its token on an authenticated session) within the
	// claim timeout, so its request never reached a decoder: a proxy
	// dropped the decode leg (P-side only; an unclaimed lease has no
	// session to send REVOKED to).
	ReasonUnclaimed
	numReasons
)

var reasonNames = [...]string{
	ReasonReadDone:    "read_done",
	ReasonRejected:    "rejected",
	ReasonAborted:     "aborted",
	ReasonUndelivered: "undelivered",
	ReasonPeerLost:    "peer_lost",
	ReasonExpired:     "expired",
	ReasonFallback:    "fallback",
	ReasonShutdown:    "shutdown",
	ReasonUnclaimed:   "unclaimed",
}

// Valid reports whether r is a reason this version defines (not zero).
func (r Reason) Valid() bool {
	return r >= ReasonReadDone && r < numReasons && r != reasonRetired9
}

// Reasons returns every defined Reason, in wire order: the label values of
// kvlease_leases_released_total. The caller owns the slice.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons)
	for r := ReasonReadDone; r < numReasons; r++ {
		if r.Valid() {
			rs = append(rs, r)
		}
	}
	return rs
}

func (r Reason) String() string {
	if r.Valid() {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// MsgType is a frame's type byte. Zero is not a type.
type MsgType uint8

const (
	MsgHello      MsgType = iota + 1 // D→P: opens a session
	MsgHelloAck                      // P→D: answers HELLO, proves P
	MsgAuth                          // D→P: proves D
	MsgAuthAck                       // P→D: the session is authenticated, or not
	MsgRenew                         // D→P: batched lease heartbeat
	MsgRenewAck                      // P→D: per-lease outcome of a RENEW
	MsgRead                          // D→P: pull blocks of a lease
	MsgBlock                         // P→D: one block of a READ
	MsgReadEnd                       // P→D: a READ is over
	MsgRelease                       // D→P: drop a lease
	MsgReleaseAck                    // P→D: outcome of a RELEASE
	MsgRevoked                       // P→D: P dropped a lease this session renewed
	numMsgTypes
)

var msgTypeNames = [...]string{
	MsgHello:      "HELLO",
	MsgHelloAck:   "HELLO_ACK",
	MsgAuth:       "AUTH",
	MsgAuthAck:    "AUTH_ACK",
	MsgRenew:      "RENEW",
	MsgRenewAck:   "RENEW_ACK",
	MsgRead:       "READ",
	MsgBlock:      "BLOCK",
	MsgReadEnd:    "READ_END",
	MsgRelease:    "RELEASE",
	MsgReleaseAck: "RELEASE_ACK",
	MsgRevoked:    "REVOKED",
}

// Valid reports whether t is a message type this version defines.
func (t MsgType) Valid() bool { return t >= MsgHello && t < numMsgTypes }

func (t MsgType) String() string {
	if t.Valid() {
		return msgTypeNames[t]
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}
