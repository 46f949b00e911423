package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/proxy/route"
)

// MaxEngines bounds the engines of one role.
const MaxEngines = 256

// maxErrorBytes bounds the part of an engine's error body the proxy reads
// and passes on.
const maxErrorBytes = 64 << 10

// Config configures a Proxy. Start from DefaultConfig.
type Config struct {
	// Prefill and Decode are the engines' base URLs (http://host:port),
	// as ParseEngineURL accepts them. At least one of each.
	Prefill []string
	Decode  []string
	// Route is the routing policy of both roles.
	Route route.Config

	// MaxRequestBytes bounds a client's body (413 over it).
	MaxRequestBytes int64
	// MaxPrefillResponseBytes bounds P's answer (it carries
	// remote_block_ids: a few bytes per 16 prompt tokens).
	MaxPrefillResponseBytes int64
	// MaxResponseBytes bounds a non-streamed decode answer.
	MaxResponseBytes int64
	// MaxEventBytes bounds one line of a streamed decode answer.
	MaxEventBytes int
	// MaxConcurrentRequests bounds the generation requests in flight;
	// one more is answered 429 at once.
	MaxConcurrentRequests int

	// MaxPrefillAttempts bounds the prefill engines tried for one
	// request. Only an engine that could not be connected to (so never
	// saw the request) is followed by another.
	MaxPrefillAttempts int
	// MaxDecodeAttempts bounds the decode engines tried for one request
	// with the same kv_transfer_params: an engine that cannot be
	// reached, answers 429 or 5xx, or fails before its first byte of
	// answer is followed by another.
	MaxDecodeAttempts int

	// DialTimeout bounds connecting to an engine.
	DialTimeout time.Duration
	// PrefillTimeout bounds the prefill leg (queueing and prefill); 504
	// past it.
	PrefillTimeout time.Duration
	// DecodeTimeout bounds the decode leg, streaming included.
	DecodeTimeout time.Duration
	// AbortTimeout bounds each abort call to an engine.
	AbortTimeout time.Duration
	// DownFor is how long an engine that could not be reached is passed
	// over by the router (while another is up).
	DownFor time.Duration
	// ScrapeInterval is the period of /metrics scrapes that feed the
	// least-loaded policy and notice engines that are down; 0 disables
	// scraping (RunScraper returns at once).
	ScrapeInterval time.Duration

	// APIKeys, when enabled, are required of the proxy's clients as
	// "Authorization: Bearer <key>" on every path under /v1 (401 in
	// OpenAI's shape otherwise), as an engine's. /health and /metrics stay
	// open.
	APIKeys openai.APIKeys
	// EngineAPIKey, when set, is the key the proxy presents to engines
	// (their --api-key) on both legs, /v1/models and aborts, in place of
	// the client's Authorization header. Empty: the client's header is
	// forwarded as it came, so a client's key reaches the engines and the
	// proxy can still abort its requests.
	EngineAPIKey string

	// TLS, when set, makes Serve's listener TLS (clients speak HTTPS).
	TLS *tls.Config
	// EngineTLS is the client configuration of the connections to
	// https engines (legs, aborts, scrapes, /v1/models): the CAs they are
	// verified against (nil RootCAs: the system's) and a client
	// certificate for engines that ask for one. Nil: the defaults. Not
	// used with Transport set.
	EngineTLS *tls.Config
	// EngineRootCAs, when set, gives the CAs that each new connection to an
	// https engine is verified against, in place of EngineTLS's RootCAs: a
	// bundle reloaded from its file when it changes (tlsfiles.Roots), so
	// engines whose CA was rotated are trusted without a restart. Not used
	// with Transport set.
	EngineRootCAs func() *x509.CertPool

	// Logger receives the proxy's logs; nil discards them.
	Logger *slog.Logger
	// Transport makes the requests to engines; nil uses a transport
	// built from DialTimeout with a connection pool per engine.
	Transport http.RoundTripper
}

// DefaultConfig returns the defaults, with no engines.
func DefaultConfig() Config {
	return Config{
		Route:                   route.DefaultConfig(),
		MaxRequestBytes:         8 << 20,
		MaxPrefillResponseBytes: 16 << 20,
		MaxResponseBytes:        64 << 20,
		MaxEventBytes:           1 << 20,
		MaxConcurrentRequests:   4096,
		MaxPrefillAttempts:      3,
		MaxDecodeAttempts:       3,
		DialTimeout:             3 * time.Second,
		PrefillTimeout:          5 * time.Minute,
		DecodeTimeout:           30 * time.Minute,
		AbortTimeout:            3 * time.Second,
		DownFor:                 2 * time.Second,
		ScrapeInterval:          250 * time.Millisecond,
	}
}

// ErrConfig is wrapped by every error of Config.Validate and New.
var ErrConfig = errors.New("proxy: invalid config")

// Validate checks c; the error names the field and what to do.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	for _, role := range []struct {
		name string
		urls []string
	}{{"Prefill", c.Prefill}, {"Decode", c.Decode}} {
		if len(role.urls) == 0 {
			return bad("%s: at least one engine URL is needed", role.name)
		}
		if len(role.urls) > MaxEngines {
			return bad("%s: %d engines, at most %d", role.name, len(role.urls), MaxEngines)
		}
		seen := map[string]bool{}
		for i, u := range role.urls {
			base, err := ParseEngineURL(u)
			if err != nil {
				return bad("%s[%d]: %v", role.name, i, err)
			}
			if seen[base] {
				return bad("%s[%d]: %s is listed twice", role.name, i, base)
			}
			seen[base] = true
		}
	}
	if err := c.Route.Validate(); err != nil {
		return bad("Route: %v", err)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxRequestBytes", c.MaxRequestBytes}, {"MaxPrefillResponseBytes", c.MaxPrefillResponseBytes},
		{"MaxResponseBytes", c.MaxResponseBytes}, {"MaxEventBytes", int64(c.MaxEventBytes)},
		{"MaxConcurrentRequests", int64(c.MaxConcurrentRequests)},
		{"MaxPrefillAttempts", int64(c.MaxPrefillAttempts)}, {"MaxDecodeAttempts", int64(c.MaxDecodeAttempts)},
		{"DialTimeout", int64(c.DialTimeout)}, {"PrefillTimeout", int64(c.PrefillTimeout)},
		{"DecodeTimeout", int64(c.DecodeTimeout)}, {"AbortTimeout", int64(c.AbortTimeout)},
		{"DownFor", int64(c.DownFor)},
	} {
		if f.v <= 0 {
			return bad("%s must be positive, got %d", f.name, f.v)
		}
	}
	if c.MaxPrefillAttempts > MaxEngines || c.MaxDecodeAttempts > MaxEngines {
		return bad("MaxPrefillAttempts and MaxDecodeAttempts must be at most %d", MaxEngines)
	}
	if c.ScrapeInterval < 0 {
		return bad("ScrapeInterval must not be negative, got %v", c.ScrapeInterval)
	}
	return nil
}

// ParseEngineURL checks an engine's base URL and returns it normalized as
// scheme://host:port (a missing port is the scheme's default). It must be
// http or https with a host and nothing after the authority but an
// optional "/".
func ParseEngineURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: want http://host:port (scheme http or https)", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("%q: no host", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: want only scheme://host:port, without a path, query or user", s)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	hp, err := route.NormalizeHostPort(joinHostPort(u.Hostname(), port))
	if err != nil {
		return "", fmt.Errorf("%q: %v", s, err)
	}
	return u.Scheme + "://" + hp, nil
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}
