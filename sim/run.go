package sim

import (
	"fmt"
	"time"

	"github.com/kvlease/kvlease/clock"
)

// The event queue and the run loop: scheduled events, instants, checks.

type event struct {
	at  clock.Instant
	seq uint64
	fn  func()
}

// evHeap is a binary min-heap of events by (at, seq), typed so that a push
// boxes nothing (container/heap's interface would allocate per event).
// seq is unique, so the order of pops is fully determined.
type evHeap []event

func (h evHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h *evHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *evHeap) pop() event {
	q := *h
	e := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = event{} // drop the closure
	q = q[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return e
}

// At runs fn at instant t (at once if t is not after Now, in order).
func (c *World) At(t clock.Instant, fn func()) {
	c.evSeq++
	c.events.push(event{at: clock.Max(t, c.Now), seq: c.evSeq, fn: fn})
}

// After runs fn d after Now.
func (c *World) After(d time.Duration, fn func()) { c.At(c.Now.Add(d), fn) }

// call runs fn on node n now, later (n is hung: fn waits in its backlog) or
// never (n is down: it reports false). r is the client request the call
// serves, if any: it fails if n crashes before the call runs.
func (c *World) call(n *Node, r *Req, fn func()) bool {
	switch {
	case n.Crashed:
		return false
	case n.halted():
		n.backlog = append(n.backlog, pendingCall{r, fn})
	default:
		n.touch()
		fn()
	}
	return true
}

// next is the earliest instant with work.
func (c *World) next() clock.Instant {
	t := c.Net.Next()
	if len(c.events) > 0 {
		t = min(t, c.events[0].at)
	}
	if c.sparse {
		return min(t, c.nextSparse())
	}
	for _, n := range c.Nodes {
		if n.Crashed || n.halted() {
			continue
		}
		t = min(t, n.Loop.NextWake())
	}
	return t
}

// RunUntil advances the cluster to instant end, doing all work due before
// it. It returns early, with Now at the last instant with work, when nothing
// is left to do.
func (c *World) RunUntil(end clock.Instant) {
	spins := 0
	for {
		t := c.next()
		if t > end {
			c.Now = clock.Max(c.Now, end)
			return
		}
		if t <= c.Now {
			spins++
			if spins > 100000 {
				panic(fmt.Sprintf("sim: no progress at %v", c.Now))
			}
		} else {
			spins = 0
		}
		c.Now = clock.Max(c.Now, t)
		c.instant()
		if t == clock.Never || c.stopped() {
			return
		}
	}
}

// Run advances the cluster by d.
func (c *World) Run(d time.Duration) { c.RunUntil(c.Now.Add(d)) }

// RunIdle runs until nothing is left to do or limit passes; it reports
// whether the cluster went idle.
func (c *World) RunIdle(limit time.Duration) bool {
	end := c.Now.Add(limit)
	for c.Now < end && !c.stopped() {
		t := c.next()
		if t == clock.Never {
			return true
		}
		if t > end {
			c.Now = end
			return false
		}
		c.RunUntil(t)
	}
	return c.next() == clock.Never
}

// instant does all the work due at Now.
func (c *World) instant() {
	c.checking = c.checkEvery <= 0 || c.Now >= c.nextCheck
	c.deliv = c.Net.Deliver(c.Now, c.deliv[:0])
	for _, d := range c.deliv {
		c.deliver(d)
	}
	for len(c.events) > 0 && c.events[0].at <= c.Now {
		e := c.events.pop()
		e.fn()
	}
	if c.sparse {
		c.driveSparse()
	} else {
		for _, n := range c.Nodes {
			c.drive(n)
		}
	}
	c.flushAll()
	if c.checking {
		c.nextCheck = c.Now.Add(c.checkEvery)
		c.check()
	}
	if c.OnInstant != nil {
		c.OnInstant(c)
	}
}

// stopped reports whether a run must stop (StopOnViolation and a
// violation seen).
func (c *World) stopped() bool { return c.StopOnViolation && len(c.Violations) > 0 }

func (c *World) violate(format string, args ...any) {
	c.Violations = append(c.Violations, fmt.Sprintf("%v: ", c.Now)+fmt.Sprintf(format, args...))
}

// check runs every engine's invariant checks (Core.Check: pool accounting,
// request, lease, pull and offload bookkeeping) after an instant. A node
// is checked when anything reached its core since its last check — an
// input, a completion, a step that produced anything, a lease release —
// or its pool changed; a quiet node's core holds what already passed (a
// step with nothing to show changes none of what the checks look at), so
// checking it again would only cost time. RunSeed checks every node once
// more at the end.
func (c *World) check() {
	for _, n := range c.Nodes {
		if n.Crashed {
			continue
		}
		v := n.Core.Pool().Version()
		if !n.active && v == n.checkedPool {
			continue
		}
		n.active, n.checkedPool = false, v
		if err := n.Core.Check(); err != nil {
			c.violate("%s: %v", n.Name, err)
		}
		if err := n.Loop.CheckStep(); err != nil {
			c.violate("%s: %v", n.Name, err)
		}
	}
}
