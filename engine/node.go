package engine

// This file is an EDGE: it owns a goroutine, the real clock and locks.
// Everything else in the package is pure.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/model"
)

// NodeConfig configures a Node.
type NodeConfig struct {
	// Logger receives lifecycle logs (never per request or per token).
	// Nil discards.
	Logger *slog.Logger
	// MaxPending bounds the submissions queued for the loop and not yet
	// added to the core; beyond it Submit returns RejectedQueueFull at
	// once. Zero means DefaultMaxPending.
	MaxPending int
}

// DefaultMaxPending is the default NodeConfig.MaxPending.
const DefaultMaxPending = 1 << 16

// SubmitOptions tune how a Stream wakes its consumer.
type SubmitOptions struct {
	// FinishedOnly wakes the consumer only when the request finishes; the
	// outputs accumulate until then. It saves one goroutine wake-up per
	// token for consumers that need no early look at the tokens (a
	// non-streaming response without stop strings).
	FinishedOnly bool
}

// PoolStats are the block pool's current figures.
type PoolStats struct {
	Capacity        int
	BlockSizeTokens int
	Free            int
	Evictable       int
	Held            int
	// Usage is the fraction of blocks held (vLLM's kv_cache_usage_perc).
	Usage float64
}

// NodeStats is a snapshot of a node: the core's counters (its maps are
// copies, owned by the receiver), the pool's figures and the node's state.
type NodeStats struct {
	Stats
	Pool     PoolStats
	Draining bool
	// Streams is the number of requests whose stream is still open.
	Streams int
	// Now is the node's instant when the snapshot was taken.
	Now clock.Instant
}

// Node drives one Core with the real clock. One goroutine (Run) owns the
// core; Submit, Abort, Stats, Drain and WaitIdle send it messages and are
// safe for concurrent use. Instants are monotonic nanoseconds since NewNode.
//
// Each loop iteration takes every queued message at once, applies them,
// steps the core, routes the outputs to their streams, and executes the
// batch inline. A step's modelled duration is honoured with a timer, during
// which new submissions and aborts are still applied; then Complete is
// called and the loop steps again.
type Node struct {
	core  *Core
	exec  model.Executor
	log   *slog.Logger
	cfg   Config
	epoch time.Time

	maxPending int

	// mu guards the inbox and the lifecycle flags. The loop owns the core
	// while started && !closed; outside that window the core is read only
	// under mu.
	mu       sync.Mutex
	inbox    []nodeMsg
	pending  int // msgAdd entries in inbox
	started  bool
	closed   bool
	draining atomic.Bool
	final    NodeStats // valid once closed

	wake chan struct{} // capacity 1: "the inbox changed"
	done chan struct{} // closed when Run returns

	// Loop-owned state.
	streams     map[string]*Stream
	byInternal  map[uint64]*Stream // streams not yet scheduled, by core id
	touched     []*Stream
	idleWaiters []chan struct{}
}

type msgKind uint8

const (
	msgAdd msgKind = iota + 1
	msgAbort
	msgStats
	msgDrain
	msgIdle
	msgDelivered
)

type nodeMsg struct {
	kind   msgKind
	req    *Request
	stream *Stream
	id     string
	abort  chan AbortResult
	stats  chan NodeStats
	idle   chan struct{}
	ok     bool // msgDelivered
}

// NewNode returns a node that will drive core with exec once Run is called.
// The node takes ownership of core: nobody else may touch it afterwards.
func NewNode(core *Core, exec model.Executor, cfg NodeConfig) *Node {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxPending := cfg.MaxPending
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	return &Node{
		core:       core,
		exec:       exec,
		log:        log,
		cfg:        core.Config(),
		epoch:      time.Now(),
		maxPending: maxPending,
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		streams:    make(map[string]*Stream),
		byInternal: make(map[uint64]*Stream),
	}
}

// Now is the node's current instant: monotonic time since NewNode.
func (n *Node) Now() clock.Instant { return clock.Instant(time.Since(n.epoch)) }

// Config is the core's configuration (immutable; safe to read).
func (n *Node) Config() Config { return n.cfg }

// Done is closed when Run has returned.
func (n *Node) Done() <-chan struct{} { return n.done }

// Draining reports whether Drain was called.
func (n *Node) Draining() bool { return n.draining.Load() }

// ErrRunTwice is returned by a second call of Run.
var ErrRunTwice = errors.New("engine: Node.Run called twice")

// Run drives the core until ctx is done, then aborts every live request
// (each stream gets its finished output with status aborted), answers every
// queued message and returns nil. Submissions after that are rejected with
// RejectedShuttingDown. Run may be called once.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return ErrRunTwice
	}
	n.started = true
	n.mu.Unlock()
	defer close(n.done)
	n.log.Info("engine node started", "max_model_len", n.cfg.MaxModelLen,
		"blocks", n.cfg.Pool.NumBlocks, "block_size", n.cfg.Pool.BlockSizeTokens)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var (
		msgs     []nodeMsg
		res      model.StepResult
		inFlight bool
		deadline clock.Instant
	)
	for {
		msgs = n.takeInbox(msgs)
		now := n.Now()
		n.handle(now, msgs)
		if inFlight && now >= deadline {
			n.core.Complete(now, &res)
			inFlight = false
		}
		if !inFlight {
			rd := n.core.Step(now)
			n.route(rd.Outputs)
			if rd.Batch != nil {
				n.noteScheduled(now, rd.Batch)
				n.exec.Execute(rd.Batch, &res)
				deadline = now.Add(res.Duration)
				inFlight = true
				if res.Duration <= 0 {
					// A zero-latency model: let the HTTP goroutines run
					// before the next step, so the loop does not spin
					// small batches against them for the same CPU.
					runtime.Gosched()
					continue
				}
			} else if len(n.idleWaiters) > 0 && n.core.Idle() {
				for _, w := range n.idleWaiters {
					close(w)
				}
				clear(n.idleWaiters)
				n.idleWaiters = n.idleWaiters[:0]
			}
		}
		if inFlight {
			d := deadline.Sub(n.Now())
			if d <= 0 {
				continue
			}
			timer.Reset(d)
			select {
			case <-n.wake:
				timer.Stop()
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				n.shutdown(&res, inFlight)
				return nil
			}
			continue
		}
		select {
		case <-n.wake:
		case <-ctx.Done():
			n.shutdown(&res, false)
			return nil
		}
	}
}

// takeInbox swaps the inbox with spare (emptied) and returns the messages.
func (n *Node) takeInbox(spare []nodeMsg) []nodeMsg {
	clear(spare)
	n.mu.Lock()
	msgs := n.inbox
	n.inbox = spare[:0]
	n.pending = 0
	n.mu.Unlock()
	return msgs
}

// handle applies messages in arrival order.
func (n *Node) handle(now clock.Instant, msgs []nodeMsg) {
	for i := range msgs {
		m := &msgs[i]
		switch m.kind {
		case msgAdd:
			res := n.core.Add(now, m.req)
			s := m.stream
			if res == Accepted {
				n.streams[s.id] = s
				s.internal = n.core.byExt[s.id].ID
				n.byInternal[s.internal] = s
			}
			s.addResult = res
			// The send happens after the write: Submit reads addResult
			// after receiving.
			s.notify <- struct{}{}
		case msgAbort:
			m.abort <- n.core.Abort(now, m.id)
		case msgStats:
			m.stats <- n.snapshot(now)
		case msgDrain:
			n.core.Drain()
		case msgIdle:
			n.idleWaiters = append(n.idleWaiters, m.idle)
		case msgDelivered:
			n.core.Delivered(now, m.id, m.ok)
		}
	}
}

// route appends outputs to their streams and wakes each consumer once.
func (n *Node) route(outs []Output) {
	for i := range outs {
		o := &outs[i]
		s := n.streams[o.ID]
		if s == nil {
			continue // not submitted through this node
		}
		s.mu.Lock()
		s.buf = append(s.buf, *o)
		s.mu.Unlock()
		if o.Finished {
			delete(n.streams, o.ID)
			delete(n.byInternal, s.internal)
		}
		if (!s.finishedOnly || o.Finished) && !s.touched {
			s.touched = true
			n.touched = append(n.touched, s)
		}
	}
	for i, s := range n.touched {
		s.touched = false
		select {
		case s.notify <- struct{}{}:
		default: // a wake-up is already pending
		}
		n.touched[i] = nil
	}
	n.touched = n.touched[:0]
}

// noteScheduled records the first instant each request was scheduled, for
// the queue-time metric.
func (n *Node) noteScheduled(now clock.Instant, b *model.Batch) {
	if len(n.byInternal) == 0 {
		return
	}
	for i := range b.Seqs {
		if s, ok := n.byInternal[b.Seqs[i].Req]; ok {
			s.mu.Lock()
			s.scheduledAt = now
			s.scheduled = true
			s.mu.Unlock()
			delete(n.byInternal, s.internal)
		}
	}
}

func (n *Node) snapshot(now clock.Instant) NodeStats {
	st := n.core.Stats()
	st.Finished = maps.Clone(st.Finished)
	st.Rejected = maps.Clone(st.Rejected)
	p := n.core.Pool()
	return NodeStats{
		Stats: st,
		Pool: PoolStats{
			Capacity:        p.Capacity(),
			BlockSizeTokens: p.BlockSizeTokens(),
			Free:            p.NumFree(),
			Evictable:       p.NumEvictable(),
			Held:            p.NumHeld(),
			Usage:           p.Usage(),
		},
		Draining: n.core.Draining(),
		Streams:  len(n.streams),
		Now:      now,
	}
}

// shutdown aborts everything live, answers every queued message and closes
// the node. The step in flight, if any, is completed at once: its result
// is already computed, only its modelled delay is cut short.
func (n *Node) shutdown(res *model.StepResult, inFlight bool) {
	n.mu.Lock()
	n.closed = true
	msgs := n.inbox
	n.inbox = nil
	n.mu.Unlock()

	now := n.Now()
	n.core.Drain()
	n.draining.Store(true)
	if inFlight {
		n.core.Complete(now, res)
	}
	// Adds still queued are rejected; the rest is answered normally.
	for i := range msgs {
		if m := &msgs[i]; m.kind == msgAdd {
			m.stream.addResult = RejectedShuttingDown
			m.stream.notify <- struct{}{}
			m.kind = 0
		}
	}
	n.handle(now, msgs)
	ids := make([]string, 0, len(n.streams))
	for id := range n.streams {
		ids = append(ids, id)
	}
	for _, id := range ids {
		n.core.Abort(now, id)
	}
	// Aborted requests finish at once; a batch can only come from requests
	// submitted elsewhere. Run them out without waiting, bounded.
	for range 1 << 20 {
		rd := n.core.Step(now)
		n.route(rd.Outputs)
		if rd.Batch == nil {
			break
		}
		n.exec.Execute(rd.Batch, res)
		n.core.Complete(now, res)
	}
	for _, w := range n.idleWaiters {
		close(w)
	}
	n.idleWaiters = nil
	n.mu.Lock()
	n.final = n.snapshot(now)
	n.mu.Unlock()
	n.log.Info("engine node stopped", "aborted", len(ids))
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
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return true
}

// Submit is SubmitWith(req, SubmitOptions{}).
func (n *Node) Submit(req *Request) (*Stream, AddResult) {
	return n.SubmitWith(req, SubmitOptions{})
}

// SubmitWith queues req and waits until the loop has added it to the core
// (or refused it). On Accepted the returned Stream yields the request's
// outputs; otherwise the stream is nil. The node copies what it needs from
// req before SubmitWith returns. Before Run starts, SubmitWith blocks until
// it does.
func (n *Node) SubmitWith(req *Request, opt SubmitOptions) (*Stream, AddResult) {
	s := &Stream{
		id:           req.ID,
		node:         n,
		finishedOnly: opt.FinishedOnly,
		notify:       make(chan struct{}, 1),
	}
	n.mu.Lock()
	switch {
	case n.closed || n.draining.Load():
		n.mu.Unlock()
		return nil, RejectedShuttingDown
	case n.pending >= n.maxPending:
		n.mu.Unlock()
		return nil, RejectedQueueFull
	}
	n.inbox = append(n.inbox, nodeMsg{kind: msgAdd, req: req, stream: s})
	n.pending++
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	<-s.notify
	if s.addResult != Accepted {
		return nil, s.addResult
	}
	return s, Accepted
}

// Abort aborts the live request id and waits for the loop's answer. After
// Run has returned it reports AbortUnknown.
func (n *Node) Abort(id string) AbortResult {
	reply := make(chan AbortResult, 1)
	if !n.enqueue(nodeMsg{kind: msgAbort, id: id, abort: reply}) {
		return AbortUnknown
	}
	return <-reply
}

// Delivered reports whether the HTTP response carrying request id's lease
// token (Output.Grant) was written to the client: ok false releases the
// lease at once (reason undelivered), since nobody can ever present its
// token. Call it once per granted request, after the write; it does not
// wait for the loop.
func (n *Node) Delivered(id string, ok bool) {
	n.enqueue(nodeMsg{kind: msgDelivered, id: id, ok: ok})
}

// Stats returns a snapshot. Before Run starts and after it returns it is
// read directly; in between the loop answers it between steps.
func (n *Node) Stats() NodeStats {
	n.mu.Lock()
	switch {
	case n.closed:
		n.mu.Unlock()
		<-n.done // final is written before Run returns
		n.mu.Lock()
		s := n.final
		s.Finished = maps.Clone(s.Finished)
		s.Rejected = maps.Clone(s.Rejected)
		n.mu.Unlock()
		return s
	case !n.started:
		s := n.snapshot(n.Now())
		n.mu.Unlock()
		return s
	}
	reply := make(chan NodeStats, 1)
	n.inbox = append(n.inbox, nodeMsg{kind: msgStats, stats: reply})
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return <-reply
}

// Drain stops admitting requests: Submit returns RejectedShuttingDown from
// now on, while live requests run to completion. Use WaitIdle to wait for
// them.
func (n *Node) Drain() {
	n.draining.Store(true)
	n.enqueue(nodeMsg{kind: msgDrain})
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
type Stream struct {
	id           string
	node         *Node
	finishedOnly bool
	notify       chan struct{} // capacity 1

	// Loop-owned.
	internal uint64
	touched  bool

	// Written by the loop before the first notify; read by Submit after it.
	addResult AddResult

	mu          sync.Mutex
	buf         []Output
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
// and the request goes on: abort it if it is no longer wanted.
func (s *Stream) Recv(ctx context.Context, spare []Output) ([]Output, error) {
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
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return spare[:0], ctx.Err()
		}
	}
}

// ScheduledAt is the instant the request was first scheduled, and whether
// it was.
func (s *Stream) ScheduledAt() (clock.Instant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scheduledAt, s.scheduled
}

// Abort aborts the stream's request (see Node.Abort).
func (s *Stream) Abort() AbortResult { return s.node.Abort(s.id) }
