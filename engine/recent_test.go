package engine

import (
	"strconv"
	"testing"
)

// The recent set remembers exactly the last n ids added, an id added twice
// as long as either copy is among them, and nothing when n is 0.
func TestRecentSet(t *testing.T) {
	s := newRecentSet(4)
	for i := range 6 {
		s.add(strconv.Itoa(i))
	}
	for i := range 6 {
		if want := i >= 2; s.has(strconv.Itoa(i)) != want {
			t.Errorf("has(%d) = %v, want %v", i, !want, want)
		}
	}
	fresh := newRecentSet(4)
	if s.has("") || s.has("6") || fresh.has("") {
		t.Error("has an id never added")
	}
	s.add("3") // a reused id: its older copy leaves the ring first
	s.add("x")
	s.add("y")
	if !s.has("3") {
		t.Error("forgot an id whose newer copy is in the ring")
	}
	s.add("") // an empty id is an id like any other
	if !s.has("") {
		t.Error("forgot the empty id")
	}
	empty := newRecentSet(0)
	empty.add("a")
	if empty.has("a") {
		t.Error("a set of size 0 remembers")
	}
}
