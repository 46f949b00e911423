package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/kvlease/kvlease/chat"
)

// Roles accepted in chat messages.
var validRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

type rawMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type rawPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// parseMessages parses messages, raw valid JSON (the body decoded).
func parseMessages(raw json.RawMessage) ([]ChatMessage, *Error) {
	if raw == nil || isNull(raw) {
		return nil, BadRequest("messages", "messages is required")
	}
	if raw[0] != '[' {
		return nil, BadRequest("messages", "messages must be an array of message objects")
	}
	msgs := make([]ChatMessage, 0, 2) // most chats: a system and a user message
	var e *Error
	eachElement(raw, 0, func(i int) int {
		var m ChatMessage
		var end int
		m, end, e = parseMessage(len(msgs), raw, i)
		msgs = append(msgs, m)
		return end
	})
	if e != nil {
		return nil, e
	}
	if len(msgs) == 0 {
		return nil, BadRequest("messages", "messages must not be empty")
	}
	return msgs, nil
}

// messageParam names message i.
func messageParam(i int) string { return "messages[" + strconv.Itoa(i) + "]" }

// parseMessage parses message n, at b[i], and returns the index past it
// (-1 with an error).
func parseMessage(n int, b []byte, i int) (ChatMessage, int, *Error) {
	if b[i] != '{' {
		param := messageParam(n)
		return ChatMessage{}, -1, BadRequest(param, "%s must be an object", param)
	}
	var m rawMessage
	end := m.decode(b, i)
	if end < 0 { // left to encoding/json
		end = valueEnd(b, i, messageDepth)
		fresh := new(rawMessage) // so that m need not live on the heap
		err := json.Unmarshal(b[i:end], fresh)
		m = *fresh
		if err != nil {
			param := messageParam(n)
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				p := param + "." + te.Field
				return ChatMessage{}, -1, BadRequest(p, "%s must be %s, got %s", p, describeType(te.Type), te.Value)
			}
			return ChatMessage{}, -1, BadRequest(param, "%s is invalid: %v", param, err)
		}
	}
	if m.Role == "" {
		param := messageParam(n)
		return ChatMessage{}, -1, BadRequest(param+".role", "%s.role is required", param)
	}
	if !validRoles[m.Role] {
		param := messageParam(n)
		return ChatMessage{}, -1, BadRequest(param+".role",
			"%s.role must be one of system, developer, user, assistant, tool; got %q", param, m.Role)
	}
	content, e := parseContent(n, m.Role, m.Content)
	if e != nil {
		return ChatMessage{}, -1, e
	}
	var calls json.RawMessage
	if m.ToolCalls != nil {
		if calls, e = checkToolCalls(messageParam(n)+".tool_calls", m.Role, m.ToolCalls); e != nil {
			return ChatMessage{}, -1, e
		}
	}
	return ChatMessage{Role: m.Role, Content: content, Name: m.Name, ToolCalls: calls, ToolCallID: m.ToolCallID}, end, nil
}

// decode reads the message object at b[i] as json.Unmarshal does, or
// returns -1 to leave it to encoding/json.
func (m *rawMessage) decode(b []byte, i int) int {
	end, _ := decodeObject(b, i, messageDepth, messageNames, func(key []byte, i int) (uint64, int) {
		switch string(key) {
		case "role":
			return 1, setVal(&m.Role, b, i, readRole)
		case "content": // b is valid: the body decoded
			end := skipValue(b, i)
			m.Content = b[i:end]
			return 2, end
		case "name":
			return 4, setVal(&m.Name, b, i, readString)
		case "tool_calls":
			return 8, setRaw(&m.ToolCalls, b, i, messageDepth+1)
		case "tool_call_id":
			return 16, setVal(&m.ToolCallID, b, i, readString)
		}
		return 0, -1
	})
	return end
}

// readRole reads a role without allocating when it is a valid one.
func readRole(b []byte, i int) (string, int) {
	for _, r := range roles {
		if len(b)-i > len(r)+1 && b[i] == '"' && string(b[i+1:i+1+len(r)]) == r && b[i+1+len(r)] == '"' {
			return r, i + len(r) + 2
		}
	}
	return readString(b, i)
}

var roles = []string{"user", "assistant", "system", "tool", "developer"}

// parseContent parses the content of message n with the given role.
func parseContent(n int, role string, raw json.RawMessage) (string, *Error) {
	if raw == nil || isNull(raw) {
		// An assistant message may carry only tool calls.
		if role == "assistant" {
			return "", nil
		}
		param := messageParam(n) + ".content"
		return "", BadRequest(param, "%s is required for role %q", param, role)
	}
	switch raw[0] {
	case '"':
		s, _ := readString(raw, 0) // raw is a valid string
		return s, nil
	case '[':
	default:
		param := messageParam(n) + ".content"
		return "", BadRequest(param, "%s must be a string or an array of text parts", param)
	}
	parts, ok := readParts(raw)
	if !ok {
		param := messageParam(n) + ".content"
		return "", BadRequest(param, "%s must be a string or an array of text parts", param)
	}
	var b []byte
	for j, part := range parts {
		if part.Type != "text" {
			pp := fmt.Sprintf("%s.content[%d]", messageParam(n), j)
			return "", BadRequest(pp+".type", "%s.type %q is not supported; only \"text\" parts are", pp, part.Type)
		}
		if part.Text == nil {
			pp := fmt.Sprintf("%s.content[%d]", messageParam(n), j)
			return "", BadRequest(pp+".text", "%s.text is required", pp)
		}
		if len(parts) == 1 {
			return *part.Text, nil
		}
		if j > 0 {
			b = append(b, '\n')
		}
		b = append(b, *part.Text...)
	}
	return string(b), nil
}

// readParts reads raw, a valid array, as json.Unmarshal reads it into a
// []rawPart; ok is false where json.Unmarshal fails.
func readParts(raw json.RawMessage) (parts []rawPart, ok bool) {
	end := eachElement(raw, 0, func(i int) int {
		var p rawPart
		end := i + 4
		if !isLiteral(raw, i, "null") {
			end = p.decode(raw, i)
		}
		parts = append(parts, p)
		return end
	})
	if end < 0 { // left to encoding/json
		parts = nil
		return parts, json.Unmarshal(raw, &parts) == nil
	}
	return parts, true
}

// decode reads the content part at b[i] as json.Unmarshal does, or returns
// -1 to leave it to encoding/json.
func (p *rawPart) decode(b []byte, i int) int {
	end, _ := decodeObject(b, i, partDepth, partNames, func(key []byte, i int) (uint64, int) {
		switch string(key) {
		case "type":
			return 1, setVal(&p.Type, b, i, readString)
		case "text":
			return 2, setPtr(&p.Text, b, i, readString)
		}
		return 0, -1
	})
	return end
}

// rawTemplateFields are the chat request's fields that reach the chat
// template besides the messages, as vLLM has them: tools (as sent; their
// checks are parseStructure's), chat_template (a Jinja template for this
// request) and chat_template_kwargs (extra template variables, such as
// enable_thinking).
type rawTemplateFields struct {
	Tools              json.RawMessage `json:"tools"`
	ChatTemplate       json.RawMessage `json:"chat_template"`
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
}

// templateKeys are rawTemplateFields's JSON names.
var templateKeys = []string{"tools", "chat_template", "chat_template_kwargs"}

// parseTemplateFields reads them from body, a valid JSON object, into c.
func parseTemplateFields(body []byte, c *chat.Conversation) *Error {
	if !mayHaveKeys(body, templateKeys) {
		return nil // what decoding rawTemplateFields's zero value gives
	}
	var raw rawTemplateFields
	if err := json.Unmarshal(body, &raw); err != nil {
		return BadRequest("", "the request body is not valid JSON: %v", err)
	}
	if raw.Tools != nil && !isNull(raw.Tools) {
		c.Tools = raw.Tools
	}
	if raw.ChatTemplate != nil && !isNull(raw.ChatTemplate) {
		if json.Unmarshal(raw.ChatTemplate, &c.Template) != nil {
			return BadRequest("chat_template", "chat_template must be a string")
		}
	}
	if k := raw.ChatTemplateKwargs; k != nil && !isNull(k) {
		if t := bytes.TrimSpace(k); t[0] != '{' {
			return BadRequest("chat_template_kwargs", "chat_template_kwargs must be an object")
		}
		c.Kwargs = k
	}
	return nil
}
