package tcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// Reasons of DialFailed and Closed events. An event's Reason is one of these,
// alone or followed by ": " and details. They are for humans and tests:
// protocol cores must not branch on them.
const (
	ReasonDialError        = "dial error"                         // DialFailed: the TCP dial failed (refused, unreachable, timeout)
	ReasonTooManyConns     = "too many connections"               // DialFailed: Config.MaxConns connections are live
	ReasonClosedByPeer     = "closed by peer"                     // Closed: the peer closed the connection between frames
	ReasonTruncated        = "closed by peer inside a frame"      // Closed: the peer went away in the middle of a frame
	ReasonFrameTooLarge    = "frame too large"                    // Closed: a received frame is over the connection's cap (Config.MaxFrameBytes, MaxAcceptedFrameBytes, wire.MaxHandshakePayloadBytes)
	ReasonSlowFrame        = "frame too slow"                     // Closed: a frame arrived slower than Config.MinReceiveRate
	ReasonHandshakeTimeout = "handshake timeout"                  // Closed: an accepted connection did not authenticate within Config.HandshakeTimeout
	ReasonEvicted          = "unauthenticated connection dropped" // Closed: too many unauthenticated connections (Config.MaxUnauthenticated, MaxUnauthenticatedPerSource)
	ReasonBadFrame         = "bad frame"                          // Closed: a received frame does not decode
	ReasonTampered         = "frame authentication failed"        // Closed: a sealed frame does not verify (Config.Secret): altered, injected, replayed or reordered on the path
	ReasonIdleTimeout      = "idle timeout"                       // Closed: nothing received for Config.IdleTimeout
	ReasonWriteTimeout     = "write timeout"                      // Closed: a write took longer than Config.WriteTimeout
	ReasonQueueOverflow    = "send queue overflow"                // Closed: a Send exceeded Config.MaxQueuedBytes
	ReasonReadError        = "read error"                         // Closed: the socket failed while reading (reset, ...)
	ReasonWriteError       = "write error"                        // Closed: the socket failed while writing
	ReasonTransportClosed  = "transport closed"                   // never delivered: the owner closed the whole Transport
)

// Config configures a Transport. A zero field means its default (see
// DefaultConfig).
type Config struct {
	// MaxFrameBytes bounds the payload of a frame received on an
	// authenticated dialed connection (a decode engine's: its peer sends
	// BLOCKs, so set it to wire.BlockPayloadBytes of the engine's block
	// size, or the largest RENEW_ACK if that is larger): a peer that
	// announces more is disconnected before the payload is read
	// (ReasonFrameTooLarge). At most wire.MaxFrameBytes, the default.
	// Before authentication every connection's frames are bounded by
	// wire.MaxHandshakePayloadBytes (a few hundred bytes).
	MaxFrameBytes int
	// MaxAcceptedFrameBytes bounds the payload of a frame received on an
	// authenticated accepted connection (a prefill engine's: its peer, a
	// decode engine, sends RENEW, READ and RELEASE). The default is the
	// largest of those, a RENEW of wire.MaxLeasesPerRenew leases (1.5 MiB).
	MaxAcceptedFrameBytes int
	// HandshakeTimeout: an accepted connection that has not authenticated
	// within it is closed (ReasonHandshakeTimeout).
	HandshakeTimeout time.Duration
	// MinReceiveRate, in bytes per second: a frame must arrive within
	// IdleTimeout + its size / MinReceiveRate of its length prefix, or the
	// connection is closed (ReasonSlowFrame), so a peer that trickles a
	// frame (slow loris) does not keep a connection and its buffer.
	MinReceiveRate int
	// MaxUnauthenticated bounds accepted connections that have not
	// authenticated, MaxUnauthenticatedPerSource those from one source IP.
	// A new connection beyond either bound drops the oldest unauthenticated
	// one (of that source for the latter, ReasonEvicted): a decode engine
	// authenticates within a round trip, a flood of idle connections does
	// not.
	MaxUnauthenticated          int
	MaxUnauthenticatedPerSource int
	// MaxReceiveBytes bounds the bytes of frames being received over all
	// connections, from a frame's length prefix until it is handed to the
	// owner. A reader whose frame would exceed it waits, and TCP flow
	// control pushes back on its peer, until other frames are done; a
	// frame alone is always admitted.
	MaxReceiveBytes int64
	// MaxQueuedBytes bounds each connection's send queue: encoded frames
	// not yet written to the socket. A Send that would exceed it breaks the
	// connection (ReasonQueueOverflow): a peer that does not read must not
	// make this process buffer without limit. A frame larger than the bound
	// is accepted into an empty queue, so every valid message can be sent.
	MaxQueuedBytes int
	// WindowBytes is the backlog under which Writable reports true. Bulk
	// senders (block streams) check Writable before each frame, so they
	// keep about this much queued per connection and never reach
	// MaxQueuedBytes. Less than MaxQueuedBytes.
	WindowBytes int
	// WriteTimeout: a write to the socket that does not complete within it
	// breaks the connection (ReasonWriteTimeout): the peer stopped reading.
	WriteTimeout time.Duration
	// KeepaliveInterval: an end that has written nothing for this long
	// sends a keepalive frame.
	KeepaliveInterval time.Duration
	// IdleTimeout: an end that has received nothing, keepalives included,
	// for about this long closes the connection (ReasonIdleTimeout): the
	// peer is dead or cut off. At least 2 × KeepaliveInterval.
	IdleTimeout time.Duration
	// DialTimeout bounds a dial (DialFailed with ReasonDialError).
	DialTimeout time.Duration
	// MaxConns bounds live connections, dialed and accepted together. A
	// Dial beyond it fails (ReasonTooManyConns); an inbound connection
	// beyond it is closed at once and not reported.
	MaxConns int
	// MaxEvents bounds the events waiting for Poll. While the queue is
	// full, connections stop reading their sockets.
	MaxEvents int
	// LendBlockData makes a received wire.Block's Data a loan instead of a
	// gift: it is valid only until the owner's next Poll, which recycles
	// its buffer for a later frame. Set it when the owner consumes each
	// block (copies its data out) while handling the events of the Poll
	// that returned it, as the engine node does: the receiver then reads
	// block frames into reused buffers instead of allocating (and having
	// the kernel fault in) fresh memory for every block, which at 2 MiB per
	// block is most of the cost of a transfer (BenchmarkTransfer). Off by
	// default: a received Block owns its Data.
	LendBlockData bool
	// Secret, when set, is the cluster secret: every frame after the
	// handshake is sealed (encrypted and authenticated with AES-256-GCM,
	// wire.Sealer) under keys derived from it and the handshake's nonces
	// and engine ids, and one that does not verify closes the connection
	// (ReasonTampered, Event.Tampered). Both ends must set it (the engine
	// sets its --cluster-secret-file); nil: frames are plain.
	Secret []byte
	// Logger receives rare operational logs (accept errors). Nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: frames up to wire.MaxFrameBytes on
// dialed connections and up to the largest RENEW (1.5 MiB) on accepted
// ones once authenticated, wire.MaxHandshakePayloadBytes before; 64 MiB
// send queues with a 4 MiB streaming window, a keepalive every second, 5 s
// idle and 10 s write timeouts, 5 s dials, a 3 s handshake, frames at
// 64 KiB/s at least, 4096 connections of which 256 unauthenticated (16 per
// source), 256 MiB of frames being received and 4096 queued events.
func DefaultConfig() Config {
	return Config{
		MaxFrameBytes:               wire.MaxFrameBytes,
		MaxAcceptedFrameBytes:       MaxDecoderFrameBytes,
		HandshakeTimeout:            3 * time.Second,
		MinReceiveRate:              64 << 10,
		MaxUnauthenticated:          256,
		MaxUnauthenticatedPerSource: 16,
		MaxReceiveBytes:             256 << 20,
		MaxQueuedBytes:              64 << 20,
		WindowBytes:                 4 << 20,
		WriteTimeout:                10 * time.Second,
		KeepaliveInterval:           time.Second,
		IdleTimeout:                 5 * time.Second,
		DialTimeout:                 5 * time.Second,
		MaxConns:                    4096,
		MaxEvents:                   4096,
	}
}

// withDefaults fills the zero fields of c from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = d.MaxFrameBytes
	}
	if c.MaxAcceptedFrameBytes == 0 {
		c.MaxAcceptedFrameBytes = d.MaxAcceptedFrameBytes
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.MinReceiveRate == 0 {
		c.MinReceiveRate = d.MinReceiveRate
	}
	if c.MaxUnauthenticated == 0 {
		c.MaxUnauthenticated = d.MaxUnauthenticated
	}
	if c.MaxUnauthenticatedPerSource == 0 {
		c.MaxUnauthenticatedPerSource = min(d.MaxUnauthenticatedPerSource, c.MaxUnauthenticated)
	}
	if c.MaxReceiveBytes == 0 {
		c.MaxReceiveBytes = d.MaxReceiveBytes
	}
	if c.MaxQueuedBytes == 0 {
		c.MaxQueuedBytes = d.MaxQueuedBytes
	}
	if c.WindowBytes == 0 {
		c.WindowBytes = min(d.WindowBytes, c.MaxQueuedBytes/2)
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = d.KeepaliveInterval
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = max(d.IdleTimeout, 2*c.KeepaliveInterval)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = d.MaxConns
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = d.MaxEvents
	}
	return c
}

// Validate reports the first problem with c (after defaults), naming the
// setting.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.MaxFrameBytes < 0 || c.MaxFrameBytes > wire.MaxFrameBytes:
		return fmt.Errorf("tcp: MaxFrameBytes must be in 1..%d, got %d", wire.MaxFrameBytes, c.MaxFrameBytes)
	case c.MaxAcceptedFrameBytes < 0 || c.MaxAcceptedFrameBytes > wire.MaxFrameBytes:
		return fmt.Errorf("tcp: MaxAcceptedFrameBytes must be in 1..%d, got %d", wire.MaxFrameBytes, c.MaxAcceptedFrameBytes)
	case c.HandshakeTimeout < 0 || c.MinReceiveRate < 0 || c.MaxReceiveBytes < 0:
		return errors.New("tcp: HandshakeTimeout, MinReceiveRate and MaxReceiveBytes must be positive")
	case c.MaxUnauthenticated < 0 || c.MaxUnauthenticatedPerSource < 0 || c.MaxUnauthenticatedPerSource > c.MaxUnauthenticated:
		return fmt.Errorf("tcp: MaxUnauthenticatedPerSource (%d) must be positive and at most MaxUnauthenticated (%d)",
			c.MaxUnauthenticatedPerSource, c.MaxUnauthenticated)
	case c.MaxQueuedBytes < 0 || c.WindowBytes < 0 || c.WindowBytes >= c.MaxQueuedBytes:
		return fmt.Errorf("tcp: WindowBytes (%d) must be positive and less than MaxQueuedBytes (%d)", c.WindowBytes, c.MaxQueuedBytes)
	case c.WriteTimeout < 0 || c.KeepaliveInterval < 0 || c.DialTimeout < 0:
		return errors.New("tcp: timeouts must be positive")
	case c.IdleTimeout < 2*c.KeepaliveInterval:
		return fmt.Errorf("tcp: IdleTimeout %v must be at least 2 × KeepaliveInterval %v", c.IdleTimeout, c.KeepaliveInterval)
	case c.MaxConns < 0 || c.MaxEvents < 0:
		return fmt.Errorf("tcp: MaxConns (%d) and MaxEvents (%d) must be positive", c.MaxConns, c.MaxEvents)
	}
	return nil
}

// MaxDecoderFrameBytes is the largest payload a decode engine sends once
// authenticated: a RENEW of wire.MaxLeasesPerRenew leases (READ and RELEASE
// are smaller). The default of Config.MaxAcceptedFrameBytes.
var MaxDecoderFrameBytes = max(wire.MaxPayloadBytes(wire.MsgRenew), wire.MaxPayloadBytes(wire.MsgRead),
	wire.MaxPayloadBytes(wire.MsgRelease), wire.MaxHandshakePayloadBytes)

// ErrClosed is returned by Listen after Close.
var ErrClosed = errors.New("tcp: transport closed")

// ErrListening is returned by a second Listen.
var ErrListening = errors.New("tcp: already listening")

// Transport is one node's set of P/D connections: at most one listener
// (P's transfer port) and any number of dialed connections (D's, one per
// P). Connection ids are never reused.
//
// Dial, Send, Writable, Close(id), Conns and Addr are safe for concurrent
// use and never block on the network. Poll belongs to one goroutine, the
// owner, which also sees the Ready notifications.
type Transport struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // canceled by Close: stops dials
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[transport.ConnID]*conn
	nextID transport.ConnID
	ln     net.Listener
	addr   transport.Addr
	closed bool
	local  atomic.Pointer[transport.Addr] // addr, for events without t.mu
	unauth unauthList                     // under mu

	recv  budget // MaxReceiveBytes
	stats counters
	warn  limiter

	// clock stamps each Received event's At (SetClock); nil: unstamped.
	clock atomic.Pointer[func() clock.Instant]

	evMu   sync.Mutex
	events []queued
	spare  []queued
	lent   [][]byte      // Poll's: frame buffers of the blocks the last Poll returned (LendBlockData)
	slots  chan struct{} // a token per queued event: capacity MaxEvents
	ready  chan struct{} // capacity 1: "Poll has something, or a window opened"
	done   chan struct{} // closed by Close

	wg sync.WaitGroup
}

type queued struct {
	c    *conn // nil for events of no connection
	ev   transport.Event
	lent []byte // with LendBlockData: the frame buffer ev.Msg's Data aliases
}

// New returns a Transport that dials only; Listen adds a listener.
func New(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Transport{
		cfg:    cfg,
		log:    log,
		ctx:    ctx,
		cancel: cancel,
		conns:  make(map[transport.ConnID]*conn),
		recv:   budget{limit: cfg.MaxReceiveBytes},
		slots:  make(chan struct{}, cfg.MaxEvents),
		ready:  make(chan struct{}, 1),
		done:   make(chan struct{}),
	}, nil
}

// Config returns the configuration, defaults filled in.
func (t *Transport) Config() Config { return t.cfg }

// Listen accepts connections on addr ("host:port"; port 0 picks a free
// one). Each becomes an Accepted event. Addr then returns the bound address.
func (t *Transport) Listen(addr string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return ErrClosed
	case t.ln != nil:
		return ErrListening
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("tcp: listen on %s: %w", addr, err)
	}
	t.ln = ln
	t.addr = transport.Addr(ln.Addr().String())
	t.local.Store(&t.addr)
	t.wg.Add(1)
	go t.acceptLoop(ln)
	return nil
}

// Addr is the listener's bound address (host:port), or "" before Listen.
// It is Event.Local of every event.
func (t *Transport) Addr() transport.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.addr
}

// Conns is the number of live connections (dialing included): those whose
// goroutines have not finished.
func (t *Transport) Conns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// Ready receives a value when Poll may return events or when a connection
// that Writable reported full has drained below the window. One value may
// stand for many; after receiving, the owner polls and retries its pending
// sends.
func (t *Transport) Ready() <-chan struct{} { return t.ready }

func (t *Transport) signal() {
	select {
	case t.ready <- struct{}{}:
	default:
	}
}

// Poll appends the queued events to buf, in the order they happened per
// connection, and returns it. Events of a connection that the owner has
// closed are dropped, so nothing is delivered on a ConnID after Close(id).
// With Config.LendBlockData, Poll first takes back the buffers of the
// blocks the previous Poll returned: their Data is no longer valid.
func (t *Transport) Poll(buf []transport.Event) []transport.Event {
	for i, b := range t.lent {
		putBuf(b)
		t.lent[i] = nil
	}
	t.lent = t.lent[:0]
	t.evMu.Lock()
	q := t.events
	t.events, t.spare = t.spare[:0], nil
	t.evMu.Unlock()
	for i := range q {
		<-t.slots
		if c := q[i].c; c != nil && c.ownerClosed.Load() {
			if q[i].lent != nil {
				putBuf(q[i].lent)
			}
			continue
		}
		buf = append(buf, q[i].ev)
		if q[i].lent != nil {
			t.lent = append(t.lent, q[i].lent)
		}
	}
	clear(q)
	t.evMu.Lock()
	if t.spare == nil {
		t.spare = q[:0]
	}
	t.evMu.Unlock()
	return buf
}

// push queues ev for Poll, waiting while the queue is full. It returns false
// (and queues nothing) once the transport is closed.
func (t *Transport) push(c *conn, ev transport.Event) bool {
	return t.pushLent(c, ev, nil)
}

// pushLent is push of a received block whose Data aliases the pool buffer
// lent (nil: none), which Poll recycles one Poll later.
func (t *Transport) pushLent(c *conn, ev transport.Event, lent []byte) bool {
	select {
	case <-t.done:
		return false
	default:
	}
	select {
	case t.slots <- struct{}{}:
	case <-t.done:
		return false
	}
	if a := t.local.Load(); a != nil {
		ev.Local = *a
	}
	t.evMu.Lock()
	if ev.Kind == transport.Received {
		// Stamped under the queue's lock, so stamps follow the queue's
		// order: an event that a Poll does not return was stamped after
		// that Poll took the queue, hence after any instant its owner read
		// before polling.
		if now := t.clock.Load(); now != nil {
			ev.At = (*now)()
		}
	}
	t.events = append(t.events, queued{c, ev, lent})
	t.evMu.Unlock()
	t.signal()
	return true
}

// SetClock makes the transport stamp every received message's Event.At
// with now() as it queues it for Poll: when the message reached the owner,
// however long the owner then takes to poll it. The owner reads its clock
// before it polls, so the messages a Poll returns were stamped after the
// owner's previous instants and those it does not return are stamped after
// the instant it read (see engine.Loop.Poll). Safe for concurrent use.
func (t *Transport) SetClock(now func() clock.Instant) { t.clock.Store(&now) }

// Dial opens a connection to addr ("host:port") and returns its id at once;
// the outcome comes later as Dialed or DialFailed, with Event.Remote set to
// addr exactly as given (the owner can map it back to whatever it dialed).
// ctx bounds the dial only, together with Config.DialTimeout; it does not
// govern the connection afterwards. Closing the id before the outcome
// cancels the dial, and nothing is delivered. After Close of the Transport,
// Dial returns an id and delivers nothing.
func (t *Transport) Dial(ctx context.Context, addr transport.Addr) transport.ConnID {
	t.mu.Lock()
	t.nextID++
	id := t.nextID
	c := newConn(t, id, addr)
	why := ""
	switch {
	case t.closed:
		t.mu.Unlock()
		return id
	case len(t.conns) >= t.cfg.MaxConns:
		why = ReasonTooManyConns
	default:
		t.conns[id] = c
	}
	t.wg.Add(1)
	t.mu.Unlock()
	go t.dial(ctx, c, why)
	return id
}

func (t *Transport) dial(ctx context.Context, c *conn, why string) {
	defer t.wg.Done()
	if why != "" {
		if !c.ownerClosed.Load() {
			t.push(c, transport.Event{Kind: transport.DialFailed, Conn: c.id, Remote: c.remote, Reason: why})
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()
	c.mu.Lock()
	c.cancelDial = cancel // an owner Close cancels the dial
	c.mu.Unlock()
	if c.ownerClosed.Load() {
		cancel()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", string(c.remote))

	t.mu.Lock()
	if err != nil || t.closed || c.ownerClosed.Load() {
		delete(t.conns, c.id)
		t.mu.Unlock()
		if nc != nil {
			nc.Close()
		}
		if err != nil && !c.ownerClosed.Load() {
			t.push(c, transport.Event{Kind: transport.DialFailed, Conn: c.id, Remote: c.remote,
				Reason: ReasonDialError + ": " + err.Error()})
		}
		return
	}
	c.attach(nc)
	t.mu.Unlock()
	// Dialed is queued before the reader starts, so it precedes every
	// Received of the connection.
	if !t.push(c, transport.Event{Kind: transport.Dialed, Conn: c.id, Remote: c.remote}) {
		c.fail(ReasonTransportClosed)
	}
	c.start()
}

func (t *Transport) acceptLoop(ln net.Listener) {
	defer t.wg.Done()
	backoff := time.Duration(0)
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-t.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A resource error (EMFILE, ...): back off rather than spin,
			// as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t.log.Warn("transfer accept failed", "err", err, "retry_in", backoff)
			timer := time.NewTimer(backoff)
			select {
			case <-timer.C:
			case <-t.done:
				timer.Stop()
				return
			}
			continue
		}
		backoff = 0
		t.mu.Lock()
		if t.closed || len(t.conns) >= t.cfg.MaxConns {
			full := !t.closed
			t.mu.Unlock()
			nc.Close()
			if full {
				t.stats.drop(DropTooManyConns)
				t.warn.log(t.log, DropTooManyConns, "transfer connection refused: too many connections",
					"peer", nc.RemoteAddr().String(), "limit", t.cfg.MaxConns)
			}
			continue
		}
		t.nextID++
		c := newConn(t, t.nextID, transport.Addr(nc.RemoteAddr().String()))
		c.accepted = true
		c.source = sourceOf(nc.RemoteAddr())
		c.attach(nc)
		t.conns[c.id] = c
		evicted := t.admitUnauth(c)
		c.hsTimer = time.AfterFunc(t.cfg.HandshakeTimeout, c.handshakeTimeout)
		t.mu.Unlock()
		for _, e := range evicted {
			t.stats.drop(e.kind)
			e.c.fail(e.reason)
		}
		// Accepted is queued before the reader starts, so it precedes
		// every Received of the connection.
		if !t.push(c, transport.Event{Kind: transport.Accepted, Conn: c.id, Remote: c.remote}) {
			c.fail(ReasonTransportClosed)
		}
		c.start()
	}
}

func (t *Transport) conn(id transport.ConnID) *conn {
	t.mu.Lock()
	c := t.conns[id]
	t.mu.Unlock()
	return c
}

func (t *Transport) forget(c *conn) {
	if c.hsTimer != nil {
		c.hsTimer.Stop()
	}
	t.mu.Lock()
	delete(t.conns, c.id)
	t.unauth.remove(c)
	if c.countedAuthed {
		c.countedAuthed = false
		t.stats.authed.Add(-1)
	}
	t.mu.Unlock()
}

// Send queues m on connection id and reports whether it was queued. It
// encodes m before returning, so the caller may reuse m and everything it
// points to at once. False means the connection is not open from this end
// (unknown id, not yet Dialed or Accepted, closed by the owner, or broken)
// or that m would overflow the send queue, which breaks the connection: its
// Closed event follows. True does not mean the peer will get m: the
// connection may break first (then Closed follows).
//
// m must be valid (wire.Validate); an invalid message is a bug of the
// caller and panics, as in wire.AppendFrame.
func (t *Transport) Send(id transport.ConnID, m wire.Message) bool {
	c := t.conn(id)
	if c == nil || c.ownerClosed.Load() {
		return false
	}
	n := wire.FrameBytes(m)
	frame := wire.AppendFrame(getBuf(n+wire.SealOverhead), m)
	// Before the frame can reach the peer, so that the peer's answer
	// already meets the authenticated cap.
	c.observeSent(m)
	return c.enqueue(outFrame{buf: frame}, m)
}

// SendBlock queues b on connection id without copying b.Data: it encodes
// the frame's header and fixed fields (Digests included) at once and keeps
// a reference to b.Data, which the connection's writer writes to the socket
// straight from the caller's memory. The caller must leave b.Data unchanged
// until done is called. The referenced bytes count towards MaxQueuedBytes
// and WindowBytes like a copied frame's.
//
// If SendBlock returns true, done is called exactly once: done(true) once
// the whole frame has been written to the socket, done(false) if the
// connection broke or the transport shut down first. It is called before
// the connection's Closed event is queued, so an owner that sees Closed
// (or whose Shutdown has returned) holds no outstanding done. done may run
// on any goroutine, including inside a call of this Transport's methods
// (a Send that overflows the queue, Shutdown): it must not block and must
// not call the Transport; it should only record the outcome and wake the
// owner. If SendBlock returns false (as Send would), done is never called.
//
// b must be valid (wire.Validate); an invalid block panics.
func (t *Transport) SendBlock(id transport.ConnID, b *wire.Block, done func(ok bool)) bool {
	c := t.conn(id)
	if c == nil || c.ownerClosed.Load() {
		return false
	}
	hdr := wire.AppendBlockHeader(getBuf(wire.FrameBytes(b)-len(b.Data)), b)
	return c.enqueue(outFrame{buf: hdr, data: b.Data, done: done}, b)
}

// Writable reports whether connection id's send queue is under
// Config.WindowBytes. When it reports false, Ready receives a value once the
// backlog drops under the window. It reports true for a connection that is
// not open, so that a caller finds out with Send.
func (t *Transport) Writable(id transport.ConnID) bool {
	c := t.conn(id)
	if c == nil {
		return true
	}
	return c.writable()
}

// Close closes connection id from this end: frames already queued are
// still written (within Config.WriteTimeout), then the peer gets end of
// stream. Nothing more is delivered on id, and Send on it returns false.
// Closing a dial in progress cancels it. Unknown ids and repeated closes do
// nothing.
func (t *Transport) Close(id transport.ConnID) {
	c := t.conn(id)
	if c == nil {
		return
	}
	c.ownerClose()
}

// Shutdown closes the listener and every connection at once, without
// flushing, and waits for every goroutine of the transport to end. Nothing
// more is delivered; peers see their connections reset or closed. It is
// idempotent and safe to call at any time, from any goroutine.
func (t *Transport) Shutdown() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.wg.Wait()
		return
	}
	t.closed = true
	ln := t.ln
	conns := make([]*conn, 0, len(t.conns))
	for _, c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	close(t.done)
	t.cancel()
	if ln != nil {
		ln.Close()
	}
	for _, c := range conns {
		if c.nc != nil {
			c.fail(ReasonTransportClosed)
		}
	}
	t.wg.Wait()
}

// keepaliveFrame is the transport's own frame (type 0, no payload). It is
// never recycled.
var keepaliveFrame = []byte{0, 0, 0, 0, 0}

// isKeepalive reports whether a frame from wire.ReadFrame (type byte and
// payload) is a keepalive.
func isKeepalive(frame []byte) bool { return len(frame) == 1 && frame[0] == 0 }

// bufClasses are power-of-two buffer pools for encoded frames, from 4 KiB to
// 128 MiB (wire.MaxFrameBytes plus the header fits in the last class).
const (
	minBufShift = 12
	maxBufShift = 27
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

func bufClass(n int) int {
	c := 0
	for (1 << (minBufShift + c)) < n {
		c++
	}
	return c
}

// getBuf returns an empty slice with capacity of at least n.
func getBuf(n int) []byte {
	c := bufClass(n)
	if c >= len(bufPools) {
		return make([]byte, 0, n)
	}
	if b, ok := bufPools[c].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<(minBufShift+c))
}

// putBuf recycles a buffer from getBuf.
func putBuf(b []byte) {
	c := bufClass(cap(b))
	if c >= len(bufPools) || cap(b) != 1<<(minBufShift+c) {
		return // not one of ours (or oversized): let it go
	}
	bufPools[c].Put(&b)
}
