package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/sched"
)

// Config configures a Core.
type Config struct {
	Pool  kvblock.Config
	Sched sched.Config
	// MaxModelLen bounds prompt + generated tokens.
	MaxModelLen int
	// VocabSize bounds token ids; EOS is the end-of-sequence token.
	VocabSize int
	EOS       int32
	// RecentFinished is how many finished request ids the core remembers
	// so that a late abort is reported as "already finished".
	RecentFinished int
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if err := c.Pool.Validate(); err != nil {
		return err
	}
	if err := c.Sched.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxModelLen < 2:
		return fmt.Errorf("engine: MaxModelLen must be at least 2, got %d", c.MaxModelLen)
	case c.VocabSize <= 0:
		return fmt.Errorf("engine: VocabSize must be positive, got %d", c.VocabSize)
	case c.EOS < 0 || int(c.EOS) >= c.VocabSize:
		return fmt.Errorf("engine: EOS %d is outside the vocabulary [0, %d)", c.EOS, c.VocabSize)
	case c.RecentFinished < 0:
		return errors.New("engine: RecentFinished must not be negative")
	}
	return nil
}

// Request is a generation request as the engine receives it.
type Request struct {
	// ID is the caller's id (X-Request-Id); unique among live requests.
	ID           string
	Prompt       []int32
	MaxTokens    int
	MinTokens    int
	StopTokenIDs []int32
	IgnoreEOS    bool
	Sampling     model.Sampling
	// SeedSet says Sampling.Seed was given; otherwise the core draws one
	// for non-greedy requests.
	SeedSet   bool
	Priority  int
	CacheSalt string
}

// AddResult is the outcome of Add.
type AddResult uint8

const (
	Accepted AddResult = iota
	RejectedInvalid
	RejectedDuplicate
	RejectedTooLong
	RejectedQueueFull
	RejectedShuttingDown
)

func (a AddResult) String() string {
	switch a {
	case Accepted:
		return "accepted"
	case RejectedInvalid:
		return "invalid"
	case RejectedDuplicate:
		return "duplicate id"
	case RejectedTooLong:
		return "too long"
	case RejectedQueueFull:
		return "queue full"
	case RejectedShuttingDown:
		return "shutting down"
	}
	return fmt.Sprintf("AddResult(%d)", a)
}

// AbortResult is the outcome of Abort.
type AbortResult uint8

const (
	// Aborted: the request was live and is now finished (aborted).
	Aborted AbortResult = iota
	// AbortUnknown: no such request is known.
	AbortUnknown
	// AbortAlreadyFinished: the request finished before the abort; nothing
	// changed.
	AbortAlreadyFinished
)

func (a AbortResult) String() string {
	switch a {
	case Aborted:
		return "aborted"
	case AbortUnknown:
		return "unknown request"
	case AbortAlreadyFinished:
		return "already finished"
	}
	return fmt.Sprintf("AbortResult(%d)", a)
}

// Usage is a finished request's token accounting.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
}

// Output is one event for one request: a new token, a finish, or both.
type Output struct {
	ID string
	// Token is the generated token, or model.NoToken.
	Token int32
	// Finished is set on the request's last output.
	Finished bool
	Status   sched.Status
	Usage    Usage
	// At is the instant the output was produced.
	At clock.Instant
}

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
}

// TeardownHook is offered a finished request's blocks before the request
// hold is dropped. It may take holds of its own on them (a lease, a store):
// the blocks stay in memory exactly as long as some hold names them.
type TeardownHook interface {
	RequestFinished(now clock.Instant, r *sched.Request)
}

type request struct {
	sched.Request
	ext     string
	arrival clock.Instant
}

// Core is one engine: pool, scheduler and request lifecycle. It is pure
// (no I/O, no clock, no goroutines) and not safe for concurrent use.
type Core struct {
	cfg   Config
	pool  *kvblock.Pool
	sched *sched.Scheduler
	rng   *rand.Rand

	nextID uint64
	byID   map[uint64]*request
	byExt  map[string]*request
	recent recentSet

	// Teardown hooks, in order: transfer first, then offload.
	Transfer TeardownHook
	Offload  TeardownHook

	outputs  []Output
	spare    []Output
	deferred []*request // finished while their step ran; torn down at Complete
	stopping bool
	stats    Stats
}

// Stats are the core's cumulative counters and current figures.
type Stats struct {
	Sched    sched.Stats
	Running  int
	Waiting  int
	Requests int // live requests
	// Finished counts finished requests by status.
	Finished map[sched.Status]uint64
	Rejected map[AddResult]uint64
}

// NewCore returns a core. rng supplies sampling seeds for requests that do
// not set one. It panics on an invalid cfg: configuration is validated at
// the edges.
func NewCore(cfg Config, rng *rand.Rand) *Core {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	pool := kvblock.New(cfg.Pool)
	c := &Core{
		cfg:    cfg,
		pool:   pool,
		sched:  sched.New(cfg.Sched, pool),
		rng:    rng,
		byID:   make(map[uint64]*request),
		byExt:  make(map[string]*request),
		recent: newRecentSet(cfg.RecentFinished),
	}
	c.stats.Finished = make(map[sched.Status]uint64)
	c.stats.Rejected = make(map[AddResult]uint64)
	return c
}

// Pool is the core's block pool (read it; do not change it).
func (c *Core) Pool() *kvblock.Pool { return c.pool }

// Scheduler is the core's scheduler.
func (c *Core) Scheduler() *sched.Scheduler { return c.sched }

// Config returns the configuration.
func (c *Core) Config() Config { return c.cfg }

// Add validates and queues a request.
func (c *Core) Add(now clock.Instant, in *Request) AddResult {
	res := c.add(now, in)
	if res != Accepted {
		c.stats.Rejected[res]++
	}
	return res
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
	copy(r.Tokens, in.Prompt)
	r.NumPromptTokens = len(in.Prompt)
	r.MaxTokens = in.MaxTokens
	r.MinTokens = in.MinTokens
	r.MaxModelLen = c.cfg.MaxModelLen
	r.StopTokenIDs = append([]int32(nil), in.StopTokenIDs...)
	r.IgnoreEOS = in.IgnoreEOS
	r.EOS = c.cfg.EOS
	r.Priority = in.Priority
	r.Extras = kvblock.Extras{CacheSalt: in.CacheSalt}
	r.Sampling = in.Sampling
	if !in.SeedSet && in.Sampling.Temperature > 0 {
		r.Sampling.Seed = c.rng.Uint64()
	}
	if c.sched.Add(&r.Request) == sched.QueueFull {
		return RejectedQueueFull
	}
	c.byID[r.ID] = r
	c.byExt[r.ext] = r
	return Accepted
}

// Abort finishes a live request with status aborted and frees what it holds
// (after its step completes, if it is in the batch being executed).
// Aborting an unknown or finished request changes nothing and says why.
func (c *Core) Abort(now clock.Instant, id string) AbortResult {
	r, ok := c.byExt[id]
	if !ok {
		if c.recent.has(id) {
			return AbortAlreadyFinished
		}
		return AbortUnknown
	}
	c.finish(now, r, sched.FinishedAborted, model.NoToken)
	return Aborted
}

// Step schedules the next batch if none is executing, and returns it with
// the outputs and events produced since the previous Step.
func (c *Core) Step(now clock.Instant) Ready {
	var rd Ready
	if !c.sched.InFlight() {
		if b := c.sched.Schedule(); len(b.Seqs) > 0 {
			rd.Batch = b
		}
	}
	// Double-buffered: the caller reads rd.Outputs until the next Step while
	// the core appends to the other buffer.
	rd.Outputs = c.outputs
	c.outputs, c.spare = c.spare[:0], c.outputs
	if c.cfg.Pool.Events {
		rd.Events = c.pool.TakeEvents()
	}
	return rd
}

// Complete applies the result of the batch of the last Step, at the instant
// the step finished.
func (c *Core) Complete(now clock.Instant, res *model.StepResult) {
	for _, o := range c.sched.Update(res) {
		r := c.byID[o.Req.ID]
		if o.Finished.Finished() {
			c.finish(now, r, o.Finished, o.Token)
			continue
		}
		if o.Token != model.NoToken {
			c.outputs = append(c.outputs, Output{ID: r.ext, Token: o.Token, At: now})
		}
	}
	for _, r := range c.deferred {
		c.teardown(now, r)
	}
	clear(c.deferred)
	c.deferred = c.deferred[:0]
}

// finish records the terminal output of r and tears it down, now or when
// its step completes.
func (c *Core) finish(now clock.Instant, r *request, st sched.Status, tok int32) {
	if !r.Status().Finished() {
		c.sched.Finish(&r.Request, st)
	}
	c.outputs = append(c.outputs, Output{
		ID: r.ext, Token: tok, Finished: true, Status: st, At: now,
		Usage: Usage{PromptTokens: r.NumPromptTokens, CompletionTokens: r.NumOutputTokens(), CachedTokens: r.NumCachedTokens},
	})
	c.stats.Finished[st]++
	delete(c.byExt, r.ext)
	c.recent.add(r.ext)
	if r.InBatch() {
		c.deferred = append(c.deferred, r)
		return
	}
	c.teardown(now, r)
}

// teardown is the fixed end of every request: offer its blocks to the
// transfer module, then to the offload policy, then drop the request hold.
func (c *Core) teardown(now clock.Instant, r *request) {
	if r.Hold != 0 {
		if c.Transfer != nil {
			c.Transfer.RequestFinished(now, &r.Request)
		}
		if c.Offload != nil {
			c.Offload.RequestFinished(now, &r.Request)
		}
		c.pool.Release(r.Hold)
		r.Hold = 0
	}
	delete(c.byID, r.ID)
}

// Drain stops admitting requests: Add returns RejectedShuttingDown from now
// on. Live requests run to completion.
func (c *Core) Drain() { c.stopping = true }

// Draining reports whether Drain was called.
func (c *Core) Draining() bool { return c.stopping }

// Idle reports whether no request is live and no step is executing.
func (c *Core) Idle() bool { return len(c.byID) == 0 && !c.sched.InFlight() }

// NumRequests is the number of live requests.
func (c *Core) NumRequests() int { return len(c.byID) }

// Stats returns the counters; the maps are the core's own (read only).
func (c *Core) Stats() Stats {
	s := c.stats
	s.Sched = c.sched.Stats()
	s.Running = c.sched.NumRunning()
	s.Waiting = c.sched.NumWaiting()
	s.Requests = len(c.byID)
	return s
}

// Check verifies the pool's accounting and that every request hold belongs
// to a live request (no orphan hold). Holds of other kinds are checked by
// the modules that own them.
func (c *Core) Check() error {
	if err := c.pool.Check(); err != nil {
		return err
	}
	n := 0
	for _, h := range c.pool.LiveHolds(nil) {
		if h.Kind != kvblock.HoldRequest {
			continue
		}
		n++
		r, ok := c.byID[h.Owner]
		if !ok || r.Hold != h.ID {
			return fmt.Errorf("engine: orphan request hold %#x of request %d", uint64(h.ID), h.Owner)
		}
	}
	for _, r := range c.byID {
		if r.Hold != 0 && !c.pool.Live(r.Hold) {
			return fmt.Errorf("engine: request %q names a dead hold", r.ext)
		}
	}
	return nil
}

// recentSet remembers the last n ids added (a ring plus a set).
type recentSet struct {
	ring []string
	next int
	set  map[string]struct{}
}

func newRecentSet(n int) recentSet {
	return recentSet{ring: make([]string, n), set: make(map[string]struct{}, n)}
}

func (s *recentSet) add(id string) {
	if len(s.ring) == 0 {
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.set, old)
	}
	s.ring[s.next] = id
	s.set[id] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}

func (s *recentSet) has(id string) bool {
	_, ok := s.set[id]
	return ok
}
