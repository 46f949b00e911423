package openai

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCompletionDefaults(t *testing.T) {
	r, e := ParseCompletionRequest([]byte(`{"model":"m","prompt":"hi"}`))
	if e != nil {
		t.Fatal(e)
	}
	want := &CompletionRequest{
		Model:          "m",
		Prompt:         Prompt{Text: "hi"},
		SamplingParams: SamplingParams{Temperature: 1, TopP: 1, N: 1, RepetitionPenalty: 1},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
}

func TestParseCompletionAllFields(t *testing.T) {
	body := `{
		"model": "tiny", "prompt": [[1, 2, 256]], "max_tokens": 7, "temperature": 0,
		"top_p": 0.5, "seed": -3, "stop": ["a", "b"], "stop_token_ids": [5, 6],
		"ignore_eos": true, "n": 1, "stream": true,
		"stream_options": {"include_usage": true, "continuous_usage_stats": true},
		"min_tokens": 2, "priority": -1, "cache_salt": "s", "user": "u", "echo": false,
		"logprobs": null, "include_stop_str_in_output": true, "some_unknown": {"x": [1]},
		"kv_transfer_params": {"do_remote_decode": true, "do_remote_prefill": false,
			"remote_engine_id": null, "remote_block_ids": null, "remote_host": null, "remote_port": null}
	}`
	r, e := ParseCompletionRequest([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	seed := int64(-3)
	want := &CompletionRequest{
		Model:  "tiny",
		Prompt: Prompt{Tokens: []int32{1, 2, 256}},
		SamplingParams: SamplingParams{N: 1, RepetitionPenalty: 1, MaxTokens: 7, Temperature: 0, TopP: 0.5, Seed: &seed,
			Stop: []string{"a", "b"}, StopTokenIDs: []int32{5, 6}, IgnoreEOS: true, MinTokens: 2,
			IncludeStopStrInOutput: true},
		RequestOptions: RequestOptions{Stream: true,
			StreamOptions: StreamOptions{IncludeUsage: true, ContinuousUsageStats: true},
			Priority:      -1, CacheSalt: "s", User: "u",
			KVTransferParams: &KVTransferParams{DoRemoteDecode: true},
			Ignored:          []string{"some_unknown"}},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
}

func TestParsePromptForms(t *testing.T) {
	tests := []struct {
		prompt string
		want   Prompt
	}{
		{`"abc"`, Prompt{Text: "abc"}},
		{`["abc"]`, Prompt{Text: "abc"}},
		{` [ 1, 2 ] `, Prompt{Tokens: []int32{1, 2}}},
		{`[[0,256]]`, Prompt{Tokens: []int32{0, 256}}},
		{`[ [3] ]`, Prompt{Tokens: []int32{3}}},
		{`"\u00e9\n"`, Prompt{Text: "é\n"}},
	}
	for _, tc := range tests {
		r, e := ParseCompletionRequest([]byte(`{"prompt":` + tc.prompt + `}`))
		if e != nil {
			t.Errorf("prompt %s: %v", tc.prompt, e)
			continue
		}
		if !reflect.DeepEqual(r.Prompt, tc.want) {
			t.Errorf("prompt %s: got %+v, want %+v", tc.prompt, r.Prompt, tc.want)
		}
		if r.Prompt.IsTokens() != (tc.want.Tokens != nil) {
			t.Errorf("prompt %s: IsTokens %v", tc.prompt, r.Prompt.IsTokens())
		}
	}
	// logprobs: completions take the number of top tokens, chat a
	// boolean and top_logprobs.
	if r, e := ParseCompletionRequest([]byte(`{"prompt":"x","logprobs":3}`)); e != nil || !r.Logprobs || r.TopLogprobs != 3 {
		t.Errorf("completion logprobs 3: %+v %v", r, e)
	}
	if r, e := ParseCompletionRequest([]byte(`{"prompt":"x","logprobs":0}`)); e != nil || !r.Logprobs || r.TopLogprobs != 0 {
		t.Errorf("completion logprobs 0: %+v %v", r, e)
	}
	if r, e := ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":5}`)); e != nil || !r.Logprobs || r.TopLogprobs != 5 {
		t.Errorf("chat logprobs: %+v %v", r, e)
	}
	// Batches: an array of strings or of token-id arrays.
	for _, tc := range []struct {
		prompt string
		want   []Prompt
	}{
		{`["a","bc"]`, []Prompt{{Text: "a"}, {Text: "bc"}}},
		{`[[1],[2,3],[4]]`, []Prompt{{Tokens: []int32{1}}, {Tokens: []int32{2, 3}}, {Tokens: []int32{4}}}},
	} {
		r, e := ParseCompletionRequest([]byte(`{"prompt":` + tc.prompt + `,"n":2}`))
		if e != nil {
			t.Fatalf("prompt %s: %v", tc.prompt, e)
		}
		if !reflect.DeepEqual(r.Prompts, tc.want) || !reflect.DeepEqual(r.Prompt, tc.want[0]) || r.N != 2 {
			t.Errorf("prompt %s: got %+v (n %d), want %+v", tc.prompt, r.Prompts, r.N, tc.want)
		}
	}
}

type badCase struct {
	name   string
	body   string
	param  string
	status int    // 0 means 400
	substr string // expected in the message
}

func checkBad(t *testing.T, tc badCase, e *Error) {
	t.Helper()
	if e == nil {
		t.Fatalf("%s: no error", tc.name)
	}
	status := tc.status
	if status == 0 {
		status = 400
	}
	if e.Status != status || e.Param != tc.param || e.Type != TypeInvalidRequest {
		t.Errorf("%s: got status %d param %q type %q (%s); want %d %q", tc.name, e.Status, e.Param, e.Type, e.Message, status, tc.param)
	}
	if !strings.Contains(e.Message, tc.substr) {
		t.Errorf("%s: message %q does not contain %q", tc.name, e.Message, tc.substr)
	}
}

// commonBad applies to both endpoints; {P} is replaced by a valid prompt or
// messages field.
var commonBad = []badCase{
	{"malformed json", `{"model":`, "", 0, "not valid JSON"},
	{"not an object", `[1,2]`, "", 0, "must be a JSON object"},
	{"null body", `null`, "", 0, "must be a JSON object"},
	{"empty body", ``, "", 0, "not valid JSON"},
	{"trailing garbage", `{P} x`, "", 0, "not valid JSON"},
	{"model type", `{P,"model":1}`, "model", 0, "model must be a string"},
	{"max_tokens type", `{P,"max_tokens":"10"}`, "max_tokens", 0, "max_tokens must be an integer"},
	{"max_tokens float", `{P,"max_tokens":1.5}`, "max_tokens", 0, "integer"},
	{"max_tokens zero", `{P,"max_tokens":0}`, "max_tokens", 0, "at least 1"},
	{"max_tokens negative", `{P,"max_tokens":-4}`, "max_tokens", 0, "at least 1"},
	{"max_tokens overflow", `{P,"max_tokens":1e400}`, "max_tokens", 0, "integer"},
	{"temperature type", `{P,"temperature":"hot"}`, "temperature", 0, "a number"},
	{"temperature high", `{P,"temperature":2.01}`, "temperature", 0, "between 0 and 2"},
	{"temperature negative", `{P,"temperature":-0.1}`, "temperature", 0, "between 0 and 2"},
	{"top_p zero", `{P,"top_p":0}`, "top_p", 0, "(0, 1]"},
	{"top_p high", `{P,"top_p":1.5}`, "top_p", 0, "(0, 1]"},
	{"seed type", `{P,"seed":1.5}`, "seed", 0, "integer"},
	{"n zero", `{P,"n":0}`, "n", 0, "between 1 and 128"},
	{"n over", `{P,"n":129}`, "n", 0, "between 1 and 128"},
	{"n type", `{P,"n":"1"}`, "n", 0, "integer"},
	{"stop type", `{P,"stop":3}`, "stop", 0, "string or an array"},
	{"stop element type", `{P,"stop":["a",1]}`, "stop", 0, "string or an array"},
	{"stop object", `{P,"stop":{}}`, "stop", 0, "string or an array"},
	{"stop too many", `{P,"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}`, "stop", 0, "at most 16"},
	{"stop_token_ids type", `{P,"stop_token_ids":"x"}`, "stop_token_ids", 0, "an array"},
	{"stop_token_ids negative", `{P,"stop_token_ids":[-1]}`, "stop_token_ids", 0, "negative"},
	{"stop_token_ids too many", `{P,"stop_token_ids":[` + strings.Repeat("1,", MaxStopTokenIDs) + `1]}`, "stop_token_ids", 0, "at most 256"},
	{"ignore_eos type", `{P,"ignore_eos":1}`, "ignore_eos", 0, "boolean"},
	{"stream type", `{P,"stream":"yes"}`, "stream", 0, "boolean"},
	{"stream_options type", `{P,"stream":true,"stream_options":{"include_usage":"y"}}`, "stream_options.include_usage", 0, "boolean"},
	{"stream_options without stream", `{P,"stream_options":{"include_usage":true}}`, "stream_options", 0, "stream is true"},
	{"min_tokens negative", `{P,"min_tokens":-1}`, "min_tokens", 0, "negative"},
	{"min_tokens over max", `{P,"min_tokens":5,"max_tokens":4}`, "min_tokens", 0, "must not exceed"},
	{"priority type", `{P,"priority":true}`, "priority", 0, "integer"},
	{"cache_salt empty", `{P,"cache_salt":""}`, "cache_salt", 0, "non-empty"},
	{"cache_salt type", `{P,"cache_salt":5}`, "cache_salt", 0, "string"},
	{"user type", `{P,"user":5}`, "user", 0, "string"},
	{"echo type", `{P,"echo":"true"}`, "echo", 0, "boolean"},
	{"include_stop type", `{P,"include_stop_str_in_output":0}`, "include_stop_str_in_output", 0, "boolean"},
	{"kv not object", `{P,"kv_transfer_params":[1]}`, "kv_transfer_params", 0, "object"},
	{"kv port type", `{P,"kv_transfer_params":{"remote_port":"80"}}`, "kv_transfer_params.remote_port", 0, "integer"},
	{"kv invalid for decode", `{P,"kv_transfer_params":{"do_remote_prefill":true}}`, "kv_transfer_params.remote_engine_id", 0, "required"},
}

func expand(body, p string) string { return strings.Replace(body, "{P", "{"+p, 1) }

func TestParseCompletionErrors(t *testing.T) {
	cases := append([]badCase{}, commonBad...)
	cases = append(cases,
		badCase{"prompt missing", `{"model":"m"}`, "prompt", 0, "required"},
		badCase{"prompt null", `{"prompt":null}`, "prompt", 0, "required"},
		badCase{"prompt number", `{"prompt":5}`, "prompt", 0, "prompt must be a string"},
		badCase{"prompt object", `{"prompt":{}}`, "prompt", 0, "prompt must be a string"},
		badCase{"prompt empty string", `{"prompt":""}`, "prompt", 0, "empty"},
		badCase{"prompt empty array", `{"prompt":[]}`, "prompt", 0, "empty"},
		badCase{"prompt empty inner", `{"prompt":[[]]}`, "prompt", 0, "empty"},
		badCase{"prompt empty string in array", `{"prompt":[""]}`, "prompt", 0, "empty"},
		badCase{"prompt batch with an empty one", `{"prompt":["a",""]}`, "prompt[1]", 0, "empty"},
		badCase{"prompt batch with an empty token list", `{"prompt":[[1],[]]}`, "prompt[1]", 0, "empty"},
		badCase{"prompt batch with a negative token", `{"prompt":[[1],[2,-2]]}`, "prompt[1]", 0, "out of vocabulary"},
		badCase{"prompt batch too large", `{"prompt":[` + strings.Repeat(`"a",`, MaxPrompts) + `"a"]}`, "prompt", 0, "at most 256"},
		badCase{"prompt batch times n", `{"prompt":["a","b","c"],"n":100}`, "n", 0, "at most 256"},
		badCase{"prompt mixed", `{"prompt":[1,"a"]}`, "prompt", 0, "prompt must be"},
		badCase{"prompt float token", `{"prompt":[1.5]}`, "prompt", 0, "prompt must be"},
		badCase{"prompt huge token", `{"prompt":[99999999999]}`, "prompt", 0, "prompt must be"},
		badCase{"prompt negative token", `{"prompt":[-1]}`, "prompt", 0, "out of vocabulary"},
		badCase{"logprobs over", `{"prompt":"x","logprobs":21}`, "logprobs", 0, "between 0 and 20"},
		badCase{"logprobs negative", `{"prompt":"x","logprobs":-1}`, "logprobs", 0, "between 0 and 20"},
		badCase{"logprobs bool", `{"prompt":"x","logprobs":true}`, "logprobs", 0, "integer"},
	)
	for _, tc := range cases {
		_, e := ParseCompletionRequest([]byte(expand(tc.body, `"prompt":"x"`)))
		checkBad(t, tc, e)
	}
}

func TestParseChatErrors(t *testing.T) {
	cases := append([]badCase{}, commonBad...)
	cases = append(cases,
		badCase{"messages missing", `{"model":"m"}`, "messages", 0, "required"},
		badCase{"messages null", `{"messages":null}`, "messages", 0, "required"},
		badCase{"messages empty", `{"messages":[]}`, "messages", 0, "empty"},
		badCase{"messages object", `{"messages":{}}`, "messages", 0, "array"},
		badCase{"message not object", `{"messages":["hi"]}`, "messages[0]", 0, "object"},
		badCase{"role missing", `{"messages":[{"content":"x"}]}`, "messages[0].role", 0, "required"},
		badCase{"role bad", `{"messages":[{"role":"user","content":"a"},{"role":"robot","content":"x"}]}`, "messages[1].role", 0, "one of system"},
		badCase{"role type", `{"messages":[{"role":1,"content":"x"}]}`, "messages[0].role", 0, "string"},
		badCase{"name type", `{"messages":[{"role":"user","content":"x","name":3}]}`, "messages[0].name", 0, "string"},
		badCase{"content missing", `{"messages":[{"role":"user"}]}`, "messages[0].content", 0, "required"},
		badCase{"content number", `{"messages":[{"role":"user","content":3}]}`, "messages[0].content", 0, "text parts"},
		badCase{"content part image", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{}}]}]}`,
			"messages[0].content[1].type", 0, "not supported"},
		badCase{"content part no text", `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", 0, "required"},
		badCase{"content part text type", `{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages[0].content", 0, "text parts"},
		badCase{"max_completion_tokens zero", `{P,"max_completion_tokens":0}`, "max_completion_tokens", 0, "at least 1"},
		badCase{"max_completion_tokens type", `{P,"max_completion_tokens":"5"}`, "max_completion_tokens", 0, "integer"},
		badCase{"min over max_completion", `{P,"max_tokens":100,"max_completion_tokens":3,"min_tokens":4}`, "min_tokens", 0, "max_completion_tokens"},
		badCase{"logprobs type", `{P,"logprobs":2}`, "logprobs", 0, "boolean"},
		badCase{"top_logprobs without logprobs", `{P,"top_logprobs":2}`, "top_logprobs", 0, "needs logprobs"},
		badCase{"top_logprobs over", `{P,"logprobs":true,"top_logprobs":21}`, "top_logprobs", 0, "between 0 and 20"},
		badCase{"echo", `{P,"echo":true}`, "echo", 0, "not supported by kvlease on chat"},
		badCase{"add_generation_prompt type", `{P,"add_generation_prompt":"no"}`, "add_generation_prompt", 0, "boolean"},
	)
	for _, tc := range cases {
		_, e := ParseChatCompletionRequest([]byte(expand(tc.body, `"messages":[{"role":"user","content":"x"}]`)))
		checkBad(t, tc, e)
	}
}

func TestParseChat(t *testing.T) {
	body := `{"model":"m","messages":[
		{"role":"system","content":"Be terse."},
		{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"name":"al"},
		{"role":"assistant","content":null},
		{"role":"tool","content":"42","tool_call_id":"c1"},
		{"role":"developer","content":""}],
		"max_tokens":100,"max_completion_tokens":9,"logprobs":false,"top_logprobs":0,
		"add_generation_prompt":false,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`
	r, e := ParseChatCompletionRequest([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	wantMsgs := []ChatMessage{
		{Role: "system", Content: "Be terse."},
		{Role: "user", Content: "a\nb", Name: "al"},
		{Role: "assistant"},
		{Role: "tool", Content: "42", ToolCallID: "c1"},
		{Role: "developer"},
	}
	if !reflect.DeepEqual(r.Messages, wantMsgs) {
		t.Fatalf("messages %+v", r.Messages)
	}
	if r.MaxTokens != 9 {
		t.Errorf("MaxTokens = %d, want max_completion_tokens 9", r.MaxTokens)
	}
	if r.AddGenerationPrompt {
		t.Errorf("AddGenerationPrompt = true")
	}
	if r.Temperature != 1 || r.TopP != 1 {
		t.Errorf("defaults: temperature %v top_p %v", r.Temperature, r.TopP)
	}

	r, e = ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
	if e != nil {
		t.Fatal(e)
	}
	if !r.AddGenerationPrompt || r.MaxTokens != 5 {
		t.Errorf("AddGenerationPrompt %v MaxTokens %d", r.AddGenerationPrompt, r.MaxTokens)
	}
	if got, want := r.Prompt(), "<|user|>\nhi\n<|assistant|>\n"; got != want {
		t.Errorf("Prompt() = %q, want %q", got, want)
	}
}

func TestParseNullsAreDefaults(t *testing.T) {
	body := `{"prompt":"x","model":null,"max_tokens":null,"temperature":null,"top_p":null,"seed":null,
		"stop":null,"stop_token_ids":null,"ignore_eos":null,"n":null,"stream":null,"stream_options":null,
		"min_tokens":null,"priority":null,"cache_salt":null,"user":null,"echo":null,"logprobs":null,
		"include_stop_str_in_output":null,"kv_transfer_params":null}`
	r, e := ParseCompletionRequest([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	want := &CompletionRequest{Prompt: Prompt{Text: "x"}, SamplingParams: SamplingParams{Temperature: 1, TopP: 1, N: 1, RepetitionPenalty: 1}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v", r)
	}
}

func TestStreamOptionsEmptyWithoutStream(t *testing.T) {
	// vLLM accepts an empty stream_options with stream false (an empty
	// dict is falsy); proxies forward such bodies.
	if _, e := ParseCompletionRequest([]byte(`{"prompt":"x","stream":false,"stream_options":{}}`)); e != nil {
		t.Fatal(e)
	}
}

// TestRejectedRequestKeepsKVParams: a decode engine that rejects a request
// still learns the prefill's lease so it can release it.
func TestRejectedRequestKeepsKVParams(t *testing.T) {
	kv := `{"do_remote_prefill":true,"remote_engine_id":"p1","remote_request_id":"r1","remote_host":"10.0.0.1",
		"remote_port":9000,"remote_block_ids":[1,2],"lease_token":"00112233445566778899aabbccddeeff"}`
	for _, body := range []string{
		`{"prompt":"x","temperature":9,"kv_transfer_params":` + kv + `}`,
		`{"prompt":[],"kv_transfer_params":` + kv + `}`,
	} {
		r, e := ParseCompletionRequest([]byte(body))
		if e == nil || r == nil || r.KVTransferParams == nil || r.KVTransferParams.RemoteEngineID != "p1" {
			t.Fatalf("body %s: request %+v, error %v", body, r, e)
		}
	}
	c, e := ParseChatCompletionRequest([]byte(`{"messages":[],"kv_transfer_params":` + kv + `}`))
	if e == nil || c == nil || c.KVTransferParams == nil || c.KVTransferParams.LeaseToken == "" {
		t.Fatalf("chat: request %+v, error %v", c, e)
	}
	// Params that fail Validate are returned too (what parsed is known).
	r, e := ParseCompletionRequest([]byte(`{"prompt":"x","kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"p9"}}`))
	if e == nil || r.KVTransferParams == nil || r.KVTransferParams.RemoteEngineID != "p9" {
		t.Fatalf("invalid params: %+v %v", r, e)
	}
	// Syntactically broken bodies give no request.
	if r, e := ParseCompletionRequest([]byte(`{`)); r != nil || e == nil {
		t.Fatalf("broken body: %+v %v", r, e)
	}
}

func FuzzParseCompletionRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"hi","max_tokens":3,"stop":["x"],"stream":true}`))
	f.Add([]byte(`{"prompt":[[1,2]],"kv_transfer_params":{"do_remote_decode":true,"x":[1]}}`))
	f.Add([]byte(`{"prompt":[1,2],"temperature":0.5,"top_p":1}`))
	f.Add([]byte(`[`))
	f.Add([]byte(`{"prompt":["a","b"],"n":3,"echo":true,"logprobs":2}`))
	f.Add([]byte(`{"prompt":[[1],[2,3]],"logit_bias":{"5":-100,"7":2.5},"presence_penalty":1,"frequency_penalty":-1,"repetition_penalty":1.5}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, e := ParseCompletionRequest(body)
		if e == nil {
			if r == nil || len(r.Prompts) == 1 || len(r.Prompts) > MaxPrompts {
				t.Fatalf("accepted a batch of one or too many: %+v", r)
			}
			for _, p := range append(r.Prompts, r.Prompt) {
				if p.Text == "" && len(p.Tokens) == 0 {
					t.Fatalf("accepted an empty prompt: %+v", r)
				}
			}
			if r.Temperature < 0 || r.Temperature > 2 || r.TopP <= 0 || r.TopP > 1 || r.MaxTokens < 0 || len(r.Stop) > MaxStop {
				t.Fatalf("accepted out of range: %+v", r)
			}
			if r.N < 1 || r.N > MaxN || r.N*max(len(r.Prompts), 1) > MaxChoices || r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs ||
				r.PresencePenalty < -2 || r.PresencePenalty > 2 || r.FrequencyPenalty < -2 || r.FrequencyPenalty > 2 ||
				r.RepetitionPenalty <= 0 || r.RepetitionPenalty > 2 || len(r.LogitBias) > MaxLogitBias {
				t.Fatalf("accepted out of range: %+v", r)
			}
			for _, b := range r.LogitBias {
				if b.Token < 0 || b.Bias < -100 || b.Bias > 100 {
					t.Fatalf("accepted a bad logit_bias entry %+v", b)
				}
			}
			if r.KVTransferParams.Validate() != nil {
				t.Fatalf("accepted invalid kv params")
			}
			return
		}
		if e.Status != 400 || e.Message == "" {
			t.Fatalf("bad error %+v", e)
		}
	})
}

func FuzzParseChatCompletionRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":3}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"add_generation_prompt":false}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":null}],"logprobs":false}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","strict":true,` +
		`"schema":{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"array","items":{"enum":[1,"b"]}}]}},"required":["a"],"additionalProperties":false}}}}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"n":{"type":"integer"}}}}}],` +
		`"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, e := ParseChatCompletionRequest(body)
		if e == nil {
			if r == nil || len(r.Messages) == 0 {
				t.Fatalf("accepted without messages: %+v", r)
			}
			for _, m := range r.Messages {
				if !validRoles[m.Role] {
					t.Fatalf("accepted role %q", m.Role)
				}
			}
			_ = r.Prompt()
			return
		}
		if e.Status != 400 || e.Message == "" {
			t.Fatalf("bad error %+v", e)
		}
	})
}

var benchCompletionBody = []byte(`{"model":"tiny","prompt":"Once upon a time, in a land far away, there lived a curious engineer who wanted to serve language models without stranding a single block of KV cache.","max_tokens":128,"temperature":0.7,"top_p":0.95,"stream":true,"stream_options":{"include_usage":true},"stop":["\n\n"],"seed":42}`)

func BenchmarkParseCompletion(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCompletionBody)))
	for b.Loop() {
		if _, e := ParseCompletionRequest(benchCompletionBody); e != nil {
			b.Fatal(e)
		}
	}
}

func BenchmarkParseCompletionKV(b *testing.B) {
	body := []byte(`{"model":"tiny","prompt":"Once upon a time","max_tokens":128,"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"prefill-0","remote_request_id":"cmpl-1234","remote_host":"10.0.0.7","remote_port":9000,"remote_block_ids":[[1,2,3,4,5,6,7,8]],"tp_size":1,"lease_token":"00112233445566778899aabbccddeeff","lease_expires_in_ms":30000}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, e := ParseCompletionRequest(body); e != nil {
			b.Fatal(e)
		}
	}
}

func BenchmarkParseChat(b *testing.B) {
	body := []byte(`{"model":"tiny","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Tell me a story about KV caches."}],"max_completion_tokens":128,"stream":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, e := ParseChatCompletionRequest(body); e != nil {
			b.Fatal(e)
		}
	}
}

// BenchmarkParseChatLong: a chat turn of about 4 KB of text, where the
// cost is in the strings.
func BenchmarkParseChatLong(b *testing.B) {
	text := strings.Repeat(`A paragraph of the conversation so far, with \"quotes\" and a line break.\n`, 56)
	body := []byte(`{"model":"tiny","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` + text + `"}],"max_completion_tokens":128}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, e := ParseChatCompletionRequest(body); e != nil {
			b.Fatal(e)
		}
	}
}

// TestTokenizationFields: add_special_tokens (vLLM's, default true) and
// split_special_tokens (Hugging Face's, default false) on completions.
func TestTokenizationFields(t *testing.T) {
	for body, want := range map[string]Tokenization{
		`{"prompt":"x"}`: {},
		`{"prompt":"x","add_special_tokens":true,"split_special_tokens":false}`: {},
		`{"prompt":"x","add_special_tokens":null}`:                              {},
		`{"prompt":"x","add_special_tokens":false}`:                             {NoAddSpecialTokens: true},
		`{"prompt":"x","split_special_tokens":true}`:                            {SplitSpecialTokens: true},
	} {
		r, e := ParseCompletionRequest([]byte(body))
		if e != nil || r.Tokenization != want {
			t.Errorf("%s: %+v, %v; want %+v", body, r, e, want)
		}
		if ClassifyField(false, "add_special_tokens") != FieldSupported || ClassifyField(false, "split_special_tokens") != FieldSupported {
			t.Error("the fields are not classified supported")
		}
	}
	if _, e := ParseCompletionRequest([]byte(`{"prompt":"x","add_special_tokens":"no"}`)); e == nil || e.Status != 400 {
		t.Errorf("a string add_special_tokens: %v", e)
	}
}
