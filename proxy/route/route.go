package route

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kvlease/kvlease/clock"
)

// Policy is how a Picker chooses among candidate engines.
type Policy uint8

const (
	// RoundRobin cycles through the candidates in order.
	RoundRobin Policy = iota
	// LeastLoaded takes the candidate with the least work (see the
	// package documentation).
	LeastLoaded
)

// Policies lists the policies by name, in the order of their values.
var Policies = []string{"round-robin", "least-loaded"}

func (p Policy) String() string {
	if int(p) < len(Policies) {
		return Policies[p]
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// ErrUnknownPolicy is returned by ParsePolicy for a name it does not know.
var ErrUnknownPolicy = errors.New("route: unknown policy")

// ParsePolicy returns the policy named s ("round-robin" or "least-loaded").
func ParsePolicy(s string) (Policy, error) {
	for i, name := range Policies {
		if s == name {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("%w %q: want one of %s", ErrUnknownPolicy, s, strings.Join(Policies, ", "))
}

// Load is what a Picker knows about one engine.
type Load struct {
	// InFlight is the number of legs the proxy has outstanding at the
	// engine.
	InFlight int
	// Scraped reports whether Waiting and KVUsage were read from the
	// engine's /metrics; ScrapedAt is when.
	Scraped   bool
	ScrapedAt clock.Instant
	// Waiting is vllm:num_requests_waiting at ScrapedAt.
	Waiting float64
	// KVUsage is vllm:kv_cache_usage_perc at ScrapedAt, in [0, 1].
	KVUsage float64
	// DownUntil is the end of the pause the proxy gave the engine after
	// failing to reach it; the engine is up from that instant on. Zero
	// means up.
	DownUntil clock.Instant
}

// Config configures a Picker.
type Config struct {
	Policy Policy
	// StaleAfter is how long a scrape counts; an older one is ignored
	// and only InFlight ranks the engine. Default 2 s, as llm-d.
	StaleAfter time.Duration
}

// DefaultConfig returns round robin with a 2 s staleness bound.
func DefaultConfig() Config {
	return Config{Policy: RoundRobin, StaleAfter: 2 * time.Second}
}

// Validate reports a config the Picker cannot use.
func (c Config) Validate() error {
	if int(c.Policy) >= len(Policies) {
		return fmt.Errorf("route: unknown policy %d", c.Policy)
	}
	if c.StaleAfter <= 0 {
		return fmt.Errorf("route: StaleAfter must be positive, got %v", c.StaleAfter)
	}
	return nil
}

// Picker chooses engines. Its only state is the round-robin cursor. Not
// safe for concurrent use.
type Picker struct {
	cfg  Config
	next int
}

// NewPicker returns a Picker; it panics on a config that fails Validate
// (configs are validated where they are parsed).
func NewPicker(cfg Config) *Picker {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Picker{cfg: cfg}
}

// Policy returns the picker's policy.
func (p *Picker) Policy() Policy { return p.cfg.Policy }

// Pick returns the index of the engine to use among loads, skipping every
// i with skip[i] (skip may be nil or shorter than loads: missing entries do
// not skip). ok is false when no engine is left. Engines whose DownUntil is
// after now are chosen only when every remaining engine is down.
//
// Pick advances the round-robin cursor past the engine it returns, under
// both policies, so that ties rotate.
func (p *Picker) Pick(now clock.Instant, loads []Load, skip []bool) (i int, ok bool) {
	n := len(loads)
	if n == 0 {
		return 0, false
	}
	start := p.next % n
	anyUp, anyLeft := false, false
	for j := range loads {
		if skipped(skip, j) {
			continue
		}
		anyLeft = true
		if !loads[j].DownUntil.After(now) {
			anyUp = true
		}
	}
	if !anyLeft {
		return 0, false
	}
	best := -1
	var bestScore, bestUsage float64
	for k := 0; k < n; k++ {
		j := (start + k) % n
		if skipped(skip, j) || (anyUp && loads[j].DownUntil.After(now)) {
			continue
		}
		if p.cfg.Policy == RoundRobin {
			best = j
			break
		}
		score, usage := p.rank(now, &loads[j])
		if best < 0 || score < bestScore || (score == bestScore && usage < bestUsage) {
			best, bestScore, bestUsage = j, score, usage
		}
	}
	p.next = (best + 1) % n
	return best, true
}

// rank returns the least-loaded ordering keys of l: queue depth, then KV
// usage. Scraped figures that are stale, negative or NaN count as zero, so
// a broken exporter cannot attract or repel all traffic.
func (p *Picker) rank(now clock.Instant, l *Load) (score, usage float64) {
	score = float64(max(l.InFlight, 0))
	if l.Scraped && now.Sub(l.ScrapedAt) <= p.cfg.StaleAfter {
		score += sane(l.Waiting)
		usage = sane(l.KVUsage)
	}
	return score, usage
}

func sane(v float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	if math.IsInf(v, 1) {
		return math.MaxFloat64
	}
	return v
}

func skipped(skip []bool, i int) bool { return i < len(skip) && skip[i] }
