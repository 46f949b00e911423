package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.1 requests to a handler. Set its fields before
// Serve; it must not be copied after first use.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the time from a request's first byte (a
	// connection's opening, for its first request) to the end of its
	// head. Zero means no bound.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection. Zero means no bound.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's head as net/http's does (the
	// request line and the header, plus 4096 bytes of slack); beyond it
	// the client gets 431. Zero means http.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// BodyReadTimeout bounds the reading of a request's body from the
	// handler's first wait for its bytes, extended by one second per
	// MinBodyRate bytes received: a body that keeps coming at MinBodyRate
	// is never cut, one that trickles loses its connection (the handler's
	// read fails with a timeout and its context is cancelled). Zero means
	// no bound; with MinBodyRate zero the bound is of the whole body.
	BodyReadTimeout time.Duration
	MinBodyRate     int64 // bytes per second
	// WriteTimeout bounds each write of an answer to the socket: a
	// client that does not read its answer loses the connection. Zero
	// means no bound. (It bounds a write, not the answer: a stream may
	// last as long as its handler writes.)
	WriteTimeout time.Duration
	// MaxConns bounds the open connections; a connection accepted beyond
	// it is closed at once. Zero means no bound.
	MaxConns int
	// MaxPendingConnsPerSource bounds, per client IP address, the
	// connections that have not yet completed a request (a client that
	// opens connections and sends nothing, or never finishes a body); a
	// connection accepted beyond it is closed at once. Zero means no
	// bound.
	MaxPendingConnsPerSource int
	// TLSConfig, when set, makes every connection TLS: its handshake is
	// bounded by ReadHeaderTimeout, as the first request's head. It needs
	// Certificates, GetCertificate or GetConfigForClient.
	TLSConfig *tls.Config
	// Logger gets handler panics (Error) and refused requests (Debug);
	// nil means slog.Default().
	Logger *slog.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	pending   map[netip.Addr]int // connections without a completed request, per source
	refused   atomic.Uint64      // connections closed at accept (MaxConns, MaxPendingConnsPerSource)
	closed    atomic.Bool        // Shutdown or Close was called
	gone      chan struct{}      // a connection ended (Shutdown waits on it)
	rearms    atomic.Int64       // read deadlines re-armed after passing (tests wait on it)
}

// The bounds kvlease serve and kvlease proxy set (SetBounds).
const (
	// DefaultBodyReadTimeout and DefaultMinBodyRate: a body must start
	// within 10 s and come at 64 KiB/s at least (the transfer port's
	// minimum rate): 8 MiB may take 138 s, one byte every 5 s is cut at
	// 10 s.
	DefaultBodyReadTimeout = 10 * time.Second
	DefaultMinBodyRate     = 64 << 10
	// DefaultWriteTimeout: a client that reads none of its answer for a
	// minute loses the connection.
	DefaultWriteTimeout = time.Minute
	// DefaultMaxConns and DefaultMaxPendingConnsPerSource: a proxy may
	// open as many connections at once to an engine as it has requests in
	// flight (its --max-concurrent, 4096); a flood from one address holds
	// at most 4096 connections until their deadlines close them.
	DefaultMaxConns                 = 16384
	DefaultMaxPendingConnsPerSource = 4096
)

// SetBounds sets s's body, write and connection bounds to the defaults
// above where they are zero.
func SetBounds(s *Server) {
	for _, f := range []struct {
		v *time.Duration
		d time.Duration
	}{{&s.BodyReadTimeout, DefaultBodyReadTimeout}, {&s.WriteTimeout, DefaultWriteTimeout}} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	if s.MinBodyRate == 0 {
		s.MinBodyRate = DefaultMinBodyRate
	}
	if s.MaxConns == 0 {
		s.MaxConns = DefaultMaxConns
	}
	if s.MaxPendingConnsPerSource == 0 {
		s.MaxPendingConnsPerSource = DefaultMaxPendingConnsPerSource
	}
}

// maxPostHandlerReadBytes is how much of a request body the handler left
// unread the server reads and drops to keep the connection (net/http's
// figure); a longer rest closes the connection instead.
const maxPostHandlerReadBytes = 256 << 10

// maxPendingBytes bounds the input read ahead while a handler runs
// (bytes of the body not asked for yet, or of pipelined requests): beyond
// it the connection is not read until the handler takes some.
const maxPendingBytes = 64 << 10

// readChunkBytes is the size of one read from a connection once a read
// filled a buffer of firstChunkBytes: a connection that only sends short
// requests keeps a small buffer.
const (
	firstChunkBytes = 4 << 10
	readChunkBytes  = 16 << 10
)

// maxKeptBytes bounds the buffers a connection keeps between requests.
const maxKeptBytes = 64 << 10

func (s *Server) maxHeadBytes() int {
	if s.MaxHeaderBytes > 0 {
		return s.MaxHeaderBytes + 4096
	}
	return http.DefaultMaxHeaderBytes + 4096
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// Serve accepts connections on ln and serves each in its own goroutine
// until Shutdown or Close, then returns http.ErrServerClosed; or returns
// the listener's error. ln is closed when Serve returns.
func (s *Server) Serve(ln net.Listener) error {
	defer ln.Close()
	if !s.track(ln) {
		return http.ErrServerClosed
	}
	defer s.untrack(ln)
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closed.Load() {
				return http.ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Out of file descriptors and the like: wait, as net/http.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logger().Debug("httpserver: accept", "err", err, "retry_in", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		if s.TLSConfig != nil {
			nc = tls.Server(nc, s.TLSConfig)
		}
		c := newConn(s, nc)
		switch s.add(c) {
		case addClosed:
			nc.Close()
			return http.ErrServerClosed
		case addRefused:
			nc.Close()
			continue
		}
		go c.serve()
	}
}

func (s *Server) track(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return false
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[ln] = struct{}{}
	return true
}

func (s *Server) untrack(ln net.Listener) {
	s.mu.Lock()
	delete(s.listeners, ln)
	s.mu.Unlock()
}

const (
	addOK = iota
	addRefused
	addClosed
)

// add tracks c, or reports why not: the server is closed, or c is over
// MaxConns or MaxPendingConnsPerSource (counted in refused).
func (s *Server) add(c *conn) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return addClosed
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
		s.pending = make(map[netip.Addr]int)
		s.gone = make(chan struct{}, 1)
	}
	refuse := s.MaxConns > 0 && len(s.conns) >= s.MaxConns
	if c.src.IsValid() && s.MaxPendingConnsPerSource > 0 && !refuse {
		refuse = s.pending[c.src] >= s.MaxPendingConnsPerSource
	}
	if refuse {
		n := s.refused.Add(1)
		if n&(n-1) == 0 { // 1, 2, 4, ...: a flood logs a few lines
			s.logger().Warn("httpserver: connection refused: too many open", "peer", c.remoteAddr, "open", len(s.conns),
				"max_conns", s.MaxConns, "pending_from_peer", s.pending[c.src],
				"max_pending_per_source", s.MaxPendingConnsPerSource, "refused_total", n)
		}
		return addRefused
	}
	s.conns[c] = struct{}{}
	if c.src.IsValid() {
		s.pending[c.src]++
		c.pending = true
	}
	return addOK
}

// settle counts c's first completed request: it no longer counts against
// its source's MaxPendingConnsPerSource.
func (s *Server) settle(c *conn) {
	s.mu.Lock()
	s.settleLocked(c)
	s.mu.Unlock()
}

func (s *Server) settleLocked(c *conn) {
	if !c.pending {
		return
	}
	c.pending = false
	if n := s.pending[c.src] - 1; n > 0 {
		s.pending[c.src] = n
	} else {
		delete(s.pending, c.src)
	}
}

// Stats are a server's connection counts.
type Stats struct {
	Open    int    // connections open
	Pending int    // of which have not completed a request yet
	Refused uint64 // connections closed at accept: over MaxConns or MaxPendingConnsPerSource
}

// Stats returns the server's connection counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Open: len(s.conns), Refused: s.refused.Load()}
	for _, n := range s.pending {
		st.Pending += n
	}
	return st
}

func (s *Server) remove(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.settleLocked(c)
	gone := s.gone
	s.mu.Unlock()
	select {
	case gone <- struct{}{}:
	default:
	}
}

// closeListeners marks the server closed and closes its listeners, under
// s.mu.
func (s *Server) closeListenersLocked() {
	s.closed.Store(true)
	for ln := range s.listeners {
		ln.Close()
	}
}

// Shutdown stops the server gracefully, as net/http's: it closes the
// listeners, then closes connections as they become idle (a connection
// serving a request finishes its answer, then closes), and returns once
// none is left, or ctx's error when ctx ends first. Handlers keep their
// contexts; Close after a failed Shutdown cancels them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closeListenersLocked()
	gone := s.gone
	s.mu.Unlock()
	for {
		s.mu.Lock()
		for c := range s.conns {
			c.closeIfIdle()
		}
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the server at once: it closes the listeners and every
// connection, which cancels the contexts of the requests running. It
// does not wait for their handlers to return.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeListenersLocked()
	for c := range s.conns {
		c.nc.Close()
	}
	return nil
}
