package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/tokenizer"
)

// multi is a request answered with several choices: a completions batch
// (several prompts), n > 1, or both. Each choice is an engine request of
// its own, read by a goroutine of its own; they meet in mu.
type multi struct {
	s       *Server
	c       *call
	w       http.ResponseWriter
	n       int // choices per prompt
	choices []*choiceRun
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu        sync.Mutex
	err       *openai.Error // the first failure: it ends the request
	wroteHead bool
	answered  int // choices that produced output (a stream starts when all have)
	done      int // choices whose end was written, for the stream's end
	js, out   []byte
}

// choiceRun is one choice of a multi request.
type choiceRun struct {
	seqState
	index    int // the choice's index: prompt i's choice j is i×n+j
	req      engine.Request
	st       *node.Stream
	sentRole bool // a chat stream's first chunk (role "assistant") went out
	answered bool // it produced output (stream)
	sentEnd  bool // its last chunk went out (stream)
}

// serveMulti answers c, a request with several choices (the prompts of a
// completions batch, each answered by n choices): prompt i's choice j is
// an engine request with id c.id (choice 0) or c.id + "-" + its index,
// at index i×n+j, sampled with Seed + j when the request set a seed (vLLM's
// parallel sampling). c.req is choice 0's request, already checked;
// prompts are the batch (nil for a single prompt, c.prompt).
//
// Choice 0 of each prompt starts first; the prompt's other choices start
// once it produced its first output, when the prompt's full blocks are in
// the prefix cache: the n choices share those blocks instead of each
// computing the prompt. A refusal or failure of any choice aborts the
// others and answers the request with its error.
func (s *Server) serveMulti(w http.ResponseWriter, r *http.Request, c *call, prompts []openai.Prompt, tok openai.Tokenization, ro *openai.RequestOptions) {
	n := c.sp.N
	np := max(len(prompts), 1)
	m := &multi{s: s, c: c, w: w, n: n, choices: make([]*choiceRun, np*n)}
	for i := range np {
		toks, maxTokens, echo := c.req.Prompt, c.req.MaxTokens, c.echo
		if i > 0 {
			param := "prompt[" + strconv.Itoa(i) + "]"
			var e *openai.Error
			if toks, e = s.appendPrompt(nil, prompts[i], tok, param); e != nil {
				s.fail(w, r, nil, e)
				return
			}
			echo = nil
			if n := len(toks); !prompts[i].IsTokens() {
				if toks = truncate(toks, ro, s.ecfg.MaxModelLen); len(toks) == n {
					echo = []byte(prompts[i].Text)
				}
			} else {
				toks = truncate(toks, ro, s.ecfg.MaxModelLen)
			}
			if maxTokens, e = s.check(param, len(toks), c.sp, ro, nil); e != nil {
				s.fail(w, r, nil, e)
				return
			}
		}
		for j := range n {
			k := i*n + j
			ch := &choiceRun{index: k, req: c.req,
				seqState: seqState{s: s, sp: c.sp, arrival: c.arrival}}
			ch.req.Prompt, ch.req.MaxTokens = toks, maxTokens
			if k > 0 {
				ch.req.ID = c.id + "-" + strconv.Itoa(k)
				ch.req.Remote = nil // the remote prefix is choice 0's to pull
			}
			if c.req.SeedSet {
				ch.req.Sampling.Seed += uint64(j)
			}
			if c.sp.Echo {
				ch.setEcho(toks, echo)
			}
			if c.sp.PromptLogprobs != nil {
				ch.plpToks = toks
			}
			if c.sp.ReturnTokenIDs {
				ch.promptIDs = toks
			}
			if len(c.sp.Stop) > 0 {
				ch.det = tokenizer.NewStream(c.sp.Stop, c.sp.IncludeStopStrInOutput)
			} else if c.stream {
				ch.det = tokenizer.NewStream(nil, false)
			}
			m.choices[k] = ch
		}
	}
	m.ctx, m.cancel = context.WithCancel(r.Context())
	defer m.cancel()
	for i := range np {
		m.start(m.choices[i*n])
	}
	m.wg.Wait()
	if r.Context().Err() != nil {
		return // the client left: every choice was aborted
	}
	if m.err != nil {
		if !m.wroteHead {
			s.fail(w, r, nil, m.err)
			return
		}
		m.js = openai.AppendError(m.js[:0], m.err)
		m.out = openai.AppendSSE(m.out[:0], m.js)
		m.out = append(m.out, openai.SSEDone...)
		w.Write(m.out)
		return
	}
	if !c.stream {
		m.writeWhole()
	}
}

// start submits ch and reads its outputs in a goroutine of its own.
func (m *multi) start(ch *choiceRun) {
	// A prompt's choice 0 must report its first output, when its
	// siblings start.
	first := m.n > 1 && ch.index%m.n == 0
	ch.st = m.s.eng.Start(&ch.req, node.SubmitOptions{FinishedOnly: !m.c.stream && ch.det == nil && !first})
	m.wg.Add(1)
	go m.run(ch, first)
}

// run reads ch's outputs until it finishes, the request fails or the
// client leaves (then it aborts ch's engine request).
func (m *multi) run(ch *choiceRun, first bool) {
	defer m.wg.Done()
	defer ch.flushMetrics()
	for !ch.finished {
		ch.flushMetrics()
		outs, err := ch.st.Recv(m.ctx, ch.outs)
		ch.outs = outs
		if err == node.ErrRefused {
			m.fail(m.s.refusal(ch.st.Refusal(), len(ch.req.Prompt), &ch.req))
			return
		}
		if err != nil {
			ch.st.Abort()
			return
		}
		if first {
			first = false
			for j := 1; j < m.n; j++ {
				m.start(m.choices[ch.index+j])
			}
		}
		// A stream's choices fold and write under mu: a choice's text
		// waits there until the stream may start (emit).
		if m.c.stream {
			m.mu.Lock()
		}
		for i := range outs {
			ch.fold(&outs[i])
		}
		if ch.stopped && !ch.finished && !ch.stopSent {
			ch.stopSent = true
			ch.st.Stop()
		}
		failed := ch.finished && ch.fin.Status == engine.FinishedError
		if ch.finished {
			m.s.observeFinished(&ch.seqState, ch.st)
		}
		ok := true
		if m.c.stream {
			if !ch.answered {
				ch.answered = true
				m.answered++
			}
			if !failed {
				ok = m.emit(ch)
			}
			m.mu.Unlock()
		}
		if failed {
			m.fail(errorFinish(&ch.seqState))
			return
		}
		if !ok {
			ch.st.Abort()
			return
		}
	}
}

// fail records the request's first failure and stops every choice.
func (m *multi) fail(e *openai.Error) {
	m.mu.Lock()
	if m.err == nil {
		m.err = e
	}
	m.mu.Unlock()
	m.cancel()
}

// emit writes what ch has to say as stream events; m.mu is held. The
// stream starts (its 200 goes out) only once every choice has answered
// (produced output): until then a refusal of a later choice can still be
// the request's HTTP error, so the choices' text waits, and goes out in
// index order when the last answers. It reports false when the client
// cannot be written to.
func (m *multi) emit(ch *choiceRun) bool {
	if m.err != nil {
		return true // the request ends with the error
	}
	c := m.c
	m.out = m.out[:0]
	if !m.wroteHead {
		if m.answered < len(m.choices) {
			return true
		}
		m.wroteHead = true
		h := m.w.Header()
		h["X-Request-Id"] = []string{c.id}
		h["Content-Type"] = hdrEventStream
		h["Cache-Control"] = hdrNoCache
		m.w.WriteHeader(http.StatusOK)
		for _, o := range m.choices {
			m.appendPending(o)
		}
	} else {
		m.appendPending(ch)
	}
	if len(m.out) == 0 {
		return true // held back: nothing to say yet
	}
	if m.done == len(m.choices) {
		if c.usageOpts.IncludeUsage {
			u := m.usage()
			obj, prefix := openai.ObjectTextCompletion, openai.CompletionIDPrefix
			if c.chat {
				obj, prefix = openai.ObjectChatCompletionChunk, openai.ChatCompletionIDPrefix
			}
			m.js = openai.AppendUsageChunk(m.js[:0], obj, prefix+c.id, c.created, c.model(), &u)
			m.out = openai.AppendSSE(m.out, m.js)
		}
		m.out = append(m.out, openai.SSEDone...)
	}
	if _, err := m.w.Write(m.out); err != nil {
		return false
	}
	if m.done == len(m.choices) {
		return true // written with the end of the body
	}
	err := http.NewResponseController(m.w).Flush()
	return err == nil
}

// appendPending appends ch's unsent text (and its end, once) to m.out as
// chunks, and clears it; m.mu is held.
func (m *multi) appendPending(ch *choiceRun) {
	if ch.sentEnd || (len(ch.text) == 0 && !ch.finished) {
		return
	}
	c := m.c
	if c.chat && !ch.sentRole {
		ch.sentRole = true
		m.appendChunk(ch, openai.ChatDelta{Role: "assistant"}, openai.FinishNone, openai.StopReason{}, nil)
	}
	fr, sr := openai.FinishNone, openai.StopReason{}
	if ch.finished {
		fr, sr = ch.finish()
		ch.sentEnd = true
		m.done++
	}
	var u *openai.Usage
	if c.usageOpts.ContinuousUsageStats {
		v := openai.NewUsage(len(ch.req.Prompt), ch.ntok, 0)
		if ch.finished {
			v = ch.usage()
		}
		u = &v
	}
	m.appendChunk(ch, openai.ChatDelta{Content: string(ch.text)}, fr, sr, u)
	ch.text = ch.text[:0]
}

// appendChunk appends one chunk of choice ch to m.out: a chat delta, or
// d.Content as a completion's text.
func (m *multi) appendChunk(ch *choiceRun, d openai.ChatDelta, fr openai.FinishReason, sr openai.StopReason, u *openai.Usage) {
	c := m.c
	var lp *openai.Logprobs
	var ids []int32
	if d.Role == "" {
		lp, ids = ch.tokenLogprobs(true), ch.ids(true)
	}
	if c.chat {
		m.js = openai.AppendChatChunk(m.js[:0], &openai.ChatChunk{
			ID: openai.ChatCompletionIDPrefix + c.id, Created: c.created, Model: c.model(),
			Choices:        []openai.ChatChunkChoice{{Index: ch.index, Delta: d, FinishReason: fr, StopReason: sr, TokenLogprobs: lp, TokenIDs: ids}},
			Usage:          u,
			PromptTokenIDs: ch.takePromptIDs()})
	} else {
		m.js = openai.AppendCompletionChunk(m.js[:0], &openai.CompletionChunk{
			ID: openai.CompletionIDPrefix + c.id, Created: c.created, Model: c.model(),
			Choices: []openai.CompletionChoice{{Index: ch.index, Text: d.Content, FinishReason: fr, StopReason: sr, TokenLogprobs: lp,
				TokenIDs: ids, PromptTokenIDs: ch.takePromptIDs()}}, Usage: u})
	}
	if d.Role == "" {
		ch.lps = ch.lps[:0]
	}
	m.out = openai.AppendSSE(m.out, m.js)
}

// usage is the request's usage: every prompt's tokens once (and the
// cached ones of its first choice), every choice's completion tokens, as
// vLLM counts a batch with n choices.
func (m *multi) usage() openai.Usage {
	var prompt, completion, cached int
	for _, ch := range m.choices {
		u := ch.usage()
		if ch.index%m.n == 0 {
			prompt += u.PromptTokens
			cached += u.PromptTokensDetails.CachedTokens
		}
		completion += u.CompletionTokens
	}
	return openai.NewUsage(prompt, completion, cached)
}

// writeWhole answers a non-streaming multi request: every choice, in
// index order.
func (m *multi) writeWhole() {
	c := m.c
	u := m.usage()
	if c.chat {
		cs := make([]openai.ChatChoice, len(m.choices))
		for k, ch := range m.choices {
			fr, sr := ch.finish()
			cs[k] = openai.ChatChoice{Index: k, Message: openai.ChatResponseMessage{Role: "assistant", Content: string(ch.text)},
				FinishReason: fr, StopReason: sr, TokenLogprobs: ch.tokenLogprobs(false), TokenIDs: ch.ids(false)}
		}
		m.out = openai.AppendChatResponse(m.out[:0], &openai.ChatCompletionResponse{
			ID: openai.ChatCompletionIDPrefix + c.id, Created: c.created, Model: c.model(),
			Choices: cs, Usage: u, PromptLogprobs: m.choices[0].plp, PromptTokenIDs: m.choices[0].takePromptIDs()})
	} else {
		cs := make([]openai.CompletionChoice, len(m.choices))
		for k, ch := range m.choices {
			fr, sr := ch.finish()
			cs[k] = openai.CompletionChoice{Index: k, Text: string(ch.text), FinishReason: fr, StopReason: sr,
				TokenLogprobs: ch.tokenLogprobs(false), PromptLogprobs: ch.plp, TokenIDs: ch.ids(false), PromptTokenIDs: ch.takePromptIDs()}
		}
		m.out = openai.AppendCompletionResponse(m.out[:0], &openai.CompletionResponse{
			ID: openai.CompletionIDPrefix + c.id, Created: c.created, Model: c.model(),
			Choices: cs, Usage: u})
	}
	h := m.w.Header()
	h["X-Request-Id"] = []string{c.id}
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{strconv.Itoa(len(m.out))}
	m.w.WriteHeader(http.StatusOK)
	m.w.Write(m.out)
}
