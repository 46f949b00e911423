package tier

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
)

// waitTimeout bounds every wait on a channel: a hang fails the test instead
// of timing out the whole run. No test sleeps.
const waitTimeout = 10 * time.Second

func receive(t *testing.T, r *Runner) Completion {
	t.Helper()
	select {
	case c, ok := <-r.Completions():
		if !ok {
			t.Fatal("completions closed")
		}
		return c
	case <-time.After(waitTimeout):
		t.Fatal("no completion within the deadline")
	}
	return Completion{}
}

func receiveN(t *testing.T, r *Runner, n int) map[uint64]Completion {
	t.Helper()
	got := map[uint64]Completion{}
	for range n {
		c := receive(t, r)
		if _, dup := got[c.JobID]; dup {
			t.Fatalf("two completions for job %d", c.JobID)
		}
		got[c.JobID] = c
	}
	return got
}

// gated wraps a Store: every Write announces itself on started and waits
// for gate to close, so a test controls exactly which jobs are running.
type gated struct {
	Store
	started chan uint64
	gate    chan struct{}
}

func newGated(t *testing.T) *gated {
	m, err := NewMemory(testGeometry)
	if err != nil {
		t.Fatal(err)
	}
	return &gated{Store: m, started: make(chan uint64, 100), gate: make(chan struct{})}
}

func (g *gated) Write(slot offload.Slot, h kvblock.Hash, d []uint64, b []byte) error {
	g.started <- binary.LittleEndian.Uint64(h[:])
	<-g.gate
	return g.Store.Write(slot, h, d, b)
}

func storeJob(id uint64, slot offload.Slot) Job {
	d, b := block(testGeometry, th(uint64(id)))
	return Job{ID: id, Kind: JobStore, Copies: []Copy{{Slot: slot, Hash: th(uint64(id)), Digests: d, Data: b}}}
}

func TestRunnerStoreAndLoad(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			r, err := NewRunner(s, RunnerConfig{Workers: 2, QueueLen: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			// One store job of three blocks.
			job := Job{ID: 1, Kind: JobStore}
			for slot := range offload.Slot(3) {
				d, b := block(testGeometry, th(uint64(10+slot)))
				job.Copies = append(job.Copies, Copy{Slot: slot, Hash: th(uint64(10 + slot)), Digests: d, Data: b})
			}
			if err := r.Submit(job); err != nil {
				t.Fatal(err)
			}
			if c := receive(t, r); c != (Completion{JobID: 1, Kind: JobStore, OK: true, Copied: 3}) {
				t.Fatalf("store completion %+v", c)
			}
			// Load them back into fresh buffers; then a load whose fourth
			// block was never stored (slot 3).
			load := Job{ID: 2, Kind: JobLoad}
			for slot := range offload.Slot(3) {
				d, b := buffers(testGeometry)
				load.Copies = append(load.Copies, Copy{Slot: slot, Hash: th(uint64(10 + slot)), Digests: d, Data: b})
			}
			miss := Job{ID: 3, Kind: JobLoad} // own buffers: jobs run concurrently
			for slot := range offload.Slot(4) {
				d, b := buffers(testGeometry)
				miss.Copies = append(miss.Copies, Copy{Slot: slot, Hash: th(uint64(10 + slot)), Digests: d, Data: b})
			}
			for _, j := range []Job{load, miss} {
				if err := r.Submit(j); err != nil {
					t.Fatal(err)
				}
			}
			got := receiveN(t, r, 2)
			if c := got[2]; !c.OK || c.Err != nil || c.Copied != 3 {
				t.Fatalf("load completion %+v", c)
			}
			for i, cp := range load.Copies {
				wd, wb := block(testGeometry, cp.Hash)
				if !slices.Equal(cp.Digests, wd) || !slices.Equal(cp.Data, wb) {
					t.Fatalf("loaded block %d differs", i)
				}
			}
			if c := got[3]; c.OK || !errors.Is(c.Err, ErrMiss) || c.Copied != 3 {
				t.Fatalf("missing-block load completion %+v; want ErrMiss after 3 copies", c)
			}
			if err := r.Submit(Job{ID: 4, Kind: 9}); err == nil {
				t.Fatal("Submit accepted a job of unknown kind")
			}
			if n := len(r.Completions()); n != 0 {
				t.Fatalf("%d unexpected completions", n)
			}
		})
	}
}

// TestRunnerQueueFull: QueueLen bounds submitted jobs whose completion has
// not been received — queued, running or sitting in the channel. At the
// bound Submit fails at once; receiving makes room.
func TestRunnerQueueFull(t *testing.T) {
	g := newGated(t)
	r, err := NewRunner(g, RunnerConfig{Workers: 1, QueueLen: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for id := range uint64(3) {
		if err := r.Submit(storeJob(id+1, offload.Slot(id))); err != nil {
			t.Fatalf("job %d: %v", id+1, err)
		}
	}
	if err := r.Submit(storeJob(4, 3)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("4th job with one running and two queued: %v, want ErrQueueFull", err)
	}
	close(g.gate) // let every write finish
	// Completions not yet received still count: the runner is still full,
	// whatever the workers have done by now.
	if err := r.Submit(storeJob(4, 3)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("with three unreceived completions: %v, want ErrQueueFull", err)
	}
	got := receiveN(t, r, 3)
	for id := range uint64(3) {
		if c := got[id+1]; !c.OK {
			t.Fatalf("job %d: %+v", id+1, c)
		}
	}
	for id := uint64(4); id < 7; id++ {
		if err := r.Submit(storeJob(id, offload.Slot(id%4))); err != nil {
			t.Fatalf("after receiving, job %d: %v", id, err)
		}
	}
	receiveN(t, r, 3)
}

// TestRunnerClose: Close lets the running job finish, cancels queued jobs
// with ErrClosed, rejects later submissions, and closes Completions after
// exactly one completion per submitted job.
func TestRunnerClose(t *testing.T) {
	g := newGated(t)
	r, err := NewRunner(g, RunnerConfig{Workers: 1, QueueLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		if err := r.Submit(storeJob(id, offload.Slot(id))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case h := <-g.started:
		if h != 1 {
			t.Fatalf("job %d started first", h)
		}
	case <-time.After(waitTimeout):
		t.Fatal("job 1 did not start")
	}
	r.stop() // the first half of Close: job 1 is running, 2 and 3 queued
	if err := r.Submit(storeJob(9, 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v, want ErrClosed", err)
	}
	close(g.gate)
	closed := make(chan struct{})
	go func() {
		r.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("Close did not return")
	}
	var got []Completion
	for c := range r.Completions() { // closed by Close: the loop ends
		got = append(got, c)
	}
	want := []Completion{{JobID: 1, Kind: JobStore, OK: true, Copied: 1}, {JobID: 2, Kind: JobStore, Err: ErrClosed}, {JobID: 3, Kind: JobStore, Err: ErrClosed}}
	if !slices.Equal(got, want) {
		t.Fatalf("completions %+v, want %+v", got, want)
	}
	dst, buf := buffers(testGeometry)
	if ok, _ := g.Read(1, th(1), dst, buf); !ok {
		t.Fatal("the running job's write was lost")
	}
	if ok, _ := g.Read(2, th(2), dst, buf); ok {
		t.Fatal("a cancelled job wrote")
	}
	r.Close() // idempotent
}

func TestRunnerConfigValidate(t *testing.T) {
	if err := DefaultRunnerConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []RunnerConfig{{Workers: 0, QueueLen: 1}, {Workers: 65, QueueLen: 1}, {Workers: 1, QueueLen: 0}, {Workers: 1, QueueLen: 1 << 17}} {
		if _, err := NewRunner(nil, c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if JobLoad.String() != "load" || JobKind(7).String() != "JobKind(7)" {
		t.Error("JobKind.String")
	}
}
