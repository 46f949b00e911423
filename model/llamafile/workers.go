package llamafile

import (
	"runtime"
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
// up to spinLimit polls before they sleep on a channel (the handshake in
// helper and finish), as llama.cpp's thread pool polls between operations.
type Workers struct {
	n     int
	task  llama.Task
	units int
	next  atomic.Int64
	// gen is the count of Runs (and Close) times genActive, plus how many
	// helpers the latest Run uses (one word, so that a helper reads both
	// at once). pending is how many of them have not finished it, plus
	// waitBit once the caller sleeps on done waiting for them (one word,
	// so that the helper whose decrement ends the Run knows at that
	// instant whether the caller waits: see finish).
	gen     atomic.Uint64
	pending atomic.Int64
	closed  atomic.Bool
	// helpers[i-1] is helper i's sleeping state and wake channel.
	helpers []helperState
	done    chan struct{}
}

// waitBit is pending's flag for a caller asleep on done.
const waitBit = 1 << 32

// helperState: asleep is set by a helper about to sleep on wake; whoever
// clears it (the helper itself, or Run) decides who sends on wake.
type helperState struct {
	asleep atomic.Bool
	wake   chan struct{}
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
	w := &Workers{n: n, done: make(chan struct{}, 1)}
	w.helpers = make([]helperState, n-1)
	for i := range w.helpers {
		w.helpers[i].wake = make(chan struct{}, 1)
		go w.helper(i + 1)
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
	active := min(len(w.helpers), n-1)
	w.pending.Store(int64(active))
	w.gen.Store((w.gen.Load()/genActive+1)*genActive + uint64(active))
	for i := range w.helpers[:active] {
		if h := &w.helpers[i]; h.asleep.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
	w.work(0)
	w.finish()
	w.task = nil
}

// finish waits for the Run's helpers: polling, then asleep on done. The
// caller's flag and the helpers' count share one word, so exactly one of
// two things happens: the caller sets waitBit after the last helper's
// decrement (it sees the count at 0 and does not sleep), or the last
// helper's decrement finds waitBit set (it sends on done). Either way no
// helper of this Run acts on the flag after the Run returns. (With a
// separate flag, a helper that had counted itself out but not yet looked
// at the flag could find the next Run's caller waiting, wake it before
// that Run's helpers were done, and leave the count of the Run after it
// wrong: a Run that never returned, seen under -race.)
func (w *Workers) finish() {
	for i := range spinLimit {
		if w.pending.Load() == 0 {
			return
		}
		yield(i)
	}
	if w.pending.Add(waitBit) == waitBit {
		return // every helper had finished: none sends
	}
	<-w.done
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
// on its wake channel), works on it if the Run uses it, and counts itself
// out of pending.
func (w *Workers) helper(id int) {
	h := &w.helpers[id-1]
	seen := uint64(0)
	for {
		g := w.gen.Load()
		for i := 0; g == seen && i < spinLimit; i++ {
			yield(i)
			g = w.gen.Load()
		}
		if g == seen {
			h.asleep.Store(true)
			if g = w.gen.Load(); g != seen && h.asleep.CompareAndSwap(true, false) {
				// A Run began before Run could see asleep: no send comes.
			} else {
				<-h.wake
				g = w.gen.Load()
			}
		}
		seen = g
		if w.closed.Load() {
			return
		}
		if uint64(id) > g%genActive {
			continue
		}
		w.work(id)
		if w.pending.Add(-1) == waitBit {
			w.done <- struct{}{} // the last helper, and the caller sleeps
		}
	}
}

// Close stops the goroutines.
func (w *Workers) Close() {
	w.closed.Store(true)
	w.gen.Add(genActive)
	for i := range w.helpers {
		if h := &w.helpers[i]; h.asleep.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
}
