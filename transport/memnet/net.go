package memnet

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// Reasons of DialFailed and Closed events. They are for humans and tests:
// protocol cores must not branch on them (transport/tcp has its own).
const (
	ReasonRefused          = "connection refused"   // DialFailed: nobody listens at the address
	ReasonUnreachable      = "unreachable"          // DialFailed: the target is crashed or partitioned away
	ReasonSelfDial         = "dial to self"         // DialFailed: from == to
	ReasonTooManyConns     = "too many connections" // DialFailed: Conditions.MaxConns reached
	ReasonClosedByPeer     = "closed by peer"       // Closed: the other end called Close
	ReasonMessageLost      = "message lost"         // Closed: a message was dropped (DropProb)
	ReasonPeerCrashed      = "peer crashed"         // Closed: the other node crashed
	ReasonPartitionTimeout = "partition timeout"    // Closed: a partition outlasted PartitionTimeout
	ReasonQueueOverflow    = "queue overflow"       // Closed: a Send exceeded MaxQueuedPerConn
)

// Delivery is one event for the node To (always Event.Local).
type Delivery struct {
	To    transport.Addr
	Event transport.Event
}

// Stats counts messages. Once nothing is pending (Next returns clock.Never),
// Sent + Duplicated == Delivered + Dropped + Discarded.
type Stats struct {
	Sent       uint64 // Send calls that returned true
	Delivered  uint64 // Received events delivered, duplicates included
	Dropped    uint64 // messages lost by the DropProb fault
	Duplicated uint64 // extra copies made by the DupProb fault
	Reordered  uint64 // messages that overtook an earlier one (ReorderProb)
	Discarded  uint64 // messages (or copies) that never arrived because their connection broke, was closed or a node crashed
	Overflows  uint64 // Send calls refused by MaxQueuedPerConn (not counted in Sent)
}

// Net is a deterministic simulated network. Every random choice comes from
// the *rand.Rand given to New, in an order fixed by the calls made, so the
// same seed and the same calls give the same deliveries, event for event.
//
// A Net is not safe for concurrent use: the simulator drives it from one
// goroutine, instant by instant. Methods take the current instant; instants
// should not go backwards (an earlier one is treated as the latest seen).
//
// Ownership: a message given to Send belongs to the Net and then to the
// receiver, which gets the very same value; the sender must not modify it
// afterwards. The one exception is *wire.Block: Send copies the struct and
// its Data and Digests, so the sender may reuse or free the buffers (its
// pool's blocks) as soon as Send returns, as with a socket write. The
// receiver may keep a received Block's Data for as long as it likes, but
// must treat every received message as read-only, because DupProb delivers
// the same value twice.
type Net struct {
	rng       *rand.Rand
	f         Conditions
	maxQueued int
	maxConns  int

	nodes map[transport.Addr]*node
	conns map[transport.ConnID]*conn
	parts map[pair]uint64 // active partitions → generation of the Partition call

	nextID  transport.ConnID
	seq     uint64 // insertion sequence of scheduled items, the tie-breaker
	partGen uint64
	last    clock.Instant // latest instant seen

	heap  []hkey
	items []item  // slab indexed by hkey.slot
	free  []int32 // free slots of items

	stats Stats
}

type node struct {
	listening bool
	crashed   bool
}

// pair is an unordered pair of addresses, a < b.
type pair struct{ a, b transport.Addr }

func pairOf(a, b transport.Addr) pair {
	if b < a {
		a, b = b, a
	}
	return pair{a, b}
}

// conn is one connection. End 0 is the dialer, end 1 the listener. The
// direction "towards end j" carries messages sent by end 1-j.
type conn struct {
	id   transport.ConnID
	addr [2]transport.Addr
	pair pair
	end  [2]end
}

type end struct {
	opened bool // Dialed/Accepted delivered: the end may send
	done   bool // DialFailed/Closed delivered, Close called, or the node crashed: nothing more is delivered
	shut   bool // Send refused from now on (after Close or an overflow)

	// Inbound state: messages towards this end.
	broken   bool          // messages towards this end no longer arrive (lost message, crashed sender, overflow)
	floor    clock.Instant // latest instant scheduled towards this end: later in-order items are not earlier
	queued   int           // messages in flight or held towards this end
	held     []wire.Message
	lastSlot int32  // latest in-order item towards this end, valid while items[lastSlot].seq == lastSeq
	lastSeq  uint64 // (0: none)
}

// fin marks a held ReasonClosedByPeer in end.held: a FIN travels in band,
// behind the data sent before it. Send refuses nil messages, so nil is free.
var fin wire.Message

// item is one scheduled event. Received items and FINs (Closed with
// ReasonClosedByPeer) travel in band: partitions hold them.
type item struct {
	conn   *conn
	msg    wire.Message
	reason string
	seq    uint64 // 0 when the slot is free
	gen    uint64 // partition generation of a partition-timeout Closed, else 0
	kind   transport.EventKind
	to     uint8 // end index
	fin    bool
}

type hkey struct {
	at   clock.Instant
	seq  uint64
	slot int32
}

// New returns an empty network with faults f. It panics if rng is nil or f
// does not Validate: both are bugs of the caller.
func New(rng *rand.Rand, f Conditions) *Net {
	if rng == nil {
		panic("memnet: nil *rand.Rand")
	}
	if err := f.Validate(); err != nil {
		panic(err)
	}
	n := &Net{
		rng:       rng,
		f:         f,
		maxQueued: f.MaxQueuedPerConn,
		maxConns:  f.MaxConns,
		nodes:     map[transport.Addr]*node{},
		conns:     map[transport.ConnID]*conn{},
		parts:     map[pair]uint64{},
	}
	if n.maxQueued == 0 {
		n.maxQueued = DefaultMaxQueuedPerConn
	}
	if n.maxConns == 0 {
		n.maxConns = DefaultMaxConns
	}
	return n
}

// Stats returns the message counters.
func (n *Net) Stats() Stats { return n.stats }

// Conns returns the number of live connections: dialed (and not failed) and
// not yet closed at both ends.
func (n *Net) Conns() int { return len(n.conns) }

func (n *Net) node(a transport.Addr) *node {
	nd := n.nodes[a]
	if nd == nil {
		nd = &node{}
		n.nodes[a] = nd
	}
	return nd
}

// Listen makes a accept connections. A crashed node cannot listen until
// Restart.
func (n *Net) Listen(a transport.Addr) {
	if nd := n.node(a); !nd.crashed {
		nd.listening = true
	}
}

// Unlisten stops a accepting new connections; existing ones are untouched.
func (n *Net) Unlisten(a transport.Addr) {
	if nd := n.nodes[a]; nd != nil {
		nd.listening = false
	}
}

// Dial opens a connection from from to to and returns its id. The outcome
// is decided now, from the state of the network at this instant:
//
//   - to listens, is not crashed and not partitioned from from: to gets
//     Accepted after one latency, then from gets Dialed after another;
//   - nobody listens at to: DialFailed (ReasonRefused) after a round trip;
//   - to is crashed, or partitioned from from: DialFailed
//     (ReasonUnreachable) after CloseDetectDelay;
//   - from == to, or MaxConns connections are live: DialFailed at once.
//
// A crashed from cannot dial: Dial returns 0 and nothing is delivered.
// A connection refused for MaxConns is not tracked: Close on it does nothing
// and its DialFailed arrives anyway.
func (n *Net) Dial(now clock.Instant, from, to transport.Addr) transport.ConnID {
	if nd := n.nodes[from]; nd != nil && nd.crashed {
		return 0
	}
	now = n.clamp(now)
	n.nextID++
	c := &conn{id: n.nextID, addr: [2]transport.Addr{from, to}, pair: pairOf(from, to)}
	if from == to {
		n.dialFail(now, c, 0, ReasonSelfDial)
		return c.id
	}
	if len(n.conns) >= n.maxConns {
		n.dialFail(now, c, 0, ReasonTooManyConns)
		return c.id
	}
	n.conns[c.id] = c
	target := n.nodes[to]
	_, parted := n.parts[c.pair]
	switch {
	case (target != nil && target.crashed) || parted:
		n.dialFail(now, c, n.f.CloseDetectDelay, ReasonUnreachable)
	case target == nil || !target.listening:
		n.dialFail(now, c, n.latency()+n.latency(), ReasonRefused)
	default:
		accepted := now.Add(n.latency())
		n.schedule(accepted, c, 1, transport.Accepted, nil, "", 0)
		n.schedule(accepted.Add(n.latency()), c, 0, transport.Dialed, nil, "", 0)
	}
	return c.id
}

func (n *Net) dialFail(now clock.Instant, c *conn, d time.Duration, reason string) {
	c.end[1].done = true // the listener's end never exists
	n.schedule(now.Add(d), c, 0, transport.DialFailed, nil, reason, 0)
}

// Send sends m from from over connection id. It returns false, and sends
// nothing, if the connection is not open from the sender's view: unknown id,
// from not one of its ends, not yet Dialed or Accepted, closed by Close,
// Closed delivered, node crashed, or m nil (or a nil *wire.Block). It also returns false when
// MaxQueuedPerConn messages are already queued towards the peer: the
// connection then breaks, and both ends get Closed (ReasonQueueOverflow).
//
// True means the message is on its way, which does not mean it arrives: the
// connection may be broken without the sender knowing yet (it will get
// Closed), or a fault may lose it. See Net for who owns m.
func (n *Net) Send(now clock.Instant, id transport.ConnID, from transport.Addr, m wire.Message) bool {
	c := n.conns[id]
	if c == nil || m == nil {
		return false
	}
	if b, ok := m.(*wire.Block); ok && b == nil {
		return false
	}
	i := c.endOf(from)
	if i < 0 {
		return false
	}
	s := &c.end[i]
	if !s.opened || s.done || s.shut {
		return false
	}
	now = n.clamp(now)
	r := &c.end[1-i]
	if r.done || r.broken {
		n.stats.Sent++
		n.stats.Discarded++
		return true
	}
	if r.queued >= n.maxQueued {
		n.stats.Overflows++
		for j := range c.end {
			c.end[j].broken = true
			c.end[j].shut = true
		}
		n.fail(now, c, 0, ReasonQueueOverflow)
		return false
	}
	n.stats.Sent++
	if b, ok := m.(*wire.Block); ok {
		m = cloneBlock(b)
	}
	if p := n.f.DropProb; p > 0 && n.rng.Float64() < p {
		n.stats.Dropped++
		r.broken = true
		n.fail(now, c, n.f.CloseDetectDelay, ReasonMessageLost)
		return true
	}
	j := uint8(1 - i)
	slot := n.schedule(max(now.Add(n.latency()), r.floor), c, j, transport.Received, m, "", 0)
	r.queued++
	if p := n.f.ReorderProb; p > 0 && n.rng.Float64() < p && r.lastSeq != 0 && n.items[r.lastSlot].seq == r.lastSeq {
		// Overtake: swap payloads with the latest queued message, keeping
		// both delivery slots (so no other ordering changes).
		prev := &n.items[r.lastSlot]
		prev.msg, n.items[slot].msg = n.items[slot].msg, prev.msg
		n.stats.Reordered++
	}
	r.lastSlot, r.lastSeq = slot, n.items[slot].seq
	if p := n.f.DupProb; p > 0 && n.rng.Float64() < p {
		slot = n.schedule(max(now.Add(n.latency()), r.floor), c, j, transport.Received, m, "", 0)
		r.queued++
		r.lastSlot, r.lastSeq = slot, n.items[slot].seq
		n.stats.Duplicated++
	}
	return true
}

func cloneBlock(b *wire.Block) *wire.Block {
	nb := *b
	nb.Data = slices.Clone(b.Data)
	nb.Digests = slices.Clone(b.Digests)
	return &nb
}

// Close closes connection id from from's side. Nothing more is delivered to
// that end, and Send on it returns false. The peer gets everything from
// sends before the Close (faults permitting), then Closed
// (ReasonClosedByPeer) one latency later; its sends are discarded meanwhile.
// Closing before Dialed cancels the dial (the listener may still see
// Accepted, then Closed). Unknown ids, strangers and repeated closes do
// nothing.
func (n *Net) Close(now clock.Instant, id transport.ConnID, from transport.Addr) {
	c := n.conns[id]
	if c == nil {
		return
	}
	i := c.endOf(from)
	if i < 0 || c.end[i].done {
		return
	}
	now = n.clamp(now)
	s := &c.end[i]
	s.shut = true
	n.markDone(s)
	j := 1 - i
	if r := &c.end[j]; !r.done {
		n.scheduleFIN(max(now.Add(n.latency()), r.floor), c, uint8(j))
	}
	n.maybeDelete(c)
}

// Partition cuts a off from b (both directions) from now on. Traffic between
// them is held, not lost, like a stalled TCP stream: messages (and closes
// by Close) already in flight or sent later arrive only after Heal, in
// order. If PartitionTimeout > 0, every connection between a and b that
// exists now is Closed at both ends (ReasonPartitionTimeout) when the
// partition has lasted that long. Dials between them fail
// (ReasonUnreachable). Handshake events already scheduled (Dialed,
// Accepted) and failure notices are not held. Partitioning a pair that is
// already partitioned, or a node from itself, does nothing.
func (n *Net) Partition(now clock.Instant, a, b transport.Addr) {
	k := pairOf(a, b)
	if _, ok := n.parts[k]; ok || a == b {
		return
	}
	now = n.clamp(now)
	n.partGen++
	n.parts[k] = n.partGen
	if n.f.PartitionTimeout <= 0 {
		return
	}
	for _, c := range n.connsOf(func(c *conn) bool { return c.pair == k }) {
		for j := range c.end {
			if e := &c.end[j]; !e.done {
				n.schedule(max(now.Add(n.f.PartitionTimeout), e.floor), c, uint8(j), transport.Closed, nil, ReasonPartitionTimeout, n.partGen)
			}
		}
	}
}

// Heal ends the partition between a and b: the traffic it held is delivered
// from now on, each message after a fresh latency, in the order it was sent
// (as reordered by faults when it was sent). Healing a pair that is not
// partitioned does nothing.
func (n *Net) Heal(now clock.Instant, a, b transport.Addr) {
	k := pairOf(a, b)
	if _, ok := n.parts[k]; !ok {
		return
	}
	delete(n.parts, k)
	now = n.clamp(now)
	// Pull the in-band items of this pair still scheduled: they go after the
	// held ones, so that nothing overtakes what the partition held.
	var moved []hkey
	keep := n.heap[:0]
	for _, h := range n.heap {
		it := &n.items[h.slot]
		if it.conn.pair == k && (it.kind == transport.Received || it.fin) && !n.dead(it) {
			moved = append(moved, h)
		} else {
			keep = append(keep, h)
		}
	}
	n.heap = keep
	n.heapify()
	slices.SortFunc(moved, func(x, y hkey) int {
		ix, iy := &n.items[x.slot], &n.items[y.slot]
		switch {
		case ix.conn.id != iy.conn.id:
			return cmpInt(ix.conn.id, iy.conn.id)
		case ix.to != iy.to:
			return cmpInt(ix.to, iy.to)
		case x.at != y.at:
			return cmpInt(x.at, y.at)
		}
		return cmpInt(x.seq, y.seq)
	})
	next := 0
	for _, c := range n.connsOf(func(c *conn) bool { return c.pair == k }) {
		for j := range c.end {
			e := &c.end[j]
			for _, m := range e.held {
				at := max(now.Add(n.latency()), e.floor)
				if m == fin {
					n.scheduleFIN(at, c, uint8(j))
					continue
				}
				slot := n.schedule(at, c, uint8(j), transport.Received, m, "", 0)
				e.lastSlot, e.lastSeq = slot, n.items[slot].seq
			}
			e.held = nil
			for ; next < len(moved); next++ {
				h := moved[next]
				it := &n.items[h.slot]
				if it.conn != c || int(it.to) != j {
					break
				}
				n.seq++
				it.seq = n.seq
				at := max(now.Add(n.latency()), e.floor)
				e.floor = at
				n.push(hkey{at: at, seq: it.seq, slot: h.slot})
				if !it.fin {
					e.lastSlot, e.lastSeq = h.slot, it.seq
				}
			}
		}
	}
	if next != len(moved) {
		panic("memnet: Heal left in-band items of a live end unscheduled")
	}
}

// Crash makes a disappear: it stops listening, nothing more is delivered to
// it (its pending events are discarded), messages it sent that have not
// arrived vanish, and the live peers of its connections get Closed
// (ReasonPeerCrashed) after CloseDetectDelay. Until Restart, its Dial
// returns 0, its Send returns false and its Listen does nothing.
func (n *Net) Crash(now clock.Instant, a transport.Addr) {
	nd := n.node(a)
	if nd.crashed {
		return
	}
	now = n.clamp(now)
	nd.crashed = true
	nd.listening = false
	for _, c := range n.connsOf(func(c *conn) bool { return c.addr[0] == a || c.addr[1] == a }) {
		i := c.endOf(a)
		s := &c.end[i]
		s.shut = true
		n.markDone(s)
		r := &c.end[1-i]
		r.broken = true
		if !r.done {
			n.schedule(max(now.Add(n.f.CloseDetectDelay), r.floor), c, uint8(1-i), transport.Closed, nil, ReasonPeerCrashed, 0)
		}
		n.maybeDelete(c)
	}
}

// Restart brings a crashed node back, with no connections and not
// listening: it may Listen and Dial again. Its old connections stay dead.
// Restarting a node that is not crashed does nothing.
func (n *Net) Restart(a transport.Addr) {
	if nd := n.nodes[a]; nd != nil {
		nd.crashed = false
	}
}

// Next returns the earliest instant at which Deliver has an event to
// process, or clock.Never if none. Deliver at that instant may still return
// nothing, when a partition holds the message due then.
func (n *Net) Next() clock.Instant {
	for len(n.heap) > 0 {
		h := n.heap[0]
		if it := &n.items[h.slot]; !n.dead(it) {
			return h.at
		}
		n.pop()
		n.discard(h.slot)
	}
	return clock.Never
}

// Deliver appends to dst every event due at or before now, in order of
// (instant, insertion sequence), and returns dst. The order is fully
// determined by the seed and the calls made. Events due later stay pending.
func (n *Net) Deliver(now clock.Instant, dst []Delivery) []Delivery {
	if now > n.last {
		n.last = now
	}
	for len(n.heap) > 0 && n.heap[0].at <= now {
		h := n.pop()
		it := &n.items[h.slot]
		if n.dead(it) {
			n.discard(h.slot)
			continue
		}
		c := it.conn
		e := &c.end[it.to]
		if (it.kind == transport.Received || it.fin) && len(n.parts) > 0 {
			if _, parted := n.parts[c.pair]; parted {
				if it.fin {
					e.held = append(e.held, fin)
				} else {
					e.held = append(e.held, it.msg)
				}
				n.freeSlot(h.slot)
				continue
			}
		}
		ev := transport.Event{Kind: it.kind, Conn: c.id, Local: c.addr[it.to], Remote: c.addr[1-it.to]}
		switch it.kind {
		case transport.Received:
			e.queued--
			n.stats.Delivered++
			ev.Msg = it.msg
		case transport.Dialed, transport.Accepted:
			e.opened = true
		case transport.DialFailed, transport.Closed:
			ev.Reason = it.reason
			n.markDone(e)
			n.maybeDelete(c)
		}
		n.freeSlot(h.slot)
		dst = append(dst, Delivery{To: ev.Local, Event: ev})
	}
	return dst
}

// dead reports whether a scheduled item will never be delivered, whatever
// happens next: its end is done, its direction broken, or it is the timeout
// of a partition that was healed.
func (n *Net) dead(it *item) bool {
	e := &it.conn.end[it.to]
	switch {
	case e.done:
		return true
	case it.kind == transport.Received:
		return e.broken
	case it.gen != 0:
		return n.parts[it.conn.pair] != it.gen
	}
	return false
}

// discard frees the slot of a dead item, counting a lost message.
func (n *Net) discard(slot int32) {
	if n.items[slot].kind == transport.Received {
		n.stats.Discarded++
	}
	n.freeSlot(slot)
}

func (n *Net) markDone(e *end) {
	e.done = true
	for _, m := range e.held {
		if m != fin {
			n.stats.Discarded++
		}
	}
	e.held = nil
}

func (n *Net) maybeDelete(c *conn) {
	if c.end[0].done && c.end[1].done {
		delete(n.conns, c.id)
	}
}

// fail schedules Closed for every live end of c, d from now.
func (n *Net) fail(now clock.Instant, c *conn, d time.Duration, reason string) {
	for j := range c.end {
		if e := &c.end[j]; !e.done {
			n.schedule(max(now.Add(d), e.floor), c, uint8(j), transport.Closed, nil, reason, 0)
		}
	}
}

func (c *conn) endOf(a transport.Addr) int {
	switch a {
	case c.addr[0]:
		return 0
	case c.addr[1]:
		return 1
	}
	return -1
}

// connsOf returns the live connections matching keep, by increasing id, so
// that what is scheduled for them is deterministic.
func (n *Net) connsOf(keep func(*conn) bool) []*conn {
	var out []*conn
	for _, c := range n.conns {
		if keep(c) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y *conn) int { return cmpInt(x.id, y.id) })
	return out
}

func (n *Net) clamp(now clock.Instant) clock.Instant {
	if now < n.last {
		return n.last
	}
	n.last = now
	return now
}

func (n *Net) latency() time.Duration {
	lo, hi := n.f.MinDelay, n.f.MaxDelay
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)+1))
}

// schedule queues an event for end `to` of c at `at` and raises that end's
// floor, so that later in-order items are not delivered before it.
func (n *Net) schedule(at clock.Instant, c *conn, to uint8, kind transport.EventKind, m wire.Message, reason string, gen uint64) int32 {
	var slot int32
	if k := len(n.free); k > 0 {
		slot = n.free[k-1]
		n.free = n.free[:k-1]
	} else {
		n.items = append(n.items, item{})
		slot = int32(len(n.items) - 1)
	}
	n.seq++
	n.items[slot] = item{conn: c, msg: m, reason: reason, seq: n.seq, gen: gen, kind: kind, to: to}
	// A partition timeout may never happen (Heal cancels it): it must not
	// delay the traffic sent after it.
	if e := &c.end[to]; gen == 0 && at > e.floor {
		e.floor = at
	}
	n.push(hkey{at: at, seq: n.seq, slot: slot})
	return slot
}

// scheduleFIN queues the Closed (ReasonClosedByPeer) that an explicit Close
// sends in band.
func (n *Net) scheduleFIN(at clock.Instant, c *conn, to uint8) {
	slot := n.schedule(at, c, to, transport.Closed, nil, ReasonClosedByPeer, 0)
	n.items[slot].fin = true
}

func (n *Net) freeSlot(slot int32) {
	n.items[slot] = item{}
	n.free = append(n.free, slot)
}

func cmpInt[T ~int | ~int64 | ~uint64 | ~uint8](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// The pending events form a binary min-heap on (at, seq), written out
// rather than through container/heap to avoid boxing every key.

func (h hkey) less(o hkey) bool { return h.at < o.at || (h.at == o.at && h.seq < o.seq) }

func (n *Net) push(k hkey) {
	n.heap = append(n.heap, k)
	n.up(len(n.heap) - 1)
}

func (n *Net) pop() hkey {
	h := n.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	n.heap = h[:last]
	if last > 0 {
		n.down(0)
	}
	return top
}

func (n *Net) heapify() {
	for i := len(n.heap)/2 - 1; i >= 0; i-- {
		n.down(i)
	}
}

func (n *Net) up(i int) {
	h := n.heap
	k := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !k.less(h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = k
}

func (n *Net) down(i int) {
	h := n.heap
	k := h[i]
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].less(h[c]) {
			c = r
		}
		if !h[c].less(k) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = k
}
