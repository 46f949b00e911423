package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Template is a compiled Jinja chat template (a GGUF file's
// tokenizer.chat_template, or a request's chat_template), rendered with
// Hugging Face's apply_chat_template semantics by github.com/ardanlabs/jinja
// (trim_blocks and lstrip_blocks, loop controls, namespace, macros, the
// Python string and dict methods) with HF's additions supplied here:
// raise_exception, strftime_now on the render's clock, and tojson as
// json.dumps(ensure_ascii=False, ...). A Template is safe for concurrent
// use.
type Template struct {
	src   string
	t     *jinja.Template
	texts jinja.Value // the template's texts (lex)
}

// Parse compiles a chat template.
func Parse(src string) (*Template, error) {
	lexed, texts := lex(src)
	t, err := jinja.Compile(lexed)
	if err != nil {
		return nil, err
	}
	items := make([]jinja.Value, len(texts))
	for i, s := range texts {
		items[i] = jinja.NewString(s)
	}
	return &Template{src: src, t: t, texts: jinja.NewList(items)}, nil
}

// Source is the template's text.
func (t *Template) Source() string { return t.src }

// Tokens are the special-token texts a template sees as bos_token and
// eos_token ("" leaves that variable undefined, as Hugging Face leaves a
// token the tokenizer does not have).
type Tokens struct {
	BOS, EOS string
}

// RaiseError is a template's own refusal of a conversation: its
// raise_exception message.
type RaiseError struct {
	Message string
}

func (e *RaiseError) Error() string { return e.Message }

// Render renders c with the template at time now (strftime_now's clock).
// The variables are those vLLM gives Hugging Face's apply_chat_template:
// messages (role and content, then tool_calls with each call's arguments
// parsed from their JSON text, tool_call_id and name when present), tools
// (the request's array as sent, or none), add_generation_prompt,
// bos_token and eos_token, then chat_template_kwargs, which may override
// any of them but messages. A template's raise_exception comes back as a
// *RaiseError, a conversation the template cannot be given as an
// *InputError; any other error is the template failing at run time.
func (t *Template) Render(c *Conversation, tok Tokens, now time.Time) (string, error) {
	data := make(map[string]jinja.Value, 8)
	msgs, err := messagesValue(c.Messages)
	if err != nil {
		return "", err
	}
	data["messages"] = msgs
	data["tools"] = jinja.None()
	if c.Tools != nil {
		v, err := jsonValue(c.Tools)
		if err != nil {
			return "", &InputError{"tools", "tools: " + err.Error()}
		}
		data["tools"] = v
	}
	data["add_generation_prompt"] = jinja.NewBool(c.AddGenerationPrompt)
	if tok.BOS != "" {
		data["bos_token"] = jinja.NewString(tok.BOS)
	}
	if tok.EOS != "" {
		data["eos_token"] = jinja.NewString(tok.EOS)
	}
	if c.Kwargs != nil {
		v, err := jsonValue(c.Kwargs)
		if err != nil || !v.IsDict() {
			return "", &InputError{"chat_template_kwargs", "chat_template_kwargs must be an object"}
		}
		d := v.AsDict()
		for _, k := range d.OrderedKeys() {
			if k == "messages" {
				return "", &InputError{"chat_template_kwargs", "chat_template_kwargs must not set messages"}
			}
			data[k], _ = d.Get(k)
		}
	}
	var raised *RaiseError
	data["raise_exception"] = jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		msg := ""
		if len(args) > 0 {
			msg = pyStr(args[0])
		}
		raised = &RaiseError{msg}
		return jinja.Undefined(), raised
	})
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now takes one format string")
		}
		s, err := strftime(args[0].AsString(), now)
		if err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(s), nil
	})
	data[tojsonName] = jinja.NewCallable("tojson", tojsonFilter)
	data[textVar] = t.texts
	out, err := t.t.RenderValues(data)
	if raised != nil {
		return "", raised // the library wraps it; the template's message is what counts
	}
	if err != nil {
		return "", err
	}
	return out, nil
}

// messagesValue is msgs as vLLM hands them to the template.
func messagesValue(msgs []Message) (jinja.Value, error) {
	items := make([]jinja.Value, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		v := jinja.NewDict()
		d := v.AsDict()
		d.Set("role", jinja.NewString(m.Role))
		d.Set("content", jinja.NewString(m.Content))
		if m.ToolCalls != nil {
			calls, err := toolCallsValue(m.ToolCalls, fmt.Sprintf("messages[%d].tool_calls", i))
			if err != nil {
				return jinja.Undefined(), err
			}
			if calls.AsList().Len() > 0 { // vLLM drops an empty list
				d.Set("tool_calls", calls)
			}
		}
		if m.ToolCallID != "" {
			d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
		}
		if m.Name != "" {
			d.Set("name", jinja.NewString(m.Name))
		}
		items[i] = v
	}
	return jinja.NewList(items), nil
}

// toolCallsValue is a tool_calls array with each function's arguments
// parsed from their JSON text ({} when empty), as vLLM does before
// rendering: templates print them with tojson or iterate their items.
func toolCallsValue(raw json.RawMessage, param string) (jinja.Value, error) {
	v, err := jsonValue(raw)
	if err != nil || !v.IsList() {
		return jinja.Undefined(), &InputError{param, param + " must be an array of tool calls"}
	}
	for i, c := range v.AsList().Items {
		p := fmt.Sprintf("%s[%d].function", param, i)
		if !c.IsDict() {
			return jinja.Undefined(), &InputError{param, fmt.Sprintf("%s[%d] must be a function call", param, i)}
		}
		f, ok := c.AsDict().Get("function")
		if !ok || !f.IsDict() {
			return jinja.Undefined(), &InputError{p, p + " is required"}
		}
		args, _ := f.AsDict().Get("arguments")
		switch {
		case args.IsString() && strings.TrimSpace(args.AsString()) != "":
			parsed, err := jsonValue([]byte(args.AsString()))
			if err != nil {
				return jinja.Undefined(), &InputError{p + ".arguments", p + ".arguments must be JSON text: " + err.Error()}
			}
			f.AsDict().Set("arguments", parsed)
		case args.IsDict() || args.IsList():
		default: // absent, null or empty
			f.AsDict().Set("arguments", jinja.NewDict())
		}
	}
	return v, nil
}

// tojsonName is what lex renames the tojson filter to, so that a
// template's tojson is Hugging Face's (tojsonFilter) rather than the
// library's, which sorts keys and escapes HTML when indenting. The library
// looks a filter up among its own first and among the template's
// variables after, so the renamed filter is the one the render supplies.
const tojsonName = "hf_tojson"

// pyStr is Python's str() of a value a template passes to
// raise_exception: a string as is.
func pyStr(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return v.String()
}
