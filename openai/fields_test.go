package openai

import (
	"github.com/kvlease/kvlease/chat"
	"sort"
	"strings"
	"testing"
)

// refusedSamples holds, for every refused field, a value that asks for
// something kvlease does not do. The test fails when a refused field has
// no sample, so the table and the inventory cannot drift apart.
var refusedSamples = map[string]string{
	"best_of": `2`, "use_beam_search": `true`, "length_penalty": `0.5`, "skip_special_tokens": `false`,
	"spaces_between_special_tokens": `false`,
	"logprob_token_ids":             `[3]`, "return_token_offsets": `true`,
	"structured_outputs": `{"json": {}}`, "guided_json": `{"type": "object"}`, "guided_regex": `"a+"`,
	"guided_choice": `["a", "b"]`, "guided_grammar": `"root ::= \"a\""`,
	"guided_decoding_backend": `"xgrammar"`, "guided_whitespace_pattern": `" "`,
	"structural_tag": `"{}"`, "logits_processors": `["my.proc"]`, "vllm_xargs": `{"k": 1}`,
	"repetition_detection": `{"max_pattern_size": 4}`, "thinking_token_budget": `100`,
	"request_id": `"r1"`, "ec_transfer_params": `{"a": 1}`, "mm_processor_kwargs": `{"a": 1}`,
	"suffix": `"tail"`, "prompt_embeds": `"AAAA"`, "add_special_tokens": `true`,
	"audio": `{"voice": "alloy", "format": "mp3"}`, "modalities": `["text", "audio"]`,
	"web_search_options": `{}`, "moderation": `{"model": "omni-moderation-latest"}`,
	"functions": `[{"name": "f"}]`, "function_call": `"auto"`, "reasoning_effort": `"low"`,
	"verbosity": `"high"`, "service_tier": `"flex"`, "store": `true`,
	"prompt_cache_retention": `"24h"`, "continue_final_message": `true`,
	"documents": `[{"title": "t"}]`, "chat_template": `"{{x}}"`, "chat_template_kwargs": `{"a": 1}`,
	"media_io_kwargs": `{"a": 1}`,
}

// noOpOverrides are no-op values for fields whose null is not the only
// no-op worth testing; the others are tested with null.
var noOpOverrides = map[string][]string{
	"best_of": {`1`}, "length_penalty": {`1.0`}, "use_beam_search": {`false`},
	"skip_special_tokens": {`true`},
	"modalities":          {`["text"]`}, "suffix": {`""`},
	"function_call": {`"none"`}, "service_tier": {`"auto"`, `"default"`}, "store": {`false`},
	"verbosity": {`"medium"`}, "thinking_token_budget": {`-1`},
}

func parseFor(chat bool, extra string) *Error {
	if chat {
		_, e := ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"x"}]` + extra + `}`))
		return e
	}
	_, e := ParseCompletionRequest([]byte(`{"prompt":"x"` + extra + `}`))
	return e
}

func TestRefusedFieldsNameThemselves(t *testing.T) {
	for _, chat := range []bool{false, true} {
		ref := completionRefused
		if chat {
			ref = chatRefused
		}
		names := make([]string, 0, len(ref))
		for k := range ref {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			sample, ok := refusedSamples[k]
			if k == "add_special_tokens" && !chat { // default true on completions, false on chat
				sample = `false`
			}
			if !ok {
				t.Errorf("refused field %q has no sample value in this test", k)
				continue
			}
			if ClassifyField(chat, k) != FieldRefused {
				t.Errorf("chat=%v: %q classified %v", chat, k, ClassifyField(chat, k))
			}
			e := parseFor(chat, `,"`+k+`":`+sample)
			if e == nil || e.Status != 400 || e.Param != k || !strings.Contains(e.Message, k) || !strings.Contains(e.Message, "not supported") {
				t.Errorf("chat=%v %s=%s: got %v, want a 400 naming %s", chat, k, sample, e, k)
			}
			noOps := append([]string{`null`}, noOpOverrides[k]...)
			if k == "add_special_tokens" {
				noOps = append(noOps, map[bool]string{false: `true`, true: `false`}[chat])
			}
			for _, v := range noOps {
				if e := parseFor(chat, `,"`+k+`":`+v); e != nil {
					t.Errorf("chat=%v %s=%s is a no-op but got %v", chat, k, v, e)
				}
			}
		}
	}
}

func TestUnknownFieldsListedNotRefused(t *testing.T) {
	r, e := ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"zeta":1,"alpha":{"a":[]},"metadata":{"k":"v"},"prompt_cache_key":"c"}`))
	if e != nil {
		t.Fatal(e)
	}
	if strings.Join(r.Ignored, ",") != "alpha,zeta" {
		t.Fatalf("ignored %v", r.Ignored)
	}
	if ClassifyField(true, "zeta") != FieldUnknown || ClassifyField(true, "messages") != FieldSupported ||
		ClassifyField(false, "prompt") != FieldSupported || ClassifyField(false, "messages") != FieldUnknown {
		t.Fatal("classification")
	}
	c, e := ParseCompletionRequest([]byte(`{"prompt":"x"}`))
	if e != nil || c.Ignored != nil {
		t.Fatalf("%v %v", c, e)
	}
}

// Two refused fields: the 400 names the first by name, every time.
func TestRefusedFieldOrderIsStable(t *testing.T) {
	for i := 0; i < 20; i++ {
		e := parseFor(false, `,"use_beam_search":true,"best_of":3,"length_penalty":0.5`)
		if e == nil || e.Param != "best_of" {
			t.Fatalf("got %v", e)
		}
	}
}

func TestToolsAndToolChoice(t *testing.T) {
	tools := `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}},` +
		`{"type":"function","function":{"name":"g"}}]`
	cases := []struct {
		extra, param string
		choice       ToolChoiceMode
		grammar      bool
	}{
		{tools, "", ToolChoiceAuto, true},
		{tools + `,"tool_choice":"auto"`, "", ToolChoiceAuto, true},
		{tools + `,"tool_choice":"required","parallel_tool_calls":false`, "", ToolChoiceRequired, true},
		{tools + `,"tool_choice":{"type":"function","function":{"name":"f"}}`, "", ToolChoiceFunction, true},
		{tools + `,"tool_choice":"none"`, "", ToolChoiceNone, false},
		{`,"tool_choice":"auto"`, "", ToolChoiceNone, false},
		{`,"tools":[],"tool_choice":"auto"`, "", ToolChoiceNone, false},
		{`,"tools":null`, "", ToolChoiceNone, false},
		{tools + `,"tool_choice":{"type":"function","function":{"name":"h"}}`, "tool_choice.function.name", 0, false},
		{tools + `,"tool_choice":"sometimes"`, "tool_choice", 0, false},
		{`,"tool_choice":"required"`, "tool_choice", 0, false},
		{`,"tools":{"a":1}`, "tools", 0, false},
		{`,"tools":[{"type":"custom","custom":{"name":"x"}}]`, "tools[0].type", 0, false},
		{`,"tools":[{"type":"function"}]`, "tools[0].function", 0, false},
		{`,"tools":[{"type":"function","function":{"name":"a b"}}]`, "tools[0].function.name", 0, false},
		{`,"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]`, "tools[1].function.name", 0, false},
		{`,"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"string"}}}]`, "tools[0].function.parameters", 0, false},
		{`,"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"type":"string","pattern":"a"}}}}}]`,
			"tools[0].function.parameters.properties.x.pattern", 0, false},
		{tools + `,"response_format":{"type":"json_object"}`, "response_format", 0, false},
	}
	for _, tc := range cases {
		r, e := ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"x"}]` + tc.extra + `}`))
		if tc.param == "" {
			if e != nil {
				t.Errorf("%s: %v", tc.extra, e)
				continue
			}
			if r.Structure.ToolChoice != tc.choice || (r.Structure.Grammar != nil) != tc.grammar {
				t.Errorf("%s: choice %v grammar %v", tc.extra, r.Structure.ToolChoice, r.Structure.Grammar != nil)
			}
			continue
		}
		if e == nil || e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: got %v, want a 400 naming %s", tc.extra, e, tc.param)
		}
	}
}

func TestResponseFormat(t *testing.T) {
	cases := []struct {
		rf, param string
		grammar   bool
	}{
		{`null`, "", false},
		{`{"type":"text"}`, "", false},
		{`{"type":"json_object"}`, "", true},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}`, "", true},
		{`{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}}`, "", true},
		{`{"type":"json_schema","json_schema":{"name":"x"}}`, "", true},
		{`{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}`, "response_format.json_schema.schema.additionalProperties", false},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"integer","multipleOf":3}}}}}`, "response_format.json_schema.schema.properties.a.multipleOf", false},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","format":"email"}}}`, "response_format.json_schema.schema.format", false},
		{`{"type":"json_schema"}`, "response_format.json_schema", false},
		{`{"type":"json_schema","json_schema":{"name":"bad name","schema":{}}}`, "response_format.json_schema.name", false},
		{`{"type":"yaml"}`, "response_format.type", false},
		{`{}`, "response_format.type", false},
		{`"json"`, "response_format", false},
	}
	for _, chat := range []bool{false, true} {
		for _, tc := range cases {
			var st Structure
			var e *Error
			if chat {
				var r *ChatCompletionRequest
				r, e = ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"response_format":` + tc.rf + `}`))
				if e == nil {
					st = r.Structure
				}
			} else {
				var r *CompletionRequest
				r, e = ParseCompletionRequest([]byte(`{"prompt":"x","response_format":` + tc.rf + `}`))
				if e == nil {
					st = r.Structure
				}
			}
			if tc.param == "" {
				if e != nil || (st.Grammar != nil) != tc.grammar {
					t.Errorf("%s: %v, grammar %v", tc.rf, e, st.Grammar != nil)
				}
				continue
			}
			if e == nil || e.Status != 400 || e.Param != tc.param {
				t.Errorf("%s: got %v, want a 400 naming %s", tc.rf, e, tc.param)
			}
		}
	}
}

func TestTopKMinP(t *testing.T) {
	for _, tc := range []struct {
		extra string
		topK  int
		minP  float64
		param string
	}{
		{``, 0, 0, ""},
		{`,"top_k":-1,"min_p":0`, 0, 0, ""},
		{`,"top_k":7,"min_p":0.25`, 7, 0.25, ""},
		{`,"top_k":null,"min_p":1`, 0, 1, ""},
		{`,"top_k":-2`, 0, 0, "top_k"},
		{`,"top_k":1.5`, 0, 0, "top_k"},
		{`,"min_p":1.5`, 0, 0, "min_p"},
		{`,"min_p":-0.1`, 0, 0, "min_p"},
	} {
		r, e := ParseCompletionRequest([]byte(`{"prompt":"x"` + tc.extra + `}`))
		if tc.param != "" {
			if e == nil || e.Param != tc.param {
				t.Errorf("%s: got %v, want a 400 naming %s", tc.extra, e, tc.param)
			}
			continue
		}
		if e != nil || r.TopK != tc.topK || r.MinP != tc.minP {
			t.Errorf("%s: %v, top_k %d min_p %v", tc.extra, e, r.TopK, r.MinP)
		}
	}
}

func TestTruncatePromptTokens(t *testing.T) {
	r, e := ParseCompletionRequest([]byte(`{"prompt":"x","truncate_prompt_tokens":5,"truncation_side":"right"}`))
	if e != nil || r.TruncatePromptTokens != 5 || !r.TruncateRight {
		t.Fatalf("%+v %v", r, e)
	}
	r, e = ParseCompletionRequest([]byte(`{"prompt":"x","truncate_prompt_tokens":-1,"truncation_side":"left"}`))
	if e != nil || r.TruncatePromptTokens != -1 || r.TruncateRight {
		t.Fatalf("%+v %v", r, e)
	}
	for body, param := range map[string]string{
		`"truncate_prompt_tokens":0`: "truncate_prompt_tokens", `"truncate_prompt_tokens":-2`: "truncate_prompt_tokens",
		`"truncation_side":"middle"`: "truncation_side", `"truncation_side":1`: "truncation_side",
	} {
		if e := parseFor(true, ","+body); e == nil || e.Param != param {
			t.Errorf("%s: got %v, want a 400 naming %s", body, e, param)
		}
	}
}

// An assistant message's tool calls reach the template as sent, with the
// tool message's tool_call_id; kvlease's fixed template renders them as
// the model generates them.
func TestAssistantToolCallsRendered(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"w?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\": \"Oslo\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"rain"},
		{"role":"assistant","content":"hm","tool_calls":[{"type":"function","function":{"name":"a","arguments":"{}"}},{"type":"function","function":{"name":"b","arguments":"not json"}}]}]}`
	r, e := ParseChatCompletionRequest([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	if m := r.Messages[1]; m.Content != "" || !strings.HasPrefix(string(m.ToolCalls), `[{"id":"c1"`) {
		t.Errorf("assistant message %+v", m)
	}
	if m := r.Messages[2]; m.ToolCallID != "c1" || m.Content != "rain" {
		t.Errorf("tool message %+v", m)
	}
	if got, want := chat.PlainContent(&r.Messages[1]), `{"name":"w","arguments":{"city": "Oslo"}}`; got != want {
		t.Errorf("one call rendered %s, want %s", got, want)
	}
	if got, want := chat.PlainContent(&r.Messages[3]), "hm\n"+`[{"name":"a","arguments":{}},{"name":"b","arguments":"not json"}]`; got != want {
		t.Errorf("two calls rendered %s, want %s", got, want)
	}
	if got := r.Prompt(); !strings.Contains(got, "<|assistant|>\n"+`{"name":"w","arguments":{"city": "Oslo"}}`+"\n<|tool|>\nrain\n") {
		t.Errorf("fixed template: %q", got)
	}
	for _, bad := range []string{
		`{"messages":[{"role":"user","content":"x","tool_calls":[{"type":"function","function":{"name":"a","arguments":"{}"}}]}]}`,
		`{"messages":[{"role":"assistant","tool_calls":{"a":1}}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"type":"custom"}]}]}`,
	} {
		if _, e := ParseChatCompletionRequest([]byte(bad)); e == nil || e.Status != 400 {
			t.Errorf("%s: got %v, want a 400", bad, e)
		}
	}
}

// Tools that may be called are shown to the model in the system message
// by renderers without a tools section (the fixed template); with
// tool_choice none they are not. A Jinja template gets the tools as sent.
func TestToolsPrompt(t *testing.T) {
	tools := `"tools":[{"type":"function","function":{"name":"f","description":"Finds.","parameters":{"type":"object", "properties":{}}}}]`
	r, e := ParseChatCompletionRequest([]byte(`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"x"}],` + tools + `}`))
	if e != nil {
		t.Fatal(e)
	}
	want := "You can call these tools:\n" + `{"name":"f","description":"Finds.","parameters":{"type":"object","properties":{}}}` + "\n" +
		`To call one, answer with {"name": <tool>, "arguments": <object>} or an array of calls.` +
		"\n\nBe brief."
	if got := r.Prompt(); got != "<|system|>\n"+want+"\n<|user|>\nx\n<|assistant|>\n" {
		t.Errorf("prompt %q, want the tools in the system message %q", got, want)
	}
	if r.Messages[0].Content != "Be brief." || string(r.Tools) != tools[len(`"tools":`):] {
		t.Errorf("the template's view: system %q, tools %s", r.Messages[0].Content, r.Tools)
	}
	r, e = ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"x"}],` + tools + `,"tool_choice":{"type":"function","function":{"name":"f"}}}`))
	if e != nil {
		t.Fatal(e)
	}
	if got := r.Prompt(); !strings.HasPrefix(got, "<|system|>\nYou can call these tools:") || !strings.Contains(got, "Call f: answer with its arguments.\n<|user|>\nx\n") {
		t.Errorf("prompt %q", got)
	}
	r, e = ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"x"}],` + tools + `,"tool_choice":"none"}`))
	if e != nil || r.Prompt() != "<|user|>\nx\n<|assistant|>\n" || r.Tools == nil {
		t.Errorf("tool_choice none: %v %q, tools %s", e, r.Prompt(), r.Tools)
	}
}
