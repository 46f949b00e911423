package engine

import "fmt"

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
