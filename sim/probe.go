package sim

import (
	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// Probes: raw peers that are not engines.

// Probe is a raw network endpoint that is not an engine: a stranger that
// dials engines and sends whatever it likes (unauthenticated peers, forged
// messages). It records what it receives. With Secret set it answers P's
// handshake as engine EngineID would (a peer that knows the secret).
type Probe struct {
	Name     transport.Addr
	EngineID string
	Secret   []byte
	Conn     transport.ConnID
	Up       bool // the dial succeeded and the connection is open
	Authed   bool // P accepted the handshake
	Closed   bool // the connection was closed or the dial failed
	Received []wire.Message
	nonce    [16]byte
}

// NewProbe registers a probe named name.
func (c *World) NewProbe(name string) *Probe {
	p := &Probe{Name: transport.Addr(name), EngineID: name}
	c.probes[p.Name] = p
	return p
}

// ClusterSecret is the secret engines share (for probes that must know it).
func (c *World) ClusterSecret() []byte { return c.secret }

// ProbeDial makes probe p connect to node to at instant t; with Secret set
// it then runs the handshake.
func (c *World) ProbeDial(t clock.Instant, p *Probe, to string) {
	c.At(t, func() { p.Conn = c.Net.Dial(c.Now, p.Name, transport.Addr(to)) })
}

// ProbeSend makes probe p send m at instant t.
func (c *World) ProbeSend(t clock.Instant, p *Probe, m wire.Message) {
	c.At(t, func() { c.Net.Send(c.Now, p.Conn, p.Name, m) })
}

func (p *Probe) deliver(c *World, ev transport.Event) {
	switch ev.Kind {
	case transport.Dialed:
		p.Up = true
		if p.Secret != nil {
			p.nonce = [16]byte{byte(ev.Conn), 0x70}
			c.Net.Send(c.Now, p.Conn, p.Name, &wire.Hello{Version: wire.Version, EngineID: p.EngineID, Nonce: p.nonce})
		}
	case transport.Received:
		p.Received = append(p.Received, ev.Msg)
		switch m := ev.Msg.(type) {
		case *wire.HelloAck:
			if p.Secret != nil && m.Status == wire.StatusOK {
				c.Net.Send(c.Now, p.Conn, p.Name, &wire.Auth{MAC: wire.ComputeMAC(p.Secret, wire.RoleD, m.Nonce, m.EngineID, p.EngineID)})
			}
		case *wire.AuthAck:
			p.Authed = m.Status == wire.StatusOK
		}
	case transport.Closed, transport.DialFailed:
		p.Up, p.Closed = false, true
	}
}
