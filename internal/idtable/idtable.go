// Package idtable maps the uint64 ids an engine numbers its requests with
// (in sequence) to pointers, for lookups on every step of every request
// (pure). A power-of-two direct-mapped table takes each id in slot
// id mod size, so the live ids, being recent, mostly hold distinct slots
// and a lookup costs an index and a compare; an id whose slot is taken goes
// to an overflow map.
package idtable

import "iter"

type entry[V any] struct {
	id uint64
	v  *V // nil: the slot is free
}

// Table maps ids to non-nil *V. The zero value is not usable: make one
// with New.
type Table[V any] struct {
	slots []entry[V]
	more  map[uint64]*V
	n     int
}

// New returns an empty table with slots direct-mapped slots (a power of
// two).
func New[V any](slots int) Table[V] {
	if slots <= 0 || slots&(slots-1) != 0 {
		panic("idtable: slots must be a power of two")
	}
	return Table[V]{slots: make([]entry[V], slots), more: make(map[uint64]*V)}
}

func (t *Table[V]) slot(id uint64) *entry[V] { return &t.slots[id&uint64(len(t.slots)-1)] }

// Get returns the value of id, or nil.
func (t *Table[V]) Get(id uint64) *V {
	if e := t.slot(id); e.v != nil && e.id == id {
		return e.v
	}
	if len(t.more) == 0 {
		return nil
	}
	return t.more[id]
}

// Put adds v (non-nil) under id, which must not be in t.
func (t *Table[V]) Put(id uint64, v *V) {
	if e := t.slot(id); e.v == nil {
		*e = entry[V]{id: id, v: v}
	} else {
		t.more[id] = v
	}
	t.n++
}

// Delete removes id; an id not in t is a no-op.
func (t *Table[V]) Delete(id uint64) {
	if e := t.slot(id); e.v != nil && e.id == id {
		*e = entry[V]{}
		t.n--
	} else if _, ok := t.more[id]; ok {
		delete(t.more, id)
		t.n--
	}
}

// Len is the number of ids in t.
func (t *Table[V]) Len() int { return t.n }

// All yields every id and its value: those in slots by slot, then the
// overflow in no particular order. t must not change during the loop.
func (t *Table[V]) All() iter.Seq2[uint64, *V] {
	return func(yield func(uint64, *V) bool) {
		for i := range t.slots {
			if e := &t.slots[i]; e.v != nil && !yield(e.id, e.v) {
				return
			}
		}
		for id, v := range t.more {
			if !yield(id, v) {
				return
			}
		}
	}
}
