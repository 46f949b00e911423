package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Causes of a request's cancellation, told apart with context.Cause.
var (
	errAbort   = errors.New("bench: abandoned by the client")
	errTimeout = errors.New("bench: request timed out")
)

// Bounds on what the client reads from a server.
const (
	maxResponseBytes = 64 << 20 // a non-streaming response
	maxErrorBytes    = 4 << 10  // the body of an error response, kept as the message
	maxMessageBytes  = 300      // Record.Error
)

// chunk is the part of a completion, chat completion or stream chunk that
// the client reads. Unknown fields are ignored.
type chunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
		Message struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error  json.RawMessage `json:"error"`
	Object string          `json:"object"` // "error" in some servers' error bodies
}

// failure returns the error a server put in a response or stream event,
// or "" when there is none.
func (c *chunk) failure(data []byte) string {
	switch {
	case len(c.Error) > 0 && string(c.Error) != "null":
		return string(c.Error)
	case c.Object == "error":
		return string(data)
	}
	return ""
}

// text returns the generated text the chunk carries: completion text, chat
// content, or reasoning content (a reasoning model's first tokens).
func (c *chunk) text() string {
	var b strings.Builder
	for i := range c.Choices {
		ch := &c.Choices[i]
		b.WriteString(ch.Text)
		b.WriteString(ch.Delta.ReasoningContent)
		b.WriteString(ch.Delta.Content)
		b.WriteString(ch.Message.ReasoningContent)
		b.WriteString(ch.Message.Content)
	}
	return b.String()
}

func (c *chunk) finished() bool {
	for i := range c.Choices {
		if c.Choices[i].FinishReason != nil && *c.Choices[i].FinishReason != "" {
			return true
		}
	}
	return false
}

// do sends one request and fills rec with what happened. It returns the
// generated text received (for the next turn of a conversation). The
// request ends by itself within cfg.Timeout; it is abandoned per plan; a
// cancellation of ctx (the run is interrupted) marks it canceled.
func (r *runner) do(ctx context.Context, rec *Record, body []byte, plan abortPlan) string {
	// One context per request, its timeout a timer that cancels it with
	// errTimeout: a timeout context under a cancelable one cost a second
	// context and a map of children on every request.
	rctx, abandon := context.WithCancelCause(ctx)
	defer abandon(nil)
	timeout := time.AfterFunc(r.cfg.Timeout, func() { abandon(errTimeout) })
	defer timeout.Stop()

	sent := time.Now()
	rec.StartSeconds = sent.Sub(r.start).Seconds()
	rec.AbortPlanned = plan.active
	defer func() { rec.E2ESeconds = time.Since(sent).Seconds() }()
	if plan.active && plan.afterTokens == 0 {
		t := time.AfterFunc(plan.delay, func() { abandon(errAbort) })
		defer t.Stop()
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		panic("bench: request does not build: " + err.Error()) // the endpoint was validated
	}
	req.Header.Set("Content-Type", "application/json")
	if r.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
	}
	if r.cfg.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.failed(rec, ctx, rctx, err)
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		rec.HTTPStatus = resp.StatusCode
		rec.setError(httpKind(resp.StatusCode), fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg)))
		if rec.InvalidPlanned && rec.ErrorKind == ErrHTTP4xx {
			rec.Outcome, rec.ErrorKind = OutcomeRejected, ""
		}
		return ""
	}
	if !r.cfg.Stream {
		if plan.active {
			// The whole answer is here before the abort's moment: the
			// client abandons it unread.
			abandon(errAbort)
			rec.setAborted(AbortBeforeFirstToken)
			return ""
		}
		return r.readResponse(ctx, rctx, rec, resp.Body)
	}
	return r.readStream(ctx, rctx, rec, resp.Body, plan, sent, abandon)
}

// responseBuffers hold non-streaming responses while they are read: the
// event read from one keeps nothing of it (its text is copied).
var responseBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledResponseBytes bounds a buffer put back in responseBuffers.
const maxPooledResponseBytes = 64 << 10

func (r *runner) readResponse(ctx, rctx context.Context, rec *Record, body io.Reader) string {
	buf := responseBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledResponseBytes {
			buf.Reset()
			responseBuffers.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(io.LimitReader(body, maxResponseBytes+1))
	data := buf.Bytes()
	if err != nil {
		r.failed(rec, ctx, rctx, err)
		return ""
	}
	if len(data) > maxResponseBytes {
		rec.setError(ErrBadResponse, fmt.Sprintf("response over %d bytes", maxResponseBytes))
		return ""
	}
	var ev event
	if err := ev.decode(data); err != nil {
		rec.setError(ErrBadResponse, "response is not JSON: "+err.Error())
		return ""
	}
	if ev.failure != "" {
		rec.setError(ErrStream, "error in response: "+ev.failure)
		return ""
	}
	if ev.choices == 0 {
		rec.setError(ErrBadResponse, "response has no choices")
		return ""
	}
	rec.OutputTokens = int(float64(ev.textLen())/r.cfg.Workload.CharsPerToken + 0.5)
	if ev.usage {
		rec.PromptTokens, rec.OutputTokens = ev.prompt, ev.output
	}
	text := ""
	if r.needText {
		text = string(joinPieces(nil, ev.pieces))
	}
	rec.Outcome = OutcomeOK
	return r.keep(rec, text)
}

func (r *runner) readStream(ctx, rctx context.Context, rec *Record, body io.Reader, plan abortPlan, sent time.Time, abandon context.CancelCauseFunc) string {
	var (
		text     strings.Builder
		last     time.Time
		finished bool
		usage    bool
		ev       event
	)
	events := newSSEReader(body)
	defer events.release() // after the last use of an event's data: every text is copied
	for {
		data, err := events.Next()
		if err == io.EOF {
			if !finished {
				rec.setError(ErrBadResponse, "stream ended without [DONE] or a finish_reason")
				return text.String()
			}
			break
		}
		if err != nil {
			if errors.Is(err, errEventTooLarge) {
				rec.setError(ErrBadResponse, err.Error())
			} else {
				r.failed(rec, ctx, rctx, err)
			}
			return text.String()
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			break
		}
		if err := ev.decode(data); err != nil {
			rec.setError(ErrBadResponse, "stream event is not JSON: "+err.Error())
			return text.String()
		}
		if ev.failure != "" {
			rec.setError(ErrStream, "error in stream: "+ev.failure)
			return text.String()
		}
		if ev.usage {
			usage = true
			rec.PromptTokens, rec.OutputTokens = ev.prompt, ev.output
		}
		finished = finished || ev.finished
		if ev.textLen() == 0 {
			continue
		}
		now := time.Now()
		if plan.active && plan.afterTokens == 0 {
			// The first token beat the abort's moment: abandon now,
			// unread.
			abandon(errAbort)
			rec.setAborted(AbortBeforeFirstToken)
			return ""
		}
		if rec.Chunks == 0 {
			rec.TTFTSeconds = now.Sub(sent).Seconds()
		} else {
			if rec.InterTokenSeconds == nil {
				rec.InterTokenSeconds = make([]float64, 0, min(max(rec.MaxTokens-1, 1), 64))
			}
			rec.InterTokenSeconds = append(rec.InterTokenSeconds, now.Sub(last).Seconds())
		}
		last = now
		rec.Chunks++
		if r.needText {
			for _, p := range ev.pieces {
				text.Write(p)
			}
		}
		if plan.active && rec.Chunks >= plan.afterTokens {
			abandon(errAbort)
			rec.setAborted(AbortMidStream)
			return text.String()
		}
	}
	// Let the connection be reused: read what little may follow [DONE].
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	if !usage {
		rec.OutputTokens = rec.Chunks
	}
	rec.Outcome = OutcomeOK
	return r.keep(rec, text.String())
}

// joinPieces appends the pieces to dst.
func joinPieces(dst []byte, pieces [][]byte) []byte {
	for _, p := range pieces {
		dst = append(dst, p...)
	}
	return dst
}

// keep stores text in rec when outputs are recorded, and returns it.
func (r *runner) keep(rec *Record, text string) string {
	if r.cfg.RecordOutputs {
		rec.Text = text
	}
	return text
}

// failed classifies a transport error: the client's own abort, a timeout,
// the run's interruption, or a connection error.
func (r *runner) failed(rec *Record, ctx, rctx context.Context, err error) {
	cause := context.Cause(rctx)
	var ne net.Error
	switch {
	case errors.Is(cause, errAbort):
		phase := AbortBeforeFirstToken
		if rec.Chunks > 0 {
			phase = AbortMidStream
		}
		rec.setAborted(phase)
	case errors.Is(cause, errTimeout):
		rec.setError(ErrTimeout, fmt.Sprintf("no complete response within %v", r.cfg.Timeout))
	case ctx.Err() != nil:
		rec.Outcome = OutcomeCanceled
	case errors.As(err, &ne) && ne.Timeout():
		rec.setError(ErrTimeout, err.Error())
	default:
		rec.setError(ErrConnection, err.Error())
	}
}

func httpKind(status int) string {
	switch {
	case status >= 400 && status < 500:
		return ErrHTTP4xx
	case status >= 500 && status < 600:
		return ErrHTTP5xx
	}
	return ErrHTTPOther
}

func (rec *Record) setError(kind, msg string) {
	if len(msg) > maxMessageBytes {
		msg = msg[:maxMessageBytes] + "…"
	}
	rec.Outcome, rec.ErrorKind, rec.Error = OutcomeError, kind, msg
}

func (rec *Record) setAborted(phase string) {
	rec.Outcome, rec.AbortPhase = OutcomeAborted, phase
}
