package xfer

import (
	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
)

// dueHeap orders live leases by a key (then id, for a deterministic
// order): each entry's key is at or before its lease's due instant (see
// schedule). Each lease records its index so that it is re-keyed or
// removed in O(log n). Its size is at most the number of live leases
// (MaxLeases).
type dueHeap []dueEntry

type dueEntry struct {
	at clock.Instant
	l  *leaseState
}

func (h dueHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].l.id < h[j].l.id
}

func (h dueHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].l.hix, h[j].l.hix = i, j
}

func (h *dueHeap) push(e dueEntry) {
	e.l.hix = len(*h)
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

func (h *dueHeap) remove(i int) {
	old := *h
	last := len(old) - 1
	l := old[i].l
	if i != last {
		old.swap(i, last)
	}
	old[last] = dueEntry{}
	*h = old[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	l.hix = -1
}

func (h dueHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts entry i down and reports whether it moved.
func (h dueHeap) down(i int) bool {
	start := i
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h.less(r, c) {
			c = r
		}
		if !h.less(c, i) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}

// tombstones remember the last n released lease ids, why, and whether a
// decode engine claimed the lease after it ended (counted once). The ring
// and the map grow as leases end, up to n: a producer that releases few
// leases (a short simulation, a restarted engine) does not pay for n up
// front.
type tombstones struct {
	n    int
	ring []wire.LeaseID
	next int
	m    map[wire.LeaseID]tombstone
}

type tombstone struct {
	reason wire.Reason
	late   bool // claimed after it ended (lateClaim)
}

func newTombstones(n int) tombstones {
	return tombstones{n: n, m: make(map[wire.LeaseID]tombstone)}
}

func (t *tombstones) add(id wire.LeaseID, r wire.Reason) {
	if t.n == 0 {
		return
	}
	if len(t.ring) < t.n {
		t.ring = append(t.ring, id)
		t.m[id] = tombstone{reason: r}
		return
	}
	delete(t.m, t.ring[t.next])
	t.ring[t.next] = id
	t.m[id] = tombstone{reason: r}
	t.next = (t.next + 1) % len(t.ring)
}

func (t *tombstones) has(id wire.LeaseID) bool { _, ok := t.m[id]; return ok }

func (t *tombstones) get(id wire.LeaseID) (wire.Reason, bool) {
	e, ok := t.m[id]
	return e.reason, ok
}

// claimLate marks id claimed after it ended and returns its reason, with
// first true only the first time (a lease is counted once however many
// RENEWs and READs name it).
func (t *tombstones) claimLate(id wire.LeaseID) (r wire.Reason, first bool) {
	e, ok := t.m[id]
	if !ok || e.late {
		return e.reason, false
	}
	e.late = true
	t.m[id] = e
	return e.reason, true
}
