package memnet

import (
	"fmt"
	"time"
)

// Default limits, used when the corresponding Conditions field is zero.
const (
	// DefaultMaxQueuedPerConn bounds the messages queued towards one end of
	// one connection (in flight or held by a partition), like a socket's
	// send buffer.
	DefaultMaxQueuedPerConn = 1 << 16
	// DefaultMaxConns bounds the live connections of one Net.
	DefaultMaxConns = 1 << 16
)

// Conditions configure the simulated network: latency, the random faults
// applied to each message, the delays after which ends learn of failures,
// and the network's limits. The zero value is a perfect network: every
// event arrives at the instant it was caused, nothing is lost, duplicated or
// reordered, and a partition never times out.
//
// DupProb and ReorderProb deliberately break the TCP contract of package
// transport (each message once, in send order): they exist to test that the
// protocol cores are idempotent and do not depend on order where the design
// says they must not. Leave them zero to simulate TCP.
type Conditions struct {
	// MinDelay and MaxDelay bound the one-way latency of each message and
	// handshake packet, drawn uniformly in [MinDelay, MaxDelay]. Without
	// ReorderProb a message is never delivered before an earlier one on the
	// same connection and direction, whatever latencies are drawn (a TCP
	// stream is in order).
	MinDelay, MaxDelay time.Duration

	// DropProb is the probability that a message is lost. As TCP would, the
	// connection then breaks: nothing sent after the lost message in that
	// direction arrives, and both ends get Closed (ReasonMessageLost) after
	// CloseDetectDelay.
	DropProb float64

	// DupProb is the probability that a message is delivered twice (the
	// same value both times, the copy with its own latency, after the
	// original).
	DupProb float64

	// ReorderProb is the probability that a message overtakes the latest
	// earlier message still queued on the same connection and direction
	// (it takes that message's delivery slot; the earlier message takes the
	// new one's). When nothing is queued there is nothing to overtake and
	// nothing happens. Stats.Reordered counts actual overtakes.
	ReorderProb float64

	// CloseDetectDelay is how long a live end takes to learn that its peer
	// crashed or that a message was lost (retransmission timeout), and how
	// long a dial to a crashed or partitioned node takes to fail.
	CloseDetectDelay time.Duration

	// PartitionTimeout is how long a partition may hold a connection's
	// traffic before both ends get Closed (ReasonPartitionTimeout), like a
	// TCP keepalive or user timeout. Zero or less: never.
	PartitionTimeout time.Duration

	// MaxQueuedPerConn bounds the messages queued towards one end of one
	// connection (zero: DefaultMaxQueuedPerConn). A Send beyond it is
	// refused and breaks the connection (ReasonQueueOverflow).
	MaxQueuedPerConn int

	// MaxConns bounds the live connections (zero: DefaultMaxConns). A Dial
	// beyond it fails (ReasonTooManyConns).
	MaxConns int
}

// Validate reports the first field of f that makes no sense, naming it.
func (f Conditions) Validate() error {
	switch {
	case f.MinDelay < 0:
		return fmt.Errorf("memnet: Conditions.MinDelay %v is negative", f.MinDelay)
	case f.MaxDelay < f.MinDelay:
		return fmt.Errorf("memnet: Conditions.MaxDelay %v is below MinDelay %v", f.MaxDelay, f.MinDelay)
	case f.CloseDetectDelay < 0:
		return fmt.Errorf("memnet: Conditions.CloseDetectDelay %v is negative", f.CloseDetectDelay)
	case f.MaxQueuedPerConn < 0:
		return fmt.Errorf("memnet: Conditions.MaxQueuedPerConn %d is negative", f.MaxQueuedPerConn)
	case f.MaxConns < 0:
		return fmt.Errorf("memnet: Conditions.MaxConns %d is negative", f.MaxConns)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"DropProb", f.DropProb}, {"DupProb", f.DupProb}, {"ReorderProb", f.ReorderProb}} {
		if !(p.v >= 0 && p.v <= 1) { // also catches NaN
			return fmt.Errorf("memnet: Conditions.%s %v is outside [0, 1]", p.name, p.v)
		}
	}
	return nil
}
