package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kvlease/kvlease/internal/tlsfiles"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/proxy"
	"github.com/kvlease/kvlease/proxy/route"
)

func init() {
	Register(Command{
		Name:    "proxy",
		Summary: "the P/D proxy: one OpenAI endpoint over prefill and decode engines",
		Run:     runProxy,
	})
}

// proxyFlags are the flags of kvlease proxy, parsed and checked.
type proxyFlags struct {
	addr  string
	drain time.Duration
	cfg   proxy.Config
	// cpuProfile is where to write a CPU profile of the proxy ("": none).
	cpuProfile string
}

func parseProxyFlags(args []string, stderr io.Writer) (proxyFlags, error) {
	fs := NewFlagSet("proxy", stderr)
	cfg := proxy.DefaultConfig()
	host := fs.String("host", "127.0.0.1", "address to listen on (0.0.0.0 for every interface)")
	port := fs.Int("port", 8080, "port to listen on")
	prefill := fs.String("prefill", "", "prefill engines: comma-separated base URLs (http://host:port,...)")
	decode := fs.String("decode", "", "decode engines: comma-separated base URLs (http://host:port,...)")
	policy := fs.String("policy", cfg.Route.Policy.String(), "engine choice: "+strings.Join(route.Policies, " or "))
	fs.Int64Var(&cfg.MaxRequestBytes, "max-body-bytes", cfg.MaxRequestBytes, "largest request body accepted (413 beyond)")
	fs.IntVar(&cfg.MaxConcurrentRequests, "max-concurrent", cfg.MaxConcurrentRequests, "requests in flight at most (429 beyond)")
	fs.IntVar(&cfg.MaxDecodeAttempts, "decode-attempts", cfg.MaxDecodeAttempts, "decode engines tried per request")
	fs.DurationVar(&cfg.PrefillTimeout, "prefill-timeout", cfg.PrefillTimeout, "limit on the prefill leg (504 beyond)")
	fs.DurationVar(&cfg.DecodeTimeout, "decode-timeout", cfg.DecodeTimeout, "limit on the decode leg, streaming included")
	fs.DurationVar(&cfg.ScrapeInterval, "scrape-interval", cfg.ScrapeInterval, "period of engine /metrics scrapes (0 disables)")
	var keys keyList
	fs.Var(&keys, "api-key", "require this key of clients as \"Authorization: Bearer KEY\" on /v1/* (repeat for several; "+
		"default "+APIKeyEnv+" or "+VLLMAPIKeyEnv+"); /health and /metrics stay open")
	fs.StringVar(&cfg.EngineAPIKey, "engine-api-key", "", "key presented to the engines (their --api-key) instead of forwarding the client's Authorization header")
	drain := fs.Duration("drain-timeout", 5*time.Second, "on SIGTERM, time given to requests in flight before they are aborted")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the proxy to this file, from start to shutdown")
	tlsf := addTLSFlags(fs)
	var engineTLS tlsfiles.ClientFiles
	fs.StringVar(&engineTLS.CAFile, "engine-ssl-ca-certs", "", "PEM CA certificates that https engines are verified against (default: the system's); reloaded when the file changes")
	fs.StringVar(&engineTLS.CertFile, "engine-ssl-certfile", "", "a PEM client certificate presented to https engines that ask for one (their --ssl-cert-reqs)")
	fs.StringVar(&engineTLS.KeyFile, "engine-ssl-keyfile", "", "the PEM private key of --engine-ssl-certfile")
	if err := ParseFlags(fs, args); err != nil {
		return proxyFlags{}, err
	}
	var err error
	tlsLog := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})) // certificate reloads
	if cfg.TLS, err = tlsf.config(tlsLog); err != nil {
		return proxyFlags{}, err
	}
	if cfg.EngineTLS, err = tlsfiles.Client(engineTLS, tlsLog); err != nil {
		return proxyFlags{}, fmt.Errorf("--engine-ssl-*: %v", err)
	}
	if engineTLS.CAFile != "" {
		if cfg.EngineRootCAs, err = tlsfiles.Roots(engineTLS.CAFile, tlsLog); err != nil {
			return proxyFlags{}, fmt.Errorf("--engine-ssl-ca-certs: %v", err)
		}
	}
	if cfg.Prefill, err = engineURLs("--prefill", *prefill); err != nil {
		return proxyFlags{}, err
	}
	if cfg.Decode, err = engineURLs("--decode", *decode); err != nil {
		return proxyFlags{}, err
	}
	if cfg.Route.Policy, err = route.ParsePolicy(*policy); err != nil {
		return proxyFlags{}, fmt.Errorf("--policy: %v", err)
	}
	if err := CheckPort("--port", *port); err != nil {
		return proxyFlags{}, err
	}
	for _, f := range []struct {
		name string
		ok   bool
		want string
	}{
		{"--max-body-bytes", cfg.MaxRequestBytes > 0, "a positive number of bytes"},
		{"--max-concurrent", cfg.MaxConcurrentRequests > 0, "a positive count"},
		{"--decode-attempts", cfg.MaxDecodeAttempts > 0 && cfg.MaxDecodeAttempts <= proxy.MaxEngines,
			fmt.Sprintf("1..%d", proxy.MaxEngines)},
		{"--prefill-timeout", cfg.PrefillTimeout > 0, "a positive duration such as 5m"},
		{"--decode-timeout", cfg.DecodeTimeout > 0, "a positive duration such as 30m"},
		{"--scrape-interval", cfg.ScrapeInterval >= 0, "a duration such as 250ms, or 0 to disable"},
		{"--drain-timeout", *drain >= 0, "a duration such as 5s"},
	} {
		if !f.ok {
			return proxyFlags{}, fmt.Errorf("%s: want %s", f.name, f.want)
		}
	}
	cfg.APIKeys = openai.NewAPIKeys(apiKeys(keys)...)
	if err := cfg.Validate(); err != nil {
		return proxyFlags{}, err
	}
	return proxyFlags{addr: net.JoinHostPort(*host, strconv.Itoa(*port)), drain: *drain, cfg: cfg, cpuProfile: *cpuProfile}, nil
}

// engineURLs parses a comma-separated list of engine base URLs.
func engineURLs(flagName, v string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		u, err := proxy.ParseEngineURL(part)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", flagName, err)
		}
		out = append(out, u)
	}
	switch {
	case len(out) == 0:
		return nil, fmt.Errorf("%s: give at least one engine URL, e.g. %s http://127.0.0.1:8100", flagName, flagName)
	case len(out) > proxy.MaxEngines:
		return nil, fmt.Errorf("%s: %d engines, at most %d", flagName, len(out), proxy.MaxEngines)
	}
	return out, nil
}

func CheckPort(flagName string, port int) error {
	if port < 0 || port > 65535 {
		return fmt.Errorf("%s %d: want 0..65535 (0 picks a free port)", flagName, port)
	}
	return nil
}

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseProxyFlags(args, stderr)
	if err != nil {
		return err
	}
	f.cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if f.cfg.EngineAPIKey != "" && !f.cfg.APIKeys.Enabled() {
		f.cfg.Logger.Warn("--engine-api-key is set but --api-key is not: anyone who reaches the proxy uses the engines with its key")
	}
	px, err := proxy.New(f.cfg)
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		stop, err := StartCPUProfile(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer stop()
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("--host/--port: %v", err)
	}
	fmt.Fprintf(stdout, "kvlease proxy on %s://%s (%s): prefill %s; decode %s\n", scheme(f.cfg.TLS), ln.Addr(), f.cfg.Route.Policy,
		strings.Join(f.cfg.Prefill, ", "), strings.Join(f.cfg.Decode, ", "))
	return px.Serve(ctx, ln, f.drain)
}
