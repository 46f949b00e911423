package node

import "testing"

// The stream table finds exactly the streams put and not deleted, whether
// they sit in the direct-mapped slots or, sharing a slot, in the overflow.
func TestStreamTable(t *testing.T) {
	tb := newStreamTable()
	want := map[uint64]*Stream{}
	ids := []uint64{1, 2, 1 + streamSlots, 1 + 2*streamSlots, 7, 7 + streamSlots, streamSlots}
	for _, id := range ids {
		s := &Stream{internal: id}
		tb.put(id, s)
		want[id] = s
	}
	check := func(when string) {
		t.Helper()
		if tb.len() != len(want) {
			t.Errorf("%s: len %d, want %d", when, tb.len(), len(want))
		}
		for _, id := range append(ids, 3, 3+streamSlots) {
			if got := tb.get(id); got != want[id] {
				t.Errorf("%s: get(%d) = %v, want %v", when, id, got, want[id])
			}
		}
	}
	check("after puts")
	for _, id := range []uint64{1, 7 + streamSlots, 99} { // a slot's holder, an overflow entry, an absent id
		tb.del(id)
		delete(want, id)
	}
	check("after deletes")
	s := &Stream{internal: 1 + 3*streamSlots} // takes the freed slot
	tb.put(s.internal, s)
	want[s.internal] = s
	check("after a put into a freed slot")
}
