package engine

import (
	"fmt"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/sched"
)

// The core's offload hooks: the scheduler's preemption and admission
// hooks, and the valve of loaded prefixes held until admission.

// onPreempt offers a preempted request's blocks to the offload policy
// (deferred by the coordinator to the next Take) before the scheduler
// drops its hold. Its next admission may load its prefix again.
func (c *Core) onPreempt(sr *sched.Request) {
	if r := c.byID.Get(sr.ID); r != nil {
		r.loaded = false
	}
	c.offload.Preempted(sr.ID, c.pool.Blocks(sr.Hold), sr.Hashes, sr.NumComputed)
}

// onAdmit is the scheduler's admission hook for a request without blocks:
// if the offload tiers hold blocks of its prefix that the pool misses, it
// is parked until they are loaded (LoadDone resumes it), and admitted then
// with them as cached blocks. Looked up here, not at Add: a prefix still
// in the pool at arrival is often evicted by admission.
//
// While other loads fill the coordinator's in-flight bound, a request whose
// prefix the tiers hold waits at the head of the queue (Defer) rather than
// being admitted to recompute it.
func (c *Core) onAdmit(sr *sched.Request) sched.Admission {
	r := c.byID.Get(sr.ID)
	if r == nil {
		return sched.Admit
	}
	c.admitted++
	if sr.Sampling.PromptLogprobs {
		return sched.Admit // computes its whole prompt: no prefix to load
	}
	if r.loaded {
		// Its loaded prefix, held since its loads ended, passes to the
		// request's own hold now.
		c.offload.Admitted(r.ID)
		return sched.Admit
	}
	// Requests loading or holding their loaded prefix take their seats
	// when they come back: a lookup now would load for a request that
	// waits for a seat behind them, its prefix held (or evicted) all the
	// while. Nothing is running, so admitting it is what makes progress.
	if pending := c.offload.NumLoading() + c.offload.NumHeld(); pending > 0 && c.sched.NumRunning() > 0 &&
		c.sched.NumRunning()+pending >= c.cfg.Sched.MaxNumSeqs {
		return sched.Defer
	}
	switch loading, wait := c.offload.LookupWaitAdapter(r.ID, r.Tokens, r.Hashes, r.Extras.Adapter); {
	case loading:
		r.loading = true
		return sched.Park
	case wait:
		// Not stuck for want of blocks: waiting for loads in flight.
		return sched.Defer
	}
	return sched.Admit
}

// heldLoadValve drops the loaded prefixes held for requests not yet
// admitted (offload.Coordinator.DropHeld) when they may stand in the way:
// the step preempted a request, or requests wait while the step had seats
// and token budget left and admitted none of them — the head of the queue
// lacked blocks, and the held prefixes of requests behind it may be what
// it lacks. So holds never block the head, and it waits at most one step
// for them; the dropped blocks stay cached.
func (c *Core) heldLoadValve(b *model.Batch, preemptions uint64) {
	tokens := 0
	for _, s := range b.Seqs {
		tokens += s.Count
	}
	stuck := c.sched.NumWaiting() > 0 && c.admitted == 0 &&
		len(b.Seqs) < c.cfg.Sched.MaxNumSeqs && tokens < c.cfg.Sched.MaxNumBatchedTokens
	if stuck || c.sched.Stats().Preemptions != preemptions {
		c.offload.DropHeld()
	}
}

// StoreDone reports the end of offload store work id (Ready.Stores): its
// first copied blocks were written to the tier (tier.Completion.Copied),
// the rest were not. Its store hold is released: blocks nobody else holds
// become evictable. Every store is reported exactly once; reporting
// unknown work, or any work without offload, panics (a bug in the edge).
func (c *Core) StoreDone(now clock.Instant, id offload.WorkID, copied int) {
	if c.offload == nil {
		panic("engine: StoreDone without offload")
	}
	if sp := c.offload.StoreDone(id, copied); sp.Spill {
		c.spillStored(now, sp)
	}
}

// LoadDone reports the end of offload load work id (Ready.Loads): its
// first copied blocks were read into the pool, the rest were not. When a
// request's last load ends, its loaded prefix is cached in the pool and
// the request rejoins the waiting queue in its original place; its
// admission shares the loaded blocks and counts them as cached tokens.
// Work is reported exactly once, as for StoreDone.
func (c *Core) LoadDone(now clock.Instant, id offload.WorkID, copied int) {
	if c.offload == nil {
		panic("engine: LoadDone without offload")
	}
	if c.offload.IsRestore(id) {
		c.restoreDone(now, id, copied)
		return
	}
	req, ready := c.offload.LoadDone(id, copied)
	if !ready {
		return
	}
	r := c.byID.Get(req)
	if r == nil || !r.loading {
		panic(fmt.Sprintf("engine: load of request %d ended, which is not loading", req))
	}
	r.loading = false
	r.loaded = true
	c.sched.Resume(&r.Request)
}
