package xfer

// timerHeap is a binary min-heap of timers (D's pulls by due instant,
// release notices by when they are next due), each element keeping its
// own position (pos: index+1, 0 when out of the heap) so that it is
// re-keyed or removed in O(log n). less must be a strict total order
// (due instant, then a sequence number), so that the heap's shape — and
// whatever reads it — is a function of its inputs alone.
type timerHeap[T comparable] struct {
	items []T
	less  func(a, b T) bool
	pos   func(T) *int
}

func (h *timerHeap[T]) len() int { return len(h.items) }

// top is the least element; the heap must not be empty.
func (h *timerHeap[T]) top() T { return h.items[0] }

func (h *timerHeap[T]) has(x T) bool { return *h.pos(x) != 0 }

// fix puts x in the heap, or moves it after its key changed.
func (h *timerHeap[T]) fix(x T) {
	p := h.pos(x)
	if *p == 0 {
		h.items = append(h.items, x)
		*p = len(h.items)
		h.up(len(h.items) - 1)
		return
	}
	if i := *p - 1; !h.down(i) {
		h.up(i)
	}
}

// remove takes x out of the heap if it is there.
func (h *timerHeap[T]) remove(x T) {
	p := h.pos(x)
	if *p == 0 {
		return
	}
	i, last := *p-1, len(h.items)-1
	if i != last {
		h.swap(i, last)
	}
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	*p = 0
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// appendDue appends to dst every element x for which due(x) holds, where
// due holds of a parent whenever it holds of a child (a key at or before
// an instant): only those and their children are visited.
func (h *timerHeap[T]) appendDue(dst []T, due func(T) bool) []T {
	var walk func(i int)
	walk = func(i int) {
		if i >= len(h.items) || !due(h.items[i]) {
			return
		}
		dst = append(dst, h.items[i])
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
	return dst
}

func (h *timerHeap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.pos(h.items[i]), *h.pos(h.items[j]) = i+1, j+1
}

func (h *timerHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts element i down and reports whether it moved.
func (h *timerHeap[T]) down(i int) bool {
	start := i
	for {
		c := 2*i + 1
		if c >= len(h.items) {
			break
		}
		if r := c + 1; r < len(h.items) && h.less(h.items[r], h.items[c]) {
			c = r
		}
		if !h.less(h.items[c], h.items[i]) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}
