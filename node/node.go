package node

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/internal/idtable"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/xfer"
)

// Config configures a Node.
type Config struct {
	// Logger receives lifecycle logs (never per request or per token).
	// Nil discards.
	Logger *slog.Logger
	// MaxPending bounds the submissions queued for the loop and not yet
	// added to the core; beyond it Submit returns RejectedQueueFull at
	// once. Zero means DefaultMaxPending.
	MaxPending int

	// Transport carries the P/D transfer. It is required when the core has
	// a transfer configuration (engine.Config.Transfer) and ignored
	// otherwise. The node owns it from New on: Run drives it (dials,
	// sends, streams reads, feeds its events to the core) and shuts it
	// down when it returns. A node that serves leases (role prefill or
	// both) must have it listening (tcp.Transport.Listen) before New: that
	// address is its TransferEndpoint.
	Transport *tcp.Transport
	// AdvertiseHost is the host this node's responses give D engines as
	// remote_host. Empty means the listener's host; it must be set when
	// the transport listens on a wildcard address (0.0.0.0, [::]).
	AdvertiseHost string
	// MaxReadStreams bounds the reads P streams at once (see
	// engine.LoopConfig). Zero means engine.DefaultMaxReadStreams.
	MaxReadStreams int

	// Offload executes the offload copies (OpenOffload opens it). It is
	// required when the core has an offload configuration
	// (engine.Config.Offload) and ignored otherwise. The node owns it from
	// New on: the loop submits each step's copies and is fed their
	// completions, and when Run returns the node closes the set and
	// applies every outstanding completion, so no store or load hold is
	// left.
	Offload *tier.Set

	// OnTransfer, if set, is called with each remote-prefix pull a decode
	// engine finished (engine.Ready.Transfers: pulled, fell back, failed
	// or dropped), in order, for metrics (kvlease_transfer_seconds). It
	// runs in the node's loop goroutine: it must return quickly and must
	// not call the node.
	OnTransfer func(xfer.Done)

	// OnEvents, if set, is called with each turn's KV cache events
	// (engine.Turn.Events: the pool's, and the offload tiers' when the
	// core has pool events on), in order, for the KV events publisher
	// (kvevents.Publisher.Publish). It runs in the node's loop goroutine:
	// it must not block, must not call the node and must not keep the
	// slice or the events' slices after it returns.
	OnEvents func([]kvblock.Event)

	// AsyncExecute runs the executor on a goroutine of its own: the loop
	// hands it each step's batch and goes on serving the transport (READs
	// from blocks the step does not write, RENEWs, RELEASEs), submissions,
	// aborts, offload completions and timers while the model computes,
	// and applies the result when the goroutine reports it
	// (engine.LoopConfig.Async). Set it for an executor that computes in
	// real time (model/llama: seconds per prefill step on a CPU); a
	// modelled one (model/synth) returns at once with the step's Duration
	// and runs inline, without a hand-off per step.
	AsyncExecute bool

	// OnLeaseEvents, if set, is called with each turn's lease events
	// (engine.Turn.LeaseEvents, recorded when the transfer config's
	// LeaseEvents is on), in order, for the lease topic of the KV events
	// publisher. The same rules as OnEvents apply.
	OnLeaseEvents func([]xfer.LeaseEvent)
}

// DefaultMaxPending is the default Config.MaxPending.
const DefaultMaxPending = 1 << 16

// zeroYieldSteps is how many turns the loop runs back to back (zero-duration
// steps, reads ending) before it yields its processor (see Run).
const zeroYieldSteps = 64

// minTimerWait is the shortest wait for a core deadline: a deadline that is
// already due right after a turn must not make the loop spin.
const minTimerWait = 200 * time.Microsecond

// streamSlots is the size of the direct-mapped part of Node.streams
// (idtable): a stream is looked up for every output routed.
const streamSlots = 4096

// Node runs one engine.Loop with the real clock, the TCP transport and the
// offload tiers: it is the loop's goroutine, and nothing else. Every
// decision about the engine — when to step, what to feed the core in which
// order, how reads stream and how long they pin their leases, the shutdown
// sequence — is the loop's (package engine, pure), the same code the
// simulator runs. What is here is waiting: for submissions, for the
// transport, for offload completions, for the step's modelled duration and
// the core's timers.
//
// One goroutine (Run) owns the loop; Submit, Start, Abort, Stop, Reject,
// Delivered, Stats, Drain, DrainBy, WaitIdle and WaitDrained send it
// messages and are safe for concurrent use. Instants are monotonic
// nanoseconds since New.
//
// Each iteration takes every queued message at once, applies them, runs one
// Turn of the loop and routes its outputs to their streams. A step's
// modelled duration is honoured with a timer, during which new submissions
// and aborts are still applied. A turn that asks for another at once (a
// step of zero duration, the zero profile) is followed by it at once, the
// node yielding its processor only every zeroYieldSteps turns.
//
// Shutdown: Drain or DrainBy stop admitting; WaitIdle waits for the live
// requests, WaitDrained also for outstanding leases and pulls; cancelling
// Run's context then aborts what is left. A node that exits drained closes
// its transfer connections after their last frames.
type Node struct {
	loop  *engine.Loop
	log   *slog.Logger
	cfg   engine.Config
	epoch time.Time

	maxPending int
	onTransfer func(xfer.Done)
	onEvents   func([]kvblock.Event)
	onLeases   func([]xfer.LeaseEvent)

	// mu guards the inbox and the lifecycle flags. The goroutine of Run
	// owns the loop while started && !closed; outside that window the
	// loop is read only under mu.
	mu      sync.Mutex
	inbox   []nodeMsg
	pending int // msgAdd entries in inbox
	// queued is set, under mu, when a message is added to the inbox, and
	// cleared when the loop takes it: the loop's turns skip the lock
	// while nothing came.
	queued   atomic.Bool
	started  bool
	closed   bool
	draining atomic.Bool
	final    engine.NodeStats // valid once closed

	wake chan struct{} // capacity 1: "the inbox changed"
	done chan struct{} // closed when Run returns

	// Run-owned state.
	streams     idtable.Table[Stream] // open streams, by core id (Output.Req)
	unscheduled int                   // open streams whose request was never scheduled (Stream.unscheduled)
	touched     []*Stream
	idleWaiters []chan struct{}
	// drainWaiters are closed when the loop is Drained.
	drainWaiters []chan struct{}

	// Transfer edge; tr is nil without a transfer configuration.
	tr          *tcp.Transport
	port        *tcp.Port
	endpoint    TransferEndpoint
	hasEndpoint bool

	// Offload edge; set is nil without offload. completions is
	// set.Completions() until it is closed, then nil.
	set         *tier.Set
	completions <-chan tier.Completion

	// Executor edge (Config.AsyncExecute): jobs carries each step's batch
	// to the executor goroutine, results brings its result back; result
	// is a result received and not yet reported to the loop. nil without
	// AsyncExecute.
	exec    model.Executor
	jobs    chan *model.Batch
	results chan *model.StepResult
	result  *model.StepResult
}

type msgKind uint8

const (
	msgAdd msgKind = iota + 1
	msgAbort
	msgStats
	msgDrain
	msgIdle
	msgDelivered
	msgReject
	msgStop
	msgDrainBy
	msgDrained
)

type nodeMsg struct {
	kind   msgKind
	req    *engine.Request
	stream *Stream
	id     string
	abort  chan engine.AbortResult
	stats  chan engine.NodeStats
	idle   chan struct{}
	ok     bool          // msgDelivered
	remote *xfer.Remote  // msgReject: the node's copy
	at     clock.Instant // msgDrainBy
}

// New returns a node that will drive core with exec once Run is called.
// The node takes ownership of core: nobody else may touch it afterwards.
func New(core *engine.Core, exec model.Executor, cfg Config) *Node {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxPending := cfg.MaxPending
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	n := &Node{
		log:        log,
		cfg:        core.Config(),
		epoch:      time.Now(),
		maxPending: maxPending,
		onTransfer: cfg.OnTransfer,
		onEvents:   cfg.OnEvents,
		onLeases:   cfg.OnLeaseEvents,
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		streams:    idtable.New[Stream](streamSlots),
	}
	lc := engine.LoopConfig{MaxReadStreams: cfg.MaxReadStreams, Logger: log, Async: cfg.AsyncExecute}
	if cfg.AsyncExecute {
		n.exec = exec
		n.jobs = make(chan *model.Batch, 1)
		n.results = make(chan *model.StepResult, 1)
	}
	if core.Producer() != nil || core.Consumer() != nil {
		if cfg.Transport == nil {
			panic("node: New: a core with a transfer configuration needs Config.Transport")
		}
		n.tr = cfg.Transport
		// Received messages are stamped on the node's clock as they
		// arrive: P judges lease timing on the stamp.
		n.tr.SetClock(n.Now)
		n.port = tcp.NewPort(cfg.Transport, context.Background(), n.selfWake)
		lc.Port = n.port
		if core.Producer() != nil {
			n.endpoint, n.hasEndpoint = endpointOf(n.cfg.EngineID, cfg.Transport.Addr(), cfg.AdvertiseHost)
			if !n.hasEndpoint {
				log.Warn("engine node serves leases but has no transfer endpoint: listen on a concrete address or set an advertise host",
					"listen", string(cfg.Transport.Addr()))
			}
		}
	}
	if core.Offload() != nil {
		if cfg.Offload == nil {
			panic("node: New: a core with an offload configuration needs Config.Offload (OpenOffload)")
		}
		n.set = cfg.Offload
		n.completions = cfg.Offload.Completions()
		lc.Copier = tierCopier{cfg.Offload}
	}
	n.loop = engine.NewLoop(core, exec, lc)
	return n
}

// TransferEndpoint is where D engines pull this node's leases from, for the
// kv_transfer_params of its responses (remote_engine_id, remote_host,
// remote_port). It reports false when the node grants no leases (no
// producer) or has no usable address (see Config.AdvertiseHost). It is
// fixed at New and safe for concurrent use.
func (n *Node) TransferEndpoint() (TransferEndpoint, bool) {
	return n.endpoint, n.hasEndpoint
}

// Now is the node's current instant: monotonic time since New.
func (n *Node) Now() clock.Instant { return clock.Instant(time.Since(n.epoch)) }

// Config is the core's configuration (immutable; safe to read).
func (n *Node) Config() engine.Config { return n.cfg }

// Done is closed when Run has returned.
func (n *Node) Done() <-chan struct{} { return n.done }

// Draining reports whether Drain was called.
func (n *Node) Draining() bool { return n.draining.Load() }

// ErrRunTwice is returned by a second call of Run.
var ErrRunTwice = errors.New("node: Run called twice")

// Run drives the loop until ctx is done, then shuts it down (every live
// request aborted: each stream gets its finished output with status
// aborted), answers every queued message, shuts the transport down and
// returns nil. Submissions after that are rejected with
// RejectedShuttingDown. Run may be called once.
//
// The loop turns after every input (a message, a transport event, an
// offload completion) and at the loop's NextWake: the end of the step in
// flight, the core's lease, heartbeat and retry timers.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return ErrRunTwice
	}
	n.started = true
	n.mu.Unlock()
	defer close(n.done)
	if n.port != nil {
		n.port.SetContext(ctx) // dials end with Run
	}
	attrs := []any{"max_model_len", n.cfg.MaxModelLen,
		"blocks", n.cfg.Pool.NumBlocks, "block_size", n.cfg.Pool.BlockSizeTokens,
		"role", n.cfg.Role.String(), "engine_id", n.cfg.EngineID}
	if oc := n.cfg.Offload; oc != nil {
		tiers := make([]string, len(oc.Tiers))
		for i, t := range oc.Tiers {
			tiers[i] = t.String()
		}
		attrs = append(attrs, "offload", tiers, "offload_policy", oc.Policy.String())
	}
	n.log.Info("engine node started", attrs...)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var (
		msgs    []nodeMsg
		trReady <-chan struct{}
		// again counts consecutive turns that asked for another.
		again int
		t     engine.Turn
	)
	if n.tr != nil {
		trReady = n.tr.Ready()
	}
	if n.jobs != nil {
		go n.execute()
		defer close(n.jobs)
	}
	for {
		msgs = n.takeInbox(msgs)
		now := n.Now()
		// The transport's events first: each message is stamped with its
		// arrival, and the core must see its inputs in the order of their
		// instants (engine.Loop.Poll).
		n.loop.Poll(now)
		n.stepDone(now)
		n.handle(now, msgs)
		n.pollOffload(now)
		n.loop.TurnInto(now, &t)
		if t.Execute {
			n.jobs <- t.Batch // never waits: one step in flight
		}
		n.route(t.Outputs)
		n.noteTransfers(t.Transfers)
		if n.onEvents != nil && len(t.Events) > 0 {
			n.onEvents(t.Events)
		}
		if n.onLeases != nil && len(t.LeaseEvents) > 0 {
			n.onLeases(t.LeaseEvents)
		}
		if t.Batch != nil {
			n.noteScheduled(now, t.Batch)
		}
		if t.Again {
			// A zero-latency model: step again at once. Consumers run
			// meanwhile on other processors and find several tokens
			// per wake-up, so a stream writes (and a client reads) once
			// per wake-up rather than once per token; yielding after
			// every step made them run in lockstep with the loop, one
			// token and one write each, for two to three times the CPU
			// per streamed request. Every zeroYieldSteps turns the
			// loop still yields, so on a single processor the HTTP
			// goroutines are not left waiting for preemption.
			if again++; again%zeroYieldSteps == 0 {
				runtime.Gosched()
			}
			continue
		}
		again = 0
		due, busy := n.loop.StepDue()
		if !busy {
			if len(n.idleWaiters) > 0 && n.loop.Idle() {
				n.idleWaiters = closeAll(n.idleWaiters)
			}
			if len(n.drainWaiters) > 0 && n.loop.Drained() {
				n.drainWaiters = closeAll(n.drainWaiters)
			}
		}
		wait := time.Duration(-1) // no timer
		if busy {
			if wait = due.Sub(n.Now()); wait <= 0 {
				continue
			}
		}
		if next := n.loop.NextDeadline(); next != clock.Never {
			d := max(next.Sub(n.Now()), minTimerWait)
			if wait < 0 || d < wait {
				wait = d
			}
		}
		var timeout <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			timeout = timer.C
		}
		select {
		case <-n.wake:
		case res := <-n.results:
			n.result = res
		case <-trReady:
		case c, ok := <-n.completions:
			if !ok {
				n.completions = nil
			} else {
				n.applyOffload(n.Now(), c)
			}
		case <-timeout:
		case <-ctx.Done():
			timer.Stop()
			n.shutdown()
			return nil
		}
		timer.Stop()
	}
}

// execute is the executor goroutine (Config.AsyncExecute): it computes
// each batch the loop hands it and reports the result. The result's
// memory is reused for the next batch, which comes only after the loop
// applied the result (StepDone).
func (n *Node) execute() {
	var res model.StepResult
	for b := range n.jobs {
		n.exec.Execute(b, &res)
		n.results <- &res
	}
}

// stepDone reports to the loop the result of its asynchronous step, if
// the executor goroutine has delivered it.
func (n *Node) stepDone(now clock.Instant) {
	if n.results == nil || !n.loop.Executing() {
		return
	}
	if n.result == nil {
		select {
		case n.result = <-n.results:
		default:
			return
		}
	}
	res := n.result
	n.result = nil
	n.loop.StepDone(now, res)
}

// closeAll closes every channel of ws and returns ws emptied.
func closeAll(ws []chan struct{}) []chan struct{} {
	for _, w := range ws {
		close(w)
	}
	clear(ws)
	return ws[:0]
}

// selfWake makes the next wait return at once.
func (n *Node) selfWake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// takeInbox swaps the inbox with spare (emptied) and returns the messages.
func (n *Node) takeInbox(spare []nodeMsg) []nodeMsg {
	clear(spare)
	if !n.queued.Load() {
		return spare[:0]
	}
	n.mu.Lock()
	msgs := n.inbox
	n.inbox = spare[:0]
	n.queued.Store(false)
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
			res, internal := n.loop.Add(now, m.req)
			s := m.stream
			if res == engine.Accepted {
				s.added = true
				s.internal = internal
				n.streams.Put(internal, s)
				s.unscheduled = true
				n.unscheduled++
			}
			n.answerAdd(s, res)
		case msgAbort:
			if st := m.stream; st != nil && !st.added {
				// The stream's own submission was refused: its id
				// may be another live request's (a duplicate).
				m.abort <- engine.AbortUnknown
				break
			} else if st != nil {
				m.abort <- n.loop.AbortReq(now, st.internal, st.lease)
				break
			}
			m.abort <- n.loop.Abort(now, m.id)
		case msgStats:
			m.stats <- n.snapshot(now)
		case msgDrain:
			n.loop.Drain()
		case msgIdle:
			n.idleWaiters = append(n.idleWaiters, m.idle)
		case msgDelivered:
			if st := m.stream; st != nil {
				if st.lease != 0 {
					n.loop.DeliveredLease(now, st.lease, m.ok)
				}
				break
			}
			n.loop.Delivered(now, m.id, m.ok)
		case msgReject:
			n.loop.Reject(now, m.remote)
		case msgStop:
			if st := m.stream; st != nil {
				if !st.added {
					m.abort <- engine.AbortUnknown
				} else {
					m.abort <- n.loop.StopReq(now, st.internal)
				}
				break
			}
			m.abort <- n.loop.Stop(now, m.id)
		case msgDrainBy:
			n.loop.DrainBy(m.at)
		case msgDrained:
			n.drainWaiters = append(n.drainWaiters, m.idle)
		}
	}
}

// answerAdd gives a submission its result: SubmitWith waits for it; a
// stream from Start is woken only if refused (its outputs say the rest).
func (n *Node) answerAdd(s *Stream, res engine.AddResult) {
	if !s.async {
		s.addResult = res
		// The send happens after the write: SubmitWith reads addResult
		// after receiving.
		s.notify <- struct{}{}
		return
	}
	if res == engine.Accepted {
		return
	}
	s.mu.Lock()
	s.addResult, s.refused = res, true
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// route appends outputs to their streams and wakes each consumer once. The
// outputs gather in each stream's loop-owned pend and move to its buffer
// under its lock once per wake-up: once per turn for a streaming
// consumer, once per request (at its finished output) for a FinishedOnly
// one, not once per output.
func (n *Node) route(outs []engine.Output) {
	for i := range outs {
		o := &outs[i]
		s := n.streams.Get(o.Req)
		if s == nil {
			continue // not submitted through this node
		}
		if cap(s.pend) == 0 {
			// Sized for the whole request when the consumer takes
			// its outputs at the end: one allocation, not a chain of
			// growing ones.
			s.pend = make([]engine.Output, 0, s.bufHint)
		}
		s.pend = append(s.pend, *o)
		if o.Finished {
			if o.Grant != nil {
				s.lease = o.Grant.Lease
			}
			n.streams.Delete(o.Req)
			if s.unscheduled {
				s.unscheduled = false
				n.unscheduled--
			}
		}
		if (!s.finishedOnly || o.Finished) && !s.touched {
			s.touched = true
			n.touched = append(n.touched, s)
		}
	}
	for i, s := range n.touched {
		s.touched = false
		s.mu.Lock()
		if len(s.buf) == 0 {
			// The consumer took the last batch: hand it pend, and
			// keep its spare as the next pend.
			s.buf, s.pend = s.pend, s.buf[:0]
		} else {
			s.buf = append(s.buf, s.pend...)
			clear(s.pend)
			s.pend = s.pend[:0]
		}
		s.mu.Unlock()
		select {
		case s.notify <- struct{}{}:
		default: // a wake-up is already pending
		}
		n.touched[i] = nil
	}
	n.touched = n.touched[:0]
}

// noteTransfers hands D's finished pulls to OnTransfer.
func (n *Node) noteTransfers(ds []xfer.Done) {
	if n.onTransfer == nil {
		return
	}
	for _, d := range ds {
		n.onTransfer(d)
	}
}

// noteScheduled records the first instant each request was scheduled, for
// the queue-time metric.
func (n *Node) noteScheduled(now clock.Instant, b *model.Batch) {
	if n.unscheduled == 0 {
		return
	}
	for i := range b.Seqs {
		if s := n.streams.Get(b.Seqs[i].Req); s != nil && s.unscheduled {
			s.mu.Lock()
			s.scheduledAt = now
			s.scheduled = true
			s.mu.Unlock()
			s.unscheduled = false
			n.unscheduled--
		}
	}
}

func (n *Node) snapshot(now clock.Instant) engine.NodeStats {
	st := n.loop.Stats(now)
	st.Streams = n.streams.Len()
	return st
}

// shutdownLinger bounds how long a drained node waits, on exit, for its
// last transfer frames to be written and its peers to close.
const shutdownLinger = time.Second

// shutdown closes the node: the loop's Shutdown (see engine.Loop) between
// answering what is queued and taking the transport and the tiers down.
func (n *Node) shutdown() {
	n.mu.Lock()
	n.closed = true
	msgs := n.inbox
	n.inbox = nil
	n.mu.Unlock()

	now := n.Now()
	// Drained: a graceful exit, after which the peers get our last frames.
	graceful := n.loop.Drained()
	n.loop.Drain()
	n.draining.Store(true)
	// Adds still queued are rejected; the rest is answered normally.
	for i := range msgs {
		if m := &msgs[i]; m.kind == msgAdd {
			n.answerAdd(m.stream, engine.RejectedShuttingDown)
			m.kind = 0
		}
	}
	n.handle(now, msgs)
	if n.results != nil && n.loop.Executing() {
		// The executor is still writing the step's blocks: wait for it
		// (a step ends; the shutdown aborts its requests afterwards).
		if n.result == nil {
			n.result = <-n.results
		}
		now = n.Now()
		n.stepDone(now)
	}
	live := n.streams.Len()
	n.route(n.loop.Shutdown(now, graceful))
	if n.tr != nil {
		if graceful {
			n.linger()
		}
		n.tr.Shutdown() // runs every outstanding block's done
		n.loop.Closed(now)
	}
	n.closeOffload(now)
	closeAll(n.idleWaiters)
	n.idleWaiters = nil
	closeAll(n.drainWaiters)
	n.drainWaiters = nil
	n.mu.Lock()
	n.final = n.snapshot(now)
	n.mu.Unlock()
	n.log.Info("engine node stopped", "aborted", live)
}

// linger waits, at most shutdownLinger, for the connections the loop
// closed (after their queued frames) to be gone.
func (n *Node) linger() {
	deadline := time.Now().Add(shutdownLinger)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n.tr.Conns() > 0 && time.Now().Before(deadline) {
		<-tick.C
	}
}
