package h1

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
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
	// Logger gets handler panics (Error) and refused requests (Debug);
	// nil means slog.Default().
	Logger *slog.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closed    atomic.Bool   // Shutdown or Close was called
	gone      chan struct{} // a connection ended (Shutdown waits on it)
	rearms    atomic.Int64  // read deadlines re-armed after passing (tests wait on it)
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
				s.logger().Debug("h1: accept", "err", err, "retry_in", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := newConn(s, nc)
		if !s.add(c) {
			nc.Close()
			return http.ErrServerClosed
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

func (s *Server) add(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
		s.gone = make(chan struct{}, 1)
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) remove(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
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
