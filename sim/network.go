package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/transport/memnet"
	"github.com/kvlease/kvlease/wire"
)

// Driving the engines (their production loop) and their network.

// drive turns one node's loop — the production engine's, engine.Loop —
// until it asks for no more at this instant, and routes its outputs.
func (c *World) drive(n *Node) {
	if n.Crashed || n.halted() {
		return
	}
	for turns := 0; ; turns++ {
		c.feed(n)
		t := n.Loop.Turn(c.Now)
		if t.Moved {
			n.active = true
		}
		if p := n.Core.Producer(); p != nil && c.checking {
			// The sweep ran first in Step: nothing due by now may be left
			// (docs/protocol.md, "Expiry": the sweep ends every due lease).
			// It looks at every lease: with checkEvery, only at the
			// instants of the checks.
			if err := p.CheckDue(c.Now); err != nil {
				c.violate("%s: %v", n.Name, err)
			}
		}
		if d := n.Core.Consumer(); d != nil && c.checking {
			// Likewise no pull queued past the max queue wait (issue 31).
			if err := d.CheckWait(c.Now); err != nil {
				c.violate("%s: %v", n.Name, err)
			}
		}
		if t.Execute {
			c.startStep(n, t.Batch)
		}
		if b := t.Batch; b != nil {
			sc := n.Core.Config().Sched
			if len(b.Seqs) > sc.MaxNumSeqs || b.NumTokens() > sc.MaxNumBatchedTokens {
				c.violate("%s: batch of %d sequences, %d tokens over the budget (%d, %d)", n.Name,
					len(b.Seqs), b.NumTokens(), sc.MaxNumSeqs, sc.MaxNumBatchedTokens)
			}
		}
		n.fed = false
		c.outputs(n, t.Outputs)
		// An input handed over while the outputs were routed (Delivered)
		// is followed by a turn, as the production node's inbox wakes its
		// loop after every input (engine.Loop: a driver calls Turn
		// whenever something may have happened). Without it, a lease
		// released at once (undelivered) freed blocks that the waiting
		// queue never saw when nothing else was due.
		if (!t.Again && !n.fed) || n.Crashed || n.halted() {
			break
		}
		if turns == 1<<16 {
			panic(fmt.Sprintf("sim: %s turns without end at %v", n.Name, c.Now))
		}
	}
	if n.draining && n.Loop.Drained() {
		c.exit(n)
	}
}

// send sends m from node n on connection id through the message faults.
// It reports false when the message is certainly not sent (the
// connection is not open, or it broke on this message).
func (c *World) send(n *Node, id transport.ConnID, m wire.Message) bool {
	if c.fleet != nil {
		c.fleet.heartbeat(m)
	}
	f := c.MsgFaults
	if f.DropProb > 0 && c.faultRng.Float64() < f.DropProb {
		c.reset(n, id)
		return false
	}
	if b, ok := m.(*wire.Block); ok && f.CorruptProb > 0 && c.faultRng.Float64() < f.CorruptProb {
		m = corrupt(b, c.faultRng)
	}
	k := heldKey{id, n.Name}
	if h, ok := c.held[k]; ok {
		delete(c.held, k)
		ok := c.Net.Send(c.Now, id, n.Name, m) // m overtakes h
		c.Net.Send(c.Now, id, n.Name, h)
		return ok
	}
	if f.ReorderProb > 0 && c.faultRng.Float64() < f.ReorderProb {
		c.held[k] = m // sent after the next message, or at the end of the instant
		return true
	}
	ok := c.Net.Send(c.Now, id, n.Name, m)
	if ok && f.DupProb > 0 && c.faultRng.Float64() < f.DupProb {
		c.Net.Send(c.Now, id, n.Name, m)
	}
	return ok
}

// corrupt returns a copy of b with one bit of its content flipped: a KV
// byte, or (digest-only pools) a slot digest.
func corrupt(b *wire.Block, rng *rand.Rand) *wire.Block {
	bad := *b
	if len(b.Data) > 0 {
		bad.Data = append([]byte(nil), b.Data...)
		bad.Data[rng.IntN(len(bad.Data))] ^= 1 << rng.IntN(8)
	} else if len(b.Digests) > 0 {
		bad.Digests = append([]uint64(nil), b.Digests...)
		bad.Digests[rng.IntN(len(bad.Digests))] ^= 1 << rng.IntN(64)
	}
	return &bad
}

// reset breaks connection id as a lost message would: the peer gets what
// was sent before, then Closed; node n learns of it after
// Spec.Network.CloseDetectDelay.
func (c *World) reset(n *Node, id transport.ConnID) {
	delete(c.held, heldKey{id, n.Name})
	for k, v := range c.conns {
		if v == id {
			c.lastFault[pairKey(k[0], k[1])] = c.Now
		}
	}
	c.Net.Close(c.Now, id, n.Name)
	c.forgetConn(id)
	core := n.Core
	c.mix(traceReset, uint64(id))
	p := n.port
	c.After(c.Spec.Network.CloseDetectDelay, func() {
		c.call(n, nil, func() {
			if n.Core == core {
				p.push(transport.Event{Kind: transport.Closed, Conn: id, Local: n.Name, Reason: "connection reset"})
			}
		})
	})
}

// flush sends the message held back on connection id by node from.
func (c *World) flush(id transport.ConnID, from transport.Addr) {
	k := heldKey{id, from}
	if h, ok := c.held[k]; ok {
		delete(c.held, k)
		c.Net.Send(c.Now, id, from, h)
	}
}

// flushAll sends every held message, in connection order.
func (c *World) flushAll() {
	if len(c.held) == 0 {
		return
	}
	keys := make([]heldKey, 0, len(c.held))
	for k := range c.held {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].conn != keys[j].conn {
			return keys[i].conn < keys[j].conn
		}
		return keys[i].from < keys[j].from
	})
	for _, k := range keys {
		c.flush(k.conn, k.from)
	}
}

// dropHeld forgets the messages held back for a node that went down.
func (c *World) dropHeld(a transport.Addr) {
	for k := range c.held {
		if k.from == a {
			delete(c.held, k)
		}
	}
}

func (c *World) deliver(d memnet.Delivery) {
	ev := d.Event
	if p := c.probes[d.To]; p != nil {
		p.deliver(c, ev)
		return
	}
	n := c.byName[d.To]
	if n == nil || n.Crashed {
		return
	}
	if ev.Kind == transport.Received && c.Intercept != nil {
		m := c.Intercept(c, ev.Remote, ev.Local, ev.Msg)
		if m == nil {
			return
		}
		ev.Msg = m
	}
	c.mixEvent(ev)
	if c.fleet != nil && n.Role == engine.RolePrefill {
		if m, ok := ev.Msg.(*wire.Renew); ok {
			c.fleet.renewals += uint64(len(m.Leases))
		}
	}
	if n.Paused && !n.Hung {
		// The node's transport runs while its loop is busy: the message
		// reaches the port now, stamped now, and waits there.
		n.touch()
		c.handle(n, ev)
		return
	}
	c.call(n, nil, func() { c.handle(n, ev) })
}

// startStep runs the step of batch b that node n's loop handed over
// (Turn.Execute) as in-flight work: it completes at the batch's modelled
// duration (times Spec.PrefillStepScale on a prefill engine), when the
// executor writes its KV and samples its tokens and the loop gets the
// result (StepDone). Meanwhile the loop keeps turning: what it does to the
// step's blocks shows in the KV the step writes at its end. A step of a
// crashed life ends with it; a hung or busy loop gets the result when it
// resumes.
func (c *World) startStep(n *Node, b *model.Batch) {
	d := c.Spec.Profile.Duration(b)
	if s := c.Spec.PrefillStepScale; s > 0 && n.Role == engine.RolePrefill {
		d = time.Duration(float64(d) * s)
	}
	core := n.Core
	c.After(d, func() {
		if n.Crashed || n.Core != core {
			return
		}
		c.call(n, nil, func() {
			n.exec.Execute(b, &n.res)
			n.Loop.StepDone(c.Now, &n.res)
		})
	})
}

// feed hands the events waiting in node n's port to its loop one at a
// time (Loop.Handle, what the loop's Turn does with each event it polls),
// checking the expiry invariants around every message (invariants.go).
func (c *World) feed(n *Node) {
	evs := n.port.inbox
	if len(evs) == 0 {
		return
	}
	n.port.inbox = n.port.spare[:0]
	for i := range evs {
		ev := &evs[i]
		if ev.Kind != transport.Received {
			n.Loop.Handle(c.Now, *ev)
			continue
		}
		at := ev.At
		if at == 0 || at > c.Now {
			at = c.Now
		}
		named := c.leasesNamed(n, ev.Msg)
		n.Loop.Handle(c.Now, *ev)
		c.checkExpiry(n, ev.Conn, ev.Msg, named, at)
		c.noteClaims(n, named, at)
	}
	clear(evs)
	n.port.spare = evs[:0]
}

// handle gives a network event to the node's port, for its next turn.
func (c *World) handle(n *Node, ev transport.Event) {
	switch ev.Kind {
	case transport.Dialed, transport.Accepted:
		c.conns[[2]transport.Addr{ev.Local, ev.Remote}] = ev.Conn
	case transport.Received:
		ev.At = c.Now // when it reached the node's edge
		if c.OnMessage != nil {
			c.OnMessage(c, ev.Remote, ev.Local, ev.Msg)
		}
	case transport.Closed:
		if c.conns[[2]transport.Addr{ev.Local, ev.Remote}] == ev.Conn {
			delete(c.conns, [2]transport.Addr{ev.Local, ev.Remote})
		}
	}
	n.port.push(ev)
}

func (c *World) forgetConn(id transport.ConnID) {
	for k, v := range c.conns {
		if v == id {
			delete(c.conns, k)
		}
	}
}
