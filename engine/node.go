package engine

// This file is an EDGE: it owns a goroutine, the real clock and locks.
// Everything else in the package is pure.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/offload/tier"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
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

	// Transport carries the P/D transfer. It is required when the core has
	// a transfer configuration (Config.Transfer) and ignored otherwise. The
	// node owns it from NewNode on: Run drives it (dials, sends, streams
	// reads, feeds its events to the core) and shuts it down when it
	// returns. A node that serves leases (role prefill or both) must have
	// it listening (tcp.Transport.Listen) before NewNode: that address is
	// its TransferEndpoint.
	Transport *tcp.Transport
	// AdvertiseHost is the host this node's responses give D engines as
	// remote_host. Empty means the listener's host; it must be set when
	// the transport listens on a wildcard address (0.0.0.0, [::]).
	AdvertiseHost string
	// MaxReadStreams bounds the reads P streams at once; a READ beyond it
	// is answered READ_END(busy), which D retries within the lease. Zero
	// means DefaultMaxReadStreams.
	MaxReadStreams int

	// Offload executes the offload copies (OpenOffload opens it). It is
	// required when the core has an offload configuration
	// (Config.Offload) and ignored otherwise. The node owns it from
	// NewNode on: Run submits each step's copies, feeds their completions
	// to the core (StoreDone, LoadDone), and when it returns closes the
	// set and applies every outstanding completion, so no store or load
	// hold is left.
	Offload *tier.Set

	// OnTransfer, if set, is called with each remote-prefix pull a decode
	// engine finished (Ready.Transfers: pulled, fell back, failed or
	// dropped), in order, for metrics (kvlease_transfer_seconds). It runs
	// in the node's loop goroutine: it must return quickly and must not
	// call the node.
	OnTransfer func(xfer.Done)
}

// OpenOffload opens the tiers of core's offload configuration (a
// host-memory arena, a directory of block files) for NodeConfig.Offload.
// Each tier's runner queue holds as many copies as the core can have in
// flight (its MaxInflightStoreBlocks + MaxInflightLoadBlocks, up to
// 65536), so a copy is not failed for lack of room. It returns nil and no
// error when the core has no offload; errors name --offload.
func OpenOffload(core *Core) (*tier.Set, error) {
	co := core.Offload()
	if co == nil {
		return nil, nil
	}
	cfg := co.Config()
	rc := tier.DefaultRunnerConfig()
	rc.QueueLen = min(max(rc.QueueLen, cfg.MaxInflightStoreBlocks+cfg.MaxInflightLoadBlocks), 1<<16)
	return tier.Open(cfg, core.Config().Pool, rc)
}

// DefaultMaxPending is the default NodeConfig.MaxPending.
const DefaultMaxPending = 1 << 16

// DefaultMaxReadStreams is the default NodeConfig.MaxReadStreams.
const DefaultMaxReadStreams = 1024

// zeroYieldSteps is how many zero-duration steps the loop runs back to
// back before it yields its processor (see Run).
const zeroYieldSteps = 64

// minTimerWait is the shortest wait for a core deadline: a deadline that is
// already due right after a Step must not make the loop spin.
const minTimerWait = 200 * time.Microsecond

// TransferEndpoint is where D engines reach a P node's transfer port: the
// remote_engine_id, remote_host and remote_port of the kv_transfer_params
// in P's responses.
type TransferEndpoint struct {
	EngineID string
	Host     string
	Port     int
}

// Addr is Host:Port, the address D dials (xfer.Remote.Addr).
func (e TransferEndpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Remote is the remote prefix a D engine is given for grant g of this
// endpoint: what a proxy carries from P's response to D's request.
func (e TransferEndpoint) Remote(g *xfer.Grant) *xfer.Remote {
	return &xfer.Remote{
		EngineID: e.EngineID, Addr: e.Addr(), Lease: g.Lease, Token: g.Token,
		NumBlocks: len(g.BlockIDs), NumTokens: g.NumTokens, ExpiresIn: g.ExpiresIn,
	}
}

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
	// Producer and Consumer are the transfer counters (copies, owned by
	// the receiver), nil when the core has no such side.
	Producer *xfer.ProducerStats
	Consumer *xfer.ConsumerStats
	// ReadStreams is the number of reads P is streaming.
	ReadStreams int
	// Offload are the offload counters (a copy, owned by the receiver),
	// nil without offload: per tier (Tiers[i].Medium "CPU" or "DISK"),
	// StoredBlocks, LoadedBlocks, EvictedBlocks and HitBlocks for
	// kvlease_offload_{stored,loaded,evicted}_blocks_total{medium} and
	// kvlease_offload_hits_total{medium}.
	Offload *offload.Stats
}

// Node drives one Core with the real clock. One goroutine (Run) owns the
// core; Submit, Start, Abort, Stop, Reject, Delivered, Stats, Drain,
// DrainBy, WaitIdle and WaitDrained send it messages and are safe for
// concurrent use. Instants are monotonic nanoseconds since NewNode.
//
// Each loop iteration takes every queued message at once, applies them,
// steps the core, routes the outputs to their streams, and executes the
// batch inline. A step's modelled duration is honoured with a timer, during
// which new submissions and aborts are still applied; then Complete is
// called and the loop steps again. A step of zero duration (the zero
// profile) is followed at once by the next, the loop yielding its
// processor only every zeroYieldSteps steps.
//
// Shutdown: Drain or DrainBy stop admitting; WaitIdle waits for the live
// requests, WaitDrained also for outstanding leases and pulls; cancelling
// Run's context then aborts what is left. A node that exits drained closes
// its transfer connections after their last frames.
type Node struct {
	core  *Core
	exec  model.Executor
	log   *slog.Logger
	cfg   Config
	epoch time.Time

	maxPending int
	onTransfer func(xfer.Done)

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
	// drainWaiters are closed when the core is Drained.
	drainWaiters []chan struct{}

	// Transfer edge; tr is nil without a transfer configuration.
	tr             *tcp.Transport
	endpoint       TransferEndpoint
	hasEndpoint    bool
	maxReadStreams int
	runCtx         context.Context   // Run's: dials end with it
	events         []transport.Event // Poll's buffer
	reads          []*readStream     // P's reads being streamed, in arrival order
	// conns are the live transfer connections (bounded by the
	// transport's MaxConns), closed one by one on a drained exit.
	conns map[transport.ConnID]struct{}

	// Offload edge; set is nil without offload. completions is
	// set.Completions() until it is closed, then nil.
	set         *tier.Set
	completions <-chan tier.Completion
}

// readStream is a read P streams over several loop iterations: as many
// BLOCK frames as the connection's window takes each time, then READ_END.
// Blocks go out zero-copy (tcp.Transport.SendBlock): the connection's
// writer writes them straight from the pool. That is safe because the read
// pins its lease until ReadFinished, so the pool memory its blocks alias
// does not change meanwhile, and the node reports ReadFinished only once
// every block's done has run (inflight is zero): until then the stream
// stays in Node.reads even if its connection is gone.
type readStream struct {
	w      xfer.ReadWork
	conn   transport.ConnID
	next   int  // the next block to send
	failed bool // a frame was refused or the connection ended: send no more
	ended  bool // READ_END was queued

	// inflight counts the blocks whose done has not run; lost records a
	// done(false). Written by the transport's writer goroutines through
	// done, read by the loop: lost is stored before inflight drops, so a
	// loop that reads zero sees every loss.
	inflight atomic.Int32
	lost     atomic.Bool
	done     func(ok bool)
}

// newReadStream returns the stream of w on connection id; its done only
// records the outcome and wakes the loop, as SendBlock requires.
func (n *Node) newReadStream(w xfer.ReadWork, id transport.ConnID) *readStream {
	st := &readStream{w: w, conn: id}
	st.done = func(ok bool) {
		if !ok {
			st.lost.Store(true)
		}
		st.inflight.Add(-1)
		n.selfWake()
	}
	return st
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
	req    *Request
	stream *Stream
	id     string
	abort  chan AbortResult
	stats  chan NodeStats
	idle   chan struct{}
	ok     bool          // msgDelivered
	remote *xfer.Remote  // msgReject: the node's copy
	at     clock.Instant // msgDrainBy
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
	maxReads := cfg.MaxReadStreams
	if maxReads <= 0 {
		maxReads = DefaultMaxReadStreams
	}
	n := &Node{
		core:           core,
		exec:           exec,
		log:            log,
		cfg:            core.Config(),
		epoch:          time.Now(),
		maxPending:     maxPending,
		onTransfer:     cfg.OnTransfer,
		wake:           make(chan struct{}, 1),
		done:           make(chan struct{}),
		streams:        make(map[string]*Stream),
		byInternal:     make(map[uint64]*Stream),
		maxReadStreams: maxReads,
	}
	if core.Producer() != nil || core.Consumer() != nil {
		if cfg.Transport == nil {
			panic("engine: NewNode: a core with a transfer configuration needs NodeConfig.Transport")
		}
		n.tr = cfg.Transport
		n.conns = make(map[transport.ConnID]struct{})
		if core.Producer() != nil {
			n.endpoint, n.hasEndpoint = endpointOf(n.cfg.EngineID, cfg.Transport.Addr(), cfg.AdvertiseHost)
		}
		if core.Producer() != nil && !n.hasEndpoint {
			log.Warn("engine node serves leases but has no transfer endpoint: listen on a concrete address or set an advertise host",
				"listen", string(cfg.Transport.Addr()))
		}
	}
	if core.Offload() != nil {
		if cfg.Offload == nil {
			panic("engine: NewNode: a core with an offload configuration needs NodeConfig.Offload (OpenOffload)")
		}
		n.set = cfg.Offload
		n.completions = cfg.Offload.Completions()
	}
	return n
}

// endpointOf derives a node's transfer endpoint from its listener address.
func endpointOf(engineID string, listen transport.Addr, advertise string) (TransferEndpoint, bool) {
	host, portStr, err := net.SplitHostPort(string(listen))
	if err != nil {
		return TransferEndpoint{}, false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 {
		return TransferEndpoint{}, false
	}
	if advertise != "" {
		host = advertise
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return TransferEndpoint{}, false
	}
	return TransferEndpoint{EngineID: engineID, Host: host, Port: port}, true
}

// TransferEndpoint is where D engines pull this node's leases from, for the
// kv_transfer_params of its responses (remote_engine_id, remote_host,
// remote_port). It reports false when the node grants no leases (no
// producer) or has no usable address (see NodeConfig.AdvertiseHost). It is
// fixed at NewNode and safe for concurrent use.
func (n *Node) TransferEndpoint() (TransferEndpoint, bool) {
	return n.endpoint, n.hasEndpoint
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
// queued message, shuts the transport down and returns nil. Submissions
// after that are rejected with RejectedShuttingDown. Run may be called once.
//
// With a transport, each iteration also feeds the transport's events to the
// core (PeerAccepted, PeerDialed, PeerMessage, ...), carries out the
// transfer work of the Ready (messages, dials, closes) and streams P's
// reads within each connection's send window, reporting ReadFinished when a
// read's last frame is queued. The core is stepped on every iteration, also
// while a batch executes (it then schedules nothing), so peers are answered
// without waiting for the step; and the loop wakes at the core's
// NextDeadline for lease, heartbeat and retry timers.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return ErrRunTwice
	}
	n.started = true
	n.mu.Unlock()
	defer close(n.done)
	n.runCtx = ctx
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
		msgs     []nodeMsg
		res      model.StepResult
		inFlight bool
		deadline clock.Instant
		trReady  <-chan struct{}
		// zeroSteps counts consecutive zero-duration steps.
		zeroSteps int
	)
	if n.tr != nil {
		trReady = n.tr.Ready()
	}
	for {
		msgs = n.takeInbox(msgs)
		now := n.Now()
		n.handle(now, msgs)
		n.pollTransport(now)
		n.pollOffload(now)
		if inFlight && now >= deadline {
			n.core.Complete(now, &res)
			inFlight = false
		}
		rd := n.core.Step(now)
		n.route(rd.Outputs)
		n.transfer(now, rd)
		if n.submitOffload(now, rd) {
			// A copy failed at once: a request may be ready.
			n.selfWake()
		}
		if rd.Batch != nil {
			n.noteScheduled(now, rd.Batch)
			n.exec.Execute(rd.Batch, &res)
			deadline = now.Add(res.Duration)
			inFlight = true
			if res.Duration <= 0 {
				// A zero-latency model: step again at once. Consumers
				// run meanwhile on other processors and find several
				// tokens per wake-up, so a stream writes (and a
				// client reads) once per wake-up rather than once per
				// token; yielding after every step made them run in
				// lockstep with the loop, one token and one write each,
				// for two to three times the CPU per streamed request.
				// Every zeroYieldSteps steps the loop still yields, so
				// on a single processor the HTTP goroutines are not
				// left waiting for preemption.
				n.pump(now)
				if zeroSteps++; zeroSteps%zeroYieldSteps == 0 {
					runtime.Gosched()
				}
				continue
			}
			zeroSteps = 0
		} else if !inFlight {
			if len(n.idleWaiters) > 0 && n.core.Idle() {
				n.idleWaiters = closeAll(n.idleWaiters)
			}
			if len(n.drainWaiters) > 0 && n.core.Drained() {
				n.drainWaiters = closeAll(n.drainWaiters)
			}
		}
		if n.pump(now) {
			// A read ended: the core may have messages for the peer.
			continue
		}
		wait := time.Duration(-1) // no timer
		if inFlight {
			if wait = deadline.Sub(n.Now()); wait <= 0 {
				continue
			}
		}
		if next := n.core.NextDeadline(); next != clock.Never {
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
			n.shutdown(&res, inFlight)
			return nil
		}
		timer.Stop()
	}
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

// pollOffload feeds the copies completed so far to the core.
func (n *Node) pollOffload(now clock.Instant) {
	for n.completions != nil {
		select {
		case c, ok := <-n.completions:
			if !ok {
				n.completions = nil
				return
			}
			n.applyOffload(now, c)
		default:
			return
		}
	}
}

// applyOffload feeds one copy's completion to the core. A failed copy
// (a missing or corrupt record, an I/O error, a cancelled job) is an
// outcome: the blocks not copied are dropped from the tier, or
// recomputed, and the coordinator counts them.
func (n *Node) applyOffload(now clock.Instant, c tier.Completion) {
	if c.Err != nil && !errors.Is(c.Err, tier.ErrMiss) && !errors.Is(c.Err, tier.ErrClosed) {
		n.log.Debug("offload copy failed", "kind", c.Kind.String(), "blocks", c.Copied, "reason", c.Err.Error())
	}
	switch c.Kind {
	case tier.JobStore:
		n.core.StoreDone(now, offload.WorkID(c.JobID), c.Copied)
	case tier.JobLoad:
		n.core.LoadDone(now, offload.WorkID(c.JobID), c.Copied)
	default:
		panic("engine: offload completion of unknown kind")
	}
}

// submitOffload hands a Ready's copies to the tiers. Copies that cannot
// be queued fail at once and are applied here; it reports whether any
// did.
func (n *Node) submitOffload(now clock.Instant, rd Ready) bool {
	if n.set == nil || len(rd.Stores)+len(rd.Loads) == 0 {
		return false
	}
	failed := n.set.Submit(n.core.Pool(), &offload.Work{Stores: rd.Stores, Loads: rd.Loads})
	for _, c := range failed {
		n.applyOffload(now, c)
	}
	return len(failed) > 0
}

// closeOffload closes the tiers and applies every outstanding completion
// (queued copies are cancelled, running ones finish), then hands out
// whatever the core still offers, which fails at once: afterwards no store
// or load hold is left.
func (n *Node) closeOffload(now clock.Instant) {
	if n.set == nil {
		return
	}
	n.set.Close()
	if n.completions != nil {
		for c := range n.completions {
			n.applyOffload(now, c)
		}
		n.completions = nil
	}
	rd := n.core.Step(now)
	n.route(rd.Outputs)
	n.submitOffload(now, rd)
	if co := n.core.Offload(); !co.Idle() {
		n.log.Error("offload copies still in flight after the tiers closed")
	}
}

// pollTransport hands the transport's events to the core.
func (n *Node) pollTransport(now clock.Instant) {
	if n.tr == nil {
		return
	}
	n.events = n.tr.Poll(n.events[:0])
	for i := range n.events {
		ev := &n.events[i]
		s := xfer.SessionID(ev.Conn)
		switch ev.Kind {
		case transport.Accepted:
			n.conns[ev.Conn] = struct{}{}
			n.core.PeerAccepted(now, s)
		case transport.Dialed:
			n.conns[ev.Conn] = struct{}{}
			// Event.Remote is the address exactly as dialed: the
			// consumer's peer key.
			n.core.PeerDialed(now, string(ev.Remote), s)
		case transport.DialFailed:
			n.log.Debug("transfer dial failed", "peer", string(ev.Remote), "reason", ev.Reason)
			n.core.PeerDialFailed(now, string(ev.Remote))
		case transport.Received:
			n.core.PeerMessage(now, s, ev.Msg)
		case transport.Closed:
			n.log.Debug("transfer connection closed", "peer", string(ev.Remote), "reason", ev.Reason)
			delete(n.conns, ev.Conn)
			n.dropStreams(now, ev.Conn)
			n.core.PeerClosed(now, s)
		}
	}
	clear(n.events)
}

// transfer carries out a Ready's transfer work. A Send that fails needs no
// handling here: the connection is broken or closing, and its Closed event
// tells the core.
func (n *Node) transfer(now clock.Instant, rd Ready) {
	if n.onTransfer != nil {
		for _, d := range rd.Transfers {
			n.onTransfer(d)
		}
	}
	if n.tr == nil {
		return
	}
	for _, e := range rd.Messages {
		id := transport.ConnID(e.Session)
		n.tr.Send(id, e.Msg)
		if e.Close {
			n.closeConn(now, id)
		}
	}
	for _, a := range rd.Actions {
		id := transport.ConnID(a.Session)
		switch a.Kind {
		case xfer.ActionDial:
			n.tr.Dial(n.runCtx, transport.Addr(a.Addr))
		case xfer.ActionSend:
			n.tr.Send(id, a.Msg)
		case xfer.ActionClose:
			n.closeConn(now, id)
		}
	}
	for _, w := range rd.Reads {
		id := transport.ConnID(w.Session)
		if len(n.reads) >= n.maxReadStreams {
			// Too many reads at once: refuse this one; D retries it
			// within the lease.
			n.tr.Send(id, &wire.ReadEnd{ReadID: w.ReadID, Lease: w.Lease, Status: wire.StatusBusy})
			n.core.ReadFinished(now, w.Session, w.ReadID, false)
			continue
		}
		n.reads = append(n.reads, n.newReadStream(w, id))
	}
}

// closeConn closes a connection the core gave up, ending its streams first:
// no Closed event will come for it.
func (n *Node) closeConn(now clock.Instant, id transport.ConnID) {
	n.dropStreams(now, id)
	delete(n.conns, id)
	n.tr.Close(id)
}

// shutdownLinger bounds how long a drained node waits, on exit, for its
// last transfer frames to be written and its peers to close.
const shutdownLinger = time.Second

// linger closes every transfer connection after its queued frames — the
// last acknowledgements of a drained engine, such as P's RELEASE_ACK for
// the read that ended its drain, without which D would retry its release
// until the lease's deadline — and waits, at most shutdownLinger, for the
// peers to close theirs.
func (n *Node) linger() {
	if len(n.conns) == 0 {
		return
	}
	for id := range n.conns {
		n.tr.Close(id) // flushes what is queued, then closes for writing
	}
	clear(n.conns)
	deadline := time.Now().Add(shutdownLinger)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n.tr.Conns() > 0 && time.Now().Before(deadline) {
		<-tick.C
	}
}

// dropStreams ends the reads streaming on connection id unsuccessfully.
// A read whose blocks the transport still references (after an owner
// Close, which flushes) stays until their done has run; after a Closed
// event none is left (the transport runs every done before it).
func (n *Node) dropStreams(now clock.Instant, id transport.ConnID) {
	j := 0
	for _, st := range n.reads {
		if st.conn == id {
			st.failed = true
			if st.inflight.Load() == 0 {
				n.core.ReadFinished(now, st.w.Session, st.w.ReadID, false)
				continue
			}
		}
		n.reads[j] = st
		j++
	}
	clear(n.reads[j:])
	n.reads = n.reads[:j]
}

// pump queues as many blocks of the streaming reads as their connections'
// windows take, in arrival order, and reports whether a read ended. It
// never waits for a socket: a read whose blocks are queued but not yet
// written ends on a later call, after their done has woken the loop.
func (n *Node) pump(now clock.Instant) bool {
	ended := false
	j := 0
	for _, st := range n.reads {
		done, ok := n.streamRead(st)
		if !done {
			n.reads[j] = st
			j++
			continue
		}
		ended = true
		if ok {
			n.core.Producer().CountServed(st.w.Bytes())
		}
		n.core.ReadFinished(now, st.w.Session, st.w.ReadID, ok)
	}
	clear(n.reads[j:])
	n.reads = n.reads[:j]
	return ended
}

// streamRead sends what fits of one read; done reports that the read is
// over: every frame queued (or one refused, or the connection ended) and
// every block's done run, so the transport no longer references the pool.
// ok means every block was written and READ_END queued.
func (n *Node) streamRead(st *readStream) (done, ok bool) {
	for !st.failed && st.next < len(st.w.Blocks) {
		if !n.tr.Writable(st.conn) {
			return false, false // Ready fires when the window opens
		}
		st.inflight.Add(1)
		if !n.tr.SendBlock(st.conn, &st.w.Blocks[st.next], st.done) {
			st.inflight.Add(-1) // refused: done is never called
			st.failed = true
			break
		}
		st.next++
	}
	if !st.failed && !st.ended {
		st.ended = true
		end := &wire.ReadEnd{ReadID: st.w.ReadID, Lease: st.w.Lease, Status: wire.StatusOK}
		st.failed = !n.tr.Send(st.conn, end)
	}
	if st.inflight.Load() > 0 {
		return false, false // a done wakes the loop
	}
	return true, !st.failed && !st.lost.Load()
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
				s.added = true
				n.streams[s.id] = s
				s.internal = n.core.byExt[s.id].ID
				n.byInternal[s.internal] = s
			}
			n.answerAdd(s, res)
		case msgAbort:
			if st := m.stream; st != nil && !st.added {
				// The stream's own submission was refused: its id
				// may be another live request's (a duplicate).
				m.abort <- AbortUnknown
				break
			}
			m.abort <- n.core.Abort(now, m.id)
		case msgStats:
			m.stats <- n.snapshot(now)
		case msgDrain:
			n.core.Drain()
		case msgIdle:
			n.idleWaiters = append(n.idleWaiters, m.idle)
		case msgDelivered:
			n.core.Delivered(now, m.id, m.ok)
		case msgReject:
			n.core.Reject(now, m.remote)
		case msgStop:
			m.abort <- n.core.Stop(now, m.id)
		case msgDrainBy:
			n.core.DrainBy(m.at)
		case msgDrained:
			n.drainWaiters = append(n.drainWaiters, m.idle)
		}
	}
}

// answerAdd gives a submission its result: SubmitWith waits for it; a
// stream from Start is woken only if refused (its outputs say the rest).
func (n *Node) answerAdd(s *Stream, res AddResult) {
	if !s.async {
		s.addResult = res
		// The send happens after the write: SubmitWith reads addResult
		// after receiving.
		s.notify <- struct{}{}
		return
	}
	if res == Accepted {
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

// route appends outputs to their streams and wakes each consumer once.
func (n *Node) route(outs []Output) {
	for i := range outs {
		o := &outs[i]
		s := n.streams[o.ID]
		if s == nil {
			continue // not submitted through this node
		}
		s.mu.Lock()
		if cap(s.buf) == 0 {
			// Sized for the whole request when the consumer takes
			// its outputs at the end: one allocation, not a chain of
			// growing ones.
			s.buf = make([]Output, 0, s.bufHint)
		}
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
		Draining:    n.core.Draining(),
		Streams:     len(n.streams),
		Now:         now,
		Producer:    producerStats(n.core.Producer()),
		Consumer:    consumerStats(n.core.Consumer()),
		ReadStreams: len(n.reads),
		Offload:     offloadStats(n.core.Offload()),
	}
}

func offloadStats(c *offload.Coordinator) *offload.Stats {
	if c == nil {
		return nil
	}
	st := c.Stats() // its Tiers slice is a copy
	return &st
}

func producerStats(p *xfer.Producer) *xfer.ProducerStats {
	if p == nil {
		return nil
	}
	st := p.Stats()
	st.Released = maps.Clone(st.Released)
	return &st
}

func consumerStats(c *xfer.Consumer) *xfer.ConsumerStats {
	if c == nil {
		return nil
	}
	st := c.Stats()
	st.Fallbacks = maps.Clone(st.Fallbacks)
	st.Failures = maps.Clone(st.Failures)
	st.ReleasesSent = maps.Clone(st.ReleasesSent)
	return &st
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
	// Drained: a graceful exit, after which the peers get our last frames.
	graceful := n.core.Drained()
	n.core.Drain()
	n.draining.Store(true)
	if inFlight {
		n.core.Complete(now, res)
	}
	// Adds still queued are rejected; the rest is answered normally.
	for i := range msgs {
		if m := &msgs[i]; m.kind == msgAdd {
			n.answerAdd(m.stream, RejectedShuttingDown)
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
		n.transfer(now, rd)
		n.submitOffload(now, rd)
		if rd.Batch == nil {
			break
		}
		n.exec.Execute(rd.Batch, res)
		n.core.Complete(now, res)
	}
	if n.tr != nil {
		// Best effort: what fits in the windows is queued, the rest of
		// each read fails; leases end (REVOKED shutdown), and the
		// transport goes down at once, so peers see their connections
		// lost and fall back.
		// Reads whose blocks the transport still references end after
		// its Shutdown, which runs every done: their leases stay pinned
		// (ReleaseAll leaves them) until then.
		n.pump(now)
		var referenced []*readStream
		for _, st := range n.reads {
			if st.inflight.Load() > 0 {
				referenced = append(referenced, st)
				continue
			}
			n.core.ReadFinished(now, st.w.Session, st.w.ReadID, false)
		}
		clear(n.reads)
		n.reads = nil
		if p := n.core.Producer(); p != nil {
			p.ReleaseAll(now, wire.ReasonShutdown)
		}
		rd := n.core.Step(now)
		n.route(rd.Outputs)
		n.transfer(now, rd)
		n.submitOffload(now, rd)
		if graceful {
			n.linger()
		}
		n.tr.Shutdown()
		for _, st := range referenced {
			n.core.ReadFinished(now, st.w.Session, st.w.ReadID, false)
		}
	}
	n.closeOffload(now)
	closeAll(n.idleWaiters)
	n.idleWaiters = nil
	closeAll(n.drainWaiters)
	n.drainWaiters = nil
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
	s := n.newStream(req, opt, false)
	if res := n.queueAdd(req, s); res != Accepted {
		return nil, res
	}
	<-s.notify
	if s.addResult != Accepted {
		return nil, s.addResult
	}
	return s, Accepted
}

// Start queues req like SubmitWith but does not wait for the loop: it
// returns the request's stream at once, and the submission's outcome comes
// with the stream's first Recv — outputs if the core accepted it, or
// ErrRefused (Stream.Refusal says why). It saves the consumer one wake-up
// per request. The node reads req in its loop, so the caller must keep req
// unchanged until that first Recv returns or Abort of req.ID has returned.
// A refused request's Remote is told, as by SubmitWith.
func (n *Node) Start(req *Request, opt SubmitOptions) *Stream {
	s := n.newStream(req, opt, true)
	if res := n.queueAdd(req, s); res != Accepted {
		s.addResult, s.refused = res, true
	}
	return s
}

// ErrRefused is Recv's error on a stream from Start whose request was not
// accepted; Stream.Refusal gives the AddResult.
var ErrRefused = errors.New("engine: request refused")

// RefusedStream returns a stream whose first Recv returns ErrRefused with
// refusal res, as Start's for a refused request: for Engine wrappers and
// tests that refuse requests themselves.
func RefusedStream(id string, res AddResult) *Stream {
	return &Stream{id: id, async: true, refused: true, addResult: res, notify: make(chan struct{}, 1)}
}

// maxBufHint bounds the capacity a stream's first buffer is allocated
// with.
const maxBufHint = 64

func (n *Node) newStream(req *Request, opt SubmitOptions, async bool) *Stream {
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
	}
}

// queueAdd puts req in the inbox for the loop, or refuses it at once
// (closed or draining node, too many submissions queued), telling its
// Remote.
func (n *Node) queueAdd(req *Request, s *Stream) AddResult {
	n.mu.Lock()
	switch {
	case n.closed || n.draining.Load():
		n.mu.Unlock()
		n.Reject(req.Remote)
		return RejectedShuttingDown
	case n.pending >= n.maxPending:
		n.mu.Unlock()
		n.Reject(req.Remote)
		return RejectedQueueFull
	}
	n.inbox = append(n.inbox, nodeMsg{kind: msgAdd, req: req, stream: s})
	n.pending++
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return Accepted
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

// Stop finishes the live request id with status stopped, as a stop
// condition the engine does not know would (a stop string, matched by the
// HTTP layer on the detokenized text), and waits for the loop's answer.
// Unlike Abort it counts as a success (finished_reason stop), and unlike
// Abort it never touches a finished request's lease: a request that
// already finished is reported AbortAlreadyFinished and nothing changes.
// A stopped request is granted no lease. After Run has returned it
// reports AbortUnknown.
func (n *Node) Stop(id string) AbortResult {
	reply := make(chan AbortResult, 1)
	if !n.enqueue(nodeMsg{kind: msgStop, id: id, abort: reply}) {
		return AbortUnknown
	}
	return <-reply
}

// Reject tells the prefill engine that owns remote prefix r that a request
// carrying it was refused before admission (RELEASE rejected), so P frees
// its blocks at once. It works in every state of the node, also while it
// drains; it is a no-op for a nil r, on an engine without a transfer
// consumer, and after Run has returned (the transport is down: P sees the
// connection lost). The node copies r; it does not wait for the loop.
// SubmitWith calls it itself for every request it refuses.
func (n *Node) Reject(r *xfer.Remote) {
	if r == nil || n.tr == nil {
		return
	}
	rc := *r
	n.enqueue(nodeMsg{kind: msgReject, remote: &rc})
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
type Stream struct {
	id           string
	node         *Node
	finishedOnly bool
	async        bool          // from Start: the add's result comes through Recv
	bufHint      int           // capacity of the first buffer
	notify       chan struct{} // capacity 1

	// Loop-owned.
	internal uint64
	touched  bool
	added    bool // the core accepted the submission

	// For SubmitWith: written by the loop before the first notify, read
	// by SubmitWith after it. For Start: under mu, with refused.
	addResult AddResult

	mu          sync.Mutex
	buf         []Output
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

// Refusal is why a stream from Start was refused: Accepted while it was
// not (or not yet known to be).
func (s *Stream) Refusal() AddResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refused {
		return Accepted
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
// with the stream's id, it never touches another request: if the stream's
// own submission was refused (say, as a duplicate of a live id) it reports
// AbortUnknown, even while the refusal is still on its way to Recv.
func (s *Stream) Abort() AbortResult {
	if s.node == nil { // RefusedStream
		return AbortUnknown
	}
	reply := make(chan AbortResult, 1)
	if !s.node.enqueue(nodeMsg{kind: msgAbort, id: s.id, stream: s, abort: reply}) {
		return AbortUnknown
	}
	return <-reply
}
