package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// TurnKey names one request of a workload: turn Turn of job Job. The
// content of a request depends only on the Config and its key.
type TurnKey struct{ Job, Turn int }

// Key returns the key of rec.
func (rec *Record) Key() TurnKey { return TurnKey{rec.Job, rec.Turn} }

// CompletedKeys returns the keys of the records that completed with their
// text recorded (Config.RecordOutputs), sorted.
func CompletedKeys(records []Record) []TurnKey {
	var keys []TurnKey
	for i := range records {
		if rec := &records[i]; rec.Outcome == OutcomeOK && rec.Text != "" {
			keys = append(keys, rec.Key())
		}
	}
	slices.SortFunc(keys, compareKeys)
	return slices.Compact(keys)
}

func compareKeys(a, b TurnKey) int {
	if a.Job != b.Job {
		return a.Job - b.Job
	}
	return a.Turn - b.Turn
}

// maxReplayConcurrency bounds Replay's workers.
const maxReplayConcurrency = 256

// Replay sends the requests named by keys of the workload cfg describes
// (its Seed, Workload, API, Model, Stream) once more, to the server at url
// (typically a single engine, the reference a P/D cluster must equal),
// with no abort and none made invalid, and returns the text of each
// answer by key; a request that failed is in failed with its error
// instead. A later turn of a conversation is sent with the reference's own
// earlier answers as its history, so that it is the request the cluster
// got whenever the cluster's earlier answers equalled the reference's.
// Jobs run concurrently on up to concurrency workers, the turns of a job
// one after the other. Run's rules for cfg apply; cfg.Model must be set
// (use the run's Result.Config).
func Replay(ctx context.Context, cfg Config, url string, keys []TurnKey, concurrency int) (texts map[TurnKey]string, failed map[TurnKey]string, err error) {
	cfg = cfg.withDefaults()
	cfg.URL, cfg.RecordOutputs = url, true
	cfg.AbortRate, cfg.InvalidRate = 0, 0
	cfg.MetricsURLs, cfg.Progress = nil, nil
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if cfg.Model == "" {
		return nil, nil, cfgErr("Model", "is required to replay a run (take the run's Result.Config)")
	}
	concurrency = min(max(concurrency, 1), maxReplayConcurrency)
	base := baseURL(url)
	r := &runner{cfg: cfg, client: cfg.HTTPClient, endpoint: base + "/v1/completions", wl: newWorkload(cfg), limit: MaxRequests, start: time.Now(), needText: true}
	if r.client == nil {
		r.client = newClient(cfg)
		defer r.client.CloseIdleConnections()
	}
	if cfg.API == APIChat {
		r.endpoint = base + "/v1/chat/completions"
	}
	// The last turn needed of each job.
	last := map[int]int{}
	multi := cfg.Workload.Kind == WorkloadMultiTurn
	for _, k := range keys {
		if k.Job < 0 || k.Job >= MaxRequests || k.Turn < 0 || (multi && k.Turn >= cfg.Workload.Turns) || (!multi && k.Turn > 0) {
			return nil, nil, fmt.Errorf("bench: replay: no request %+v in this workload", k)
		}
		last[k.Job] = max(last[k.Job], k.Turn)
	}
	jobs := slices.Sorted(maps.Keys(last))
	want := map[TurnKey]bool{}
	for _, k := range keys {
		want[k] = true
	}
	texts, failed = map[TurnKey]string{}, map[TurnKey]string{}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(concurrency, len(jobs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				j := r.wl.job(jobs[i])
				var history []string
				for t := 0; t <= last[j.index]; t++ {
					tr := j.turns[t]
					tr.abort, tr.invalid = abortPlan{}, false
					rec := newRecord(0, &j, t)
					text := r.do(ctx, &rec, requestBody(cfg, cfg.Model, &j, history, &tr), abortPlan{})
					k := TurnKey{j.index, t}
					mu.Lock()
					switch {
					case rec.Outcome != OutcomeOK:
						failed[k] = fmt.Sprintf("%s %s", rec.Outcome, rec.Error)
					case want[k]:
						texts[k] = text
					}
					mu.Unlock()
					if rec.Outcome != OutcomeOK {
						break // the later turns would not be the cluster's requests
					}
					history = append(history, tr.user, text)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return texts, failed, err
	}
	return texts, failed, nil
}

// Mismatch is a completed request whose text differs from the reference's.
type Mismatch struct {
	Key       TurnKey `json:"key"`
	ID        int     `json:"id"`
	Got       string  `json:"got"`
	Reference string  `json:"reference"`
}

func (m Mismatch) String() string {
	return fmt.Sprintf("request %d (job %d, turn %d): got %q, the reference %q",
		m.ID, m.Key.Job, m.Key.Turn, clip(m.Got, 80), clip(m.Reference, 80))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CompareOutputs compares the text of every completed record that has one
// with ref (from Replay): checked counts the records compared, missing
// those without a reference text.
func CompareOutputs(records []Record, ref map[TurnKey]string) (checked, missing int, mismatches []Mismatch) {
	for i := range records {
		rec := &records[i]
		if rec.Outcome != OutcomeOK || rec.Text == "" {
			continue
		}
		want, ok := ref[rec.Key()]
		if !ok {
			missing++
			continue
		}
		checked++
		if rec.Text != want {
			mismatches = append(mismatches, Mismatch{Key: rec.Key(), ID: rec.ID, Got: rec.Text, Reference: want})
		}
	}
	return checked, missing, mismatches
}

// Latencies returns one latency of the completed requests in
// milliseconds, in record order: which is "ttft", "itl" (every
// inter-token gap), "tpot" or "e2e".
func (r *Result) Latencies(which string) []float64 { return r.latencies(which) }
