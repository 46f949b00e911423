package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"sync"
	"time"
)

// conn is one client connection. Two goroutines serve it, and their
// roles pass between them (leader/follower): the reader (readLoop) reads
// the socket all the time, also while a handler runs, so that a client
// that goes away is seen at once (its request's context is cancelled) and
// the next request's bytes are there when the handler returns; the server
// (serveLoop) parses requests from what the reader read, runs the handler
// and writes the answers. A server that waits for a request's head
// follows: the reader whose read brings input then takes the server's
// role itself and serves the request, and the follower becomes the
// reader, so that no hand-off between goroutines lies between a
// request's bytes and its handler.
type conn struct {
	srv        *Server
	nc         net.Conn
	remoteAddr string
	src        netip.Addr // the client's address (invalid when not TCP)
	pending    bool       // counted in srv.pending; guarded by srv.mu
	baseCtx    context.Context
	readerDone chan struct{} // closed when the reading ends

	mu   sync.Mutex
	cond sync.Cond // signals in, rerr, stop, follow changes
	// in is what the reader read and the server has not taken yet.
	in []byte
	// rerr is why the reader stopped (the peer closed, a reset, a
	// timeout, the conn closed).
	rerr error
	// stop tells the reader to stop: the connection is closing. With
	// drain, it reads and drops the input until EOF or its deadline.
	stop, drain bool
	// cancel cancels the running request's context.
	cancel context.CancelFunc
	// idle: the server waits for a request and has nothing of it.
	idle bool
	// follow: the server waits for a request's head, and the reader takes
	// its role with the input it reads; taken counts the roles taken.
	follow bool
	taken  uint64
	// deadline is the server's read deadline while it waits (zero:
	// none); armed is the deadline set on nc. The reader re-arms nc when
	// armed passes before deadline, so that the hot path sets no deadline.
	deadline, armed time.Time

	// Owned by the reader.
	chunk []byte

	// Owned by the server.
	buf      []byte // input taken from in; buf[r:] is not consumed yet
	r        int
	hs       headState
	first    bool // no request head read yet
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
	settled  bool                 // a request completed (srv.settle was called)
	tlsState *tls.ConnectionState // the TLS connection's, after its first request
	wdead    time.Time            // the write deadline set on nc
}

// headState is the reading of a request's head, kept in the conn so that
// the goroutine that takes the server's role goes on with it.
type headState struct {
	active  bool
	scan    headScan
	started bool      // the head's first byte came (or the connection's start)
	dead    time.Time // the deadline of the wait for more
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, remoteAddr: nc.RemoteAddr().String(), readerDone: make(chan struct{})}
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		c.src = ta.AddrPort().Addr().Unmap()
	}
	c.cond.L = &c.mu
	c.baseCtx = context.WithValue(context.WithValue(context.Background(),
		http.ServerContextKey, s), http.LocalAddrContextKey, nc.LocalAddr())
	return c
}

// errIdleClosed ends an idle connection at a shutdown.
var errIdleClosed = errors.New("httpserver: server shutting down")

// readLoop reads the socket into c.in until an error or stop, or until
// it takes the server's role (it then reports true). An error cancels the
// running request: the client is gone.
func (c *conn) readLoop() (serve bool) {
	for {
		n, err := c.nc.Read(c.chunk)
		c.mu.Lock()
		if n > 0 && !c.drain {
			c.in = append(c.in, c.chunk[:n]...)
			c.idle = false
			if c.follow && err == nil {
				// The server waits for a head: serve it here, and let the
				// follower read.
				c.follow, c.deadline = false, time.Time{}
				c.taken++
				c.takeLocked()
				c.growChunk(n) // before the follower reads into it
				c.cond.Broadcast()
				c.mu.Unlock()
				return true
			}
			c.cond.Broadcast()
		}
		if err != nil {
			if isTimeout(err) && !c.drain && c.rerr == nil && c.rearmLocked() {
				c.mu.Unlock()
				continue
			}
			c.answerPlainLocked(err)
			if c.rerr == nil {
				c.rerr = err
			}
			if c.cancel != nil {
				c.cancel()
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			close(c.readerDone)
			return false
		}
		for len(c.in) >= maxPendingBytes && !c.stop && !c.drain {
			c.cond.Wait()
		}
		c.mu.Unlock()
		c.growChunk(n)
	}
}

// answerPlainLocked answers a plain HTTP request sent to a TLS port (the
// handshake's first record is not TLS but looks like HTTP) with a 400 that
// says so, as net/http does.
func (c *conn) answerPlainLocked(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil || c.rerr != nil || !looksLikeHTTP(re.RecordHeader[:]) {
		return
	}
	re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"+
		"400 Bad Request: this port speaks HTTPS (TLS); the client sent plain HTTP\n")
	re.Conn.Close()
}

// looksLikeHTTP reports whether the first five bytes of a connection are
// those of an HTTP request.
func looksLikeHTTP(b []byte) bool {
	for _, m := range []string{"GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH"} {
		if string(b) == m {
			return true
		}
	}
	return false
}

// growChunk grows the read buffer after a read of n bytes filled a small
// one: a body or a stream of requests.
func (c *conn) growChunk(n int) {
	if n == len(c.chunk) && n < readChunkBytes {
		c.chunk = make([]byte, readChunkBytes)
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

// more waits for input and takes it into c.buf (a body's read), until
// dead when not zero.
func (c *conn) more(dead time.Time) error { return c.wait(false, false, dead) }

// errYield ends a server's wait for a head whose role the reader took:
// the goroutine that waited now reads.
var errYield = errors.New("httpserver: the reader serves")

// wait waits for input and takes it into c.buf, with dead as the read
// deadline while it waits. head: it waits for a request's head, and
// follows (it returns errYield when the reader takes its role); idle:
// nothing of the head is there yet.
func (c *conn) wait(head, idle bool, dead time.Time) error {
	c.mu.Lock()
	if len(c.in) == 0 && c.rerr == nil {
		if idle {
			c.idle = true
			if c.srv.closed.Load() {
				c.mu.Unlock()
				return errIdleClosed
			}
		}
		c.deadline = dead
		if d := c.deadline; !d.IsZero() && (c.armed.IsZero() || d.Before(c.armed)) {
			c.nc.SetReadDeadline(d)
			c.armed = d
		}
		if head {
			c.follow = true
			taken := c.taken
			for c.taken == taken && len(c.in) == 0 && c.rerr == nil {
				c.cond.Wait()
			}
			if c.taken != taken {
				c.mu.Unlock()
				return errYield
			}
			c.follow = false
		} else {
			for len(c.in) == 0 && c.rerr == nil {
				c.cond.Wait()
			}
		}
		c.deadline, c.idle = time.Time{}, false
	}
	if len(c.in) == 0 {
		err := c.rerr
		c.mu.Unlock()
		return err
	}
	c.takeLocked()
	c.mu.Unlock()
	return nil
}

// takeLocked takes c.in into c.buf, under c.mu, for the server.
func (c *conn) takeLocked() {
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
}

// closeIfIdle closes the connection if it waits for a request (Shutdown).
func (c *conn) closeIfIdle() {
	c.mu.Lock()
	if c.idle {
		c.nc.Close()
	}
	c.mu.Unlock()
}

// serve serves the connection's requests until it closes; it runs in
// the goroutine Serve starts for the connection, and starts the other.
func (c *conn) serve() {
	c.hdr, c.res = make(http.Header), make(http.Header)
	c.wbuf = make([]byte, 0, 4096)
	c.chunk = make([]byte, firstChunkBytes)
	c.first = true
	go c.run(false)
	c.run(true)
}

// run is the life of one of the connection's two goroutines: it reads,
// or serves, or (with serving) serves first, until the connection ends.
func (c *conn) run(serving bool) {
	for {
		if !serving && !c.readLoop() {
			return
		}
		serving = false
		err := c.serveLoop()
		if err == errYield {
			continue
		}
		var se *statusError
		if errors.As(err, &se) {
			c.refuse(se)
		} else if err == errBodyLeft {
			c.linger()
		}
		c.close()
		return
	}
}

// serveLoop serves requests until the connection ends (it returns why)
// or the reader takes the server's role (errYield).
func (c *conn) serveLoop() error {
	for {
		if err := c.serveOne(); err != nil {
			return err
		}
	}
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
var errClose = errors.New("httpserver: connection closes")

// errBodyLeft ends a connection whose request body was not read to its
// end: the client may still be sending it.
var errBodyLeft = errors.New("httpserver: request body left unread")

// readHead returns the next request's head text. The first request has
// ReadHeaderTimeout from the connection's start; later ones wait up to
// IdleTimeout for their first byte, then ReadHeaderTimeout from it. While
// it waits for input the reader may take the server's role (errYield):
// the head's reading goes on, from c.hs, in the reader's goroutine.
func (c *conn) readHead() (string, error) {
	hs := &c.hs
	if !hs.active {
		*hs = headState{active: true}
		if c.first && c.srv.ReadHeaderTimeout > 0 {
			hs.started = true
			hs.dead = time.Now().Add(c.srv.ReadHeaderTimeout)
		}
		if c.r == len(c.buf) && cap(c.buf) > maxKeptBytes {
			c.buf, c.r = nil, 0 // after a long head or body
		}
	}
	limit := c.srv.maxHeadBytes()
	for {
		b := c.buf[c.r:]
		if c.lastPost && hs.scan.pos == 0 {
			// RFC 9112 2.2's tolerance for a CRLF after a POST body.
			i := 0
			for i < len(b) && i < 4 && (b[i] == '\r' || b[i] == '\n') {
				i++
			}
			c.r += i
			b = b[i:]
		}
		if len(b) > 0 {
			if hs.scan.line == 0 {
				if e := checkStart(b[:min(len(b), maxMethodBytes+1)]); e != nil {
					hs.active = false
					return "", e
				}
			}
			end := hs.scan.end(b)
			if end > limit || end < 0 && len(b) >= limit {
				hs.active = false
				return "", errTooLarge
			}
			if end >= 0 {
				c.r += end
				hs.active, c.first = false, false
				return string(b[:end]), nil
			}
			if !hs.started {
				hs.started = true
				hs.dead = time.Time{}
				if d := c.srv.ReadHeaderTimeout; d > 0 {
					hs.dead = time.Now().Add(d)
				}
			}
		} else if !hs.started && c.srv.IdleTimeout > 0 && hs.dead.IsZero() {
			hs.dead = time.Now().Add(c.srv.IdleTimeout)
		}
		if err := c.wait(true, len(b) == 0, hs.dead); err != nil {
			// errYield: c is no longer this goroutine's to touch.
			// Else the client left, or timed out: a silent close, as
			// net/http.
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
func (c *conn) serveOne() error {
	text, err := c.readHead()
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
	if tc, ok := c.nc.(*tls.Conn); ok {
		if c.tlsState == nil {
			st := tc.ConnectionState()
			c.tlsState = &st
		}
		t.TLS = c.tlsState
	}
	x.body.src = c
	x.body.timeout, x.body.rate = c.srv.BodyReadTimeout, c.srv.MinBodyRate
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
	if !c.settled {
		c.settled = true
		c.srv.settle(c)
	}
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
				c.srv.logger().Error("httpserver: panic serving", "peer", c.remoteAddr, "panic", fmt.Sprint(v), "stack", string(buf))
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
	c.srv.logger().Debug("httpserver: request refused", "peer", c.remoteAddr, "status", se.code, "reason", se.reason)
	text := http.StatusText(se.code)
	body := fmt.Sprintf("%d %s: %s", se.code, text, se.reason)
	msg := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		se.code, text, len(body), body)
	c.armWrite()
	if _, err := c.nc.Write([]byte(msg)); err == nil {
		c.linger()
	}
}

// armWrite sets the write deadline of WriteTimeout before a write, unless
// the one set leaves at least half of it: a deadline is set at most every
// WriteTimeout/2, not per write.
func (c *conn) armWrite() {
	d := c.srv.WriteTimeout
	if d <= 0 {
		return
	}
	now := time.Now()
	if c.wdead.Sub(now) < d/2 {
		c.wdead = now.Add(d)
		c.nc.SetWriteDeadline(c.wdead)
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
