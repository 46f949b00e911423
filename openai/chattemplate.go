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
