package llamafile_test

import (
	"sync/atomic"
	"testing"

	"github.com/kvlease/kvlease/model/llamafile"
)

// countTask counts how often each unit runs and which workers ran units.
type countTask struct {
	units []atomic.Int32
	ids   []atomic.Int32
}

func (c *countTask) Do(id, i int) {
	c.units[i].Add(1)
	c.ids[id].Add(1)
}

// TestWorkersRunEachUnitOnce: every unit of every Run runs exactly once
// and by a worker of the pool, including Runs that use fewer helpers than
// the pool has and Runs after the helpers had time to fall asleep.
func TestWorkersRunEachUnitOnce(t *testing.T) {
	for _, size := range []int{1, 2, 3, 5} {
		w := llamafile.NewWorkers(size)
		for round := range 3000 {
			n := 1 + round%9
			c := &countTask{units: make([]atomic.Int32, n), ids: make([]atomic.Int32, size)}
			w.Run(n, c)
			for i := range c.units {
				if got := c.units[i].Load(); got != 1 {
					t.Fatalf("pool of %d, Run %d of %d units: unit %d ran %d times", size, round, n, i, got)
				}
			}
			if round%500 == 0 {
				// Long enough between Runs for the helpers to sleep.
				for range 200 {
					w.Run(1, c)
				}
				x := 0
				for i := range 1 << 22 {
					x += i
				}
				if x == 0 {
					t.Fatal("the loop did not run")
				}
			}
		}
		w.Close()
	}
}

// slowTask's units spin for a while before they count themselves done,
// some long enough for the caller to stop polling and sleep.
type slowTask struct {
	units []atomic.Int32
	spin  int
}

func (s *slowTask) Do(id, i int) {
	x := 0
	for k := range s.spin * (1 + i%3) {
		x += k
	}
	if x >= 0 { // always: keeps the loop
		s.units[i].Add(1)
	}
}

// TestWorkersWaitForSlowHelpers: Run returns only after every unit is
// done, over many Runs whose helpers outlast the caller's polling (so the
// caller sleeps on done) mixed with quick ones, in a pool larger than the
// machine's cores, so helpers are preempted anywhere.
func TestWorkersWaitForSlowHelpers(t *testing.T) {
	w := llamafile.NewWorkers(5)
	defer w.Close()
	for round := range 2000 {
		n := 2 + round%7
		s := &slowTask{units: make([]atomic.Int32, n), spin: []int{0, 1 << 10, 1 << 16}[round%3]}
		w.Run(n, s)
		for i := range s.units {
			if got := s.units[i].Load(); got != 1 {
				t.Fatalf("Run %d of %d units: unit %d done %d times when Run returned", round, n, i, got)
			}
		}
	}
}
