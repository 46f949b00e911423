package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// legClient sends the legs of generation requests (a POST with a JSON
// body) over kept-alive HTTP/1.1 connections of its own, one pool per
// engine. It does what net/http's Transport does for a leg at a fraction
// of its CPU: the request is written and the answer read on the caller's
// goroutine (the Transport hands both to two goroutines per connection,
// three goroutine switches a leg), with no header map, URL or context
// copies. The answer's head is read by readAnswerHead (status lines,
// headers, Content-Length, chunked and close-delimited bodies, 1xx
// answers and Connection: close as net/http reads them, without a map
// of every header).
//
// Like the Transport with an idempotent request, a leg that fails on a
// reused connection before any of its answer arrived (the engine closed
// the kept-alive connection) is sent again on a new one, whose dial fails
// if the engine is gone.
type legClient struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int           // idle connections kept per engine
	idleTimeout time.Duration // an idle connection older than this is closed, not used
	// roots, when set, gives the CAs each new TLS connection verifies
	// its engine against (Config.EngineRootCAs).
	roots func() *x509.CertPool
}

// connPool holds one engine's idle connections, the most recent last.
type connPool struct {
	mu   sync.Mutex
	idle []*legConn
}

// legConn is one connection to an engine.
type legConn struct {
	nc    net.Conn
	br    *bufio.Reader
	wbuf  []byte    // the request head (and a small body) is written from here
	since time.Time // when it went idle
}

// maxCoalescedBody is the largest body written with the request head in
// one write; a larger one is a second write rather than a copy.
const maxCoalescedBody = 32 << 10

// get returns an idle connection, or nil.
func (p *connPool) get(idleTimeout time.Duration) *legConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		lc := p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(lc.since) < idleTimeout {
			return lc
		}
		lc.nc.Close()
	}
	return nil
}

// put keeps lc for reuse, or closes it when max connections are idle.
func (p *connPool) put(lc *legConn, max int) {
	lc.since = time.Now()
	p.mu.Lock()
	if len(p.idle) < max {
		p.idle = append(p.idle, lc)
		lc = nil
	}
	p.mu.Unlock()
	if lc != nil {
		lc.nc.Close()
	}
}

// closeIdle closes the idle connections; the pool stays usable.
func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, lc := range idle {
		lc.nc.Close()
	}
}

// legRequest is what a leg sends: a POST of body to path, with the
// request's id and what an engine needs of the client's headers (as
// Proxy.engineHeaders: its trace context, and auth when not nil or else
// its Authorization).
type legRequest struct {
	path   string
	id     string
	auth   []string
	client http.Header
	via    []string // the Via header (Proxy.via)
	body   []byte
}

// errBadHeaderValue refuses a header value a request line cannot carry.
var errBadHeaderValue = errors.New("proxy: invalid header value")

// roundTrip sends req to e and returns the answer once its head has
// arrived; the caller closes its body. ctx and deadline (none when zero)
// bound the whole exchange, body included: the deadline is the
// connection's (no timer of a context per leg), and when ctx is done the
// connection's reads and writes fail at once. An error from dialing is a
// *net.OpError with Op "dial".
func (lcl *legClient) roundTrip(ctx context.Context, deadline time.Time, e *engine, req *legRequest) (*http.Response, error) {
	for {
		lc := e.pool.get(lcl.idleTimeout)
		reused := lc != nil
		if lc == nil {
			nc, err := lcl.dialBy(ctx, deadline, e)
			if err != nil {
				return nil, err
			}
			lc = &legConn{nc: nc, br: bufio.NewReaderSize(nc, 8<<10)}
		}
		resp, err := lcl.exchange(ctx, deadline, e, lc, req)
		if err == nil {
			return resp, nil
		}
		lc.nc.Close()
		var nothing *nothingAnswered
		if !reused || ctx.Err() != nil || (!deadline.IsZero() && expired(deadline)) || !errors.As(err, &nothing) {
			if errors.As(err, &nothing) {
				err = nothing.err
			}
			return nil, err
		}
		// The engine closed a kept-alive connection before answering:
		// send again on a new one.
	}
}

// dialBy dials e, giving up when ctx is done or at deadline; an https
// engine's connection is TLS, its handshake done. A failed handshake is
// a dial error too: the engine never saw the request.
func (lcl *legClient) dialBy(ctx context.Context, deadline time.Time, e *engine) (net.Conn, error) {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	nc, err := lcl.dial(ctx, "tcp", e.hostPort)
	if err != nil || e.tls == nil {
		return nc, err
	}
	conf := e.tls
	if lcl.roots != nil {
		conf = conf.Clone()
		conf.RootCAs = lcl.roots()
	}
	tc := tls.Client(nc, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: nc.RemoteAddr(), Err: fmt.Errorf("TLS handshake: %w", err)}
	}
	return tc, nil
}

// nothingAnswered wraps an error that came before any byte of the answer.
type nothingAnswered struct{ err error }

func (n *nothingAnswered) Error() string { return n.err.Error() }
func (n *nothingAnswered) Unwrap() error { return n.err }

// exchange writes req on lc and reads the answer's head.
func (lcl *legClient) exchange(ctx context.Context, deadline time.Time, e *engine, lc *legConn, req *legRequest) (*http.Response, error) {
	// A kept-alive connection still has its last leg's deadline: each leg
	// sets its own (or none).
	if err := lc.nc.SetDeadline(deadline); err != nil {
		return nil, &nothingAnswered{err}
	}
	stop := context.AfterFunc(ctx, func() { lc.nc.SetDeadline(aLongTimeAgo) })
	w, err := appendRequestHead(lc.wbuf[:0], e.hostPort, req)
	if err != nil {
		stop()
		return nil, err
	}
	if len(req.body) <= maxCoalescedBody {
		w = append(w, req.body...)
		_, err = lc.nc.Write(w)
	} else if _, err = lc.nc.Write(w); err == nil {
		_, err = lc.nc.Write(req.body)
	}
	if cap(w) <= 2*maxCoalescedBody {
		lc.wbuf = w[:0]
	}
	if err != nil {
		stop()
		return nil, &nothingAnswered{err}
	}
	for {
		if _, err := lc.br.Peek(1); err != nil {
			stop()
			return nil, &nothingAnswered{err}
		}
		h, err := readAnswerHead(lc.br)
		if err != nil {
			stop()
			return nil, err
		}
		if h.status < 200 && h.status != http.StatusSwitchingProtocols {
			continue // 100 Continue, 103 Early Hints: the answer follows
		}
		// The answer and its body in one allocation.
		a := &legAnswer{body: legBody{ans: newAnswerBody(lc.br, &h), lc: lc, pool: &e.pool, max: lcl.maxIdle, stop: stop, keep: !h.close}}
		h.fill(&a.resp, &a.body)
		return &a.resp, nil
	}
}

// aLongTimeAgo is a deadline in the past: it fails a connection's reads
// and writes at once.
var aLongTimeAgo = time.Unix(1, 0)

// appendRequestHead appends the head of req's POST to dst.
func appendRequestHead(dst []byte, host string, req *legRequest) ([]byte, error) {
	dst = append(dst, "POST "...)
	dst = append(dst, req.path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(req.body)), 10)
	dst = append(dst, "\r\nX-Request-Id: "...)
	dst = append(dst, req.id...)
	dst = append(dst, "\r\n"...)
	auth := req.auth
	if auth == nil {
		auth = req.client["Authorization"]
	}
	var err error
	for _, h := range [...]struct {
		key string
		vs  []string
	}{{"Authorization", auth}, {"Traceparent", req.client["Traceparent"]}, {"Tracestate", req.client["Tracestate"]}, {"Via", req.via}} {
		for _, v := range h.vs {
			if !validHeaderValue(v) {
				err = fmt.Errorf("%w for %s", errBadHeaderValue, h.key)
			}
			dst = append(dst, h.key...)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, "\r\n"...)
		}
	}
	return append(dst, "\r\n"...), err
}

// validHeaderValue reports whether v can be sent as a header value: no
// control character but tab (RFC 9110, 5.5).
func validHeaderValue[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// legAnswer is an answer from an engine with its body.
type legAnswer struct {
	resp http.Response
	body legBody
}

// legBody is an answer's body on a pooled connection: read to its end
// and closed, it returns the connection to the pool; closed before, it
// closes the connection (net/http would read the rest of a stream first).
type legBody struct {
	ans  answerBody
	lc   *legConn
	pool *connPool
	max  int
	stop func() bool // stops the context's watch of the connection
	keep bool        // the engine keeps the connection open
	done bool
}

func (b *legBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("proxy: read on a closed body")
	}
	return b.ans.Read(p)
}

func (b *legBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	if b.stop() && b.ans.eof && b.keep {
		b.pool.put(b.lc, b.max)
	} else {
		b.lc.nc.Close()
	}
	return nil
}
