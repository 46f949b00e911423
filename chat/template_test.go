package chat

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

// TestSmallTemplate renders testdata/small.jinja, a template using what
// real chat templates use, with every conversation of
// testdata/conversations.json and compares with the reference renderer's
// output kept in testdata/small.golden.json (testdata/gen_golden.sh); when
// python3-jinja2 is here, the kept output is checked to be the
// reference's still.
func TestSmallTemplate(t *testing.T) {
	src, err := os.ReadFile("testdata/small.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	cases, raw := loadCases(t)
	golden, err := os.ReadFile("testdata/small.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var want []refResult
	if err := json.Unmarshal(golden, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(cases) {
		t.Fatalf("%d golden renders for %d conversations: run testdata/gen_golden.sh", len(want), len(cases))
	}
	tok := Tokens{"<s>", "</s>"}
	raised := 0
	for i, c := range cases {
		got, err := tmpl.Render(c.conversation(t), tok, refNow)
		switch w := want[i]; {
		case w.Error != nil:
			var re *RaiseError
			if !errors.As(err, &re) || re.Message != *w.Error {
				t.Errorf("%s: %q, %v; want the template to raise %q", c.Name, got, err, *w.Error)
			}
			raised++
		case err != nil:
			t.Errorf("%s: %v", c.Name, err)
		case got != *w.Text:
			t.Errorf("%s: differs from the reference %s", c.Name, firstDiff(got, *w.Text))
		}
	}
	if raised == 0 {
		t.Error("no conversation makes the template raise: raise_exception goes unchecked")
	}
	py := findPython()
	if py == "" {
		t.Log("the kept output is not checked against the live reference: " + noPython)
		return
	}
	out := renderReference(t, py, []refJob{{string(src), tok}}, raw)[0]
	if out.compileError != "" {
		t.Fatal(out.compileError)
	}
	ref := out.results
	for i := range ref {
		if !equalPtr(ref[i].Text, want[i].Text) || !equalPtr(ref[i].Error, want[i].Error) {
			t.Errorf("%s: testdata/small.golden.json is not the reference's output any more: run testdata/gen_golden.sh", cases[i].Name)
		}
	}
}

func equalPtr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestTojson checks the filter against json.dumps outputs (Python 3.11).
func TestTojson(t *testing.T) {
	v, err := jsonValue([]byte(`{"b": [1, 2.5, 1e-05, 1e16, 123456789012345.0, -0.0, true, null], "a": {"é": "x\u2028<&>\u0001\"\\"}, "e": {}, "l": []}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kwargs map[string]jinja.Value
		want   string
	}{
		{nil, `{"b": [1, 2.5, 1e-05, 1e+16, 123456789012345.0, -0.0, true, null], "a": {"é": "x` + "\u2028" + `<&>\u0001\"\\"}, "e": {}, "l": []}`},
		{map[string]jinja.Value{"ensure_ascii": jinja.NewBool(true), "sort_keys": jinja.NewBool(true)},
			`{"a": {"\u00e9": "x\u2028<&>\u0001\"\\"}, "b": [1, 2.5, 1e-05, 1e+16, 123456789012345.0, -0.0, true, null], "e": {}, "l": []}`},
		{map[string]jinja.Value{"indent": jinja.NewInt(2)},
			"{\n  \"b\": [\n    1,\n    2.5,\n    1e-05,\n    1e+16,\n    123456789012345.0,\n    -0.0,\n    true,\n    null\n  ],\n  \"a\": {\n    \"é\": \"x\u2028<&>\\u0001\\\"\\\\\"\n  },\n  \"e\": {},\n  \"l\": []\n}"},
		{map[string]jinja.Value{"separators": jinja.NewList([]jinja.Value{jinja.NewString(","), jinja.NewString(":")})},
			`{"b":[1,2.5,1e-05,1e+16,123456789012345.0,-0.0,true,null],"a":{"é":"x` + "\u2028" + `<&>\u0001\"\\"},"e":{},"l":[]}`},
	} {
		got, err := tojsonFilter([]jinja.Value{v}, tc.kwargs)
		if err != nil || got.AsString() != tc.want {
			t.Errorf("tojson(%v):\n got  %s %v\n want %s", tc.kwargs, got, err, tc.want)
		}
	}
	if s, _ := tojsonFilter([]jinja.Value{jinja.NewString("😀")}, map[string]jinja.Value{"ensure_ascii": jinja.NewBool(true)}); s.AsString() != `"\ud83d\ude00"` {
		t.Errorf("astral with ensure_ascii: %s", s)
	}
	if _, err := tojsonFilter([]jinja.Value{jinja.Undefined()}, nil); err == nil {
		t.Error("tojson of an undefined value did not fail, as json.dumps does")
	}
}

func TestStrftime(t *testing.T) {
	at := time.Date(2024, time.July, 6, 15, 4, 5, 0, time.UTC)
	for format, want := range map[string]string{
		"%d %b %Y":             "06 Jul 2024",
		"%Y-%m-%d":             "2024-07-06",
		"%-d %B %Y, %A %H:%M":  "6 July 2024, Saturday 15:04",
		"%I:%M:%S %p %j %a %%": "03:04:05 PM 188 Sat %",
	} {
		if got, err := strftime(format, at); err != nil || got != want {
			t.Errorf("strftime(%q) = %q %v, want %q", format, got, err, want)
		}
	}
	if _, err := strftime("%Q", at); err == nil {
		t.Error("an unknown directive was not refused")
	}
}

// TestWhitespace checks trim_blocks, lstrip_blocks, "-" and "+", raw
// blocks, comments and newlines (lex) on templates whose outputs are
// python3-jinja2's (Environment(trim_blocks=True, lstrip_blocks=True),
// x="X", y=False).
func TestWhitespace(t *testing.T) {
	for _, tc := range [][2]string{
		{"{% if x %}{{ x }}\n{% endif %}Z", "X\nZ"},
		{"{% if x %}{{ x }}\n{% endif %}\n{%- if y %}Y{% endif %}Z", "X\nZ"},
		{"{% if x %}{% if x %}\n\nA{% endif %}{% endif %}", "\nA"},
		{"  {% if x %}\n  A\n  {% endif %}\n  B {% if x %}C{% endif %}\n", "  A\n  B C"},
		{"A {# c #}\n  {#- c -#}  B\n    {# c #}\nC", "A B\nC"},
		{"{%- if x -%}  {{ x }}  {%- endif -%}  D  ", "XD  "},
		{"{%+ if x %}\n  {%+ endif +%}\nE", "  \nE"},
		{"{% raw %}\n  {{ not }} {% tags %}\n  {% endraw %}\nF", "\n  {{ not }} {% tags %}\nF"},
		{"{% raw -%}\n  G  {%- endraw %} H", "G H"},
		{"a\r\nb\rc\n", "a\nb\nc"},
		{"{{ x }}\n  {% for i in [1,2] %}\n    {{ i }}{{ '%}' }}\n  {% endfor %}\nI\n\n", "X\n    1%}\n    2%}\nI\n"},
		{"{{ 'a|tojson' }}|{{ ['}}'] | tojson }}", "a|tojson|[\"}}\"]"},
		{"{% set s %}\n  J {{ x -}}\n  K\n{% endset %}[{{ s }}]", "[  J XK\n]"},
		{"\t{% if x %}L{% endif %}\n", "L"},
		{"M\n  \t{% if x %}x{% endif %}  \n", "M\nx  "},
	} {
		tmpl, err := Parse(tc[0])
		if err != nil {
			t.Errorf("%q: %v", tc[0], err)
			continue
		}
		got, err := tmpl.Render(&Conversation{Kwargs: json.RawMessage(`{"x": "X", "y": false}`)}, Tokens{}, refNow)
		if err != nil || got != tc[1] {
			t.Errorf("%q: %q %v, want %q", tc[0], got, err, tc[1])
		}
	}
}

// A model's template that the engine cannot compile or run falls back to
// the family of its markers, saying why; one that raises on the probe
// conversation is still the model's.
func TestRendererFallback(t *testing.T) {
	tok := Tokens{"<s>", "</s>"}
	for _, tc := range []struct {
		src      string
		family   Family
		template bool
	}{
		{"{% for m in messages %}<|im_start|>{{ m.content }}{% endfor", ChatML, false},
		{"<|im_start|>{{ messages | no_such_filter }}", ChatML, false},
		{"", Plain, false},
		{"{{ raise_exception('System role required') }}<|start_header_id|>", Plain, true},
		{"{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}", Plain, true},
	} {
		r := NewRenderer(tc.src, tok)
		if (r.Template != nil) != tc.template || (!tc.template && (r.Family != tc.family || r.Fallback == "")) || (tc.template && r.Fallback != "") {
			t.Errorf("%q: template %v, family %v, fallback %q", tc.src, r.Template != nil, r.Family, r.Fallback)
		}
	}
	r := NewRenderer("{{ 1 | no_such_filter }}[INST]", tok)
	got, err := r.Render(&Conversation{Messages: []Message{{Role: "user", Content: "Hi"}}}, refNow)
	if err != nil || got != "[INST] Hi [/INST]" {
		t.Errorf("fallback render %q %v", got, err)
	}
	// A request's own template renders instead, and one that does not
	// compile is the request's error.
	c := &Conversation{Messages: []Message{{Role: "user", Content: "Hi"}}, Template: "{{ messages[0].content | upper }}"}
	if got, err := r.Render(c, refNow); err != nil || got != "HI" {
		t.Errorf("request template: %q %v", got, err)
	}
	c.Template = "{% if %}"
	var ie *InputError
	if _, err := r.Render(c, refNow); !errors.As(err, &ie) || ie.Param != "chat_template" {
		t.Errorf("a request template that does not compile: %v", err)
	}
}

// Bad tool calls and kwargs are the request's errors, naming the field.
func TestRenderInputErrors(t *testing.T) {
	tmpl, err := Parse("{{ messages | length }}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c     Conversation
		param string
	}{
		{Conversation{Messages: []Message{{Role: "assistant", ToolCalls: json.RawMessage(`[{"type":"function","function":{"name":"f","arguments":"{not json"}}]`)}}},
			"messages[0].tool_calls[0].function.arguments"},
		{Conversation{Messages: []Message{{Role: "user"}}, Kwargs: json.RawMessage(`[1]`)}, "chat_template_kwargs"},
		{Conversation{Messages: []Message{{Role: "user"}}, Kwargs: json.RawMessage(`{"messages":[]}`)}, "chat_template_kwargs"},
	} {
		var ie *InputError
		if _, err := tmpl.Render(&tc.c, Tokens{}, refNow); !errors.As(err, &ie) || ie.Param != tc.param {
			t.Errorf("%+v: %v, want an InputError naming %s", tc.c, err, tc.param)
		}
	}
	// chat_template_kwargs reach the template and may override its other
	// variables; an empty argument list becomes {}.
	tmpl, _ = Parse("{{ enable_thinking }} {{ add_generation_prompt }} {{ messages[0].tool_calls[0].function.arguments | tojson }}")
	c := Conversation{Messages: []Message{{Role: "assistant", ToolCalls: json.RawMessage(`[{"type":"function","function":{"name":"f","arguments":""}}]`)}},
		Kwargs: json.RawMessage(`{"enable_thinking": false, "add_generation_prompt": true}`)}
	if got, err := tmpl.Render(&c, Tokens{}, refNow); err != nil || !strings.HasPrefix(got, "False True {}") {
		t.Errorf("kwargs: %q %v", got, err)
	}
}
