package sim

import "github.com/kvlease/kvlease/clock"

// Sparse driving (World.sparse): an instant turns only the nodes with
// work — poked since their last turn (an input reached the core), or due
// by Loop.NextWake — in node order, as a pass over every node that skips
// the others would; a node poked during the pass by one before it is
// turned in the same pass, one poked by itself or a node after it at the
// next instant. The cost of an instant does not grow with the number of
// nodes: the due nodes come from a heap of wake instants, the poked ones
// from a list.

// wakeQueue is a min-heap of every node by (wake key, index); the key of
// a crashed or hung node is clock.Never.
type wakeQueue []*Node

func (q wakeQueue) less(i, j int) bool {
	if q[i].wakeKey != q[j].wakeKey {
		return q[i].wakeKey < q[j].wakeKey
	}
	return q[i].idx < q[j].idx
}

func (q wakeQueue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].hix, q[j].hix = i, j
}

func (q wakeQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q wakeQueue) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(q) {
			return
		}
		m := l
		if r := l + 1; r < len(q) && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			return
		}
		q.swap(i, m)
		i = m
	}
}

// setSparse switches the cluster to sparse driving (before it runs).
func (c *World) setSparse() {
	c.sparse = true
	for _, n := range c.Nodes {
		c.setWake(n, n.wake)
		if n.poke {
			c.pokes = append(c.pokes, n)
		}
	}
}

// setWake sets n's wake instant and its place in the wake queue.
func (c *World) setWake(n *Node, t clock.Instant) {
	n.wake = t
	if !c.sparse {
		return
	}
	n.wakeKey = t
	if n.Crashed || n.halted() {
		n.wakeKey = clock.Never
	}
	if n.hix < 0 {
		n.hix = len(c.wakes)
		c.wakes = append(c.wakes, n)
	}
	c.wakes.up(n.hix)
	c.wakes.down(n.hix)
}

// popWake removes the node with the earliest wake key.
func (c *World) popWake() *Node {
	q := c.wakes
	n := q[0]
	last := len(q) - 1
	q.swap(0, last)
	q[last] = nil
	c.wakes = q[:last]
	c.wakes.down(0)
	n.hix = -1
	return n
}

// poked records that n has work (Node.touch) for sparse driving.
func (c *World) poked(n *Node) {
	switch {
	case !c.sparse:
	case c.inPass && n.idx > c.passIdx:
		c.visitAdd(n)
	default:
		c.pokes = append(c.pokes, n)
	}
}

// visitAdd adds n to the nodes of this pass.
func (c *World) visitAdd(n *Node) {
	if n.visited == c.passGen {
		return
	}
	n.visited = c.passGen
	v := append(c.visit, n.idx)
	for i := len(v) - 1; i > 0; { // a min-heap of indices
		p := (i - 1) / 2
		if v[p] <= v[i] {
			break
		}
		v[i], v[p] = v[p], v[i]
		i = p
	}
	c.visit = v
}

func (c *World) visitPop() int {
	v := c.visit
	top := v[0]
	last := len(v) - 1
	v[0] = v[last]
	v = v[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(v) {
			break
		}
		m := l
		if r := l + 1; r < len(v) && v[r] < v[l] {
			m = r
		}
		if v[i] <= v[m] {
			break
		}
		v[i], v[m] = v[m], v[i]
		i = m
	}
	c.visit = v
	return top
}

// driveSparse turns the nodes with work at Now, in node order.
func (c *World) driveSparse() {
	c.passGen++
	c.visit = c.visit[:0]
	for _, n := range c.pokes {
		c.visitAdd(n)
	}
	c.pokes = c.pokes[:0]
	for len(c.wakes) > 0 && c.wakes[0].wakeKey <= c.Now {
		c.visitAdd(c.popWake())
	}
	c.inPass = true
	for len(c.visit) > 0 {
		i := c.visitPop()
		n := c.Nodes[i]
		c.passIdx = i
		if n.Crashed || n.halted() || (!n.poke && n.wake > c.Now) {
			if n.hix < 0 {
				c.setWake(n, n.wake)
			}
			continue
		}
		n.poke = false
		c.drive(n)
		c.setWake(n, n.Loop.NextWake())
	}
	c.inPass = false
}

// nextSparse is the earliest instant a node has work at.
func (c *World) nextSparse() clock.Instant {
	for _, n := range c.pokes {
		if !n.Crashed && !n.halted() {
			return c.Now // poked after its turn at this instant
		}
	}
	if len(c.wakes) > 0 {
		return c.wakes[0].wakeKey
	}
	return clock.Never
}
