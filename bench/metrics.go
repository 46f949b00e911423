package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/kvlease/kvlease/bench/stats"
	"github.com/kvlease/kvlease/internal/promtext"
)

// Metric names scraped during a run.
const (
	MetricKVUsage      = "vllm:kv_cache_usage_perc"
	MetricHeldBlocks   = `kvlease_kv_blocks{state="held"}`
	MetricLeasesActive = "kvlease_leases_active"
	// MetricPromptComputed and MetricGenerated are the engine counters
	// behind EngineRate: prompt positions the engine computed (vLLM's
	// prompt_tokens_by_source, source local_compute) and tokens it
	// generated.
	MetricPromptComputed = `vllm:prompt_tokens_by_source_total{source="local_compute"}`
	MetricGenerated      = "vllm:generation_tokens_total"
)

// scraped are the series read from each endpoint: a name, and the labels
// a sample must carry (all its series that match are summed, so a metric
// with an engine label sums over engines).
var scraped = []struct {
	key    string
	name   string
	labels map[string]string
}{
	{MetricKVUsage, "vllm:kv_cache_usage_perc", nil},
	{MetricHeldBlocks, "kvlease_kv_blocks", map[string]string{"state": "held"}},
	{MetricLeasesActive, "kvlease_leases_active", nil},
	{MetricPromptComputed, "vllm:prompt_tokens_by_source_total", map[string]string{"source": "local_compute"}},
	{MetricGenerated, "vllm:generation_tokens_total", nil},
}

// scrapedNames are the names of scraped.
var scrapedNames = func() []string {
	var names []string
	for _, m := range scraped {
		names = append(names, m.name)
	}
	return names
}()

// MetricSeries is one metric of one endpoint over the run: X is seconds
// since the start of the run, Y the value.
type MetricSeries struct {
	URL    string        `json:"url"`
	Metric string        `json:"metric"`
	Points []stats.Point `json:"points"`
}

// maxScrapeBytes bounds one /metrics response.
const maxScrapeBytes = 16 << 20

// scraper polls Prometheus endpoints. Its methods are safe for concurrent
// use.
type scraper struct {
	client *http.Client
	urls   []string
	start  time.Time

	mu     sync.Mutex
	series map[[2]string]*MetricSeries // (url, metric)
	order  [][2]string                 // first-seen order, for stable output
	errs   map[string]int
}

func newScraper(client *http.Client, urls []string, start time.Time) *scraper {
	s := &scraper{client: client, start: start, series: map[[2]string]*MetricSeries{}, errs: map[string]int{}}
	for _, u := range urls {
		if u = metricsURL(u); !slices.Contains(s.urls, u) {
			s.urls = append(s.urls, u) // one series per endpoint, however it is spelled
		}
	}
	return s
}

// metricsURL adds /metrics to a URL without a path.
func metricsURL(u string) string {
	p, err := url.Parse(u)
	if err == nil && (p.Path == "" || p.Path == "/") {
		p.Path = "/metrics"
		return p.String()
	}
	return u
}

// setStart moves the instant X counts from: points taken before it get a
// negative X.
func (s *scraper) setStart(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := t.Sub(s.start).Seconds()
	s.start = t
	for _, ser := range s.series {
		for i := range ser.Points {
			ser.Points[i].X -= d
		}
	}
}

// run scrapes every interval until ctx is done, starting at once.
func (s *scraper) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.scrapeAll(ctx, interval)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scrapeAll scrapes every endpoint once, in parallel, each within
// timeout (bounded to 2 s).
func (s *scraper) scrapeAll(ctx context.Context, timeout time.Duration) {
	timeout = min(max(timeout, 100*time.Millisecond), 2*time.Second)
	// One X for the whole round, so that series of different endpoints
	// can be summed point by point (SumSeries).
	s.mu.Lock()
	at := time.Since(s.start).Seconds()
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range s.urls {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			vals, err := s.scrape(cctx, u)
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil {
				if ctx.Err() == nil {
					s.errs[u]++
				}
				return
			}
			for _, m := range scraped {
				v, ok := vals[m.key]
				if !ok {
					continue
				}
				k := [2]string{u, m.key}
				ser := s.series[k]
				if ser == nil {
					ser = &MetricSeries{URL: u, Metric: m.key}
					s.series[k] = ser
					s.order = append(s.order, k)
				}
				if len(ser.Points) < maxMetricsPoints {
					ser.Points = append(ser.Points, stats.Point{X: at, Y: v})
				}
			}
		})
	}
	wg.Wait()
}

func (s *scraper) scrape(ctx context.Context, u string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, maxScrapeBytes))
}

// results returns the series and error counts gathered so far.
func (s *scraper) results() ([]MetricSeries, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]MetricSeries, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, *s.series[k])
	}
	var errs map[string]int
	for u, n := range s.errs {
		if errs == nil {
			errs = map[string]int{}
		}
		errs[u] = n
	}
	return out, errs
}

// parseMetrics reads the Prometheus text exposition format and returns,
// for each scraped metric found, the sum of its matching samples. Lines it
// cannot parse are skipped (promtext): one odd line must not lose a whole
// scrape.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	err := promtext.Each(r, scrapedNames, func(name string, labels map[string]string, value float64) {
	next:
		for _, m := range scraped {
			if m.name != name {
				continue
			}
			for k, v := range m.labels {
				if labels[k] != v {
					continue next
				}
			}
			out[m.key] += value
		}
	})
	return out, err
}

// SumSeries sums the series of metric over every endpoint, point by point:
// the scraper gives all the endpoints of one round the same X. A round in
// which an endpoint did not answer sums the others. The points are in
// order of X.
func SumSeries(series []MetricSeries, metric string) []stats.Point {
	sum := map[float64]float64{}
	for _, s := range series {
		if s.Metric != metric {
			continue
		}
		for _, p := range s.Points {
			sum[p.X] += p.Y
		}
	}
	out := make([]stats.Point, 0, len(sum))
	for x, y := range sum {
		out = append(out, stats.Point{X: x, Y: y})
	}
	slices.SortFunc(out, func(a, b stats.Point) int { return cmp.Compare(a.X, b.X) })
	return out
}

// EngineRate is what one engine computed during a run, from its own
// counters: the increase of MetricPromptComputed and MetricGenerated from
// the look before the load to the last look after it, over the load's
// wall time. A counter that went down (the engine restarted) counts from
// zero again, as Prometheus's increase does.
type EngineRate struct {
	URL                       string  `json:"url"`
	Seconds                   float64 `json:"seconds"`
	PromptTokens              float64 `json:"prompt_tokens"`
	GenerationTokens          float64 `json:"generation_tokens"`
	PromptTokensPerSecond     float64 `json:"prompt_tok_per_s"`
	GenerationTokensPerSecond float64 `json:"generation_tok_per_s"`
}

// EngineRates computes an EngineRate per endpoint of series that has
// either counter, in first-seen order, over a load of seconds.
func EngineRates(series []MetricSeries, seconds float64) []EngineRate {
	var out []EngineRate
	at := map[string]int{}
	for _, s := range series {
		if s.Metric != MetricPromptComputed && s.Metric != MetricGenerated || len(s.Points) == 0 {
			continue
		}
		i, ok := at[s.URL]
		if !ok {
			i = len(out)
			at[s.URL] = i
			out = append(out, EngineRate{URL: s.URL, Seconds: seconds})
		}
		if s.Metric == MetricPromptComputed {
			out[i].PromptTokens = increase(s.Points)
		} else {
			out[i].GenerationTokens = increase(s.Points)
		}
	}
	for i := range out {
		if e := &out[i]; seconds > 0 {
			e.PromptTokensPerSecond = e.PromptTokens / seconds
			e.GenerationTokensPerSecond = e.GenerationTokens / seconds
		}
	}
	return out
}

// increase is a counter's increase over points: the sum of its rises, a
// fall counting as a reset to zero.
func increase(ps []stats.Point) float64 {
	var inc float64
	for i := 1; i < len(ps); i++ {
		if d := ps[i].Y - ps[i-1].Y; d >= 0 {
			inc += d
		} else {
			inc += ps[i].Y
		}
	}
	return inc
}
