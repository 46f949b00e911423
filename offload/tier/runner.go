package tier

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
)

// Runner errors.
var (
	// ErrQueueFull: QueueLen jobs are submitted and not yet received as
	// completions. Retry after receiving some.
	ErrQueueFull = errors.New("tier: runner queue full")
	// ErrClosed: Submit after Close, or a queued job cancelled by Close.
	ErrClosed = errors.New("tier: runner closed")
)

// JobKind says which way a job copies.
type JobKind uint8

const (
	// JobStore copies the caller's buffers into the tier.
	JobStore JobKind = iota + 1
	// JobLoad copies the tier into the caller's buffers.
	JobLoad
)

func (k JobKind) String() string {
	switch k {
	case JobStore:
		return "store"
	case JobLoad:
		return "load"
	}
	return fmt.Sprintf("JobKind(%d)", k)
}

// Copy is one block of a job. Digests and Data are the source of a store
// and the destination of a load; the caller keeps them alive and does not
// touch them until the job's Completion arrives.
type Copy struct {
	Slot    offload.Slot
	Hash    kvblock.Hash
	Digests []uint64
	Data    []byte
}

// Job is a batch of block copies in one direction.
type Job struct {
	// ID is the caller's name for the job, echoed in its Completion.
	ID     uint64
	Kind   JobKind
	Copies []Copy
}

// Completion reports the end of one job. Every submitted job gets exactly
// one.
type Completion struct {
	JobID uint64
	// Kind is the job's kind, so a caller can route the completion
	// (offload.Coordinator.StoreDone or LoadDone) without a lookup.
	Kind JobKind
	// OK: every copy of the job succeeded.
	OK bool
	// Err says why not: ErrMiss (a load found no valid record), ErrClosed
	// (cancelled by Close before it started), or the Store's error.
	Err error
	// Copied is the number of leading copies that succeeded, so a failed
	// load can still use the prefix it brought in.
	Copied int
}

// RunnerConfig sizes a Runner.
type RunnerConfig struct {
	// Workers is the number of goroutines copying, in [1, 64].
	Workers int
	// QueueLen bounds the jobs submitted whose completion has not been
	// received yet, in [1, 65536].
	QueueLen int
}

// DefaultRunnerConfig: two workers (a copy is memory- or disk-bound; more
// rarely help) and room for 64 jobs.
func DefaultRunnerConfig() RunnerConfig { return RunnerConfig{Workers: 2, QueueLen: 64} }

// Validate reports the first problem with c.
func (c RunnerConfig) Validate() error {
	switch {
	case c.Workers < 1 || c.Workers > 64:
		return fmt.Errorf("tier: Workers must be in [1, 64], got %d", c.Workers)
	case c.QueueLen < 1 || c.QueueLen > 1<<16:
		return fmt.Errorf("tier: QueueLen must be in [1, %d], got %d", 1<<16, c.QueueLen)
	}
	return nil
}

// Runner executes copy jobs against a Store on a small pool of workers.
//
// Bound: a job counts against QueueLen from Submit until its Completion is
// received from Completions. So the completion channel (capacity QueueLen)
// always has room and a worker never blocks on it, and a caller that stops
// receiving sees ErrQueueFull instead of a hang.
//
// Submit and Close are safe for concurrent use.
type Runner struct {
	store Store
	cfg   RunnerConfig
	jobs  chan Job
	done  chan Completion

	mu      sync.Mutex
	pending int // submitted, completion not yet sent; pending + len(done) ≤ QueueLen
	closed  bool
	// doneClosed: Close closed done (after the workers exited).
	doneClosed bool

	stopping atomic.Bool // set by Close: queued jobs are cancelled
	wg       sync.WaitGroup
}

// NewRunner starts cfg.Workers workers over store.
func NewRunner(store Store, cfg RunnerConfig) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{
		store: store,
		cfg:   cfg,
		jobs:  make(chan Job, cfg.QueueLen),
		done:  make(chan Completion, cfg.QueueLen),
	}
	r.wg.Add(cfg.Workers)
	for range cfg.Workers {
		go r.work()
	}
	return r, nil
}

// Completions delivers one Completion per submitted job, in completion
// order. It is closed after Close, once every job's completion is in it.
func (r *Runner) Completions() <-chan Completion { return r.done }

// Submit queues a job without blocking. It returns ErrQueueFull at the
// bound, ErrClosed after Close, and an error for a job of unknown kind;
// on error the job is not queued and no completion will come.
func (r *Runner) Submit(j Job) error {
	if j.Kind != JobStore && j.Kind != JobLoad {
		return fmt.Errorf("tier: job %d has bad kind %d", j.ID, j.Kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.pending+len(r.done) >= r.cfg.QueueLen {
		return ErrQueueFull
	}
	r.pending++
	r.jobs <- j // cannot block: queued ≤ pending ≤ QueueLen
	return nil
}

func (r *Runner) work() {
	defer r.wg.Done()
	for j := range r.jobs {
		var c Completion
		if r.stopping.Load() {
			c = Completion{JobID: j.ID, Kind: j.Kind, Err: ErrClosed}
		} else {
			c = r.run(j)
		}
		r.mu.Lock()
		r.pending--
		r.done <- c // cannot block: pending + len(done) ≤ QueueLen held before
		r.mu.Unlock()
	}
}

func (r *Runner) run(j Job) Completion { return Run(r.store, j) }

// Run executes job j against store on the calling goroutine and returns its
// completion: the copies in order, stopping at the first that fails. The
// Runner's workers use it; a deterministic simulation or a test can call it
// directly.
func Run(store Store, j Job) Completion {
	c := Completion{JobID: j.ID, Kind: j.Kind}
	if j.Kind != JobStore && j.Kind != JobLoad {
		c.Err = fmt.Errorf("tier: job %d has bad kind %d", j.ID, j.Kind)
		return c
	}
	for i, cp := range j.Copies {
		var err error
		switch j.Kind {
		case JobStore:
			err = store.Write(cp.Slot, cp.Hash, cp.Digests, cp.Data)
		case JobLoad:
			var ok bool
			ok, err = store.Read(cp.Slot, cp.Hash, cp.Digests, cp.Data)
			if !ok && err == nil {
				err = fmt.Errorf("%w: slot %d, block %x", ErrMiss, cp.Slot, cp.Hash)
			}
		}
		if err != nil {
			c.Err = fmt.Errorf("copy %d of job %d (%v): %w", i, j.ID, j.Kind, err)
			return c
		}
		c.Copied++
	}
	c.OK = true
	return c
}

// Close stops accepting jobs, cancels queued jobs that have not started
// (their completions carry ErrClosed), waits for running ones, and closes
// Completions. Every job submitted before Close has its completion in the
// channel when Close returns. Close is idempotent.
func (r *Runner) Close() {
	r.stop()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.doneClosed {
		close(r.done)
		r.doneClosed = true
	}
}

func (r *Runner) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.stopping.Store(true)
	close(r.jobs)
}
