package httpserver

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/tlsfiles"
)

// BenchmarkServe measures a keep-alive request with a small JSON body and
// answer over loopback, served by httpserver and by net/http's Server, with the
// same raw client (32 connections, each sending its next request when it
// has read the answer). cpu-µs/op is the CPU time of the whole process
// (client included) per request; the difference between the two is the
// servers'. httpserver+bounds is httpserver with the body, write and connection bounds
// kvlease's servers set (SetBounds); httpserver+tls serves over TLS 1.3 (the
// handshake once per connection, then each request and answer encrypted).
func BenchmarkServe(b *testing.B) {
	answer := bytes.Repeat([]byte("a"), 300)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	})
	body := `{"prompt":"0123456789abcdef","max_tokens":16}`
	req := []byte("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	for _, name := range []string{"httpserver", "httpserver+bounds", "httpserver+tls", "net-http"} {
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var stop func()
			var clientTLS *tls.Config // httpserver+tls: the client's
			if name != "net-http" {
				s := &Server{Handler: h}
				if name == "httpserver+bounds" { // as kvlease serve and proxy run it
					SetBounds(s)
				}
				if name == "httpserver+tls" {
					s.TLSConfig, clientTLS = benchTLS(b)
				}
				go s.Serve(ln)
				stop = func() { s.Close() }
			} else {
				s := &http.Server{Handler: h}
				go s.Serve(ln)
				stop = func() { s.Close() }
			}
			defer stop()
			b.SetParallelism(16) // × GOMAXPROCS(2) = 32 connections
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				nc, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Error(err)
					return
				}
				if clientTLS != nil {
					nc = tls.Client(nc, clientTLS)
				}
				defer nc.Close()
				br := bufio.NewReader(nc)
				for pb.Next() {
					if _, err := nc.Write(req); err != nil {
						b.Error(err)
						return
					}
					if err := readAnswer(br); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// readAnswer reads one answer with a Content-Length, without allocating.
func readAnswer(br *bufio.Reader) error {
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if n < 0 {
		return io.ErrUnexpectedEOF
	}
	_, err := br.Discard(n)
	return err
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchTLS is a server configuration with a throwaway certificate and a
// client configuration that trusts it.
func benchTLS(b *testing.B) (server, client *tls.Config) {
	l, err := tlsfiles.WriteLocal(b.TempDir(), "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	if server, err = tlsfiles.Server(tlsfiles.ServerFiles{CertFile: l.CertFile, KeyFile: l.KeyFile}, nil); err != nil {
		b.Fatal(err)
	}
	if client, err = tlsfiles.Client(tlsfiles.ClientFiles{CAFile: l.CAFile}, nil); err != nil {
		b.Fatal(err)
	}
	client.ServerName = "127.0.0.1"
	return server, client
}
