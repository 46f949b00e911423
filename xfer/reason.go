package xfer

import (
	"fmt"

	"github.com/kvlease/kvlease/wire"
)

// FallbackReason says why a decode engine could not have a request's remote
// prefix, so that it recomputed it or failed the request (by its Fallback
// policy). Its String is the reason label of
// kvlease_remote_prefill_fallbacks_total. The zero value means "no
// fallback" (the prefix was pulled, or the request was dropped, or it had no
// remote prefix) and prints as "none".
type FallbackReason uint8

const (
	// FallbackLeaseGone: P answered that the lease is unknown, expired,
	// released or revoked (RENEW_ACK, REVOKED or READ_END).
	FallbackLeaseGone FallbackReason = iota + 1
	// FallbackUnreachable: P could not be dialled MaxReadAttempts times.
	FallbackUnreachable
	// FallbackExpired: the lease's deadline, as D last knew it, passed
	// before a read could pin it.
	FallbackExpired
	// FallbackUnauthenticated: P failed the cluster-secret handshake.
	FallbackUnauthenticated
	// FallbackEngineMismatch: the peer at the request's address is not the
	// engine that granted the lease (another engine id).
	FallbackEngineMismatch
	// FallbackTimeout: reads got no news within the read timeout, out of
	// attempts or lease.
	FallbackTimeout
	// FallbackDisconnected: connections carrying the read were lost, out of
	// attempts or lease.
	FallbackDisconnected
	// FallbackCorrupt: blocks kept failing their checksums, out of attempts
	// or lease.
	FallbackCorrupt
	// FallbackReadBusy: P kept answering READ with "busy" (too many reads
	// in flight), out of attempts or lease.
	FallbackReadBusy
	// FallbackReadInternal: P kept answering READ with an internal error,
	// out of attempts or lease.
	FallbackReadInternal
	// FallbackHandshakeTimeout: MaxReadAttempts connections to P's address
	// in a row got no handshake answer within HandshakeTimeout (a silent
	// listener, a stopped or hung P).
	FallbackHandshakeTimeout
	// FallbackHandshakeClosed: MaxReadAttempts connections to P's address
	// in a row ended during the handshake (not a kvlease prefill engine: an
	// HTTP port closes on a HELLO).
	FallbackHandshakeClosed
	// FallbackBadVersion: P speaks another protocol version.
	FallbackBadVersion
	// FallbackHandshakeRefused: P refused the session (busy, shutting
	// down).
	FallbackHandshakeRefused
	// FallbackInjected: a fault injected through the fault API told D to
	// give the remote prefix up (fault kind fallback).
	FallbackInjected
	// FallbackTampered: a frame from P failed its authentication (altered
	// or injected on the path), out of attempts or lease.
	FallbackTampered
	// FallbackQueueWait: the request waited in D's queue longer than
	// MaxQueueWait before a read could start; D released the lease.
	FallbackQueueWait
	numFallbackReasons
)

var fallbackReasonNames = [...]string{
	FallbackLeaseGone:        "lease_gone",
	FallbackUnreachable:      "unreachable",
	FallbackExpired:          "expired",
	FallbackUnauthenticated:  "unauthenticated",
	FallbackEngineMismatch:   "engine_mismatch",
	FallbackTimeout:          "timeout",
	FallbackDisconnected:     "disconnected",
	FallbackCorrupt:          "corrupt",
	FallbackReadBusy:         "read_busy",
	FallbackReadInternal:     "read_internal",
	FallbackHandshakeTimeout: "handshake_timeout",
	FallbackHandshakeClosed:  "handshake_closed",
	FallbackBadVersion:       "bad_version",
	FallbackHandshakeRefused: "handshake_refused",
	FallbackInjected:         "injected",
	FallbackTampered:         "tampered",
	FallbackQueueWait:        "queue_wait",
}

// Valid reports whether r is a defined reason (not zero).
func (r FallbackReason) Valid() bool { return r >= FallbackLeaseGone && r < numFallbackReasons }

func (r FallbackReason) String() string {
	if r.Valid() {
		return fallbackReasonNames[r]
	}
	if r == 0 {
		return "none"
	}
	return fmt.Sprintf("FallbackReason(%d)", uint8(r))
}

// FallbackReasons returns every defined FallbackReason, in order; the
// caller owns the slice.
func FallbackReasons() []FallbackReason {
	rs := make([]FallbackReason, 0, numFallbackReasons-1)
	for r := FallbackLeaseGone; r < numFallbackReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// FailureKind is a transfer failure a decode engine met, retried or not.
// Its String is the kind label of kvlease_transfer_failures_total.
type FailureKind uint8

const (
	// FailureTimeout: a read got no news within the read timeout.
	FailureTimeout FailureKind = iota + 1
	// FailureUnreachable: a dial to P failed.
	FailureUnreachable
	// FailureDisconnected: a connection to P was lost.
	FailureDisconnected
	// FailureLeaseGone: P answered that a lease is gone (RENEW_ACK or
	// READ_END).
	FailureLeaseGone
	// FailureBadBlock: a BLOCK did not match the read it claims to answer
	// (index, length); it was dropped.
	FailureBadBlock
	// FailureCorrupt: a block failed its checksum.
	FailureCorrupt
	// FailureReleaseDropped: a RELEASE notice could not be delivered before
	// its deadline (or the table of notices was full).
	FailureReleaseDropped
	// FailureReadBusy: P answered a READ with "busy".
	FailureReadBusy
	// FailureReadInternal: P answered a READ with an internal error.
	FailureReadInternal
	// FailureUnauthenticated: P failed the cluster-secret handshake.
	FailureUnauthenticated
	// FailureHandshakeTimeout: a connection to P got no handshake answer
	// within HandshakeTimeout.
	FailureHandshakeTimeout
	// FailureHandshakeClosed: a connection to P ended during the
	// handshake.
	FailureHandshakeClosed
	// FailureBadVersion: P speaks another protocol version.
	FailureBadVersion
	// FailureHandshakeRefused: P refused the session for another reason
	// (busy, shutting down).
	FailureHandshakeRefused
	// FailureEngineMismatch: the engine at a request's address is not the
	// one its kv_transfer_params named.
	FailureEngineMismatch
	// FailureTampered: a connection to P ended on a frame that failed its
	// authentication (altered or injected on the path).
	FailureTampered
	numFailureKinds
)

var failureKindNames = [...]string{
	FailureTimeout:          "timeout",
	FailureUnreachable:      "unreachable",
	FailureDisconnected:     "disconnected",
	FailureLeaseGone:        "lease_gone",
	FailureBadBlock:         "bad_block",
	FailureCorrupt:          "corrupt",
	FailureReleaseDropped:   "release_dropped",
	FailureReadBusy:         "read_busy",
	FailureReadInternal:     "read_internal",
	FailureUnauthenticated:  "unauthenticated",
	FailureHandshakeTimeout: "handshake_timeout",
	FailureHandshakeClosed:  "handshake_closed",
	FailureBadVersion:       "bad_version",
	FailureHandshakeRefused: "handshake_refused",
	FailureEngineMismatch:   "engine_mismatch",
	FailureTampered:         "tampered",
}

// Valid reports whether k is a defined kind (not zero).
func (k FailureKind) Valid() bool { return k >= FailureTimeout && k < numFailureKinds }

func (k FailureKind) String() string {
	if k.Valid() {
		return failureKindNames[k]
	}
	return fmt.Sprintf("FailureKind(%d)", uint8(k))
}

// FailureKinds returns every defined FailureKind, in order; the caller owns
// the slice.
func FailureKinds() []FailureKind {
	ks := make([]FailureKind, 0, numFailureKinds-1)
	for k := FailureTimeout; k < numFailureKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// ReleaseReasonsSent returns the reasons a Consumer sends in RELEASE, in
// wire order: the label values of kvlease_releases_sent_total. The other
// reasons are P's own (REVOKED, or ends P sees by itself). The caller owns
// the slice.
func ReleaseReasonsSent() []wire.Reason {
	return []wire.Reason{wire.ReasonReadDone, wire.ReasonRejected, wire.ReasonAborted, wire.ReasonFallback}
}

// sendsReason reports whether r is one of ReleaseReasonsSent.
func sendsReason(r wire.Reason) bool {
	switch r {
	case wire.ReasonReadDone, wire.ReasonRejected, wire.ReasonAborted, wire.ReasonFallback:
		return true
	}
	return false
}

// fallbackOf is the fallback reason of pulls that give up on a peer after
// failures of kind k reaching it (a dial or a handshake).
func fallbackOf(k FailureKind) FallbackReason {
	switch k {
	case FailureUnreachable:
		return FallbackUnreachable
	case FailureHandshakeTimeout:
		return FallbackHandshakeTimeout
	case FailureHandshakeClosed:
		return FallbackHandshakeClosed
	case FailureUnauthenticated:
		return FallbackUnauthenticated
	case FailureBadVersion:
		return FallbackBadVersion
	case FailureHandshakeRefused:
		return FallbackHandshakeRefused
	}
	panic(fmt.Sprintf("xfer: %v is not a failure to reach a peer", k))
}
