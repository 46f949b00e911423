package httpapi

import (
	"math"
	"slices"
	"strconv"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/openai"
)

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
