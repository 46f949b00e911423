package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/kvlease/kvlease/openai"
)

// A completions batch (prompt as an array of strings or of token-id
// arrays) cannot go through P/D as one request: a prefill answer carries
// the lease of one prompt. The proxy runs each prompt through both legs as
// a request of its own (engine id: the request's id + "-" + the prompt's
// index) and merges the answers as one engine answers a batch: prompt i's
// choice j at index i×n+j, usage summed, one usage chunk and one [DONE]
// at the end of a stream. At most maxBatchInFlight prompts are in flight
// at once. The first failure answers the request (or ends its stream with
// an error event) and cancels the other prompts, whose legs then abort on
// their engines as for a client that left.

// maxBatchInFlight bounds the prompts of one batch in flight at once:
// the batch holds one of the proxy's MaxConcurrentRequests, and its
// prompts' legs must not multiply that by openai.MaxPrompts.
const maxBatchInFlight = 16

// batchPrompts splits a completions prompt that is a batch into its
// prompts, raw; a single prompt gives nil. A batch over openai.MaxPrompts
// is a 400.
func batchPrompts(prompt json.RawMessage) ([]json.RawMessage, *openai.Error) {
	p := bytes.TrimSpace(prompt)
	if len(p) < 2 || p[0] != '[' {
		return nil, nil
	}
	inner := bytes.TrimSpace(p[1:])
	if len(inner) == 0 || (inner[0] != '"' && inner[0] != '[') {
		return nil, nil // token ids, or empty: one prompt (the engine checks it)
	}
	var ps []json.RawMessage
	if json.Unmarshal(p, &ps) != nil {
		return nil, nil // the engine names what is wrong
	}
	if len(ps) > openai.MaxPrompts {
		return nil, openai.BadRequest("prompt", "prompt has %d entries; at most %d are allowed", len(ps), openai.MaxPrompts)
	}
	return ps, nil
}

// batch merges the answers of a batch's prompts.
type batch struct {
	c       *call
	n       int // choices per prompt
	stream  bool
	cancel  context.CancelFunc
	subs    []*batchWriter
	usageEv []byte // a stream's usage chunk (the last prompt's), to carry the summed usage

	mu        sync.Mutex
	wroteHead bool
	failed    *batchWriter // the first prompt that failed
	usage     [4]int64     // prompt, completion, total, cached tokens of the usage chunks
	hasUsage  bool
}

// runBatch runs prompts (raw) of request req, a completions batch of a
// body of size bytes.
func (c *call) runBatch(req object, prompts []json.RawMessage, size int) {
	b := &batch{c: c, n: 1, stream: isTrue(req.get("stream"))}
	if v, err := strconv.Atoi(string(bytes.TrimSpace(req.get("n")))); err == nil && v > 0 {
		b.n = v
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	b.cancel = cancel
	r := c.r.WithContext(ctx)
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxBatchInFlight)
	b.subs = make([]*batchWriter, len(prompts))
	for i, p := range prompts {
		sub := append(object(nil), req...)
		sub.set("prompt", p)
		bw := &batchWriter{b: b, offset: i * b.n, h: http.Header{}}
		b.subs[i] = bw
		sc := &call{p: c.p, w: bw, r: r, ctx: ctx, id: c.id + "-" + strconv.Itoa(i)}
		bw.sub = sc
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				sc.legs(sub, size) // the batch's size bounds each prompt's
			case <-ctx.Done():
				sc.outcome = OutcomeClientCancelled // never sent
			}
			b.done(bw)
		}()
	}
	wg.Wait()
	c.outcome = OutcomeOK
	switch {
	case c.ctx.Err() != nil:
		c.outcome = OutcomeClientCancelled
	case b.failed != nil:
		c.outcome = b.failed.sub.outcome
		if !b.wroteHead {
			h := c.w.Header()
			for k, v := range b.failed.h {
				h[k] = v
			}
			c.w.WriteHeader(b.failed.status)
			c.w.Write(b.failed.body)
		}
	case b.stream:
		b.endStream()
	default:
		b.writeWhole()
	}
}

// done is called when a prompt's legs have ended: a failure (an error
// status) fails the batch.
func (b *batch) done(bw *batchWriter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ok := bw.status == http.StatusOK && (bw.sub.outcome == OutcomeOK || bw.sub.outcome == "")
	if ok || b.failed != nil {
		return
	}
	if bw.status == 0 && bw.sub.outcome == OutcomeClientCancelled {
		return // cancelled by another prompt's failure or the client
	}
	b.failed = bw
	b.cancel()
	if b.wroteHead && len(bw.body) > 0 {
		// The stream has started: end it with the error as an event.
		b.c.w.Write(openai.AppendSSE(nil, bytes.TrimSpace(bw.body)))
		b.c.w.Write([]byte(openai.SSEDone))
		http.NewResponseController(b.c.w).Flush()
	}
}

// event passes one event of prompt bw's stream to the client: choices
// renumbered, the usage chunk and [DONE] kept for the end.
func (b *batch) event(bw *batchWriter, ev []byte) {
	data := eventData(ev)
	if data == nil || bytes.Equal(data, doneData) {
		return
	}
	obj, err := parseObject(data)
	out := ev
	if err == nil {
		var cs []json.RawMessage
		if json.Unmarshal(obj.get("choices"), &cs) == nil && len(cs) == 0 && !isNullOrAbsent(obj.get("usage")) {
			b.mu.Lock()
			b.addUsage(obj.get("usage"))
			b.usageEv = append(b.usageEv[:0], data...)
			b.mu.Unlock()
			return
		}
		if renumbered, ok := renumber(obj, bw.offset); ok {
			out = openai.AppendSSE(nil, renumbered)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed != nil {
		return
	}
	if !b.wroteHead {
		b.wroteHead = true
		h := b.c.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		b.c.w.WriteHeader(http.StatusOK)
		b.c.streaming = true
	}
	if _, err := b.c.w.Write(out); err != nil {
		b.cancel()
		return
	}
	http.NewResponseController(b.c.w).Flush()
}

// renumber returns obj with each choice's index moved by offset.
func renumber(obj object, offset int) ([]byte, bool) {
	var cs []json.RawMessage
	if json.Unmarshal(obj.get("choices"), &cs) != nil {
		return nil, false
	}
	out := []byte{'['}
	for k, raw := range cs {
		ch, err := parseObject(raw)
		if err != nil {
			return nil, false
		}
		idx, err := strconv.Atoi(string(bytes.TrimSpace(ch.get("index"))))
		if err != nil {
			return nil, false
		}
		ch.set("index", strconv.AppendInt(nil, int64(idx+offset), 10))
		if k > 0 {
			out = append(out, ',')
		}
		out = ch.appendJSON(out)
	}
	obj.set("choices", append(out, ']'))
	return obj.appendJSON(nil), true
}

// addUsage adds a usage object to the batch's totals; b.mu is held.
func (b *batch) addUsage(raw json.RawMessage) {
	var u struct {
		Prompt     int64 `json:"prompt_tokens"`
		Completion int64 `json:"completion_tokens"`
		Total      int64 `json:"total_tokens"`
		Details    struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	if json.Unmarshal(raw, &u) != nil {
		return
	}
	b.hasUsage = true
	b.usage[0] += u.Prompt
	b.usage[1] += u.Completion
	b.usage[2] += u.Total
	b.usage[3] += u.Details.Cached
}

func (b *batch) usageJSON() []byte {
	u := openai.NewUsage(int(b.usage[0]), int(b.usage[1]), int(b.usage[3]))
	out, _ := json.Marshal(u)
	return out
}

// endStream ends a batch's stream: the summed usage chunk when the
// prompts sent theirs, and [DONE].
func (b *batch) endStream() {
	if !b.wroteHead {
		return // nothing was streamed: every prompt failed or was cancelled
	}
	w := b.c.w
	if b.hasUsage {
		if obj, err := parseObject(b.usageEv); err == nil {
			obj.set("usage", b.usageJSON())
			w.Write(openai.AppendSSE(nil, obj.appendJSON(nil)))
		}
	}
	w.Write([]byte(openai.SSEDone))
}

// writeWhole answers a non-streaming batch: the first prompt's answer with
// every prompt's choices, renumbered, and the summed usage.
func (b *batch) writeWhole() {
	var choices []byte
	var first object
	for i, bw := range b.subs {
		obj, err := parseObject(bw.body)
		if err != nil {
			b.c.fail(OutcomeDecodeFailed, gatewayError(http.StatusBadGateway, "the decode answer of prompt %d is not a JSON object", i))
			return
		}
		if i == 0 {
			first = obj
		}
		renumbered, ok := renumber(obj, bw.offset)
		if !ok {
			b.c.fail(OutcomeDecodeFailed, gatewayError(http.StatusBadGateway, "the decode answer of prompt %d has malformed choices", i))
			return
		}
		r, _ := parseObject(renumbered)
		cs := bytes.TrimSpace(r.get("choices"))
		if len(cs) > 2 {
			if len(choices) > 0 {
				choices = append(choices, ',')
			}
			choices = append(choices, cs[1:len(cs)-1]...)
		}
		b.addUsage(obj.get("usage"))
	}
	first.set("choices", append(append([]byte{'['}, choices...), ']'))
	first.set("usage", b.usageJSON())
	out := first.appendJSON(nil)
	h := b.c.w.Header()
	h.Set("Content-Type", "application/json")
	b.c.w.WriteHeader(http.StatusOK)
	b.c.w.Write(out)
}

// batchWriter is the ResponseWriter of one prompt of a batch: a stream's
// events go to the batch as they come; anything else (a whole answer, an
// error) is kept for the end.
type batchWriter struct {
	b      *batch
	sub    *call
	offset int // index of the prompt's first choice
	h      http.Header
	status int
	body   []byte
}

func (w *batchWriter) Header() http.Header { return w.h }

func (w *batchWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *batchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status == http.StatusOK && w.b.stream && w.sub.streaming {
		w.b.event(w, p)
		return len(p), nil
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// Flush is a no-op: the batch flushes the client's writer itself.
func (w *batchWriter) Flush() {}
