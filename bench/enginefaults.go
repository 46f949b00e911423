package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// FaultAction is what a Fault does to one engine of a local cluster.
type FaultAction string

// The actions.
const (
	FaultKill    FaultAction = "kill"    // SIGKILL: a crash
	FaultRestart FaultAction = "restart" // start it again on the same ports and wait for /health
	FaultPause   FaultAction = "pause"   // SIGSTOP: a hang (the process keeps its sockets)
	FaultResume  FaultAction = "resume"  // SIGCONT
)

// repairs reports whether a undoes an earlier fault. A repair runs even
// when the load ends before its point, so that the cluster is whole again
// while it settles and when it is closed.
func (a FaultAction) repairs() bool { return a == FaultRestart || a == FaultResume }

// Fault is one action on one engine at a point of a run.
type Fault struct {
	// At is the point of the run, a share in [0, 1]: of Duration elapsed,
	// or of Requests done, whichever is further (see Progress).
	At     float64     `json:"at"`
	Action FaultAction `json:"action"`
	// Engine is the engine's index in the cluster (prefill engines first);
	// EngineName its name, for reports.
	Engine     int    `json:"engine"`
	EngineName string `json:"engine_name,omitempty"`
}

func (f Fault) String() string {
	name := f.EngineName
	if name == "" {
		name = fmt.Sprintf("engine %d", f.Engine)
	}
	return fmt.Sprintf("%s %s at %.0f%%", f.Action, name, f.At*100)
}

// FaultRecord is what became of a Fault.
type FaultRecord struct {
	Fault
	// AtSeconds is when it was done, since the start of the load;
	// TookSeconds how long the action took (a restart waits for /health).
	AtSeconds   float64 `json:"at_s"`
	TookSeconds float64 `json:"took_s"`
	// Skipped is set when the load ended before the fault's point (repairs
	// are never skipped).
	Skipped bool   `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (r FaultRecord) String() string {
	switch {
	case r.Skipped:
		return r.Fault.String() + ": skipped (the load ended first)"
	case r.Error != "":
		return fmt.Sprintf("%s: at %.2f s, failed: %s", r.Fault, r.AtSeconds, r.Error)
	}
	return fmt.Sprintf("%s: at %.2f s (took %.0f ms)", r.Fault, r.AtSeconds, r.TookSeconds*1e3)
}

// Faulter acts on the engines of a cluster by index. The cluster run's
// implementation uses package localcluster; tests use a fake.
type Faulter interface {
	Kill(i int) error
	Restart(ctx context.Context, i int) error
	Pause(i int) error
	Resume(i int) error
}

// validateFaults checks the faults of a cluster of n engines.
func validateFaults(faults []Fault, n int) error {
	for _, f := range faults {
		switch {
		case !(f.At >= 0 && f.At <= 1):
			return fmt.Errorf("bench: fault %s: At %v: want a share in [0, 1]", f, f.At)
		case f.Engine < 0 || f.Engine >= n:
			return fmt.Errorf("bench: fault %s: engine %d: the cluster has engines 0..%d", f, f.Engine, n-1)
		}
		switch f.Action {
		case FaultKill, FaultRestart, FaultPause, FaultResume:
		default:
			return fmt.Errorf("bench: fault %s: unknown action %q (want kill, restart, pause or resume)", f, f.Action)
		}
	}
	return nil
}

// runPoint is how far p is through its run, in [0, 1]: the larger of the
// share of Duration elapsed and the share of Requests done.
func runPoint(p Progress) float64 {
	var at float64
	if p.Duration > 0 {
		at = p.Elapsed.Seconds() / p.Duration.Seconds()
	}
	if p.Total > 0 {
		at = max(at, float64(p.Done)/float64(p.Total))
	}
	return min(at, 1)
}

// faultPlan hands out faults, in order of their points, as a run passes
// them. A fault also falls due when the run stalls short of its point:
// a hung or dead engine can hold every client of a run bounded by
// Requests, so that Done stops growing and the repair that would free
// them would never come. So once a fault has fallen due at point a after
// elapsed seconds, the run's pace is taken as elapsed/a seconds per unit
// of point, and the next fault also falls due that many seconds per unit
// of point after it, whatever the point then. (A run bounded by Duration
// has its points on the clock anyway.) It is pure and not safe for
// concurrent use.
type faultPlan struct {
	faults []Fault // sorted by At, ties in the given order
	next   int
	// pace is seconds per unit of point, 0 until a fault fell due at a
	// point above 0; lastAt and lastSeconds are the point and time of the
	// last fault handed out.
	pace                float64
	lastAt, lastSeconds float64
}

func newFaultPlan(faults []Fault) *faultPlan {
	fs := slices.Clone(faults)
	slices.SortStableFunc(fs, func(a, b Fault) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return &faultPlan{faults: fs}
}

// due returns the faults not handed out yet that fall due at p: their
// point is reached, or the time the run's pace gives them has passed.
func (p *faultPlan) due(pr Progress) []Fault {
	point, now := runPoint(pr), pr.Elapsed.Seconds()
	start := p.next
	for p.next < len(p.faults) {
		f := p.faults[p.next]
		byPoint := f.At <= point
		byTime := p.pace > 0 && now >= p.lastSeconds+(f.At-p.lastAt)*p.pace
		if !byPoint && !byTime {
			break
		}
		if byPoint && point > 0 {
			p.pace = now / point
		}
		p.lastAt, p.lastSeconds = f.At, now
		p.next++
	}
	return p.faults[start:p.next]
}

// rest returns the faults never handed out, split into the repairs (to be
// run now) and the others (skipped), and hands them all out.
func (p *faultPlan) rest() (repairs, skipped []Fault) {
	for _, f := range p.faults[p.next:] {
		if f.Action.repairs() {
			repairs = append(repairs, f)
		} else {
			skipped = append(skipped, f)
		}
	}
	p.next = len(p.faults)
	return repairs, skipped
}

// faultDriver runs a fault plan along a run: observe, fed with the run's
// progress, queues the faults that fall due; one goroutine does them one
// after the other, in order (a restart must follow its kill). Safe for
// concurrent use.
type faultDriver struct {
	target Faulter
	ctx    context.Context
	work   chan Fault // capacity: every fault, so observe never blocks
	done   chan struct{}

	mu       sync.Mutex
	plan     *faultPlan
	base     time.Time // the start of the load, learned from the first Progress
	records  []FaultRecord
	finished bool
}

// newFaultDriver starts the driver's worker; call finish to stop it.
func newFaultDriver(ctx context.Context, target Faulter, faults []Fault) *faultDriver {
	d := &faultDriver{target: target, ctx: ctx, plan: newFaultPlan(faults),
		work: make(chan Fault, len(faults)), done: make(chan struct{})}
	go d.loop()
	return d
}

// observe queues the faults that p's point reached. It does not block.
func (d *faultDriver) observe(p Progress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.finished {
		return
	}
	if d.base.IsZero() {
		d.base = time.Now().Add(-p.Elapsed)
	}
	for _, f := range d.plan.due(p) {
		d.work <- f
	}
}

// finish queues the repairs still pending, records the faults skipped,
// waits for the worker to do everything queued, and returns the records in
// the order the faults were done (skipped ones last).
func (d *faultDriver) finish() []FaultRecord {
	d.mu.Lock()
	if d.finished {
		d.mu.Unlock()
		<-d.done
		return d.records
	}
	d.finished = true
	repairs, skipped := d.plan.rest()
	for _, f := range repairs {
		d.work <- f
	}
	close(d.work)
	d.mu.Unlock()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range skipped {
		d.records = append(d.records, FaultRecord{Fault: f, Skipped: true})
	}
	return d.records
}

func (d *faultDriver) loop() {
	defer close(d.done)
	for f := range d.work {
		d.mu.Lock()
		base := d.base
		d.mu.Unlock()
		if base.IsZero() {
			base = time.Now()
		}
		start := time.Now()
		err := d.do(f)
		rec := FaultRecord{Fault: f, AtSeconds: start.Sub(base).Seconds(), TookSeconds: time.Since(start).Seconds()}
		if err != nil {
			rec.Error = err.Error()
		}
		d.mu.Lock()
		d.records = append(d.records, rec)
		d.mu.Unlock()
	}
}

func (d *faultDriver) do(f Fault) error {
	switch f.Action {
	case FaultKill:
		return d.target.Kill(f.Engine)
	case FaultRestart:
		// A restart is a repair: it must not be cut short by the end of
		// the load, only by the caller giving up.
		return d.target.Restart(d.ctx, f.Engine)
	case FaultPause:
		return d.target.Pause(f.Engine)
	case FaultResume:
		return d.target.Resume(f.Engine)
	}
	return fmt.Errorf("bench: unknown fault action %q", f.Action)
}
