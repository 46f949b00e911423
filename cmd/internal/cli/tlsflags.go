package cli

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/kvlease/kvlease/internal/tlsfiles"
)

// tlsFlags are the HTTPS flags of a listener, with vLLM's names.
type tlsFlags struct {
	keyFile, certFile, caFile string
	certReqs                  int
}

func addTLSFlags(fs *flag.FlagSet) *tlsFlags {
	t := &tlsFlags{}
	fs.StringVar(&t.certFile, "ssl-certfile", "", "serve HTTPS with this PEM certificate (chain); reloaded when it changes (as vLLM's)")
	fs.StringVar(&t.keyFile, "ssl-keyfile", "", "the PEM private key of --ssl-certfile")
	fs.StringVar(&t.caFile, "ssl-ca-certs", "", "PEM CA certificates that client certificates are verified against (--ssl-cert-reqs 1 or 2)")
	fs.IntVar(&t.certReqs, "ssl-cert-reqs", 0, "client certificates: 0 none, 1 verified if sent, 2 required (mutual TLS), as Python's ssl.CERT_*")
	return t
}

// check checks the flags' combination (not the files) and returns the
// client authentication they ask for.
func (t *tlsFlags) check() (tls.ClientAuthType, error) {
	auth, err := tlsfiles.ParseCertReqs(t.certReqs)
	if err != nil {
		return 0, fmt.Errorf("--ssl-cert-reqs %v", err)
	}
	switch {
	case t.certFile == "" && t.keyFile == "" && (t.caFile != "" || t.certReqs != 0):
		return 0, errors.New("--ssl-ca-certs and --ssl-cert-reqs need HTTPS: give --ssl-certfile and --ssl-keyfile")
	case (t.certFile == "") != (t.keyFile == ""):
		return 0, errors.New("--ssl-certfile and --ssl-keyfile: give both")
	case auth != tls.NoClientCert && t.caFile == "":
		return 0, fmt.Errorf("--ssl-cert-reqs %d: give --ssl-ca-certs, the CAs client certificates are verified against", t.certReqs)
	}
	return auth, nil
}

// config checks the flags and returns the listener's TLS configuration,
// nil without --ssl-certfile.
func (t *tlsFlags) config(log *slog.Logger) (*tls.Config, error) {
	auth, err := t.check()
	if err != nil || t.certFile == "" {
		return nil, err
	}
	cfg, err := tlsfiles.Server(tlsfiles.ServerFiles{CertFile: t.certFile, KeyFile: t.keyFile, CAFile: t.caFile, ClientAuth: auth}, log)
	if err != nil {
		return nil, fmt.Errorf("--ssl-certfile/--ssl-keyfile/--ssl-ca-certs: %v", err)
	}
	return cfg, nil
}

// scheme is the URL scheme of a listener with cfg.
func scheme(cfg *tls.Config) string {
	if cfg != nil {
		return "https"
	}
	return "http"
}
