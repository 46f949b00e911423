package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvlease/kvlease/bench/stats"
)

// Outcome is how a request ended.
type Outcome string

// The outcomes. Only OutcomeError counts as an error: an abandoned request
// is the client's choice, a canceled one is the run's interruption, a
// rejected one was meant to be.
const (
	OutcomeOK       Outcome = "ok"
	OutcomeError    Outcome = "error"
	OutcomeAborted  Outcome = "aborted"  // abandoned by the client (AbortRate)
	OutcomeCanceled Outcome = "canceled" // cut off because the run was interrupted
	// OutcomeRejected is a request sent invalid on purpose (InvalidRate)
	// that the server refused with a 4xx, as it should.
	OutcomeRejected Outcome = "rejected"
)

// Error kinds, as in Record.ErrorKind and Summary.ErrorsByKind.
const (
	ErrHTTP4xx     = "http_4xx"
	ErrHTTP5xx     = "http_5xx"
	ErrHTTPOther   = "http_other"   // a status that is neither 200 nor 4xx/5xx
	ErrTimeout     = "timeout"      // no complete response within Config.Timeout
	ErrConnection  = "connection"   // refused, reset, or closed before the end
	ErrStream      = "stream_error" // the server reported an error in the body
	ErrBadResponse = "bad_response" // not JSON, no choices, a stream without its end
	ErrDropped     = "dropped"      // open loop: MaxInflight requests were in flight
)

// Record is one request. Times are in seconds; StartSeconds is since the
// start of the run.
type Record struct {
	ID    int `json:"id"`    // issue order, from 0
	Job   int `json:"job"`   // the job (request or conversation) it belongs to
	Turn  int `json:"turn"`  // its turn in a multi-turn conversation, from 0
	Group int `json:"group"` // its shared-prefix group, or -1

	StartSeconds float64 `json:"start_s"`
	// TTFTSeconds is meaningful when Chunks > 0.
	TTFTSeconds       float64   `json:"ttft_s,omitempty"`
	E2ESeconds        float64   `json:"e2e_s"`
	InterTokenSeconds []float64 `json:"itl_s,omitempty"`
	// Chunks is the number of stream events that carried generated text.
	Chunks int `json:"chunks"`

	InputTokens  int `json:"input_tokens"` // requested length of its own prompt text
	MaxTokens    int `json:"max_tokens"`
	PromptTokens int `json:"prompt_tokens,omitempty"` // server's usage; 0 if not sent
	// OutputTokens is the server's usage, or else the chunks (streaming)
	// or text length / CharsPerToken.
	OutputTokens int `json:"output_tokens"`

	Outcome      Outcome `json:"outcome"`
	ErrorKind    string  `json:"error_kind,omitempty"`
	Error        string  `json:"error,omitempty"`
	HTTPStatus   int     `json:"http_status,omitempty"`
	AbortPlanned bool    `json:"abort_planned,omitempty"`
	AbortPhase   string  `json:"abort_phase,omitempty"`
	// InvalidPlanned marks a request sent invalid on purpose (InvalidRate).
	InvalidPlanned bool   `json:"invalid_planned,omitempty"`
	Text           string `json:"text,omitempty"` // with Config.RecordOutputs
}

// Summary is the figures of a run. Latencies are in seconds and cover the
// requests that completed without error.
type Summary struct {
	DurationSeconds float64 `json:"duration_s"`
	Interrupted     bool    `json:"interrupted,omitempty"`
	Model           string  `json:"model"`

	Requests  int `json:"requests"`
	Completed int `json:"completed"`
	Errors    int `json:"errors"`
	Aborted   int `json:"aborted"`
	Canceled  int `json:"canceled,omitempty"`
	// Rejected counts the requests sent invalid on purpose that the
	// server refused (OutcomeRejected).
	Rejected int `json:"rejected,omitempty"`

	RequestsPerSecond     float64 `json:"requests_per_s"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_s"`
	// Goodput is the completed requests per second that met every SLO.
	GoodputRequests  int     `json:"goodput_requests"`
	GoodputPerSecond float64 `json:"goodput_per_s"`
	OutputTokens     int     `json:"output_tokens"`

	// CPU is the CPU time of the bench process and of Config.Processes
	// during the load.
	CPU []ProcessCPU `json:"cpu,omitempty"`

	TTFT       stats.Summary `json:"ttft_s"`
	InterToken stats.Summary `json:"itl_s"`
	TPOT       stats.Summary `json:"tpot_s"`
	E2E        stats.Summary `json:"e2e_s"`

	ErrorsByKind  map[string]int `json:"errors_by_kind"`
	AbortsByPhase map[string]int `json:"aborts_by_phase"`
}

// Result is a whole run: its configuration, its summary, every request and
// the scraped metrics.
type Result struct {
	Config  Config  `json:"config"`
	Summary Summary `json:"summary"`
	// Started is when the load began; Record.StartSeconds and the metric
	// series' X count from it.
	Started time.Time `json:"started"`
	// Cluster is set by RunCluster: the faults and lease figures of the
	// local cluster the load ran against.
	Cluster *ClusterReport `json:"cluster,omitempty"`
	Records []Record       `json:"records"`
	Metrics []MetricSeries `json:"metrics,omitempty"`
	// Engines are the prompt and generation rates of each scraped engine
	// over the load (EngineRates of the run's series).
	Engines []EngineRate `json:"engines,omitempty"`
	// ScrapeErrors counts failed scrapes per metrics URL.
	ScrapeErrors map[string]int `json:"scrape_errors,omitempty"`
}

// summarize computes the Summary of records over a run of duration d.
func summarize(cfg Config, records []Record, d time.Duration) Summary {
	s := Summary{
		DurationSeconds: d.Seconds(),
		Model:           cfg.Model,
		Requests:        len(records),
		ErrorsByKind:    map[string]int{},
		AbortsByPhase:   map[string]int{},
	}
	var ttft, itl, tpot, e2e []float64
	for i := range records {
		rec := &records[i]
		switch rec.Outcome {
		case OutcomeOK:
		case OutcomeError:
			s.Errors++
			s.ErrorsByKind[rec.ErrorKind]++
			continue
		case OutcomeAborted:
			s.Aborted++
			s.AbortsByPhase[rec.AbortPhase]++
			continue
		case OutcomeRejected:
			s.Rejected++
			continue
		default:
			s.Canceled++
			continue
		}
		s.Completed++
		s.OutputTokens += rec.OutputTokens
		e2e = append(e2e, rec.E2ESeconds)
		if rec.Chunks > 0 {
			ttft = append(ttft, rec.TTFTSeconds)
			itl = append(itl, rec.InterTokenSeconds...)
		}
		if p, ok := rec.tpotSeconds(); ok {
			tpot = append(tpot, p)
		}
		if rec.meets(cfg.SLO) {
			s.GoodputRequests++
		}
	}
	s.RequestsPerSecond = stats.Rate(float64(s.Completed), d)
	s.OutputTokensPerSecond = stats.Rate(float64(s.OutputTokens), d)
	s.GoodputPerSecond = stats.Rate(float64(s.GoodputRequests), d)
	s.TTFT, s.InterToken, s.TPOT, s.E2E = stats.Summarize(ttft), stats.Summarize(itl), stats.Summarize(tpot), stats.Summarize(e2e)
	return s
}

// tpotSeconds is the mean time per output token after the first.
func (rec *Record) tpotSeconds() (float64, bool) {
	if rec.Chunks == 0 || rec.OutputTokens < 2 {
		return 0, false
	}
	return (rec.E2ESeconds - rec.TTFTSeconds) / float64(rec.OutputTokens-1), true
}

// meets reports whether a completed request met every bound of slo. A
// TTFT or TPOT bound is not met by a request without a first token.
func (rec *Record) meets(slo SLO) bool {
	if slo.E2E > 0 && rec.E2ESeconds > slo.E2E.Seconds() {
		return false
	}
	if slo.TTFT > 0 && (rec.Chunks == 0 || rec.TTFTSeconds > slo.TTFT.Seconds()) {
		return false
	}
	if slo.TPOT > 0 {
		p, ok := rec.tpotSeconds()
		if rec.Chunks == 0 || ok && p > slo.TPOT.Seconds() {
			return false
		}
	}
	return true
}

// WriteJSON writes r as JSON that ReadJSON reads back: the config and
// summary indented for people, then one record and one metric series per
// line, so that a long run stays small and greppable.
func (r *Result) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	part := func(prefix string, v any, indent bool) error {
		bw.WriteString(prefix)
		var b []byte
		var err error
		if indent {
			b, err = json.MarshalIndent(v, " ", " ")
		} else {
			b, err = json.Marshal(v)
		}
		if err != nil {
			return fmt.Errorf("bench: encoding results: %w", err)
		}
		_, err = bw.Write(b)
		return err
	}
	list := func(prefix string, n int, item func(int) any) error {
		bw.WriteString(prefix + "[")
		for i := range n {
			sep := "\n  "
			if i > 0 {
				sep = ",\n  "
			}
			if err := part(sep, item(i), false); err != nil {
				return err
			}
		}
		if n > 0 {
			bw.WriteString("\n ")
		}
		bw.WriteString("]")
		return nil
	}
	if err := part("{\n \"config\": ", r.Config, true); err != nil {
		return err
	}
	if err := part(",\n \"summary\": ", r.Summary, true); err != nil {
		return err
	}
	if err := part(",\n \"started\": ", r.Started, false); err != nil {
		return err
	}
	if r.Cluster != nil {
		if err := part(",\n \"cluster\": ", r.Cluster, true); err != nil {
			return err
		}
	}
	if err := list(",\n \"records\": ", len(r.Records), func(i int) any { return &r.Records[i] }); err != nil {
		return err
	}
	if err := list(",\n \"metrics\": ", len(r.Metrics), func(i int) any { return &r.Metrics[i] }); err != nil {
		return err
	}
	if len(r.Engines) > 0 {
		if err := list(",\n \"engines\": ", len(r.Engines), func(i int) any { return &r.Engines[i] }); err != nil {
			return err
		}
	}
	if err := part(",\n \"scrape_errors\": ", r.ScrapeErrors, false); err != nil {
		return err
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// ReadJSON reads a Result written by WriteJSON.
func ReadJSON(rd io.Reader) (*Result, error) {
	var r Result
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("bench: reading results: %w", err)
	}
	return &r, nil
}

// Table writes the human summary of r: what ran, throughput, goodput,
// latency percentiles and errors by kind.
func (r *Result) Table(w io.Writer) error {
	s, c := &r.Summary, &r.Config
	var b strings.Builder
	loop := fmt.Sprintf("closed loop, concurrency %d", c.Concurrency)
	if c.Rate > 0 {
		loop = fmt.Sprintf("open loop, %g req/s Poisson", c.Rate)
	}
	mode := "non-streaming"
	if c.Stream {
		mode = "streaming"
	}
	fmt.Fprintf(&b, "%s %s, model %s, %s; %s workload, input %s, output %s tokens\n",
		mode, c.API, s.Model, loop, c.Workload.Kind, c.Workload.InputLen, c.Workload.OutputLen)
	if s.Interrupted {
		b.WriteString("INTERRUPTED: the figures cover the part of the run before the interruption\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "duration\t%.2f s\n", s.DurationSeconds)
	fmt.Fprintf(tw, "requests\t%d\tcompleted %d, errors %d, aborted %d", s.Requests, s.Completed, s.Errors, s.Aborted)
	if s.Rejected > 0 || c.InvalidRate > 0 {
		fmt.Fprintf(tw, ", rejected as planned %d", s.Rejected)
	}
	if s.Canceled > 0 {
		fmt.Fprintf(tw, ", canceled %d", s.Canceled)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "throughput\t%.2f req/s\t%.1f output tok/s\n", s.RequestsPerSecond, s.OutputTokensPerSecond)
	fmt.Fprintf(tw, "goodput\t%.2f req/s\t%d requests %s\n", s.GoodputPerSecond, s.GoodputRequests, sloText(c.SLO))
	if len(s.CPU) > 0 {
		fmt.Fprintf(tw, "cpu/request\t%s\n", cpuText(s.CPU))
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tp50\tp90\tp99\tmean\tmax\tcount\t")
	row := func(name string, x stats.Summary) {
		if x.Count == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t0\t\n", name)
			return
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t\n", name, x.P50*1e3, x.P90*1e3, x.P99*1e3, x.Mean*1e3, x.Max*1e3, x.Count)
	}
	row("TTFT", s.TTFT)
	row("inter-token", s.InterToken)
	row("TPOT", s.TPOT)
	row("end-to-end", s.E2E)
	tw.Flush()
	b.WriteString("\n")
	if len(r.Engines) > 0 {
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "engine (its counters)\tprompt tok/s\tgeneration tok/s\tprompt tokens\tgenerated\tseconds\t")
		for _, e := range r.Engines {
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.0f\t%.0f\t%.2f\t\n", e.URL, e.PromptTokensPerSecond, e.GenerationTokensPerSecond,
				e.PromptTokens, e.GenerationTokens, e.Seconds)
		}
		tw.Flush()
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "errors: %s\n", countsText(s.ErrorsByKind))
	fmt.Fprintf(&b, "aborted by client: %s\n", countsText(s.AbortsByPhase))
	for _, u := range slices.Sorted(maps.Keys(r.ScrapeErrors)) {
		fmt.Fprintf(&b, "metrics: %d failed scrapes of %s\n", r.ScrapeErrors[u], u)
	}
	if r.Cluster != nil {
		b.WriteString("\n")
		writeClusterReport(&b, r.Cluster)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cpuText is each process's CPU milliseconds per request and their sum.
func cpuText(cpu []ProcessCPU) string {
	var parts []string
	total := 0.0
	for _, p := range cpu {
		if p.Err != "" {
			parts = append(parts, fmt.Sprintf("%s (pid %d) unknown", p.Name, p.PID))
			continue
		}
		total += p.PerRequestMs
		parts = append(parts, fmt.Sprintf("%s %.3f ms", p.Name, p.PerRequestMs))
	}
	return fmt.Sprintf("%.3f ms: %s", total, strings.Join(parts, ", "))
}

func sloText(slo SLO) string {
	var parts []string
	if slo.TTFT > 0 {
		parts = append(parts, "TTFT ≤ "+slo.TTFT.String())
	}
	if slo.TPOT > 0 {
		parts = append(parts, "TPOT ≤ "+slo.TPOT.String())
	}
	if slo.E2E > 0 {
		parts = append(parts, "e2e ≤ "+slo.E2E.String())
	}
	if len(parts) == 0 {
		return "(completed; no SLO set)"
	}
	return "within " + strings.Join(parts, ", ")
}

// countsText formats counts by key, sorted by key, or "none".
func countsText(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
