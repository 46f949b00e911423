package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// model is the name serve gives the tiny profile.
const model = "kvlease-tiny"

// prompts are long enough to fill several 16-token KV blocks, so every
// P/D request leases blocks and D pulls them.
var prompts = func() []string {
	words := strings.Fields("the lease holds the prefill blocks until the decode engine pulls them over the wire " +
		"and a partition that drops packets silently must not leak a single block nor change one token of any answer")
	out := make([]string, 8)
	for i := range out {
		var b strings.Builder
		for j := range 60 + 10*i {
			b.WriteString(words[(i*7+j*3)%len(words)])
			b.WriteByte(' ')
		}
		out[i] = b.String()
	}
	return out
}()

// Request is one completion of the workload.
type Request struct {
	Prompt int  // index into the prompts
	Seed   int  // sampling seed; 0 is greedy
	Stream bool // server-sent events
	// Abort: the client hangs up after the first streamed event (streams
	// only); the answer is not compared.
	Abort bool
}

func (r Request) body(stream bool) []byte {
	m := map[string]any{"model": model, "prompt": prompts[r.Prompt], "max_tokens": 16, "ignore_eos": true,
		"stream": stream}
	if r.Seed != 0 {
		m["seed"], m["temperature"] = r.Seed, 0.9
	} else {
		m["temperature"] = 0
	}
	b, _ := json.Marshal(m)
	return b
}

// complete sends r to base and returns the generated text.
func complete(ctx context.Context, client *http.Client, base string, r Request, stream bool) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(r.body(stream)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	type choice struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	}
	if !stream {
		var out struct{ Choices []choice }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return "", err
		}
		if len(out.Choices) != 1 {
			return "", fmt.Errorf("%d choices", len(out.Choices))
		}
		return out.Choices[0].Text, nil
	}
	var b strings.Builder
	finished, done := false, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if r.Abort && b.Len() > 0 {
			return "", errClientAbort // the deferred Close hangs up
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var ev struct{ Choices []choice }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return "", fmt.Errorf("event %q: %w", data, err)
		}
		for _, c := range ev.Choices {
			b.WriteString(c.Text)
			finished = finished || c.FinishReason != nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if !done || !finished {
		return "", errors.New("stream ended before its last event")
	}
	return b.String(), nil
}

// errClientAbort ends a request the client abandoned on purpose.
var errClientAbort = errors.New("chaos: client hung up (on purpose)")

// StatusError is an HTTP answer other than 200.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// Reference returns the single engine's answer to r (not streamed),
// computed once.
func (h *Harness) Reference(ctx context.Context, r Request) (string, error) {
	key := fmt.Sprint(r.Prompt, "/", r.Seed)
	h.refMu.Lock()
	want, ok := h.refAns[key]
	h.refMu.Unlock()
	if ok {
		return want, nil
	}
	want, err := complete(ctx, http.DefaultClient, h.refURL, r, false)
	if err != nil {
		return "", fmt.Errorf("chaos: reference engine: %w", err)
	}
	h.refMu.Lock()
	h.refAns[key] = want
	h.refMu.Unlock()
	return want, nil
}

// Result is the outcome of one request through the proxy.
type Result struct {
	Request Request
	Start   time.Time
	Err     error  // nil: answered
	Got     string // the answer, when answered
	Equal   bool   // the answer equals the reference's
	Aborted bool   // the client hung up on purpose (Request.Abort)
}

// Do sends r through the proxy and compares the answer with the
// reference. Only an error of the reference engine is returned; the
// request's own error is in the Result.
func (h *Harness) Do(ctx context.Context, r Request) (Result, error) {
	want, err := h.Reference(ctx, r)
	if err != nil {
		return Result{}, err
	}
	res := Result{Request: r, Start: time.Now()}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	res.Got, res.Err = complete(rctx, http.DefaultClient, h.Cluster.URL(), r, r.Stream)
	res.Equal = res.Err == nil && res.Got == want
	if errors.Is(res.Err, errClientAbort) {
		res.Err, res.Aborted = nil, true
	}
	return res, nil
}

// Tally counts results.
type Tally struct {
	mu        sync.Mutex
	Sent      int
	Answered  int
	Equal     int
	Aborted   int            // hung up on purpose by the client
	Errors    map[string]int // by kind: "HTTP 502", "connection", "stream cut", ...
	Different []Result       // answered, but not as the reference did
}

// Add records res.
func (t *Tally) Add(res Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Sent++
	switch {
	case res.Aborted:
		t.Aborted++
	case res.Err != nil:
		if t.Errors == nil {
			t.Errors = map[string]int{}
		}
		t.Errors[errorKind(res.Err)]++
	case res.Equal:
		t.Answered++
		t.Equal++
	default:
		t.Answered++
		t.Different = append(t.Different, res)
	}
}

// Snapshot returns a copy of the counts.
func (t *Tally) Snapshot() (sent, answered, equal int, errs map[string]int, different []Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	errs = map[string]int{}
	for k, v := range t.Errors {
		errs[k] = v
	}
	return t.Sent, t.Answered, t.Equal, errs, append([]Result(nil), t.Different...)
}

func (t *Tally) String() string {
	sent, answered, equal, errs, diff := t.Snapshot()
	t.mu.Lock()
	aborted := t.Aborted
	t.mu.Unlock()
	return fmt.Sprintf("%d sent, %d answered, %d equal to the reference, %d different, %d hung up by the client, errors %v",
		sent, answered, equal, len(diff), aborted, errs)
}

func errorKind(err error) string {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("HTTP %d", se.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case strings.Contains(err.Error(), "stream ended"):
		return "stream cut"
	default:
		return "connection"
	}
}

// Load runs workers clients, each sending requests drawn from rng's seed
// one after another, until ctx ends; every result goes to t. It returns
// when every client has finished its last request, or with the reference
// engine's first error.
func (h *Harness) Load(ctx context.Context, seed uint64, workers int, t *Tally) error {
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for ctx.Err() == nil {
				r := RandomRequest(rng)
				// The request itself outlives ctx: a load stopped while a
				// fault heals still sees its last answers.
				res, err := h.Do(context.WithoutCancel(ctx), r)
				if err != nil {
					errc <- err
					return
				}
				t.Add(res)
				if res.Err != nil {
					// A client backs off after a failure: while the proxy
					// or P is down, failures come at once and would
					// otherwise spin.
					sleepCtx(ctx, 100*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// RandomRequest draws a request: any prompt, greedy or seeded, streamed
// or not.
func RandomRequest(rng *rand.Rand) Request {
	r := Request{Prompt: rng.IntN(len(prompts)), Stream: rng.IntN(2) == 0}
	if rng.IntN(2) == 0 {
		r.Seed = 1 + rng.IntN(5)
	}
	r.Abort = r.Stream && rng.IntN(10) == 0
	return r
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
