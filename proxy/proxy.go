package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/httpserver"
	"github.com/kvlease/kvlease/internal/promtext"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/proxy/route"
)

// Roles of engines, as they appear in metrics and logs.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// AbortPath returns the engine endpoint that aborts a request by its
// X-Request-Id: POST /kvlease/v1/requests/{id}/abort. On a prefill engine
// it also revokes the request's lease.
func AbortPath(id string) string {
	return "/kvlease/v1/requests/" + escapePathSegment(id) + "/abort"
}

// Proxy is the P/D proxy: an http.Handler that sends each generation
// request to a prefill engine, then to a decode engine with the prefill's
// kv_transfer_params, and carries the answer (and any abort) through. Safe
// for concurrent use.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	client    *http.Client
	transport http.RoundTripper
	ownsTr    *http.Transport // the transport New built, closed by Close
	// legs sends the generation legs; nil when Config.Transport is set,
	// which then carries them.
	legs *legClient
	// engineAuth is the Authorization header of Config.EngineAPIKey, nil
	// without one; shared by every request (headers sent are not changed).
	engineAuth []string
	// viaName is the proxy's pseudonym in Via (via.go); via11 and via2
	// are its Via entry for a client's HTTP/1.1 and HTTP/2 requests.
	viaName     string
	via11, via2 []string

	start   time.Time
	prefill role
	decode  role
	engines []*engine // prefill then decode

	sem      chan struct{} // one slot per generation request in flight
	handlers sync.WaitGroup
	closing  atomic.Bool
	m        *proxyMetrics
	metricsH http.Handler

	mu sync.Mutex // guards the pickers and each engine's scraped load
}

type role struct {
	name      string
	engines   []*engine
	hostPorts []string
	picker    *route.Picker
	loads     []route.Load // scratch for Pick, guarded by Proxy.mu
}

type engine struct {
	role      string
	index     int
	base      string // scheme://host:port
	hostPort  string
	inflight  atomic.Int64
	downUntil atomic.Int64 // clock.Instant of the proxy's clock; 0 when up
	pool      connPool     // the legs' idle connections to it
	tls       *tls.Config  // an https engine's client configuration (ServerName set); nil for http

	// Guarded by Proxy.mu.
	scraped   bool
	scrapedAt clock.Instant
	load      engineLoad
}

// New returns a proxy over cfg's engines. It validates cfg (errors wrap
// ErrConfig) and starts nothing: serve it with Serve, or use it as an
// http.Handler and run RunScraper yourself.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Proxy{
		cfg:   cfg,
		log:   cfg.Logger,
		start: time.Now(),
		sem:   make(chan struct{}, cfg.MaxConcurrentRequests),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	name, err := newViaName()
	if err != nil {
		return nil, fmt.Errorf("proxy: choosing its Via pseudonym: %w", err)
	}
	p.viaName, p.via11, p.via2 = name, []string{"1.1 " + name}, []string{"2 " + name}
	if cfg.EngineAPIKey != "" {
		p.engineAuth = []string{"Bearer " + cfg.EngineAPIKey}
	}
	p.transport = cfg.Transport
	if p.transport == nil {
		p.ownsTr = &http.Transport{
			DialContext:         (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // events must pass as they come, not gzip-buffered
			TLSClientConfig:     cfg.EngineTLS.Clone(),
		}
		p.transport = p.ownsTr
		p.legs = &legClient{
			dial:        p.ownsTr.DialContext,
			maxIdle:     p.ownsTr.MaxIdleConnsPerHost,
			idleTimeout: p.ownsTr.IdleConnTimeout,
			roots:       cfg.EngineRootCAs,
		}
		if cfg.EngineRootCAs != nil {
			// Scrapes, aborts and /v1/models: each new connection's
			// handshake verifies the engine against the CAs of the moment.
			p.ownsTr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, _, _ := net.SplitHostPort(addr)
				nc, err := p.ownsTr.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				conf := engineTLS(cfg.EngineTLS, host)
				conf.RootCAs = cfg.EngineRootCAs()
				tc := tls.Client(nc, conf)
				if err := tc.HandshakeContext(ctx); err != nil {
					nc.Close()
					return nil, err
				}
				return tc, nil
			}
		}
	}
	p.client = &http.Client{
		Transport: p.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // an engine has no business redirecting a leg
		},
	}
	build := func(name string, urls []string) role {
		r := role{name: name, picker: route.NewPicker(cfg.Route), loads: make([]route.Load, len(urls))}
		for i, u := range urls {
			base, _ := ParseEngineURL(u) // validated above
			e := &engine{role: name, index: i, base: base, hostPort: base[strings.Index(base, "//")+2:]}
			if strings.HasPrefix(base, "https:") {
				host, _, _ := net.SplitHostPort(e.hostPort)
				e.tls = engineTLS(cfg.EngineTLS, host)
			}
			r.engines = append(r.engines, e)
			r.hostPorts = append(r.hostPorts, e.hostPort)
			p.engines = append(p.engines, e)
		}
		return r
	}
	p.prefill = build(RolePrefill, cfg.Prefill)
	p.decode = build(RoleDecode, cfg.Decode)
	p.m = newProxyMetrics(p.engines, p.now)
	p.metricsH = promhttp.HandlerFor(p.m.reg, promhttp.HandlerOpts{})
	return p, nil
}

// engineTLS is the client configuration of a connection to an https
// engine at host: a copy of base (nil: TLS 1.2 or later, the system's
// CAs), verifying the engine's certificate for host unless base names
// another server.
func engineTLS(base *tls.Config, host string) *tls.Config {
	c := base.Clone()
	if c == nil {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	return c
}

// now is the proxy's monotonic clock as an Instant for the router.
func (p *Proxy) now() clock.Instant { return clock.Instant(time.Since(p.start)) }

func (e *engine) isDown(now clock.Instant) bool { return clock.Instant(e.downUntil.Load()).After(now) }

// markDown makes the router pass over e for DownFor.
func (p *Proxy) markDown(e *engine) {
	e.downUntil.Store(int64(p.now().Add(p.cfg.DownFor)))
}

// Registry returns the proxy's Prometheus registry (served at /metrics).
func (p *Proxy) Registry() *prometheus.Registry { return p.m.reg }

// InFlight returns the number of generation requests being proxied.
func (p *Proxy) InFlight() int { return len(p.sem) }

// Close marks the proxy as closing (/health answers 503) and closes the
// idle connections of the transport New built. It does not wait for
// requests in flight: Serve does that.
func (p *Proxy) Close() {
	p.closing.Store(true)
	if p.ownsTr != nil {
		p.ownsTr.CloseIdleConnections()
	}
	for _, e := range p.engines {
		e.pool.closeIdle()
	}
}

// ServeHTTP serves POST /v1/completions and /v1/chat/completions through
// the two legs, GET /v1/models from a decode engine, GET /health and GET
// /metrics.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.handlers.Add(1)
	defer p.handlers.Done()
	if p.cfg.APIKeys.Enabled() && r.Method != http.MethodOptions && strings.HasPrefix(r.URL.Path, "/v1") &&
		!p.cfg.APIKeys.Allow(r.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, openai.Unauthorized())
		return
	}
	switch r.URL.Path {
	case "/v1/completions", "/v1/chat/completions":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, &openai.Error{Status: http.StatusMethodNotAllowed, Type: openai.TypeInvalidRequest,
				Message: r.URL.Path + " takes POST"})
			return
		}
		p.generate(w, r)
	case "/v1/models":
		p.models(w, r)
	case "/health":
		p.health(w)
	case "/metrics":
		p.metricsH.ServeHTTP(w, r)
	default:
		writeError(w, openai.NotFound("no route %s %s on the kvlease proxy", r.Method, r.URL.Path))
	}
}

// Serve serves the proxy on ln and scrapes the engines until ctx is done,
// then shuts down: it stops accepting, lets requests in flight finish for
// up to drain, then cancels the rest (each carries its aborts to the
// engines) and returns once every handler has returned. The error is nil
// after a shutdown, or the server's error.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	srv := &httpserver.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         p.cfg.TLS,
		Logger:            p.log,
	}
	httpserver.SetBounds(srv)
	scrapeCtx, stopScrape := context.WithCancel(ctx)
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		p.RunScraper(scrapeCtx)
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-served:
	case <-ctx.Done():
		p.closing.Store(true)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
		if srv.Shutdown(sctx) != nil {
			srv.Close() // cancels the handlers' contexts: they abort their legs
		}
		cancel()
		<-served
	}
	stopScrape()
	<-scraped
	p.handlers.Wait()
	p.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// health answers whether the proxy takes requests, with each engine's
// state as the proxy sees it.
func (p *Proxy) health(w http.ResponseWriter) {
	type engineHealth struct {
		URL      string `json:"url"`
		Up       bool   `json:"up"`
		InFlight int64  `json:"in_flight"`
	}
	now := p.now()
	list := func(r *role) []engineHealth {
		out := make([]engineHealth, len(r.engines))
		for i, e := range r.engines {
			out[i] = engineHealth{URL: e.base, Up: !e.isDown(now), InFlight: e.inflight.Load()}
		}
		return out
	}
	status, code := "ok", http.StatusOK
	if p.closing.Load() {
		status, code = "shutting down", http.StatusServiceUnavailable
	}
	body, _ := json.Marshal(struct {
		Status   string         `json:"status"`
		InFlight int            `json:"in_flight"`
		Prefill  []engineHealth `json:"prefill"`
		Decode   []engineHealth `json:"decode"`
	}{status, p.InFlight(), list(&p.prefill), list(&p.decode)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
}

// models answers GET /v1/models from the first decode engine that
// answers: the proxy serves what its engines serve.
func (p *Proxy) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, &openai.Error{Status: http.StatusMethodNotAllowed, Type: openai.TypeInvalidRequest,
			Message: "/v1/models takes GET"})
		return
	}
	if p.looped(r.Header) {
		writeError(w, p.loopError())
		return
	}
	via := p.via(r)
	skip := make([]bool, len(p.decode.engines))
	var failures []string
	for range min(len(skip), p.cfg.MaxDecodeAttempts) {
		e, ok := p.pick(&p.decode, skip)
		if !ok {
			break
		}
		skip[e.index] = true
		ctx, cancel := context.WithTimeout(r.Context(), p.cfg.PrefillTimeout)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/models", nil)
		p.engineHeaders(req.Header, r.Header, via)
		resp, err := p.client.Do(req)
		e.inflight.Add(-1)
		if err != nil {
			cancel()
			if isDialError(err) {
				p.markDown(e)
			}
			failures = append(failures, fmt.Sprintf("%s: %v", e.hostPort, err))
			continue
		}
		body, err := readBounded(resp.Body, maxErrorBytes*16)
		resp.Body.Close()
		cancel()
		if err != nil || (resp.StatusCode >= 500 && resp.StatusCode != http.StatusLoopDetected) {
			failures = append(failures, fmt.Sprintf("%s: answered %d", e.hostPort, resp.StatusCode))
			continue
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
		return
	}
	writeError(w, gatewayError(http.StatusBadGateway, "no decode engine answered GET /v1/models: %s", strings.Join(failures, "; ")))
}

// pick chooses an engine of r (skipping skip) and counts a leg in flight
// on it; the caller subtracts it when the leg ends.
func (p *Proxy) pick(r *role, skip []bool) (*engine, bool) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range r.engines {
		r.loads[i] = route.Load{
			InFlight:  int(e.inflight.Load()),
			Scraped:   e.scraped,
			ScrapedAt: e.scrapedAt,
			Waiting:   e.load.waiting,
			KVUsage:   e.load.kvUsage,
			DownUntil: clock.Instant(e.downUntil.Load()),
		}
	}
	i, ok := r.picker.Pick(now, r.loads, skip)
	if !ok {
		return nil, false
	}
	e := r.engines[i]
	e.inflight.Add(1)
	return e, true
}

// RunScraper scrapes every engine's /metrics each ScrapeInterval until ctx
// is done, feeding the least-loaded policy and the engines' up state. It
// returns at once when ScrapeInterval is 0.
func (p *Proxy) RunScraper(ctx context.Context) {
	if p.cfg.ScrapeInterval == 0 {
		return
	}
	t := time.NewTicker(p.cfg.ScrapeInterval)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, e := range p.engines {
			wg.Go(func() { p.scrape(ctx, e) })
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scrape reads one engine's load. An engine that cannot be connected to is
// marked down; one that answers is up again at once, so a restarted
// engine is back in rotation within a scrape.
func (p *Proxy) scrape(ctx context.Context, e *engine) {
	ctx, cancel := context.WithTimeout(ctx, max(p.cfg.ScrapeInterval, time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/metrics", nil)
	resp, err := p.client.Do(req)
	if err != nil {
		if isDialError(err) {
			p.markDown(e)
		}
		return
	}
	body, err := readBounded(resp.Body, 4<<20)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return
	}
	e.downUntil.Store(0)
	l, ok := parseLoad(body)
	if !ok {
		return
	}
	now := p.now()
	p.mu.Lock()
	e.scraped, e.scrapedAt, e.load = true, now, l
	p.mu.Unlock()
}

// engineLoad is what a scrape of an engine's /metrics tells the router.
type engineLoad struct {
	waiting float64 // vllm:num_requests_waiting, summed over label sets
	kvUsage float64 // vllm:kv_cache_usage_perc, the largest over label sets
}

const (
	metricWaiting = "vllm:num_requests_waiting"
	metricKVUsage = "vllm:kv_cache_usage_perc"
)

var loadMetrics = []string{metricWaiting, metricKVUsage}

// parseLoad reads the Prometheus text exposition format for the two
// metrics the least-loaded policy uses (promtext: expfmt, line by line,
// skipping lines it cannot read); ok is false when neither metric was
// found.
func parseLoad(text []byte) (l engineLoad, ok bool) {
	promtext.Each(bytes.NewReader(text), loadMetrics, func(name string, _ map[string]string, v float64) {
		switch name {
		case metricWaiting:
			l.waiting += v
		case metricKVUsage:
			l.kvUsage = math.Max(l.kvUsage, v)
		}
		ok = true
	})
	return l, ok
}

// abort tells engine e to abort request id (on a prefill engine this
// revokes its lease), with the credentials of the client's request
// headers client (engineHeaders). Its own deadline, so it runs after the
// client left.
func (p *Proxy) abort(ctx context.Context, e *engine, id string, client http.Header) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.AbortTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+AbortPath(id), nil)
	p.engineHeaders(req.Header, client, p.via11)
	req.Header.Set("X-Request-Id", id)
	resp, err := p.client.Do(req)
	result := "ok"
	switch {
	case err != nil:
		result = "failed"
		p.log.Warn("abort failed", "req", id, "peer", e.base, "reason", err)
	default:
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBytes))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
			result = "failed"
			p.log.Warn("abort refused", "req", id, "peer", e.base, "reason", resp.Status)
		}
	}
	p.m.aborts.WithLabelValues(e.role, result).Inc()
}

// abortAll aborts id on each non-nil engine, concurrently, and waits.
func (p *Proxy) abortAll(ctx context.Context, id string, client http.Header, engines ...*engine) {
	var wg sync.WaitGroup
	for _, e := range engines {
		if e != nil {
			wg.Go(func() { p.abort(ctx, e, id, client) })
		}
	}
	wg.Wait()
}

// isDialError reports whether err happened while connecting, so the engine
// never saw the request.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// maxPresize bounds the buffer readAllBounded allocates from a declared
// length.
const maxPresize = 256 << 10

// errTooLarge is returned by readBounded for a body over its bound.
var errTooLarge = errors.New("proxy: body too large")

// readBounded reads r to the end, failing with errTooLarge past limit
// bytes.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	return readAllBounded(r, limit, -1)
}

// readBody is readBounded of an engine's answer, sized by its
// Content-Length when it has one.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	return readAllBounded(resp.Body, limit, resp.ContentLength)
}

// readAllBounded reads r to the end, failing with errTooLarge past limit
// bytes. size, when not negative, is the expected length: the buffer is
// allocated once at that size (plus the byte that detects the end), up to
// maxPresize — a declared length is not trusted with more memory than
// that before the bytes come.
func readAllBounded(r io.Reader, limit, size int64) ([]byte, error) {
	n := int64(512)
	if size >= 0 {
		n = min(size+1, maxPresize)
	}
	b := make([]byte, 0, min(n, limit+1))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):min(int64(cap(b)), limit+1)])
		b = b[:len(b)+m]
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, limit)
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// gatewayError is a server_error with the proxy's status (502, 504).
func gatewayError(status int, format string, args ...any) *openai.Error {
	return &openai.Error{Status: status, Type: openai.TypeServer, Message: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, e *openai.Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if s := e.RetryAfterSeconds(); s != "" {
		h.Set("Retry-After", s)
	}
	w.WriteHeader(e.Status)
	w.Write(append(openai.AppendError(nil, e), '\n'))
}

// engineHeaders sets the headers an engine needs from the client's
// request src: trace context, credentials — Config.EngineAPIKey when
// set, the client's Authorization otherwise — and via, the Via header
// (Proxy.via).
func (p *Proxy) engineHeaders(dst, src http.Header, via []string) {
	dst["Via"] = via
	keys := [...]string{"Authorization", "Traceparent", "Tracestate"}
	from := 0
	if p.engineAuth != nil {
		dst["Authorization"] = p.engineAuth
		from = 1
	}
	for _, k := range keys[from:] {
		if v := src[k]; len(v) > 0 {
			dst[k] = v
		}
	}
}

// maxRequestIDBytes bounds a client's X-Request-Id.
const maxRequestIDBytes = 256

// requestID returns the client's X-Request-Id, checked, or a new one.
func requestID(h string) (string, *openai.Error) {
	if h == "" {
		var b [16]byte
		rand.Read(b[:])
		b[6] = b[6]&0x0f | 0x40 // a version 4 UUID, as vLLM's proxies make
		b[8] = b[8]&0x3f | 0x80
		var s [36]byte
		hex.Encode(s[0:8], b[0:4])
		s[8] = '-'
		hex.Encode(s[9:13], b[4:6])
		s[13] = '-'
		hex.Encode(s[14:18], b[6:8])
		s[18] = '-'
		hex.Encode(s[19:23], b[8:10])
		s[23] = '-'
		hex.Encode(s[24:], b[10:])
		return string(s[:]), nil
	}
	if len(h) > maxRequestIDBytes {
		return "", openai.BadRequest("X-Request-Id", "X-Request-Id is longer than %d bytes", maxRequestIDBytes)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c <= ' ' || c >= 0x7f || c == '/' || c == '?' || c == '#' || c == '%' {
			return "", openai.BadRequest("X-Request-Id",
				"X-Request-Id may hold printable ASCII except space, '/', '?', '#' and '%%'")
		}
	}
	return h, nil
}

// engineRequestID is the id the engines see for a request whose client
// sent X-Request-Id id: id, cut to leave room, then "-" and 16 random hex
// digits, as vLLM makes client ids unique internally. Two clients sending
// one id, at once or one after the other, are two requests to the engines,
// and each abort the proxy sends names its own.
func engineRequestID(id string) string {
	const suffix = 1 + 16
	var b [8]byte
	rand.Read(b[:])
	return id[:min(len(id), maxRequestIDBytes-suffix)] + "-" + hex.EncodeToString(b[:])
}

// escapePathSegment escapes what requestID lets through and a URL path
// segment cannot hold verbatim.
func escapePathSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("/?#%\"<>\\^`{|}", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
