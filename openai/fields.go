package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
)

// The field inventory. Every field of OpenAI's completions and chat
// completions requests (API reference and the official SDKs) and every
// extra parameter of vLLM's CompletionRequest and ChatCompletionRequest
// falls in one of three classes:
//
//   - supported: parsed into the request (the json tags of rawCompletion
//     and rawChat; a few of them accept only some values and say so with
//     a 400 of their own, such as top_logprobs without logprobs);
//   - refused: listed in completionRefused or chatRefused with the values
//     that change nothing (null, the default, an empty list); any other
//     value is a 400 naming the field, so a client never believes it got
//     a behaviour it did not get;
//   - unknown: anything else. vLLM's OpenAIBaseModel allows extra fields
//     and logs a warning listing them; kvlease does the same: the request
//     proceeds, the names are returned in RequestOptions.Ignored and the
//     HTTP edge logs them.

// refusal is a known field that kvlease does not implement. noOp reports
// whether a value asks for nothing (the field's default); why ends the
// 400's message.
type refusal struct {
	noOp func(json.RawMessage) bool
	why  string
}

// Value predicates. Each accepts null, as the field then takes its default.
func isNullOrEmpty(v json.RawMessage) bool {
	s := string(bytes.TrimSpace(v))
	if s == "null" || s == `""` {
		return true
	}
	if len(s) >= 2 && (s[0] == '[' || s[0] == '{') {
		inner := strings.TrimSpace(s[1 : len(s)-1])
		return inner == ""
	}
	return false
}

func nullOnly(v json.RawMessage) bool { return isNull(bytes.TrimSpace(v)) }

func nullOrBool(want bool) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		if nullOnly(v) {
			return true
		}
		var b bool
		return json.Unmarshal(v, &b) == nil && b == want
	}
}

func nullOrNumber(want ...float64) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		if nullOnly(v) {
			return true
		}
		var f float64
		if json.Unmarshal(v, &f) != nil {
			return false
		}
		for _, w := range want {
			if f == w {
				return true
			}
		}
		return false
	}
}

func nullOrString(want ...string) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		if nullOnly(v) {
			return true
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return false
		}
		for _, w := range want {
			if s == w {
				return true
			}
		}
		return false
	}
}

// textModalities accepts null, [] and ["text"].
func textModalities(v json.RawMessage) bool {
	if isNullOrEmpty(v) {
		return true
	}
	var ms []string
	return json.Unmarshal(v, &ms) == nil && len(ms) == 1 && ms[0] == "text"
}

const (
	whyLogprobsVocab = "kvlease does not return token ids or offsets beyond the text"
	whyGuided        = "structured output and guided decoding are not implemented"
	whyNoBeam        = "beam search is not implemented"
	whyNoMM          = "kvlease serves a text-only model"
	whyNoReasoning   = "kvlease serves no reasoning model"
	whyNoTemplate    = "kvlease does not implement it in chat template rendering (see docs/api.md)"
	whyNoExt         = "vLLM's extension hooks are not available"
	whyNoRequestID   = "send the id as the X-Request-Id header"
)

// sharedRefused are refused on both endpoints.
var sharedRefused = map[string]refusal{
	// vLLM sampling parameters.
	"best_of":                       {nullOrNumber(1), "best_of > 1 is not supported (vLLM's V1 engine refuses it too; use n)"},
	"use_beam_search":               {nullOrBool(false), whyNoBeam},
	"length_penalty":                {nullOrNumber(1), whyNoBeam},
	"skip_special_tokens":           {nullOrBool(true), "special tokens are always skipped"},
	"spaces_between_special_tokens": {nullOrBool(true), "special tokens are always skipped"},
	"logprob_token_ids":             {isNullOrEmpty, "logprobs of chosen token ids are not implemented (logprobs and top_logprobs are)"},
	"return_token_offsets":          {nullOrBool(false), whyLogprobsVocab},
	"structured_outputs":            {nullOnly, whyGuided},
	"guided_json":                   {nullOnly, whyGuided},
	"guided_regex":                  {nullOnly, whyGuided},
	"guided_choice":                 {isNullOrEmpty, whyGuided},
	"guided_grammar":                {nullOnly, whyGuided},
	"guided_decoding_backend":       {nullOnly, whyGuided},
	"guided_whitespace_pattern":     {nullOnly, whyGuided},
	"structural_tag":                {nullOnly, whyGuided},
	"logits_processors":             {isNullOrEmpty, whyNoExt},
	"vllm_xargs":                    {isNullOrEmpty, whyNoExt},
	"repetition_detection":          {nullOnly, "repetition detection is not implemented"},
	"thinking_token_budget":         {nullOrNumber(-1), whyNoReasoning},
	"request_id":                    {nullOnly, whyNoRequestID},
	"ec_transfer_params":            {isNullOrEmpty, "encoder-cache transfer is not implemented"},
	"mm_processor_kwargs":           {isNullOrEmpty, whyNoMM},
}

// completionRefused adds the completions-only fields.
var completionRefused = merge(sharedRefused, map[string]refusal{
	"suffix":        {isNullOrEmpty, "suffix (insertion) is not supported"},
	"prompt_embeds": {isNullOrEmpty, "prompt embeddings are not supported"},
})

// chatRefused adds the chat-only fields.
var chatRefused = merge(sharedRefused, map[string]refusal{
	"audio":                  {nullOnly, whyNoMM},
	"modalities":             {textModalities, whyNoMM},
	"web_search_options":     {nullOnly, "web search is not available"},
	"moderation":             {isNullOrEmpty, "moderated completions are not available"},
	"functions":              {isNullOrEmpty, "function calling is not implemented"},
	"function_call":          {nullOrString("none"), "function calling is not implemented"},
	"reasoning_effort":       {nullOnly, whyNoReasoning},
	"verbosity":              {nullOrString("medium"), "verbosity is not implemented"},
	"service_tier":           {nullOrString("auto", "default"), "kvlease has one service tier"},
	"store":                  {nullOrBool(false), "kvlease stores no completions"},
	"prompt_cache_retention": {nullOrString("in_memory", "in-memory"), "cached prefixes live in memory, with no retention policy"},
	"continue_final_message": {nullOrBool(false), whyNoTemplate},
	"add_special_tokens":     {nullOrBool(false), whyNoTemplate},
	"documents":              {isNullOrEmpty, whyNoTemplate},
	"media_io_kwargs":        {isNullOrEmpty, whyNoMM},
})

// Fields accepted with any valid value that have no effect on the answer
// by their nature: metadata and identifiers for the client's own
// bookkeeping, and hints about cost that change no output. They are
// documented as such in docs/api.md.
// response_format, tools, tool_choice and parallel_tool_calls are parsed
// by parseStructure (structured.go); tools, chat_template and
// chat_template_kwargs by parseTemplateFields (messages.go).
var chatAccepted = []string{"metadata", "safety_identifier", "prompt_cache_key", "prompt_cache_options",
	"prediction", "include_reasoning", "response_format", "tools", "tool_choice", "parallel_tool_calls",
	"chat_template", "chat_template_kwargs"}

// completionAccepted are the completions fields parsed outside
// rawCompletion.
var completionAccepted = []string{"response_format"}

func merge(a, b map[string]refusal) map[string]refusal {
	m := make(map[string]refusal, len(a)+len(b))
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// jsonFields returns the json names of t's fields, embedded structs
// flattened.
func jsonFields(t reflect.Type, into map[string]bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			jsonFields(f.Type, into)
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			into[name] = true
		}
	}
}

func supportedSet(raw any, accepted []string) map[string]bool {
	m := map[string]bool{}
	jsonFields(reflect.TypeOf(raw), m)
	for _, a := range accepted {
		m[a] = true
	}
	return m
}

var (
	completionSupported = supportedSet(rawCompletion{}, completionAccepted)
	chatSupported       = supportedSet(rawChat{}, chatAccepted)
)

// FieldClass is how kvlease treats a request field.
type FieldClass int

// Field classes.
const (
	FieldUnknown   FieldClass = iota // ignored with a logged warning
	FieldSupported                   // parsed and honoured
	FieldRefused                     // a 400 naming it unless its value is a no-op
)

// ClassifyField reports how the completions (chat false) or chat
// completions endpoint treats the top-level field name.
func ClassifyField(chat bool, name string) FieldClass {
	sup, ref := completionSupported, completionRefused
	if chat {
		sup, ref = chatSupported, chatRefused
	}
	switch {
	case sup[name]:
		return FieldSupported
	case ref[name].noOp != nil:
		return FieldRefused
	}
	return FieldUnknown
}

// checkFields refuses the known fields kvlease does not implement when
// their value asks for something, and returns the unknown fields, sorted.
// Fields are checked in name order, so the 400 names the same field for
// the same body.
func checkFields(body []byte, chat bool) ([]string, *Error) {
	sup, ref := completionSupported, completionRefused
	if chat {
		sup, ref = chatSupported, chatRefused
	}
	// The members that are not plainly supported: the common body has
	// none and costs no allocation.
	var odd []namedValue
	ok := EachMember(body, func(rawKey []byte, start, end int) {
		key := rawKey[1 : len(rawKey)-1]
		name := ""
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			// Decoded as encoding/json does: escapes, and U+FFFD for
			// each invalid byte.
			if json.Unmarshal(rawKey, &name) != nil {
				return // unreachable: the body decoded
			}
		} else if sup[string(key)] {
			return
		} else {
			name = string(key)
		}
		if !sup[name] {
			odd = append(odd, namedValue{name, json.RawMessage(body[start:end])})
		}
	})
	if !ok { // unreachable: the body decoded
		return nil, BadRequest("", "the request body must be a JSON object")
	}
	// A name given twice counts once, with its last value (encoding/json's
	// reading); names are checked in order.
	slices.SortStableFunc(odd, func(a, b namedValue) int { return strings.Compare(a.name, b.name) })
	var unknown []string
	for i, f := range odd {
		if i+1 < len(odd) && odd[i+1].name == f.name {
			continue
		}
		r, ok := ref[f.name]
		if !ok {
			unknown = append(unknown, f.name)
			continue
		}
		if !r.noOp(f.value) {
			return unknown, BadRequest(f.name, "%s is not supported by kvlease: %s", f.name, r.why)
		}
	}
	return unknown, nil
}

// namedValue is one member of a JSON object.
type namedValue struct {
	name  string
	value json.RawMessage
}
