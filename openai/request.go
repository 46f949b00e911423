package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/kvlease/kvlease/chat"
	"github.com/kvlease/kvlease/tokenizer"
)

// Request limits. Requests over them get a 400 naming the parameter.
const (
	// MaxStop bounds the stop strings of a request.
	MaxStop = 16
	// MaxStopTokenIDs bounds stop_token_ids.
	MaxStopTokenIDs = 256
	// MaxPrompts bounds a completions batch (prompt as an array of
	// prompts).
	MaxPrompts = 256
	// MaxN bounds n, and MaxChoices the choices of one request (the
	// prompts of a batch times n).
	MaxN       = 128
	MaxChoices = 256
	// MaxLogitBias bounds the entries of logit_bias, MaxAllowedTokenIDs
	// allowed_token_ids.
	MaxLogitBias       = 1024
	MaxAllowedTokenIDs = 1 << 16
	// MaxBadWords bounds bad_words, MaxBadWordBytes each word.
	MaxBadWords     = 256
	MaxBadWordBytes = 256
	// MaxTopLogprobs bounds completions' logprobs and chat's top_logprobs
	// (vLLM's default max_logprobs).
	MaxTopLogprobs = 20
)

// Prompt is a completion prompt: text, or token ids when Tokens is non-nil.
type Prompt struct {
	Text   string
	Tokens []int32
}

// IsTokens reports whether the prompt was given as token ids.
func (p Prompt) IsTokens() bool { return p.Tokens != nil }

// StreamOptions is stream_options.
type StreamOptions struct {
	// IncludeUsage adds a final chunk with usage and no choices.
	IncludeUsage bool `json:"include_usage"`
	// ContinuousUsageStats adds the running usage to every chunk (vLLM).
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// SamplingParams are the generation parameters common to completions and
// chat completions, validated, with defaults applied.
type SamplingParams struct {
	// MaxTokens is the limit on generated tokens; 0 means not given, and
	// the server fills in what is left of the model's context.
	MaxTokens int
	// Temperature is in [0, 2]; default 1.
	Temperature float64
	// TopP is in (0, 1]; default 1.
	TopP float64
	// TopK keeps the k most probable tokens when sampling; 0 disables it
	// (vLLM's top_k; -1 is accepted and means 0).
	TopK int
	// MinP in [0, 1] keeps tokens at least MinP times as probable as the
	// most probable when sampling; 0 disables it (vLLM's min_p).
	MinP float64
	// Seed makes sampling reproducible; nil when not given. With N > 1,
	// choice j samples with Seed + j (vLLM's parallel sampling).
	Seed *int64
	// Logprobs asks for each generated token's log-probability and the
	// TopLogprobs (at most MaxTopLogprobs) most probable tokens at its
	// position: completions' logprobs = TopLogprobs, chat's logprobs and
	// top_logprobs.
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs (vLLM's prompt_logprobs), when not nil, asks for
	// every prompt token's logprob and rank with that many (at most
	// MaxTopLogprobs) most probable tokens, in vLLM's prompt_logprobs
	// shape; not with stream.
	PromptLogprobs *int
	// TokensAsIDs (vLLM's return_tokens_as_token_ids) writes the tokens
	// of logprobs and prompt_logprobs as "token_id:<id>", so a token whose
	// bytes are not valid UTF-8 alone can be told apart.
	TokensAsIDs bool
	// ReturnTokenIDs (vLLM's return_token_ids) adds the prompt's and each
	// choice's generated token ids to the answer (prompt_token_ids,
	// token_ids; streamed, each chunk's new ids).
	ReturnTokenIDs bool
	// EchoOnly is max_tokens 0 with echo (completions): the answer is the
	// prompt alone (and its logprobs), no generated token; MaxTokens is 1.
	EchoOnly bool
	// Echo (completions) puts the prompt before each choice's text; with
	// Logprobs, the prompt's tokens come first in the logprobs too.
	Echo bool
	// PresencePenalty and FrequencyPenalty in [-2, 2] (default 0),
	// RepetitionPenalty in (0, 2] (default 1, off) and LogitBias (token
	// id → bias in [-100, 100], at most MaxLogitBias entries, sorted by
	// token) change the logits before sampling, as vLLM does (see
	// model.Sampling).
	PresencePenalty   float64
	FrequencyPenalty  float64
	RepetitionPenalty float64
	LogitBias         []TokenBias
	// AllowedTokenIDs (vLLM's allowed_token_ids), when not nil, are the
	// only tokens sampling may pick (non-empty; the server checks them
	// against the vocabulary).
	AllowedTokenIDs []int32
	// BadWords (vLLM's bad_words) are words the output must not contain:
	// the server tokenizes them, and sampling never picks a word's last
	// token after the output ends with its other tokens.
	BadWords []string
	// N is the number of choices generated from each prompt; default 1.
	// They share the prompt's cached blocks.
	N int
	// Stop are the stop strings (at most MaxStop; empty strings may be
	// present and match nothing). The request's order is kept: it breaks
	// ties between stop strings ending at the same token.
	Stop []string
	// StopTokenIDs end generation like EOS; the id becomes stop_reason.
	StopTokenIDs []int32
	// IgnoreEOS keeps generating past EOS.
	IgnoreEOS bool
	// MinTokens is the number of tokens generated before EOS, stop
	// strings and stop tokens may end generation.
	MinTokens int
	// IncludeStopStrInOutput keeps a matched stop string in the text.
	IncludeStopStrInOutput bool
}

// RequestOptions are the non-sampling fields common to both endpoints.
type RequestOptions struct {
	Stream        bool
	StreamOptions StreamOptions
	// Priority orders requests under priority scheduling (lower first,
	// as in vLLM); default 0.
	Priority int
	// CacheSalt isolates prefix caching: requests with different salts
	// never share cached blocks. "" when not given.
	CacheSalt string
	User      string
	// KVTransferParams are the P/D parameters, nil when absent. Parse
	// has already run Validate on them.
	KVTransferParams *KVTransferParams
	// TruncatePromptTokens, when positive, keeps only that many prompt
	// tokens (vLLM's truncate_prompt_tokens; -1 means the model's
	// context length, 0 not given); TruncateRight keeps the first ones
	// (truncation_side "right"), else the last ones (vLLM's default).
	TruncatePromptTokens int
	TruncateRight        bool
	// Ignored are the request's top-level fields kvlease does not know,
	// sorted: vLLM ignores unknown fields with a logged warning, and so
	// does kvlease (the HTTP edge logs them). Known fields kvlease does
	// not implement are refused instead (see fields.go).
	Ignored []string
	// Structure constrains the output: response_format, tools and
	// tool_choice (structured.go).
	Structure Structure
}

// CompletionRequest is a validated POST /v1/completions body.
type CompletionRequest struct {
	// Model is the requested model; "" when not given (the server picks
	// its default, as vLLM does). Parse does not check it.
	Model string
	// Prompt is the request's prompt, the first of a batch. Prompts are
	// the prompts of a batch (prompt as an array of several strings or
	// token-id arrays), answered with N choices each, prompt i's choice j
	// at index i×N+j; nil for a single prompt.
	Prompt  Prompt
	Prompts []Prompt
	Tokenization
	SamplingParams
	RequestOptions
}

// Tokenization says how a text prompt becomes tokens (tokenizer.Options,
// which the model loaders take too). The zero value is vLLM's default.
type Tokenization = tokenizer.Options

// ChatMessage is one message of a chat request. Content is the text, with
// the text parts of an array content joined by "\n" (as vLLM's "string"
// content format does); an assistant's tool_calls and a tool message's
// tool_call_id are kept for the chat template.
type ChatMessage = chat.Message

// ChatCompletionRequest is a validated POST /v1/chat/completions body.
type ChatCompletionRequest struct {
	Model string
	// Conversation is what the chat template renders: the messages,
	// add_generation_prompt (default true), the tools, chat_template and
	// chat_template_kwargs.
	chat.Conversation
	SamplingParams
	RequestOptions
}

// Prompt renders the messages with kvlease's fixed chat template
// (chat.RenderFixed).
func (r *ChatCompletionRequest) Prompt() string {
	return chat.RenderFixed(&r.Conversation)
}

// rawCommon is the JSON shape of the fields both endpoints share. Fields
// whose JSON type varies are kept raw and checked by hand.
type rawCommon struct {
	Model                  string          `json:"model"`
	MaxTokens              *int            `json:"max_tokens"`
	Temperature            *float64        `json:"temperature"`
	TopP                   *float64        `json:"top_p"`
	TopK                   *int            `json:"top_k"`
	MinP                   *float64        `json:"min_p"`
	Seed                   *int64          `json:"seed"`
	Stop                   json.RawMessage `json:"stop"`
	StopTokenIDs           []int32         `json:"stop_token_ids"`
	IgnoreEOS              bool            `json:"ignore_eos"`
	N                      *int            `json:"n"`
	Stream                 bool            `json:"stream"`
	StreamOptions          *StreamOptions  `json:"stream_options"`
	MinTokens              int             `json:"min_tokens"`
	Priority               int             `json:"priority"`
	CacheSalt              *string         `json:"cache_salt"`
	User                   string          `json:"user"`
	Echo                   bool            `json:"echo"`
	Logprobs               json.RawMessage `json:"logprobs"`
	IncludeStopStrInOutput bool            `json:"include_stop_str_in_output"`
	KVTransferParams       json.RawMessage `json:"kv_transfer_params"`
	TruncatePromptTokens   *int            `json:"truncate_prompt_tokens"`
	PresencePenalty        *float64        `json:"presence_penalty"`
	FrequencyPenalty       *float64        `json:"frequency_penalty"`
	RepetitionPenalty      *float64        `json:"repetition_penalty"`
	LogitBias              json.RawMessage `json:"logit_bias"`
	PromptLogprobs         *int            `json:"prompt_logprobs"`
	ReturnTokensAsTokenIDs bool            `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs         bool            `json:"return_token_ids"`
	AllowedTokenIDs        []int32         `json:"allowed_token_ids"`
	BadWords               []string        `json:"bad_words"`
	TruncationSide         *string         `json:"truncation_side"`
}

type rawCompletion struct {
	rawCommon
	Prompt             json.RawMessage `json:"prompt"`
	AddSpecialTokens   *bool           `json:"add_special_tokens"`
	SplitSpecialTokens bool            `json:"split_special_tokens"`
}

type rawChat struct {
	rawCommon
	Messages            json.RawMessage `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	TopLogprobs         *int            `json:"top_logprobs"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
}

// ParseCompletionRequest parses and validates a /v1/completions body.
// Known fields kvlease does not implement are refused with a 400 naming
// them unless their value is a no-op; unknown fields are ignored and
// listed in Ignored (vLLM's behaviour, see fields.go). The model name and the
// prompt's length against the context are the server's to check.
//
// On error the request is nil when the body is not a JSON object; otherwise
// it is non-nil but only its KVTransferParams are meaningful (nil unless
// they parsed): a decode engine uses them to tell the prefill engine that
// the request was rejected, so the lease is freed at once.
func ParseCompletionRequest(body []byte) (*CompletionRequest, *Error) {
	var raw rawCompletion
	odd, e := decodeCompletion(body, &raw)
	if e != nil {
		return nil, e
	}
	r := &CompletionRequest{Model: raw.Model, Tokenization: Tokenization{SplitSpecialTokens: raw.SplitSpecialTokens,
		NoAddSpecialTokens: raw.AddSpecialTokens != nil && !*raw.AddSpecialTokens}}
	r.KVTransferParams, e = parseCommon(&raw.rawCommon, &r.SamplingParams, &r.RequestOptions)
	if e != nil {
		return r, e
	}
	if raw.Logprobs != nil && !isNull(raw.Logprobs) {
		k, end := readGoInt(raw.Logprobs, 0)
		if end != len(raw.Logprobs) || k < 0 || k > MaxTopLogprobs {
			return r, BadRequest("logprobs", "logprobs must be an integer between 0 and %d, got %s", MaxTopLogprobs, bytes.TrimSpace(raw.Logprobs))
		}
		r.Logprobs, r.TopLogprobs = true, k
	}
	if r.Prompt, r.Prompts, e = parsePrompts(raw.Prompt); e != nil {
		return r, e
	}
	if len(r.Prompts)*r.N > MaxChoices {
		return r, BadRequest("n", "%d prompts with n = %d ask for %d choices; at most %d are allowed", len(r.Prompts), r.N, len(r.Prompts)*r.N, MaxChoices)
	}
	if !odd {
		return r, nil // checkFields and parseStructure would find nothing
	}
	if r.Ignored, e = checkFields(body, false); e != nil {
		return r, e
	}
	if r.Structure, e = parseStructure(body, false); e != nil {
		return r, e
	}
	return r, nil
}

// ParseChatCompletionRequest parses and validates a /v1/chat/completions
// body. max_completion_tokens takes precedence over max_tokens. Error
// contract as for ParseCompletionRequest.
func ParseChatCompletionRequest(body []byte) (*ChatCompletionRequest, *Error) {
	var raw rawChat
	odd, e := decodeChat(body, &raw)
	if e != nil {
		return nil, e
	}
	r := &ChatCompletionRequest{Model: raw.Model, Conversation: chat.Conversation{AddGenerationPrompt: true}}
	r.KVTransferParams, e = parseCommon(&raw.rawCommon, &r.SamplingParams, &r.RequestOptions)
	if e != nil {
		return r, e
	}
	if r.Echo {
		// vLLM's chat echo repeats the last message; kvlease does not.
		return r, BadRequest("echo", "echo is not supported by kvlease on chat completions (it is on completions)")
	}
	if raw.MaxCompletionTokens != nil {
		if *raw.MaxCompletionTokens < 1 {
			return r, BadRequest("max_completion_tokens", "max_completion_tokens must be at least 1, got %d", *raw.MaxCompletionTokens)
		}
		r.MaxTokens = *raw.MaxCompletionTokens
		if r.MinTokens > r.MaxTokens {
			return r, BadRequest("min_tokens", "min_tokens (%d) must not exceed max_completion_tokens (%d)", r.MinTokens, r.MaxTokens)
		}
	}
	switch string(bytes.TrimSpace(raw.Logprobs)) {
	case "", "null", "false":
	case "true":
		r.Logprobs = true
	default:
		return r, BadRequest("logprobs", "logprobs must be a boolean")
	}
	if k := raw.TopLogprobs; k != nil {
		if *k < 0 || *k > MaxTopLogprobs {
			return r, BadRequest("top_logprobs", "top_logprobs must be between 0 and %d, got %d", MaxTopLogprobs, *k)
		}
		if *k > 0 && !r.Logprobs {
			return r, BadRequest("top_logprobs", "top_logprobs needs logprobs set to true")
		}
		r.TopLogprobs = *k
	}
	if raw.AddGenerationPrompt != nil {
		r.AddGenerationPrompt = *raw.AddGenerationPrompt
	}
	if r.Messages, e = parseMessages(raw.Messages); e != nil {
		return r, e
	}
	if !odd {
		return r, nil
	}
	if r.Ignored, e = checkFields(body, true); e != nil {
		return r, e
	}
	if r.Structure, e = parseStructure(body, true); e != nil {
		return r, e
	}
	r.ToolsPrompt = r.Structure.ToolsPrompt
	if e = parseTemplateFields(body, &r.Conversation); e != nil {
		return r, e
	}
	return r, nil
}

// decodeBody unmarshals body into v with encoding/json, turning encoding/json's errors into
// 400s that name the offending parameter.
func decodeBody(body []byte, v any) *Error {
	if string(bytes.TrimSpace(body)) == "null" {
		return BadRequest("", "the request body must be a JSON object, got null")
	}
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return BadRequest("", "the request body must be a JSON object, got %s", te.Value)
		}
		// encoding/json names promoted fields with the embedded type.
		field := strings.TrimPrefix(te.Field, "rawCommon.")
		return BadRequest(field, "%s must be %s, got %s", field, describeType(te.Type), te.Value)
	}
	return BadRequest("", "the request body is not valid JSON: %v", err)
}

// describeType names a Go field type in JSON terms for error messages.
func describeType(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "of another type"
}

// parseCommon validates the shared fields into sp and ro and returns the
// parsed kv_transfer_params, if they parsed, even when it returns an error.
func parseCommon(raw *rawCommon, sp *SamplingParams, ro *RequestOptions) (*KVTransferParams, *Error) {
	kv, e := parseKVTransferParams(raw.KVTransferParams, true) // valid: the body decoded
	if e != nil {
		return nil, e
	}
	if e := kv.Validate(); e != nil {
		return kv, e
	}
	ro.KVTransferParams = kv

	sp.Temperature, sp.TopP = 1, 1
	if raw.MaxTokens != nil {
		switch {
		case *raw.MaxTokens == 0 && raw.Echo:
			// vLLM's echo of the prompt alone: one token is generated
			// (its logits score the prompt's last position) and left
			// out of the answer.
			sp.EchoOnly, sp.MaxTokens = true, 1
		case *raw.MaxTokens < 1:
			return kv, BadRequest("max_tokens", "max_tokens must be at least 1 (0 only with echo), got %d", *raw.MaxTokens)
		default:
			sp.MaxTokens = *raw.MaxTokens
		}
	}
	if t := raw.Temperature; t != nil {
		if !(*t >= 0 && *t <= 2) {
			return kv, BadRequest("temperature", "temperature must be between 0 and 2, got %v", *t)
		}
		sp.Temperature = *t
	}
	if p := raw.TopP; p != nil {
		if !(*p > 0 && *p <= 1) {
			return kv, BadRequest("top_p", "top_p must be in (0, 1], got %v", *p)
		}
		sp.TopP = *p
	}
	if k := raw.TopK; k != nil {
		if *k < -1 {
			return kv, BadRequest("top_k", "top_k must be -1 or 0 (disabled) or at least 1, got %d", *k)
		}
		sp.TopK = max(*k, 0)
	}
	if m := raw.MinP; m != nil {
		if !(*m >= 0 && *m <= 1) {
			return kv, BadRequest("min_p", "min_p must be in [0, 1], got %v", *m)
		}
		sp.MinP = *m
	}
	sp.Seed = raw.Seed
	sp.RepetitionPenalty = 1
	for _, pen := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"presence_penalty", raw.PresencePenalty, &sp.PresencePenalty}, {"frequency_penalty", raw.FrequencyPenalty, &sp.FrequencyPenalty}} {
		if pen.v == nil {
			continue
		}
		if !(*pen.v >= -2 && *pen.v <= 2) {
			return kv, BadRequest(pen.name, "%s must be between -2 and 2, got %v", pen.name, *pen.v)
		}
		*pen.dst = *pen.v
	}
	if rp := raw.RepetitionPenalty; rp != nil {
		if !(*rp > 0 && *rp <= 2) {
			return kv, BadRequest("repetition_penalty", "repetition_penalty must be in (0, 2], got %v", *rp)
		}
		sp.RepetitionPenalty = *rp
	}
	var e1 *Error
	if sp.LogitBias, e1 = parseLogitBias(raw.LogitBias); e1 != nil {
		return kv, e1
	}
	sp.TokensAsIDs, sp.ReturnTokenIDs = raw.ReturnTokensAsTokenIDs, raw.ReturnTokenIDs
	if raw.AllowedTokenIDs != nil {
		if len(raw.AllowedTokenIDs) == 0 || len(raw.AllowedTokenIDs) > MaxAllowedTokenIDs {
			return kv, BadRequest("allowed_token_ids", "allowed_token_ids must hold 1 to %d token ids, got %d", MaxAllowedTokenIDs, len(raw.AllowedTokenIDs))
		}
		for _, id := range raw.AllowedTokenIDs {
			if id < 0 {
				return kv, BadRequest("allowed_token_ids", "allowed_token_ids must not contain negative ids, got %d", id)
			}
		}
		sp.AllowedTokenIDs = raw.AllowedTokenIDs
	}
	if len(raw.BadWords) > MaxBadWords {
		return kv, BadRequest("bad_words", "bad_words has %d entries; at most %d are allowed", len(raw.BadWords), MaxBadWords)
	}
	for _, w := range raw.BadWords {
		if strings.TrimSpace(w) == "" || len(w) > MaxBadWordBytes {
			return kv, BadRequest("bad_words", "bad_words entries must be non-blank words of at most %d bytes, got %q", MaxBadWordBytes, w)
		}
	}
	sp.BadWords = raw.BadWords
	if k := raw.PromptLogprobs; k != nil {
		if *k < 0 || *k > MaxTopLogprobs {
			return kv, BadRequest("prompt_logprobs", "prompt_logprobs must be between 0 and %d, got %d", MaxTopLogprobs, *k)
		}
		if raw.Stream {
			return kv, BadRequest("prompt_logprobs", "prompt_logprobs are not available when stream is true")
		}
		sp.PromptLogprobs = k
	}
	sp.N = 1
	if raw.N != nil {
		if *raw.N < 1 || *raw.N > MaxN {
			return kv, BadRequest("n", "n must be between 1 and %d, got %d", MaxN, *raw.N)
		}
		sp.N = *raw.N
	}
	var e2 *Error
	if sp.Stop, e2 = parseStop(raw.Stop); e2 != nil {
		return kv, e2
	}
	if len(raw.StopTokenIDs) > MaxStopTokenIDs {
		return kv, BadRequest("stop_token_ids", "stop_token_ids has %d entries; at most %d are allowed", len(raw.StopTokenIDs), MaxStopTokenIDs)
	}
	for _, id := range raw.StopTokenIDs {
		if id < 0 {
			return kv, BadRequest("stop_token_ids", "stop_token_ids must not contain negative ids, got %d", id)
		}
	}
	sp.StopTokenIDs = raw.StopTokenIDs
	sp.IgnoreEOS = raw.IgnoreEOS
	if raw.MinTokens < 0 {
		return kv, BadRequest("min_tokens", "min_tokens must not be negative, got %d", raw.MinTokens)
	}
	if sp.MaxTokens > 0 && raw.MinTokens > sp.MaxTokens {
		return kv, BadRequest("min_tokens", "min_tokens (%d) must not exceed max_tokens (%d)", raw.MinTokens, sp.MaxTokens)
	}
	sp.MinTokens = raw.MinTokens
	sp.IncludeStopStrInOutput = raw.IncludeStopStrInOutput
	sp.Echo = raw.Echo

	ro.Stream = raw.Stream
	if so := raw.StreamOptions; so != nil {
		// vLLM rejects stream options without stream=true (an empty
		// object is falsy in Python and passes).
		if !raw.Stream && (so.IncludeUsage || so.ContinuousUsageStats) {
			return kv, BadRequest("stream_options", "stream_options can only be set when stream is true")
		}
		ro.StreamOptions = *so
	}
	ro.Priority = raw.Priority
	if raw.CacheSalt != nil {
		if *raw.CacheSalt == "" {
			return kv, BadRequest("cache_salt", "cache_salt must be a non-empty string if provided")
		}
		ro.CacheSalt = *raw.CacheSalt
	}
	ro.User = raw.User
	if n := raw.TruncatePromptTokens; n != nil {
		if *n < -1 || *n == 0 {
			return kv, BadRequest("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 (the context length) or at least 1, got %d", *n)
		}
		ro.TruncatePromptTokens = *n
	}
	if side := raw.TruncationSide; side != nil {
		switch *side {
		case "left":
		case "right":
			ro.TruncateRight = true
		default:
			return kv, BadRequest("truncation_side", "truncation_side must be \"left\" or \"right\", got %q", *side)
		}
	}
	return kv, nil
}

// TokenBias is a logit_bias entry.
type TokenBias struct {
	Token int32
	Bias  float64
}

// parseLogitBias parses logit_bias: an object from token ids (decimal
// strings) to biases in [-100, 100], sorted by token id. The server checks
// the ids against the vocabulary.
func parseLogitBias(raw json.RawMessage) ([]TokenBias, *Error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var m map[string]float64
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, BadRequest("logit_bias", "logit_bias must be an object from token ids to numbers")
	}
	if len(m) > MaxLogitBias {
		return nil, BadRequest("logit_bias", "logit_bias has %d entries; at most %d are allowed", len(m), MaxLogitBias)
	}
	out := make([]TokenBias, 0, len(m))
	for k, v := range m {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 {
			return nil, BadRequest("logit_bias", "logit_bias keys must be token ids, got %q", k)
		}
		if !(v >= -100 && v <= 100) {
			return nil, BadRequest("logit_bias", "logit_bias values must be between -100 and 100, got %v for token %d", v, id)
		}
		out = append(out, TokenBias{Token: int32(id), Bias: v})
	}
	slices.SortFunc(out, func(a, b TokenBias) int { return int(a.Token - b.Token) })
	return out, nil
}

func parseStop(raw json.RawMessage) ([]string, *Error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		s, _ := readString(raw, 0) // raw is a valid string
		return []string{s}, nil
	case '[':
		// A null element decodes to ""; an empty stop string matches
		// nothing (tokenizer.Stream ignores it).
		ss, end := readStrings(raw, 0)
		if end < 0 {
			return nil, BadRequest("stop", "stop must be a string or an array of strings")
		}
		if len(ss) > MaxStop {
			return nil, BadRequest("stop", "stop has %d entries; at most %d are allowed", len(ss), MaxStop)
		}
		return ss, nil
	}
	return nil, BadRequest("stop", "stop must be a string or an array of strings")
}

const promptShapes = "prompt must be a string, an array of token ids, or an array of strings or of arrays of token ids"

// parsePrompts parses a completion prompt: one prompt (a string, an array
// of token ids, or a batch of one) or a batch of them (an array of
// strings or an array of arrays of token ids), at most MaxPrompts. It
// returns the first prompt, and all of them when there are several (a
// single prompt allocates no list).
func parsePrompts(raw json.RawMessage) (Prompt, []Prompt, *Error) {
	if raw == nil || isNull(raw) {
		return Prompt{}, nil, BadRequest("prompt", "prompt is required")
	}
	// raw is valid JSON: the body decoded.
	var p Prompt
	switch raw[0] {
	case '"':
		p.Text, _ = readString(raw, 0)
		if p.Text == "" {
			return Prompt{}, nil, BadRequest("prompt", "prompt must not be empty")
		}
		return p, nil, nil
	case '[':
	default:
		return Prompt{}, nil, BadRequest("prompt", promptShapes)
	}
	inner := bytes.TrimSpace(raw[1:])
	if len(inner) == 0 || inner[0] == ']' {
		return Prompt{}, nil, BadRequest("prompt", "prompt must not be empty")
	}
	var ps []Prompt
	switch inner[0] {
	case '"':
		ss, end := readStrings(raw, 0)
		if end < 0 {
			return Prompt{}, nil, BadRequest("prompt", promptShapes)
		}
		if len(ss) > MaxPrompts {
			return Prompt{}, nil, BadRequest("prompt", "prompt has %d entries; at most %d are allowed", len(ss), MaxPrompts)
		}
		ps = make([]Prompt, len(ss))
		for i, s := range ss {
			if s == "" {
				return Prompt{}, nil, BadRequest(promptParam(i, len(ss)), "%s must not be empty", promptParam(i, len(ss)))
			}
			ps[i].Text = s
		}
	case '[':
		batch, end := readTokenBatch(raw)
		if end < 0 {
			return Prompt{}, nil, BadRequest("prompt", promptShapes)
		}
		if len(batch) > MaxPrompts {
			return Prompt{}, nil, BadRequest("prompt", "prompt has %d entries; at most %d are allowed", len(batch), MaxPrompts)
		}
		ps = make([]Prompt, len(batch))
		for i, toks := range batch {
			ps[i].Tokens = toks
			if e := checkTokens(toks, promptParam(i, len(batch))); e != nil {
				return Prompt{}, nil, e
			}
		}
	default:
		var end int
		if p.Tokens, end = readInt32s(raw, 0); end < 0 {
			return Prompt{}, nil, BadRequest("prompt", promptShapes)
		}
		if e := checkTokens(p.Tokens, "prompt"); e != nil {
			return Prompt{}, nil, e
		}
		return p, nil, nil
	}
	if len(ps) == 1 {
		return ps[0], nil, nil
	}
	return ps[0], ps, nil
}

// readTokenBatch reads raw, a valid array, as encoding/json decodes it into
// a nil [][]int32: a null element is a nil list.
func readTokenBatch(raw []byte) ([][]int32, int) {
	batch := make([][]int32, 0, countElements(raw))
	end := eachElement(raw, 0, func(i int) int {
		if isLiteral(raw, i, "null") {
			batch = append(batch, nil)
			return i + 4
		}
		toks, end := readInt32s(raw, i)
		batch = append(batch, toks)
		return end
	})
	return batch, end
}

// checkTokens refuses an empty token-id prompt and negative ids; the
// upper bound is the served model's (the server checks it).
func checkTokens(toks []int32, param string) *Error {
	if len(toks) == 0 {
		return BadRequest(param, "%s must not be empty", param)
	}
	for _, t := range toks {
		if t < 0 {
			return BadRequest(param, "token id %d is out of vocabulary", t)
		}
	}
	return nil
}

// promptParam names prompt i of a batch of n: "prompt" alone, else
// "prompt[i]".
func promptParam(i, n int) string {
	if n == 1 {
		return "prompt"
	}
	return "prompt[" + strconv.Itoa(i) + "]"
}
