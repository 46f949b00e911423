package node

import (
	"context"
	"io"
	"sync"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/wire"
)

type Stream struct {
	id           string
	node         *Node
	finishedOnly bool
	async        bool          // from Start: the add's result comes through Recv
	bufHint      int           // capacity of the first buffer
	notify       chan struct{} // capacity 1

	// Loop-owned.
	internal uint64       // the core's id of the request (Output.Req)
	lease    wire.LeaseID // granted with the finished output, or 0
	touched  bool
	added    bool // the core accepted the submission
	// unscheduled: open, and its request not yet scheduled (for
	// ScheduledAt: noteScheduled records the first instant).
	unscheduled bool
	// pend gathers outputs until the consumer is woken (route).
	pend []engine.Output

	// For SubmitWith: written by the loop before the first notify, read
	// by SubmitWith after it. For Start: under mu, with refused.
	addResult engine.AddResult

	mu          sync.Mutex
	buf         []engine.Output
	refused     bool
	scheduled   bool
	scheduledAt clock.Instant

	// Consumer-owned.
	eof bool
}

// ID is the request's id.
func (s *Stream) ID() string { return s.id }

// Recv waits until outputs are available and returns them, handing the
// stream spare (emptied) as its next buffer: the returned slice belongs to
// the caller, who may pass it back as spare next time, so a stream
// allocates nothing in steady state. After the finished output has been
// returned, Recv returns io.EOF. If ctx ends first Recv returns ctx.Err()
// and the request goes on: abort it if it is no longer wanted. On a stream
// from Start whose request was refused, Recv returns ErrRefused (then
// io.EOF).
func (s *Stream) Recv(ctx context.Context, spare []engine.Output) ([]engine.Output, error) {
	if s.eof {
		return spare[:0], io.EOF
	}
	for {
		s.mu.Lock()
		if len(s.buf) > 0 {
			out := s.buf
			s.buf = spare[:0]
			s.mu.Unlock()
			if out[len(out)-1].Finished {
				s.eof = true
			}
			return out, nil
		}
		if s.refused {
			s.mu.Unlock()
			s.eof = true
			return spare[:0], ErrRefused
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return spare[:0], ctx.Err()
		}
	}
}

// Pending reports whether Recv would return at once: outputs (or a
// refusal) are waiting. A consumer may use it to batch its writes.
func (s *Stream) Pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf) > 0 || s.refused
}

// Refusal is why a stream from Start was refused: engine.Accepted while it was
// not (or not yet known to be).
func (s *Stream) Refusal() engine.AddResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refused {
		return engine.Accepted
	}
	return s.addResult
}

// ScheduledAt is the instant the request was first scheduled, and whether
// it was.
func (s *Stream) ScheduledAt() (clock.Instant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scheduledAt, s.scheduled
}

// Abort aborts the stream's request (see Node.Abort). Unlike Node.Abort
// with the stream's id, it never touches another request, even one that has
// taken the id since this one finished (engine.Core.AbortReq): if the
// stream's own submission was refused (say, as a duplicate of a live id) it
// reports engine.AbortUnknown, even while the refusal is still on its way
// to Recv; once its request finished, only the lease granted with its
// finished output (if any) is revoked.
func (s *Stream) Abort() engine.AbortResult {
	if s.node == nil { // RefusedStream
		return engine.AbortUnknown
	}
	reply := make(chan engine.AbortResult, 1)
	if !s.node.enqueue(nodeMsg{kind: msgAbort, id: s.id, stream: s, abort: reply}) {
		return engine.AbortUnknown
	}
	return <-reply
}

// Stop stops the stream's request (see Node.Stop), never another request
// that has taken its id since (engine.Core.StopReq). A refused submission
// reports engine.AbortUnknown.
func (s *Stream) Stop() engine.AbortResult {
	if s.node == nil { // RefusedStream
		return engine.AbortUnknown
	}
	reply := make(chan engine.AbortResult, 1)
	if !s.node.enqueue(nodeMsg{kind: msgStop, id: s.id, stream: s, abort: reply}) {
		return engine.AbortUnknown
	}
	return <-reply
}

// Delivered reports whether the response carrying the lease token of the
// stream's finished output (engine.Output.Grant) reached the client (see
// Node.Delivered). It addresses that lease only, never one granted to
// another request with the same id; it is a no-op for a stream whose
// request was granted none. Call it after Recv returned the finished
// output; it does not wait for the loop.
func (s *Stream) Delivered(ok bool) {
	if s.node != nil {
		s.node.enqueue(nodeMsg{kind: msgDelivered, id: s.id, stream: s, ok: ok})
	}
}
