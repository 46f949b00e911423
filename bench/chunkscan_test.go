package bench

import (
	"encoding/json"
	"testing"
)

// slowEvent decodes data with encoding/json only: the reference.
func slowEvent(t *testing.T, data []byte) (ok bool, failure string, choices int, finished, usage bool, prompt, output int, text string) {
	t.Helper()
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, "", 0, false, false, 0, 0, ""
	}
	if c.Usage != nil {
		usage, prompt, output = true, c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	return true, c.failure(data), len(c.Choices), c.finished(), usage, prompt, output, c.text()
}

// The scanner and its fallback read every event as encoding/json does.
func TestEventDecodeMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"t1 "},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{"choices":[{"text":"abc","finish_reason":"length"}],"usage":{"prompt_tokens":16,"completion_tokens":3,"total_tokens":19}}`,
		`{"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":16}}`,
		`{"choices":[{"delta":{"content":"b","reasoning_content":"a"}},{"text":"c","message":{"reasoning_content":"d","content":"e"}}]}`,
		`{"choices":[{"finish_reason":""}]}`,
		`{"choices":[{"finish_reason":"st\u006fp"}]}`,
		`{"choices":[{"text":"esc\"aped\n"}]}`,
		`{"choices":[{"text":"héllo ☃"}]}`,
		"{\"choices\":[{\"text\":\"bad \xff utf8\"}]}",
		`{"Choices":[{"Text":"folded"}]}`,
		`{"choices":[{"TEXT":"folded"}],"USAGE":{"Prompt_Tokens":2}}`,
		`{"choices":[{"text":"a"}],"choices":[{"text":"b"}]}`,
		`{"choices":[{"delta":{"content":"a"},"delta":{"reasoning_content":"b"}}]}`,
		`{"error":{"message":"boom","code":500}}`,
		`{"error":null,"choices":[{"text":"x"}]}`,
		`{"object":"error","message":"boom"}`,
		`{"object":"list","choices":[{"text":"x"}]}`,
		`{"usage":null,"choices":null}`,
		`{"usage":{"prompt_tokens":1.5}}`,
		`{"usage":{"prompt_tokens":-1}}`,
		`{"usage":{"prompt_tokens":1e2}}`,
		`{"usage":{"prompt_tokens":012}}`,
		`{"usage":{"prompt_tokens":null,"completion_tokens":7}}`,
		`{"usage":{"prompt_tokens":"7"}}`,
		`{"choices":[{"text":5}]}`,
		`{"choices":[{"text":null,"delta":null}]}`,
		`{"choices":[{"delta":{"content":null}}]}`,
		`{"choices":[null]}`,
		`{"choices":{}}`,
		`{"choices":[{"finish_reason":3}]}`,
		`{"x":[1,-2.5e+3,true,false,null,{"y":"\u00e9\\"}],"choices":[{"text":"ok"}]}`,
		`{"x":01,"choices":[{"text":"ok"}]}`,
		`{"x":1.,"choices":[{"text":"ok"}]}`,
		`{"x":"\q","choices":[{"text":"ok"}]}`,
		`{"x":"\u12g4"}`,
		"{\"x\":\"ctl\x01\"}",
		`{"choices":[{"text":"ok"}]} trailing`,
		`{"choices":[{"text":"ok"}]}  `,
		` { "choices" : [ { "text" : "ok" , "finish_reason" : "length" } ] } `,
		`{"choices":[{"text":"ok"},]}`,
		`{"choices":[{"text":"ok",}]}`,
		`{"choices":[{"text":"ok"}]`,
		`{"choices":[{"text":"ok"`,
		`null`,
		`[]`,
		`"s"`,
		``,
		`{}`,
		`{"\u0063hoices":[{"text":"escaped key"}]}`,
		"{\"choices\":[{\"text\":\"a\"}],\"\xc5\xbfomething\":1}",
		`{"choices":[{"text":"1"},{"text":"2"},{"text":"3"},{"text":"4"},{"text":"5"},{"text":"6"},{"text":"7"},{"text":"8"},{"text":"9"}]}`,
		`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	}
	var ev event
	for _, in := range inputs {
		ok, failure, choices, finished, usage, prompt, output, text := slowEvent(t, []byte(in))
		err := ev.decode([]byte(in))
		if (err == nil) != ok {
			t.Errorf("%q: error %v, encoding/json ok %v", in, err, ok)
			continue
		}
		if !ok {
			continue
		}
		got := string(joinPieces(nil, ev.pieces))
		if ev.failure != failure || ev.choices != choices || ev.finished != finished || ev.usage != usage || ev.prompt != prompt || ev.output != output || got != text || ev.textLen() != len(text) {
			t.Errorf("%q: got failure %q choices %d finished %v usage %v %d/%d text %q; want %q %d %v %v %d/%d %q",
				in, ev.failure, ev.choices, ev.finished, ev.usage, ev.prompt, ev.output, got, failure, choices, finished, usage, prompt, output, text)
		}
	}
}

// The common events take the scanner, not encoding/json.
func TestEventDecodeFastPath(t *testing.T) {
	for _, in := range []string{
		`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"t1 "},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"x","object":"text_completion","choices":[{"index":0,"text":"abc","finish_reason":"length"}],"usage":{"prompt_tokens":16,"completion_tokens":3,"total_tokens":19}}`,
		`{"id":"cmpl-1","object":"text_completion","created":1,"model":"kvlease-zero","choices":[{"index":0,"text":"ete ","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":15,"completion_tokens":4,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0}}}`,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":"say \"hi\"\n\u00e9"},"logprobs":null,"finish_reason":null,"stop_reason":null}]}`,
	} {
		var ev event
		s := chunkScanner{data: []byte(in), e: &ev}
		if !s.scan() {
			t.Errorf("%q: the scanner gave up", in)
		}
	}
}

func BenchmarkEventDecode(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"t1 "},"finish_reason":null}]}`)
	var ev event
	b.ReportAllocs()
	for b.Loop() {
		if err := ev.decode(data); err != nil || ev.textLen() != 3 {
			b.Fatal(err)
		}
	}
}
