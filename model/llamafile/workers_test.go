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
