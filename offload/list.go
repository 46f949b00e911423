package offload

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
)

// list is an intrusive doubly linked list of node ids whose links live in a
// links value shared by several lists: head is the least recent (next to
// evict), tail the most recent.
type list struct {
	head, tail int32
	n          int
}

var emptyList = list{head: nilNode, tail: nilNode}

type links struct{ prev, next []int32 }

func newLinks(n int) links {
	l := links{prev: make([]int32, n), next: make([]int32, n)}
	for i := range n {
		l.prev[i], l.next[i] = nilNode, nilNode
	}
	return l
}

func (k *links) pushBack(l *list, i int32) {
	k.prev[i], k.next[i] = l.tail, nilNode
	if l.tail != nilNode {
		k.next[l.tail] = i
	} else {
		l.head = i
	}
	l.tail = i
	l.n++
}

func (k *links) remove(l *list, i int32) {
	p, nx := k.prev[i], k.next[i]
	if p != nilNode {
		k.next[p] = nx
	} else {
		l.head = nx
	}
	if nx != nilNode {
		k.prev[nx] = p
	} else {
		l.tail = p
	}
	k.prev[i], k.next[i] = nilNode, nilNode
	l.n--
}

// tracker is the reuse filter's bounded LRU of lookup counts. Nodes are
// allocated on demand up to max and then recycled from the least recently
// seen hash, so memory stays within max entries.
type tracker struct {
	max    int
	index  map[kvblock.Hash]int32
	hash   []kvblock.Hash
	counts []uint32
	links  links
	order  list
}

func newTracker(maxSize int) tracker {
	return tracker{max: maxSize, index: make(map[kvblock.Hash]int32), order: emptyList}
}

// see counts one more lookup of h and makes it the most recently seen.
func (t *tracker) see(h kvblock.Hash) {
	if i, ok := t.index[h]; ok {
		if t.counts[i] < ^uint32(0) {
			t.counts[i]++
		}
		t.links.remove(&t.order, i)
		t.links.pushBack(&t.order, i)
		return
	}
	var i int32
	if len(t.hash) < t.max {
		i = int32(len(t.hash))
		t.hash = append(t.hash, h)
		t.counts = append(t.counts, 0)
		t.links.prev = append(t.links.prev, nilNode)
		t.links.next = append(t.links.next, nilNode)
	} else {
		i = t.order.head // forget the least recently seen hash
		t.links.remove(&t.order, i)
		delete(t.index, t.hash[i])
	}
	t.hash[i] = h
	t.counts[i] = 1
	t.index[h] = i
	t.links.pushBack(&t.order, i)
}

// count is how many times h was seen since it last entered the tracker.
func (t *tracker) count(h kvblock.Hash) int {
	if i, ok := t.index[h]; ok {
		return int(t.counts[i])
	}
	return 0
}

func (t *tracker) check() error {
	if t.index == nil {
		return nil // reuse filter off
	}
	if len(t.index) > t.max || len(t.hash) > t.max {
		return fmt.Errorf("offload: reuse tracker holds %d hashes (%d nodes), bound %d", len(t.index), len(t.hash), t.max)
	}
	seen := 0
	for i, prev := t.order.head, nilNode; i != nilNode; prev, i = i, t.links.next[i] {
		if t.links.prev[i] != prev {
			return fmt.Errorf("offload: reuse tracker link broken at node %d", i)
		}
		if j, ok := t.index[t.hash[i]]; !ok || j != i {
			return fmt.Errorf("offload: reuse tracker node %d not indexed", i)
		}
		if t.counts[i] == 0 {
			return fmt.Errorf("offload: reuse tracker node %d has count 0", i)
		}
		if seen++; seen > len(t.hash) {
			return fmt.Errorf("offload: reuse tracker list has a cycle")
		}
	}
	if seen != len(t.index) || seen != t.order.n || seen != len(t.hash) {
		return fmt.Errorf("offload: reuse tracker list %d, index %d, counted %d, nodes %d", seen, len(t.index), t.order.n, len(t.hash))
	}
	return nil
}
