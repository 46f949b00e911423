package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/kvlease/kvlease/openai"
)

// vLLM's /tokenize and /detokenize, with the served model's tokenizer (the
// one generation uses, so counts and ids agree with usage.prompt_tokens).

type tokenizeRequest struct {
	Model              string          `json:"model"`
	Prompt             json.RawMessage `json:"prompt"`
	Messages           json.RawMessage `json:"messages"`
	ReturnTokenStrs    bool            `json:"return_token_strs"`
	AddSpecialTokens   *bool           `json:"add_special_tokens"`
	SplitSpecialTokens bool            `json:"split_special_tokens"`
}

type tokenizeResponse struct {
	Count       int       `json:"count"`
	MaxModelLen int       `json:"max_model_len"`
	Tokens      []int32   `json:"tokens"`
	TokenStrs   *[]string `json:"token_strs"`
}

// tokenize serves POST /tokenize: {"prompt": "..."} (with
// add_special_tokens, default true, and split_special_tokens, default
// false, as on /v1/completions) or a chat's {"messages": [...],
// "add_generation_prompt": bool} (validated as a chat completion's),
// answered {"count", "max_model_len", "tokens", "token_strs"} (token_strs
// only with "return_token_strs": true; a special token's string is "").
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	body, e := s.readBody(r, nil)
	if e != nil {
		s.writeError(w, "", e)
		return
	}
	var req tokenizeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeError(w, "", openai.BadRequest("", "the request body must be a JSON object with prompt or messages: %v", err))
		return
	}
	if _, e := s.resolveModel(req.Model); e != nil { // an adapter tokenizes as its base model
		s.writeError(w, "", e)
		return
	}
	var toks []int32
	switch {
	case req.Messages != nil && req.Prompt != nil:
		e = openai.BadRequest("prompt", "send prompt or messages, not both")
	case req.Messages != nil:
		chat, pe := openai.ParseChatCompletionRequest(body)
		if pe != nil {
			e = pe
			break
		}
		var err error
		if toks, err = s.cfg.Tokenizer.AppendChat(nil, &chat.Conversation); err != nil {
			e = chatError(err)
		}
	default:
		var text string
		if req.Prompt == nil || json.Unmarshal(req.Prompt, &text) != nil {
			e = openai.BadRequest("prompt", "prompt must be a string (or send messages)")
			break
		}
		toks = s.cfg.Tokenizer.AppendEncode(nil, text, openai.Tokenization{SplitSpecialTokens: req.SplitSpecialTokens,
			NoAddSpecialTokens: req.AddSpecialTokens != nil && !*req.AddSpecialTokens})
	}
	if e != nil {
		s.writeError(w, "", e)
		return
	}
	resp := tokenizeResponse{Count: len(toks), MaxModelLen: s.ecfg.MaxModelLen, Tokens: toks}
	if resp.Tokens == nil {
		resp.Tokens = []int32{}
	}
	if req.ReturnTokenStrs {
		strs := make([]string, len(toks))
		for i, t := range toks {
			strs[i] = string(s.cfg.Tokenizer.TokenBytes(t))
		}
		resp.TokenStrs = &strs
	}
	out, _ := json.Marshal(resp) // cannot fail: ints and strings
	s.writeJSON(w, http.StatusOK, out)
}

// detokenize serves POST /detokenize: {"tokens": [ids]} answered
// {"prompt": text}; ids outside the vocabulary are a 400 naming them.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	body, e := s.readBody(r, nil)
	if e != nil {
		s.writeError(w, "", e)
		return
	}
	var req struct {
		Model  string  `json:"model"`
		Tokens []int64 `json:"tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeError(w, "", openai.BadRequest("tokens", "tokens must be an array of token ids: %v", err))
		return
	}
	if _, e := s.resolveModel(req.Model); e != nil { // an adapter tokenizes as its base model
		s.writeError(w, "", e)
		return
	}
	if req.Tokens == nil {
		s.writeError(w, "", openai.BadRequest("tokens", "tokens is required"))
		return
	}
	var text []byte
	for i, t := range req.Tokens {
		if t < 0 || t >= int64(s.ecfg.VocabSize) {
			s.writeError(w, "", openai.BadRequest("tokens", "tokens[%d] = %d is out of vocabulary (0..%d)", i, t, s.ecfg.VocabSize-1))
			return
		}
		text = append(text, s.cfg.Tokenizer.TokenBytes(int32(t))...)
	}
	out, _ := json.Marshal(struct {
		Prompt string `json:"prompt"`
	}{string(text)})
	s.writeJSON(w, http.StatusOK, out)
}
