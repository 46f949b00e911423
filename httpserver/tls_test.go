package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/tlsfiles"
)

// startTLS serves h over TLS with a throwaway CA; it returns the server,
// its address and a client that trusts the CA.
func startTLS(t *testing.T, h http.Handler) (*Server, string, *http.Client) {
	t.Helper()
	l, err := tlsfiles.WriteLocal(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tlsfiles.Server(tlsfiles.ServerFiles{CertFile: l.CertFile, KeyFile: l.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ccfg, err := tlsfiles.Client(tlsfiles.ClientFiles{CAFile: l.CAFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, addr := start(t, h, func(s *Server) { s.TLSConfig = cfg })
	tr := &http.Transport{TLSClientConfig: ccfg}
	t.Cleanup(tr.CloseIdleConnections)
	return s, addr, &http.Client{Transport: tr, Timeout: testWait}
}

// TestTLS checks requests over TLS: the handler sees the connection's
// state, a body and keep-alive work, and a client that goes away mid
// request cancels its context as over plain TCP.
func TestTLS(t *testing.T) {
	running := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	_, addr, client := startTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			running <- struct{}{}
			select {
			case <-r.Context().Done():
				cancelled <- r.Context().Err()
			case <-time.After(testWait):
				cancelled <- errors.New("not cancelled")
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		if r.TLS == nil || !r.TLS.HandshakeComplete {
			http.Error(w, "no TLS state", 500)
			return
		}
		w.Write(append([]byte(tls.VersionName(r.TLS.Version)+" "), b...))
	}))
	for range 2 {
		resp, err := client.Post("https://"+addr+"/", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "TLS 1.3 hello" {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/wait", nil)
	go func() {
		<-running
		cancel() // closes the TLS connection
	}()
	client.Do(req)
	if err := <-cancelled; err != context.Canceled {
		t.Fatalf("handler's context: %v, want cancelled when the TLS client left", err)
	}
}

// TestPlainHTTPToTLSPort checks that a plain HTTP request to a TLS port
// gets a 400 that says so, and a client without the CA is refused.
func TestPlainHTTPToTLSPort(t *testing.T) {
	s, addr, _ := startTLS(t, echo)
	p := dial(t, addr)
	p.send("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, body := p.answer("GET")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "HTTPS") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if _, err := http.Get("https://" + addr + "/"); err == nil {
		t.Fatal("a client without the CA was served")
	}
	waitFor(t, func() bool { return s.Stats().Open == 0 })
}
