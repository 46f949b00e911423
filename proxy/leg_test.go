package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLegClient drives the legs' client against a server that answers
// from a script, one answer per request read: informational answers are
// skipped, chunked bodies read, a connection is reused only when the
// engine keeps it and the body was read to its end, and a header value
// a request line cannot carry is refused before anything is sent.
func TestLegClient(t *testing.T) {
	answers := []string{
		"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nRetry-After: 1\r\n\r\nbusy",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns, served atomic.Int64
	heads := make(chan string, len(answers))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					heads <- req.Header.Get("X-Request-Id") + " " + req.Header.Get("Traceparent") + " " + req.Header.Get("Authorization")
					i := served.Add(1) - 1
					if int(i) >= len(answers) {
						return
					}
					c.Write([]byte(answers[i]))
				}
			}()
		}
	}()
	lcl := &legClient{dial: (&net.Dialer{}).DialContext, maxIdle: 4, idleTimeout: time.Minute}
	e := &engine{hostPort: ln.Addr().String()}
	client := http.Header{"Traceparent": {"00-abc-def-01"}, "Authorization": {"Bearer k"}}
	get := func(auth []string) (*http.Response, string) {
		t.Helper()
		resp, err := lcl.roundTrip(context.Background(), time.Time{}, e, &legRequest{path: "/v1/completions", id: "r1", auth: auth, client: client, body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, string(b)
	}
	if resp, b := get(nil); resp.StatusCode != 200 || b != "abcde" {
		t.Errorf("chunked after 103: %d %q", resp.StatusCode, b)
	}
	if h := <-heads; h != "r1 00-abc-def-01 Bearer k" {
		t.Errorf("headers the engine saw: %q", h)
	}
	if _, b := get([]string{"Bearer engine"}); b != "ok" {
		t.Errorf("second answer %q", b)
	}
	if h := <-heads; h != "r1 00-abc-def-01 Bearer engine" {
		t.Errorf("headers with the engine's key: %q", h)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for two answers on a kept-alive one", n)
	}
	if resp, b := get(nil); resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || b != "busy" {
		t.Errorf("after Connection: close: %d %q", resp.StatusCode, b)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections: Connection: close should have made a new one", n)
	}
	if _, b := get(nil); b != "hello" {
		t.Errorf("fourth answer %q", b)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections: the third answer's connection should have been reused", n)
	}
	bad := http.Header{"Traceparent": {"x\r\nEvil: 1"}}
	if _, err := lcl.roundTrip(context.Background(), time.Time{}, e, &legRequest{path: "/v1/completions", id: "r2", client: bad}); !errors.Is(err, errBadHeaderValue) {
		t.Errorf("a header value with CR LF: %v", err)
	}
	if n := served.Load(); n != 4 {
		t.Errorf("the engine read %d requests, want 4 (the bad one must not be sent)", n)
	}
	if !strings.Contains(string(mustHead(t, "/p", "id")), "POST /p HTTP/1.1\r\n") {
		t.Error("request line")
	}
}

func mustHead(t *testing.T, path, id string) []byte {
	t.Helper()
	b, err := appendRequestHead(nil, "h:1", &legRequest{path: path, id: id})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
