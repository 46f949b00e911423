package openai

import (
	"bytes"
	"encoding/json"

	"github.com/kvlease/kvlease/chat"
)

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

// Chat template markers. See the package documentation.
const (
	// GenerationPrompt is appended when add_generation_prompt is true.
	GenerationPrompt = "<|assistant|>\n"
)

// RenderChatPrompt renders a conversation with kvlease's fixed chat
// template: for each message "<|" + role + "|>\n" + content + "\n", then
// GenerationPrompt when c.AddGenerationPrompt. Names are not rendered; the
// tools prompt goes first in the system message and an assistant's tool
// calls after its content (chat.WithToolsPrompt, chat.PlainContent). The
// output is a pure function of c.
func RenderChatPrompt(c *chat.Conversation) string {
	n := len(GenerationPrompt) + len(c.ToolsPrompt) + 16
	for i := range c.Messages {
		n += len(c.Messages[i].Role) + len(c.Messages[i].Content) + 5
	}
	return string(AppendChatPrompt(make([]byte, 0, n), c))
}

// AppendChatPrompt appends the rendering of RenderChatPrompt to dst.
func AppendChatPrompt(dst []byte, c *chat.Conversation) []byte {
	msgs := chat.WithToolsPrompt(c.Messages, c.ToolsPrompt)
	for i := range msgs {
		m := &msgs[i]
		dst = append(dst, "<|"...)
		dst = append(dst, m.Role...)
		dst = append(dst, "|>\n"...)
		if m.ToolCalls != nil {
			dst = append(dst, chat.PlainContent(m)...)
		} else {
			dst = append(dst, m.Content...)
		}
		dst = append(dst, '\n')
	}
	if c.AddGenerationPrompt {
		dst = append(dst, GenerationPrompt...)
	}
	return dst
}
