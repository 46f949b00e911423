package sim

import (
	"sort"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// Faults: crashes, restarts, hangs, partitions, drains, injected messages.

// Crash kills a node at instant t: its volatile state is lost and its peers
// see their connections close.
func (c *World) Crash(t clock.Instant, name string) {
	c.At(t, func() { c.crash(c.byName[transport.Addr(name)]) })
}

func (c *World) crash(n *Node) {
	if n.Crashed {
		return
	}
	c.mix(traceCrash, hashString(string(n.Name)))
	n.lastFault = c.Now
	n.pastRead, n.pastUnread = n.BlockSeconds()
	n.pastFreedReads = n.FreedReads()
	n.pastSpill = n.SpillCounts()
	n.Crashed = true
	n.Hung, n.Paused = false, false
	c.setWake(n, n.wake)
	for _, pc := range n.backlog {
		if pc.req != nil {
			c.fail(pc.req, string(n.Name)+" crashed", 502)
		}
	}
	n.backlog = nil
	n.draining = false
	c.dropHeld(n.Name)
	c.Net.Crash(c.Now, n.Name)
	c.forgetConnsOf(n.Name)
	if c.fleet != nil && n.Role == engine.RolePrefill {
		c.fleet.crashed(c.Now, n)
		for k := range c.byLease {
			if k.node == n.Name {
				delete(c.byLease, k)
			}
		}
	}
	for _, id := range sortedNames(c.Requests) {
		r := c.Requests[id]
		if r.Done {
			continue
		}
		if (r.atD && r.D == n) || (!r.atD && r.P == n && !r.Local && !r.responded) {
			c.fail(r, string(n.Name)+" crashed", 502)
		}
	}
}

func (c *World) forgetConnsOf(a transport.Addr) {
	for k := range c.conns {
		if k[0] == a || k[1] == a {
			delete(c.conns, k)
		}
	}
}

// Restart brings a crashed (or exited) node back at instant t with empty
// state and the same engine id.
func (c *World) Restart(t clock.Instant, name string) {
	c.At(t, func() {
		n := c.byName[transport.Addr(name)]
		if !n.Crashed {
			return
		}
		c.mix(traceRestart, hashString(name))
		n.lastFault = c.Now
		c.Net.Restart(n.Name)
		n.Crashed = false
		n.Exited = false
		n.Restarts++
		c.boot(n)
	})
}

// Hang stops node name from stepping over [t, t+d): its connections stay
// open, and everything that reaches it (messages, HTTP calls, its own
// streams) waits until it resumes, in order.
func (c *World) Hang(t clock.Instant, name string, d time.Duration) {
	n := c.byName[transport.Addr(name)]
	c.At(t, func() {
		if n.Crashed || n.Hung {
			return
		}
		c.mix(traceHang, hashString(name))
		n.Hung = true
		c.setWake(n, n.wake)
		n.lastFault = c.Now
		n.hangGen++
		gen := n.hangGen
		c.After(d, func() {
			if !n.Hung || n.hangGen != gen {
				return
			}
			n.Hung = false
			c.setWake(n, n.wake)
			if n.poke {
				c.poked(n) // poked while hung
			}
			n.lastFault = c.Now
			c.mix(traceResume, hashString(name))
			if n.Paused {
				return // the pause's end runs the backlog
			}
			for len(n.backlog) > 0 && !n.halted() && !n.Crashed {
				pc := n.backlog[0]
				n.backlog = n.backlog[1:]
				n.touch()
				pc.fn()
			}
		})
	})
}

// Pause makes node name's loop busy over [t, t+d): a long turn, or its
// process's goroutines held up (on an engine before issue 29, a whole
// forward pass on the loop's goroutine). Its transport runs meanwhile:
// messages reach its port, stamped with their arrival, and its reads'
// frames keep leaving; everything else that reaches it (HTTP calls, step
// and offload completions) waits in its backlog. When it resumes the loop
// handles the port's messages first, in order, then the backlog. A pause
// is not a fault of a prefill engine (a RENEW that reached it on time is
// on time: its leases must not expire because it was busy); on a decode
// engine it is (its heartbeats leave late).
func (c *World) Pause(t clock.Instant, name string, d time.Duration) {
	n := c.byName[transport.Addr(name)]
	c.At(t, func() {
		if n.Crashed || n.Paused {
			return
		}
		c.mix(tracePause, hashString(name))
		n.Paused = true
		n.lastPause = c.Now
		c.setWake(n, n.wake)
		if n.Role == engine.RoleDecode {
			n.lastFault = c.Now
		}
		n.pauseGen++
		gen := n.pauseGen
		c.After(d, func() {
			if !n.Paused || n.pauseGen != gen {
				return
			}
			n.Paused = false
			n.lastPause = c.Now
			c.setWake(n, n.wake)
			if n.poke {
				c.poked(n) // poked while paused
			}
			if n.Role == engine.RoleDecode {
				n.lastFault = c.Now
			}
			c.mix(traceUnpause, hashString(name))
			if n.Hung || n.Crashed {
				return // the hang's end runs the backlog
			}
			n.touch()
			c.feed(n)
			for len(n.backlog) > 0 && !n.halted() && !n.Crashed {
				pc := n.backlog[0]
				n.backlog = n.backlog[1:]
				n.touch()
				pc.fn()
			}
		})
	})
}

// halted reports whether n's loop does not turn now: hung, or busy
// (Paused).
func (n *Node) halted() bool { return n.Hung || n.Paused }

// Partition cuts a from b over [t, t+d). Overlapping partitions of the
// same pair nest: the pair heals when the last one ends.
func (c *World) Partition(t clock.Instant, a, b string, d time.Duration) {
	k := pairKey(transport.Addr(a), transport.Addr(b))
	c.At(t, func() {
		c.mix(tracePartition, hashString(a), hashString(b))
		c.lastFault[k] = c.Now
		if c.parts[k]++; c.parts[k] == 1 {
			c.Net.Partition(c.Now, k[0], k[1])
		}
	})
	c.At(t.Add(d), func() {
		c.lastFault[k] = c.Now
		if c.parts[k]--; c.parts[k] == 0 {
			delete(c.parts, k)
			c.Net.Heal(c.Now, k[0], k[1])
		}
	})
}

// Drain starts a graceful shutdown of node name at instant t (SIGTERM):
// it refuses new requests, serves its outstanding leases until they are
// read, released or expired, at most until t+grace (then they end with
// reason shutdown), and exits once it has nothing left (Node.Exited).
func (c *World) Drain(t clock.Instant, name string, grace time.Duration) {
	n := c.byName[transport.Addr(name)]
	c.At(t, func() {
		c.call(n, nil, func() {
			c.mix(traceDrain, hashString(name))
			n.Loop.DrainBy(c.Now.Add(grace))
			n.draining = true
		})
	})
}

// exit stops a drained node cleanly: it closes its connections and stops
// listening.
func (c *World) exit(n *Node) {
	c.mix(traceExit, hashString(string(n.Name)))
	c.Exits++
	// The production node's exit: the loop's graceful shutdown closes the
	// connections it knows after their last frames (a drained engine has
	// no read left to stream, so none waits); the transport then goes
	// down with whatever else it had.
	c.outputs(n, n.Loop.Shutdown(c.Now, true))
	n.Loop.Closed(c.Now)
	keys := make([][2]transport.Addr, 0)
	for k := range c.conns {
		if k[0] == n.Name {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][1] < keys[j][1] })
	for _, k := range keys {
		c.Net.Close(c.Now, c.conns[k], n.Name)
		delete(c.conns, k)
	}
	c.Net.Unlisten(n.Name)
	n.Crashed, n.Exited, n.draining = true, true, false
	c.setWake(n, n.wake)
}

// Inject sends m at instant t from node from to node to on their live
// connection (as if from's edge had sent it: a duplicate, a late replay or
// a forged message). It reports nothing: with no live connection the
// message is not sent.
func (c *World) Inject(t clock.Instant, from, to string, m wire.Message) {
	c.At(t, func() {
		if id, ok := c.conns[[2]transport.Addr{transport.Addr(from), transport.Addr(to)}]; ok {
			c.Net.Send(c.Now, id, transport.Addr(from), m)
		}
	})
}

// Conn returns the live connection from node from to node to, as from
// knows it.
func (c *World) Conn(from, to string) (transport.ConnID, bool) {
	id, ok := c.conns[[2]transport.Addr{transport.Addr(from), transport.Addr(to)}]
	return id, ok
}
