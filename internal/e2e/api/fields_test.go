package api

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/internal/e2e"
	kvopenai "github.com/kvlease/kvlease/openai"
)

// fieldCase sends one request field with a value that asks for something,
// and says what kvlease must answer: ok (200, honoured) or a 400 whose
// param names the field.
type fieldCase struct {
	field string
	value any
	ok    bool
}

// completionFields covers every field of the SDK's CompletionNewParams
// (checked by TestSDKFieldTablesAreComplete).
var completionFields = []fieldCase{
	{"model", modelName, true},
	{"prompt", "Hello there", true},
	{"best_of", 2, false},
	{"echo", true, true},
	{"frequency_penalty", 0.5, true},
	{"logit_bias", map[string]int{"50": 10}, true},
	{"logprobs", 2, true},
	{"max_tokens", 3, true},
	{"n", 2, true},
	{"presence_penalty", 0.5, true},
	{"seed", 7, true},
	{"stop", []string{"zz"}, true},
	{"stream_options", map[string]any{"include_usage": true}, false}, // needs stream; the SDK's New does not stream
	{"suffix", "tail", false},
	{"temperature", 0.3, true},
	{"top_p", 0.5, true},
	{"user", "u-1", true},
	// vLLM's extra parameters.
	{"top_k", 5, true},
	{"min_p", 0.1, true},
	{"repetition_penalty", 1.2, true},
	{"use_beam_search", true, false},
	{"stop_token_ids", []int{3}, true},
	{"ignore_eos", true, true},
	{"min_tokens", 1, true},
	{"include_stop_str_in_output", true, true},
	{"priority", 0, true},
	{"cache_salt", "salt", true},
	{"response_format", map[string]any{"type": "json_object"}, true},
	{"guided_json", map[string]any{"type": "object"}, false},
	{"truncate_prompt_tokens", 4, true},
	{"allowed_token_ids", []int{101, 32}, true},
	{"return_token_ids", true, true},
	{"request_id", "mine", false},
	{"prompt_logprobs", 1, true},
	{"bad_words", []string{"zz"}, true},
	{"return_tokens_as_token_ids", true, true},
}

// chatFields covers every field of the SDK's ChatCompletionNewParams.
var chatFields = []fieldCase{
	{"model", modelName, true},
	{"messages", []map[string]string{{"role": "user", "content": "Hi"}}, true},
	{"audio", map[string]string{"voice": "alloy", "format": "mp3"}, false},
	{"frequency_penalty", -0.5, true},
	{"function_call", "auto", false},
	{"functions", []map[string]any{{"name": "f"}}, false},
	{"logit_bias", map[string]int{"7": -100}, true},
	{"logprobs", true, true},
	{"max_completion_tokens", 3, true},
	{"max_tokens", 3, true},
	{"metadata", map[string]string{"team": "a"}, true},
	{"modalities", []string{"text", "audio"}, false},
	{"moderation", map[string]string{"model": "omni-moderation-latest"}, false},
	{"n", 3, true},
	{"parallel_tool_calls", false, true},
	{"prediction", map[string]string{"type": "content", "content": "Hi"}, true},
	{"presence_penalty", 1, true},
	{"prompt_cache_key", "k", true},
	{"prompt_cache_options", map[string]string{"mode": "explicit"}, true},
	{"prompt_cache_retention", "24h", false},
	{"reasoning_effort", "low", false},
	{"response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"type": "object"}}}, true},
	{"safety_identifier", "hash", true},
	{"seed", 11, true},
	{"service_tier", "flex", false},
	{"stop", "zz", true},
	{"store", true, false},
	{"stream_options", map[string]any{"include_usage": true}, false},
	{"temperature", 0, true},
	{"tool_choice", "required", false}, // needs tools
	{"tools", []map[string]any{{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}, true},
	{"top_logprobs", 2, false},
	{"top_p", 0.9, true},
	{"user", "u-2", true},
	{"verbosity", "low", false},
	{"web_search_options", map[string]any{}, false},
	// vLLM's extra parameters.
	{"add_generation_prompt", false, true},
	{"continue_final_message", true, false},
	{"chat_template", "{{ messages[0].content }}", true},
	{"chat_template_kwargs", map[string]any{"enable_thinking": false}, true},
	{"echo", true, false},
	{"top_k", 2, true},
	{"skip_special_tokens", false, false},
	{"structured_outputs", map[string]any{"choice": []string{"a"}}, false},
}

// sdkJSONFields lists the json names of an SDK params struct's fields.
func sdkJSONFields(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Every field the official SDK can send is in the tables below, and
// kvlease knows every one of them (none falls to "unknown, ignored").
func TestSDKFieldTablesAreComplete(t *testing.T) {
	for _, tc := range []struct {
		chat   bool
		params any
		table  []fieldCase
	}{
		{false, openai.CompletionNewParams{}, completionFields},
		{true, openai.ChatCompletionNewParams{}, chatFields},
	} {
		have := map[string]bool{}
		for _, c := range tc.table {
			have[c.field] = true
			if kvopenai.ClassifyField(tc.chat, c.field) == kvopenai.FieldUnknown {
				t.Errorf("chat=%v: %q is in the table but kvlease does not know it", tc.chat, c.field)
			}
		}
		for _, f := range sdkJSONFields(tc.params) {
			if !have[f] {
				t.Errorf("chat=%v: the SDK sends %q, which the table does not test", tc.chat, f)
			}
			if kvopenai.ClassifyField(tc.chat, f) == kvopenai.FieldUnknown {
				t.Errorf("chat=%v: the SDK sends %q, which kvlease would ignore", tc.chat, f)
			}
		}
	}
}

func checkFieldAnswer(t *testing.T, c fieldCase, err error) {
	t.Helper()
	if c.ok {
		if err != nil {
			t.Fatalf("%s=%v: want it honoured, got %v", c.field, c.value, err)
		}
		return
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("%s=%v: want a 400 naming it, got %v", c.field, c.value, err)
	}
	if apiErr.StatusCode != 400 || apiErr.Param != c.field || !strings.Contains(apiErr.Message, c.field) {
		t.Fatalf("%s=%v: got %d param %q %q, want a 400 naming it", c.field, c.value, apiErr.StatusCode, apiErr.Param, apiErr.Message)
	}
}

// Every request field, sent through the official SDK, is honoured or
// refused with a 400 that names it.
func TestSDKEveryFieldHonouredOrRefused(t *testing.T) {
	e := startEngine(t, engineOpts{})
	c := e.client()
	ctx := context.Background()
	for _, fc := range completionFields {
		t.Run("completions/"+fc.field, func(t *testing.T) {
			_, err := c.Completions.New(ctx, completion("Say", 4), option.WithJSONSet(fc.field, fc.value))
			checkFieldAnswer(t, fc, err)
		})
	}
	for _, fc := range chatFields {
		t.Run("chat/"+fc.field, func(t *testing.T) {
			p := openai.ChatCompletionNewParams{
				Model:     modelName,
				Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello?")},
				MaxTokens: openai.Int(4),
			}
			_, err := c.Chat.Completions.New(ctx, p, option.WithJSONSet(fc.field, fc.value))
			checkFieldAnswer(t, fc, err)
		})
	}
}

// Honoured fields change the answer as documented: a few that are cheap
// to observe.
func TestSDKHonouredFieldsTakeEffect(t *testing.T) {
	e := startEngine(t, engineOpts{})
	c := e.client()
	ctx := context.Background()
	r, err := c.Completions.New(ctx, completion("Count", 3))
	if err != nil {
		t.Fatal(err)
	}
	if r.Usage.CompletionTokens > 3 {
		t.Errorf("max_tokens 3 gave %d tokens", r.Usage.CompletionTokens)
	}
	// An unknown field is ignored (vLLM's behaviour): same answer as
	// without it under the same seed.
	p := completion("Same seed", 8)
	p.Seed = openai.Int(3)
	a, err := c.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Completions.New(ctx, p, option.WithJSONSet("not_a_field", 1))
	if err != nil {
		t.Fatal(err)
	}
	if a.Choices[0].Text != b.Choices[0].Text {
		t.Errorf("an unknown field changed the answer: %q vs %q", a.Choices[0].Text, b.Choices[0].Text)
	}
	// tools with tool_choice "none" are honoured: a text answer, no calls.
	ch, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     modelName,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather?")},
		MaxTokens: openai.Int(4),
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "weather", Parameters: openai.FunctionParameters{"type": "object"}})},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Choices[0].Message.ToolCalls) != 0 || ch.Choices[0].FinishReason == "tool_calls" {
		t.Errorf("tool_choice none gave %+v", ch.Choices[0])
	}
	// chat_template renders the chat, with chat_template_kwargs (the
	// simulated model's prompt is the text's bytes); a template that
	// raises is a 400 with its message, as in vLLM.
	tp := openai.ChatCompletionNewParams{Model: modelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}, MaxTokens: openai.Int(1)}
	ch, err = c.Chat.Completions.New(ctx, tp, option.WithJSONSet("chat_template", "{{ messages[0].content }}{{ suffix }}"),
		option.WithJSONSet("chat_template_kwargs", map[string]any{"suffix": "!!"}))
	if err != nil {
		t.Errorf("chat_template: %v", err)
	} else if ch.Usage.PromptTokens != int64(len("Hi!!")) {
		t.Errorf("chat_template: %d prompt tokens, want those of \"Hi!!\"", ch.Usage.PromptTokens)
	}
	_, err = c.Chat.Completions.New(ctx, tp, option.WithJSONSet("chat_template", "{{ raise_exception('Only tools here') }}"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "Only tools here" {
		t.Errorf("a raising chat_template: %v", err)
	}
}

// top_k and min_p take effect (top_k 1 leaves the simulated model's most
// frequent byte, a space) and P/D through the proxy equals a single engine
// under them.
func TestSDKTopKMinPThroughProxy(t *testing.T) {
	c := startPD(t)
	ctx := context.Background()
	px := sdkClient(startProxy(t, c.p, c.d, nil), "")
	single := c.single.client()
	for _, tc := range []struct {
		topK int
		minP float64
	}{{1, 0}, {3, 0}, {0, 0.3}, {5, 0.38}, {0, 0}} {
		for _, seed := range []int64{1, 2} {
			p := completion(pdPrompt, 24)
			p.Seed, p.Temperature = openai.Int(seed), openai.Float(1)
			opts := []option.RequestOption{option.WithJSONSet("top_k", tc.topK), option.WithJSONSet("min_p", tc.minP), option.WithJSONSet("ignore_eos", true)}
			got, err := px.Completions.New(ctx, p, opts...)
			if err != nil {
				t.Fatal(err)
			}
			want, err := single.Completions.New(ctx, p, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Text != want.Choices[0].Text {
				t.Errorf("top_k %d min_p %v seed %d: P/D %q, single %q", tc.topK, tc.minP, seed, got.Choices[0].Text, want.Choices[0].Text)
			}
			if tc.topK == 1 && strings.Trim(want.Choices[0].Text, " ") != "" {
				t.Errorf("top_k 1 gave %q, want spaces only", want.Choices[0].Text)
			}
			if tc.topK == 3 && strings.Trim(want.Choices[0].Text, " et") != "" {
				t.Errorf("top_k 3 gave %q, want only ' ', 'e' and 't'", want.Choices[0].Text)
			}
			// Base weights at least 0.3 × the space's 17000: " etaoin".
			if tc.minP == 0.3 && strings.Trim(want.Choices[0].Text, " etaoin") != "" {
				t.Errorf("min_p 0.3 gave %q, want only bytes of \" etaoin\"", want.Choices[0].Text)
			}
		}
	}
	e2e.WaitFor(t, "P to free every lease", func() bool { return c.pHeld(t) == 0 })
}
