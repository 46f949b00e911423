package httpserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRefusedAnswers checks that a bad request gets its status, then the
// connection closes.
func TestRefusedAnswers(t *testing.T) {
	_, addr := start(t, echo, func(s *Server) { s.MaxHeaderBytes = 1024 })
	for _, tc := range []struct {
		name, req string
		code      int
	}{
		{"smuggling: CL and TE", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"smuggling: two lengths", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"unknown coding", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: br\r\n\r\n", 501},
		{"head too large", "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", 6000) + "\r\n\r\n", 431},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
		{"garbage", "\x00\x01\x02\x03", 400},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad target", "GET %zz HTTP/1.1\r\nHost: h\r\n\r\n", 400},
	} {
		p := dial(t, addr)
		p.send(tc.req)
		resp, body := p.answer("GET")
		if resp.StatusCode != tc.code || !resp.Close {
			t.Errorf("%s: %d %q", tc.name, resp.StatusCode, body)
		}
		p.closed()
	}
}

// TestTLSClientHello checks that a TLS client gets its answer from its
// first bytes, not after a timeout.
func TestTLSClientHello(t *testing.T) {
	_, addr := start(t, echo, func(s *Server) { s.ReadHeaderTimeout = time.Hour })
	p := dial(t, addr)
	p.send("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
	if resp, _ := p.answer("GET"); resp.StatusCode != 400 {
		t.Fatal(resp.StatusCode)
	}
	p.closed()
}

// TestHeaderTimeout checks that a peer trickling its head, or sending
// none, is cut at ReadHeaderTimeout, and an idle one at IdleTimeout.
func TestHeaderTimeout(t *testing.T) {
	_, addr := start(t, echo, func(s *Server) {
		s.ReadHeaderTimeout = 50 * time.Millisecond
		s.IdleTimeout = 100 * time.Millisecond
	})
	p := dial(t, addr) // sends nothing
	p.closed()

	p = dial(t, addr)
	p.send("GET / HTTP/1.1\r\nHost: h\r\n")
	p.closed()

	p = dial(t, addr)
	p.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	p.answer("GET")
	p.closed() // idle
}

// TestHeaderTimeoutRearms checks that the timeouts of one request do not
// cut a later one: a handler that runs longer than both, then a request
// after an idle pause shorter than IdleTimeout.
func TestHeaderTimeoutRearms(t *testing.T) {
	release := make(chan struct{})
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		w.Write([]byte("ok"))
	}), func(s *Server) {
		s.ReadHeaderTimeout = 20 * time.Millisecond
		s.IdleTimeout = 0 // re-armed every ReadHeaderTimeout
	})
	p := dial(t, addr)
	p.send("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	// The handler outlives the armed deadline, twice: the connection
	// must stay.
	waitFor(t, func() bool { return s.rearms.Load() >= 2 })
	close(release)
	if resp, b := p.answer("GET"); resp.StatusCode != 200 || b != "ok" {
		t.Fatal(resp.StatusCode, b)
	}
	// A request after an idle pause that re-arms the deadline once more.
	n := s.rearms.Load()
	waitFor(t, func() bool { return s.rearms.Load() > n })
	p.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, b := p.answer("GET"); resp.StatusCode != 200 || b != "ok" {
		t.Fatal(resp.StatusCode, b)
	}
}

// TestShutdown checks net/http's semantics: Shutdown closes idle
// connections, lets the active one finish its answer, and returns then.
func TestShutdown(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(running)
			<-release
			if r.Context().Err() != nil {
				panic("Shutdown cancelled a handler")
			}
		}
		w.Write([]byte("done"))
	}))
	idle := dial(t, addr)
	idle.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	idle.answer("GET")
	active := dial(t, addr)
	active.send("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	<-running
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	idle.closed()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request running", err)
	default:
	}
	close(release)
	if resp, b := active.answer("GET"); b != "done" || !resp.Close {
		t.Fatalf("%q close %v", b, resp.Close)
	}
	active.closed()
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// TestShutdownTimeoutThenClose checks the drain sequence of kvlease serve
// and proxy: Shutdown gives up at its context's end, then Close cancels
// the handlers' contexts.
func TestShutdownTimeoutThenClose(t *testing.T) {
	running := make(chan struct{})
	cancelled := make(chan struct{})
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(running)
		<-r.Context().Done()
		close(cancelled)
	}))
	p := dial(t, addr)
	p.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	<-running
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err != context.Canceled {
		t.Fatal(err)
	}
	s.Close()
	<-cancelled
	p.closed()
}

// TestBadChunkedBodyCloses checks that a body whose framing breaks gives
// the handler an error and ends the connection.
func TestBadChunkedBodyCloses(t *testing.T) {
	got := make(chan error, 1)
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- err
		w.WriteHeader(400)
	}))
	p := dial(t, addr)
	p.send("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
	if err := <-got; err != errChunkMalformed {
		t.Fatal(err)
	}
	if resp, _ := p.answer("POST"); resp.StatusCode != 400 || !resp.Close {
		t.Fatal(resp.StatusCode, resp.Close)
	}
	p.closed()
}

// waitFor waits until cond holds, failing the test after testWait.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(time.Millisecond)
	}
}
