package engine

import (
	"fmt"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/constrain"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/xfer"
)

// What goes into the engine and what comes out of it: a request, its
// outputs, and the outcomes of adding and aborting one. A driver's callers
// (node's, through node's API) use these values and nothing below them.

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
	// Adapter is the LoRA adapter to run with (the zero Adapter: the base
	// model). It is part of the prefix-cache key of every block, and the
	// executor applies it (model.Seq.Adapter).
	Adapter kvblock.Adapter
	// RemoteDecode marks a prefill for a remote decoder (P side): when it
	// finishes, its prompt blocks are leased and the finished output
	// carries the Grant.
	RemoteDecode bool
	// LeaseFaults are faults injected on the lease of a RemoteDecode
	// request (the fault API); zero normally.
	LeaseFaults xfer.LeaseFaults
	// Remote is the remote prefix to pull before decoding (D side).
	Remote *xfer.Remote
	// Grammar, when set, constrains the generated text (structured output,
	// tool calls): each step samples only tokens that keep the text in
	// it, and the request stops when the text is complete.
	Grammar *constrain.Grammar
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
	// Req is the core's own id of the request: unique over the core's
	// life, never reused, unlike ID (a client's X-Request-Id, free for
	// another request once this one finished). AbortReq and StopReq take
	// it, so a caller holding an output addresses exactly its request.
	Req uint64
	// Token is the generated token, or model.NoToken.
	Token int32
	// Finished is set on the request's last output.
	Finished bool
	Status   sched.Status
	Usage    Usage
	// At is the instant the output was produced.
	At clock.Instant
	// Grant is the lease on a RemoteDecode request's prompt blocks (on its
	// finished output; nil if none was granted).
	Grant *xfer.Grant
	// Logprobs are Token's log-probability and the most probable tokens',
	// when the request asked for them (Sampling.Logprobs); nil otherwise.
	// The output owns them.
	Logprobs *model.Logprobs
	// PromptLogprobs are, on a request's first output, the logprobs of
	// its prompt tokens 1, 2, ... (entry k is token k+1's), when it asked
	// for them (Sampling.PromptLogprobs). The output owns them.
	PromptLogprobs []model.Logprobs
	// Pulled is set on the first output of a request whose remote prefix
	// was pulled; Fallback says why it was not (zero when it was, or when
	// the request had no remote prefix).
	Pulled   bool
	Fallback xfer.FallbackReason
	// Stuck is set on the finished (error) output of a request whose
	// grammar no token of the vocabulary could continue (constrain.go).
	Stuck bool
}

// Adapter is a LoRA adapter a request runs with (Request.Adapter). It is
// kvblock's, since it keys the prefix cache.
type Adapter = kvblock.Adapter

// The statuses of a finished Output (Output.Status), sched's.
const (
	FinishedStopped = sched.FinishedStopped // a stop token, EOS or stop string
	FinishedLength  = sched.FinishedLength  // max tokens or the model's context length
	FinishedAborted = sched.FinishedAborted // the client or the engine gave up on it
	FinishedError   = sched.FinishedError   // it could not be completed
)

// AddResult is the outcome of Add.
type AddResult uint8

const (
	Accepted AddResult = iota
	// RejectedInvalid: the request is malformed (an empty prompt, a remote
	// prefix that does not fit the prompt, ...).
	RejectedInvalid
	// RejectedDuplicate: a live request already has this id.
	RejectedDuplicate
	// RejectedTooLong: the prompt needs more KV blocks than the engine has.
	RejectedTooLong
	// RejectedQueueFull: the waiting queue is at its bound.
	RejectedQueueFull
	// RejectedShuttingDown: the engine is draining and admits nothing new.
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

// HTTPStatus is the HTTP status an engine answers a client with for a, the
// one mapping that the HTTP server (httpapi) and the simulator (sim) share:
//
//   - 400 for a request the client must change (invalid, too long) and for
//     a duplicate request id. vLLM answers a request id that is already
//     running with a ValueError ("Request id ... already running."), which
//     its OpenAI server turns into a 400 BadRequestError; proxies written
//     against vLLM expect that, not a 409;
//   - 429 when the waiting queue is full: the client may retry later;
//   - 503 while the engine shuts down: another engine may take it;
//   - 200 for Accepted, and 500 for a value this version does not define.
//
// The numbers are written out because a core does not import net/http.
func (a AddResult) HTTPStatus() int {
	switch a {
	case Accepted:
		return 200
	case RejectedInvalid, RejectedTooLong, RejectedDuplicate:
		return 400
	case RejectedQueueFull:
		return 429
	case RejectedShuttingDown:
		return 503
	}
	return 500
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
