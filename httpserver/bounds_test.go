package httpserver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// bodyReader answers 200 with the body's length once it has read it, or
// 400 naming the read's error, and reports that error on errs.
func bodyReader(errs chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if errs != nil && r.ContentLength > 1000 {
			errs <- err
		}
		if err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d", n)
	})
}

// TestSlowBodyClosed is the slow-body attack of issue 28: connections that
// send a head declaring 8 MB, then a byte now and then. Each loses its
// connection at the body deadline (the handler's read fails with a
// timeout), while a normal request is still answered; no connection stays.
func TestSlowBodyClosed(t *testing.T) {
	const conns = 40
	errs := make(chan error, conns)
	s, addr := start(t, bodyReader(errs), func(s *Server) {
		s.BodyReadTimeout, s.MinBodyRate = 200*time.Millisecond, 64<<10
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	peers := make([]*peer, conns)
	for i := range peers {
		p := dial(t, addr)
		peers[i] = p
		p.send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 8000000\r\n\r\nx")
		wg.Go(func() { // a byte every 20 ms, until the server closes
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := p.nc.Write([]byte{'x'}); err != nil {
						return
					}
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	// A normal request meanwhile.
	p := dial(t, addr)
	p.send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello")
	if resp, body := p.answer("POST"); resp.StatusCode != 200 || body != "5" {
		t.Fatalf("normal request: %d %q", resp.StatusCode, body)
	}
	for range conns {
		if err := <-errs; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("slow body read: %v, want a timeout", err)
		}
	}
	for i, p := range peers {
		// The server closes (after a 400 the client may or may not get
		// before the reset its unread bytes cause).
		if _, err := io.Copy(io.Discard, p.nc); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("peer %d: connection still open", i)
		}
	}
	p.nc.Close()
	waitFor(t, func() bool { return s.Stats().Open == 0 })
}

// TestBodyAtRateNotCut checks that the body deadline follows progress: a
// body that keeps coming faster than MinBodyRate is read whole although it
// takes longer than BodyReadTimeout; without the rate (a bound on the
// whole body) the same body is cut.
func TestBodyAtRateNotCut(t *testing.T) {
	const pieces, piece = 10, 1 << 10
	for _, rate := range []int64{1 << 10, 0} {
		errs := make(chan error, 1)
		_, addr := start(t, bodyReader(errs), func(s *Server) {
			s.BodyReadTimeout, s.MinBodyRate = 100*time.Millisecond, rate
		})
		p := dial(t, addr)
		p.send(fmt.Sprintf("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", pieces*piece))
		go func() {
			for range pieces {
				if _, err := p.nc.Write([]byte(strings.Repeat("y", piece))); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // 50 KiB/s, 50 times the rate; 200 ms in all
			}
		}()
		err := <-errs
		if rate > 0 && err != nil {
			t.Fatalf("rate %d: %v, want the body read whole", rate, err)
		}
		if rate == 0 && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("no rate: %v, want a timeout at BodyReadTimeout", err)
		}
	}
}

// TestWriteTimeout checks that a client that does not read its answer
// loses the connection: the handler's write fails and the connection
// closes.
func TestWriteTimeout(t *testing.T) {
	werr := make(chan error, 1)
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 1 << 10 { // 1 GiB: more than any socket buffer
			if _, err := w.Write(chunk); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}), func(s *Server) { s.WriteTimeout = 200 * time.Millisecond })
	p := dial(t, addr)
	p.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if err := <-werr; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write: %v, want a timeout", err)
	}
	waitFor(t, func() bool { return s.Stats().Open == 0 })
}

// TestMaxConns checks that a connection beyond MaxConns is closed at once
// and counted, and that a place freed is taken again.
func TestMaxConns(t *testing.T) {
	s, addr := start(t, echo, func(s *Server) { s.MaxConns = 3 })
	var open []*peer
	for range 3 {
		p := dial(t, addr)
		p.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		p.answer("GET")
		open = append(open, p)
	}
	extra := dial(t, addr)
	extra.closed()
	if st := s.Stats(); st.Refused != 1 || st.Open != 3 {
		t.Fatalf("%+v, want 3 open and 1 refused", st)
	}
	open[0].nc.Close()
	waitFor(t, func() bool { return s.Stats().Open == 2 })
	p := dial(t, addr)
	p.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, _ := p.answer("GET"); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
}

// TestMaxPendingConnsPerSource checks that a source's connections that
// have not completed a request are bounded, and that one that completes a
// request no longer counts.
func TestMaxPendingConnsPerSource(t *testing.T) {
	s, addr := start(t, echo, func(s *Server) { s.MaxPendingConnsPerSource = 2 })
	a, b := dial(t, addr), dial(t, addr)
	waitFor(t, func() bool { return s.Stats().Pending == 2 })
	dial(t, addr).closed()
	if st := s.Stats(); st.Refused != 1 {
		t.Fatalf("%+v, want 1 refused", st)
	}
	a.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	a.answer("GET")
	waitFor(t, func() bool { return s.Stats().Pending == 1 })
	c := dial(t, addr)
	c.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, _ := c.answer("GET"); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	waitFor(t, func() bool { st := s.Stats(); return st.Open == 3 && st.Pending == 1 }) // b
	b.nc.Close()
	waitFor(t, func() bool { st := s.Stats(); return st.Open == 2 && st.Pending == 0 })
}
