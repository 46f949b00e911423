package engine

// requestSlots is the size of the direct-mapped front of Core.byID (a
// power of two). The core numbers requests in sequence, so the live ones
// mostly have distinct slots, and the lookup of every step outcome
// (Complete) costs an index and a compare instead of a map access.
const requestSlots = 1024

func (c *Core) slot(id uint64) **request { return &c.slots[id&uint64(len(c.slots)-1)] }

// putReq adds r to byID and, if its slot is free, to the front.
func (c *Core) putReq(r *request) {
	c.byID[r.ID] = r
	if p := c.slot(r.ID); *p == nil {
		*p = r
	}
}

// delReq removes r from byID and the front.
func (c *Core) delReq(r *request) {
	delete(c.byID, r.ID)
	if p := c.slot(r.ID); *p == r {
		*p = nil
	}
}

// lookup is byID[id]: from the front when the request holds its slot.
func (c *Core) lookup(id uint64) *request {
	if r := *c.slot(id); r != nil && r.ID == id {
		return r
	}
	return c.byID[id]
}
