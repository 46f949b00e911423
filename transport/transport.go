package transport

import (
	"fmt"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// Addr names a node: its transfer address (host:port) under transport/tcp, any
// unique name under memnet.
type Addr string

// ConnID names one connection within one transport instance. Ids are never
// reused by that instance; zero is never a connection.
type ConnID uint64

// EventKind says what happened to a connection. The zero value is not a kind.
type EventKind uint8

const (
	// Dialed: the dialer's connection is up; it may send.
	Dialed EventKind = iota + 1
	// Accepted: a listener got a new connection; it may send.
	Accepted
	// DialFailed: the dial did not produce a connection (nobody listening,
	// peer unreachable, local limit). The ConnID is dead.
	DialFailed
	// Received: a message arrived (Event.Msg).
	Received
	// Closed: the connection is gone (Event.Reason says why). The ConnID is
	// dead.
	Closed
	// Sent: a block frame queued with a Tag (an engine.Port's SendBlock)
	// left the transport's hands: written when Reason is empty, lost
	// otherwise. Until then the transport may still read the block's
	// memory. It comes before its connection's Closed.
	Sent
	numEventKinds
)

var eventKindNames = [...]string{
	Dialed:     "dialed",
	Accepted:   "accepted",
	DialFailed: "dial_failed",
	Received:   "received",
	Closed:     "closed",
	Sent:       "sent",
}

// Valid reports whether k is a kind this package defines.
func (k EventKind) Valid() bool { return k >= Dialed && k < numEventKinds }

func (k EventKind) String() string {
	if k.Valid() {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one thing that happened to one end of a connection, reported to
// the node at Local.
//
// Msg is set only for Received. A received message is read-only: a transport
// may deliver the same value twice (memnet's duplication fault), and the
// sender has given it up. Reason is set only for DialFailed, Closed and a
// failed Sent; Tag only for Sent. At, set only for Received, is when the
// message reached the engine's edge (the transport's reader handed it
// over), on the owner's clock: the engine judges a lease's timing on it,
// not on the instant its loop got round to the message (zero: unknown, the
// instant the loop handles it).
type Event struct {
	Kind   EventKind
	Conn   ConnID
	Local  Addr // the node the event is for
	Remote Addr // the other end of the connection
	Msg    wire.Message
	Reason string
	// Tampered (Closed): the connection ended because a frame failed its
	// authentication, altered or injected by someone on the path: a
	// protocol core may treat the peer's data as untrustworthy, not as
	// merely lost.
	Tampered bool
	Tag      uint64
	At       clock.Instant
}

// String formats e for logs and test failures.
func (e Event) String() string {
	s := fmt.Sprintf("%s conn=%d %s<-%s", e.Kind, e.Conn, e.Local, e.Remote)
	if e.Msg != nil {
		s += " msg=" + e.Msg.Type().String()
	}
	if e.Reason != "" {
		s += " reason=" + fmt.Sprintf("%q", e.Reason)
	}
	return s
}
