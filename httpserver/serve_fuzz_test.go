package httpserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzServe sends arbitrary bytes to a live server as one client that
// then half-closes its connection: the server must answer with well-formed
// HTTP/1.1 answers and close, within a bound, whatever the bytes (no
// panic, no hang, no answer the client cannot parse).
func FuzzServe(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s))
		f.Add([]byte(s + s))
	}
	f.Add([]byte("GET /stream HTTP/1.1\r\nHost: h\r\n\r\nGET /stream HTTP/1.0\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<10))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodHead {
			return // an answer without a length: the client reads it as one without a body to the end
		}
		if r.URL.Path == "/stream" {
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
		}
		w.Write(b)
	}), ReadHeaderTimeout: time.Second, IdleTimeout: time.Second, MaxHeaderBytes: 1 << 10}
	go s.Serve(ln)
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(testWait))
		go func() {
			nc.Write(data)
			nc.(*net.TCPConn).CloseWrite()
		}()
		br := bufio.NewReader(nc)
		for {
			if _, err := br.Peek(1); err == io.EOF {
				return // closed after its answers
			} else if err != nil {
				t.Fatalf("%v after the answers to %q", err, data)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("unreadable answer (%v) to %q", err, data)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("answer's body: %v, to %q", err, data)
			}
			resp.Body.Close()
		}
	})
}
