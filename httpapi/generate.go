package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/metrics"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/tokenizer"
)

// call is the state of one generation request. Calls are pooled: every
// buffer is reused by the next request, so a request allocates little
// beyond what the engine and net/http need.
type call struct {
	// seqState is the progress of the request's one choice (of the first,
	// for a request with several: see multi.go).
	seqState

	// Buffers, reused.
	body   []byte
	prompt []int32
	tmp    []byte
	js     []byte // one JSON document
	out    []byte // bytes to write
	req    engine.Request
	choice [1]openai.CompletionChoice
	chatCh [1]openai.ChatChoice
	chunk  [1]openai.CompletionChoice
	chatCk [1]openai.ChatChunkChoice

	// The request.
	id        string
	chat      bool
	stream    bool
	usageOpts openai.StreamOptions
	created   int64

	// Progress.
	wroteHead bool
	tools     *toolState // a chat answer that may be tool calls (tools.go), or nil

	// Injected faults on a prefill answer (faultapi.go).
	answerDelay time.Duration
	dropAnswer  bool
}

// seqState is the progress of one choice: one engine request's outputs
// folded into text, and how it ended.
type seqState struct {
	s       *Server
	sp      *openai.SamplingParams
	arrival clock.Instant

	outs     []engine.Output
	text     []byte              // generated text: the whole of it, or a stream's delta
	det      *tokenizer.Stream   // nil without stop strings
	ntok     int                 // tokens received
	lastAt   clock.Instant       // instant of the last token, for inter-token latency
	itl      metrics.InterTokens // inter-token latencies not yet in the histogram
	stopped  bool                // a stop string matched
	stopSent bool                // we stopped the request after the stop string
	finished bool
	fin      engine.Output // the finished output
	// With logprobs: the tokens' logprobs (a stream's: those not yet
	// sent), and the bytes of the tokens' text so far (text_offset).
	lps     []openai.LogprobToken
	textLen int
	// echo is the prompt's text still to put before the text (echo), and
	// echoToks its tokens, for their logprobs.
	echo     []byte
	echoToks []int32
	// plpToks is the prompt, for prompt_logprobs until the first output;
	// plp the prompt_logprobs then.
	plpToks []int32
	plp     *openai.PromptLogprobs
	// With return_token_ids: the generated ids (a stream's: not yet
	// sent), and the prompt's until they are sent.
	tokIDs    []int32
	promptIDs []int32
}

func (s *Server) putCall(c *call) {
	c.flushMetrics()
	if cap(c.body) > 1<<20 || cap(c.text) > 1<<20 || cap(c.out) > 1<<20 || cap(c.prompt) > 1<<18 {
		return // do not pin the memory of one huge request
	}
	clear(c.outs[:cap(c.outs)])
	c.outs = c.outs[:0]
	c.req = engine.Request{}
	c.sp, c.det, c.fin = nil, nil, engine.Output{}
	s.calls.Put(c)
}

// generate serves POST /v1/completions (chat false) and
// /v1/chat/completions (chat true).
func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	c := s.calls.Get().(*call)
	defer s.putCall(c)
	*c = call{seqState: seqState{s: s, outs: c.outs[:0], text: c.text[:0]},
		body: c.body, prompt: c.prompt[:0], tmp: c.tmp[:0], js: c.js[:0], out: c.out[:0], chat: chat}

	var e *openai.Error
	if c.body, e = s.readBody(r, c.body); e != nil {
		s.writeError(w, "", e)
		return
	}
	var (
		kv          *openai.KVTransferParams
		ro          *openai.RequestOptions
		modelName   string
		promptParam string
		prompts     []openai.Prompt // a completions request's batch, when it has several prompts
		tok         openai.Tokenization
		echoText    []byte // the prompt's text as given, for echo
	)
	if chat {
		req, pe := openai.ParseChatCompletionRequest(c.body)
		if req != nil {
			kv = req.KVTransferParams
		}
		if pe != nil {
			s.fail(w, r, s.remoteForReject(&c.req, kv, c.body), pe)
			return
		}
		var err error
		if c.prompt, err = s.cfg.Tokenizer.AppendChat(c.prompt, &req.Conversation); err != nil {
			s.fail(w, r, s.remoteForReject(&c.req, kv, c.body), chatError(err))
			return
		}
		c.sp, ro, modelName, promptParam = &req.SamplingParams, &req.RequestOptions, req.Model, "messages"
	} else {
		req, pe := openai.ParseCompletionRequest(c.body)
		if req != nil {
			kv = req.KVTransferParams
		}
		if pe != nil {
			s.fail(w, r, s.remoteForReject(&c.req, kv, c.body), pe)
			return
		}
		promptParam = "prompt"
		if len(req.Prompts) > 1 {
			prompts, promptParam = req.Prompts, "prompt[0]"
		}
		tok = req.Tokenization
		if c.prompt, e = s.appendPrompt(c.prompt, req.Prompt, tok, promptParam); e != nil {
			s.fail(w, r, s.remoteForReject(&c.req, kv, c.body), e)
			return
		}
		c.sp, ro, modelName = &req.SamplingParams, &req.RequestOptions, req.Model
		if req.Echo && !req.Prompt.IsTokens() {
			echoText = []byte(req.Prompt.Text)
		}
	}
	if n := len(c.prompt); len(truncate(c.prompt, ro, s.ecfg.MaxModelLen)) != n {
		c.prompt = truncate(c.prompt, ro, s.ecfg.MaxModelLen)
		echoText = nil // echo the tokens kept
	}
	if len(ro.Ignored) > 0 {
		// vLLM's behaviour for fields it does not know: proceed, warn.
		s.log.Warn("the request has fields kvlease does not know; they are ignored", "fields", ro.Ignored, "path", r.URL.Path)
	}
	if e := s.setRemote(&c.req, kv, len(c.prompt)); e != nil {
		s.fail(w, r, nil, e)
		return
	}
	id, e := s.requestID(r)
	if e != nil {
		s.fail(w, r, &c.req, e)
		return
	}
	c.id = id
	adapter, e := s.resolveModel(modelName)
	if e == nil && c.req.Remote != nil {
		e = checkLoRADigest(kv, adapter)
	}
	if e != nil {
		s.fail(w, r, &c.req, e)
		return
	}
	maxTokens, e := s.check(promptParam, len(c.prompt), c.sp, ro, kv)
	if e != nil {
		s.fail(w, r, &c.req, e)
		return
	}
	c.stream, c.usageOpts = ro.Stream, ro.StreamOptions
	sp := c.sp
	c.req = engine.Request{
		ID: id, Prompt: c.prompt, MaxTokens: maxTokens, MinTokens: sp.MinTokens,
		StopTokenIDs: sp.StopTokenIDs, IgnoreEOS: sp.IgnoreEOS,
		Sampling: model.Sampling{Temperature: sp.Temperature, TopP: sp.TopP, TopK: sp.TopK, MinP: sp.MinP,
			Logprobs: sp.Logprobs, TopLogprobs: sp.TopLogprobs},
		Priority: ro.Priority, CacheSalt: ro.CacheSalt, Adapter: adapter,
		RemoteDecode: kv != nil && kv.DoRemoteDecode && s.producer,
		Remote:       c.req.Remote,
		Grammar:      ro.Structure.Grammar,
	}
	if sp.Seed != nil {
		c.req.Sampling.Seed, c.req.SeedSet = uint64(*sp.Seed), true
	}
	if e := s.setPenalties(&c.req.Sampling, sp); e != nil {
		s.fail(w, r, &c.req, e)
		return
	}
	if kv != nil && len(prompts) > 1 {
		s.fail(w, r, &c.req, openai.BadRequest("kv_transfer_params",
			"kv_transfer_params go with one prompt: send the prompts of a batch one by one"))
		return
	}
	if c.req.RemoteDecode {
		// P's answer carries only the lease: the decode engine generates
		// the n choices (and echoes the prompt) from the one prompt's
		// blocks.
		sp.N, sp.Echo, sp.PromptLogprobs = 1, false, nil
	}
	if sp.Echo {
		if sp.Logprobs {
			if c.req.Remote != nil {
				s.fail(w, r, &c.req, openai.BadRequest("echo",
					"echo with logprobs scores every prompt token, so the prompt is computed on this engine: send it without a remote prefill's kv_transfer_params"))
				return
			}
			c.req.Sampling.PromptLogprobs = true
			c.req.Sampling.PromptTopLogprobs = sp.TopLogprobs
		}
		c.setEcho(c.prompt, echoText)
	}
	if k := sp.PromptLogprobs; k != nil {
		if c.req.Remote != nil {
			s.fail(w, r, &c.req, openai.BadRequest("prompt_logprobs",
				"prompt_logprobs score every prompt token, so the prompt is computed on this engine: send it without a remote prefill's kv_transfer_params"))
			return
		}
		c.req.Sampling.PromptLogprobs = true
		c.req.Sampling.PromptTopLogprobs = max(c.req.Sampling.PromptTopLogprobs, *k)
		c.plpToks = c.prompt
	}
	if sp.ReturnTokenIDs {
		c.promptIDs = c.prompt
	}
	if ro.Structure.Calls() {
		if sp.N > 1 {
			s.fail(w, r, &c.req, openai.BadRequest("n", "n > 1 together with tool calls is not supported"))
			return
		}
		c.tools = newToolState(&ro.Structure, id)
	}
	if len(sp.Stop) > 0 {
		c.det = tokenizer.NewStream(sp.Stop, sp.IncludeStopStrInOutput)
	} else if c.stream {
		// Streams hold back incomplete UTF-8 sequences even without stop
		// strings.
		c.det = tokenizer.NewStream(nil, false)
	}
	c.created = time.Now().Unix()
	c.arrival = s.eng.Now()
	if s.faults != nil && !s.injectFaults(w, r, c) {
		return
	}
	if len(prompts) > 1 || sp.N > 1 {
		s.serveMulti(w, r, c, prompts, tok, ro)
		return
	}
	// The engine answers the submission with the stream's first outputs,
	// or refuses it then (recv): one wake-up less than waiting for the
	// answer first. Nothing is written before, so a refusal is still a
	// plain HTTP error.
	st := s.eng.Start(&c.req, node.SubmitOptions{FinishedOnly: !c.stream && c.det == nil, Buf: c.outs})
	c.outs = nil // the stream's until Recv returns it
	if c.stream {
		s.serveStream(w, r, c, st)
	} else {
		s.serveWhole(w, r, c, st)
	}
}

// setPenalties puts sp's penalties and logit biases in ms, checking the
// biased token ids against the vocabulary.
func (s *Server) setPenalties(ms *model.Sampling, sp *openai.SamplingParams) *openai.Error {
	ms.PresencePenalty, ms.FrequencyPenalty = float32(sp.PresencePenalty), float32(sp.FrequencyPenalty)
	ms.RepetitionPenalty = float32(sp.RepetitionPenalty)
	for _, id := range sp.AllowedTokenIDs {
		if int(id) >= s.ecfg.VocabSize {
			return openai.BadRequest("allowed_token_ids", "allowed_token_ids token id %d is out of vocabulary (0..%d)", id, s.ecfg.VocabSize-1)
		}
	}
	ms.AllowedTokens = sp.AllowedTokenIDs
	ms.BadWords = nil
	for _, w := range sp.BadWords {
		// As vLLM: the word as written without leading space, and with
		// one when the tokenizer folds the space into the word's first
		// token (same length, another first token).
		w = strings.TrimLeft(w, " \t\n")
		plain := s.wordTokens(w)
		ms.BadWords = append(ms.BadWords, plain)
		if spaced := s.wordTokens(" " + w); len(spaced) == len(plain) && len(plain) > 0 && spaced[0] != plain[0] {
			ms.BadWords = append(ms.BadWords, spaced)
		}
	}
	if len(sp.LogitBias) == 0 {
		return nil
	}
	ms.LogitBias = make([]model.TokenBias, len(sp.LogitBias))
	for i, b := range sp.LogitBias {
		if int(b.Token) >= s.ecfg.VocabSize {
			return openai.BadRequest("logit_bias", "logit_bias token id %d is out of vocabulary (0..%d)", b.Token, s.ecfg.VocabSize-1)
		}
		ms.LogitBias[i] = model.TokenBias{Token: b.Token, Bias: float32(b.Bias)}
	}
	return nil
}

// wordTokens tokenizes a bad word without added special tokens, as vLLM
// does (and drops any leading special token left).
func (s *Server) wordTokens(w string) []int32 {
	toks := s.cfg.Tokenizer.AppendEncode(nil, w, openai.Tokenization{NoAddSpecialTokens: true})
	for len(toks) > 0 && s.cfg.Tokenizer.TokenBytes(toks[0]) == nil {
		toks = toks[1:]
	}
	return toks
}

// appendPrompt appends the tokens of completion prompt p to dst: token ids
// verbatim (no BOS added, so a client can compare the model with another
// implementation), after checking them against the vocabulary; text
// through the tokenizer, as opt says.
func (s *Server) appendPrompt(dst []int32, p openai.Prompt, opt openai.Tokenization, param string) ([]int32, *openai.Error) {
	if !p.IsTokens() {
		return s.cfg.Tokenizer.AppendEncode(dst, p.Text, opt), nil
	}
	for _, t := range p.Tokens {
		if int(t) >= s.ecfg.VocabSize {
			return dst, openai.BadRequest(param, "token id %d is out of vocabulary (0..%d)", t, s.ecfg.VocabSize-1)
		}
	}
	return append(dst, p.Tokens...), nil
}

// truncate applies vLLM's truncate_prompt_tokens to prompt (-1 is the
// context length, maxLen).
func truncate(prompt []int32, ro *openai.RequestOptions, maxLen int) []int32 {
	n := ro.TruncatePromptTokens
	if n == 0 {
		return prompt
	}
	if n < 0 {
		n = maxLen
	}
	if len(prompt) > n {
		if ro.TruncateRight {
			return prompt[:n]
		}
		return append(prompt[:0], prompt[len(prompt)-n:]...)
	}
	return prompt
}

// remoteForReject sets req's remote prefix from params that failed
// validation, for the rejection notice only, and returns req; the prefix
// stays unset when it cannot be built. When the body did not decode as a
// whole (a field of the wrong type), kv_transfer_params alone may still
// parse from body.
func (s *Server) remoteForReject(req *engine.Request, kv *openai.KVTransferParams, body []byte) *engine.Request {
	if kv == nil && s.consumer {
		var only struct {
			KV json.RawMessage `json:"kv_transfer_params"`
		}
		if json.Unmarshal(body, &only) == nil {
			kv, _ = openai.ParseKVTransferParams(only.KV)
		}
	}
	if kv == nil || !kv.DoRemotePrefill {
		return req
	}
	if _, ok := kv.LeaseTokenBytes(); !ok || kv.RemoteHost == "" || kv.RemotePort == 0 {
		return req
	}
	s.setRemote(req, kv, 0)
	return req
}

// fail refuses a request before admission: P is told (when req carries a
// remote prefix; req may be nil) and the client gets e.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, req *engine.Request, e *openai.Error) {
	s.reject(req)
	id := r.Header.Get("X-Request-Id")
	if checkRequestID(id) != nil {
		id = ""
	}
	s.writeError(w, id, e)
}

// check validates what the parser cannot know: the lengths against this
// engine's context, and P/D combinations (resolveModel checks the model).
// It returns the max_tokens to submit.
func (s *Server) check(promptParam string, promptLen int, sp *openai.SamplingParams,
	ro *openai.RequestOptions, kv *openai.KVTransferParams) (int, *openai.Error) {
	if kv != nil && kv.DoRemoteDecode && ro.Stream && s.producer {
		return 0, openai.BadRequest("stream",
			"kv_transfer_params.do_remote_decode needs stream false: the lease is returned in the response body")
	}
	maxLen := s.ecfg.MaxModelLen
	if promptLen >= maxLen {
		return 0, openai.BadRequest(promptParam,
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input.",
			maxLen, promptLen)
	}
	maxTokens := sp.MaxTokens
	if maxTokens == 0 {
		maxTokens = maxLen - promptLen
		if sp.MinTokens > maxTokens {
			return 0, openai.BadRequest("min_tokens",
				"min_tokens (%d) is more than the %d tokens left in the context after the %d-token prompt", sp.MinTokens, maxTokens, promptLen)
		}
	} else if promptLen+maxTokens > maxLen {
		return 0, openai.BadRequest("max_tokens",
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the %s, %d in the completion). Please reduce the length of the %s or completion.",
			maxLen, promptLen+maxTokens, promptLen, promptParam, maxTokens, promptParam)
	}
	return maxTokens, nil
}

// refusal is the error for an engine's refusal of a request. Its status is
// res.HTTPStatus(), the mapping the simulator answers with too.
func (s *Server) refusal(res engine.AddResult, promptLen int, req *engine.Request) *openai.Error {
	e := s.refusalError(res, promptLen, req)
	e.Status = res.HTTPStatus()
	return e
}

// refusalError explains res to the client, with the OpenAI error type that
// goes with res.HTTPStatus().
func (s *Server) refusalError(res engine.AddResult, promptLen int, req *engine.Request) *openai.Error {
	switch res {
	case engine.RejectedQueueFull:
		return openai.Overloaded(s.cfg.RetryAfter, "the engine's waiting queue is full")
	case engine.RejectedShuttingDown:
		return openai.Unavailable("the engine is shutting down")
	case engine.RejectedDuplicate:
		return openai.BadRequest("X-Request-Id", "a request with this X-Request-Id is already in progress on this engine")
	case engine.RejectedTooLong:
		bs := s.ecfg.Pool.BlockSizeTokens
		return openai.BadRequest("", "the prompt needs %d KV blocks of %d tokens; this engine has %d in all",
			(promptLen+bs-1)/bs, bs, s.ecfg.Pool.NumBlocks)
	case engine.RejectedInvalid:
		if blocks, tokens, ok := node.RemoteBlocks(req); ok {
			return openai.BadRequest("kv_transfer_params.remote_block_ids",
				"kv_transfer_params: %d remote blocks cannot hold %d remote tokens of a %d-token prompt at %d tokens per block",
				blocks, tokens, promptLen, s.ecfg.Pool.BlockSizeTokens)
		}
		return openai.BadRequest("", "the engine refused the request as invalid")
	}
	return openai.Internal("the engine refused the request: %v", res)
}
