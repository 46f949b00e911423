package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// API selects the endpoint: /v1/completions or /v1/chat/completions.
type API string

// The APIs.
const (
	APICompletions API = "completions"
	APIChat        API = "chat"
)

// WorkloadKind selects how prompts are made; see the package doc.
type WorkloadKind string

// The workloads.
const (
	WorkloadRandom       WorkloadKind = "random"
	WorkloadSharedPrefix WorkloadKind = "shared-prefix"
	WorkloadMultiTurn    WorkloadKind = "multi-turn"
)

// Bounds on a run, so that a mistyped flag fails at start instead of
// exhausting memory: every request keeps a Record until the end.
const (
	MaxRequests    = 1_000_000
	MaxConcurrency = 10_000
	MaxInflight    = 10_000
	MaxLenTokens   = 1 << 20
	MaxTurns       = 1000
	MaxGroups      = 100_000
	// maxMetricsPoints bounds each scraped time series; past it the
	// scraper stops appending (a 500 ms interval fills it in 14 hours).
	maxMetricsPoints = 100_000
)

// SLO bounds for goodput. A zero bound is not checked.
type SLO struct {
	// TTFT bounds the time to first token (streaming only).
	TTFT time.Duration `json:"ttft_ns,omitempty"`
	// TPOT bounds the mean time per output token after the first:
	// (e2e − ttft) / (output tokens − 1).
	TPOT time.Duration `json:"tpot_ns,omitempty"`
	// E2E bounds the whole request.
	E2E time.Duration `json:"e2e_ns,omitempty"`
}

// Workload describes the prompts and output lengths.
type Workload struct {
	Kind WorkloadKind `json:"kind"`
	// InputLen is the length of each request's own prompt text in tokens
	// (the user message; the shared prefix and earlier turns come on top).
	InputLen Dist `json:"input_len"`
	// OutputLen is each request's max_tokens (and, with ignore_eos, its
	// output length).
	OutputLen Dist `json:"output_len"`
	// Groups and PrefixLen: shared-prefix only.
	Groups    int `json:"groups,omitempty"`
	PrefixLen int `json:"prefix_len,omitempty"`
	// Turns per conversation: multi-turn only.
	Turns int `json:"turns,omitempty"`
	// CharsPerToken converts requested tokens to prompt characters.
	CharsPerToken float64 `json:"chars_per_token"`
}

// Config is one run. The zero value of every field but URL has a default,
// applied by Run (see DefaultConfig).
type Config struct {
	// URL of the server: "http://host:port" or ".../v1".
	URL   string `json:"url"`
	API   API    `json:"api"`
	Model string `json:"model"` // "" means the first of GET /v1/models
	// APIKey, when set, is sent as "Authorization: Bearer <key>" (a server
	// started with --api-key). Never written to the results.
	APIKey string `json:"-"`
	// Stream asks for server-sent events; without it there is no TTFT.
	Stream bool `json:"stream"`

	// Concurrency is the number of closed-loop workers (Rate 0).
	Concurrency int `json:"concurrency,omitempty"`
	// Rate > 0 selects the open loop: Poisson arrivals per second.
	Rate float64 `json:"rate,omitempty"`
	// MaxInflight bounds the requests in flight in the open loop.
	MaxInflight int `json:"max_inflight,omitempty"`
	// Requests ends the run after this many requests (0: MaxRequests).
	Requests int `json:"requests,omitempty"`
	// Duration stops issuing requests after this long (0: no limit).
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Timeout bounds each request.
	Timeout time.Duration `json:"timeout_ns"`

	Workload Workload `json:"workload"`

	// AbortRate is the share of requests abandoned by the client.
	AbortRate float64 `json:"abort_rate,omitempty"`
	// AbortMaxDelay bounds the moment of an abort before the first token.
	AbortMaxDelay time.Duration `json:"abort_max_delay_ns,omitempty"`

	// InvalidRate is the share of requests sent invalid on purpose, with
	// min_tokens above max_tokens, which an OpenAI-compatible server
	// refuses with a 400. Behind a P/D proxy only the decode leg carries
	// min_tokens (the prefill leg drops it), so the prefill runs and the
	// decode engine rejects the request before admitting it: the case
	// where a prefill engine's leased blocks wait for nobody. Such a
	// refusal is OutcomeRejected, not an error.
	InvalidRate float64 `json:"invalid_rate,omitempty"`

	// Seed makes prompts, lengths, aborts and arrivals reproducible.
	Seed uint64 `json:"seed"`

	SLO SLO `json:"slo"`

	// MetricsURLs are Prometheus endpoints scraped during the run; a URL
	// without a path gets /metrics.
	MetricsURLs     []string      `json:"metrics_urls,omitempty"`
	MetricsInterval time.Duration `json:"metrics_interval_ns,omitempty"`

	// Processes are processes on this machine whose CPU time during the
	// load is reported per request (Summary.CPU), beside the bench
	// process's own (named SelfName, "bench" when empty).
	Processes []Process `json:"processes,omitempty"`
	SelfName  string    `json:"self_name,omitempty"`

	// RecordOutputs keeps each request's generated text in its Record
	// (to compare outputs between runs).
	RecordOutputs bool `json:"record_outputs,omitempty"`

	// Progress, when set, is called from one goroutine every
	// ProgressInterval during the run and once at the end with Done set.
	// It must not block for long.
	Progress         func(Progress) `json:"-"`
	ProgressInterval time.Duration  `json:"-"`

	// HTTPClient, when set, sends every request (tests use it); by
	// default a client with a connection pool sized for the run.
	HTTPClient *http.Client `json:"-"`
}

// DefaultConfig returns a Config with every default filled in and URL
// empty: closed loop of 8 workers, 200 requests, random prompts of 128
// tokens, 64 output tokens, streaming completions.
func DefaultConfig() Config {
	return Config{
		API:              APICompletions,
		Stream:           true,
		Concurrency:      8,
		MaxInflight:      1000,
		Requests:         200,
		Timeout:          5 * time.Minute,
		Workload:         DefaultWorkload(),
		AbortMaxDelay:    time.Second,
		Seed:             1,
		MetricsInterval:  500 * time.Millisecond,
		ProgressInterval: 200 * time.Millisecond,
	}
}

// DefaultWorkload is random prompts of 128 tokens and outputs of 64.
func DefaultWorkload() Workload {
	return Workload{
		Kind:          WorkloadRandom,
		InputLen:      Fixed(128),
		OutputLen:     Fixed(64),
		Groups:        4,
		PrefixLen:     512,
		Turns:         4,
		CharsPerToken: 1,
	}
}

// withDefaults fills zero fields from DefaultConfig, except Requests and
// Duration: a run with neither gets the default Requests.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.API == "" {
		c.API = d.API
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = d.MaxInflight
	}
	if c.Requests == 0 && c.Duration == 0 {
		c.Requests = d.Requests
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	w, dw := &c.Workload, d.Workload
	if w.Kind == "" {
		w.Kind = dw.Kind
	}
	if w.InputLen.Kind == "" {
		w.InputLen = dw.InputLen
	}
	if w.OutputLen.Kind == "" {
		w.OutputLen = dw.OutputLen
	}
	if w.Groups == 0 {
		w.Groups = dw.Groups
	}
	if w.PrefixLen == 0 {
		w.PrefixLen = dw.PrefixLen
	}
	if w.Turns == 0 {
		w.Turns = dw.Turns
	}
	if w.CharsPerToken == 0 {
		w.CharsPerToken = dw.CharsPerToken
	}
	if c.AbortMaxDelay == 0 {
		c.AbortMaxDelay = d.AbortMaxDelay
	}
	if c.MetricsInterval == 0 {
		c.MetricsInterval = d.MetricsInterval
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = d.ProgressInterval
	}
	return c
}

// ConfigError is a problem of one field of a Config: Field names it as in
// Config (dotted for nested fields: "Workload.Turns"), Problem says what is
// wrong and what is accepted, starting with the value given.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return "bench: " + e.Field + " " + e.Problem }

func cfgErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Validate reports the first problem of c (after defaults) as a
// *ConfigError.
func (c Config) Validate() error {
	switch {
	case c.URL == "":
		return cfgErr("URL", "is required")
	case !validURL(c.URL):
		return cfgErr("URL", "%q: want http://host:port", c.URL)
	case c.API != APICompletions && c.API != APIChat:
		return cfgErr("API", "%q: want %q or %q", c.API, APICompletions, APIChat)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return cfgErr("Rate", "%v: want 0 (closed loop) or a positive rate", c.Rate)
	case c.Rate == 0 && (c.Concurrency < 1 || c.Concurrency > MaxConcurrency):
		return cfgErr("Concurrency", "%d: want 1..%d", c.Concurrency, MaxConcurrency)
	case c.MaxInflight < 1 || c.MaxInflight > MaxInflight:
		return cfgErr("MaxInflight", "%d: want 1..%d", c.MaxInflight, MaxInflight)
	case c.Requests < 0 || c.Requests > MaxRequests:
		return cfgErr("Requests", "%d: want 0..%d", c.Requests, MaxRequests)
	case c.Duration < 0:
		return cfgErr("Duration", "%v: want a positive duration or 0", c.Duration)
	case c.Requests == 0 && c.Duration == 0:
		return cfgErr("Requests", "0 and Duration 0: set Requests or Duration")
	case c.Timeout <= 0:
		return cfgErr("Timeout", "%v: want a positive duration", c.Timeout)
	case !(c.AbortRate >= 0 && c.AbortRate <= 1):
		return cfgErr("AbortRate", "%v: want a share in [0, 1]", c.AbortRate)
	case !(c.InvalidRate >= 0 && c.InvalidRate <= 1):
		return cfgErr("InvalidRate", "%v: want a share in [0, 1]", c.InvalidRate)
	case c.AbortMaxDelay <= 0:
		return cfgErr("AbortMaxDelay", "%v: want a positive duration", c.AbortMaxDelay)
	case c.MetricsInterval <= 0:
		return cfgErr("MetricsInterval", "%v: want a positive duration", c.MetricsInterval)
	case c.ProgressInterval <= 0:
		return cfgErr("ProgressInterval", "%v: want a positive duration", c.ProgressInterval)
	case c.SLO.TTFT < 0:
		return cfgErr("SLO.TTFT", "%v: want a positive bound or 0 (none)", c.SLO.TTFT)
	case c.SLO.TPOT < 0:
		return cfgErr("SLO.TPOT", "%v: want a positive bound or 0 (none)", c.SLO.TPOT)
	case c.SLO.E2E < 0:
		return cfgErr("SLO.E2E", "%v: want a positive bound or 0 (none)", c.SLO.E2E)
	}
	for _, p := range c.Processes {
		if p.PID <= 0 || p.Name == "" {
			return cfgErr("Processes", "%s=%d: want NAME=PID with a positive PID", p.Name, p.PID)
		}
	}
	for _, m := range c.MetricsURLs {
		if !validURL(m) {
			return cfgErr("MetricsURLs", "%q: want http://host:port[/metrics]", m)
		}
	}
	return c.Workload.Validate()
}

// Validate reports the first problem of w as a *ConfigError.
func (w Workload) Validate() error {
	switch w.Kind {
	case WorkloadRandom, WorkloadSharedPrefix, WorkloadMultiTurn:
	default:
		return cfgErr("Workload.Kind", "%q: want random, shared-prefix or multi-turn", w.Kind)
	}
	if err := w.InputLen.Validate(); err != nil {
		return cfgErr("Workload.InputLen", "%v", err)
	}
	if err := w.OutputLen.Validate(); err != nil {
		return cfgErr("Workload.OutputLen", "%v", err)
	}
	switch {
	case w.Groups < 1 || w.Groups > MaxGroups:
		return cfgErr("Workload.Groups", "%d: want 1..%d", w.Groups, MaxGroups)
	case w.PrefixLen < 1 || w.PrefixLen > MaxLenTokens:
		return cfgErr("Workload.PrefixLen", "%d: want 1..%d", w.PrefixLen, MaxLenTokens)
	case w.Turns < 1 || w.Turns > MaxTurns:
		return cfgErr("Workload.Turns", "%d: want 1..%d", w.Turns, MaxTurns)
	case !(w.CharsPerToken >= 0.1 && w.CharsPerToken <= 64):
		return cfgErr("Workload.CharsPerToken", "%v: want 0.1..64", w.CharsPerToken)
	}
	return nil
}

// DistKind names a length distribution.
type DistKind string

// The distributions. Every sample is rounded and clamped to [1,
// MaxLenTokens]; uniform also to its bounds.
const (
	DistFixed   DistKind = "fixed"   // always A
	DistUniform DistKind = "uniform" // integers in [A, B]
	DistNormal  DistKind = "normal"  // mean A, standard deviation B
	DistExp     DistKind = "exp"     // exponential of mean A
)

// Dist is a distribution of lengths in tokens. Its text form, accepted by
// ParseDist and used in JSON, is "128", "64-256" (uniform),
// "normal:128,32" or "exp:128".
type Dist struct {
	Kind DistKind
	A, B float64
}

// Fixed returns the distribution that is always n.
func Fixed(n int) Dist { return Dist{Kind: DistFixed, A: float64(n)} }

// ParseDist parses the text form of a Dist and validates it.
func ParseDist(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	kind, args, hasKind := strings.Cut(s, ":")
	if !hasKind {
		args = s
		kind = string(DistFixed)
		if strings.Contains(s, "-") {
			kind = string(DistUniform)
		}
	}
	num := func(t string) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %q is not a number (want 128, 64-256, normal:128,32 or exp:128)", s, t)
		}
		return v, nil
	}
	var d Dist
	var err error
	switch DistKind(kind) {
	case DistFixed, DistExp:
		d.Kind = DistKind(kind)
		d.A, err = num(args)
	case DistUniform, DistNormal:
		sep := ","
		if d.Kind = DistKind(kind); d.Kind == DistUniform {
			sep = "-"
		}
		a, b, ok := strings.Cut(args, sep)
		if !ok {
			return Dist{}, fmt.Errorf("%q: want %s:A%sB", s, kind, sep)
		}
		if d.A, err = num(a); err == nil {
			d.B, err = num(b)
		}
	default:
		return Dist{}, fmt.Errorf("%q: unknown distribution %q (want fixed, uniform, normal or exp)", s, kind)
	}
	if err != nil {
		return Dist{}, err
	}
	return d, d.Validate()
}

// Validate reports whether d's parameters are in range.
func (d Dist) Validate() error {
	inRange := func(v float64) bool { return v >= 1 && v <= MaxLenTokens }
	switch d.Kind {
	case DistFixed, DistExp:
		if !inRange(d.A) {
			return fmt.Errorf("%s: want a value in 1..%d", d, MaxLenTokens)
		}
	case DistUniform:
		if !inRange(d.A) || !inRange(d.B) || d.A > d.B {
			return fmt.Errorf("%s: want A-B with 1 ≤ A ≤ B ≤ %d", d, MaxLenTokens)
		}
	case DistNormal:
		if !inRange(d.A) || !(d.B >= 0 && d.B <= MaxLenTokens) {
			return fmt.Errorf("%s: want a mean in 1..%d and a deviation in 0..%d", d, MaxLenTokens, MaxLenTokens)
		}
	default:
		return fmt.Errorf("unknown distribution %q (want fixed, uniform, normal or exp)", d.Kind)
	}
	return nil
}

// Sample draws a length from d, in [1, MaxLenTokens].
func (d Dist) Sample(r *rand.Rand) int {
	var v float64
	switch d.Kind {
	case DistUniform:
		lo, hi := int(math.Round(d.A)), int(math.Round(d.B))
		return clampLen(float64(lo + r.IntN(hi-lo+1)))
	case DistNormal:
		v = d.A + d.B*r.NormFloat64()
	case DistExp:
		v = d.A * r.ExpFloat64()
	default:
		v = d.A
	}
	return clampLen(v)
}

func clampLen(v float64) int {
	return int(math.Round(min(max(v, 1), MaxLenTokens)))
}

// String returns d's text form.
func (d Dist) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch d.Kind {
	case DistFixed:
		return f(d.A)
	case DistUniform:
		return f(d.A) + "-" + f(d.B)
	case DistNormal:
		return "normal:" + f(d.A) + "," + f(d.B)
	case DistExp:
		return "exp:" + f(d.A)
	}
	return string(d.Kind) + "?"
}

// MarshalText encodes d in its text form.
func (d Dist) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses d's text form.
func (d *Dist) UnmarshalText(b []byte) error {
	v, err := ParseDist(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
