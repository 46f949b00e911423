package engine

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// Port is one engine's end of the transfer network as its Loop drives it:
// transport/tcp's Transport, through the node's adapter, in production;
// transport/memnet, through the simulator's, under sim. The loop calls it
// from its own thread only, and never waits on it.
type Port interface {
	// Poll appends the events since the last call to buf and returns it.
	Poll(buf []transport.Event) []transport.Event
	// Dial opens a connection to addr; its Dialed or DialFailed event
	// carries addr as Remote, exactly as given.
	Dial(addr transport.Addr)
	// Send queues m on connection id, after what is queued there; false
	// means it is certainly not sent (the connection is not open).
	Send(id transport.ConnID, m wire.Message) bool
	// SendBlock queues b on connection id without copying b.Data: the
	// port may read it until it reports the block with a transport.Sent
	// event carrying tag (written, or lost). If SendBlock returns false
	// nothing is queued and no Sent event comes.
	SendBlock(id transport.ConnID, b *wire.Block, tag uint64) bool
	// Writable reports whether connection id takes more frames now. While
	// it is false the port wakes its owner when the backlog drains.
	Writable(id transport.ConnID) bool
	// Close closes connection id after its queued frames. No event comes
	// for it afterwards except the Sent events of its queued blocks.
	Close(id transport.ConnID)
}

// Copier runs offload copies for a Loop: offload/tier's Set, through the
// node's adapter, in production; the simulator's modelled tiers under sim.
type Copier interface {
	// Copy starts the stores and loads of w, which read and write pool's
	// blocks, and returns the copies that failed at once. Every other copy
	// must be reported later, exactly once, with Loop.Copied.
	Copy(pool *kvblock.Pool, w *offload.Work) []Copied
}

// Copied reports the end of one offload copy.
type Copied struct {
	Store bool // a store; otherwise a load
	ID    offload.WorkID
	// Blocks is how many blocks were copied before the copy ended: all of
	// them when it succeeded.
	Blocks int
}

// LoopConfig configures a Loop.
type LoopConfig struct {
	// Port carries the P/D transfer; it is required when the core has a
	// transfer configuration (Config.Transfer) and ignored otherwise.
	Port Port
	// Copier runs the offload copies; it is required when the core has an
	// offload configuration (Config.Offload) and ignored otherwise.
	Copier Copier
	// MaxReadStreams bounds the reads P streams at once; a READ beyond it
	// is answered READ_END(busy), which D retries within the lease. Zero
	// means DefaultMaxReadStreams.
	MaxReadStreams int
	// Logger receives connection-level debug logs. Nil discards.
	Logger *slog.Logger
	// Async makes the driver execute each step off the loop: a Turn that
	// starts a step hands its batch over (Turn.Execute) and the driver
	// reports the result, once computed, with StepDone, while it keeps
	// turning the loop (transport, requests, aborts, offload completions,
	// timers). Otherwise Turn executes the batch inline and the step
	// completes at now + its modelled Duration (model/synth).
	Async bool
}

// DefaultMaxReadStreams is the default LoopConfig.MaxReadStreams.
const DefaultMaxReadStreams = 1024

// Loop is an engine's event loop without the goroutine: every decision the
// running engine makes — the order in which transport events, step
// completions and offload completions reach the core, when the core steps,
// how P streams its reads and how long they pin their leases, the drain and
// the shutdown sequence — and none of the waiting. The node (package node)
// runs it with the real clock, tcp and the offload tiers; the simulator
// (package sim) runs the same code over memnet and modelled tiers. It is
// pure and not safe for concurrent use.
//
// A driver calls Turn whenever something may have happened (an input, a
// port event, an offload completion, the instant NextWake), again at once
// while Turn reports Again, and feeds the API inputs (Add, Abort, Stop,
// Delivered, Reject, Drain, DrainBy, Copied) between Turns.
type Loop struct {
	core     *Core
	exec     model.Executor
	port     Port
	copier   Copier
	log      *slog.Logger
	maxReads int

	res      model.StepResult
	rd       Ready // the core's last Step (StepInto)
	inFlight bool
	due      clock.Instant // when the step in flight completes (inline steps)
	async    bool          // LoopConfig.Async
	// running is the batch of the step in flight (nil: none): the blocks
	// it reads and writes (CheckStep).
	running *model.Batch

	events []transport.Event // Poll's buffer
	reads  []*readStream     // P's reads being streamed, in arrival order
	// sending are the reads with blocks the port still references, by tag.
	sending map[uint64]*readStream
	nextTag uint64
	// conns are the live transfer connections, closed on a drained exit.
	conns map[transport.ConnID]struct{}
	moved bool // the current Turn handled an input
}

// NewLoop returns the loop of core, which it owns from now on, executing
// batches with exec.
func NewLoop(core *Core, exec model.Executor, cfg LoopConfig) *Loop {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxReads := cfg.MaxReadStreams
	if maxReads <= 0 {
		maxReads = DefaultMaxReadStreams
	}
	l := &Loop{core: core, exec: exec, log: log, maxReads: maxReads, async: cfg.Async}
	if core.producer != nil || core.consumer != nil {
		if cfg.Port == nil {
			panic("engine: NewLoop: a core with a transfer configuration needs LoopConfig.Port")
		}
		l.port = cfg.Port
		l.conns = make(map[transport.ConnID]struct{})
		l.sending = make(map[uint64]*readStream)
	}
	if core.offload != nil {
		if cfg.Copier == nil {
			panic("engine: NewLoop: a core with an offload configuration needs LoopConfig.Copier")
		}
		l.copier = cfg.Copier
	}
	return l
}

// Core is the loop's core, for inspection (read only).
func (l *Loop) Core() *Core { return l.core }

// Turn is what one Loop.Turn hands its driver. Its slices are owned by the
// loop and valid until the next Turn.
type Turn struct {
	// Outputs are the requests' new outputs, in order.
	Outputs []Output
	// Transfers are D's finished pulls, for metrics.
	Transfers []xfer.Done
	// Events are the pool's KV cache events (Config.Pool.Events).
	Events []kvblock.Event
	// LeaseEvents are P's lease events (xfer.Config.LeaseEvents).
	LeaseEvents []xfer.LeaseEvent
	// Batch is the batch this turn started executing, or nil.
	Batch *model.Batch
	// Execute asks the driver to execute Batch (LoopConfig.Async) and to
	// report its result with StepDone. Until then the batch and the
	// memory it names (tokens, block tables, masks) stay as they are, and
	// the step owns the pool bytes and slot digests of its blocks: it
	// writes those of the positions it computes and reads those before
	// them. Nothing else writes them meanwhile: no block of a running step
	// is freed, reused, loaded into or restored into (its request holds it
	// until StepDone, even if aborted), and a read streams only blocks no
	// running step writes (CheckStep). Everything else in the pool — its
	// accounting, prefix cache, events and the other blocks — is the
	// loop's.
	Execute bool
	// Again asks for another Turn at once: a step of zero duration ended,
	// a read ended, or an offload copy failed at once.
	Again bool
	// Moved reports that the turn handled an input or produced work: a
	// turn that did not left the core as it was.
	Moved bool
}

// Turn runs one iteration of the engine at now: it feeds the port's events
// to the core, completes the step in flight if it is due, steps the core,
// carries out the step's transfer and offload work, starts the next batch
// and streams P's reads as far as the connections take them.
func (l *Loop) Turn(now clock.Instant) Turn {
	var t Turn
	l.TurnInto(now, &t)
	return t
}

// TurnInto is Turn writing its result into t (all of it), for a caller
// that keeps one Turn from iteration to iteration instead of copying one
// out of every call.
func (l *Loop) TurnInto(now clock.Instant, t *Turn) {
	l.moved = false
	l.poll(now)
	if l.inFlight && !l.async && now >= l.due {
		l.core.Complete(now, &l.res)
		l.inFlight = false
		l.running = nil
		l.moved = true
	}
	rd := &l.rd
	l.core.StepInto(now, rd)
	*t = Turn{Outputs: rd.Outputs, Transfers: rd.Transfers, Events: rd.Events, LeaseEvents: rd.LeaseEvents}
	if len(rd.Outputs)+len(rd.Transfers)+len(rd.Events)+len(rd.LeaseEvents)+len(rd.Messages)+len(rd.Reads)+
		len(rd.Actions)+len(rd.Stores)+len(rd.Loads) > 0 {
		l.moved = true
	}
	l.transfer(now, rd)
	t.Again = l.copy(now, rd)
	if rd.Batch != nil {
		l.inFlight = true
		l.running = rd.Batch
		l.moved = true
		t.Batch = rd.Batch
		if l.async {
			l.due = clock.Never // StepDone says when
			t.Execute = true
		} else {
			l.exec.Execute(rd.Batch, &l.res)
			l.due = now.Add(l.res.Duration)
			t.Again = t.Again || l.res.Duration <= 0
		}
	}
	if l.pump(now) {
		t.Again = true // the core may have messages for the peer
	}
	t.Moved = l.moved || t.Again
}

// StepDue reports when the step in flight completes, if one is executing
// inline (its end is modelled); an asynchronous step's end is reported
// with StepDone.
func (l *Loop) StepDue() (clock.Instant, bool) { return l.due, l.inFlight && !l.async }

// Executing reports whether a step is in flight (inline or asynchronous).
func (l *Loop) Executing() bool { return l.inFlight }

// StepDone reports at now the end of the asynchronous step the last
// Turn.Execute handed over, with its result: the core applies it at once
// (Core.Complete), tearing down the requests aborted while it ran. res is
// read before StepDone returns. The driver turns the loop afterwards (its
// outputs, and the next step). It panics without an asynchronous step in
// flight.
func (l *Loop) StepDone(now clock.Instant, res *model.StepResult) {
	if !l.async || !l.inFlight {
		panic("engine: Loop.StepDone without an asynchronous step in flight")
	}
	l.core.Complete(now, res)
	l.inFlight = false
	l.running = nil
	l.moved = true
}

// NextDeadline is the earliest instant at which the core has timer work
// (lease expiry, heartbeats, retries, the drain deadline), or clock.Never.
func (l *Loop) NextDeadline() clock.Instant { return l.core.NextDeadline() }

// NextWake is the earliest instant at which Turn has work without a new
// input: NextDeadline, or the completion of the inline step in flight (an
// asynchronous one ends with StepDone, an input).
func (l *Loop) NextWake() clock.Instant {
	t := l.core.NextDeadline()
	if l.inFlight {
		t = min(t, l.due)
	}
	return t
}

// Add validates and queues a request (Core.Add). On Accepted it also
// returns the request's internal id, the Req of its batch entries.
func (l *Loop) Add(now clock.Instant, req *Request) (AddResult, uint64) {
	res := l.core.Add(now, req)
	if res != Accepted {
		return res, 0
	}
	return res, l.core.byExt[req.ID].ID
}

// Abort aborts the live request id (Core.Abort).
func (l *Loop) Abort(now clock.Instant, id string) AbortResult { return l.core.Abort(now, id) }

// Stop stops the live request id (Core.Stop).
func (l *Loop) Stop(now clock.Instant, id string) AbortResult { return l.core.Stop(now, id) }

// Delivered reports whether request id's lease token reached its client
// (Core.Delivered).
func (l *Loop) Delivered(now clock.Instant, id string, ok bool) { l.core.Delivered(now, id, ok) }

// AbortReq aborts exactly the request whose core id is req, or revokes
// exactly its lease once it finished (Core.AbortReq).
func (l *Loop) AbortReq(now clock.Instant, req uint64, lease wire.LeaseID) AbortResult {
	return l.core.AbortReq(now, req, lease)
}

// StopReq stops exactly the request whose core id is req (Core.StopReq).
func (l *Loop) StopReq(now clock.Instant, req uint64) AbortResult { return l.core.StopReq(now, req) }

// DeliveredLease reports whether the token of exactly lease reached its
// client (Core.DeliveredLease).
func (l *Loop) DeliveredLease(now clock.Instant, lease wire.LeaseID, ok bool) {
	l.core.DeliveredLease(now, lease, ok)
}

// Reject tells remote prefix r's prefill engine that its request was
// refused (Core.Reject).
func (l *Loop) Reject(now clock.Instant, r *xfer.Remote) { l.core.Reject(now, r) }

// Drain stops admitting requests (Core.Drain).
func (l *Loop) Drain() { l.core.Drain() }

// DrainBy drains and bounds the leases' service (Core.DrainBy).
func (l *Loop) DrainBy(deadline clock.Instant) { l.core.DrainBy(deadline) }

// Draining reports whether the engine drains.
func (l *Loop) Draining() bool { return l.core.Draining() }

// Idle reports whether no request is live and no step is executing.
func (l *Loop) Idle() bool { return l.core.Idle() }

// Drained reports whether a draining engine has nothing left to serve
// (Core.Drained): its driver may shut it down gracefully.
func (l *Loop) Drained() bool { return l.core.Drained() }

// Copied reports the end of an offload copy the Copier started.
func (l *Loop) Copied(now clock.Instant, c Copied) {
	if c.Store {
		l.core.StoreDone(now, c.ID, c.Blocks)
	} else {
		l.core.LoadDone(now, c.ID, c.Blocks)
	}
}

// CopiesIdle reports whether no offload copy is in flight.
func (l *Loop) CopiesIdle() bool { return l.core.offload == nil || l.core.offload.Idle() }

// Poll hands the port's events to the core now, as Turn does first. A
// driver that applies other inputs before its Turn (submissions, aborts)
// polls before them, so that the core sees its inputs in the order of
// their instants: a received message's arrival stamp (Event.At) is then
// after every instant the core was handed before, and no input at now
// decides a lease's fate ahead of a message that reached the edge earlier.
func (l *Loop) Poll(now clock.Instant) { l.poll(now) }

// poll hands the port's events to the core.
func (l *Loop) poll(now clock.Instant) {
	if l.port == nil {
		return
	}
	l.events = l.port.Poll(l.events[:0])
	for i := range l.events {
		l.Handle(now, l.events[i])
	}
	clear(l.events)
}

// Handle feeds one port event to the core, as Turn does with each event
// it polls. A driver that must look at the core around every event (the
// simulator's invariants) hands them one by one with Handle before Turn.
func (l *Loop) Handle(now clock.Instant, ev transport.Event) {
	l.moved = true
	s := xfer.SessionID(ev.Conn)
	switch ev.Kind {
	case transport.Accepted:
		l.conns[ev.Conn] = struct{}{}
		l.core.PeerAccepted(now, s)
	case transport.Dialed:
		l.conns[ev.Conn] = struct{}{}
		// Event.Remote is the address exactly as dialed: the consumer's
		// peer key.
		l.core.PeerDialed(now, string(ev.Remote), s)
	case transport.DialFailed:
		l.log.Debug("transfer dial failed", "peer", string(ev.Remote), "reason", ev.Reason)
		l.core.PeerDialFailed(now, string(ev.Remote))
	case transport.Received:
		at := ev.At
		if at == 0 || at > now {
			at = now // unknown, or stamped after the driver read its clock
		}
		l.core.PeerMessageArrived(now, at, s, ev.Msg)
	case transport.Closed:
		l.log.Debug("transfer connection closed", "peer", string(ev.Remote), "reason", ev.Reason)
		delete(l.conns, ev.Conn)
		l.dropStreams(now, ev.Conn)
		if ev.Tampered {
			l.log.Warn("transfer frame failed authentication: altered or injected on the path", "peer", string(ev.Remote), "reason", ev.Reason)
			l.core.PeerTampered(now, s)
		} else {
			l.core.PeerClosed(now, s)
		}
	case transport.Sent:
		l.sent(ev.Tag, ev.Reason == "")
	}
}

// transfer carries out a Ready's transfer work. A Send that fails needs no
// handling here: the connection is broken or closing, and its Closed event
// tells the core.
func (l *Loop) transfer(now clock.Instant, rd *Ready) {
	if l.port == nil {
		return
	}
	for _, e := range rd.Messages {
		id := transport.ConnID(e.Session)
		l.port.Send(id, e.Msg)
		if e.Close {
			l.closeConn(now, id)
		}
	}
	for _, a := range rd.Actions {
		id := transport.ConnID(a.Session)
		switch a.Kind {
		case xfer.ActionDial:
			l.port.Dial(transport.Addr(a.Addr))
		case xfer.ActionSend:
			l.port.Send(id, a.Msg)
		case xfer.ActionClose:
			l.closeConn(now, id)
		}
	}
	for _, w := range rd.Reads {
		if l.core.producer.Reading(w.Session, w.ReadID) {
			l.startRead(now, w)
		}
		// Otherwise its session ended in this turn, after the READ:
		// the producer has ended the read, and nothing is sent.
	}
}

// startRead starts streaming read w, or refuses it at the MaxReadStreams
// bound.
func (l *Loop) startRead(now clock.Instant, w xfer.ReadWork) {
	id := transport.ConnID(w.Session)
	if len(l.reads) >= l.maxReads {
		// Too many reads at once: refuse this one; D retries it within
		// the lease.
		l.port.Send(id, &wire.ReadEnd{ReadID: w.ReadID, Lease: w.Lease, Status: wire.StatusBusy})
		l.core.ReadFinished(now, w.Session, w.ReadID, false)
		return
	}
	l.nextTag++
	l.reads = append(l.reads, &readStream{w: w, conn: id, tag: l.nextTag})
}

// copy hands a Ready's offload copies to the Copier and applies those that
// failed at once; it reports whether any did (a request may be ready).
func (l *Loop) copy(now clock.Instant, rd *Ready) bool {
	if l.copier == nil || len(rd.Stores)+len(rd.Loads) == 0 {
		return false
	}
	failed := l.copier.Copy(l.core.pool, &offload.Work{Stores: rd.Stores, Loads: rd.Loads})
	for _, c := range failed {
		l.Copied(now, c)
	}
	return len(failed) > 0
}

// closeConn closes a connection the core gave up, ending its streams first:
// no Closed event will come for it.
func (l *Loop) closeConn(now clock.Instant, id transport.ConnID) {
	l.dropStreams(now, id)
	delete(l.conns, id)
	l.port.Close(id)
}

// Settle steps the core once more without executing anything, carrying
// out its transfer and offload work: after inputs that a driver applies
// once the loop has stopped turning (offload completions at shutdown). It
// returns the outputs (valid until the next Turn or Settle).
func (l *Loop) Settle(now clock.Instant) []Output {
	rd := l.core.Step(now)
	l.transfer(now, &rd)
	l.copy(now, &rd)
	return rd.Outputs
}

// Shutdown ends the engine at now. It stops admitting, completes the
// inline step in flight (its result is computed; only its modelled delay
// is cut short; an asynchronous step must have been reported with StepDone
// first: Shutdown panics otherwise), aborts every live request and runs out what is left without
// waiting, streams what the connections take of the reads in progress,
// ends every lease (REVOKED shutdown) and, when graceful, closes every
// transfer connection after its queued frames (the last acknowledgements
// of a drained engine, such as P's RELEASE_ACK for the read that ended
// its drain, without which D would retry its release until the lease's
// deadline). graceful is for an engine that was Drained when its driver
// decided to stop. It returns every output produced, in order (owned by
// the caller).
//
// Reads whose blocks the port still references keep their leases pinned:
// the driver shuts its transport down (no frame is written afterwards) and
// then calls Closed.
func (l *Loop) Shutdown(now clock.Instant, graceful bool) []Output {
	var outs []Output
	l.core.Drain()
	if l.inFlight {
		if l.async {
			panic("engine: Loop.Shutdown with an asynchronous step executing: wait for it and report it with StepDone first")
		}
		l.core.Complete(now, &l.res)
		l.inFlight = false
		l.running = nil
	}
	live := make([]*request, 0, len(l.core.byExt))
	for _, r := range l.core.byExt {
		live = append(live, r)
	}
	slices.SortFunc(live, func(a, b *request) int { return cmpUint64(a.ID, b.ID) })
	for _, r := range live {
		l.core.Abort(now, r.ext)
	}
	// Aborted requests finish at once; a batch can only come from requests
	// added meanwhile. Run them out without waiting, bounded.
	for range 1 << 20 {
		rd := l.core.Step(now)
		outs = append(outs, rd.Outputs...)
		l.transfer(now, &rd)
		l.copy(now, &rd)
		if rd.Batch == nil {
			break
		}
		l.exec.Execute(rd.Batch, &l.res)
		l.core.Complete(now, &l.res)
	}
	if l.port == nil {
		return outs
	}
	// Best effort: what fits in the windows is queued, the rest of each
	// read fails.
	l.pump(now)
	j := 0
	for _, st := range l.reads {
		if st.inflight > 0 {
			l.reads[j] = st
			j++
			continue
		}
		l.core.ReadFinished(now, st.w.Session, st.w.ReadID, false)
	}
	clear(l.reads[j:])
	l.reads = l.reads[:j]
	if l.core.producer != nil {
		l.core.producer.ReleaseAll(now, wire.ReasonShutdown)
	}
	outs = append(outs, l.Settle(now)...)
	if graceful {
		ids := make([]transport.ConnID, 0, len(l.conns))
		for id := range l.conns {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			l.port.Close(id)
		}
		clear(l.conns)
	}
	return outs
}

// Closed reports that the driver's transport is down after Shutdown:
// nothing references the pool any more, so the reads still streaming end,
// unsuccessfully, and release their pins.
func (l *Loop) Closed(now clock.Instant) {
	for _, st := range l.reads {
		l.core.ReadFinished(now, st.w.Session, st.w.ReadID, false)
	}
	clear(l.reads)
	l.reads = nil
	clear(l.sending)
	clear(l.conns)
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CheckStep verifies what the step in flight owns (Turn.Execute): every
// block it reads or writes is held, and no read being streamed includes a
// block it writes (the positions it computes), so neither a free nor a
// reuse nor a transfer touches memory the executor is using. The
// simulator runs it after every instant; it costs a walk over the batch
// and the reads.
func (l *Loop) CheckStep() error {
	b := l.running
	if b == nil {
		return nil
	}
	pool := l.core.pool
	bs := pool.BlockSizeTokens()
	var writes map[*uint64]kvblock.BlockID
	for i := range b.Seqs {
		s := &b.Seqs[i]
		end := s.Start + s.Count
		for k := 0; k < (end+bs-1)/bs; k++ {
			blk := s.Blocks[k]
			if pool.Refs(blk) == 0 {
				return fmt.Errorf("engine: block %d of request %d is not held while its step runs", blk, s.Req)
			}
			if (k+1)*bs > s.Start { // holds a position the step computes
				if writes == nil {
					writes = make(map[*uint64]kvblock.BlockID)
				}
				writes[&pool.Digests(blk)[0]] = blk
			}
		}
	}
	for _, st := range l.reads {
		for j := range st.w.Blocks {
			if d := st.w.Blocks[j].Digests; len(d) > 0 {
				if blk, ok := writes[&d[0]]; ok {
					return fmt.Errorf("engine: read %d of lease %d streams block %d, which the running step writes", st.w.ReadID, st.w.Lease, blk)
				}
			}
		}
	}
	return nil
}
