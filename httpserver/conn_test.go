package httpserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
)

// TestRequestFields checks what a handler sees of its request.
func TestRequestFields(t *testing.T) {
	type seen struct {
		remote, host, path, query, proto string
		length                           int64
		server                           any
		body                             bool
	}
	got := make(chan seen, 1)
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RemoteAddr, r.Host, r.URL.Path, r.URL.RawQuery, r.Proto, r.ContentLength,
			r.Context().Value(http.ServerContextKey), r.Body != http.NoBody}
	}))
	p := dial(t, addr)
	p.send("GET /v1/x%2Fy?a=1&b=%20 HTTP/1.1\r\nHost: example:8\r\n\r\n")
	p.answer("GET")
	want := seen{p.nc.LocalAddr().String(), "example:8", "/v1/x/y", "a=1&b=%20", "HTTP/1.1", 0, s, false}
	if g := <-got; g != want {
		t.Fatalf("%+v, want %+v", g, want)
	}
}

// TestKeepAliveReuse checks that net/http's client reuses one connection
// for sequential requests.
func TestKeepAliveReuse(t *testing.T) {
	_, addr := start(t, echo)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: testWait}
	reused := 0
	for range 5 {
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) {
				if i.Reused {
					reused++
				}
			},
		})
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/", strings.NewReader("abc"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if reused != 4 {
		t.Fatalf("%d of 4 requests reused the connection", reused)
	}
}

// TestDisconnectWithPipelinedBytes checks that a client that goes away
// after sending the start of its next request still cancels the running
// one (net/http stops watching once it reads a pipelined byte).
func TestDisconnectWithPipelinedBytes(t *testing.T) {
	running := make(chan struct{})
	cancelled := make(chan struct{})
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/wait" {
			return
		}
		close(running)
		<-r.Context().Done()
		close(cancelled)
	}))
	p := dial(t, addr)
	p.send("GET /wait HTTP/1.1\r\nHost: h\r\n\r\nGET /next HTTP/1.1\r\nHo")
	<-running
	p.nc.(*net.TCPConn).SetLinger(0) // a reset
	p.nc.Close()
	<-cancelled
}

// TestBodyInPieces checks a body that comes in several reads, while the
// handler reads it.
func TestBodyInPieces(t *testing.T) {
	_, addr := start(t, echo)
	p := dial(t, addr)
	p.send("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
	p.send("3\r\nabc\r\n")
	p.send("2\r\nde")
	p.send("\r\n0\r\n\r\n")
	if _, b := p.answer("POST"); !strings.HasSuffix(b, "body=abcde") {
		t.Fatal(b)
	}
	big := strings.Repeat("q", 3*readChunkBytes+maxPendingBytes)
	p.send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n")
	for i := 0; i < len(big); i += 1000 {
		p.send(big[i:min(i+1000, len(big))])
	}
	if _, b := p.answer("POST"); !strings.HasSuffix(b, "body="+big) {
		t.Fatalf("%d bytes", len(b))
	}
}

// TestAnswerEdges checks the handler-side edges of an answer: an
// informational status before the final one, a declared length the
// handler does not fill (the connection closes), a write after the
// handler returned (an error, not a crash), a header value with a line
// break (no injected field).
func TestAnswerEdges(t *testing.T) {
	late := make(chan http.ResponseWriter, 1)
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/103":
			w.Header().Set("Link", "</a>")
			w.WriteHeader(http.StatusEarlyHints)
			w.Write([]byte("final"))
		case "/short":
			w.Header().Set("Content-Length", "10")
			w.Write([]byte("abc"))
		case "/late":
			late <- w
		case "/inject":
			w.Header()["X-A"] = []string{"a\r\nX-Injected: 1"}
		}
	}))
	p := dial(t, addr)
	p.send("GET /103 HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, _ := p.answer("GET"); resp.StatusCode != 103 {
		t.Fatal(resp.StatusCode)
	}
	if resp, b := p.answer("GET"); resp.StatusCode != 200 || b != "final" {
		t.Fatal(resp.StatusCode, b)
	}
	p.send("GET /inject HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, _ := p.answer("GET"); resp.Header.Get("X-Injected") != "" || resp.Header.Get("X-A") != "a  X-Injected: 1" {
		t.Fatal(resp.Header)
	}
	p.send("GET /late HTTP/1.1\r\nHost: h\r\n\r\n")
	p.answer("GET")
	if _, err := (<-late).Write([]byte("x")); err == nil {
		t.Fatal("a write after the handler returned succeeded")
	}
	p.send("GET /short HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); string(b) != "abc" || err != io.ErrUnexpectedEOF {
		t.Fatalf("%q %v", b, err)
	}
}

// following reports, for s's one connection whose server waits for a
// head (follows), how many times its reader took the server's role and
// how much of the head is buffered; ok is false while no server follows.
func following(s *Server) (taken uint64, partial int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.mu.Lock()
		if c.follow { // the server waits: its state is still
			taken, partial, ok = c.taken, len(c.buf)-c.r, true
		}
		c.mu.Unlock()
	}
	return taken, partial, ok
}

// TestHeadInPieces checks the passing of the server's role: a head that
// comes in pieces is read on by the goroutine that read each piece (the
// reader takes the role of the server that waits), the pipelined
// requests after it are served in order, and a disconnect while the last
// one's handler runs cancels it.
func TestHeadInPieces(t *testing.T) {
	running := make(chan struct{})
	cancelled := make(chan struct{})
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			close(running)
			<-r.Context().Done()
			close(cancelled)
			return
		}
		echo(w, r)
	}))
	p := dial(t, addr)
	var taken uint64
	sent := 0
	for _, piece := range []string{"GET /a HTTP/1.1\r\nHo", "st: h\r", "\n"} {
		p.send(piece)
		sent += len(piece)
		var n uint64
		waitFor(t, func() bool {
			var part int
			var ok bool
			n, part, ok = following(s)
			return ok && part == sent
		})
		if taken > 0 && n != taken+1 {
			t.Fatalf("the reader took the role %d times for one piece", n-taken)
		}
		taken = n
	}
	p.send("\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nxGET /wait HTTP/1.1\r\nHost: h\r\n\r\n")
	for _, want := range []string{"GET /a path=/a query= host=h x= body=", "POST /b path=/b query= host=h x= body=x"} {
		if _, b := p.answer("GET"); b != want {
			t.Fatalf("%q, want %q", b, want)
		}
	}
	<-running
	p.nc.Close()
	<-cancelled
}
