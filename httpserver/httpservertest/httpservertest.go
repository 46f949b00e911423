// Package httpservertest serves a handler through httpserver.Server on a
// loopback port for tests, as net/http/httptest.NewServer does through
// net/http's:
// tests of kvlease's handlers then run on the server `kvlease serve` and
// `kvlease proxy` run.
package httpservertest

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/kvlease/kvlease/httpserver"
)

// Server is a handler served on a loopback port.
type Server struct {
	URL    string // http://127.0.0.1:port
	Server *httpserver.Server
	served chan error
}

// NewServer serves h on a new loopback port; Close stops it.
func NewServer(h http.Handler) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("httpservertest: listening on a port: %v", err))
	}
	s := &Server{URL: "http://" + ln.Addr().String(), Server: &httpserver.Server{Handler: h}, served: make(chan error, 1)}
	go func() { s.served <- s.Server.Serve(ln) }()
	return s
}

// Close closes the listener and every connection (which cancels the
// requests running) and returns once every handler has returned, as
// httptest.Server.Close.
func (s *Server) Close() {
	s.Server.Close()
	s.Server.Shutdown(context.Background())
	<-s.served
}
