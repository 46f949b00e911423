package engine

// recentSet remembers the last n ids added (a ring plus a set).
type recentSet struct {
	ring []string
	next int
	set  map[string]struct{}
}

func newRecentSet(n int) recentSet {
	return recentSet{ring: make([]string, n), set: make(map[string]struct{}, n)}
}

func (s *recentSet) add(id string) {
	if len(s.ring) == 0 {
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.set, old)
	}
	s.ring[s.next] = id
	s.set[id] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}

func (s *recentSet) has(id string) bool {
	_, ok := s.set[id]
	return ok
}
