package tcp

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlease/kvlease/wire"
)

// Bounds before and after authentication (see the package doc, "Bounded
// before trusted").
const (
	// handshakeReadBufferBytes is the socket read buffer of a connection
	// that has not authenticated: a handshake frame fits in it. It grows
	// to readBufferBytes after authentication.
	handshakeReadBufferBytes = 512
	// warnInterval spaces the WARN lines of one kind of failure.
	warnInterval = 10 * time.Second
)

// Kinds of Stats.Dropped: why this end closed a connection to bound what a
// peer can make it hold.
const (
	DropFrameTooLarge    = "frame_too_large"          // a frame over the connection's cap
	DropBadFrame         = "bad_frame"                // a frame that does not decode
	DropSlowFrame        = "slow_frame"               // a frame arriving slower than MinReceiveRate
	DropIdle             = "idle_timeout"             // nothing received for IdleTimeout
	DropTampered         = "tampered"                 // a sealed frame did not verify (ReasonTampered)
	DropHandshakeTimeout = "handshake_timeout"        // not authenticated within HandshakeTimeout
	DropUnauthenticated  = "too_many_unauthenticated" // MaxUnauthenticated
	DropSource           = "too_many_from_source"     // MaxUnauthenticatedPerSource
	DropTooManyConns     = "too_many_connections"     // MaxConns
)

const numDropKinds = 9

// Sides of HandshakeFailure.
const (
	sideAccepted = "accepted"
	sideDialed   = "dialed"
)

// DropKinds lists the kinds of Stats.Dropped, for exporters.
var DropKinds = []string{DropFrameTooLarge, DropBadFrame, DropSlowFrame, DropIdle, DropTampered, DropHandshakeTimeout,
	DropUnauthenticated, DropSource, DropTooManyConns}

// HandshakeFailure classifies a connection that ended before it
// authenticated. Side is "accepted" (this end is P) or "dialed" (D);
// Reason is "timeout" (no handshake in time: a silent or stopped peer),
// "protocol" (frames that are not the protocol's handshake: another
// protocol on that port), "slow" (a frame trickled), "closed" (the peer
// closed or reset), "refused" (this end's owner refused the peer's
// handshake: a wrong cluster secret or protocol version) or "evicted" (too
// many unauthenticated connections).
type HandshakeFailure struct{ Side, Reason string }

// HandshakeFailureReasons lists the Reason values, for exporters.
var HandshakeFailureReasons = []string{"timeout", "protocol", "slow", "closed", "refused", "evicted"}

// Stats are the transport's counters and gauges, for /metrics. Maps are
// fresh copies.
type Stats struct {
	// Authenticated counts live connections past the handshake;
	// Unauthenticated the accepted ones not yet past it (the bounded set).
	Authenticated, Unauthenticated int
	// ReceiveBytes are the bytes of frames being received now, over all
	// connections; ReceiveLimit is Config.MaxReceiveBytes.
	ReceiveBytes, ReceiveLimit int64
	// ReceiveWaits counts frames that waited for MaxReceiveBytes.
	ReceiveWaits uint64
	// Dropped counts connections this end closed to bound a peer, by kind
	// (the Drop constants).
	Dropped map[string]uint64
	// HandshakeFailures counts connections that ended before they
	// authenticated.
	HandshakeFailures map[HandshakeFailure]uint64
}

// counters are a Transport's Stats, safe for concurrent use.
type counters struct {
	authed  atomic.Int64
	dropped [numDropKinds]atomic.Uint64

	mu         sync.Mutex
	handshakes map[HandshakeFailure]uint64
}

func (k *counters) drop(kind string) {
	for i, d := range DropKinds {
		if d == kind {
			k.dropped[i].Add(1)
			return
		}
	}
	panic("tcp: unknown drop kind " + kind)
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	unauth := t.unauth.n
	t.mu.Unlock()
	s := Stats{
		Authenticated:     int(t.stats.authed.Load()),
		Unauthenticated:   unauth,
		ReceiveLimit:      t.cfg.MaxReceiveBytes,
		ReceiveWaits:      t.recv.waits.Load(),
		Dropped:           make(map[string]uint64, len(DropKinds)),
		HandshakeFailures: make(map[HandshakeFailure]uint64),
	}
	s.ReceiveBytes = t.recv.inUse()
	for i, d := range DropKinds {
		s.Dropped[d] = t.stats.dropped[i].Load()
	}
	t.stats.mu.Lock()
	for k, v := range t.stats.handshakes {
		s.HandshakeFailures[k] = v
	}
	t.stats.mu.Unlock()
	return s
}

// budget bounds the bytes of frames being received over all connections
// (Config.MaxReceiveBytes). Safe for concurrent use.
type budget struct {
	limit int64
	waits atomic.Uint64

	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed when bytes are released while someone waits
}

// acquire reserves n bytes, waiting while they would exceed the limit
// (a reservation alone is always granted, so every valid frame can be
// received). It returns false, reserving nothing, if dead closes first.
func (b *budget) acquire(n int, dead <-chan struct{}) bool {
	waited := false
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+int64(n) <= b.limit {
			b.used += int64(n)
			b.mu.Unlock()
			return true
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		ch := b.freed
		b.mu.Unlock()
		if !waited {
			waited = true
			b.waits.Add(1)
		}
		select {
		case <-ch:
		case <-dead:
			return false
		}
	}
}

func (b *budget) release(n int) {
	b.mu.Lock()
	b.used -= int64(n)
	ch := b.freed
	b.freed = nil
	b.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// unauthList is the accepted connections that have not authenticated, in
// accept order (oldest first), with a count per source address. Guarded by
// Transport.mu.
type unauthList struct {
	head, tail *conn
	n          int
	bySource   map[string]int
}

func (l *unauthList) push(c *conn) {
	c.unauthPrev, c.unauthNext = l.tail, nil
	if l.tail != nil {
		l.tail.unauthNext = c
	} else {
		l.head = c
	}
	l.tail = c
	c.inUnauth = true
	l.n++
	if l.bySource == nil {
		l.bySource = make(map[string]int)
	}
	l.bySource[c.source]++
}

func (l *unauthList) remove(c *conn) {
	if !c.inUnauth {
		return
	}
	if c.unauthPrev != nil {
		c.unauthPrev.unauthNext = c.unauthNext
	} else {
		l.head = c.unauthNext
	}
	if c.unauthNext != nil {
		c.unauthNext.unauthPrev = c.unauthPrev
	} else {
		l.tail = c.unauthPrev
	}
	c.unauthPrev, c.unauthNext, c.inUnauth = nil, nil, false
	l.n--
	if l.bySource[c.source]--; l.bySource[c.source] == 0 {
		delete(l.bySource, c.source)
	}
}

// oldest returns the oldest connection of source, or of all when source is
// "".
func (l *unauthList) oldest(source string) *conn {
	for c := l.head; c != nil; c = c.unauthNext {
		if source == "" || c.source == source {
			return c
		}
	}
	return nil
}

type eviction struct {
	c      *conn
	kind   string
	reason string
}

// admitUnauth adds the accepted connection c to the unauthenticated set and
// returns the connections to drop to make room for it: the oldest of its
// source beyond MaxUnauthenticatedPerSource, the oldest of all beyond
// MaxUnauthenticated. The caller holds t.mu and fails them after
// unlocking.
func (t *Transport) admitUnauth(c *conn) []eviction {
	var ev []eviction
	if t.unauth.bySource[c.source] >= t.cfg.MaxUnauthenticatedPerSource {
		old := t.unauth.oldest(c.source)
		t.unauth.remove(old)
		ev = append(ev, eviction{old, DropSource, fmt.Sprintf("%s: %d unauthenticated connections from %s, the oldest goes",
			ReasonEvicted, t.cfg.MaxUnauthenticatedPerSource, c.source)})
	}
	if t.unauth.n >= t.cfg.MaxUnauthenticated {
		old := t.unauth.oldest("")
		t.unauth.remove(old)
		ev = append(ev, eviction{old, DropUnauthenticated, fmt.Sprintf("%s: %d unauthenticated connections, the oldest goes",
			ReasonEvicted, t.cfg.MaxUnauthenticated)})
	}
	t.unauth.push(c)
	return ev
}

// sourceOf is the address a connection's unauthenticated bound counts it
// under: the peer's IP.
func sourceOf(remote net.Addr) string {
	s := remote.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// authenticate records that c passed the handshake: its frame cap and read
// buffer grow to its role's, it leaves the unauthenticated set and its
// handshake deadline. Idempotent.
func (c *conn) authenticate() {
	if c.authed.Swap(true) {
		return
	}
	if c.hsTimer != nil {
		c.hsTimer.Stop()
	}
	t := c.t
	t.mu.Lock()
	t.unauth.remove(c)
	if t.conns[c.id] == c { // not forgotten yet: forget uncounts it
		c.countedAuthed = true
		t.stats.authed.Add(1)
	}
	t.mu.Unlock()
}

// handshakeTimeout closes an accepted connection that has not
// authenticated within Config.HandshakeTimeout.
func (c *conn) handshakeTimeout() {
	if c.authed.Load() {
		return
	}
	c.t.stats.drop(DropHandshakeTimeout)
	c.fail(fmt.Sprintf("%s: not authenticated within %v", ReasonHandshakeTimeout, c.t.cfg.HandshakeTimeout))
}

// observeSent follows the handshake in the messages this end's owner sends
// on a connection that has not authenticated yet (see the package doc):
// an accepted connection is authenticated once its owner sends AUTH_ACK
// with StatusOK (the decode engine proved the cluster secret); a dialed one
// once its owner sends AUTH (the owner sends it only after the prefill
// engine proved the secret in its HELLO_ACK). A refusal (a HELLO_ACK or
// AUTH_ACK with another status) is remembered for the log.
func (c *conn) observeSent(m wire.Message) {
	if c.authed.Load() {
		return
	}
	switch m := m.(type) {
	case *wire.AuthAck:
		if !c.accepted {
			return
		}
		if m.Status == wire.StatusOK {
			c.authenticate()
			return
		}
		c.refuse(m.Status)
	case *wire.HelloAck:
		if c.accepted && m.Status != wire.StatusOK {
			c.refuse(m.Status)
		}
	case *wire.Auth:
		if !c.accepted {
			c.authenticate()
		}
	}
}

func (c *conn) refuse(st wire.Status) {
	why := "refused the peer's handshake: " + st.String()
	switch st {
	case wire.StatusUnauthenticated:
		why += " (its proof does not verify: the engines have different cluster secrets)"
	case wire.StatusBadVersion:
		why += " (another protocol version)"
	}
	c.mu.Lock()
	if c.refusal == "" {
		c.refusal = why
	}
	c.mu.Unlock()
}

// handshakeEnded counts and logs (rate-limited) a connection that ended
// before it authenticated. A connection its owner closed without refusing
// anything is not counted: the owner knows why (D's consumer logs its own
// handshake failures), as is one ended by Shutdown.
func (c *conn) handshakeEnded() {
	c.mu.Lock()
	reason, refusal := c.reason, c.refusal
	c.mu.Unlock()
	class := ""
	switch {
	case refusal != "":
		class, reason = "refused", refusal
	case c.ownerClosed.Load(), strings.HasPrefix(reason, ReasonTransportClosed):
		return
	case strings.HasPrefix(reason, ReasonHandshakeTimeout), strings.HasPrefix(reason, ReasonIdleTimeout):
		class = "timeout"
	case strings.HasPrefix(reason, ReasonFrameTooLarge), strings.HasPrefix(reason, ReasonBadFrame):
		class = "protocol"
	case strings.HasPrefix(reason, ReasonSlowFrame):
		class = "slow"
	case strings.HasPrefix(reason, ReasonEvicted):
		class = "evicted"
	default:
		class = "closed"
	}
	side := sideDialed
	if c.accepted {
		side = sideAccepted
	}
	k := HandshakeFailure{side, class}
	t := c.t
	t.stats.mu.Lock()
	if t.stats.handshakes == nil {
		t.stats.handshakes = make(map[HandshakeFailure]uint64)
	}
	t.stats.handshakes[k]++
	t.stats.mu.Unlock()
	t.warn.log(t.log, side+"/"+class, "transfer handshake failed", "side", side, "peer", string(c.remote), "reason", reason)
}

// limiter rate-limits WARN lines per key: the first of a key is logged, the
// next ones within warnInterval are counted and reported as "suppressed" by
// the next line logged. Keys are few and fixed. Safe for concurrent use.
type limiter struct {
	mu   sync.Mutex
	last map[string]*limited
}

type limited struct {
	at         time.Time
	suppressed int
}

func (l *limiter) log(log *slog.Logger, key, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	if l.last == nil {
		l.last = make(map[string]*limited)
	}
	e, ok := l.last[key]
	if ok && now.Sub(e.at) < warnInterval {
		e.suppressed++
		l.mu.Unlock()
		return
	}
	if !ok {
		e = &limited{}
		l.last[key] = e
	}
	n := e.suppressed
	*e = limited{at: now}
	l.mu.Unlock()
	log.Warn(msg, append(args, "suppressed", n)...)
}

// describeLength says what a length prefix over the handshake cap may be:
// four printable bytes are another protocol's text (an HTTP response
// starts "HTTP").
func describeLength(hdr []byte) string {
	for _, b := range hdr {
		if b < 0x20 || b > 0x7e {
			return ""
		}
	}
	return fmt.Sprintf(" (the peer sent %q: another protocol, not kvlease's transfer port)", hdr)
}
