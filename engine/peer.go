package engine

import (
	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// The transfer inputs: the transport's events for this engine's sessions,
// fed by its Loop (Loop.Handle).

// PeerAccepted registers an inbound transfer connection (P side).
func (c *Core) PeerAccepted(now clock.Instant, s xfer.SessionID) {
	if c.producer != nil {
		c.producer.Connected(now, s)
	}
}

// PeerDialed reports that a connection this core asked for is up (D side).
func (c *Core) PeerDialed(now clock.Instant, addr string, s xfer.SessionID) {
	if c.consumer != nil {
		c.consumer.Dialed(now, addr, s)
	}
}

// PeerDialFailed reports that a connection could not be opened (D side).
func (c *Core) PeerDialFailed(now clock.Instant, addr string) {
	if c.consumer != nil {
		c.consumer.DialFailed(now, addr)
	}
}

// PeerClosed reports that a transfer connection is gone.
func (c *Core) PeerClosed(now clock.Instant, s xfer.SessionID) { c.peerClosed(now, s, false) }

// PeerTampered reports that a transfer connection ended on a frame that
// failed its authentication (transport.Event.Tampered).
func (c *Core) PeerTampered(now clock.Instant, s xfer.SessionID) { c.peerClosed(now, s, true) }

func (c *Core) peerClosed(now clock.Instant, s xfer.SessionID, tampered bool) {
	if c.consumer != nil && c.consumer.OwnsSession(s) {
		if tampered {
			c.consumer.Tampered(now, s)
		} else {
			c.consumer.Disconnected(now, s)
		}
		c.drainConsumer(now)
		return
	}
	if c.producer != nil {
		c.producer.Disconnected(now, s)
	}
}

// PeerMessage delivers a transfer message received on session s.
func (c *Core) PeerMessage(now clock.Instant, s xfer.SessionID, m wire.Message) {
	c.PeerMessageArrived(now, now, s, m)
}

// PeerMessageArrived delivers a transfer message received on session s
// that reached the engine's edge at arrived (transport.Event.At): P judges
// its leases' timing on that instant (xfer.Producer.HandleArrived), so a
// RENEW that arrived on time is on time however late the loop handles it.
func (c *Core) PeerMessageArrived(now, arrived clock.Instant, s xfer.SessionID, m wire.Message) {
	if c.consumer != nil && c.consumer.OwnsSession(s) {
		c.consumer.Handle(now, s, m)
		c.drainConsumer(now)
		return
	}
	if c.producer != nil {
		c.producer.HandleArrived(now, arrived, s, m)
	}
}

// ReadFinished reports that the edge finished streaming a read (P side).
func (c *Core) ReadFinished(now clock.Instant, s xfer.SessionID, readID uint64, ok bool) {
	if c.producer != nil {
		c.producer.ReadFinished(now, s, readID, ok)
	}
}
