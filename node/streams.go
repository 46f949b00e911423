package node

// streamTable holds the open streams by the core's id of their request.
// The core numbers requests in sequence, so the live ones mostly fall in
// distinct slots of a direct-mapped table, and a lookup for every output
// costs an index and a compare; a request whose slot is taken goes to the
// overflow map.
type streamTable struct {
	slots []*Stream // slots[id % len(slots)]
	more  map[uint64]*Stream
	n     int
}

// streamSlots is the size of streamTable's direct-mapped part (a power of
// two).
const streamSlots = 4096

func newStreamTable() streamTable {
	return streamTable{slots: make([]*Stream, streamSlots), more: make(map[uint64]*Stream)}
}

func (t *streamTable) slot(id uint64) **Stream { return &t.slots[id&uint64(len(t.slots)-1)] }

func (t *streamTable) get(id uint64) *Stream {
	if s := *t.slot(id); s != nil && s.internal == id {
		return s
	}
	if len(t.more) == 0 {
		return nil
	}
	return t.more[id]
}

// put adds s under id (s.internal == id); id must not be in t.
func (t *streamTable) put(id uint64, s *Stream) {
	if p := t.slot(id); *p == nil {
		*p = s
	} else {
		t.more[id] = s
	}
	t.n++
}

func (t *streamTable) del(id uint64) {
	if p := t.slot(id); *p != nil && (*p).internal == id {
		*p = nil
		t.n--
	} else if _, ok := t.more[id]; ok {
		delete(t.more, id)
		t.n--
	}
}

func (t *streamTable) len() int { return t.n }
