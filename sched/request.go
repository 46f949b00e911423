package sched

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// A request as the scheduler knows it: its status, its place in the
// queues, and what a step did to it (Outcome).

// Status is a request's place in its lifecycle.
type Status uint8

const (
	Waiting Status = iota
	Running
	Preempted
	// Finished statuses follow; see Finished.
	FinishedStopped // a stop token, EOS or stop string
	FinishedLength  // max tokens or the model's context length
	FinishedAborted // the client or the engine gave up on it
	FinishedError   // it could not be completed
)

// Finished reports whether s is a terminal status.
func (s Status) Finished() bool { return s >= FinishedStopped }

func (s Status) String() string {
	switch s {
	case Waiting:
		return "waiting"
	case Running:
		return "running"
	case Preempted:
		return "preempted"
	case FinishedStopped:
		return "stopped"
	case FinishedLength:
		return "length"
	case FinishedAborted:
		return "aborted"
	case FinishedError:
		return "error"
	}
	return fmt.Sprintf("Status(%d)", s)
}

// FinishReason is the OpenAI finish_reason of a finished status.
func (s Status) FinishReason() string {
	switch s {
	case FinishedStopped:
		return "stop"
	case FinishedLength:
		return "length"
	case FinishedAborted:
		return "abort"
	case FinishedError:
		return "error"
	}
	return ""
}

// Request is one sequence the scheduler runs. The caller fills the exported
// fields before Add and may read them at any time; the scheduler updates
// Tokens, NumComputed, NumCachedTokens, Hold, Hashes and NumPreemptions.
type Request struct {
	ID uint64
	// Tokens are the prompt followed by the generated tokens.
	Tokens          []int32
	NumPromptTokens int
	// NumComputed is how many leading positions have KV in the hold's
	// blocks.
	NumComputed int
	// NumCachedTokens is the prefix-cache hit of the first admission, for
	// usage.prompt_tokens_details.cached_tokens.
	NumCachedTokens int
	// Hold is the request hold on its blocks (its block table), or zero.
	// A caller may add a request that already holds computed blocks (a
	// decoder's pulled prefix): then Hold and NumComputed are set and no
	// prefix lookup happens.
	Hold kvblock.HoldID
	// Hashes are the prefix hashes of the full blocks of Tokens.
	Hashes []kvblock.Hash
	Extras kvblock.Extras

	Priority int
	Sampling model.Sampling
	// Stop conditions.
	MaxTokens int // generated tokens; ≥ 1
	// MaxModelLen bounds prompt + generated tokens; 0 = unlimited. The
	// pool's capacity in tokens bounds them too, whatever MaxModelLen says
	// (see Scheduler.MaxLen).
	MaxModelLen  int
	MinTokens    int // EOS and stop tokens are ignored before this many
	StopTokenIDs []int32
	IgnoreEOS    bool
	EOS          int32

	NumPreemptions int

	status       Status
	seq          uint64
	heapIdx      int  // index in the waiting heap while queued
	cachedBlocks int  // leading blocks of Hold this request has offered to the cache
	inBatch      bool // part of the batch being executed
	admitted     bool // NumCachedTokens recorded
	promptDone   int  // prompt positions computed here at least once (Stats.PromptComputedTokens)
}

// Status is the request's status.
func (r *Request) Status() Status { return r.status }

// NumOutputTokens is how many tokens were generated.
func (r *Request) NumOutputTokens() int { return len(r.Tokens) - r.NumPromptTokens }

// InBatch reports whether the request is in the batch being executed: its
// blocks may be read or written until the step completes.
func (r *Request) InBatch() bool { return r.inBatch }

// AddResult is the outcome of Add.
type AddResult uint8

const (
	Added AddResult = iota
	QueueFull
)

// Admission is an OnAdmit decision.
type Admission uint8

const (
	// Admit the request now.
	Admit Admission = iota
	// Park takes the request out of the waiting queue (its status stays
	// Waiting or Preempted; NumWaiting no longer counts it) and Schedule
	// goes on with the next one. The caller owns it until it gives it back
	// with Resume, or drops it with Finish.
	Park
	// Defer leaves the request at the head of the queue and admits nothing
	// more this step, as if it did not fit; OnAdmit is asked again at the
	// next Schedule.
	Defer
)

// Outcome is what a step did to one request.
type Outcome struct {
	Req *Request
	// Token is the sampled token, or model.NoToken.
	Token int32
	// Finished is the request's new status when this step finished it.
	Finished Status
	// Logprobs are the sampled token's, when the request asked for them
	// (Sampling.Logprobs); nil otherwise. PromptLogprobs are the prompt
	// tokens' this step scored (Sampling.PromptLogprobs), or nil. Both
	// point into the step's result: valid until the next Update.
	Logprobs       *model.Logprobs
	PromptLogprobs *model.PromptLogprobs
}
