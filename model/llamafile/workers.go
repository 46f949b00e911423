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
//
// A decode step runs a few hundred short Runs (one per matrix, each well
// under a millisecond), so handing work over costs what a goroutine's wake
// costs: the helpers and the caller wait by polling an atomic counter for
// up to spinLimit polls, as llama.cpp's thread pool polls between
// operations, and only then sleep on a condition variable. Sleeping is
// the plain mutex-and-condition pattern: a sleeper counts itself in
// sleepers and re-checks its condition under mu before it waits; the side
// that changes the condition (an atomic store) then reads sleepers and,
// when someone sleeps or is about to, broadcasts under mu. With
// sequentially consistent atomics one of the two sees the other, so no
// wake is lost and no wake is needed beyond the condition itself.
type Workers struct {
	n     int
	task  llama.Task
	units int
	next  atomic.Int64
	// gen is the count of Runs (and Close) times genActive, plus how many
	// helpers the latest Run uses (one word, so that a helper reads both
	// at once). pending is how many of them have not finished it.
	gen     atomic.Uint64
	pending atomic.Int64
	closed  atomic.Bool
	// sleepers counts the goroutines asleep (or about to be) on runs (the
	// helpers, waiting for gen to change) or on done (the caller, waiting
	// for pending to reach 0).
	sleepers atomic.Int32
	mu       sync.Mutex
	runs     sync.Cond
	done     sync.Cond
}

// genActive is gen's unit: Runs above, the Run's helpers below.
const genActive = 1 << 16

// spinLimit is how many polls a waiting worker makes before it sleeps
// (tens of microseconds: longer than the element-wise work between two
// matrices of a step, shorter than the gap between steps).
const spinLimit = 1 << 15

// yield lets the other goroutines of a polling worker's P run every 256
// polls: a pool larger than GOMAXPROCS (or several pools in one process)
// must not hold the Ps its working members need until preemption.
func yield(i int) {
	if i%256 == 255 {
		runtime.Gosched()
	}
}

// NewWorkers starts a pool of n workers (n ≤ 0: GOMAXPROCS).
func NewWorkers(n int) *Workers {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	w := &Workers{n: n}
	w.runs.L, w.done.L = &w.mu, &w.mu
	for id := 1; id < n; id++ {
		go w.helper(id)
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
	active := min(w.n-1, n-1)
	w.pending.Store(int64(active))
	w.gen.Store((w.gen.Load()/genActive+1)*genActive + uint64(active))
	w.wake(&w.runs)
	w.work(0)
	w.finish()
	w.task = nil
}

// wake wakes the sleepers of c after the change they wait for was stored
// (or finds none: each re-checks under mu before it sleeps).
func (w *Workers) wake(c *sync.Cond) {
	if w.sleepers.Load() > 0 {
		w.mu.Lock()
		c.Broadcast()
		w.mu.Unlock()
	}
}

// finish waits for the Run's helpers: polling, then asleep on done.
func (w *Workers) finish() {
	for i := range spinLimit {
		if w.pending.Load() == 0 {
			return
		}
		yield(i)
	}
	w.mu.Lock()
	w.sleepers.Add(1)
	for w.pending.Load() != 0 {
		w.done.Wait()
	}
	w.sleepers.Add(-1)
	w.mu.Unlock()
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

// helper is worker id: it waits for the next Run (polling gen, then asleep
// on runs), works on it if the Run uses it, and counts itself out of
// pending.
func (w *Workers) helper(id int) {
	seen := uint64(0)
	for {
		g := w.gen.Load()
		for i := 0; g == seen && i < spinLimit; i++ {
			yield(i)
			g = w.gen.Load()
		}
		if g == seen {
			w.mu.Lock()
			w.sleepers.Add(1)
			for g = w.gen.Load(); g == seen; g = w.gen.Load() {
				w.runs.Wait()
			}
			w.sleepers.Add(-1)
			w.mu.Unlock()
		}
		seen = g
		if w.closed.Load() {
			return
		}
		if uint64(id) > g%genActive {
			continue
		}
		w.work(id)
		if w.pending.Add(-1) == 0 {
			w.wake(&w.done)
		}
	}
}

// Close stops the goroutines.
func (w *Workers) Close() {
	w.closed.Store(true)
	w.gen.Add(genActive)
	w.wake(&w.runs)
}
