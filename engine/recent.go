package engine

// recentSet remembers the last n ids added, in a ring. Adding is one store
// (every finished request adds its id); asking is a scan of the ring, which
// only an abort or stop of an id the core no longer knows does: a few
// microseconds for the thousands of ids an engine remembers, rather than
// two string-keyed map updates on every request.
type recentSet struct {
	ring   []string
	next   int
	filled int // ring[:filled] hold ids (all of it once it wrapped)
}

func newRecentSet(n int) recentSet {
	return recentSet{ring: make([]string, n)}
}

func (s *recentSet) add(id string) {
	if len(s.ring) == 0 {
		return
	}
	s.ring[s.next] = id
	s.filled = max(s.filled, s.next+1)
	if s.next++; s.next == len(s.ring) {
		s.next = 0
	}
}

func (s *recentSet) has(id string) bool {
	for _, r := range s.ring[:s.filled] {
		if r == id {
			return true
		}
	}
	return false
}
