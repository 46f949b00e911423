package node

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/xfer"
)

// SubmitOptions tune how a Stream wakes its consumer.
type SubmitOptions struct {
	// FinishedOnly wakes the consumer only when the request finishes; the
	// outputs accumulate until then. It saves one goroutine wake-up per
	// token for consumers that need no early look at the tokens (a
	// non-streaming response without stop strings).
	FinishedOnly bool
	// Buf, if it has room, takes the stream's first outputs, saving the
	// stream an allocation: a consumer that pools its buffers passes one
	// here (then nil as Recv's first spare). The stream owns it from the
	// call on; the first Recv that returns outputs returns it.
	Buf []engine.Output
}

// enqueue adds m to the inbox and wakes the loop. It reports false if the
// node is closed.
func (n *Node) enqueue(m nodeMsg) bool {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return false
	}
	n.inbox = append(n.inbox, m)
	n.queued.Store(true)
	n.mu.Unlock()
	n.selfWake()
	return true
}

func (n *Node) Submit(req *engine.Request) (*Stream, engine.AddResult) {
	return n.SubmitWith(req, SubmitOptions{})
}

// SubmitWith queues req and waits until the loop has added it to the core
// (or refused it). On engine.Accepted the returned Stream yields the request's
// outputs; otherwise the stream is nil. The node copies what it needs from
// req before SubmitWith returns. Before Run starts, SubmitWith blocks until
// it does.
func (n *Node) SubmitWith(req *engine.Request, opt SubmitOptions) (*Stream, engine.AddResult) {
	s := n.newStream(req, opt, false)
	if res := n.queueAdd(req, s); res != engine.Accepted {
		return nil, res
	}
	<-s.notify
	if s.addResult != engine.Accepted {
		return nil, s.addResult
	}
	return s, engine.Accepted
}

// Start queues req like SubmitWith but does not wait for the loop: it
// returns the request's stream at once, and the submission's outcome comes
// with the stream's first Recv — outputs if the core accepted it, or
// ErrRefused (Stream.Refusal says why). It saves the consumer one wake-up
// per request. The node reads req in its loop, so the caller must keep req
// unchanged until that first Recv returns or Abort of req.ID has returned.
// A refused request's Remote is told, as by SubmitWith.
func (n *Node) Start(req *engine.Request, opt SubmitOptions) *Stream {
	s := n.newStream(req, opt, true)
	if res := n.queueAdd(req, s); res != engine.Accepted {
		s.addResult, s.refused = res, true
	}
	return s
}

// ErrRefused is Recv's error on a stream from Start whose request was not
// accepted; Stream.Refusal gives the engine.AddResult.
var ErrRefused = errors.New("node: request refused")

// RefusedStream returns a stream whose first Recv returns ErrRefused with
// refusal res, as Start's for a refused request: for Engine wrappers and
// tests that refuse requests themselves.
func RefusedStream(id string, res engine.AddResult) *Stream {
	return &Stream{id: id, async: true, refused: true, addResult: res, notify: make(chan struct{}, 1)}
}

// maxBufHint bounds the capacity a stream's first buffer is allocated
// with.
const maxBufHint = 64

func (n *Node) newStream(req *engine.Request, opt SubmitOptions, async bool) *Stream {
	// A consumer that takes its outputs at the end gets a buffer for all
	// of them; a streaming one hands buffers back and forth, and with a
	// fast model finds several outputs at a time.
	hint := min(max(req.MaxTokens, 0)+1, maxBufHint)
	if !opt.FinishedOnly {
		hint = min(hint, 16)
	}
	return &Stream{
		id:           req.ID,
		node:         n,
		finishedOnly: opt.FinishedOnly,
		async:        async,
		bufHint:      hint,
		notify:       make(chan struct{}, 1),
		pend:         opt.Buf[:0],
	}
}

// queueAdd puts req in the inbox for the loop, or refuses it at once
// (closed or draining node, too many submissions queued), telling its
// Remote.
func (n *Node) queueAdd(req *engine.Request, s *Stream) engine.AddResult {
	n.mu.Lock()
	switch {
	case n.closed || n.draining.Load():
		n.mu.Unlock()
		n.reject(req.Remote)
		return engine.RejectedShuttingDown
	case n.pending >= n.maxPending:
		n.mu.Unlock()
		n.reject(req.Remote)
		return engine.RejectedQueueFull
	}
	n.inbox = append(n.inbox, nodeMsg{kind: msgAdd, req: req, stream: s})
	n.queued.Store(true)
	n.pending++
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return engine.Accepted
}

// Abort aborts the live request id and waits for the loop's answer. After
// Run has returned it reports engine.AbortUnknown.
func (n *Node) Abort(id string) engine.AbortResult {
	reply := make(chan engine.AbortResult, 1)
	if !n.enqueue(nodeMsg{kind: msgAbort, id: id, abort: reply}) {
		return engine.AbortUnknown
	}
	return <-reply
}

// Stop finishes the live request id with status stopped, as a stop
// condition the engine does not know would (a stop string, matched by the
// HTTP layer on the detokenized text), and waits for the loop's answer.
// Unlike Abort it counts as a success (finished_reason stop), and unlike
// Abort it never touches a finished request's lease: a request that
// already finished is reported AbortAlreadyFinished and nothing changes.
// A stopped request is granted no lease. After Run has returned it
// reports engine.AbortUnknown.
func (n *Node) Stop(id string) engine.AbortResult {
	reply := make(chan engine.AbortResult, 1)
	if !n.enqueue(nodeMsg{kind: msgStop, id: id, abort: reply}) {
		return engine.AbortUnknown
	}
	return <-reply
}

// Reject tells the prefill engine that owns req's remote prefix (see
// PullRemote) that req was refused before admission (RELEASE rejected),
// so P frees its blocks at once. It works in every state of the node,
// also while it drains; it is a no-op for a nil req or one without a
// remote prefix, on an engine without a transfer consumer, and after Run
// has returned (the transport is down: P sees the connection lost). The
// node copies what it needs; it does not wait for the loop. SubmitWith
// calls it itself for every request it refuses.
func (n *Node) Reject(req *engine.Request) {
	if req == nil {
		return
	}
	n.reject(req.Remote)
}

func (n *Node) reject(r *xfer.Remote) {
	if r == nil || n.tr == nil {
		return
	}
	rc := *r
	n.enqueue(nodeMsg{kind: msgReject, remote: &rc})
}

// Delivered reports whether the HTTP response carrying request id's lease
// token (engine.Output.Grant) was written to the client: ok false releases the
// lease at once (reason undelivered), since nobody can ever present its
// token. Call it once per granted request, after the write; it does not
// wait for the loop.
func (n *Node) Delivered(id string, ok bool) {
	n.enqueue(nodeMsg{kind: msgDelivered, id: id, ok: ok})
}

// Stats returns a snapshot. Before Run starts and after it returns it is
// read directly; in between the loop answers it between steps.
func (n *Node) Stats() engine.NodeStats {
	n.mu.Lock()
	switch {
	case n.closed:
		n.mu.Unlock()
		<-n.done // final is written before Run returns
		n.mu.Lock()
		s := n.final
		s.Finished = maps.Clone(s.Finished)
		s.Rejected = maps.Clone(s.Rejected)
		if s.Offload != nil {
			o := *s.Offload
			o.Tiers = slices.Clone(o.Tiers)
			s.Offload = &o
		}
		n.mu.Unlock()
		return s
	case !n.started:
		s := n.snapshot(n.Now())
		n.mu.Unlock()
		return s
	}
	reply := make(chan engine.NodeStats, 1)
	n.inbox = append(n.inbox, nodeMsg{kind: msgStats, stats: reply})
	n.queued.Store(true)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return <-reply
}

// Drain stops admitting requests: Submit returns engine.RejectedShuttingDown from
// now on, while live requests run to completion. Use WaitIdle to wait for
// them.
func (n *Node) Drain() {
	n.draining.Store(true)
	n.enqueue(nodeMsg{kind: msgDrain})
}

// DrainBy drains the node (see Drain) and bounds how long it serves its
// outstanding leases (a prefill engine's): until deadline they are served
// as usual — read, released or expired — and at deadline every lease still
// live is released (reason shutdown; a lease being read, when its read
// ends). Use WaitDrained to wait until nothing is left to serve.
func (n *Node) DrainBy(deadline time.Time) {
	n.draining.Store(true)
	at := clock.Instant(max(deadline.Sub(n.epoch), 0))
	n.enqueue(nodeMsg{kind: msgDrainBy, at: at})
}

// WaitDrained waits until a draining node has nothing left to serve (no
// live request, no step executing, no outstanding lease, no pull and no
// release notice pending: Core.Drained), or ctx is done (then it returns
// ctx.Err()). It returns at once once Run has returned. Call Drain or
// DrainBy first, or it waits for ctx.
func (n *Node) WaitDrained(ctx context.Context) error {
	ch := make(chan struct{})
	if !n.enqueue(nodeMsg{kind: msgDrained, idle: ch}) {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-n.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitIdle waits until no request is live and no step is executing, or ctx
// is done (then it returns ctx.Err()). Without Drain new submissions can
// keep the node busy indefinitely.
func (n *Node) WaitIdle(ctx context.Context) error {
	ch := make(chan struct{})
	if !n.enqueue(nodeMsg{kind: msgIdle, idle: ch}) {
		return nil // closed: nothing is live
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stream yields one request's outputs in order; the last one has Finished
// set. One goroutine consumes a stream. A consumer that stops reading must
// abort the request (Node.Abort or Stream.Abort) so its blocks are freed.
