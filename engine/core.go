package engine

import (
	"math/rand/v2"
	"slices"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/internal/idtable"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/constrain"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// Ready is what one Step hands to the caller. Its slices are owned by the
// core and valid until the next Step.
type Ready struct {
	// Batch is the work to execute now, or nil. The caller executes it and
	// calls Complete with the result before the batch's duration has passed
	// in its clock.
	Batch *model.Batch
	// Outputs happened since the previous Step.
	Outputs []Output
	// Events are the pool's KV cache events since the previous Step.
	Events []kvblock.Event
	// Messages (P side) and Actions (D side) are transfer work for the
	// transport edge; Reads are block streams P must send.
	Messages []xfer.Envelope
	Reads    []xfer.ReadWork
	Actions  []xfer.Action
	// Transfers are D's finished pulls, for metrics.
	Transfers []xfer.Done
	// LeaseEvents are P's lease events since the previous Step, when its
	// transfer config records them (xfer.Config.LeaseEvents).
	LeaseEvents []xfer.LeaseEvent
	// Stores and Loads are offload copies for the tier edge (offload/tier:
	// Set.Submit). Each must be reported back exactly once, with
	// StoreDone or LoadDone; until then its blocks stay held. Their
	// slices are the caller's. With pool events on, the tiers' events
	// (medium CPU or DISK) are appended to Events.
	Stores []offload.StoreWork
	Loads  []offload.LoadWork
}

type request struct {
	sched.Request
	ext          string
	arrival      clock.Instant
	remoteDecode bool
	leaseFaults  xfer.LeaseFaults // injected on its lease (Request.LeaseFaults)
	remote       *xfer.Remote
	pulling      bool                // waiting or reading in the consumer
	pulled       bool                // the remote prefix arrived
	fallback     xfer.FallbackReason // why the remote prefix was not used
	announced    bool                // the first output was sent
	// loading: parked by the admission hook while its prefix is loaded
	// from an offload tier. loaded: a load ended for the current
	// admission, so the next attempt admits without another lookup (one
	// load per admission: a prefix evicted again before admission is
	// recomputed rather than loaded in a loop).
	loading bool
	loaded  bool
	// stopped: finished by Stop (a stop condition of the edge): no lease.
	stopped bool
	// grammar, cstate and mask: the request's constraint, the position of
	// its text in it and its last mask (constrain.go). grammar is nil
	// once the request finished.
	grammar *constrain.Grammar
	cstate  constrain.State
	mask    []uint64
	stuck   bool // no token could continue the text
	// promptLP are the prompt tokens' logprobs so far (Sampling.
	// PromptLogprobs), for the first output.
	promptLP []model.Logprobs
}

// Core is one engine: pool, scheduler and request lifecycle. It is pure
// (no I/O, no clock, no goroutines) and not safe for concurrent use.
type Core struct {
	cfg   Config
	pool  *kvblock.Pool
	sched *sched.Scheduler
	rng   *rand.Rand

	nextID uint64
	// vocab masks constrained requests' tokens; constrained counts the
	// live requests with a grammar (constrain.go).
	vocab       *constrain.Vocab
	constrained int
	byID        idtable.Table[request] // by core id: looked up for every step outcome
	byExt       map[string]*request
	recent      recentSet
	adapters    int // live requests with a LoRA adapter (Stats lists their names only when there are some)

	producer *xfer.Producer       // P side, nil without transfer or as decoder
	consumer *xfer.Consumer       // D side, nil without transfer or as prefill
	offload  *offload.Coordinator // nil without offload
	// admitted counts the requests onAdmit decided on (admitted, parked
	// or deferred) in the current Schedule: the head fit (the valve of
	// held loads reads it).
	admitted int

	transfers       []xfer.Done
	outputs         []Output
	consumerActions []xfer.Action
	spare           []Output
	deferred        []*request // finished while their step ran; torn down at Complete
	stopping        bool
	// drainDeadline is when a draining engine stops waiting for its
	// outstanding leases (clock.Never: no deadline); leasesEnded records
	// that they were ended then.
	drainDeadline clock.Instant
	leasesEnded   bool
	stats         Stats
	spillCands    []xfer.SpillCandidate // spillStep's scratch
	restoreWaits  []restoreWait         // restores waiting for room (spill.go)
	need          int                   // blocks the waiting restores need (spill.go)
}

// requestSlots is the size of the direct-mapped part of Core.byID
// (idtable): the core numbers requests in sequence, so the live ones mostly
// hold distinct slots, and the lookup of every step outcome (Complete)
// costs an index and a compare instead of a map access.
const requestSlots = 1024

// Stats are the core's cumulative counters and current figures.
type Stats struct {
	Sched    sched.Stats
	Running  int
	Waiting  int
	Requests int // live requests
	// PulledPromptTokens counts the prompt positions of pulled requests
	// whose KV came from a prefill engine (D's own prefix-cache hits among
	// them included), vLLM's prompt_tokens_by_source{external_kv_transfer}.
	PulledPromptTokens uint64
	// Finished counts finished requests by status.
	Finished map[sched.Status]uint64
	Rejected map[AddResult]uint64
	// RunningAdapters and WaitingAdapters are the names of the LoRA
	// adapters of the running requests and of the others (waiting,
	// preempted, pulling their prefix), each name once, sorted; nil when
	// none (vLLM's lora_requests_info labels).
	RunningAdapters []string
	WaitingAdapters []string
}

// NewCore returns a core. rng supplies sampling seeds for requests that do
// not set one. It panics on an invalid cfg: configuration is validated at
// the edges.
func NewCore(cfg Config, rng *rand.Rand) *Core {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.HashKey == (kvblock.HashKey{}) && len(cfg.Secret) > 0 {
		cfg.HashKey = kvblock.DeriveHashKey(cfg.Secret)
	}
	pool := kvblock.New(cfg.Pool)
	c := &Core{
		cfg:           cfg,
		drainDeadline: clock.Never,
		pool:          pool,
		sched:         sched.New(cfg.Sched, pool),
		rng:           rng,
		byID:          idtable.New[request](requestSlots),
		byExt:         make(map[string]*request),
		recent:        newRecentSet(cfg.RecentFinished),
		vocab:         cfg.Vocab,
	}
	c.stats.Finished = make(map[sched.Status]uint64)
	c.stats.Rejected = make(map[AddResult]uint64)
	if t := cfg.Transfer; t != nil {
		if cfg.Role != RoleDecode {
			c.producer = xfer.NewProducer(*t, pool, cfg.EngineID, cfg.Secret, rng)
		}
		if cfg.Role != RolePrefill {
			c.consumer = xfer.NewConsumer(*t, pool, cfg.EngineID, cfg.Secret, rng)
		}
	}
	if cfg.Offload != nil {
		c.offload = offload.NewCoordinator(*cfg.Offload, pool)
		c.sched.OnPreempt = c.onPreempt
		c.sched.OnAdmit = c.onAdmit
		if c.producer != nil {
			// A released lease's spilled blocks leave the tier with it.
			c.producer.OnUnspill(func(id wire.LeaseID) { c.offload.UnpinLease(uint64(id)) })
		}
	}
	return c
}

// Producer is the P-side transfer core, or nil: for inspection (its
// stats, a lease's state, its checks). Only the core and its Loop drive it.
func (c *Core) Producer() *xfer.Producer { return c.producer }

// Consumer is the D-side transfer core, or nil: for inspection only.
func (c *Core) Consumer() *xfer.Consumer { return c.consumer }

// Offload is the offload coordinator, or nil: for inspection only.
func (c *Core) Offload() *offload.Coordinator { return c.offload }

// Pool is the core's block pool: the executor reads and writes its blocks'
// KV; everyone else only inspects it.
func (c *Core) Pool() *kvblock.Pool { return c.pool }

// Config returns the configuration.
func (c *Core) Config() Config { return c.cfg }

// Add validates and queues a request.
//
// A request with a Remote prefix waits in the transfer consumer until its
// blocks arrive, then enters the scheduler. When such a request is rejected,
// for whatever reason, P is told at once (RELEASE rejected), so its blocks
// do not wait for the lease to expire.
func (c *Core) Add(now clock.Instant, in *Request) AddResult {
	res := c.add(now, in)
	if res != Accepted {
		c.stats.Rejected[res]++
		if in.Remote != nil && !(res == RejectedDuplicate && c.sameLease(in)) {
			c.Reject(now, in.Remote)
		}
	}
	return res
}

// sameLease reports whether a duplicate of a live request carries the very
// lease that request is using: rejecting the duplicate must not release the
// original's lease (a proxy retry, or a replayed request).
func (c *Core) sameLease(in *Request) bool {
	r, ok := c.byExt[in.ID]
	return ok && r.remote != nil && r.remote.Lease == in.Remote.Lease && r.remote.Addr == in.Remote.Addr
}

// Reject tells P that a request carrying remote prefix r will not be
// served here (the edge calls it for rejections it decides itself, such as
// an unknown model or a malformed body). No-op without a consumer.
func (c *Core) Reject(now clock.Instant, r *xfer.Remote) {
	if c.consumer != nil && r != nil {
		c.consumer.Reject(now, *r)
	}
}

func (c *Core) add(now clock.Instant, in *Request) AddResult {
	if c.stopping {
		return RejectedShuttingDown
	}
	if len(in.Prompt) == 0 || in.MaxTokens < 1 || in.MinTokens < 0 || in.MinTokens > in.MaxTokens {
		return RejectedInvalid
	}
	for _, t := range in.Prompt {
		if t < 0 || int(t) >= c.cfg.VocabSize {
			return RejectedInvalid
		}
	}
	if _, dup := c.byExt[in.ID]; dup {
		return RejectedDuplicate
	}
	if in.Remote != nil {
		if c.consumer == nil {
			return RejectedInvalid
		}
		rm := in.Remote
		bs := c.cfg.Pool.BlockSizeTokens
		if rm.NumTokens < 1 || rm.NumTokens > len(in.Prompt) || rm.NumBlocks != (rm.NumTokens+bs-1)/bs {
			return RejectedInvalid
		}
	}
	if in.RemoteDecode && c.producer == nil {
		return RejectedInvalid
	}
	if len(in.Prompt)+in.MaxTokens > c.cfg.MaxModelLen {
		return RejectedTooLong
	}
	bs := c.cfg.Pool.BlockSizeTokens
	if (len(in.Prompt)+bs-1)/bs > c.cfg.Pool.NumBlocks {
		return RejectedTooLong // could never be scheduled
	}
	c.nextID++
	r := &request{ext: in.ID, arrival: now}
	r.ID = c.nextID
	r.Tokens = make([]int32, len(in.Prompt), len(in.Prompt)+min(in.MaxTokens, 64))
	r.Hashes = make([]kvblock.Hash, 0, cap(r.Tokens)/bs) // the full blocks of those tokens: one allocation
	copy(r.Tokens, in.Prompt)
	r.NumPromptTokens = len(in.Prompt)
	r.MaxTokens = in.MaxTokens
	r.MinTokens = in.MinTokens
	r.MaxModelLen = c.cfg.MaxModelLen
	r.StopTokenIDs = append([]int32(nil), in.StopTokenIDs...)
	r.IgnoreEOS = in.IgnoreEOS
	r.EOS = c.cfg.EOS
	r.Priority = in.Priority
	r.Extras = kvblock.Extras{Key: c.cfg.HashKey, CacheSalt: in.CacheSalt, Adapter: in.Adapter}
	r.Sampling = in.Sampling
	if !in.SeedSet && in.Sampling.Temperature > 0 {
		r.Sampling.Seed = c.rng.Uint64()
	}
	r.remoteDecode = in.RemoteDecode
	r.leaseFaults = in.LeaseFaults
	if in.Remote != nil {
		rm := *in.Remote
		r.remote = &rm
		if c.sched.NumWaiting() >= c.cfg.Sched.MaxWaiting || !c.consumer.Enqueue(now, xfer.PullRequest{
			Req: r.ID, Prompt: r.Tokens[:r.NumPromptTokens], Extras: r.Extras, Remote: rm}) {
			return RejectedQueueFull
		}
		r.pulling = true
	} else if c.sched.Add(&r.Request) == sched.QueueFull {
		return RejectedQueueFull
	}
	c.constrain(r, in.Grammar) // once accepted: finish undoes it
	c.byID.Put(r.ID, r)
	if !in.Adapter.IsBase() {
		c.adapters++
	}
	c.byExt[r.ext] = r
	return Accepted
}

// Abort finishes a live request with status aborted and frees what it holds
// (after its step completes, if it is in the batch being executed).
// Aborting an unknown or finished request changes nothing and says why.
//
// On P, aborting a request that already finished and holds a lease is the
// transfer's business: the lease is released at once if the response never
// reached the client (undelivered), revoked otherwise (policy lease).
func (c *Core) Abort(now clock.Instant, id string) AbortResult {
	r, ok := c.byExt[id]
	if !ok {
		if c.producer != nil && c.producer.Abort(now, id) {
			return AbortAlreadyFinished
		}
		if c.recent.has(id) {
			return AbortAlreadyFinished
		}
		return AbortUnknown
	}
	c.finish(now, r, sched.FinishedAborted, model.NoToken)
	return Aborted
}

// Stop finishes a live request with status stopped: a stop condition the
// edge detected (a stop string on the detokenized text) rather than the
// core. It frees what the request holds as Abort does, counts it as
// finished stopped, and grants no lease (whatever was asked, the client
// has its whole answer). Stopping an unknown or finished request changes
// nothing, not even a finished request's lease, and says why.
func (c *Core) Stop(now clock.Instant, id string) AbortResult {
	r, ok := c.byExt[id]
	if !ok {
		if c.recent.has(id) {
			return AbortAlreadyFinished
		}
		return AbortUnknown
	}
	r.stopped = true
	c.finish(now, r, sched.FinishedStopped, model.NoToken)
	return Aborted
}

// AbortReq is Abort of exactly the request whose core id is req
// (Output.Req), never of another request that has since taken its external
// id. lease is the lease its finished output was granted (Grant.Lease), or
// zero: when the request has finished, that lease, and only it, is revoked
// (or released at once if undelivered) as Abort would. A request that
// finished, or that this core never had, is reported AbortAlreadyFinished:
// a caller holds a core id only for a request the core accepted.
func (c *Core) AbortReq(now clock.Instant, req uint64, lease wire.LeaseID) AbortResult {
	if r := c.byID.Get(req); r != nil && c.byExt[r.ext] == r {
		c.finish(now, r, sched.FinishedAborted, model.NoToken)
		return Aborted
	}
	if lease != 0 && c.producer != nil {
		c.producer.AbortLease(now, lease)
	}
	return AbortAlreadyFinished
}

// StopReq is Stop of exactly the request whose core id is req
// (Output.Req); a finished one is reported AbortAlreadyFinished and nothing
// changes.
func (c *Core) StopReq(now clock.Instant, req uint64) AbortResult {
	r := c.byID.Get(req)
	if r == nil || c.byExt[r.ext] != r {
		return AbortAlreadyFinished
	}
	r.stopped = true
	c.finish(now, r, sched.FinishedStopped, model.NoToken)
	return Aborted
}

// DeliveredLease is Delivered for exactly the lease granted (Grant.Lease),
// never another lease granted to a request with the same external id.
func (c *Core) DeliveredLease(now clock.Instant, lease wire.LeaseID, ok bool) {
	if c.producer != nil {
		c.producer.DeliveredLease(now, lease, ok)
	}
}

// Step schedules the next batch if none is executing, and returns it with
// the outputs and events produced since the previous Step.
func (c *Core) Step(now clock.Instant) Ready {
	var rd Ready
	c.step(now, &rd)
	return rd
}

// StepInto is Step writing its result into rd (all of it: what rd held
// before is gone), for a caller that keeps a Ready from turn to turn
// rather than copying one out of every call.
func (c *Core) StepInto(now clock.Instant, rd *Ready) { c.step(now, rd) }

// step is Step into rd.
func (c *Core) step(now clock.Instant, rd *Ready) {
	*rd = Ready{}
	if c.producer != nil {
		if c.stopping && now >= c.drainDeadline && !c.leasesEnded {
			// The drain deadline: leases nobody read in time end now
			// (those being read end when their reads do).
			c.leasesEnded = true
			c.producer.ReleaseAll(now, wire.ReasonShutdown)
		}
		c.producer.Tick(now)
	}
	// Before scheduling: a read waiting for its lease's spilled blocks
	// gets the pool's room before new prefills do (spill.go).
	c.need = c.restoreStep(now)
	if c.consumer != nil {
		admit := c.sched.NumWaiting() == 0 && c.sched.NumRunning() < c.cfg.Sched.MaxNumSeqs
		c.consumer.Tick(now, admit)
		c.drainConsumer(now)
	}
	if !c.sched.InFlight() {
		c.admitted = 0
		preemptions := c.sched.Preemptions()
		b := c.sched.Schedule()
		if c.constrained > 0 {
			c.maskBatch(now, b)
		}
		if len(b.Seqs) > 0 {
			rd.Batch = b
		}
		if c.offload != nil && c.offload.NumHeld() > 0 {
			c.heldLoadValve(b, preemptions)
		}
	}
	// Double-buffered: the caller reads rd.Outputs until the next Step while
	// the core appends to the other buffer.
	rd.Outputs = c.outputs
	c.outputs, c.spare = c.spare[:0], c.outputs
	if c.cfg.Pool.Events {
		rd.Events = c.pool.TakeEvents()
	}
	// After scheduling (and before the producer's and the offload's
	// work is taken): spills under pressure.
	c.spillStep(now, c.need)
	if c.offload != nil {
		// After scheduling: admission may have planned loads.
		w := c.offload.Take()
		rd.Stores, rd.Loads = w.Stores, w.Loads
		if c.cfg.Pool.Events {
			rd.Events = append(rd.Events, w.Events...)
		}
	}
	if c.producer != nil {
		rd.Messages, rd.Reads = c.producer.Take()
		rd.LeaseEvents = c.producer.TakeLeaseEvents()
	}
	if c.consumer != nil {
		c.drainConsumer(now)
		rd.Actions = c.consumerActions
		c.consumerActions = nil
	}
	rd.Transfers, c.transfers = c.transfers, nil
}

// drainConsumer moves the consumer's finished pulls into the scheduler (or
// to their fallback) and keeps its actions for the next Ready.
func (c *Core) drainConsumer(now clock.Instant) {
	acts, done := c.consumer.Take()
	c.consumerActions = append(c.consumerActions, acts...)
	for _, d := range done {
		c.transfers = append(c.transfers, d)
		r := c.byID.Get(d.Req)
		if r == nil || !r.pulling {
			// The request finished (aborted) while its read ran.
			if d.Hold != 0 {
				c.pool.Release(d.Hold)
			}
			continue
		}
		r.pulling = false
		switch d.Outcome {
		case xfer.Pulled:
			r.Hold = d.Hold
			r.NumComputed = d.NumComputed
			r.pulled = true
			c.stats.PulledPromptTokens += uint64(d.NumComputed)
			c.sched.Requeue(&r.Request) // admitted under the consumer's bound
		case xfer.FellBack:
			r.fallback = d.Why
			c.sched.Requeue(&r.Request)
		case xfer.Failed:
			r.fallback = d.Why
			c.finish(now, r, sched.FinishedError, model.NoToken)
		case xfer.Dropped:
		}
	}
}

// Complete applies the result of the batch of the last Step, at the instant
// the step finished.
func (c *Core) Complete(now clock.Instant, res *model.StepResult) {
	for _, o := range c.sched.Update(res) {
		r := c.byID.Get(o.Req.ID)
		if o.PromptLogprobs != nil {
			r.addPromptLogprobs(o.PromptLogprobs)
		}
		if r.grammar != nil && o.Token != model.NoToken && c.advance(r, o.Token) {
			o.Finished = sched.FinishedStopped // the text is complete
		}
		if o.Finished.Finished() {
			c.finish(now, r, o.Finished, o.Token)
			c.outputs[len(c.outputs)-1].Logprobs = ownLogprobs(o.Logprobs)
			continue
		}
		if c.offload != nil {
			c.offload.Computed(r.ID, c.pool.Blocks(r.Hold), r.Hashes, r.NumComputed)
		}
		if o.Token != model.NoToken {
			out := Output{ID: r.ext, Req: r.ID, Token: o.Token, At: now, Logprobs: ownLogprobs(o.Logprobs)}
			c.announce(r, &out)
			c.outputs = append(c.outputs, out)
		}
	}
	for _, r := range c.deferred {
		c.teardown(now, r) // aborted requests: no lease
	}
	clear(c.deferred)
	c.deferred = c.deferred[:0]
}

// ownLogprobs copies an outcome's logprobs out of the step's result; nil
// stays nil.
func ownLogprobs(lp *model.Logprobs) *model.Logprobs {
	if lp == nil {
		return nil
	}
	return &model.Logprobs{Logprob: lp.Logprob, Rank: lp.Rank, Top: append([]model.TokenLogprob(nil), lp.Top...)}
}

// finish records the terminal output of r and tears it down, now or when
// its step completes.
func (c *Core) finish(now clock.Instant, r *request, st sched.Status, tok int32) {
	if !r.Status().Finished() {
		c.sched.Finish(&r.Request, st)
	}
	if r.grammar != nil {
		r.grammar = nil
		c.constrained--
	}
	if r.pulling {
		c.consumer.Abort(now, r.ID) // tells P; a read in flight ends first
		r.pulling = false
	}
	out := Output{
		ID: r.ext, Req: r.ID, Token: tok, Finished: true, Status: st, At: now,
		Usage: Usage{PromptTokens: r.NumPromptTokens, CompletionTokens: r.NumOutputTokens(), CachedTokens: r.NumCachedTokens},
	}
	if r.pulled {
		out.Usage.CachedTokens = r.NumPromptTokens // computed elsewhere
	}
	out.Stuck = r.stuck
	c.announce(r, &out)
	c.stats.Finished[st]++
	delete(c.byExt, r.ext)
	c.recent.add(r.ext)
	if r.InBatch() {
		c.deferred = append(c.deferred, r)
	} else {
		out.Grant = c.teardown(now, r)
	}
	c.outputs = append(c.outputs, out)
}

// addPromptLogprobs keeps the prompt logprobs of a step: those that
// follow the ones kept (a preempted request computes its prompt again).
func (r *request) addPromptLogprobs(p *model.PromptLogprobs) {
	for k := range p.Entries {
		if p.From+k == len(r.promptLP)+1 {
			r.promptLP = append(r.promptLP, *ownLogprobs(&p.Entries[k]))
		}
	}
}

func (c *Core) announce(r *request, out *Output) {
	if !r.announced {
		r.announced = true
		out.PromptLogprobs, r.promptLP = r.promptLP, nil
		out.Pulled = r.pulled
		out.Fallback = r.fallback
	}
}

// teardown is the fixed end of every request: offer its blocks to the
// transfer module (a finished remote-decode prefill gets a lease hold on its
// prompt blocks), then to the offload policy (stores take store holds, and
// blocks whose stores are in flight are under theirs: S20), then drop the
// request hold. A block is freed only when its last hold goes, so neither
// module asks anybody whether to delay a free. It returns the lease grant,
// if any.
func (c *Core) teardown(now clock.Instant, r *request) *xfer.Grant {
	var grant *xfer.Grant
	if r.Hold != 0 {
		st := r.Status()
		if c.producer != nil && r.remoteDecode && !r.stopped && (st == sched.FinishedLength || st == sched.FinishedStopped) && r.NumComputed > 0 {
			bs := c.cfg.Pool.BlockSizeTokens
			n := min(r.NumComputed, r.NumPromptTokens)
			blocks := c.pool.Blocks(r.Hold)[:(n+bs-1)/bs]
			if g, ok := c.producer.GrantWith(now, r.ext, blocks, n, r.leaseFaults); ok {
				grant = &g
			}
		}
		if c.offload != nil {
			c.offload.Finished(r.ID, c.pool.Blocks(r.Hold), r.Hashes, r.NumComputed)
		}
		c.pool.Release(r.Hold)
		r.Hold = 0
	} else if c.offload != nil {
		// Never held blocks, or aborted while waiting or loading: its
		// loads (if any) end normally and resume nobody.
		c.offload.Finished(r.ID, nil, nil, 0)
	}
	r.loading = false
	c.byID.Delete(r.ID)
	if !r.Extras.Adapter.IsBase() {
		c.adapters--
	}
	return grant
}

// Delivered reports whether the response carrying request id's lease token
// was written to the client (P side). An undelivered token can never be
// presented, so its lease is released at once.
func (c *Core) Delivered(now clock.Instant, id string, ok bool) {
	if c.producer != nil {
		c.producer.Delivered(now, id, ok)
	}
}

// NextDeadline is the earliest instant at which Step has timer work (lease
// expiry, heartbeats, retries), or clock.Never.
func (c *Core) NextDeadline() clock.Instant {
	t := clock.Never
	if c.producer != nil {
		t = min(t, c.producer.NextDeadline())
	}
	if c.consumer != nil {
		t = min(t, c.consumer.NextDeadline())
	}
	if c.stopping && !c.leasesEnded && c.producer != nil && c.producer.NumLeases() > 0 {
		t = min(t, c.drainDeadline)
	}
	if len(c.restoreWaits) > 0 {
		t = min(t, c.nextRestoreWait())
	}
	return t
}

// Drain stops admitting requests: Add returns RejectedShuttingDown from now
// on. Live requests run to completion.
func (c *Core) Drain() { c.stopping = true }

// DrainBy drains the engine (see Drain) and bounds how long its
// outstanding leases are served: at deadline, every lease still live is
// released with reason shutdown (a lease being read, when its read ends).
// Until then leases are served as usual: read, released or expired. See
// Drained for when the engine may exit.
func (c *Core) DrainBy(deadline clock.Instant) {
	c.stopping = true
	c.drainDeadline = min(c.drainDeadline, deadline)
}

// Draining reports whether Drain was called.
func (c *Core) Draining() bool { return c.stopping }

// Drained reports whether a draining engine has nothing left to serve: no
// live request, no step executing, no outstanding lease, no pull and no
// release notice pending. The edge may then close its connections and
// exit. Offload stores may still be running: they serve no request, and
// the driver ends them on exit (node.Node closes its tier set and applies their
// completions).
func (c *Core) Drained() bool {
	if !c.stopping || !c.Idle() {
		return false
	}
	if c.producer != nil && c.producer.NumLeases() > 0 {
		return false
	}
	if c.consumer != nil && !c.consumer.Idle() {
		return false
	}
	return true
}

// Idle reports whether no request is live and no step is executing.
// Leases may still be outstanding (see Producer).
func (c *Core) Idle() bool { return c.byID.Len() == 0 && !c.sched.InFlight() }

// NumRequests is the number of live requests.
func (c *Core) NumRequests() int { return c.byID.Len() }

// Stats returns the counters; the maps are the core's own (read only).
func (c *Core) Stats() Stats {
	s := c.stats
	s.Sched = c.sched.Stats()
	s.Running = c.sched.NumRunning()
	s.Waiting = c.sched.NumWaiting()
	s.Requests = c.byID.Len()
	if c.adapters > 0 {
		for _, r := range c.byID.All() {
			if r.Extras.Adapter.IsBase() {
				continue
			}
			if r.Status() == sched.Running {
				s.RunningAdapters = addName(s.RunningAdapters, r.Extras.Adapter.Name)
			} else {
				s.WaitingAdapters = addName(s.WaitingAdapters, r.Extras.Adapter.Name)
			}
		}
		slices.Sort(s.RunningAdapters)
		slices.Sort(s.WaitingAdapters)
	}
	return s
}

func addName(names []string, n string) []string {
	if slices.Contains(names, n) {
		return names
	}
	return append(names, n)
}

// recentSet remembers the last n ids added, in a ring. Adding is one store
// (every finished request adds its id); asking is a scan of the ring, which
// only an abort or stop of an id the core no longer knows does: a few
// microseconds for the thousands of ids an engine remembers, rather than
// two string-keyed map updates on every request.
type recentSet struct {
	ring   []string
	next   int
	filled int // ring[:filled] hold ids (all of it once it wrapped)
}

func newRecentSet(n int) recentSet {
	return recentSet{ring: make([]string, n)}
}

func (s *recentSet) add(id string) {
	if len(s.ring) == 0 {
		return
	}
	s.ring[s.next] = id
	s.filled = max(s.filled, s.next+1)
	if s.next++; s.next == len(s.ring) {
		s.next = 0
	}
}

func (s *recentSet) has(id string) bool {
	for _, r := range s.ring[:s.filled] {
		if r == id {
			return true
		}
	}
	return false
}
