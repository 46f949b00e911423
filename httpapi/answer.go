package httpapi

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/openai"
)

// The answer: engine outputs received from a request's stream, folded
// into its choices' text, logprobs and finish (fold), and written as one
// JSON document or as server-sent events.

// recv waits for the next outputs and folds them into c. It reports false
// when the engine refused the request (recv then answers the client with
// the error) or the client has gone (the request is then aborted).
func (s *Server) recv(w http.ResponseWriter, r *http.Request, c *call, st *node.Stream) bool {
	outs, ok := s.recvOutputs(w, r, c, st)
	for i := range outs {
		c.foldOutput(&outs[i], st)
	}
	return ok
}

// recvOutputs waits for the next outputs, for the caller to fold with
// foldOutput. It reports false when the engine refused the request
// (recvOutputs then answers the client with the error) or the client has
// gone (the request is then aborted).
func (s *Server) recvOutputs(w http.ResponseWriter, r *http.Request, c *call, st *node.Stream) ([]engine.Output, bool) {
	c.flushMetrics()
	outs, err := st.Recv(r.Context(), c.outs)
	c.outs = outs
	if err == node.ErrRefused {
		s.fail(w, r, &c.req, s.refusal(st.Refusal(), len(c.prompt), &c.req))
		return nil, false
	}
	if err != nil {
		// The client disconnected (or the stream ended early, which the
		// engine never does). Free the request's blocks at once.
		if !c.finished {
			st.Abort()
		}
		return nil, false
	}
	return outs, true
}

// observeFinished records the end-to-end and queue latencies.
func (s *Server) observeFinished(c *seqState, st *node.Stream) {
	queued := time.Duration(-1)
	if at, ok := st.ScheduledAt(); ok {
		queued = at.Sub(c.arrival)
	}
	s.metrics.ObserveFinished(c.fin.At.Sub(c.arrival), queued)
}

// errorFinish is the client's error for a request that finished with an
// error (a decode engine that could not get its remote prefix under the
// fail policy, or a constrained text no token could continue).
func errorFinish(c *seqState) *openai.Error {
	if c.fin.Stuck {
		return openai.Internal("the request failed: no token of the model's vocabulary continues the constrained text after %d tokens (the schema needs bytes the vocabulary cannot write)", c.ntok)
	}
	why := "unknown"
	if c.fin.Fallback.Valid() {
		why = c.fin.Fallback.String()
	}
	return openai.Internal("the request failed: the remote prefill's KV could not be had (%s)", why)
}

// serveWhole answers a non-streaming request.
func (s *Server) serveWhole(w http.ResponseWriter, r *http.Request, c *call, st *node.Stream) {
	ctx := r.Context()
	for !c.finished {
		if !s.recv(w, r, c, st) {
			return
		}
	}
	s.observeFinished(&c.seqState, st)
	lease, grant := node.Granted(&c.fin)
	if c.fin.Status == engine.FinishedError {
		s.writeError(w, c.id, errorFinish(&c.seqState))
		return
	}
	fr, sr := c.finish()
	u := c.usage()
	var kv *openai.KVTransferParams
	if grant {
		if ctx.Err() != nil {
			// The client left before its answer: nobody can ever present
			// the token.
			st.Delivered(false)
			return
		}
		if !s.hasEndpoint {
			// No decode engine could reach the blocks: free them now and
			// answer as a single engine would.
			st.Delivered(false)
			grant = false
		} else {
			if (c.answerDelay > 0 || c.dropAnswer) && !s.answerFaults(r, c, st.Delivered) {
				return
			}
			kv = s.grantParams(c.id, lease, c.req.Adapter, c.fin.At, s.eng.Now())
		}
	}
	if c.chat {
		msg := openai.ChatResponseMessage{Role: "assistant", Content: string(c.text)}
		if t := c.tools; t != nil {
			t.write(c.text)
			if !t.isText(true) {
				msg.Content, msg.ToolCalls = "", t.calls()
				fr = t.finishReason(fr, true)
			}
		}
		c.chatCh[0] = openai.ChatChoice{Message: msg, FinishReason: fr, StopReason: sr, TokenLogprobs: c.tokenLogprobs(false), TokenIDs: c.ids(false)}
		c.out = openai.AppendChatResponse(c.out, &openai.ChatCompletionResponse{
			ID: openai.ChatCompletionIDPrefix + c.id, Created: c.created, Model: c.model(),
			Choices: c.chatCh[:], Usage: u, KVTransferParams: kv, PromptLogprobs: c.plp, PromptTokenIDs: c.takePromptIDs()})
	} else {
		c.choice[0] = openai.CompletionChoice{Text: string(c.text), FinishReason: fr, StopReason: sr,
			TokenLogprobs: c.tokenLogprobs(false), PromptLogprobs: c.plp, TokenIDs: c.ids(false), PromptTokenIDs: c.takePromptIDs()}
		c.out = openai.AppendCompletionResponse(c.out, &openai.CompletionResponse{
			ID: openai.CompletionIDPrefix + c.id, Created: c.created, Model: c.model(),
			Choices: c.choice[:], Usage: u, KVTransferParams: kv})
	}
	h := w.Header()
	h["X-Request-Id"] = []string{c.id}
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{strconv.Itoa(len(c.out))}
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(c.out)
	if grant {
		// Push the bytes out now, so a failed write is known while the
		// lease can still be released at once.
		if err == nil {
			err = http.NewResponseController(w).Flush()
		}
		st.Delivered(err == nil && ctx.Err() == nil)
	}
}

// serveStream answers a streaming request with server-sent events. Nothing
// is written before the first event, so a request that fails before any
// output still gets a proper HTTP error.
//
// Events follow Config.StreamInterval, as vLLM's --stream-interval: the
// first token's event at once, then one event each time that many tokens
// have come since the last one, and the last event at the end. With 0,
// an event carries whatever tokens are there when the handler gets to
// them. The events one batch of outputs makes leave in one write.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, c *call, st *node.Stream) {
	rc := http.NewResponseController(w)
	every := s.cfg.StreamInterval
	sent, sentAny := 0, false // tokens at the last event; whether there was one
	for !c.finished {
		outs, ok := s.recvOutputs(w, r, c, st)
		if !ok {
			return
		}
		c.out = c.out[:0]
		for i := range outs {
			c.foldOutput(&outs[i], st)
			due := c.finished
			if every > 0 {
				due = due || (!sentAny && c.ntok > 0) || c.ntok-sent >= every
			} else {
				due = due || i == len(outs)-1
			}
			if !due {
				continue
			}
			if c.finished && c.fin.Status == engine.FinishedError && !c.wroteHead {
				s.observeFinished(&c.seqState, st)
				s.writeError(w, c.id, errorFinish(&c.seqState))
				return
			}
			sent = c.ntok
			var delta openai.ChatDelta
			if c.chat {
				delta = c.chatDelta() // takes c.text
				if delta.Content == "" && len(delta.ToolCalls) == 0 && !c.finished {
					c.text = c.text[:0]
					continue // held back: nothing to say yet
				}
			} else if len(c.text) == 0 && !c.finished {
				continue // held back: nothing to say yet
			}
			sentAny = true
			s.appendEvent(w, c, st, delta)
			c.text = c.text[:0]
			if c.finished {
				break
			}
		}
		if len(c.out) == 0 {
			continue
		}
		_, err := w.Write(c.out)
		if c.finished {
			// net/http writes what is buffered with the end of the
			// body when the handler returns: one write, not two.
			return
		}
		if err == nil && !st.Pending() {
			// Flush once caught up: outputs that arrived while these
			// events were encoded join the next write instead of taking
			// a write each.
			err = rc.Flush()
		}
		if err != nil {
			st.Abort()
			return
		}
	}
}

// appendEvent appends to c.out the event of the text folded since the
// last one (the stream's end when c finished), after the response head
// and a chat's role chunk when this is the first. delta is a chat's
// (chatDelta).
func (s *Server) appendEvent(w http.ResponseWriter, c *call, st *node.Stream, delta openai.ChatDelta) {
	if !c.wroteHead {
		c.wroteHead = true
		h := w.Header()
		h["X-Request-Id"] = []string{c.id}
		h["Content-Type"] = hdrEventStream
		h["Cache-Control"] = hdrNoCache
		w.WriteHeader(http.StatusOK)
		if c.chat {
			c.appendChatChunk(openai.ChatDelta{Role: "assistant"}, openai.FinishNone, openai.StopReason{}, false)
		}
	}
	switch {
	case c.finished:
		s.observeFinished(&c.seqState, st)
		s.appendEnd(c, delta)
	case c.chat:
		c.appendChatChunk(delta, openai.FinishNone, openai.StopReason{}, true)
	default:
		c.appendCompletionChunk(string(c.text), openai.FinishNone, openai.StopReason{}, true)
	}
}

// appendEnd appends a stream's last events: the final chunk, the usage
// chunk if asked for, and [DONE]. A request that failed after the stream
// started ends with an error event.
func (s *Server) appendEnd(c *call, delta openai.ChatDelta) {
	if c.fin.Status == engine.FinishedError {
		c.js = openai.AppendError(c.js[:0], errorFinish(&c.seqState))
		c.out = openai.AppendSSE(c.out, c.js)
		c.out = append(c.out, openai.SSEDone...)
		return
	}
	fr, sr := c.finish()
	if c.chat {
		if c.tools != nil {
			fr = c.tools.finishReason(fr, true)
		}
		c.appendChatChunk(delta, fr, sr, true)
	} else {
		c.appendCompletionChunk(string(c.text), fr, sr, true)
	}
	if c.usageOpts.IncludeUsage {
		u := c.usage()
		obj, prefix := openai.ObjectTextCompletion, openai.CompletionIDPrefix
		if c.chat {
			obj, prefix = openai.ObjectChatCompletionChunk, openai.ChatCompletionIDPrefix
		}
		c.js = openai.AppendUsageChunk(c.js[:0], obj, prefix+c.id, c.created, c.model(), &u)
		c.out = openai.AppendSSE(c.out, c.js)
	}
	c.out = append(c.out, openai.SSEDone...)
}

// chatDelta is the delta of a chat stream's new text (c.text): the text,
// or with tool calls the calls' new fragments (and auto's plain answer as
// text once it is known to be one).
func (c *call) chatDelta() openai.ChatDelta {
	t := c.tools
	if t == nil {
		return openai.ChatDelta{Content: string(c.text)}
	}
	t.write(c.text)
	if t.isText(c.finished) {
		return openai.ChatDelta{Content: t.takeText()}
	}
	return openai.ChatDelta{ToolCalls: t.deltas()}
}

// runningUsage is the usage so far, for continuous_usage_stats.
func (c *call) runningUsage(withUsage bool) *openai.Usage {
	if !withUsage || !c.usageOpts.ContinuousUsageStats {
		return nil
	}
	var u openai.Usage
	if c.finished {
		u = c.usage()
	} else {
		u = openai.NewUsage(len(c.prompt), c.ntok, 0)
	}
	return &u
}

// model is the model the response names: the request's LoRA adapter, as
// vLLM answers, or the served model.
func (c *call) model() string {
	if !c.req.Adapter.IsBase() {
		return c.req.Adapter.Name
	}
	return c.s.cfg.ModelName
}

func (c *call) appendChatChunk(d openai.ChatDelta, fr openai.FinishReason, sr openai.StopReason, withUsage bool) {
	c.chatCk[0] = openai.ChatChunkChoice{Delta: d, FinishReason: fr, StopReason: sr}
	if d.Role == "" {
		c.chatCk[0].TokenLogprobs = c.tokenLogprobs(true)
		c.chatCk[0].TokenIDs = c.ids(true)
		c.lps = c.lps[:0]
	}
	c.js = openai.AppendChatChunk(c.js[:0], &openai.ChatChunk{
		ID: openai.ChatCompletionIDPrefix + c.id, Created: c.created, Model: c.model(),
		Choices: c.chatCk[:], Usage: c.runningUsage(withUsage), PromptTokenIDs: c.takePromptIDs()})
	c.out = openai.AppendSSE(c.out, c.js)
}

func (c *call) appendCompletionChunk(text string, fr openai.FinishReason, sr openai.StopReason, withUsage bool) {
	c.chunk[0] = openai.CompletionChoice{Text: text, FinishReason: fr, StopReason: sr, TokenLogprobs: c.tokenLogprobs(true),
		TokenIDs: c.ids(true), PromptTokenIDs: c.takePromptIDs()}
	c.lps = c.lps[:0]
	c.js = openai.AppendCompletionChunk(c.js[:0], &openai.CompletionChunk{
		ID: openai.CompletionIDPrefix + c.id, Created: c.created, Model: c.model(),
		Choices: c.chunk[:], Usage: c.runningUsage(withUsage)})
	c.out = openai.AppendSSE(c.out, c.js)
}

// foldOutput folds one output into c and ends the request at a stop string.
func (c *call) foldOutput(o *engine.Output, st *node.Stream) {
	c.fold(o)
	if c.stopped && !c.finished && !c.stopSent {
		// The engine does not know stop strings: end the request there,
		// as a stop (finished_reason stop in the engine's counters too).
		c.stopSent = true
		st.Stop()
	}
}

// fold applies one output: metrics, text, the finish.
func (c *seqState) fold(o *engine.Output) {
	m := c.s.metrics
	if c.echo != nil {
		c.text = append(c.text, c.echo...)
		c.echo = nil
	}
	if o.Token != model.NoToken && !c.stopped && c.sp.EchoOnly {
		// max_tokens 0 with echo: the prompt's scores, not the token.
		if c.plpToks != nil {
			c.setPromptLogprobs(o)
		}
		if c.echoToks != nil {
			c.addPromptLogprobs(o)
		}
	} else if o.Token != model.NoToken && !c.stopped {
		if c.ntok == 0 {
			m.ObserveFirstToken(o.At.Sub(c.arrival))
		} else {
			c.itl.Observe(o.At.Sub(c.lastAt))
		}
		c.lastAt = o.At
		c.ntok++
		if c.plpToks != nil {
			c.setPromptLogprobs(o)
		}
		if c.sp.ReturnTokenIDs {
			c.tokIDs = append(c.tokIDs, o.Token)
		}
		if c.echoToks != nil {
			c.addPromptLogprobs(o)
		}
		if o.Logprobs != nil {
			c.addLogprobs(o)
		}
		if !(o.Finished && c.isStopToken(o)) {
			c.addText(o.Token)
		}
	}
	if o.Finished {
		c.flushMetrics()
		c.finished = true
		c.fin = *o
		if c.det != nil && !c.stopped {
			c.text = append(c.text, c.det.Flush()...)
		}
	}
}

// flushMetrics adds the inter-token latencies folded so far to the
// histogram. fold does at the finish, and the readers of a request's
// outputs before each wait and when they give up, so no gap is lost and a
// request's gaps take one update of the histogram, not one per token.
func (c *seqState) flushMetrics() { c.s.metrics.AddInterTokens(&c.itl) }

// addLogprobs records the logprobs of output o's token.
func (c *seqState) addLogprobs(o *engine.Output) {
	lt := openai.LogprobToken{ID: o.Token, Logprob: o.Logprobs.Logprob, Offset: c.textLen, Top: convTop(o.Logprobs.Top)}
	c.lps = append(c.lps, lt)
	c.textLen += len(c.s.cfg.Tokenizer.TokenBytes(o.Token))
}

// setEcho prepares echo for a choice of prompt toks, given as text when
// it was text (nil for token ids): the text is the prompt's as given,
// or its tokens' when given as ids or truncated; with logprobs the
// prompt's tokens come first in them, and text offsets count the prompt.
func (c *seqState) setEcho(toks []int32, text []byte) {
	if text == nil {
		for _, t := range toks {
			text = append(text, c.s.cfg.Tokenizer.TokenBytes(t)...)
		}
	}
	c.echo = text
	if c.echo == nil {
		c.echo = []byte{}
	}
	c.textLen = len(text)
	if c.sp.Logprobs {
		c.echoToks = toks
	}
}

// addPromptLogprobs puts the prompt's tokens first in the logprobs, from
// the first output: the first token without a logprob (nothing precedes
// it), each other with the model's logprob given the tokens before it.
func (c *seqState) addPromptLogprobs(o *engine.Output) {
	toks := c.echoToks
	c.echoToks = nil
	lps := make([]openai.LogprobToken, len(toks), len(toks)+len(c.lps))
	off := 0
	for k, t := range toks {
		lps[k] = openai.LogprobToken{ID: t, Offset: off, None: k == 0}
		off += len(c.s.cfg.Tokenizer.TokenBytes(t))
		if k == 0 {
			continue
		}
		if k-1 >= len(o.PromptLogprobs) {
			lps[k].Logprob = float32(math.Inf(-1)) // unreachable: the engine scores every prompt token
			continue
		}
		p := &o.PromptLogprobs[k-1]
		lps[k].Logprob = p.Logprob
		lps[k].Top = convTop(p.Top[:min(len(p.Top), c.sp.TopLogprobs)])
	}
	c.lps = append(lps, c.lps...)
}

// setPromptLogprobs keeps the first output's prompt logprobs for vLLM's
// prompt_logprobs: each prompt token after the first with its logprob,
// rank and the prompt_logprobs most probable tokens.
func (c *seqState) setPromptLogprobs(o *engine.Output) {
	toks := c.plpToks
	c.plpToks = nil
	k := *c.sp.PromptLogprobs
	p := &openai.PromptLogprobs{Text: c.tokenText()}
	for i := 1; i < len(toks) && i-1 < len(o.PromptLogprobs); i++ {
		e := &o.PromptLogprobs[i-1]
		p.Tokens = append(p.Tokens, openai.LogprobToken{ID: toks[i], Logprob: e.Logprob, Top: convTop(e.Top[:min(len(e.Top), k)])})
		p.Ranks = append(p.Ranks, e.Rank)
	}
	c.plp = p
}

// ids returns the generated ids to send (non-nil with return_token_ids,
// nil without); a chunk's then start afresh.
func (c *seqState) ids(chunk bool) []int32 {
	if !c.sp.ReturnTokenIDs {
		return nil
	}
	ids := c.tokIDs
	if ids == nil {
		ids = []int32{}
	}
	if chunk {
		c.tokIDs = nil
	}
	return ids
}

// takePromptIDs returns the prompt's ids the first time (with
// return_token_ids), nil after.
func (c *seqState) takePromptIDs() []int32 {
	p := c.promptIDs
	c.promptIDs = nil
	return p
}

// convTop converts the model's top tokens.
func convTop(top []model.TokenLogprob) []openai.TokenLogprob {
	out := make([]openai.TokenLogprob, len(top))
	for i, a := range top {
		out[i] = openai.TokenLogprob{ID: a.Token, Logprob: a.Logprob}
	}
	return out
}

// tokenLogprobs are the logprobs to send with the choice's text: nil
// when the request did not ask for them, or (chunk) when no token came
// since the last chunk.
func (c *seqState) tokenLogprobs(chunk bool) *openai.Logprobs {
	if !c.sp.Logprobs || (chunk && len(c.lps) == 0) {
		return nil
	}
	return &openai.Logprobs{Tokens: c.lps, Text: c.tokenText()}
}

// tokenText is how logprobs write a token: its text, or "token_id:<id>"
// with return_tokens_as_token_ids.
func (c *seqState) tokenText() func(int32) []byte {
	if c.sp.TokensAsIDs {
		return tokenIDText
	}
	return c.s.cfg.Tokenizer.TokenBytes
}

func tokenIDText(id int32) []byte {
	return strconv.AppendInt([]byte("token_id:"), int64(id), 10)
}

// isStopToken reports whether finished output o ended on one of the
// request's stop_token_ids, whose text vLLM leaves out unless
// include_stop_str_in_output.
func (c *seqState) isStopToken(o *engine.Output) bool {
	return o.Status == engine.FinishedStopped && !c.sp.IncludeStopStrInOutput && slices.Contains(c.sp.StopTokenIDs, o.Token)
}

func (c *seqState) addText(tok int32) {
	if c.det == nil {
		c.text = append(c.text, c.s.cfg.Tokenizer.TokenBytes(tok)...)
		return
	}
	// Stop strings count from the min_tokens-th token on (vLLM's
	// StopChecker skips them while the output is shorter).
	c.det.Suppress(c.ntok < c.sp.MinTokens)
	d, stopped := c.det.AddBytes(c.s.cfg.Tokenizer.TokenBytes(tok))
	c.text = append(c.text, d...)
	c.stopped = stopped
}

// finish returns the finish_reason and stop_reason of the finished call.
func (c *seqState) finish() (openai.FinishReason, openai.StopReason) {
	if c.sp.EchoOnly && c.fin.Status != engine.FinishedError && c.fin.Status != engine.FinishedAborted {
		return openai.FinishLength, openai.StopReason{} // max_tokens 0 reached
	}
	if c.stopped {
		return openai.FinishStop, openai.StopString(c.sp.Stop[c.det.StopIndex()])
	}
	switch c.fin.Status {
	case engine.FinishedStopped:
		if slices.Contains(c.sp.StopTokenIDs, c.fin.Token) {
			return openai.FinishStop, openai.StopToken(c.fin.Token)
		}
		return openai.FinishStop, openai.StopReason{}
	case engine.FinishedLength:
		return openai.FinishLength, openai.StopReason{}
	case engine.FinishedError:
		return openai.FinishError, openai.StopReason{}
	}
	return openai.FinishAbort, openai.StopReason{}
}

// usage is the finished call's usage. After a stop string the completion
// counts the tokens up to the one that completed it, as vLLM's does.
func (c *seqState) usage() openai.Usage {
	u := c.fin.Usage
	n := u.CompletionTokens
	if c.stopped || c.fin.Status == engine.FinishedAborted || c.sp.EchoOnly {
		n = c.ntok
	}
	return openai.NewUsage(u.PromptTokens, n, u.CachedTokens)
}
