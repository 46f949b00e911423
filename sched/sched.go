package sched

import (
	"fmt"
	"slices"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// Policy orders the waiting queue and picks preemption victims.
type Policy uint8

const (
	// FCFS admits in arrival order and preempts the newest running request.
	FCFS Policy = iota
	// Priority admits by (priority, arrival), lower first, and preempts the
	// running request with the largest (priority, arrival).
	Priority
)

// ParsePolicy parses "fcfs" or "priority".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "fcfs":
		return FCFS, nil
	case "priority":
		return Priority, nil
	}
	return 0, fmt.Errorf("sched: unknown policy %q (want fcfs or priority)", s)
}

func (p Policy) String() string {
	if p == Priority {
		return "priority"
	}
	return "fcfs"
}

// Config bounds a scheduler.
type Config struct {
	// MaxNumSeqs is the most requests running in one step.
	MaxNumSeqs int
	// MaxNumBatchedTokens is the most positions computed in one step.
	MaxNumBatchedTokens int
	// MaxWaiting bounds the waiting queue; Add refuses beyond it.
	MaxWaiting int
	// ChunkedPrefill lets a prompt be computed over several steps. Without
	// it a prompt longer than the step's remaining budget waits.
	ChunkedPrefill bool
	// LongPrefillTokenThreshold, when positive, is the most positions one
	// request computes in a step (vLLM's long_prefill_token_threshold):
	// a longer prompt is chunked over several steps even when the budget
	// would take it whole, so the decodes that share its steps keep
	// moving. 0 is no limit. It needs ChunkedPrefill.
	LongPrefillTokenThreshold int
	Policy                    Policy
	// MaxLoRAs is the most distinct LoRA adapters among the running
	// requests (vLLM's --max-loras); 0 is no limit. A waiting request
	// whose adapter would be one too many is passed over (it keeps its
	// place) and the requests behind it are considered, as vLLM's
	// scheduler does. Base-model requests are never held back.
	MaxLoRAs int
}

// DefaultConfig returns vLLM-like defaults.
func DefaultConfig() Config {
	return Config{MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, MaxWaiting: 4096, ChunkedPrefill: true}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.MaxNumSeqs <= 0:
		return fmt.Errorf("sched: MaxNumSeqs must be positive, got %d", c.MaxNumSeqs)
	case c.MaxNumBatchedTokens <= 0:
		return fmt.Errorf("sched: MaxNumBatchedTokens must be positive, got %d", c.MaxNumBatchedTokens)
	case c.MaxWaiting <= 0:
		return fmt.Errorf("sched: MaxWaiting must be positive, got %d", c.MaxWaiting)
	case c.LongPrefillTokenThreshold < 0:
		return fmt.Errorf("sched: LongPrefillTokenThreshold must be 0 (no limit) or more, got %d", c.LongPrefillTokenThreshold)
	case c.LongPrefillTokenThreshold > 0 && !c.ChunkedPrefill:
		return fmt.Errorf("sched: LongPrefillTokenThreshold needs ChunkedPrefill")
	case c.MaxLoRAs < 0:
		return fmt.Errorf("sched: MaxLoRAs must be 0 (no limit) or more, got %d", c.MaxLoRAs)
	case c.Policy > Priority:
		return fmt.Errorf("sched: unknown policy %d", c.Policy)
	}
	return nil
}

// Scheduler: see the package doc.
type Scheduler struct {
	cfg  Config
	pool *kvblock.Pool
	bs   int
	// maxLen is the pool's capacity in tokens: the longest sequence that
	// can ever hold its blocks (MaxLen).
	maxLen int

	waiting reqHeap
	running []*Request
	seq     uint64

	batch     model.Batch
	batchReqs []*Request
	// slotSeq[i] is the seq (Add's stamp) of the request whose fixed
	// fields (Req, Sampling, NumPromptTokens, Adapter) batch.Seqs[i]
	// holds, over the slice's whole capacity: a request that keeps its
	// place from one step to the next has only its moving fields written.
	slotSeq  []uint64
	inFlight bool
	outcomes []Outcome
	hits     []kvblock.BlockID
	short    bool // the last admit failed for want of blocks
	// loras are the distinct adapters running (MaxLoRAs), and passed the
	// waiting requests a Schedule passed over for want of an adapter
	// slot; scratch of Schedule.
	loras  []kvblock.Adapter
	passed []*Request

	// OnPreempt, when set, is called for a request about to be preempted,
	// before its hold is released: an offload policy may take store holds.
	OnPreempt func(r *Request)

	// OnAdmit, when set, is called during Schedule for the head of the
	// waiting queue when it holds no blocks (Hold == 0) and fits (budget and
	// blocks, counting its prefix-cache hit), just before it is admitted,
	// and decides (see Admission). The engine parks a request whose prefix
	// it is loading back from an offload tier: called here rather than at
	// Add, the lookup sees the pool as it is at admission, when a prefix
	// cached at arrival may have been evicted. The hook may take holds in
	// the pool (Schedule reads the pool afresh for each request) but must
	// not call back into the scheduler.
	OnAdmit func(r *Request) Admission

	stats Stats
}

// Stats are cumulative counters.
type Stats struct {
	Preemptions       uint64
	PrefixQueryTokens uint64
	PrefixHitTokens   uint64
	PromptTokens      uint64 // prompt tokens of admitted requests (counted once)
	// PromptComputedTokens counts prompt positions this engine computed,
	// each once: not those found in the prefix cache, nor a decoder's
	// pulled prefix, nor a recomputation after a preemption (counted in
	// RecomputedPrefill). vLLM's prompt_tokens_by_source{local_compute},
	// counted as the steps are scheduled.
	PromptComputedTokens uint64
	ComputedTokens       uint64 // positions computed, recomputation included
	GeneratedTokens      uint64
	Steps                uint64
	RecomputedPrefill    uint64 // prompt positions computed again after a preemption
	BatchedTokensMax     int
	RunningMax           int
	QueueFullRejections  uint64
	// WaitingReclaims counts waiting requests whose blocks were taken back
	// (and counted in Preemptions) because nothing ran and the queue's head
	// needed them.
	WaitingReclaims uint64
}

// New returns a scheduler over pool. It panics on an invalid cfg.
func New(cfg Config, pool *kvblock.Pool) *Scheduler {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	s := &Scheduler{cfg: cfg, pool: pool, bs: pool.BlockSizeTokens(), maxLen: pool.Capacity() * pool.BlockSizeTokens()}
	s.waiting.priority = cfg.Policy == Priority
	return s
}

// Config returns the configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// Stats returns the cumulative counters.
func (s *Scheduler) Stats() Stats { return s.stats }

// MaxLen is the longest sequence (prompt plus generated tokens) the
// scheduler lets a request reach: the pool's capacity in tokens. A request
// that reaches it finishes with FinishedLength, as at its MaxModelLen,
// whatever its MaxTokens and MaxModelLen allow: one token more would need
// a block more than the pool has, so the request, preempted to make room,
// could never be admitted again, and every request behind it in the queue
// would wait forever. A prompt longer than MaxLen can never run at all:
// the caller refuses it before Add (engine.Core.Add does).
func (s *Scheduler) MaxLen() int { return s.maxLen }

// NumWaiting is the number of waiting (and preempted) requests.
func (s *Scheduler) NumWaiting() int { return len(s.waiting.items) }

// NumRunning is the number of running requests.
func (s *Scheduler) NumRunning() int { return len(s.running) }

// InFlight reports whether a batch was scheduled and not yet updated.
func (s *Scheduler) InFlight() bool { return s.inFlight }

// Short reports whether requests wait and the last admission attempt
// failed for want of blocks (the engine's lease spill reads it as memory
// pressure).
func (s *Scheduler) Short() bool { return s.short && len(s.waiting.items) > 0 }

// Add queues r. It refuses with QueueFull when MaxWaiting requests wait.
func (s *Scheduler) Add(r *Request) AddResult {
	if len(r.Tokens) == 0 || r.NumPromptTokens <= 0 || r.NumPromptTokens > len(r.Tokens) {
		panic(fmt.Sprintf("sched: request %d has %d tokens and %d prompt tokens", r.ID, len(r.Tokens), r.NumPromptTokens))
	}
	if len(s.waiting.items) >= s.cfg.MaxWaiting {
		s.stats.QueueFullRejections++
		return QueueFull
	}
	s.seq++
	r.seq = s.seq
	r.status = Waiting
	r.Hashes = kvblock.AppendHashes(r.Hashes[:0], r.Tokens, s.bs, r.Extras)
	s.waiting.push(r)
	return Added
}

// Requeue queues r regardless of MaxWaiting: for a request that was
// admitted earlier under another bound (a decoder's request whose remote
// prefix just arrived) and must not be dropped now.
func (s *Scheduler) Requeue(r *Request) {
	if s.Add(r) == QueueFull {
		s.stats.QueueFullRejections--
		s.seq++
		r.seq = s.seq
		r.status = Waiting
		r.Hashes = kvblock.AppendHashes(r.Hashes[:0], r.Tokens, s.bs, r.Extras)
		s.waiting.push(r)
	}
}

// Resume gives back a request that OnAdmit parked: it rejoins the waiting
// queue at the place its arrival (and priority) gives it, ahead of
// requests that arrived after it, regardless of MaxWaiting (it was admitted
// to the queue before). Resuming a request that is queued, running or
// finished panics.
func (s *Scheduler) Resume(r *Request) {
	if (r.status != Waiting && r.status != Preempted) || s.waiting.has(r) || r.seq == 0 {
		panic(fmt.Sprintf("sched: Resume of request %d, which is %v and not parked", r.ID, r.status))
	}
	s.waiting.push(r)
}

// Finish removes r from the queues with a terminal status (an abort or an
// error decided by the caller). It does not touch r's hold. Finishing a
// finished request is a no-op that returns false.
func (s *Scheduler) Finish(r *Request, st Status) bool {
	if !st.Finished() {
		panic("sched: Finish with a non-terminal status")
	}
	if r.status.Finished() {
		return false
	}
	switch r.status {
	case Waiting, Preempted:
		if s.waiting.has(r) {
			s.waiting.remove(r)
		}
	case Running:
		for i, q := range s.running {
			if q == r {
				copy(s.running[i:], s.running[i+1:])
				s.running[len(s.running)-1] = nil
				s.running = s.running[:len(s.running)-1]
				break
			}
		}
	}
	r.status = st
	return true
}

// capLong bounds a request's positions in one step by
// LongPrefillTokenThreshold.
func (s *Scheduler) capLong(n int) int {
	if t := s.cfg.LongPrefillTokenThreshold; t > 0 && n > t {
		return t
	}
	return n
}

func (s *Scheduler) blocksFor(tokens int) int { return (tokens + s.bs - 1) / s.bs }

// Schedule builds the next step's batch. The returned batch and its slices
// are owned by the scheduler and valid until Update. Schedule panics if the
// previous batch was not updated. An empty batch means there is nothing to
// run until something changes outside the scheduler: a request is added,
// requeued, resumed or finished, or blocks held elsewhere are released.
func (s *Scheduler) Schedule() *model.Batch {
	if s.inFlight {
		panic("sched: Schedule before Update of the previous batch")
	}
	s.batch.Seqs = s.batch.Seqs[:0]
	s.batchReqs = s.batchReqs[:0]
	budget := s.cfg.MaxNumBatchedTokens
	preempted := false

	for i := 0; i < len(s.running) && budget > 0; i++ {
		r := s.running[i]
		n := s.capLong(len(r.Tokens) - r.NumComputed)
		if n <= 0 {
			panic(fmt.Sprintf("sched: running request %d has nothing to compute", r.ID))
		}
		if n > budget {
			if !s.cfg.ChunkedPrefill {
				continue
			}
			n = budget
		}
		need := s.blocksFor(r.NumComputed+n) - s.pool.Len(r.Hold)
		for need > s.pool.NumAvailable() {
			v := s.victim(i)
			s.preempt(v)
			preempted = true
			if v == r {
				break
			}
		}
		if r.status != Running {
			break // r was the victim and left the running list
		}
		if need > 0 && !s.pool.Allocate(r.Hold, need) {
			panic("sched: allocation failed after preemption made room")
		}
		s.add(r, n)
		budget -= n
	}

	// A step that preempted admits nothing (the blocks it freed go to the
	// running requests first, as in vLLM), unless nothing is left to run:
	// an empty batch tells the caller that nothing can run until something
	// changes outside, so it would not call Schedule again, and the
	// preempted request and those behind it would wait forever.
	if !preempted || len(s.batch.Seqs) == 0 {
		s.runningLoRAs()
		for budget > 0 && len(s.running) < s.cfg.MaxNumSeqs && len(s.waiting.items) > 0 {
			r := s.waiting.peek()
			if s.tooManyLoRAs(r) {
				s.passed = append(s.passed, s.waiting.pop())
				continue
			}
			if s.admit(r, &budget) {
				if r.status == Running {
					s.addLoRA(r.Extras.Adapter)
				}
				continue
			}
			// Nothing runs, so nothing will free a block: if the head
			// lacks blocks that waiting requests hold (a decoder's
			// pulled prefixes), take them back or no request ever ends.
			if s.short && len(s.running) == 0 && s.reclaimWaiting(r) {
				continue
			}
			break
		}
		for _, r := range s.passed {
			s.waiting.push(r) // its place: the queue orders by (priority, arrival)
		}
		clear(s.passed)
		s.passed = s.passed[:0]
	}
	if len(s.batch.Seqs) > 0 {
		s.inFlight = true
		s.stats.Steps++
		if t := s.cfg.MaxNumBatchedTokens - budget; t > s.stats.BatchedTokensMax {
			s.stats.BatchedTokensMax = t
		}
		if len(s.running) > s.stats.RunningMax {
			s.stats.RunningMax = len(s.running)
		}
	}
	return &s.batch
}

// runningLoRAs collects the distinct adapters of the running requests
// into s.loras, when MaxLoRAs limits them.
func (s *Scheduler) runningLoRAs() {
	s.loras = s.loras[:0]
	if s.cfg.MaxLoRAs == 0 {
		return
	}
	for _, r := range s.running {
		s.addLoRA(r.Extras.Adapter)
	}
}

func (s *Scheduler) addLoRA(a kvblock.Adapter) {
	if s.cfg.MaxLoRAs > 0 && !a.IsBase() && !slices.Contains(s.loras, a) {
		s.loras = append(s.loras, a)
	}
}

// tooManyLoRAs reports whether admitting r would run more than MaxLoRAs
// distinct adapters.
func (s *Scheduler) tooManyLoRAs(r *Request) bool {
	a := r.Extras.Adapter
	return s.cfg.MaxLoRAs > 0 && !a.IsBase() && len(s.loras) >= s.cfg.MaxLoRAs && !slices.Contains(s.loras, a)
}

// admit tries to move the head of the waiting queue to running.
func (s *Scheduler) admit(r *Request, budget *int) bool {
	hitBlocks := 0
	computed := r.NumComputed
	if r.Hold == 0 && !r.Sampling.PromptLogprobs {
		// Longest cached prefix, leaving at least one token to compute so
		// the step produces logits. A request that asks for its prompt's
		// logprobs computes every position.
		maxHit := (len(r.Tokens) - 1) / s.bs
		hashes := r.Hashes
		if len(hashes) > maxHit {
			hashes = hashes[:maxHit]
		}
		s.hits = s.pool.Lookup(s.hits[:0], hashes)
		hitBlocks = len(s.hits)
		computed = hitBlocks * s.bs
	}
	n := s.capLong(len(r.Tokens) - computed)
	if n > *budget {
		if !s.cfg.ChunkedPrefill {
			return false
		}
		n = *budget
	}
	have := hitBlocks
	if r.Hold != 0 {
		have = s.pool.Len(r.Hold)
	}
	need := s.blocksFor(computed+n) - have
	// Sharing evictable hit blocks takes them out of what Allocate can use.
	avail := s.pool.NumAvailable()
	for _, b := range s.hits[:hitBlocks] {
		if s.pool.Refs(b) == 0 {
			avail--
		}
	}
	if need > avail {
		s.short = true
		return false
	}
	s.short = false
	if r.Hold == 0 && s.OnAdmit != nil {
		switch s.OnAdmit(r) {
		case Park:
			s.waiting.pop() // the caller Resumes it
			return true
		case Defer:
			return false
		}
	}
	if !r.admitted {
		r.admitted = true
		r.NumCachedTokens = computed
		s.stats.PromptTokens += uint64(r.NumPromptTokens)
		if r.Hold == 0 {
			s.stats.PrefixQueryTokens += uint64(len(r.Tokens))
			s.stats.PrefixHitTokens += uint64(computed)
		}
	}
	if r.Hold == 0 {
		r.Hold = s.pool.NewHold(kvblock.HoldRequest, r.ID)
		s.pool.Share(r.Hold, s.hits[:hitBlocks])
		r.NumComputed = computed
		r.cachedBlocks = hitBlocks
	}
	if need > 0 && !s.pool.Allocate(r.Hold, need) {
		panic("sched: allocation failed after the availability check")
	}
	s.waiting.pop()
	r.status = Running
	s.running = append(s.running, r)
	s.add(r, n)
	*budget -= n
	return true
}

func (s *Scheduler) add(r *Request, n int) {
	i := len(s.batch.Seqs)
	if i < cap(s.batch.Seqs) {
		s.batch.Seqs = s.batch.Seqs[:i+1]
	} else {
		s.batch.Seqs = append(s.batch.Seqs, model.Seq{})
		s.slotSeq = append(s.slotSeq, make([]uint64, cap(s.batch.Seqs)-len(s.slotSeq))...)
	}
	seq := &s.batch.Seqs[i]
	if s.slotSeq[i] != r.seq {
		// Another request had this place: write the fields a request
		// keeps for its life (a Sampling is large, and a copy with
		// pointers costs write barriers while the GC runs).
		*seq = model.Seq{Req: r.ID, Sampling: r.Sampling, NumPromptTokens: r.NumPromptTokens, Adapter: r.Extras.Adapter}
		s.slotSeq[i] = r.seq
	}
	seq.Tokens = r.Tokens
	seq.Start = r.NumComputed
	seq.Count = n
	seq.Blocks = s.pool.Blocks(r.Hold)
	seq.Sample = r.NumComputed+n == len(r.Tokens)
	seq.Mask = nil
	s.batchReqs = append(s.batchReqs, r)
	r.inBatch = true
	if r.NumComputed < r.NumPromptTokens {
		end := min(r.NumComputed+n, r.NumPromptTokens)
		if r.NumPreemptions > 0 {
			s.stats.RecomputedPrefill += uint64(end - r.NumComputed)
		}
		if first := max(r.NumComputed, r.promptDone); end > first {
			s.stats.PromptComputedTokens += uint64(end - first)
			r.promptDone = end
		}
	}
	s.stats.ComputedTokens += uint64(n)
}

// victim picks the running request to preempt; i is the index of the
// request being scheduled (requests before it already have their blocks for
// this step, so they are not candidates).
func (s *Scheduler) victim(i int) *Request {
	if s.cfg.Policy == FCFS {
		return s.running[len(s.running)-1]
	}
	v := s.running[i]
	for _, q := range s.running[i+1:] {
		if q.Priority > v.Priority || (q.Priority == v.Priority && q.seq > v.seq) {
			v = q
		}
	}
	return v
}

// reclaimWaiting preempts the waiting request, other than head, that
// holds blocks and comes last in the queue's order (lowest priority, then
// newest): its hold is released (its full blocks stay cached, so it may
// hit them again when admitted) and it will compute what it lacks. It
// reports whether there was one. Only Schedule calls it, when nothing runs
// and head does not fit: without it, requests that wait with blocks (a
// decoder's pulled prefixes) could starve the head forever.
func (s *Scheduler) reclaimWaiting(head *Request) bool {
	var v *Request
	for _, q := range s.waiting.items {
		if q == head || q.Hold == 0 {
			continue
		}
		if v == nil || s.waiting.less(v, q) {
			v = q
		}
	}
	if v == nil {
		return false
	}
	if s.OnPreempt != nil {
		s.OnPreempt(v)
	}
	s.pool.Release(v.Hold)
	v.Hold = 0
	v.NumComputed = 0
	v.cachedBlocks = 0
	v.NumPreemptions++
	v.status = Preempted
	s.stats.Preemptions++
	s.stats.WaitingReclaims++
	return true
}

func (s *Scheduler) preempt(r *Request) {
	if s.OnPreempt != nil {
		s.OnPreempt(r)
	}
	for i, q := range s.running {
		if q == r {
			copy(s.running[i:], s.running[i+1:])
			s.running[len(s.running)-1] = nil
			s.running = s.running[:len(s.running)-1]
			break
		}
	}
	s.pool.Release(r.Hold)
	r.Hold = 0
	r.NumComputed = 0
	r.cachedBlocks = 0
	r.NumPreemptions++
	r.status = Preempted
	s.stats.Preemptions++
	s.waiting.push(r)
}

// Update applies the result of the batch returned by the last Schedule and
// returns what happened to each request of the batch. Requests finished
// while the step ran (Finish) are skipped. The returned slice is owned by the
// scheduler and valid until the next Update.
func (s *Scheduler) Update(res *model.StepResult) []Outcome {
	if !s.inFlight {
		panic("sched: Update without a scheduled batch")
	}
	s.inFlight = false
	s.outcomes = s.outcomes[:0]
	finished := false
	for i, r := range s.batchReqs {
		r.inBatch = false
		if r.status != Running {
			continue
		}
		seq := &s.batch.Seqs[i]
		r.NumComputed += seq.Count
		s.cacheFull(r)
		o := s.nextOutcome(r)
		if seq.Sampling.PromptLogprobs && i < len(res.PromptLogprobs) && len(res.PromptLogprobs[i].Entries) > 0 {
			o.PromptLogprobs = &res.PromptLogprobs[i]
		}
		if seq.Sample {
			tok := res.Tokens[i]
			if tok == model.NoToken {
				panic(fmt.Sprintf("sched: executor sampled nothing for request %d", r.ID))
			}
			r.Tokens = append(r.Tokens, tok)
			s.stats.GeneratedTokens++
			o.Token = tok
			if seq.Sampling.Logprobs && i < len(res.Logprobs) {
				o.Logprobs = &res.Logprobs[i]
			}
			if st := r.stopStatus(tok, s.maxLen); st != Running {
				r.status = st
				o.Finished = st
				finished = true
			} else if len(r.Tokens) >= (len(r.Hashes)+1)*s.bs { // a block just filled
				r.Hashes = kvblock.AppendHashes(r.Hashes, r.Tokens, s.bs, r.Extras)
			}
		}
	}
	if finished {
		j := 0
		for _, r := range s.running {
			if r.status == Running {
				s.running[j] = r
				j++
			}
		}
		clear(s.running[j:])
		s.running = s.running[:j]
	}
	return s.outcomes
}

// cacheFull offers r's newly full, computed blocks to the prefix cache.
func (s *Scheduler) cacheFull(r *Request) {
	full := min(r.NumComputed/s.bs, len(r.Hashes))
	if full <= r.cachedBlocks {
		return
	}
	blocks := s.pool.Blocks(r.Hold)
	parent := kvblock.RootHash
	if r.cachedBlocks > 0 {
		parent = r.Hashes[r.cachedBlocks-1]
	}
	s.pool.CacheRunAdapter(blocks[r.cachedBlocks:full], r.Hashes[r.cachedBlocks:full], parent,
		r.Tokens[r.cachedBlocks*s.bs:full*s.bs], r.Extras.Adapter)
	r.cachedBlocks = full
}

// stopStatus decides whether the token just appended ends the request;
// maxLen is the scheduler's MaxLen.
func (r *Request) stopStatus(tok int32, maxLen int) Status {
	out := r.NumOutputTokens()
	if out >= r.MinTokens {
		if tok == r.EOS && !r.IgnoreEOS {
			return FinishedStopped
		}
		for _, t := range r.StopTokenIDs {
			if t == tok {
				return FinishedStopped
			}
		}
	}
	if out >= r.MaxTokens || (r.MaxModelLen > 0 && len(r.Tokens) >= r.MaxModelLen) || len(r.Tokens) >= maxLen {
		return FinishedLength
	}
	return Running
}

// nextOutcome appends the outcome of r to the step's outcomes, no token
// and not finished yet, and returns it for Update to fill in place: its
// fields are stored one by one, where appending a whole Outcome would
// copy it with a bulk write barrier while the GC marks.
func (s *Scheduler) nextOutcome(r *Request) *Outcome {
	n := len(s.outcomes)
	if n < cap(s.outcomes) {
		s.outcomes = s.outcomes[:n+1]
	} else {
		s.outcomes = append(s.outcomes, Outcome{})
	}
	o := &s.outcomes[n]
	o.Req, o.Token, o.Finished, o.Logprobs, o.PromptLogprobs = r, model.NoToken, 0, nil, nil
	return o
}

// Preemptions is Stats().Preemptions, without copying the Stats.
func (s *Scheduler) Preemptions() uint64 { return s.stats.Preemptions }
