package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress is a snapshot of a running benchmark.
type Progress struct {
	Elapsed time.Duration
	// Total is Config.Requests (0 when only Duration bounds the run) and
	// Duration is Config.Duration; either may end the run.
	Total    int
	Duration time.Duration
	Issued   int
	Done     int // completed + errors + aborted + rejected + canceled
	Errors   int
	Aborted  int
	Rejected int // sent invalid on purpose and refused
	Inflight int
	// OutputTokens counts the tokens of completed requests.
	OutputTokens int
	// Finished is set on the last call, after every request ended.
	Finished bool
}

// runner is one run in progress.
type runner struct {
	cfg      Config
	client   *http.Client
	endpoint string
	wl       *workload
	start    time.Time
	limit    int // requests
	// needText: the generated text is kept (RecordOutputs) or sent back
	// (multi-turn); otherwise the client only counts it.
	needText bool

	tickets atomic.Int64 // requests issued (IDs)
	jobs    atomic.Int64 // jobs started (closed loop)

	done, errs, aborted, rejected, inflight, outputTokens atomic.Int64

	mu sync.Mutex
	// blocks hold the records in arrival order, recordsPerBlock each:
	// one growing slice copied megabytes under mu at each growth, and
	// most of a long run's client CPU went there.
	blocks [][]Record
}

// recordsPerBlock is the size of a block of records (about 1 MiB).
const recordsPerBlock = 4096

// records returns every record added, in one slice.
func (r *runner) records() []Record {
	n := 0
	for _, b := range r.blocks {
		n += len(b)
	}
	out := make([]Record, 0, n)
	for _, b := range r.blocks {
		out = append(out, b...)
	}
	return out
}

// Run runs the benchmark cfg describes and returns its result. It returns
// an error only when the run cannot start: an invalid Config, or no model
// to use. When ctx is canceled the requests in flight are cut off
// (OutcomeCanceled) and the result so far is returned with
// Summary.Interrupted set.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := baseURL(cfg.URL)
	client := cfg.HTTPClient
	if client == nil {
		client = newClient(cfg)
	}
	if cfg.Model == "" {
		m, err := firstModel(ctx, client, base, cfg.APIKey)
		if err != nil {
			return nil, err
		}
		cfg.Model = m
	}
	r := &runner{
		cfg:      cfg,
		client:   client,
		endpoint: base + "/v1/completions",
		wl:       newWorkload(cfg),
		limit:    cfg.Requests,
	}
	if cfg.API == APIChat {
		r.endpoint = base + "/v1/chat/completions"
	}
	if r.limit == 0 {
		r.limit = MaxRequests
	}
	r.needText = cfg.RecordOutputs || cfg.Workload.Kind == WorkloadMultiTurn
	var scr *scraper
	if len(cfg.MetricsURLs) > 0 {
		// A first look before the load: the engines' counters at its start
		// (EngineRates), at a small negative X.
		scr = newScraper(client, cfg.MetricsURLs, time.Now())
		scr.scrapeAll(ctx, cfg.MetricsInterval)
	}
	r.start = time.Now()

	// Side goroutines: metrics and progress, stopped after the load.
	sideCtx, stopSide := context.WithCancel(context.WithoutCancel(ctx))
	var side sync.WaitGroup
	if scr != nil {
		scr.setStart(r.start)
		side.Go(func() { scr.run(sideCtx, cfg.MetricsInterval) })
	}
	if cfg.Progress != nil {
		side.Go(func() {
			t := time.NewTicker(cfg.ProgressInterval)
			defer t.Stop()
			for {
				select {
				case <-sideCtx.Done():
					return
				case <-t.C:
					cfg.Progress(r.progress(false))
				}
			}
		})
	}

	self := cfg.SelfName
	if self == "" {
		self = "bench"
	}
	cpu := startCPU(self, cfg.Processes)
	if cfg.Rate > 0 {
		r.openLoop(ctx)
	} else {
		r.closedLoop(ctx)
	}
	elapsed := time.Since(r.start)
	cpuUsed := cpu.finish()
	stopSide()
	side.Wait()
	res := &Result{Config: cfg, Started: r.start.Round(0).UTC()} // wall clock only: it goes to JSON
	if scr != nil {
		// One last look: what is still held after the load is over.
		scr.scrapeAll(context.WithoutCancel(ctx), cfg.MetricsInterval)
		res.Metrics, res.ScrapeErrors = scr.results()
		res.Engines = EngineRates(res.Metrics, elapsed.Seconds())
	}
	if cfg.Progress != nil {
		cfg.Progress(r.progress(true))
	}
	records := r.records()
	r.blocks = nil
	slices.SortFunc(records, func(a, b Record) int { return a.ID - b.ID })
	res.Records = records
	res.Summary = summarize(cfg, records, elapsed)
	res.Summary.CPU = perRequest(cpuUsed, res.Summary.Completed)
	res.Summary.Interrupted = ctx.Err() != nil
	return res, nil
}

func (r *runner) progress(finished bool) Progress {
	return Progress{
		Elapsed:      time.Since(r.start),
		Total:        r.cfg.Requests,
		Duration:     r.cfg.Duration,
		Issued:       int(min(r.tickets.Load(), int64(r.limit))),
		Done:         int(r.done.Load()),
		Errors:       int(r.errs.Load()),
		Aborted:      int(r.aborted.Load()),
		Rejected:     int(r.rejected.Load()),
		Inflight:     int(r.inflight.Load()),
		OutputTokens: int(r.outputTokens.Load()),
		Finished:     finished,
	}
}

// pastDeadline reports whether Duration has passed.
func (r *runner) pastDeadline() bool {
	return r.cfg.Duration > 0 && time.Since(r.start) >= r.cfg.Duration
}

// more reports whether a closed-loop worker may start another job.
func (r *runner) more(ctx context.Context) bool {
	return ctx.Err() == nil && !r.pastDeadline() && r.tickets.Load() < int64(r.limit)
}

func (r *runner) closedLoop(ctx context.Context) {
	var wg sync.WaitGroup
	for range r.cfg.Concurrency {
		wg.Go(func() {
			for r.more(ctx) {
				// The first turn's ticket before the job's number: a
				// worker that loses the last ticket to another starts no
				// job, so a run of N requests issues jobs 0, 1, … in
				// order and never skips one (which another worker would
				// replace by job N, a different workload).
				id, ok := r.ticket()
				if !ok {
					return
				}
				j := r.wl.job(int(r.jobs.Add(1) - 1))
				r.runJob(ctx, &j, id)
			}
		})
	}
	wg.Wait()
}

// openLoop dispatches jobs at the arrival times of a Poisson process. An
// arrival is due at start + its offset; a late dispatcher catches up at
// once, so the number of arrivals within Duration depends on the seed only.
func (r *runner) openLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	arr := newArrivals(r.cfg.Seed, r.cfg.Rate)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := 0; r.tickets.Load() < int64(r.limit); n++ {
		at := arr.next()
		if r.cfg.Duration > 0 && at >= r.cfg.Duration {
			return
		}
		if wait := time.Until(r.start.Add(at)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		// The arrival's request ID is taken here, not by its goroutine: an
		// arrival admitted now is one of the Requests even if later drops
		// run before its goroutine does.
		id, ok := r.ticket()
		if !ok {
			return
		}
		if r.inflight.Load() >= int64(r.cfg.MaxInflight) {
			r.drop(n, id)
			continue
		}
		r.inflight.Add(1) // counted here, so the bound holds before the goroutine runs
		wg.Go(func() {
			j := r.wl.job(n)
			r.runJob(ctx, &j, id)
		})
	}
}

// drop records arrival n, request id, that found MaxInflight requests in
// flight.
func (r *runner) drop(n, id int) {
	j := r.wl.job(n)
	rec := newRecord(id, &j, 0)
	rec.StartSeconds = time.Since(r.start).Seconds()
	rec.setError(ErrDropped, fmt.Sprintf("%d requests in flight (MaxInflight)", r.cfg.MaxInflight))
	r.add(rec)
}

// ticket takes the next request ID, or reports that Requests were issued.
func (r *runner) ticket() (int, bool) {
	id := r.tickets.Add(1) - 1
	return int(id), id < int64(r.limit)
}

// runJob runs the turns of j one after the other. The caller has taken
// firstID, the request ID of its first turn (in the open loop it has also
// counted the job in flight); every later turn takes its own.
func (r *runner) runJob(ctx context.Context, j *job, firstID int) {
	openLoop := r.cfg.Rate > 0
	if !openLoop {
		r.inflight.Add(1)
	}
	defer r.inflight.Add(-1)
	var history []string
	for i := range j.turns {
		if i > 0 && (ctx.Err() != nil || r.pastDeadline()) {
			return
		}
		id, ok := firstID, true
		if i > 0 {
			id, ok = r.ticket()
		}
		if !ok {
			return
		}
		t := &j.turns[i]
		rec := newRecord(id, j, i)
		body := requestBody(r.cfg, r.cfg.Model, j, history, t)
		text := r.do(ctx, &rec, body, t.abort)
		r.add(rec)
		if rec.Outcome != OutcomeOK {
			return // the client gave up on this conversation
		}
		if r.cfg.Workload.Kind == WorkloadMultiTurn {
			history = append(history, t.user, text)
		}
	}
}

func newRecord(id int, j *job, turn int) Record {
	t := &j.turns[turn]
	return Record{ID: id, Job: j.index, Turn: turn, Group: j.group, InputTokens: t.inputTokens, MaxTokens: t.outputTokens, InvalidPlanned: t.invalid}
}

func (r *runner) add(rec Record) {
	switch rec.Outcome {
	case OutcomeOK:
		r.outputTokens.Add(int64(rec.OutputTokens))
	case OutcomeError:
		r.errs.Add(1)
	case OutcomeAborted:
		r.aborted.Add(1)
	case OutcomeRejected:
		r.rejected.Add(1)
	}
	r.done.Add(1)
	r.mu.Lock()
	if len(r.blocks) == 0 || len(r.blocks[len(r.blocks)-1]) == recordsPerBlock {
		r.blocks = append(r.blocks, make([]Record, 0, min(recordsPerBlock, r.limit)))
	}
	last := &r.blocks[len(r.blocks)-1]
	*last = append(*last, rec)
	r.mu.Unlock()
}

// arrivals yields the offsets from the start of a run at which a Poisson
// process of rate per second has its events, from its own random stream
// of seed. Not safe for concurrent use.
type arrivals struct {
	r    *rand.Rand
	rate float64
	at   float64 // seconds
}

func newArrivals(seed uint64, rate float64) *arrivals {
	return &arrivals{r: rand.New(rand.NewPCG(seed, streamArrivals)), rate: rate}
}

// next returns the offset of the next arrival: the gaps are exponential of
// mean 1/rate.
func (a *arrivals) next() time.Duration {
	a.at += a.r.ExpFloat64() / a.rate
	return time.Duration(a.at * float64(time.Second))
}

// baseURL trims a trailing "/" and "/v1" from u.
func baseURL(u string) string {
	u = strings.TrimRight(u, "/")
	return strings.TrimSuffix(u, "/v1")
}

// newClient returns a client whose connection pool fits the run: without
// it, Go keeps 2 idle connections per host and a closed loop of 32
// reconnects constantly.
func newClient(cfg Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	conns := max(cfg.Concurrency, min(cfg.MaxInflight, 1024), 16)
	tr.MaxIdleConns = conns + 16
	tr.MaxIdleConnsPerHost = conns
	// No "Accept-Encoding: gzip" on every request: token streams gain
	// nothing from compression and a gzip reader per response costs CPU.
	tr.DisableCompression = true
	return &http.Client{Transport: tr}
}

// ErrNoModel reports that the server lists no model.
var ErrNoModel = errors.New("bench: the server lists no model")

// firstModel returns the first model of GET base/v1/models.
func firstModel(ctx context.Context, client *http.Client, base, apiKey string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: listing models (pass the model's name to skip this): %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes*64))
	if err != nil {
		return "", fmt.Errorf("bench: listing models: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("bench: GET %s/v1/models: HTTP %d: %s", base, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Errorf("bench: GET %s/v1/models: %w", base, err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("%w at %s/v1/models; pass the model's name", ErrNoModel, base)
	}
	return list.Data[0].ID, nil
}
