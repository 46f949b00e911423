package h1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sync"
	"time"
)

// conn is one client connection. Two goroutines serve it: the reader
// (readLoop) reads the socket all the time, also while a handler runs, so
// that a client that goes away is seen at once (its request's context is
// cancelled) and the next request's bytes are there when the handler
// returns; the server goroutine (serve) parses requests from what the
// reader read, runs the handler and writes the answers.
type conn struct {
	srv        *Server
	nc         net.Conn
	remoteAddr string
	baseCtx    context.Context
	readerDone chan struct{}

	mu   sync.Mutex
	cond sync.Cond // signals in, rerr, stop changes
	// in is what the reader read and serve has not taken yet.
	in []byte
	// rerr is why the reader stopped (the peer closed, a reset, a
	// timeout, the conn closed).
	rerr error
	// stop tells the reader to stop: the connection is closing. With
	// drain, it reads and drops the input until EOF or its deadline.
	stop, drain bool
	// cancel cancels the running request's context.
	cancel context.CancelFunc
	// idle: serve waits for a request and has nothing of it.
	idle bool
	// deadline is serve's read deadline while it waits in more (zero:
	// none); armed is the deadline set on nc. The reader re-arms nc when
	// armed passes before deadline, so that the hot path sets no deadline.
	deadline, armed time.Time

	// Owned by serve.
	buf      []byte // input taken from in; buf[r:] is not consumed yet
	r        int
	waitDead time.Time // the deadline more passes on while it waits
	waitIdle bool      // more marks the conn idle while it waits
	hdr      http.Header
	vals     []string
	res      http.Header
	pend     []byte // the answer's body before its head is written
	wbuf     []byte // bytes for the socket
	werr     error
	dateSec  int64
	date     []byte
	tmpl     http.Request
	lastPost bool
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, remoteAddr: nc.RemoteAddr().String(), readerDone: make(chan struct{})}
	c.cond.L = &c.mu
	c.baseCtx = context.WithValue(context.WithValue(context.Background(),
		http.ServerContextKey, s), http.LocalAddrContextKey, nc.LocalAddr())
	return c
}

// errIdleClosed ends an idle connection at a shutdown.
var errIdleClosed = errors.New("h1: server shutting down")

// readLoop reads the socket into c.in until an error or stop. An error
// cancels the running request: the client is gone.
func (c *conn) readLoop() {
	defer close(c.readerDone)
	chunk := make([]byte, firstChunkBytes)
	for {
		n, err := c.nc.Read(chunk)
		c.mu.Lock()
		if n > 0 && !c.drain {
			c.in = append(c.in, chunk[:n]...)
			c.idle = false
			c.cond.Broadcast()
		}
		if err != nil {
			if isTimeout(err) && !c.drain && c.rerr == nil && c.rearmLocked() {
				c.mu.Unlock()
				continue
			}
			if c.rerr == nil {
				c.rerr = err
			}
			if c.cancel != nil {
				c.cancel()
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		for len(c.in) >= maxPendingBytes && !c.stop && !c.drain {
			c.cond.Wait()
		}
		c.mu.Unlock()
		if n == len(chunk) && n < readChunkBytes {
			chunk = make([]byte, readChunkBytes) // a body or a stream of requests
		}
	}
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// rearmLocked handles the passing of the armed deadline: it reports false
// when serve's own deadline has passed (the connection times out), else
// arms nc again for serve's deadline or, with none, a while later.
func (c *conn) rearmLocked() bool {
	now := time.Now()
	if !c.deadline.IsZero() && !now.Before(c.deadline) {
		return false
	}
	next := c.deadline
	if next.IsZero() {
		next = now.Add(max(c.srv.IdleTimeout, c.srv.ReadHeaderTimeout))
	}
	c.nc.SetReadDeadline(next)
	c.armed = next
	c.srv.rearms.Add(1)
	return true
}

// buffered, consume and more make conn a source.
func (c *conn) buffered() []byte { return c.buf[c.r:] }
func (c *conn) consume(n int)    { c.r += n }

// more waits for input and takes it into c.buf, with c.waitDead as the
// read deadline while it waits.
func (c *conn) more() error {
	c.mu.Lock()
	if len(c.in) == 0 && c.rerr == nil {
		if c.waitIdle {
			c.idle = true
			if c.srv.closed.Load() {
				c.mu.Unlock()
				return errIdleClosed
			}
		}
		c.deadline = c.waitDead
		if d := c.deadline; !d.IsZero() && (c.armed.IsZero() || d.Before(c.armed)) {
			c.nc.SetReadDeadline(d)
			c.armed = d
		}
		for len(c.in) == 0 && c.rerr == nil {
			c.cond.Wait()
		}
		c.deadline, c.idle = time.Time{}, false
	}
	if len(c.in) == 0 {
		err := c.rerr
		c.mu.Unlock()
		return err
	}
	full := len(c.in) >= maxPendingBytes
	if c.r == len(c.buf) {
		c.buf, c.in = c.in, c.buf[:0]
		c.r = 0
		if cap(c.in) > maxKeptBytes {
			c.in = nil // after a long head or body
		}
	} else {
		if c.r > 0 { // what is left is short: more is called when the input is used up, or ends within a line
			n := copy(c.buf, c.buf[c.r:])
			c.buf, c.r = c.buf[:n], 0
		}
		c.buf = append(c.buf, c.in...)
		c.in = c.in[:0]
	}
	if full {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	return nil
}

// closeIfIdle closes the connection if it waits for a request (Shutdown).
func (c *conn) closeIfIdle() {
	c.mu.Lock()
	if c.idle {
		c.nc.Close()
	}
	c.mu.Unlock()
}

// serve serves the connection's requests until it closes.
func (c *conn) serve() {
	go c.readLoop()
	c.hdr, c.res = make(http.Header), make(http.Header)
	c.wbuf = make([]byte, 0, 4096)
	var err error
	for first := true; err == nil; first = false {
		err = c.serveOne(first)
	}
	var se *statusError
	if errors.As(err, &se) {
		c.refuse(se)
	} else if err == errBodyLeft {
		c.linger()
	}
	c.close()
}

// close closes the socket and waits for the reader to end.
func (c *conn) close() {
	c.mu.Lock()
	c.stop = true
	c.cond.Broadcast()
	c.mu.Unlock()
	c.nc.Close()
	<-c.readerDone
	c.srv.remove(c)
}

// errClose ends a connection after an exchange that leaves it unusable
// or asked to close it.
var errClose = errors.New("h1: connection closes")

// errBodyLeft ends a connection whose request body was not read to its
// end: the client may still be sending it.
var errBodyLeft = errors.New("h1: request body left unread")

// readHead returns the next request's head text. The first request has
// ReadHeaderTimeout from the connection's start; later ones wait up to
// IdleTimeout for their first byte, then ReadHeaderTimeout from it.
func (c *conn) readHead(first bool) (string, error) {
	var scan headScan
	var started bool
	var dead time.Time // the deadline of the wait for more
	if first && c.srv.ReadHeaderTimeout > 0 {
		started = true
		dead = time.Now().Add(c.srv.ReadHeaderTimeout)
	}
	limit := c.srv.maxHeadBytes()
	if c.r == len(c.buf) && cap(c.buf) > maxKeptBytes {
		c.buf, c.r = nil, 0 // after a long head or body
	}
	for {
		b := c.buf[c.r:]
		if c.lastPost && scan.pos == 0 {
			// RFC 9112 2.2's tolerance for a CRLF after a POST body.
			i := 0
			for i < len(b) && i < 4 && (b[i] == '\r' || b[i] == '\n') {
				i++
			}
			c.r += i
			b = b[i:]
		}
		if len(b) > 0 {
			if scan.line == 0 {
				if e := checkStart(b[:min(len(b), maxMethodBytes+1)]); e != nil {
					return "", e
				}
			}
			end := scan.end(b)
			if end > limit || end < 0 && len(b) >= limit {
				return "", errTooLarge
			}
			if end >= 0 {
				c.r += end
				return string(b[:end]), nil
			}
			if !started {
				started = true
				dead = time.Time{}
				if d := c.srv.ReadHeaderTimeout; d > 0 {
					dead = time.Now().Add(d)
				}
			}
		} else if !started && c.srv.IdleTimeout > 0 && dead.IsZero() {
			dead = time.Now().Add(c.srv.IdleTimeout)
		}
		c.waitIdle, c.waitDead = len(b) == 0, dead
		err := c.more()
		c.waitIdle, c.waitDead = false, time.Time{}
		if err != nil {
			// The client left, or timed out: a silent close, as net/http.
			return "", err
		}
	}
}

// exchange holds what one request allocates: the parts of its
// http.Request that are pointers, its body and its answer.
type exchange struct {
	url  url.URL
	body body
	w    response
}

// serveOne reads one request and serves it. It returns nil to go on with
// the next, a *statusError to refuse a bad one, or why the connection
// ends.
func (c *conn) serveOne(first bool) error {
	text, err := c.readHead(first)
	if err != nil {
		return err
	}
	if c.srv.closed.Load() {
		return errClose
	}
	var h head
	clear(c.hdr)
	clear(c.vals)
	var se *statusError
	if c.vals, se = parseHead(text, &h, c.hdr, c.vals[:0]); se != nil {
		return se
	}
	x := new(exchange)
	if err := parseURI(h.uri, &x.url); err != nil {
		return badRequest("malformed request target")
	}
	c.lastPost = h.method == http.MethodPost
	t := &c.tmpl
	*t = http.Request{Method: h.method, URL: &x.url, Proto: h.proto, ProtoMajor: 1, ProtoMinor: h.minor,
		Header: c.hdr, ContentLength: h.contentLength, Close: h.close, Host: h.host,
		RemoteAddr: c.remoteAddr, RequestURI: h.uri}
	if t.Host == "" {
		t.Host = x.url.Host
	}
	x.body.src = c
	if h.chunked {
		x.body.chunked = true
		t.TransferEncoding = chunkedTE
		t.Body = &x.body
	} else if h.contentLength > 0 {
		x.body.left = h.contentLength
		t.Body = &x.body
	} else {
		x.body.err = io.EOF
		t.Body = http.NoBody
	}
	w := &x.w
	w.init(c, &h, &x.body)
	if h.expectContinue {
		x.body.cont = w.sendContinue
	}

	ctx, cancel := context.WithCancel(c.baseCtx)
	c.mu.Lock()
	if c.rerr != nil {
		cancel()
	} else {
		c.cancel = cancel
	}
	c.mu.Unlock()
	r := t.WithContext(ctx)
	*t = http.Request{}

	if !c.runHandler(w, r) {
		cancel()
		return errClose
	}
	c.mu.Lock()
	c.cancel = nil
	c.mu.Unlock()
	cancel()
	w.finish()
	switch {
	case c.werr != nil:
		return errClose
	case w.bodyLeft:
		return errBodyLeft
	case w.closeAfter:
		return errClose
	}
	return nil
}

var chunkedTE = []string{"chunked"}

// runHandler runs the handler, recovering a panic: it reports false
// after one (logged, unless http.ErrAbortHandler).
func (c *conn) runHandler(w *response, r *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			if v != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.srv.logger().Error("h1: panic serving", "peer", c.remoteAddr, "panic", fmt.Sprint(v), "stack", string(buf))
			}
		}
	}()
	c.srv.Handler.ServeHTTP(w, r)
	return true
}

// refuse answers a request refused before its handler, then closes: it
// stops writing, and reads (and drops) what the client still sends for a
// while, so that closing with unread input does not reset the connection
// before the client reads the answer.
func (c *conn) refuse(se *statusError) {
	c.srv.logger().Debug("h1: request refused", "peer", c.remoteAddr, "status", se.code, "reason", se.reason)
	text := http.StatusText(se.code)
	body := fmt.Sprintf("%d %s: %s", se.code, text, se.reason)
	msg := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		se.code, text, len(body), body)
	if _, err := c.nc.Write([]byte(msg)); err == nil {
		c.linger()
	}
}

// lingerDelay bounds how long a connection that closes with input unread
// still reads (net/http's rstAvoidanceDelay).
const lingerDelay = 500 * time.Millisecond

// linger stops writing, then reads and drops what the client still sends
// until it closes or for lingerDelay: closing a socket with unread input
// resets the connection, and the client's system may then drop the
// answer before the client reads it (a 413 to a body too large, a 400).
func (c *conn) linger() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	c.mu.Lock()
	c.drain, c.in = true, nil
	c.cond.Broadcast()
	c.mu.Unlock()
	cw.CloseWrite()
	c.nc.SetReadDeadline(time.Now().Add(lingerDelay))
	<-c.readerDone
}

// discardBody reads and drops what the handler left of the request's
// body, up to maxPostHandlerReadBytes, and closes it to the handler. It
// reports whether the body was read to its end, so that the connection
// can serve another request. A body whose client still waits for 100
// Continue is not read: the connection closes instead.
func (c *conn) discardBody(b *body) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.err != nil || b.cont != nil {
		return b.done()
	}
	var scratch [4096]byte
	for n := 0; n < maxPostHandlerReadBytes; {
		k, err := b.read(scratch[:])
		n += k
		if err != nil {
			break
		}
	}
	return b.done()
}
