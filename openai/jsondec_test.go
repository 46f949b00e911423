package openai

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// decodeSeeds are request bodies as clients send them (the OpenAI SDKs,
// vLLM's benchmarks and tests, llm-d's simulator and proxies) and the
// corners of encoding/json's reading.
var decodeSeeds = []string{
	`{"model":"m","prompt":"hi","max_tokens":3,"stop":["x"],"stream":true}`,
	`{"model":"Qwen/Qwen3-0.6B","prompt":"Once upon a time","max_tokens":16,"temperature":0,"stream":false,"ignore_eos":true}`,
	`{"model":"m","prompt":[1,2,3],"max_tokens":16,"logprobs":5,"echo":true,"seed":-7,"n":2,"best_of":null}`,
	`{"prompt":[[1,2],[3]],"kv_transfer_params":{"do_remote_decode":true,"x":[1]}}`,
	`{"prompt":["a","b"],"n":3,"echo":true,"logprobs":2,"stop":"\n\n","stop_token_ids":[2,3],"min_tokens":1}`,
	`{"prompt":[[1],[2,3]],"logit_bias":{"5":-100,"7":2.5},"presence_penalty":1,"frequency_penalty":-1,"repetition_penalty":1.5}`,
	`{"prompt":"x","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":false},"top_k":-1,"min_p":0.05,"top_p":0.9}`,
	`{"prompt":"x","cache_salt":"s","user":"u","priority":-3,"truncate_prompt_tokens":8,"truncation_side":"right","prompt_logprobs":2}`,
	`{"prompt":"x","allowed_token_ids":[1,2],"bad_words":["no"],"return_tokens_as_token_ids":true,"return_token_ids":true,"include_stop_str_in_output":true}`,
	`{"model":"tiny","prompt":"Once upon a time","max_tokens":128,"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"prefill-0","remote_request_id":"cmpl-1234","remote_host":"10.0.0.7","remote_port":9000,"remote_block_ids":[[1,2,3,4,5,6,7,8]],"tp_size":1,"lease_token":"00112233445566778899aabbccddeeff","lease_expires_in_ms":30000}}`,
	`{"prompt":"x","kv_transfer_params":{"remote_block_ids":[[1],null],"a":"\u00e9","b":1.5,"c":-3,"d":[null,2],"e":[[]],"f":"x\"y","g":99999999999999999999,"h":[2147483648]}}`,
	` {"prompt" : "caf\u00e9 \ud83d\ude00 \ud800 \udc00x \"q\" \\ \/ \b\f\n\r\t" , "Model" : "m" } `,
	"{\"prompt\":\"\xff\xfe ok \xe2\x82\",\"user\":\"\xc3\xa9\"}",
	`{"prompt":"x","max_tokens":5,"max_tokens":null}`,
	`{"prompt":"x","stop_token_ids":[5,6],"stop_token_ids":[null]}`,
	`{"prompt":"x","stream_options":{"include_usage":true},"stream_options":{}}`,
	`{"prompt":"x","MAX_TOKENS":3,"Stream":true,"\u0073eed":1,"ſeed":2,"Kv_transfer_params":null}`,
	`{"prompt":"x","max_tokens":1.0,"seed":1e3,"n":99999999999999999999,"temperature":1e400}`,
	`{"prompt":"x","max_tokens":-0,"seed":-9223372036854775808,"priority":9223372036854775807,"top_k":null}`,
	`{"prompt":[2147483647,-2147483648,2147483648],"stop_token_ids":[-0,null]}`,
	`{"prompt":[null,1],"bad_words":[null,"a"],"stop":[null]}`,
	`{"prompt":[[1],null]}`,
	`{"prompt":"x","suffix":"","metadata":{"a":[1,{"b":null}]},"response_format":{"type":"text"}}`,
	`{"prompt":"x"} x`, `{"prompt":"x",}`, `{"prompt":"x"`, `[1,2]`, `null`, ``, `"x"`, `{}`, `{"prompt":"a\u0000b"}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":3}`,
	`{"model":"gpt-4o","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}],"temperature":0.7,"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"name":"al"},{"role":"assistant","content":null}],"add_generation_prompt":false}`,
	`{"messages":[{"role":"tool","content":"42","tool_call_id":"c1"},{"role":"developer","content":""}],"logprobs":true,"top_logprobs":2}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"n":{"type":"integer"}}}}}],` +
		`"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`,
	`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","strict":true,` +
		`"schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}}`,
	`{"messages":[{"Role":"user","CONTENT":"x","role":"user"},{"role":"user","content":[null,{"type":"text","Text":"y","text":null}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a","type":"text"}]},{"role":1},"x",null]}`,
	`{"messages":[{"role":"robot","content":"x"},{"role":"user","content":5}],"messages":null}`,
	`{"messages":[{"role":"user","content":"` + strings.Repeat(`a longer turn, with \"quotes\", caf\u00e9, é and \ud83d\ude00\n`, 4) + "\xff\"}]}",
	`{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":null,"add_generation_prompt":null,"logprobs":null,"echo":false}`,
}

func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	for _, tc := range commonBad {
		f.Add([]byte(expand(tc.body, `"prompt":"x"`)))
		f.Add([]byte(expand(tc.body, `"messages":[{"role":"user","content":"x"}]`)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecodeCompletion(t, body)
		checkDecodeChat(t, body)
	})
}

// checkDecodeCompletion: the hand decoder of a completions body and the
// parsers of its raw members give what encoding/json and the parsers that
// used it give.
func checkDecodeCompletion(t *testing.T, body []byte) {
	t.Helper()
	got, want, ok := decodeBoth(t, body, decodeCompletion, false)
	if !ok {
		return
	}
	stop, e := parseStop(got.Stop)
	wstop, we := refParseStop(want.Stop)
	same(t, body, "stop", stop, wstop, e, we)
	p, ps, e := parsePrompts(got.Prompt)
	wp, wps, we := refParsePrompts(want.Prompt)
	same(t, body, "prompt", []any{p, ps}, []any{wp, wps}, e, we)
	// Every member of kv_transfer_params through the readers of its
	// fields, whatever its name.
	EachMember(got.KVTransferParams, func(rawKey []byte, start, end int) {
		v := got.KVTransferParams[start:end]
		key := []byte("k")
		s, e := kvRead(t, body, v, parseID)
		ws, we := refParseID(kvFieldParam(key), v)
		same(t, body, "kv string", s, ws, e, we)
		n, e := kvRead(t, body, v, func(key, b []byte, i int) (int64, int, *Error) { return parseCount(key, b, i, 1<<40) })
		wn, we := refParseCount(kvFieldParam(key), v, 1<<40)
		same(t, body, "kv count", n, wn, e, we)
		ids, e := kvRead(t, body, v, func(key, b []byte, i int) ([]any, int, *Error) {
			ids, form, end, e := parseBlockIDs(key, b, i)
			return []any{ids, form}, end, e
		})
		wids, wform, we := refParseBlockIDs(kvFieldParam(key), v)
		same(t, body, "kv block ids", ids, []any{wids, wform}, e, we)
	})
	if got.Logprobs != nil && !isNull(got.Logprobs) {
		k, end := readGoInt(got.Logprobs, 0)
		wk, ok := refLogprobs(want.Logprobs)
		if (end == len(got.Logprobs)) != ok || ok && k != wk {
			t.Fatalf("%q: logprobs %d (%v), encoding/json %d (%v)", body, k, end, wk, ok)
		}
	}
}

func checkDecodeChat(t *testing.T, body []byte) {
	t.Helper()
	got, want, ok := decodeBoth(t, body, decodeChat, true)
	if !ok {
		return
	}
	msgs, e := parseMessages(got.Messages)
	wmsgs, we := refParseMessages(want.Messages)
	same(t, body, "messages", msgs, wmsgs, e, we)
}

// decodeBoth decodes body with decode and with encoding/json (decodeBody),
// checks that both agree, and returns both readings; ok is false when the
// body was refused.
func decodeBoth[T any](t *testing.T, body []byte, decode func([]byte, *T) (bool, *Error), chat bool) (got, want *T, ok bool) {
	t.Helper()
	got, want = new(T), new(T)
	odd, e := decode(body, got)
	we := decodeBody(body, want)
	if !reflect.DeepEqual(e, we) {
		t.Fatalf("%q: decode error %v, encoding/json's %v", body, e, we)
	}
	if we != nil {
		return nil, nil, false
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoded\n%+v\nencoding/json\n%+v", body, got, want)
	}
	if !odd {
		// Nothing for checkFields and parseStructure, which the parsers
		// then skip.
		if ignored, e := checkFields(body, chat); ignored != nil || e != nil {
			t.Fatalf("%q: not odd, but checkFields gives %v, %v", body, ignored, e)
		}
		if mayHaveStructure(body) {
			t.Fatalf("%q: not odd, but may have structure", body)
		}
	}
	return got, want, true
}

// kvRead reads v, a kv_transfer_params value, with read, which must read
// all of it when it accepts it.
func kvRead[T any](t *testing.T, body, v []byte, read func(key, b []byte, i int) (T, int, *Error)) (T, *Error) {
	t.Helper()
	x, end, e := read([]byte("k"), v, 0)
	if e == nil && end != len(v) {
		t.Fatalf("%q: read %q up to %d", body, v, end)
	}
	return x, e
}

func same(t *testing.T, body []byte, what string, got, want any, e, we *Error) {
	t.Helper()
	if !reflect.DeepEqual(e, we) {
		t.Fatalf("%q: %s error %v, with encoding/json %v", body, what, e, we)
	}
	if we == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: %s %#v, with encoding/json %#v", body, what, got, want)
	}
}

// TestDecodeKnowsEveryField: every field of the raw types is decoded by
// hand, none left to encoding/json or taken for an unknown one.
func TestDecodeKnowsEveryField(t *testing.T) {
	for _, name := range completionNames {
		var raw rawCompletion
		body := []byte(`{"` + name + `":null}`)
		if odd, e := decodeCompletion(body, &raw); odd || e != nil {
			t.Errorf("completions field %s: odd %v, error %v", name, odd, e)
		}
	}
	for _, name := range chatNames {
		var raw rawChat
		body := []byte(`{"` + name + `":null}`)
		if odd, e := decodeChat(body, &raw); odd || e != nil {
			t.Errorf("chat field %s: odd %v, error %v", name, odd, e)
		}
	}
	var m rawMessage
	body := []byte(`{"` + strings.Join(messageNames, `":null,"`) + `":null}`)
	if m.decode(body, 0) != len(body) {
		t.Errorf("message fields %s left to encoding/json", body)
	}
	var p rawPart
	body = []byte(`{"` + strings.Join(partNames, `":null,"`) + `":null}`)
	if p.decode(body, 0) != len(body) {
		t.Errorf("part fields %s left to encoding/json", body)
	}
	body = []byte(`{"` + strings.Join(streamOptionsNames, `":true,"`) + `":true}`)
	if so, end := readStreamOptions(body, 0); end != len(body) || !so.IncludeUsage || !so.ContinuousUsageStats {
		t.Errorf("stream options %s: %+v, %d", body, so, end)
	}
}

// FuzzReadString compares readString with encoding/json on any string.
func FuzzReadString(f *testing.F) {
	for _, s := range []string{`abc`, `caf\u00e9`, `\ud83d\ude00`, `\ud800`, `\udc00\ud800x`, `\ud800\u0041`, "\xff\xfe", "\xe2\x82", `\"\\\/\b\f\n\r\t`, "é\\n", strings.Repeat(`more than sixty-four bytes \"with\" escapes\n, é, \ud800x `, 3) + "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(`"` + s + `"`)
		var want string
		if json.Unmarshal(b, &want) != nil {
			if _, end := readString(b, 0); end == len(b) {
				t.Fatalf("%q: read, encoding/json refuses it", b)
			}
			return
		}
		if got, end := readString(b, 0); end != len(b) || got != want {
			t.Fatalf("%q: read %q (%d), encoding/json %q", b, got, end, want)
		}
	})
}

// FuzzPlainEnd compares plainEnd, eight bytes at a time, with its
// definition byte by byte, at every start.
func FuzzPlainEnd(f *testing.F) {
	f.Add([]byte("abcdefgh\"ijklmnop\\qrstuvwx\x1fyz\x80\xff é"))
	f.Add([]byte(" !\"#$%&'()*+,-./0123456789:;<=>?@[\\]^_`{|}~\x7f\x00\x20\x21\x5b\x5d\x22"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i <= len(b); i++ {
			for _, ascii := range []uint64{0, highBits} {
				want := i
				for want < len(b) && b[want] >= 0x20 && b[want] != '"' && b[want] != '\\' && (ascii == 0 || b[want] < 0x80) {
					want++
				}
				if got := plainEnd(b, i, ascii); got != want {
					t.Fatalf("plainEnd(%q, %d, %x) = %d, want %d", b, i, ascii, got, want)
				}
			}
		}
	})
}
