package sched

// reqHeap is the waiting queue: a binary min-heap on (priority, arrival)
// when priority is set, on arrival alone otherwise. A preempted request keeps
// its arrival number, so it goes back ahead of everything that arrived after
// it. Each request records its index for O(log n) removal on abort.
type reqHeap struct {
	items    []*Request
	priority bool
}

func (h *reqHeap) less(a, b *Request) bool {
	if h.priority && a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return a.seq < b.seq
}

// has reports whether r is queued (a request the caller holds elsewhere,
// such as one waiting for a remote prefix, is not).
func (h *reqHeap) has(r *Request) bool {
	return r.heapIdx >= 0 && r.heapIdx < len(h.items) && h.items[r.heapIdx] == r
}

func (h *reqHeap) peek() *Request { return h.items[0] }

func (h *reqHeap) push(r *Request) {
	r.heapIdx = len(h.items)
	h.items = append(h.items, r)
	h.up(r.heapIdx)
}

func (h *reqHeap) pop() *Request {
	r := h.items[0]
	h.removeAt(0)
	return r
}

func (h *reqHeap) remove(r *Request) {
	if r.heapIdx < 0 || r.heapIdx >= len(h.items) || h.items[r.heapIdx] != r {
		panic("sched: request is not in the waiting queue")
	}
	h.removeAt(r.heapIdx)
}

func (h *reqHeap) removeAt(i int) {
	last := len(h.items) - 1
	removed := h.items[i]
	if i != last {
		h.items[i] = h.items[last]
		h.items[i].heapIdx = i
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	removed.heapIdx = -1
}

func (h *reqHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			break
		}
		h.swap(i, p)
		i = p
	}
}

func (h *reqHeap) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > start
}

func (h *reqHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].heapIdx = i
	h.items[j].heapIdx = j
}
