package netem

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

// DefaultLimit is a Queue's capacity when none is given: netem's default
// limit, in packets.
const DefaultLimit = 1000

// Packet is one IP packet on its way to the device Port (an index the
// caller gives meaning to). Data is owned by the Queue from Offer until
// Pop hands it back.
type Packet struct {
	Data []byte
	Port int
}

// Stats counts what a Queue did to the packets offered to it. Every
// offered packet is Lost, Overflow, or Delivered (later); Duplicated
// copies are delivered or overflow too.
type Stats struct {
	Offered    uint64 // packets offered
	Delivered  uint64 // handed back by Pop, copies included
	Lost       uint64 // dropped by the Loss draw
	Duplicated uint64 // extra copies made
	Reordered  uint64 // sent at once, ahead of delayed packets
	Corrupted  uint64 // packets (or copies) with a bit flipped
	Overflow   uint64 // dropped because the queue was full
}

// Add returns the sums of s and o's counts.
func (s Stats) Add(o Stats) Stats {
	return Stats{s.Offered + o.Offered, s.Delivered + o.Delivered, s.Lost + o.Lost,
		s.Duplicated + o.Duplicated, s.Reordered + o.Reordered, s.Corrupted + o.Corrupted, s.Overflow + o.Overflow}
}

// Queue holds packets until they are due under the fault they were
// offered with. It does no I/O and reads no clock: the caller passes the
// instant of each call. Not safe for concurrent use.
type Queue struct {
	rng   *rand.Rand
	limit int
	items items
	seq   uint64
	stats Stats
}

// NewQueue returns an empty Queue drawing from rng that holds at most
// limit packets (DefaultLimit if limit <= 0).
func NewQueue(rng *rand.Rand, limit int) *Queue {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Queue{rng: rng, limit: limit}
}

// Offer decides p's fate under f, which must be valid, at now: dropped
// (Loss), or queued until its due instant, with one bit flipped
// (Corrupt), and with a second copy of its own (Duplicate, the copy
// drawing its own corruption and delay). Reorder makes a packet due at
// once. A packet that finds the queue full is dropped (Overflow).
func (q *Queue) Offer(now time.Time, p Packet, f Fault) {
	q.stats.Offered++
	if q.chance(f.Loss) {
		q.stats.Lost++
		return
	}
	var dup []byte
	if q.chance(f.Duplicate) {
		q.stats.Duplicated++
		dup = append([]byte(nil), p.Data...)
	}
	q.enqueue(now, p, f)
	if dup != nil {
		q.enqueue(now, Packet{Data: dup, Port: p.Port}, f)
	}
}

func (q *Queue) enqueue(now time.Time, p Packet, f Fault) {
	if len(q.items) >= q.limit {
		q.stats.Overflow++
		return
	}
	if len(p.Data) > 0 && q.chance(f.Corrupt) {
		q.stats.Corrupted++
		p.Data[q.rng.IntN(len(p.Data))] ^= 1 << q.rng.IntN(8)
	}
	due := now
	if f.Delay > 0 || f.Jitter > 0 {
		if q.chance(f.Reorder) {
			q.stats.Reordered++
		} else {
			d := f.Delay
			if f.Jitter > 0 {
				d += time.Duration(q.rng.Int64N(2*int64(f.Jitter)+1)) - f.Jitter
			}
			due = now.Add(max(d, 0))
		}
	}
	q.seq++
	heap.Push(&q.items, item{due: due, seq: q.seq, p: p})
}

// chance draws true with probability prob; it draws nothing when prob is
// 0 or 1, so a fault without randomness leaves the sequence alone.
func (q *Queue) chance(prob float64) bool {
	switch {
	case prob <= 0:
		return false
	case prob >= 1:
		return true
	}
	return q.rng.Float64() < prob
}

// Pop returns the packet due first if it is due at now, in order of due
// instant and, between equals, of arrival.
func (q *Queue) Pop(now time.Time) (Packet, bool) {
	if len(q.items) == 0 || q.items[0].due.After(now) {
		return Packet{}, false
	}
	it := heap.Pop(&q.items).(item)
	q.stats.Delivered++
	return it.p, true
}

// Next returns when the first packet is due, if any is queued.
func (q *Queue) Next() (time.Time, bool) {
	if len(q.items) == 0 {
		return time.Time{}, false
	}
	return q.items[0].due, true
}

// Len is the number of packets queued.
func (q *Queue) Len() int { return len(q.items) }

// Stats returns the counts so far.
func (q *Queue) Stats() Stats { return q.stats }

type item struct {
	due time.Time
	seq uint64
	p   Packet
}

// items is a min-heap by (due, seq).
type items []item

func (h items) Len() int { return len(h) }
func (h items) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h items) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *items) Push(x any)   { *h = append(*h, x.(item)) }
func (h *items) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = item{}
	*h = old[:len(old)-1]
	return it
}
