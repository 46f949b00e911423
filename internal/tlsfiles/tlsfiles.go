// Package tlsfiles (EDGE) builds the TLS configurations of kvlease's HTTP
// listeners and clients from PEM files, as vLLM's --ssl-keyfile,
// --ssl-certfile, --ssl-ca-certs and --ssl-cert-reqs name them, and
// reloads them when the files change: on a handshake, at most once a
// second, the files' sizes and modification times are compared with
// those loaded (no goroutine watches them). A reload that fails (a
// certificate that does not match its key while both are being
// replaced) keeps the configuration in use, logs a warning and is tried
// again at the next check. It also writes a throwaway CA and certificate
// for a local TLS cluster (WriteLocal).
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// checkEvery is how often a handshake may stat the files for a change
// (tests set it to 0).
var checkEvery = time.Second

// ParseCertReqs reads vLLM's --ssl-cert-reqs (Python's ssl.CERT_NONE,
// CERT_OPTIONAL, CERT_REQUIRED): 0 asks no client certificate, 1 verifies
// one if the client sends it, 2 requires one.
func ParseCertReqs(n int) (tls.ClientAuthType, error) {
	switch n {
	case 0:
		return tls.NoClientCert, nil
	case 1:
		return tls.VerifyClientCertIfGiven, nil
	case 2:
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("%d: want 0 (no client certificate), 1 (verified if given) or 2 (required)", n)
}

// ServerFiles are a listener's files.
type ServerFiles struct {
	CertFile, KeyFile string // PEM: the certificate chain and its private key
	// CAFile holds the CAs that client certificates are verified
	// against; required when ClientAuth asks for one.
	CAFile     string
	ClientAuth tls.ClientAuthType
}

// stamp identifies a file's content as stat sees it.
type stamp struct {
	size int64
	mod  time.Time
}

func stat(files []string) ([]stamp, error) {
	out := make([]stamp, len(files))
	for i, f := range files {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		out[i] = stamp{fi.Size(), fi.ModTime()}
	}
	return out, nil
}

func sameStamps(a, b []stamp) bool {
	for i := range a {
		if a[i].size != b[i].size || !a[i].mod.Equal(b[i].mod) {
			return false
		}
	}
	return true
}

// reloader holds a value loaded from files and loads it again when they
// change, checked at most every checkEvery when get is called.
type reloader[T any] struct {
	what   string
	files  []string
	load   func() (T, error)
	log    *slog.Logger
	now    func() time.Time
	every  time.Duration // checkEvery when made
	mu     sync.Mutex
	cur    T
	stamps []stamp
	next   time.Time // the next check
}

func newReloader[T any](what string, files []string, log *slog.Logger, load func() (T, error)) (*reloader[T], error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &reloader[T]{what: what, files: files, load: load, log: log, now: time.Now, every: checkEvery}
	stamps, err := stat(files)
	if err != nil {
		return nil, err
	}
	if r.cur, err = load(); err != nil {
		return nil, err
	}
	r.stamps, r.next = stamps, r.now().Add(r.every)
	return r, nil
}

func (r *reloader[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Before(r.next) {
		return r.cur
	}
	r.next = now.Add(r.every)
	stamps, err := stat(r.files)
	if err != nil {
		r.log.Warn("tls: cannot check the files for a change; keeping those loaded", "what", r.what, "err", err)
		return r.cur
	}
	if sameStamps(stamps, r.stamps) {
		return r.cur
	}
	v, err := r.load()
	if err != nil {
		r.log.Warn("tls: files changed but do not load; keeping those loaded", "what", r.what, "err", err)
		return r.cur
	}
	r.cur, r.stamps = v, stamps
	r.log.Info("tls: reloaded", "what", r.what, "files", r.files)
	return r.cur
}

// Server returns the configuration of a listener over f: TLS 1.2 or
// later, HTTP/1.1, the client certificates f asks for, reloaded when the
// files change. log gets the reloads (nil: none).
func Server(f ServerFiles, log *slog.Logger) (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("a certificate file and a key file are both needed (--ssl-certfile, --ssl-keyfile)")
	}
	if f.ClientAuth != tls.NoClientCert && f.CAFile == "" {
		return nil, errors.New("client certificates are asked for (--ssl-cert-reqs) but no CA verifies them (--ssl-ca-certs)")
	}
	r, err := newReloader("server", []string{f.CertFile, f.KeyFile, f.CAFile}, log, func() (*tls.Config, error) {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
			NextProtos: []string{"http/1.1"}, ClientAuth: f.ClientAuth}
		if f.CAFile != "" {
			if cfg.ClientCAs, err = loadPool(f.CAFile); err != nil {
				return nil, err
			}
		}
		return cfg, nil
	})
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.get(), nil
		},
	}, nil
}

// ClientFiles are a client's files.
type ClientFiles struct {
	// CAFile holds the CAs that servers are verified against; "" uses
	// the system's.
	CAFile string
	// CertFile and KeyFile are a client certificate, presented when a
	// server asks for one (both or neither); reloaded when they change.
	CertFile, KeyFile string
}

// Client returns the configuration of a client over f.
func Client(f ClientFiles, log *slog.Logger) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pool, err := loadPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.CertFile == "" && f.KeyFile == "":
	case f.CertFile == "" || f.KeyFile == "":
		return nil, errors.New("a client certificate needs both its certificate file and its key file")
	default:
		r, err := newReloader("client certificate", []string{f.CertFile, f.KeyFile}, log, func() (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
			return &cert, err
		})
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.get(), nil }
	}
	return cfg, nil
}

// Roots returns the CA bundle in file as it is at each call, read again
// when the file changes (checked at most every second; a bundle that does
// not load is logged and the last one kept): for a client that verifies
// each new connection against the CAs of the moment, so a rotated CA is
// trusted without a restart. log gets the reloads (nil: none).
func Roots(file string, log *slog.Logger) (func() *x509.CertPool, error) {
	r, err := newReloader("CA certificates", []string{file}, log, func() (*x509.CertPool, error) { return loadPool(file) })
	if err != nil {
		return nil, err
	}
	return r.get, nil
}

// loadPool reads a PEM bundle of CA certificates.
func loadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return pool, nil
}
