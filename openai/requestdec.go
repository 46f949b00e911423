package openai

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
)

// Request bodies are decoded by hand, in one pass, into rawCompletion and
// rawChat: encoding/json's validation pass and reflection cost more than
// the rest of a request's parsing. The hand decoder gives exactly what
// json.Unmarshal gives or leaves the body to it (see jsondec.go); FuzzDecode
// compares the two on every input.

// The JSON names of the types decoded by hand: a key that is none of them
// but matches one up to case is left to encoding/json.
var (
	completionNames    = jsonNames(rawCompletion{})
	chatNames          = jsonNames(rawChat{})
	streamOptionsNames = jsonNames(StreamOptions{})
	messageNames       = jsonNames(rawMessage{})
	partNames          = jsonNames(rawPart{})
)

func jsonNames(v any) []string {
	m := map[string]bool{}
	jsonFields(reflect.TypeOf(v), m)
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Depths of the values decoded here: the containers open around them.
const (
	memberDepth  = 1 // a member of the body
	messageDepth = 2 // a message, an element of messages
	partDepth    = 4 // a content part: body, messages, message, content
)

// decodeCompletion decodes body into raw as json.Unmarshal does, with
// decodeBody's errors. odd reports members that are not fields of raw,
// which checkFields and parseStructure then look at; without them both
// have nothing to do.
func decodeCompletion(body []byte, raw *rawCompletion) (odd bool, e *Error) {
	v := new(rawValues)
	end, odd := decodeObject(body, skipSpace(body, 0), 0, completionNames, func(key []byte, i int) (uint64, int) {
		switch string(key) {
		case "prompt":
			return 1 << 40, setRaw(&raw.Prompt, body, i, memberDepth)
		case "add_special_tokens":
			return 1 << 41, setPtrAt(&raw.AddSpecialTokens, &v.addSpecialTokens, body, i, readBool)
		case "split_special_tokens":
			return 1 << 42, setVal(&raw.SplitSpecialTokens, body, i, readBool)
		}
		return raw.rawCommon.member(key, body, i, v)
	})
	if end >= 0 && skipSpace(body, end) == len(body) {
		return odd, nil
	}
	// A fresh value for encoding/json, so raw need not live on the heap.
	fresh := new(rawCompletion)
	e = decodeBody(body, fresh)
	*raw = *fresh
	return true, e
}

// decodeChat is decodeCompletion for chat.
func decodeChat(body []byte, raw *rawChat) (odd bool, e *Error) {
	v := new(rawValues)
	end, odd := decodeObject(body, skipSpace(body, 0), 0, chatNames, func(key []byte, i int) (uint64, int) {
		switch string(key) {
		case "messages":
			return 1 << 40, setRaw(&raw.Messages, body, i, memberDepth)
		case "max_completion_tokens":
			return 1 << 41, setPtrAt(&raw.MaxCompletionTokens, &v.maxCompletionTokens, body, i, readGoInt)
		case "top_logprobs":
			return 1 << 42, setPtrAt(&raw.TopLogprobs, &v.topLogprobs, body, i, readGoInt)
		case "add_generation_prompt":
			return 1 << 43, setPtrAt(&raw.AddGenerationPrompt, &v.addGenerationPrompt, body, i, readBool)
		}
		return raw.rawCommon.member(key, body, i, v)
	})
	if end >= 0 && skipSpace(body, end) == len(body) {
		return odd, nil
	}
	// A fresh value for encoding/json, so raw need not live on the heap.
	fresh := new(rawChat)
	e = decodeBody(body, fresh)
	*raw = *fresh
	return true, e
}

// member decodes the member key of a rawCommon, its value at b[i]. It
// returns the field's bit, 0 when key names no field of rawCommon, and the
// index past the value, or -1.
func (r *rawCommon) member(key []byte, b []byte, i int, v *rawValues) (uint64, int) {
	switch string(key) {
	case "model":
		return 1 << 0, setVal(&r.Model, b, i, readString)
	case "max_tokens":
		return 1 << 1, setPtrAt(&r.MaxTokens, &v.maxTokens, b, i, readGoInt)
	case "temperature":
		return 1 << 2, setPtrAt(&r.Temperature, &v.temperature, b, i, readFloat)
	case "top_p":
		return 1 << 3, setPtrAt(&r.TopP, &v.topP, b, i, readFloat)
	case "top_k":
		return 1 << 4, setPtrAt(&r.TopK, &v.topK, b, i, readGoInt)
	case "min_p":
		return 1 << 5, setPtrAt(&r.MinP, &v.minP, b, i, readFloat)
	case "seed":
		return 1 << 6, setPtrAt(&r.Seed, &v.seed, b, i, readInt64)
	case "stop":
		return 1 << 7, setRaw(&r.Stop, b, i, memberDepth)
	case "stop_token_ids":
		return 1 << 8, setSlice(&r.StopTokenIDs, b, i, readInt32s)
	case "ignore_eos":
		return 1 << 9, setVal(&r.IgnoreEOS, b, i, readBool)
	case "n":
		return 1 << 10, setPtrAt(&r.N, &v.n, b, i, readGoInt)
	case "stream":
		return 1 << 11, setVal(&r.Stream, b, i, readBool)
	case "stream_options":
		return 1 << 12, setPtrAt(&r.StreamOptions, &v.streamOptions, b, i, readStreamOptions)
	case "min_tokens":
		return 1 << 13, setVal(&r.MinTokens, b, i, readGoInt)
	case "priority":
		return 1 << 14, setVal(&r.Priority, b, i, readGoInt)
	case "cache_salt":
		return 1 << 15, setPtrAt(&r.CacheSalt, &v.cacheSalt, b, i, readString)
	case "user":
		return 1 << 16, setVal(&r.User, b, i, readString)
	case "echo":
		return 1 << 17, setVal(&r.Echo, b, i, readBool)
	case "logprobs":
		return 1 << 18, setRaw(&r.Logprobs, b, i, memberDepth)
	case "include_stop_str_in_output":
		return 1 << 19, setVal(&r.IncludeStopStrInOutput, b, i, readBool)
	case "kv_transfer_params":
		return 1 << 20, setRaw(&r.KVTransferParams, b, i, memberDepth)
	case "truncate_prompt_tokens":
		return 1 << 21, setPtrAt(&r.TruncatePromptTokens, &v.truncatePromptTokens, b, i, readGoInt)
	case "presence_penalty":
		return 1 << 22, setPtrAt(&r.PresencePenalty, &v.presencePenalty, b, i, readFloat)
	case "frequency_penalty":
		return 1 << 23, setPtrAt(&r.FrequencyPenalty, &v.frequencyPenalty, b, i, readFloat)
	case "repetition_penalty":
		return 1 << 24, setPtrAt(&r.RepetitionPenalty, &v.repetitionPenalty, b, i, readFloat)
	case "logit_bias":
		return 1 << 25, setRaw(&r.LogitBias, b, i, memberDepth)
	case "prompt_logprobs":
		return 1 << 26, setPtrAt(&r.PromptLogprobs, &v.promptLogprobs, b, i, readGoInt)
	case "return_tokens_as_token_ids":
		return 1 << 27, setVal(&r.ReturnTokensAsTokenIDs, b, i, readBool)
	case "return_token_ids":
		return 1 << 28, setVal(&r.ReturnTokenIDs, b, i, readBool)
	case "allowed_token_ids":
		return 1 << 29, setSlice(&r.AllowedTokenIDs, b, i, readInt32s)
	case "bad_words":
		return 1 << 30, setSlice(&r.BadWords, b, i, readStrings)
	case "truncation_side":
		return 1 << 31, setPtrAt(&r.TruncationSide, &v.truncationSide, b, i, readString)
	}
	return 0, -1
}

// rawValues are what the pointer fields of a raw request point to: one
// allocation for all of them.
type rawValues struct {
	maxTokens, topK, n, truncatePromptTokens, promptLogprobs int
	maxCompletionTokens, topLogprobs                         int
	temperature, topP, minP                                  float64
	presencePenalty, frequencyPenalty, repetitionPenalty     float64
	seed                                                     int64
	cacheSalt, truncationSide                                string
	streamOptions                                            StreamOptions
	addGenerationPrompt, addSpecialTokens                    bool
}

// readStreamOptions reads a stream_options object.
func readStreamOptions(b []byte, i int) (StreamOptions, int) {
	var so StreamOptions
	end, _ := decodeObject(b, i, memberDepth, streamOptionsNames, func(key []byte, i int) (uint64, int) {
		switch string(key) {
		case "include_usage":
			return 1, setVal(&so.IncludeUsage, b, i, readBool)
		case "continuous_usage_stats":
			return 2, setVal(&so.ContinuousUsageStats, b, i, readBool)
		}
		return 0, -1
	})
	return so, end
}

// The setters store the value at b[i] into a field as encoding/json does,
// and return the index past it, or -1.

// setVal: null leaves the field as it is.
func setVal[T any](dst *T, b []byte, i int, read func([]byte, int) (T, int)) int {
	if isLiteral(b, i, "null") {
		return i + 4
	}
	v, end := read(b, i)
	if end >= 0 {
		*dst = v
	}
	return end
}

// setPtr: null makes the pointer nil.
func setPtr[T any](dst **T, b []byte, i int, read func([]byte, int) (T, int)) int {
	if isLiteral(b, i, "null") {
		*dst = nil
		return i + 4
	}
	v, end := read(b, i)
	if end >= 0 {
		*dst = &v
	}
	return end
}

// setPtrAt: null makes the pointer nil, a value is stored in slot.
func setPtrAt[T any](dst **T, slot *T, b []byte, i int, read func([]byte, int) (T, int)) int {
	if isLiteral(b, i, "null") {
		*dst = nil
		return i + 4
	}
	v, end := read(b, i)
	if end >= 0 {
		*slot, *dst = v, slot
	}
	return end
}

// setSlice: null makes the slice nil.
func setSlice[T any](dst *[]T, b []byte, i int, read func([]byte, int) ([]T, int)) int {
	if isLiteral(b, i, "null") {
		*dst = nil
		return i + 4
	}
	v, end := read(b, i)
	if end >= 0 {
		*dst = v
	}
	return end
}

// setRaw keeps the value's text, as json.RawMessage does (null is
// "null"). The text is b's, not a copy: the parsers read it and keep
// nothing of it.
func setRaw(dst *json.RawMessage, b []byte, i, depth int) int {
	end := valueEnd(b, i, depth)
	if end >= 0 {
		*dst = b[i:end]
	}
	return end
}

func readGoInt(b []byte, i int) (int, int) {
	n, end := readInt(b, i, strconv.IntSize)
	return int(n), end
}

func readInt64(b []byte, i int) (int64, int) { return readInt(b, i, 64) }
