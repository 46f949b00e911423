package engine

import (
	"testing"

	"github.com/kvlease/kvlease/sched"
)

// lookup finds exactly the requests in byID, those holding their slot and
// those whose slot another holds, before and after deletions.
func TestRequestLookup(t *testing.T) {
	c := &Core{byID: map[uint64]*request{}, slots: make([]*request, 4)}
	var rs []*request
	for _, id := range []uint64{1, 5, 9, 2, 6} { // 1, 5 and 9 share a slot, as do 2 and 6
		r := &request{Request: sched.Request{ID: id}}
		c.putReq(r)
		rs = append(rs, r)
	}
	check := func(when string, live map[uint64]*request) {
		t.Helper()
		for id := uint64(0); id < 12; id++ {
			if got := c.lookup(id); got != live[id] {
				t.Errorf("%s: lookup(%d) = %p, want %p", when, id, got, live[id])
			}
		}
	}
	live := map[uint64]*request{}
	for _, r := range rs {
		live[r.ID] = r
	}
	check("after puts", live)
	c.delReq(rs[0]) // 1, the holder of its slot
	c.delReq(rs[4]) // 6, not the holder
	delete(live, 1)
	delete(live, 6)
	check("after deletes", live)
	r := &request{Request: sched.Request{ID: 13}} // takes 1's freed slot
	c.putReq(r)
	live[13] = r
	check("after a put into a freed slot", live)
}
