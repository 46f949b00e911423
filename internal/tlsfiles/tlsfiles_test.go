package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func local(t *testing.T) Local {
	t.Helper()
	l, err := WriteLocal(t.TempDir(), "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func pool(t *testing.T, cas ...string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, f := range cas {
		b, err := os.ReadFile(f)
		if err != nil || !p.AppendCertsFromPEM(b) {
			t.Fatal(f, err)
		}
	}
	return p
}

// serve accepts TLS connections with cfg and completes their handshakes
// until the test ends.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.(*tls.Conn).Handshake()
				c.Read(make([]byte, 1)) // until the client closes
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake dials addr with cfg and returns the server's leaf
// certificate, or the handshake's error.
func handshake(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// With TLS 1.3 a refused client certificate shows at the first read.
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func leafOf(t *testing.T, certFile string) *x509.Certificate {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, certFile[:len(certFile)-len("cert.pem")]+"key.pem")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// TestServerReloads checks that a listener's certificate is replaced when
// its files change, and kept while the new files do not load.
func TestServerReloads(t *testing.T) {
	defer func(d time.Duration) { checkEvery = d }(checkEvery)
	checkEvery = 0
	a, b := local(t), local(t)
	leafA, leafB := leafOf(t, a.CertFile), leafOf(t, b.CertFile)
	cfg, err := Server(ServerFiles{CertFile: a.CertFile, KeyFile: a.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	client := &tls.Config{RootCAs: pool(t, a.CAFile, b.CAFile), ServerName: "127.0.0.1"}
	if got, err := handshake(addr, client); err != nil || !got.Equal(leafA) {
		t.Fatalf("first: %v", err)
	}
	// Half replaced (b's certificate, a's key): the loaded pair stays.
	copyFile(t, b.CertFile, a.CertFile)
	if got, err := handshake(addr, client); err != nil || !got.Equal(leafA) {
		t.Fatalf("half replaced: %v, want a's certificate kept", err)
	}
	copyFile(t, b.KeyFile, a.KeyFile)
	if got, err := handshake(addr, client); err != nil || !got.Equal(leafB) {
		t.Fatalf("replaced: %v, want b's certificate", err)
	}
}

// TestClientCertificates checks --ssl-cert-reqs 2 (a client without a
// certificate, or with one of another CA, is refused) and 1 (a client
// without one is served), and that a client without the CA refuses the
// server.
func TestClientCertificates(t *testing.T) {
	a, other := local(t), local(t)
	withCert, err := Client(ClientFiles(a), nil)
	if err != nil {
		t.Fatal(err)
	}
	noCert, err := Client(ClientFiles{CAFile: a.CAFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := Client(ClientFiles{CAFile: a.CAFile, CertFile: other.CertFile, KeyFile: other.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	noCA, err := Client(ClientFiles{CAFile: other.CAFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*tls.Config{withCert, noCert, foreign, noCA} {
		c.ServerName = "127.0.0.1"
	}
	for _, tc := range []struct {
		reqs int
		cfg  *tls.Config
		ok   bool
	}{{2, withCert, true}, {2, noCert, false}, {2, foreign, false}, {1, noCert, true}, {1, foreign, false},
		{0, noCert, true}, {0, noCA, false}} {
		auth, err := ParseCertReqs(tc.reqs)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Server(ServerFiles{CertFile: a.CertFile, KeyFile: a.KeyFile, CAFile: a.CAFile, ClientAuth: auth}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := handshake(serve(t, cfg), tc.cfg); (err == nil) != tc.ok {
			t.Errorf("--ssl-cert-reqs %d, client %p: err %v, want ok=%v", tc.reqs, tc.cfg, err, tc.ok)
		}
	}
}

func TestRefusedFiles(t *testing.T) {
	a := local(t)
	if _, err := ParseCertReqs(3); err == nil {
		t.Error("--ssl-cert-reqs 3 accepted")
	}
	for _, f := range []ServerFiles{{CertFile: a.CertFile}, {CertFile: a.CertFile, KeyFile: a.KeyFile, ClientAuth: tls.RequireAndVerifyClientCert},
		{CertFile: a.CertFile, KeyFile: a.CAFile}, {CertFile: a.CertFile, KeyFile: a.KeyFile, CAFile: a.KeyFile, ClientAuth: tls.RequireAndVerifyClientCert}} {
		if _, err := Server(f, nil); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
	if _, err := Client(ClientFiles{CertFile: a.CertFile}, nil); err == nil {
		t.Error("a client certificate without its key accepted")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A modification time of its own, whatever the file system's
	// granularity.
	later := time.Now().Add(time.Duration(len(b)) * time.Millisecond)
	os.Chtimes(to, later, later)
}

// TestRootsReload checks that Roots gives the bundle in the file as it is
// now, and keeps the last one while the file does not load.
func TestRootsReload(t *testing.T) {
	defer func(d time.Duration) { checkEvery = d }(checkEvery)
	checkEvery = 0
	a, b := local(t), local(t)
	file := filepath.Join(t.TempDir(), "ca.pem")
	copyFile(t, a.CAFile, file)
	roots, err := Roots(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	verifies := func(certFile string) bool {
		_, err := leafOf(t, certFile).Verify(x509.VerifyOptions{Roots: roots(), DNSName: "127.0.0.1"})
		return err == nil
	}
	if !verifies(a.CertFile) || verifies(b.CertFile) {
		t.Fatal("a's bundle: want a's certificate verified and b's refused")
	}
	if err := os.WriteFile(file, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !verifies(a.CertFile) {
		t.Fatal("a bundle that does not load replaced the one in use")
	}
	copyFile(t, b.CAFile, file)
	if verifies(a.CertFile) || !verifies(b.CertFile) {
		t.Fatal("b's bundle: want b's certificate verified and a's refused")
	}
	if _, err := Roots(filepath.Join(t.TempDir(), "none.pem"), nil); err == nil {
		t.Error("a missing bundle accepted")
	}
}
