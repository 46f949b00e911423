package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestMayHaveStructure: the skip of rawStructure's decoding happens only
// when decoding it would give its zero value, however a key is written.
func TestMayHaveStructure(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","prompt":"x","max_tokens":16}`: false,
		`{"tool":1,"tools_x":2,"format":3}`:          false,
		`{"response_format":{"type":"json_object"}}`: true,
		`{"Response_Format":{"type":"json_object"}}`: true,
		`{"TOOLS":[]}`:             true,
		`{"tool\u0073":[]}`:        true,
		"{\"tool_choi\u017fe\":1}": true,
		`{"a":{"tools":[]},"parallel_tool_calls":false}`:         true,
		`{"a":{"tools":[],"response_format":{"type":"text"}}}`:   false,
		`{"messages":[{"role":"user","content":"tools"}],"n":1}`: false,
	} {
		if got := mayHaveStructure([]byte(body)); got != want {
			t.Errorf("mayHaveStructure(%s) = %v, want %v", body, got, want)
		}
		var raw rawStructure
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			t.Fatal(err)
		}
		if !want && !reflect.ValueOf(raw).IsZero() {
			t.Errorf("%s: skipped, but encoding/json decodes %+v", body, raw)
		}
	}
	st, e := parseStructure([]byte(`{"Response_Format":{"type":"json_object"}}`), false)
	if e != nil || st.Grammar == nil {
		t.Errorf("a response_format key in other case: %v %+v", e, st)
	}
}
