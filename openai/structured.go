package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kvlease/kvlease/chat"
	"strings"

	"github.com/kvlease/kvlease/model/constrain"
)

// ToolChoiceMode is how a chat request's tools may be called.
type ToolChoiceMode uint8

// Tool choices (OpenAI's tool_choice).
const (
	ToolChoiceNone     ToolChoiceMode = iota // answer in text (the default without tools)
	ToolChoiceAuto                           // the model chooses: text or calls (the default with tools)
	ToolChoiceRequired                       // one or more calls
	ToolChoiceFunction                       // one call of the named function
)

// Structure is what constrains a request's output: response_format, and
// for chat its tools and tool_choice. The zero value constrains nothing.
type Structure struct {
	// Grammar constrains the generated text (constrained decoding); nil
	// when the text is free.
	Grammar *constrain.Grammar
	// ToolChoice is how tools may be called; Tool the function's name for
	// ToolChoiceFunction. With ToolChoiceAuto and ToolChoiceRequired the
	// text is one call, {"name":...,"arguments":{...}}, or with
	// ParallelToolCalls a JSON array of them, which the server turns into
	// tool_calls (constrain.CallParser); with ToolChoiceFunction the text
	// is the call's arguments.
	ToolChoice        ToolChoiceMode
	Tool              string
	ParallelToolCalls bool
	// ToolsPrompt tells the model of the tools it may call and of the form
	// of a call; "" when no call may be made. Renderers without a tools
	// section of their own put it first in the system message
	// (chat.WithToolsPrompt); a model's Jinja template gets the tools.
	ToolsPrompt string
}

// Calls reports whether the answer may be tool calls rather than text.
func (s *Structure) Calls() bool { return s.ToolChoice != ToolChoiceNone }

// Limits of tool definitions.
const (
	// MaxToolNameBytes is OpenAI's limit on a function name.
	MaxToolNameBytes = 64
)

type rawStructure struct {
	ResponseFormat    json.RawMessage `json:"response_format"`
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
}

// structureKeys are rawStructure's JSON names.
var structureKeys = []string{"response_format", "tools", "tool_choice", "parallel_tool_calls"}

// mayHaveStructure reports whether body, a JSON object already decoded
// once, may hold a member encoding/json would decode into rawStructure:
// a key equal to one of its names up to case, or one it cannot tell
// without unquoting (escapes, non-ASCII). Most requests have none, and
// skip a second decoding of the whole body.
func mayHaveStructure(body []byte) bool { return mayHaveKeys(body, structureKeys) }

// mayHaveKeys reports whether body, a JSON object already decoded once,
// may hold a member encoding/json would decode into a field named one of
// keys: a key equal to one up to case, or one it cannot tell without
// unquoting (escapes, non-ASCII).
func mayHaveKeys(body []byte, keys []string) bool {
	may := false
	EachMember(body, func(rawKey []byte, _, _ int) {
		if may {
			return
		}
		key := rawKey[1 : len(rawKey)-1]
		for _, c := range key {
			if c == '\\' || c >= 0x80 {
				may = true
				return
			}
		}
		for _, name := range keys {
			if len(key) == len(name) && strings.EqualFold(string(key), name) {
				may = true
				return
			}
		}
	})
	return may
}

// parseStructure reads response_format and, for chat, tools, tool_choice
// and parallel_tool_calls from body, and compiles their grammar.
func parseStructure(body []byte, chat bool) (Structure, *Error) {
	var raw rawStructure
	if !mayHaveStructure(body) {
		return Structure{}, nil // what decoding rawStructure's zero value gives
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Structure{}, BadRequest(te.Field, "%s must be %s, got %s", te.Field, describeType(te.Type), te.Value)
		}
		return Structure{}, BadRequest("", "the request body is not valid JSON: %v", err)
	}
	var st Structure
	g, e := parseResponseFormat(raw.ResponseFormat)
	if e != nil {
		return st, e
	}
	st.Grammar = g
	if !chat {
		return st, nil
	}
	st.ParallelToolCalls = raw.ParallelToolCalls == nil || *raw.ParallelToolCalls
	tools, defs, e := parseTools(raw.Tools)
	if e != nil {
		return st, e
	}
	if e := parseToolChoice(raw.ToolChoice, tools, &st); e != nil {
		return st, e
	}
	if !st.Calls() {
		return st, nil
	}
	if g != nil {
		return st, BadRequest("response_format", "response_format %s together with tool calls is not supported: use tool_choice \"none\", or give the answer's schema as a tool", rfType(raw.ResponseFormat))
	}
	st.ToolsPrompt = toolsPrompt(defs, &st)
	if st.ToolChoice == ToolChoiceFunction {
		for _, t := range tools {
			if t.Name == st.Tool {
				st.Grammar = t.Params
			}
		}
		return st, nil
	}
	st.Grammar = constrain.ToolCalls(tools, st.ParallelToolCalls, st.ToolChoice == ToolChoiceAuto)
	return st, nil
}

func rfType(raw json.RawMessage) string {
	var rf struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &rf)
	return fmt.Sprintf("%q", rf.Type)
}

// parseResponseFormat compiles response_format: nil for text.
func parseResponseFormat(raw json.RawMessage) (*constrain.Grammar, *Error) {
	if raw == nil || nullOnly(raw) {
		return nil, nil
	}
	var rf struct {
		Type       *string         `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &rf) != nil {
		return nil, BadRequest("response_format", "response_format must be an object with a type")
	}
	if rf.Type == nil {
		return nil, BadRequest("response_format.type", "response_format.type is required")
	}
	switch *rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return constrain.Any(), nil
	case "json_schema":
	default:
		return nil, BadRequest("response_format.type", "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got %q", *rf.Type)
	}
	if rf.JSONSchema == nil || nullOnly(rf.JSONSchema) {
		return nil, BadRequest("response_format.json_schema", "response_format.json_schema is required with type \"json_schema\"")
	}
	var js struct {
		Name   *string         `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if bytes.TrimSpace(rf.JSONSchema)[0] != '{' || json.Unmarshal(rf.JSONSchema, &js) != nil {
		return nil, BadRequest("response_format.json_schema", "response_format.json_schema must be an object with a name and a schema")
	}
	if js.Name != nil && !validName(*js.Name) {
		return nil, BadRequest("response_format.json_schema.name", "response_format.json_schema.name must be 1 to %d letters, digits, '_' or '-', got %q", MaxToolNameBytes, *js.Name)
	}
	if js.Schema == nil || nullOnly(js.Schema) {
		return constrain.Any(), nil // no schema: any JSON object
	}
	g, err := constrain.Compile(js.Schema, js.Strict != nil && *js.Strict)
	if err != nil {
		return nil, schemaError("response_format.json_schema.schema", err)
	}
	return g, nil
}

// schemaError is the 400 for a schema constrain cannot compile: it names
// the keyword's place in the request.
func schemaError(param string, err error) *Error {
	var ce *constrain.Error
	if errors.As(err, &ce) {
		p := param
		if ce.Path != "" {
			p += strings.ReplaceAll(ce.Path, "/", ".")
		}
		if ce.Keyword != "" && !strings.HasSuffix(p, "."+ce.Keyword) {
			p += "." + ce.Keyword
		}
		return BadRequest(p, "%s: %s", p, ce.Msg)
	}
	return BadRequest(param, "%s: %v", param, err)
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > MaxToolNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// emptyParams is a function's parameters when it declares none: no
// arguments, {}.
var emptyParams = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

// toolDef is a tool as the tools prompt shows it.
type toolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// parseTools compiles the tools' parameters; defs are the tools for the
// prompt.
func parseTools(raw json.RawMessage) (tools []constrain.Tool, defs []toolDef, _ *Error) {
	if raw == nil || nullOnly(raw) {
		return nil, nil, nil
	}
	var items []json.RawMessage
	if bytes.TrimSpace(raw)[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, nil, BadRequest("tools", "tools must be an array of tool objects")
	}
	if len(items) > constrain.MaxTools {
		return nil, nil, BadRequest("tools", "tools has %d entries; at most %d are allowed", len(items), constrain.MaxTools)
	}
	tools = make([]constrain.Tool, 0, len(items))
	seen := map[string]bool{}
	for i, it := range items {
		p := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			} `json:"function"`
		}
		if len(bytes.TrimSpace(it)) == 0 || bytes.TrimSpace(it)[0] != '{' || json.Unmarshal(it, &t) != nil {
			return nil, nil, BadRequest(p, "%s must be a tool object", p)
		}
		if t.Type != "function" {
			return nil, nil, BadRequest(p+".type", "%s.type must be \"function\", got %q: only function tools are supported", p, t.Type)
		}
		if t.Function == nil {
			return nil, nil, BadRequest(p+".function", "%s.function is required", p)
		}
		name := t.Function.Name
		if !validName(name) {
			return nil, nil, BadRequest(p+".function.name", "%s.function.name must be 1 to %d letters, digits, '_' or '-', got %q", p, MaxToolNameBytes, name)
		}
		if seen[name] {
			return nil, nil, BadRequest(p+".function.name", "%s.function.name %q is already the name of another tool", p, name)
		}
		seen[name] = true
		params := t.Function.Parameters
		if params == nil || nullOnly(params) {
			params = emptyParams
		}
		g, err := constrain.Compile(params, t.Function.Strict != nil && *t.Function.Strict)
		if err != nil {
			return nil, nil, schemaError(p+".function.parameters", err)
		}
		if !g.IsObject() {
			return nil, nil, BadRequest(p+".function.parameters", "%s.function.parameters must be a schema of type object", p)
		}
		tools = append(tools, constrain.Tool{Name: name, Params: g})
		defs = append(defs, toolDef{Name: name, Description: t.Function.Description, Parameters: compactJSON(params)})
	}
	return tools, defs, nil
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil { // unreachable: it decoded
		return raw
	}
	return b.Bytes()
}

// toolsPrompt is the system text that tells the model of the tools and of
// the form of a call, as a chat template's tools section does.
func toolsPrompt(defs []toolDef, st *Structure) string {
	var b strings.Builder
	b.WriteString("You can call these tools:\n")
	for _, d := range defs {
		j, _ := json.Marshal(d) // fields of JSON types always marshal
		b.Write(j)
		b.WriteByte('\n')
	}
	switch st.ToolChoice {
	case ToolChoiceFunction:
		fmt.Fprintf(&b, "Call %s: answer with its arguments.", st.Tool)
		return b.String()
	case ToolChoiceRequired:
		b.WriteString("Call one: answer with ")
	default:
		b.WriteString("To call one, answer with ")
	}
	b.WriteString(`{"name": <tool>, "arguments": <object>}`)
	if st.ParallelToolCalls {
		b.WriteString(" or an array of calls")
	}
	b.WriteString(".")
	return b.String()
}

func parseToolChoice(raw json.RawMessage, tools []constrain.Tool, st *Structure) *Error {
	st.ToolChoice = ToolChoiceNone
	if raw == nil || nullOnly(raw) {
		if len(tools) > 0 {
			st.ToolChoice = ToolChoiceAuto // OpenAI's default with tools
		}
		return nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "none":
			return nil
		case "auto":
			if len(tools) > 0 {
				st.ToolChoice = ToolChoiceAuto
			}
			return nil
		case "required":
			if len(tools) == 0 {
				return BadRequest("tool_choice", "tool_choice \"required\" needs tools")
			}
			st.ToolChoice = ToolChoiceRequired
			return nil
		}
		return BadRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or a function, got %q", mode)
	}
	var named struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &named) != nil || named.Type != "function" || named.Function == nil {
		return BadRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	for _, t := range tools {
		if t.Name == named.Function.Name {
			st.ToolChoice, st.Tool = ToolChoiceFunction, t.Name
			return nil
		}
	}
	return BadRequest("tool_choice.function.name", "tool_choice names function %q, which is not among the tools", named.Function.Name)
}

// checkToolCalls checks an assistant message's tool_calls (only an
// assistant's, each a function call) and returns them for the template:
// nil when null or empty (vLLM drops an empty list).
func checkToolCalls(param, role string, raw json.RawMessage) (json.RawMessage, *Error) {
	if raw == nil || isNullOrEmpty(raw) {
		return nil, nil
	}
	if role != "assistant" {
		return nil, BadRequest(param, "%s: only assistant messages carry tool calls", param)
	}
	if _, err := chat.ParseToolCalls(raw, param); err != nil {
		ie := err.(*chat.InputError)
		return nil, BadRequest(ie.Param, "%s", ie.Msg)
	}
	return raw, nil
}
