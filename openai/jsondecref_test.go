package openai

// The reference parsers: the encoding/json readings that the hand decoder
// replaced, kept as they were, for FuzzDecode to compare against.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

func refParseStop(raw json.RawMessage) ([]string, *Error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil { // unreachable: raw is a valid string
			return nil, BadRequest("stop", "stop must be a string or an array of strings")
		}
		return []string{s}, nil
	case '[':
		var ss []string
		// A null element decodes to ""; an empty stop string matches
		// nothing (tokenizer.Stream ignores it).
		if json.Unmarshal(raw, &ss) != nil {
			return nil, BadRequest("stop", "stop must be a string or an array of strings")
		}
		if len(ss) > MaxStop {
			return nil, BadRequest("stop", "stop has %d entries; at most %d are allowed", len(ss), MaxStop)
		}
		return ss, nil
	}
	return nil, BadRequest("stop", "stop must be a string or an array of strings")
}

// parsePrompts parses a completion prompt: one prompt (a string, an array
// of token ids, or a batch of one) or a batch of them (an array of
// strings or an array of arrays of token ids), at most MaxPrompts. It
// returns the first prompt, and all of them when there are several (a
// single prompt allocates no list).
func refParsePrompts(raw json.RawMessage) (Prompt, []Prompt, *Error) {
	if raw == nil || isNull(raw) {
		return Prompt{}, nil, BadRequest("prompt", "prompt is required")
	}
	var p Prompt
	switch raw[0] {
	case '"':
		if json.Unmarshal(raw, &p.Text) != nil { // unreachable
			return Prompt{}, nil, BadRequest("prompt", promptShapes)
		}
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
		var ss []string
		if json.Unmarshal(raw, &ss) != nil {
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
		var batch [][]int32
		if json.Unmarshal(raw, &batch) != nil {
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
		if json.Unmarshal(raw, &p.Tokens) != nil {
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

func refParseMessages(raw json.RawMessage) ([]ChatMessage, *Error) {
	if raw == nil || isNull(raw) {
		return nil, BadRequest("messages", "messages is required")
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, BadRequest("messages", "messages must be an array of message objects")
	}
	if len(items) == 0 {
		return nil, BadRequest("messages", "messages must not be empty")
	}
	msgs := make([]ChatMessage, len(items))
	for i, item := range items {
		param := "messages[" + strconv.Itoa(i) + "]"
		var m rawMessage
		if len(item) == 0 || item[0] != '{' {
			return nil, BadRequest(param, "%s must be an object", param)
		}
		if err := json.Unmarshal(item, &m); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				p := param + "." + te.Field
				return nil, BadRequest(p, "%s must be %s, got %s", p, describeType(te.Type), te.Value)
			}
			return nil, BadRequest(param, "%s is invalid: %v", param, err)
		}
		if m.Role == "" {
			return nil, BadRequest(param+".role", "%s.role is required", param)
		}
		if !validRoles[m.Role] {
			return nil, BadRequest(param+".role",
				"%s.role must be one of system, developer, user, assistant, tool; got %q", param, m.Role)
		}
		content, e := refParseContent(param+".content", m.Role, m.Content)
		if e != nil {
			return nil, e
		}
		calls, e := checkToolCalls(param+".tool_calls", m.Role, m.ToolCalls)
		if e != nil {
			return nil, e
		}
		msgs[i] = ChatMessage{Role: m.Role, Content: content, Name: m.Name, ToolCalls: calls, ToolCallID: m.ToolCallID}
	}
	return msgs, nil
}

func refParseContent(param, role string, raw json.RawMessage) (string, *Error) {
	if raw == nil || isNull(raw) {
		// An assistant message may carry only tool calls.
		if role == "assistant" {
			return "", nil
		}
		return "", BadRequest(param, "%s is required for role %q", param, role)
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil { // unreachable
			return "", BadRequest(param, "%s must be a string or an array of text parts", param)
		}
		return s, nil
	case '[':
	default:
		return "", BadRequest(param, "%s must be a string or an array of text parts", param)
	}
	var parts []rawPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", BadRequest(param, "%s must be a string or an array of text parts", param)
	}
	var b []byte
	for j, part := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		if part.Type != "text" {
			return "", BadRequest(pp+".type", "%s.type %q is not supported; only \"text\" parts are", pp, part.Type)
		}
		if part.Text == nil {
			return "", BadRequest(pp+".text", "%s.text is required", pp)
		}
		if j > 0 {
			b = append(b, '\n')
		}
		b = append(b, *part.Text...)
	}
	return string(b), nil
}

// refLogprobs is the completions logprobs reading.
func refLogprobs(raw json.RawMessage) (int, bool) {
	var k int
	return k, json.Unmarshal(raw, &k) == nil
}

// parseID parses a string field bounded by MaxKVIDBytes.
func refParseID(param string, v json.RawMessage) (string, *Error) {
	if isNull(v) {
		return "", nil
	}
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", BadRequest(param, "%s must be a string or null", param)
	}
	if len(s) > MaxKVIDBytes {
		return "", BadRequest(param, "%s is longer than %d bytes", param, MaxKVIDBytes)
	}
	return s, nil
}

// parseCount parses a non-negative integer no larger than max. Only integer
// literals are accepted ("8000", not "8000.0" or "8e3").
func refParseCount(param string, v json.RawMessage, max int64) (int64, *Error) {
	if isNull(v) {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, BadRequest(param, "%s must be an integer or null", param)
	}
	if n < 0 || n > max {
		return 0, BadRequest(param, "%s must be between 0 and %d, got %d", param, max, n)
	}
	return n, nil
}

func refParseBlockIDs(param string, v json.RawMessage) ([]int32, BlockIDsForm, *Error) {
	if isNull(v) {
		return nil, FlatBlockIDs, nil
	}
	bad := func() ([]int32, BlockIDsForm, *Error) {
		return nil, FlatBlockIDs, BadRequest(param,
			"%s must be a list of block ids, a list of one list of block ids, or null", param)
	}
	if len(v) == 0 || v[0] != '[' {
		return bad()
	}
	form := FlatBlockIDs
	var ids []int32
	if bytes.HasPrefix(bytes.TrimSpace(v[1:]), []byte("[")) {
		var groups [][]int32
		if json.Unmarshal(v, &groups) != nil {
			return bad()
		}
		if len(groups) != 1 {
			return nil, FlatBlockIDs, BadRequest(param,
				"%s has %d KV cache groups; kvlease supports exactly one", param, len(groups))
		}
		form, ids = GroupedBlockIDs, groups[0]
	} else if json.Unmarshal(v, &ids) != nil {
		return bad()
	}
	if ids == nil {
		ids = []int32{} // present but empty, as opposed to null
	}
	if len(ids) > MaxRemoteBlockIDs {
		return nil, FlatBlockIDs, BadRequest(param, "%s has more than %d block ids", param, MaxRemoteBlockIDs)
	}
	for _, id := range ids {
		if id < 0 {
			return nil, FlatBlockIDs, BadRequest(param, "%s contains a negative block id %d", param, id)
		}
	}
	return ids, form, nil
}
