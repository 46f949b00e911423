package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `[ ]`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{"a":}`, `{,}`, `{"a":1 "b":2}`,
	`[1,2,[3,{"x":[]}]]`, `[1,]`, `[,1]`, `[1 2]`, `{"a":[1}`, `[{"a":1]`, `{"a":1}}`, `[[]`, `"x"`, `"x`,
	`"\u00e9\n\"\\\/\b\f\r\t"`, `"\u00g0"`, `"\u00e"`, `"\x"`, "\"a\x01\"", "\"\xff\xfe\"", `"\`,
	`0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `-12.5e10`, `1.e5`, `+1`, `0x1`,
	`true`, `tru`, `false`, `null`, `nul`, `nullx`, `true false`, `truefalse`, "\t\n\r1\r\n",
	`{"a":true,"b":false,"c":null,"d":"s","e":-1.5e3,"f":[{}],"g":{"h":[]}}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100),
}

func TestValid(t *testing.T) {
	for _, s := range validCases {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range validCases[:len(validCases)-3] {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	body := []byte(`{"model":"m","prompt":"0123456789abcdef","max_tokens":16,"stream":false,"stream_options":{"include_usage":true},"temperature":0.7,"stop":["\n","</s>"]}`)
	for _, v := range []struct {
		name string
		f    func([]byte) bool
	}{{"Valid", Valid}, {"json.Valid", json.Valid}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for range b.N {
				if !v.f(body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
