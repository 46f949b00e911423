package sim

import (
	"slices"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// port is a simulated engine's engine.Port: its end of memnet, with the
// cluster's message faults on what it sends and a modelled transfer time
// for reads. A read's blocks leave after their modelled transmission time
// (Spec.ReadBandwidth), together with its READ_END; reads and other
// messages do not wait for one another, as over a multiplexed connection.
// A block's bytes are taken from the pool when it leaves, as the zero-copy
// TCP transport writes them from the pool: a block freed under its read's
// pin would be sent with the wrong content, and the oracle sees it. A port
// belongs to one life of its node: what it still has queued when the node
// crashes or restarts is dropped with the core.
type port struct {
	c     *World
	n     *Node
	core  *engine.Core // the life the port belongs to
	inbox []transport.Event
	spare []transport.Event // the other buffer of inbox (World.feed)
	links map[transport.ConnID]*link
}

// link is one connection's reads in flight.
type link struct {
	queued  int              // frames not yet sent
	lanes   map[uint64]*lane // by read id
	tags    map[uint64]int   // queued blocks per tag
	closing bool             // Close was called: close after the queue
	dead    bool             // the connection is gone: nothing more leaves
}

// lane is one read's frames: they leave together at free.
type lane struct {
	free   clock.Instant
	frames []frame
}

type frame struct {
	m   wire.Message
	tag uint64 // set for a block
}

func newPort(c *World, n *Node, core *engine.Core) *port {
	return &port{c: c, n: n, core: core, links: map[transport.ConnID]*link{}}
}

// live reports whether the port's node is still in the life it belongs to.
func (p *port) live() bool { return !p.n.Crashed && p.n.Core == p.core }

// push queues an event for the node's next turn. A connection's Closed
// comes after a lost Sent for each of its queued blocks, as the TCP
// transport runs every done of a connection before its Closed: from then
// on the port references none of them.
func (p *port) push(ev transport.Event) {
	if l := p.links[ev.Conn]; l != nil && ev.Kind == transport.Closed {
		tags := make([]uint64, 0, len(l.tags))
		for tag := range l.tags {
			tags = append(tags, tag)
		}
		slices.Sort(tags)
		for _, tag := range tags {
			for range l.tags[tag] {
				p.inbox = append(p.inbox, transport.Event{Kind: transport.Sent, Conn: ev.Conn, Local: p.n.Name, Tag: tag, Reason: "connection lost"})
			}
		}
		l.dead = true
		delete(p.links, ev.Conn)
	}
	p.inbox = append(p.inbox, ev)
	p.n.touch()
}

func (p *port) Poll(buf []transport.Event) []transport.Event {
	buf = append(buf, p.inbox...)
	clear(p.inbox)
	p.inbox = p.inbox[:0]
	return buf
}

func (p *port) Dial(addr transport.Addr) { p.c.Net.Dial(p.c.Now, p.n.Name, addr) }

func (p *port) Send(id transport.ConnID, m wire.Message) bool {
	if end, ok := m.(*wire.ReadEnd); ok {
		if l := p.links[id]; l != nil {
			if ln := l.lanes[end.ReadID]; ln != nil {
				ln.frames = append(ln.frames, frame{m: m}) // after the read's blocks
				l.queued++
				return true
			}
		}
	}
	return p.send(id, m)
}

func (p *port) SendBlock(id transport.ConnID, b *wire.Block, tag uint64) bool {
	d := time.Duration(0)
	if bw := p.c.Spec.ReadBandwidth; bw > 0 {
		// The modelled size is the full KV's, also in digest-only mode.
		d = time.Duration(float64(int(b.Tokens)*p.c.Spec.Profile.BytesPerToken()) / bw * 1e9)
	}
	l := p.links[id]
	if l == nil {
		l = &link{lanes: map[uint64]*lane{}, tags: map[uint64]int{}}
		p.links[id] = l
	}
	ln := l.lanes[b.ReadID]
	if ln == nil {
		ln = &lane{free: p.c.Now}
		l.lanes[b.ReadID] = ln
		p.c.At(p.c.Now.Add(d), func() { p.fire(id, l, b.ReadID, ln) })
	}
	ln.free = ln.free.Add(d)
	ln.frames = append(ln.frames, frame{m: b, tag: tag})
	l.queued++
	l.tags[tag]++
	return true
}

// fire sends lane ln of read readID on connection id once its time has
// come: blocks queued after it was scheduled move it later.
func (p *port) fire(id transport.ConnID, l *link, readID uint64, ln *lane) {
	if !p.live() || l.dead {
		return // the frames died with the core or the connection
	}
	if p.n.Hung {
		// A hung node sends nothing.
		p.n.backlog = append(p.n.backlog, pendingCall{nil, func() { p.fire(id, l, readID, ln) }})
		return
	}
	if ln.free > p.c.Now {
		p.c.At(ln.free, func() { p.fire(id, l, readID, ln) })
		return
	}
	delete(l.lanes, readID)
	l.queued -= len(ln.frames)
	for _, f := range ln.frames {
		ok := p.send(id, f.m)
		if f.tag == 0 {
			continue
		}
		b := f.m.(*wire.Block)
		if info, live := p.core.Producer().Lease(b.Lease); !live || info.Reads == 0 {
			p.c.violate("%s sends a block of lease %d that is not live and pinned", p.n.Name, b.Lease)
		} else if !p.core.Producer().Resident(b.Lease, int(b.Index)) {
			// A lease spill (S26) dropped the primary copy this frame
			// aliases while the read streamed it.
			p.c.violate("%s sends block %d of lease %d whose primary copy the lease no longer holds", p.n.Name, b.Index, b.Lease)
		}
		if l.tags[f.tag]--; l.tags[f.tag] == 0 {
			delete(l.tags, f.tag)
		}
		ev := transport.Event{Kind: transport.Sent, Conn: id, Local: p.n.Name, Tag: f.tag}
		if !ok {
			ev.Reason = "not sent"
		}
		p.push(ev)
	}
	if l.queued == 0 {
		delete(p.links, id)
		if l.closing {
			p.close(id)
		}
	}
}

// send puts m on the network now, through the cluster's message faults.
func (p *port) send(id transport.ConnID, m wire.Message) bool {
	if end, ok := m.(*wire.ReadEnd); ok && end.Status == wire.StatusOK {
		if r := p.c.byLease[leaseKey{p.n.Name, end.Lease}]; r != nil {
			r.leaseRead = true
		}
		if p.c.fleet != nil {
			p.c.fleet.read(p.c.Now, p.n, end.Lease)
		}
		p.c.mix(traceReadEnd, uint64(end.Lease), end.ReadID)
	}
	return p.c.send(p.n, id, m)
}

func (p *port) Writable(transport.ConnID) bool { return true }

func (p *port) Close(id transport.ConnID) {
	if l := p.links[id]; l != nil && l.queued > 0 {
		l.closing = true
		return
	}
	p.close(id)
}

func (p *port) close(id transport.ConnID) {
	p.c.flush(id, p.n.Name)
	p.c.Net.Close(p.c.Now, id, p.n.Name)
	p.c.forgetConn(id)
}

// copier is a simulated engine's engine.Copier: its tier stores (volatile,
// like its core), copies completing after their modelled time.
type copier struct {
	c *World
	n *Node
}

func (cp copier) Copy(pool *kvblock.Pool, w *offload.Work) []engine.Copied {
	for _, s := range w.Stores {
		cp.c.copyLater(cp.n, uint64(s.ID), true, s.Tier, s.Blocks, s.Hashes, s.Slots)
	}
	for _, l := range w.Loads {
		cp.c.copyLater(cp.n, uint64(l.ID), false, l.Tier, l.Blocks, l.Hashes, l.Slots)
	}
	return nil
}
