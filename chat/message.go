package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Message is one chat message as the OpenAI API gives it, validated.
type Message struct {
	Role string
	// Content is the message's text (text parts joined with "\n"; "" for
	// an assistant message that only calls tools).
	Content string
	Name    string
	// ToolCalls is an assistant message's tool_calls array as the client
	// sent it (valid JSON, each call a function call); nil when none.
	ToolCalls json.RawMessage
	// ToolCallID is a tool message's tool_call_id.
	ToolCallID string
}

// Conversation is what a chat template renders: the messages and the
// request's fields that reach the template.
type Conversation struct {
	Messages []Message
	// AddGenerationPrompt ends the text with the assistant's header.
	AddGenerationPrompt bool
	// Tools is the request's tools array as the client sent it (valid
	// JSON); nil when none.
	Tools json.RawMessage
	// ToolsPrompt describes the tools for renderers that have no tools
	// section of their own (the families, kvlease's fixed template): it is
	// put first in the system message. A Jinja template gets Tools
	// instead.
	ToolsPrompt string
	// Template is a per-request Jinja template (vLLM's chat_template);
	// "" renders with the model's.
	Template string
	// Kwargs is chat_template_kwargs, a JSON object of extra template
	// variables (such as enable_thinking); nil when none.
	Kwargs json.RawMessage
}

// InputError is a conversation the template cannot be given or that it
// refuses: the client's fault, a 400. Param names the request field
// ("" for the template's own refusal).
type InputError struct {
	Param string
	Msg   string
}

func (e *InputError) Error() string { return e.Msg }

// WithToolsPrompt returns msgs with prompt first in the first system
// message, or in a system message of its own before them. msgs is not
// changed.
func WithToolsPrompt(msgs []Message, prompt string) []Message {
	if prompt == "" {
		return msgs
	}
	out := make([]Message, 0, len(msgs)+1)
	if len(msgs) > 0 && msgs[0].Role == "system" {
		m := msgs[0]
		m.Content = prompt + "\n\n" + m.Content
		return append(append(out, m), msgs[1:]...)
	}
	return append(append(out, Message{Role: "system", Content: prompt}), msgs...)
}

// ToolCall is one function call of an assistant message.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the call's arguments as the client sent them (a JSON
	// string holding JSON text, normally an object).
	Arguments string
}

// rawToolCall is a tool call's JSON shape.
type rawToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ParseToolCalls reads a tool_calls array. param names it in errors.
func ParseToolCalls(raw json.RawMessage, param string) ([]ToolCall, error) {
	var calls []rawToolCall
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '[' || json.Unmarshal(raw, &calls) != nil {
		return nil, &InputError{param, param + " must be an array of tool calls"}
	}
	out := make([]ToolCall, len(calls))
	for i, c := range calls {
		if c.Function == nil || (c.Type != "" && c.Type != "function") {
			p := fmt.Sprintf("%s[%d]", param, i)
			return nil, &InputError{p, p + " must be a function call"}
		}
		out[i] = ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
	}
	return out, nil
}

// AppendToolCallsText appends an assistant message's tool calls in the
// form kvlease's grammar makes the model write them (constrain.ToolCalls),
// for renderers with no tool syntax of their own: one call as
// {"name":...,"arguments":...}, several as an array, after a newline when
// the content is not empty. Arguments that are not JSON are written as a
// JSON string.
func AppendToolCallsText(b []byte, calls []ToolCall) []byte {
	if len(calls) == 0 {
		return b
	}
	if len(b) > 0 {
		b = append(b, '\n')
	}
	if len(calls) > 1 {
		b = append(b, '[')
	}
	for i, c := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, c.Name)
		b = append(b, `,"arguments":`...)
		if args := strings.TrimSpace(c.Arguments); json.Valid([]byte(args)) {
			b = append(b, args...)
		} else {
			b = appendJSONString(b, c.Arguments)
		}
		b = append(b, '}')
	}
	if len(calls) > 1 {
		b = append(b, ']')
	}
	return b
}

func appendJSONString(b []byte, s string) []byte {
	j, _ := json.Marshal(s) // a string always marshals
	return append(b, j...)
}

// PlainContent is m's content with its tool calls written after it, for
// renderers with no tool syntax of their own. m.ToolCalls must be valid
// (ParseToolCalls).
func PlainContent(m *Message) string {
	if m.ToolCalls == nil {
		return m.Content
	}
	calls, err := ParseToolCalls(m.ToolCalls, "tool_calls")
	if err != nil || len(calls) == 0 {
		return m.Content
	}
	return string(AppendToolCallsText([]byte(m.Content), calls))
}
