package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/proxy/route"
)

// call is one generation request on its way through the two legs.
type call struct {
	p   *Proxy
	w   http.ResponseWriter
	r   *http.Request
	ctx context.Context // the client's: done when it leaves
	// id is the request's id at the engines (both legs' X-Request-Id, the
	// aborts): a fresh UUID, or the client's X-Request-Id with a random
	// suffix (engineRequestID). The client gets its own id back.
	id      string
	outcome string

	// holder is the prefill engine whose lease the request holds (its
	// answer carried kv_transfer_params), nil before.
	holder *engine
	// cached is P's usage.prompt_tokens_details.cached_tokens, put in
	// the final usage when hasCached.
	cached    int64
	hasCached bool

	// Scratch member lists of the client's body and P's answer, reused
	// with the call (calls).
	members, answer [32]field
	// Scratch masks of the engines a leg skips.
	skipPrefill, skipDecode [8]bool
	// streaming is set once the event stream's header went to the client:
	// errors after it are events, not statuses.
	streaming bool
	// idHeader is id as a header value, shared by the legs.
	idHeader []string
	// via is the legs' Via header (Proxy.via), nil before the first leg.
	via []string
}

// legResult says what a leg's attempt on one engine came to.
type legResult uint8

const (
	legDone  legResult = iota // it succeeded: go on
	legFinal                  // the client has its answer (or left): stop
	legRetry                  // the engine could not take it: try another
)

// prefillKV is what the proxy sends P in kv_transfer_params: vLLM's
// request for a remote decode, with every remote field null.
var prefillKV = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,` +
	`"remote_block_ids":null,"remote_host":null,"remote_port":null}`)

var (
	jsonFalse = json.RawMessage("false")
	jsonOne   = json.RawMessage("1")
)

func (p *Proxy) generate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if p.looped(r.Header) {
		// Before the concurrency limit: the loop would otherwise take
		// every slot and end in 429.
		p.m.countOutcome(OutcomeLoopDetected)
		writeError(w, p.loopError())
		return
	}
	select {
	case p.sem <- struct{}{}:
	default:
		p.m.countOutcome(OutcomeOverloaded)
		writeError(w, openai.Overloaded(time.Second, "the kvlease proxy is at its limit of %d concurrent requests",
			p.cfg.MaxConcurrentRequests))
		return
	}
	p.m.inflight.Inc()
	c := calls.Get().(*call)
	c.p, c.w, c.r, c.ctx = p, w, r, r.Context()
	defer func() {
		p.m.inflight.Dec()
		p.m.countOutcome(c.outcome)
		p.m.total.Observe(time.Since(start).Seconds())
		// Last: once InFlight says the request is gone, its outcome is
		// counted (TestCancelConcurrentStreams waits on InFlight, then
		// reads the outcomes).
		<-p.sem
		c.reset()
		calls.Put(c)
	}()
	c.run()
}

// prefillerHostPortKey is route.HeaderPrefillerHostPort as a key of
// http.Header.
var prefillerHostPortKey = http.CanonicalHeaderKey(route.HeaderPrefillerHostPort)

// scratchMask returns buf[:n] cleared, or a new mask when buf is too short.
func scratchMask(buf []bool, n int) []bool {
	if n > len(buf) {
		return make([]bool, n)
	}
	clear(buf[:n])
	return buf[:n]
}

// calls recycles calls (and their scratch member lists): nothing holds a
// call once generate returned.
var calls = sync.Pool{New: func() any { return new(call) }}

// reset clears c for reuse, dropping its references.
func (c *call) reset() { *c = call{} }

func (c *call) run() {
	clientID := c.r.Header.Get("X-Request-Id")
	id, e := requestID(clientID)
	if e != nil {
		c.fail(OutcomeBadRequest, e)
		return
	}
	c.id = id
	if clientID != "" {
		// Another client may send the same id, now or once this request
		// finished: the engines must see two requests, so that nothing
		// done for one (an abort on a client's disconnect) reaches the
		// other (S29).
		c.id = engineRequestID(id)
	}
	c.w.Header()["X-Request-Id"] = []string{id}
	body, err := readAllBounded(http.MaxBytesReader(c.w, c.r.Body, c.p.cfg.MaxRequestBytes), c.p.cfg.MaxRequestBytes, c.r.ContentLength)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			c.fail(OutcomeBadRequest, openai.TooLarge("the request body is over %d bytes", c.p.cfg.MaxRequestBytes))
		case c.ctx.Err() != nil:
			c.outcome = OutcomeClientCancelled
		default:
			c.fail(OutcomeBadRequest, openai.BadRequest("", "reading the request body: %v", err))
		}
		return
	}
	req, err := parseObjectInto(c.members[:0], body)
	if err != nil {
		c.fail(OutcomeBadRequest, openai.BadRequest("", "the request body must be a JSON object: %v", err))
		return
	}
	if c.r.URL.Path == "/v1/completions" {
		if prompts, e := batchPrompts(req.get("prompt")); e != nil {
			c.fail(OutcomeBadRequest, e)
			return
		} else if len(prompts) > 1 {
			c.runBatch(req, prompts, len(body))
			return
		}
	}
	c.legs(req, len(body))
}

// legs runs the request req, of a body of size bytes, through the
// prefill and the decode leg.
func (c *call) legs(req object, size int) {
	skip, e := c.prefillCandidates()
	if e != nil {
		c.fail(OutcomeBadRequest, e)
		return
	}
	if (isTrue(req.get("echo")) && !isNullOrAbsent(req.get("logprobs"))) || !isNullOrAbsent(req.get("prompt_logprobs")) {
		// echo with logprobs, and prompt_logprobs, score every prompt
		// token: the decode engine computes the prompt itself (a remote
		// prefill's KV would leave nothing to score).
		c.decode(decodeBody(make([]byte, 0, size+64), req, nil))
		return
	}
	// Both legs' bodies in one allocation: the client's body and room for
	// the edits (decodeBody may append P's kv_transfer_params).
	legs := make([]byte, 0, 2*size+len(prefillKV)+256)
	pre := prefillBody(legs, req)
	kv, ok := c.prefill(pre, skip)
	if !ok {
		return
	}
	rest := pre[len(pre):]
	if need := size + len(kv) + len(`,"kv_transfer_params":`); cap(rest) < need {
		rest = make([]byte, 0, need) // P's parameters did not fit: one buffer, not a growing one
	}
	c.decode(decodeBody(rest, req, kv))
}

// prefillEdits are the prefill leg's edits of the client's body
// (docs/protocol.md, "Roles and the two legs"; the same edits as vLLM's toy proxy and
// llm-d's nixlv2 sidecar): one token, not streamed, no minimum, with a
// request for a remote decode.
var prefillEdits = []edit{
	{key: "stream", val: jsonFalse},
	{key: "stream_options", del: true},
	{key: "max_tokens", val: jsonOne},
	{key: "max_completion_tokens", val: jsonOne, ifPresent: true},
	{key: "min_tokens", del: true},
	{key: "min_completion_tokens", del: true},
	// P's answer is only the lease: the choices, their logprobs and the
	// echoed prompt are the decode leg's.
	{key: "n", del: true},
	{key: "logprobs", del: true},
	{key: "top_logprobs", del: true},
	{key: "echo", del: true},
	{key: "kv_transfer_params", val: prefillKV},
}

// prefillBody is the prefill leg's body, appended to dst.
func prefillBody(dst []byte, req object) []byte {
	return req.appendEdited(dst, prefillEdits)
}

// decodeBody is the decode leg's body, appended to dst: the client's
// request with P's kv_transfer_params verbatim (without them when P gave
// none: D then prefills the prompt itself).
func decodeBody(dst []byte, req object, kv json.RawMessage) []byte {
	e := [1]edit{{key: "kv_transfer_params", val: kv, del: kv == nil}}
	return req.appendEdited(dst, e[:])
}

// prefillCandidates honours x-prefiller-host-port: the returned mask
// skips every prefill engine the header does not name.
func (c *call) prefillCandidates() ([]bool, *openai.Error) {
	if len(c.r.Header[prefillerHostPortKey]) == 0 {
		return scratchMask(c.skipPrefill[:], len(c.p.prefill.engines)), nil
	}
	v := strings.Join(c.r.Header.Values(route.HeaderPrefillerHostPort), ",")
	named, err := route.ParseHostPorts(v)
	if err != nil {
		return nil, openai.BadRequest(route.HeaderPrefillerHostPort, "%s: %v", route.HeaderPrefillerHostPort, err)
	}
	skip, any := route.Match(named, c.p.prefill.hostPorts)
	if !any {
		return nil, openai.BadRequest(route.HeaderPrefillerHostPort,
			"%s names %s, not a prefill engine of this proxy (they are %s)",
			route.HeaderPrefillerHostPort, strings.Join(named, ", "), strings.Join(c.p.prefill.hostPorts, ", "))
	}
	return skip, nil
}

// prefill runs the prefill leg and returns P's kv_transfer_params (nil if
// P gave none). ok is false when the client already has its answer.
func (c *call) prefill(body []byte, skip []bool) (kv json.RawMessage, ok bool) {
	var failures []string
	for attempt := range c.p.cfg.MaxPrefillAttempts {
		e, found := c.p.pick(&c.p.prefill, skip)
		if !found {
			break
		}
		skip[e.index] = true
		if attempt > 0 {
			c.p.m.retryPrefill.Inc()
		}
		kv, res, why := c.prefillOn(e, body)
		switch res {
		case legDone:
			return kv, true
		case legFinal:
			return nil, false
		}
		failures = append(failures, why)
	}
	c.fail(OutcomePrefillUnreachable, gatewayError(http.StatusBadGateway,
		"no prefill engine could be reached: %s", strings.Join(failures, "; ")))
	return nil, false
}

func (c *call) prefillOn(e *engine, body []byte) (json.RawMessage, legResult, string) {
	defer e.inflight.Add(-1)
	start := time.Now()
	deadline := start.Add(c.p.cfg.PrefillTimeout)
	resp, err := c.post(deadline, e, body)
	if err != nil {
		if isDialError(err) && c.ctx.Err() == nil {
			c.p.markDown(e)
			c.p.log.Warn("prefill engine unreachable", "req", c.id, "peer", e.base, "reason", err)
			return nil, legRetry, fmt.Sprintf("%s: %v", e.hostPort, err)
		}
		c.legFailed(deadline, err, e, RolePrefill, e)
		return nil, legFinal, ""
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		// P refused the request: nothing of it is held there.
		outcome := OutcomePrefillError
		if resp.StatusCode == http.StatusLoopDetected {
			outcome = OutcomeLoopDetected // P is a proxy that sent it back here
		}
		c.passError(resp, outcome, e)
		return nil, legFinal, ""
	}
	raw, err := readBody(resp, c.p.cfg.MaxPrefillResponseBytes)
	if err != nil {
		c.legFailed(deadline, err, e, RolePrefill, e)
		return nil, legFinal, ""
	}
	c.p.m.legPrefill.Observe(time.Since(start).Seconds())
	ans, err := parseObjectInto(c.answer[:0], raw)
	if err != nil {
		c.p.abortAll(c.ctx, c.id, c.r.Header, e)
		c.fail(OutcomePrefillError, gatewayError(http.StatusBadGateway,
			"prefill engine %s answered with invalid JSON: %v", e.hostPort, err))
		return nil, legFinal, ""
	}
	kv := ans.get("kv_transfer_params")
	switch {
	case isNullOrAbsent(kv):
		kv = nil
		c.p.log.Warn("prefill answer has no kv_transfer_params; decode prefills itself", "req", c.id, "peer", e.base)
	case bytes.TrimSpace(kv)[0] != '{':
		c.p.abortAll(c.ctx, c.id, c.r.Header, e)
		c.fail(OutcomePrefillError, gatewayError(http.StatusBadGateway,
			"prefill engine %s answered with kv_transfer_params that are not an object", e.hostPort))
		return nil, legFinal, ""
	default:
		c.holder = e
	}
	c.cached, c.hasCached = cachedTokens(ans)
	return kv, legDone, ""
}

// decode runs the decode leg, trying another decode engine with the same
// kv_transfer_params while one cannot take the request.
func (c *call) decode(body []byte) {
	skip := scratchMask(c.skipDecode[:], len(c.p.decode.engines))
	var failures []string
	for attempt := range c.p.cfg.MaxDecodeAttempts {
		if c.ctx.Err() != nil {
			c.p.abortAll(c.ctx, c.id, c.r.Header, c.holder)
			c.outcome = OutcomeClientCancelled
			return
		}
		e, found := c.p.pick(&c.p.decode, skip)
		if !found {
			break
		}
		skip[e.index] = true
		if attempt > 0 {
			c.p.m.retryDecode.Inc()
		}
		res, why := c.decodeOn(e, body)
		if res != legRetry {
			return
		}
		c.p.log.Warn("decode engine could not take the request", "req", c.id, "peer", e.base, "reason", why)
		failures = append(failures, why)
	}
	// Nobody will read P's blocks: release them now rather than at the
	// lease's expiry.
	c.p.abortAll(c.ctx, c.id, c.r.Header, c.holder)
	released := ""
	if c.holder != nil {
		released = "; the prefill engine's KV blocks were released"
	}
	c.fail(OutcomeDecodeUnavailable, openai.Unavailable("no decode engine could take the request (%s)%s",
		strings.Join(failures, "; "), released))
}

func (c *call) decodeOn(e *engine, body []byte) (legResult, string) {
	defer e.inflight.Add(-1)
	start := time.Now()
	deadline := start.Add(c.p.cfg.DecodeTimeout)
	resp, err := c.post(deadline, e, body)
	if err != nil {
		if c.ctx.Err() != nil || expired(deadline) {
			c.legFailed(deadline, err, e, RoleDecode, e, c.holder)
			return legFinal, ""
		}
		c.p.markDown(e)
		if !isDialError(err) {
			// The request may have reached e: make sure it lets go.
			c.p.abortAll(c.ctx, c.id, c.r.Header, e)
		}
		return legRetry, fmt.Sprintf("%s: %v", e.hostPort, err)
	}
	defer resp.Body.Close()
	c.p.m.legDecodeFirstEvent.Observe(time.Since(start).Seconds())
	switch {
	case resp.StatusCode == http.StatusLoopDetected:
		// D is a proxy that sent the request back here: no other engine
		// makes that right.
		c.p.abortAll(c.ctx, c.id, c.r.Header, c.holder)
		c.passError(resp, OutcomeLoopDetected, e)
		return legFinal, ""
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		msg, _ := readBounded(resp.Body, maxErrorBytes)
		return legRetry, fmt.Sprintf("%s: %d %s", e.hostPort, resp.StatusCode, errorMessage(msg))
	case resp.StatusCode/100 != 2:
		// D rejected the request (it tells P itself; the abort makes sure
		// even with an engine that does not).
		c.p.abortAll(c.ctx, c.id, c.r.Header, c.holder)
		c.passError(resp, OutcomeDecodeError, e)
		return legFinal, ""
	}
	if isEventStream(resp.Header.Get("Content-Type")) {
		return c.stream(deadline, e, resp, start)
	}
	raw, err := readBody(resp, c.p.cfg.MaxResponseBytes)
	if err != nil {
		if c.ctx.Err() != nil || expired(deadline) || errors.Is(err, errTooLarge) {
			c.legFailed(deadline, err, e, RoleDecode, e, c.holder)
			return legFinal, ""
		}
		c.p.abortAll(c.ctx, c.id, c.r.Header, e)
		return legRetry, fmt.Sprintf("%s: reading its answer: %v", e.hostPort, err)
	}
	if c.hasCached {
		raw, _ = withCachedTokens(raw, c.cached)
	}
	c.p.m.legDecode.Observe(time.Since(start).Seconds())
	h := c.w.Header()
	h["Content-Type"] = contentType(resp.Header)
	c.w.WriteHeader(resp.StatusCode)
	c.w.Write(raw)
	c.outcome = OutcomeOK
	return legFinal, ""
}

// stream passes D's event stream to the client, flushing each event unless
// the next one has already arrived whole (then the two leave in one write:
// no event waits on the proxy). The
// stream starts (and the decode engine can no longer be replaced) when
// D's first event has arrived whole.
func (c *call) stream(deadline time.Time, e *engine, resp *http.Response, start time.Time) (legResult, string) {
	events := newEventReader(resp.Body, c.p.cfg.MaxEventBytes)
	defer events.release()
	ev, err := events.next()
	if err != nil && (len(ev) == 0 || !errors.Is(err, io.EOF)) {
		if c.ctx.Err() != nil || expired(deadline) || errors.Is(err, errEventTooLong) {
			c.legFailed(deadline, err, e, RoleDecode, e, c.holder)
			return legFinal, ""
		}
		c.p.abortAll(c.ctx, c.id, c.r.Header, e)
		return legRetry, fmt.Sprintf("%s: its stream ended before the first event: %v", e.hostPort, err)
	}
	h := c.w.Header()
	h["Content-Type"] = contentType(resp.Header)
	h["Cache-Control"] = noCache
	h["X-Accel-Buffering"] = no
	c.w.WriteHeader(resp.StatusCode)
	c.streaming = true
	rc := http.NewResponseController(c.w)
	done := false
	for {
		if len(ev) > 0 {
			if d := eventData(ev); bytes.Equal(d, doneData) {
				done = true
			} else if c.hasCached {
				ev = rewriteUsageEvent(ev, c.cached)
			}
			if _, werr := c.w.Write(ev); werr != nil {
				c.p.abortAll(c.ctx, c.id, c.r.Header, e, c.holder)
				c.outcome = OutcomeClientCancelled
				return legFinal, ""
			}
			if events.ready() {
				// The next event is here whole: it joins this write
				// rather than taking a flush (a write) of its own.
			} else if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				c.p.abortAll(c.ctx, c.id, c.r.Header, e, c.holder)
				c.outcome = OutcomeClientCancelled
				return legFinal, ""
			}
		}
		if err != nil {
			break
		}
		ev, err = events.next()
	}
	switch {
	case errors.Is(err, io.EOF) && done:
		c.p.m.legDecode.Observe(time.Since(start).Seconds())
		c.outcome = OutcomeOK
		return legFinal, ""
	case errors.Is(err, io.EOF):
		err = errors.New("the stream ended without [DONE]")
	}
	c.legFailed(deadline, err, e, RoleDecode, e, c.holder)
	return legFinal, ""
}

// expired reports whether a leg's deadline has passed.
func expired(deadline time.Time) bool { return !time.Now().Before(deadline) }

// post sends one leg's body to e at the client's path, with the request's
// id and the client's credentials. The leg, its answer's body included,
// ends when the client leaves or at deadline.
func (c *call) post(deadline time.Time, e *engine, body []byte) (*http.Response, error) {
	if c.via == nil {
		c.via = c.p.via(c.r)
	}
	if c.p.legs != nil {
		return c.p.legs.roundTrip(c.ctx, deadline, e, &legRequest{path: c.r.URL.Path, id: c.id,
			auth: c.p.engineAuth, client: c.r.Header, via: c.via, body: body})
	}
	ctx, cancel := context.WithDeadline(c.ctx, deadline)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+c.r.URL.Path, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	if c.idHeader == nil {
		c.idHeader = []string{c.id}
	}
	req.Header["Content-Type"] = applicationJSON
	req.Header["X-Request-Id"] = c.idHeader
	// A leg may be replayed on a new connection when the engine closed a
	// kept-alive one before answering (a graceful shutdown closing its idle
	// connections races the request): net/http does so for a request it
	// is told is idempotent, and an empty Idempotency-Key says so without
	// sending the header. The replay then dials, and an engine that is
	// gone fails the dial, which moves the leg to another engine, instead
	// of the client getting "EOF".
	req.Header["Idempotency-Key"] = nil
	c.p.engineHeaders(req.Header, c.r.Header, c.via)
	// The transport, not the client: a leg follows no redirect and keeps
	// no cookies, and http.Client would copy the headers for redirects
	// on every request.
	resp, err := c.p.transport.RoundTrip(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends a leg's context when its answer's body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// Header values shared by every request: net/http does not change the
// headers it sends.
var (
	applicationJSON = []string{"application/json"}
	noCache         = []string{"no-cache"}
	no              = []string{"no"}
	emptyValue      = []string{""}
)

// isEventStream reports whether a Content-Type is text/event-stream, with
// any parameters: the media type, case-insensitive, as mime.ParseMediaType
// reads it, without its allocations.
func isEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// contentType returns h's Content-Type as a header value to pass on.
func contentType(h http.Header) []string {
	if v := h["Content-Type"]; len(v) > 0 {
		return v[:1]
	}
	return emptyValue
}

// legFailed ends a call whose leg on e (of the given role) failed for
// good with err: the client left, the leg passed its deadline, or the
// engine broke. It aborts the request on every engine in abort and answers
// the client if it is still there — with an error status, or an error
// event when the stream has started.
func (c *call) legFailed(deadline time.Time, err error, e *engine, role string, abort ...*engine) {
	c.p.abortAll(c.ctx, c.id, c.r.Header, abort...)
	var ae *openai.Error
	switch {
	case c.ctx.Err() != nil:
		c.outcome = OutcomeClientCancelled
		return
	case expired(deadline):
		limit := c.p.cfg.PrefillTimeout
		c.outcome = OutcomePrefillTimeout
		if role == RoleDecode {
			limit, c.outcome = c.p.cfg.DecodeTimeout, OutcomeDecodeTimeout
		}
		ae = gatewayError(http.StatusGatewayTimeout, "%s engine %s did not finish within %v", role, e.hostPort, limit)
	default:
		c.outcome = OutcomePrefillUnreachable
		if role == RoleDecode {
			c.outcome = OutcomeDecodeFailed
		}
		ae = gatewayError(http.StatusBadGateway, "%s engine %s failed: %v", role, e.hostPort, err)
	}
	c.p.log.Warn("leg failed", "req", c.id, "peer", e.base, "reason", ae.Message)
	if c.streaming {
		c.w.Write(openai.AppendSSE(nil, openai.AppendError(nil, ae)))
		http.NewResponseController(c.w).Flush()
		return
	}
	writeError(c.w, ae)
}

// fail answers the client with e.
func (c *call) fail(outcome string, e *openai.Error) {
	c.outcome = outcome
	writeError(c.w, e)
}

// passError answers the client with an engine's error answer: its status
// and body (bounded), or a message naming the engine when it sent none.
func (c *call) passError(resp *http.Response, outcome string, e *engine) {
	c.outcome = outcome
	body, err := readBounded(resp.Body, maxErrorBytes)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		writeError(c.w, &openai.Error{Status: resp.StatusCode, Type: openai.TypeServer,
			Message: fmt.Sprintf("%s engine %s answered %s", e.role, e.hostPort, resp.Status)})
		return
	}
	h := c.w.Header()
	h.Set("Content-Type", resp.Header.Get("Content-Type"))
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		h.Set("Retry-After", ra)
	}
	c.w.WriteHeader(resp.StatusCode)
	c.w.Write(body)
}

// errorMessage returns the message of an OpenAI error body, or the body.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
