package openai

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"testing"
)

// checkFieldsReference is checkFields as a map of every member: the
// reading the scanner must match.
func checkFieldsReference(body []byte, chat bool) ([]string, *Error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil, BadRequest("", "the request body must be a JSON object")
	}
	names := slices.Collect(maps.Keys(fields))
	sort.Strings(names)
	sup, ref := completionSupported, completionRefused
	if chat {
		sup, ref = chatSupported, chatRefused
	}
	var unknown []string
	for _, k := range names {
		if sup[k] {
			continue
		}
		r, ok := ref[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		if !r.noOp(fields[k]) {
			return unknown, BadRequest(k, "%s is not supported by kvlease: %s", k, r.why)
		}
	}
	return unknown, nil
}

func TestCheckFieldsMatchesMapReading(t *testing.T) {
	for _, body := range []string{
		`{}`,
		` {"prompt":"x", "zz":1 ,"aa":[1,{"b":"}"}],"zz":2}`,
		`{"\u0074ools":[{"type":"function"}],"tool_choice":"none"}`,
		`{"tools":[{"type":"function"}]}`,
		`{"tools":[{"type":"function"}],"tools":null}`,
		`{"tool_choice":"auto","tool_choice":"none","tools":[1]}`,
		`{"a\"b":1,"echo":true}`,
		`{"echo":false,"echo":true}`,
		`{"suffix":"s","best_of":1,"x":null}`,
		`{"messages":[],"logit_bias":{"1":2},"e\u0301":0}`,
		"{\"\xef\":[]}", // invalid UTF-8 in a key reads as U+FFFD
	} {
		for _, chat := range []bool{false, true} {
			gotU, gotE := checkFields([]byte(body), chat)
			wantU, wantE := checkFieldsReference([]byte(body), chat)
			if !slices.Equal(gotU, wantU) || (gotE == nil) != (wantE == nil) || (gotE != nil && gotE.Message != wantE.Message) {
				t.Errorf("chat %v, %s: got %q, %v; want %q, %v", chat, body, gotU, gotE, wantU, wantE)
			}
		}
	}
}

func TestEachMember(t *testing.T) {
	b := []byte(` { "a" : [1, "]"] , "b\"":{"c":{}},"d":-1.5e3 } `)
	var got []string
	if !EachMember(b, func(k []byte, s, e int) { got = append(got, string(k)+"="+string(b[s:e])) }) {
		t.Fatal("not an object")
	}
	if want := []string{`"a"=[1, "]"]`, `"b\""={"c":{}}`, `"d"=-1.5e3`}; !slices.Equal(got, want) {
		t.Errorf("members %q, want %q", got, want)
	}
	for _, notObj := range []string{`[]`, `1`, ``, ` "x"`} {
		if EachMember([]byte(notObj), func([]byte, int, int) { t.Error("called") }) {
			t.Errorf("%q is an object?", notObj)
		}
	}
	if !EachMember([]byte(`{ }`), func([]byte, int, int) { t.Error("called") }) {
		t.Error("{ } is an object")
	}
}

func FuzzCheckFields(f *testing.F) {
	f.Add([]byte(`{"prompt":"x","zz":1,"echo":true,"\u0074ools":[],"tool_choice":"none","zz":[{}]}`), true)
	f.Add([]byte(`{"suffix":"","best_of":2}`), false)
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil {
			return // checkFields runs on bodies that decoded
		}
		gotU, gotE := checkFields(body, chat)
		wantU, wantE := checkFieldsReference(body, chat)
		if !slices.Equal(gotU, wantU) || (gotE == nil) != (wantE == nil) || (gotE != nil && gotE.Message != wantE.Message) {
			t.Fatalf("chat %v, %q: got %q, %v; want %q, %v", chat, body, gotU, gotE, wantU, wantE)
		}
	})
}
