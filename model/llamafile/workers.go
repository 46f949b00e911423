package llamafile

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/kvlease/kvlease/model/llama"
)

// Workers is a llama.Runner over a fixed set of goroutines: the caller is
// worker 0 and n-1 goroutines are the others. Units are handed out by an
// atomic counter, so the split adapts to the load; which worker runs a unit
// never changes its result (llama.Task's contract). Run allocates nothing.
// Workers must be closed. Run is not safe for concurrent use (one executor
// owns it).
type Workers struct {
	n     int
	start []chan struct{}
	wg    sync.WaitGroup
	task  llama.Task
	units int
	next  atomic.Int64
	quit  chan struct{}
}

// NewWorkers starts a pool of n workers (n ≤ 0: GOMAXPROCS).
func NewWorkers(n int) *Workers {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	w := &Workers{n: n, quit: make(chan struct{})}
	for i := 1; i < n; i++ {
		c := make(chan struct{})
		w.start = append(w.start, c)
		go w.loop(i, c)
	}
	return w
}

// Workers is the pool's size.
func (w *Workers) Workers() int { return w.n }

// Run runs t's n units over the pool and returns when all are done.
func (w *Workers) Run(n int, t llama.Task) {
	if w.n == 1 || n == 1 {
		for i := 0; i < n; i++ {
			t.Do(0, i)
		}
		return
	}
	w.task, w.units = t, n
	w.next.Store(0)
	helpers := min(len(w.start), n-1)
	w.wg.Add(helpers)
	for _, c := range w.start[:helpers] {
		c <- struct{}{}
	}
	w.work(0)
	w.wg.Wait()
	w.task = nil
}

func (w *Workers) work(id int) {
	for {
		i := int(w.next.Add(1) - 1)
		if i >= w.units {
			return
		}
		w.task.Do(id, i)
	}
}

func (w *Workers) loop(id int, start chan struct{}) {
	for {
		select {
		case <-start:
			w.work(id)
			w.wg.Done()
		case <-w.quit:
			return
		}
	}
}

// Close stops the goroutines.
func (w *Workers) Close() { close(w.quit) }
