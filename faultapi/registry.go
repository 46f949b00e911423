package faultapi

import (
	"errors"
	"math/rand/v2"
	"path"
	"strconv"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// DefaultMaxActive is Registry's default bound on active faults.
const DefaultMaxActive = 64

// ErrFull is Add's error when the registry holds its maximum of faults.
var ErrFull = errors.New("fault: too many active faults")

// Fault is an active fault, as List reports it.
type Fault struct {
	ID    uint64
	Spec  Spec
	Added clock.Instant
	// Until is when the fault is removed (Scope.Duration after Added), or
	// clock.Never.
	Until clock.Instant
	// Fired counts the requests the fault hit.
	Fired uint64
}

// AppendJSON appends f as the fault API lists it: its id, the spec, when
// it ends (ms from now; absent without a duration), and how often it fired.
func (f *Fault) AppendJSON(dst []byte, now clock.Instant) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendUint(dst, f.ID, 10)
	dst = append(dst, `,"spec":`...)
	dst = f.Spec.AppendJSON(dst)
	if f.Until != clock.Never {
		dst = append(dst, `,"remaining_ms":`...)
		dst = strconv.AppendInt(dst, max(f.Until.Sub(now), 0).Milliseconds(), 10)
	}
	dst = append(dst, `,"fired":`...)
	dst = strconv.AppendUint(dst, f.Fired, 10)
	return append(dst, '}')
}

// Registry holds the active faults, in the order they were added. Its
// zero value is not usable: use NewRegistry. Not safe for concurrent use.
type Registry struct {
	maxActive int
	faults    []Fault // by id, ascending
	nextID    uint64
}

// NewRegistry returns an empty registry holding at most maxActive faults
// (DefaultMaxActive when maxActive ≤ 0).
func NewRegistry(maxActive int) *Registry {
	if maxActive <= 0 {
		maxActive = DefaultMaxActive
	}
	return &Registry{maxActive: maxActive}
}

// Add adds the fault s at now and returns it; ErrFull when the registry
// holds its maximum (faults whose duration passed are removed first).
func (r *Registry) Add(now clock.Instant, s Spec) (Fault, error) {
	if !s.Kind.Valid() {
		panic("fault: Add of an invalid kind")
	}
	r.prune(now)
	if len(r.faults) >= r.maxActive {
		return Fault{}, ErrFull
	}
	r.nextID++
	f := Fault{ID: r.nextID, Spec: s, Added: now, Until: clock.Never}
	if s.Scope.Duration > 0 {
		f.Until = now.Add(s.Scope.Duration)
	}
	r.faults = append(r.faults, f)
	return f, nil
}

// Delete removes fault id and reports whether it was active.
func (r *Registry) Delete(id uint64) bool {
	for i := range r.faults {
		if r.faults[i].ID == id {
			r.faults = append(r.faults[:i], r.faults[i+1:]...)
			return true
		}
	}
	return false
}

// Clear removes every fault and returns how many there were.
func (r *Registry) Clear() int {
	n := len(r.faults)
	clear(r.faults)
	r.faults = r.faults[:0]
	return n
}

// List returns the active faults at now, by id; the caller owns the slice.
func (r *Registry) List(now clock.Instant) []Fault {
	r.prune(now)
	return append([]Fault(nil), r.faults...)
}

// Len is the number of faults held (some may have run out of time; List
// and Decide remove them).
func (r *Registry) Len() int { return len(r.faults) }

// prune removes the faults whose duration passed by now.
func (r *Registry) prune(now clock.Instant) {
	j := 0
	for _, f := range r.faults {
		if f.Until > now {
			r.faults[j] = f
			j++
		}
	}
	clear(r.faults[j:])
	r.faults = r.faults[:j]
}

// Request is what Decide knows of a request.
type Request struct {
	// ID is the request's X-Request-Id (or the id the engine gave it).
	ID string
	// Prefill: a prefill leg on an engine that grants leases; Decode: a
	// decode leg carrying a lease to pull.
	Prefill, Decode bool
}

func (q *Request) in(s Stage) bool {
	switch s {
	case PrefillLeg:
		return q.Prefill
	case DecodeLeg:
		return q.Decode
	}
	return true
}

// Firing is one fault hitting one request.
type Firing struct {
	ID   uint64
	Kind Kind
}

// Plan is what the faults that hit a request make happen; the zero value
// is "nothing". The edges carry it out.
type Plan struct {
	// Fired lists the faults that hit, in the order decided: for metrics
	// and logs. At most one fault of each kind hits a request.
	Fired []Firing

	// HTTPStatus > 0: answer with this error status at once (HTTPError).
	// RejectStatus > 0: the decode engine refuses the request with it and
	// tells P (RejectDecode). Either ends the request, so when one hits,
	// no other fault is considered.
	HTTPStatus, RejectStatus int
	// Latency: wait before serving.
	Latency time.Duration

	// Prefill leg: the lease's faults and the answer's.
	Expire, Revoke           bool
	ExpireAfter, RevokeAfter time.Duration
	RefuseReads              bool
	StallBlocks              time.Duration
	CorruptReads             int
	DelayAnswer              time.Duration
	DropAnswer               bool

	// Decode leg: the pull's faults.
	StopHeartbeats bool
	StallPull      time.Duration
	Fallback       bool
}

// Empty reports whether no fault hit.
func (p Plan) Empty() bool { return len(p.Fired) == 0 }

// Decide returns the plan of request q at now: every active fault whose
// kind applies to q's stage and whose request-id pattern matches q.ID hits
// it with probability Scope.Rate (one draw from rng per candidate with a
// rate strictly between 0 and 1, none otherwise), at most one fault of each
// kind, earliest added first. The faults that end the request (HTTPError,
// RejectDecode) are decided first; when one hits, nothing else is. A fault
// that hit its Count is removed; so is one whose duration passed.
func (r *Registry) Decide(now clock.Instant, rng *rand.Rand, q Request) Plan {
	var p Plan
	if len(r.faults) == 0 {
		return p
	}
	r.prune(now)
	var seen [numKinds]bool
	pass := func(terminal bool) {
		for i := range r.faults {
			f := &r.faults[i]
			k := f.Spec.Kind
			if seen[k] || (k == HTTPError || k == RejectDecode) != terminal || !q.in(k.Stage()) {
				continue
			}
			if f.Spec.Scope.Count > 0 && f.Fired >= uint64(f.Spec.Scope.Count) {
				continue // ran out in this very decision: removed below
			}
			if pat := f.Spec.Scope.RequestID; pat != "" {
				if ok, _ := path.Match(pat, q.ID); !ok {
					continue
				}
			}
			switch rate := f.Spec.Scope.Rate; {
			case rate <= 0:
				continue
			case rate < 1 && rng.Float64() >= rate:
				continue
			}
			seen[k] = true
			f.Fired++
			p.Fired = append(p.Fired, Firing{ID: f.ID, Kind: k})
			p.apply(&f.Spec)
		}
	}
	pass(true)
	if p.HTTPStatus == 0 && p.RejectStatus == 0 {
		pass(false)
	}
	if len(p.Fired) > 0 {
		r.dropSpent()
	}
	return p
}

// dropSpent removes the faults that hit their Count.
func (r *Registry) dropSpent() {
	j := 0
	for _, f := range r.faults {
		if f.Spec.Scope.Count == 0 || f.Fired < uint64(f.Spec.Scope.Count) {
			r.faults[j] = f
			j++
		}
	}
	clear(r.faults[j:])
	r.faults = r.faults[:j]
}

func (p *Plan) apply(s *Spec) {
	switch s.Kind {
	case ExpireLease:
		p.Expire, p.ExpireAfter = true, s.After
	case RevokeLease:
		p.Revoke, p.RevokeAfter = true, s.After
	case RefuseRead:
		p.RefuseReads = true
	case StallBlocks:
		p.StallBlocks = s.Delay
	case CorruptBlocks:
		p.CorruptReads = s.Reads
	case DelayPrefill:
		p.DelayAnswer = s.Delay
	case DropResponse:
		p.DropAnswer = true
	case StopHeartbeats:
		p.StopHeartbeats = true
	case RejectDecode:
		p.RejectStatus = s.Status
	case StallPull:
		p.StallPull = s.Delay
	case Fallback:
		p.Fallback = true
	case HTTPError:
		p.HTTPStatus = s.Status
	case Latency:
		p.Latency = s.Delay
	default:
		panic("fault: a plan for an invalid kind")
	}
}

// LeaseFaults are the plan's faults on a prefill leg's lease, for the
// producer (engine.Request.LeaseFaults). When both an expiry and a
// revocation hit, the earlier one ends the lease (the expiry on a tie).
func (p *Plan) LeaseFaults() xfer.LeaseFaults {
	lf := xfer.LeaseFaults{RefuseReads: p.RefuseReads, StallReads: p.StallBlocks, CorruptReads: p.CorruptReads}
	switch {
	case p.Expire && (!p.Revoke || p.ExpireAfter <= p.RevokeAfter):
		lf.EndReason, lf.EndAfter = wire.ReasonExpired, p.ExpireAfter
	case p.Revoke:
		lf.EndReason, lf.EndAfter = wire.ReasonAborted, p.RevokeAfter
	}
	return lf
}

// PullFaults are the plan's faults on a decode leg's pull, for the
// consumer (xfer.Remote.Faults).
func (p *Plan) PullFaults() xfer.PullFaults {
	return xfer.PullFaults{NoHeartbeats: p.StopHeartbeats, Stall: p.StallPull, Fallback: p.Fallback}
}
