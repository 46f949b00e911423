package idtable

import (
	"math/rand/v2"
	"testing"
)

// TestTableMatchesMap runs random puts, deletes and gets on a small table
// (so slots collide and the overflow is used) and on a map, and compares
// every answer, the length and the iteration.
func TestTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := New[int](8)
	ref := map[uint64]*int{}
	next := uint64(0)
	for op := range 20000 {
		switch k := rng.IntN(3); {
		case k == 0 || len(ref) == 0:
			next += uint64(1 + rng.IntN(3))
			v := new(int)
			*v = op
			tab.Put(next, v)
			ref[next] = v
		case k == 1:
			id := next - uint64(rng.IntN(20))
			tab.Delete(id)
			delete(ref, id)
		default:
			id := next - uint64(rng.IntN(20))
			if got, want := tab.Get(id), ref[id]; got != want {
				t.Fatalf("op %d: Get(%d) = %p, want %p", op, id, got, want)
			}
		}
		if tab.Len() != len(ref) {
			t.Fatalf("op %d: Len %d, want %d", op, tab.Len(), len(ref))
		}
		if op%97 == 0 {
			seen := 0
			for id, v := range tab.All() {
				if ref[id] != v {
					t.Fatalf("op %d: All yields %d=%p, want %p", op, id, v, ref[id])
				}
				seen++
			}
			if seen != len(ref) {
				t.Fatalf("op %d: All yields %d ids, want %d", op, seen, len(ref))
			}
		}
	}
	if len(tab.more) == 0 {
		t.Fatal("the overflow map was never used: the test does not exercise collisions")
	}
}

func TestNewRefusesNonPowerOfTwo(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(12) did not panic")
		}
	}()
	New[int](12)
}
