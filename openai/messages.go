package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Roles accepted in chat messages.
var validRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

type rawMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

type rawPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

func parseMessages(raw json.RawMessage) ([]ChatMessage, *Error) {
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
		content, e := parseContent(param+".content", m.Role, m.Content)
		if e != nil {
			return nil, e
		}
		if content, e = appendToolCalls(content, param+".tool_calls", m.Role, m.ToolCalls); e != nil {
			return nil, e
		}
		msgs[i] = ChatMessage{Role: m.Role, Content: content, Name: m.Name}
	}
	return msgs, nil
}

func parseContent(param, role string, raw json.RawMessage) (string, *Error) {
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
