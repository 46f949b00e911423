package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/internal/e2e"
)

func completion(prompt string, maxTokens int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:     modelName,
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(maxTokens),
	}
}

func TestSDKCompletion(t *testing.T) {
	e := startEngine(t, engineOpts{})
	c := e.client()
	ctx := context.Background()
	p := completion("The engine says", 12)
	p.Seed, p.Temperature = openai.Int(5), openai.Float(0.9)
	var resp *http.Response
	r, err := c.Completions.New(ctx, p, option.WithHeader("X-Request-Id", "sdk-1"), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "cmpl-sdk-1" || resp.Header.Get("X-Request-Id") != "sdk-1" || r.Model != modelName || len(r.Choices) != 1 {
		t.Fatalf("response %+v", r)
	}
	ch := r.Choices[0]
	if r.Usage.PromptTokens != int64(len("The engine says")) || r.Usage.CompletionTokens == 0 ||
		r.Usage.TotalTokens != r.Usage.PromptTokens+r.Usage.CompletionTokens {
		t.Errorf("usage %+v", r.Usage)
	}
	if ch.FinishReason != "length" && ch.FinishReason != "stop" {
		t.Errorf("finish_reason %q", ch.FinishReason)
	}
	// The same seed gives the same text; the prompt is now cached.
	r2, err := c.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Choices[0].Text != ch.Text {
		t.Errorf("seed 5 gave %q, then %q", ch.Text, r2.Choices[0].Text)
	}
	// Another seed (almost surely) another text.
	p.Seed = openai.Int(6)
	p.MaxTokens = openai.Int(40)
	p.Model = modelName
	a, _ := c.Completions.New(ctx, p)
	p.Seed = openai.Int(7)
	b, _ := c.Completions.New(ctx, p)
	if a == nil || b == nil || a.Choices[0].Text == b.Choices[0].Text {
		t.Errorf("seeds 6 and 7 gave the same 40 tokens")
	}
}

func TestSDKChat(t *testing.T) {
	e := startEngine(t, engineOpts{})
	c := e.client()
	r, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:               modelName,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello?")},
		MaxCompletionTokens: openai.Int(6),
		Seed:                openai.Int(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Object != "chat.completion" || len(r.Choices) != 1 || r.Choices[0].Message.Role != "assistant" {
		t.Fatalf("%+v", r)
	}
	if r.Usage.CompletionTokens > 6 || r.Usage.PromptTokens != int64(len("<|system|>\nBe brief.\n<|user|>\nHello?\n<|assistant|>\n")) {
		t.Errorf("usage %+v", r.Usage)
	}
}

func TestSDKStreamingChatWithUsage(t *testing.T) {
	e := startEngine(t, engineOpts{})
	c := e.client()
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:     modelName,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story")},
		MaxTokens: openai.Int(30),
		Seed:      openai.Int(3),
	}
	whole, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var text strings.Builder
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		chunks++
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 {
		t.Errorf("%d chunks", chunks)
	}
	if text.String() != whole.Choices[0].Message.Content {
		t.Errorf("streamed %q, whole %q", text.String(), whole.Choices[0].Message.Content)
	}
	if acc.Usage.CompletionTokens != whole.Usage.CompletionTokens || acc.Usage.PromptTokens != whole.Usage.PromptTokens {
		t.Errorf("stream usage %+v, whole %+v", acc.Usage, whole.Usage)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != whole.Choices[0].FinishReason {
		t.Errorf("accumulated %+v", acc.Choices)
	}
}

func TestSDKStreamingCompletion(t *testing.T) {
	e := startEngine(t, engineOpts{})
	p := completion("Once upon a time", 20)
	p.Seed = openai.Int(9)
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	c := e.client()
	stream := c.Completions.NewStreaming(context.Background(), p)
	var usage int64
	var finish string
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
			finish = string(ch.Choices[0].FinishReason)
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage.CompletionTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if finish == "" || usage == 0 || usage > 20 {
		t.Errorf("finish %q usage %d", finish, usage)
	}
}

func TestSDKStopStrings(t *testing.T) {
	e := startEngine(t, engineOpts{})
	c := e.client()
	ctx := context.Background()
	p := completion("Stop me", 64)
	p.Temperature = openai.Float(0)
	p.Model = modelName
	full, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	text := full.Choices[0].Text
	stop := ""
	for i := 8; i+2 <= len(text); i++ {
		if s := text[i : i+2]; !strings.ContainsRune(s, '\uFFFD') && !strings.Contains(text[:i+1], s) {
			stop = s
			break
		}
	}
	if stop == "" {
		t.Skipf("no usable stop string in %q", text)
	}
	p.Stop = openai.CompletionNewParamsStopUnion{OfStringArray: []string{stop}}
	r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	want := text[:strings.Index(text, stop)]
	if r.Choices[0].Text != want || r.Choices[0].FinishReason != "stop" {
		t.Errorf("text %q finish %q, want %q stop", r.Choices[0].Text, r.Choices[0].FinishReason, want)
	}
	if got := r.Choices[0].JSON.ExtraFields["stop_reason"].Raw(); got != `"`+stop+`"` {
		t.Errorf("stop_reason %s, want %q", got, stop)
	}
	e2e.WaitFor(t, "no held blocks", func() bool { return e.held(t) == 0 })
}

// Every error case comes back through the SDK with its status, OpenAI's
// type and the parameter named.
func TestSDKErrors(t *testing.T) {
	e := startEngine(t, engineOpts{})
	c := e.client()
	ctx := context.Background()
	long := strings.Repeat("z", 4096)
	cases := []struct {
		name   string
		params openai.CompletionNewParams
		opts   []option.RequestOption
		status int
		param  string
		msg    string
	}{
		{"unknown model", func() openai.CompletionNewParams { p := completion("x", 1); p.Model = "gpt-9"; return p }(), nil, 404, "model", "gpt-9"},
		{"n over 128", func() openai.CompletionNewParams { p := completion("x", 1); p.N = openai.Int(200); return p }(), nil, 400, "n", "between 1 and 128"},
		{"best_of", func() openai.CompletionNewParams { p := completion("x", 1); p.BestOf = openai.Int(2); return p }(), nil, 400, "best_of", "best_of"},
		{"temperature", func() openai.CompletionNewParams { p := completion("x", 1); p.Temperature = openai.Float(3); return p }(), nil, 400, "temperature", "between 0 and 2"},
		{"prompt too long", completion(long, 1), nil, 400, "prompt", "maximum context length is 4096"},
		{"max_tokens too many", completion("abc", 4094), nil, 400, "max_tokens", "you requested 4097 tokens"},
		{"wrong type", completion("x", 1), []option.RequestOption{option.WithJSONSet("max_tokens", "many")}, 400, "max_tokens", "must be an integer"},
		{"body too large", completion(strings.Repeat("b", 9<<20), 1), nil, 413, "", "at most"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Completions.New(ctx, tc.params, tc.opts...)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v is not an API error", err)
			}
			if apiErr.StatusCode != tc.status || apiErr.Param != tc.param || !strings.Contains(apiErr.Message, tc.msg) || apiErr.Type == "" {
				t.Errorf("status %d param %q type %q message %q; want %d %q %q", apiErr.StatusCode, apiErr.Param, apiErr.Type, apiErr.Message, tc.status, tc.param, tc.msg)
			}
		})
	}
}

// A full waiting queue answers 429 with Retry-After; a draining engine
// 503.
func TestSDKQueueFullAndShuttingDown(t *testing.T) {
	e := startEngine(t, engineOpts{profile: "slow", maxNumSeqs: 1, maxWaiting: 1})
	c := e.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := completion("occupy", 3000)
	long.Model = modelName
	// One runs, then one waits (submitted one after the other: two at once
	// could both meet an empty running set and the second find the
	// one-slot queue full).
	for _, want := range [][2]int{{1, 0}, {1, 1}} {
		go c.Completions.New(ctx, long, option.WithJSONSet("ignore_eos", true))
		e2e.WaitFor(t, "requests running and waiting", func() bool {
			s := e.node.Stats()
			return s.Running == want[0] && s.Waiting == want[1]
		})
	}
	var resp *http.Response
	_, err := c.Completions.New(context.Background(), completion("more", 1), option.WithResponseInto(&resp))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("queue full: %v (Retry-After %q)", err, resp.Header.Get("Retry-After"))
	}
	cancel() // the two clients leave: both requests are aborted
	e2e.WaitFor(t, "the queue to empty", func() bool { return e.held(t) == 0 && e.node.Stats().Requests == 0 })

	e.node.Drain()
	_, err = c.Completions.New(context.Background(), completion("late", 1))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Errorf("draining: %v", err)
	}
}

// A streaming client that disconnects mid-generation frees its blocks, as
// /metrics shows.
func TestSDKStreamDisconnectFreesBlocks(t *testing.T) {
	e := startEngine(t, engineOpts{profile: "slow"})
	ctx, cancel := context.WithCancel(context.Background())
	p := completion(strings.Repeat("a long prompt ", 20), 3500)
	c := e.client()
	stream := c.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
	for i := 0; i < 3 && stream.Next(); i++ {
	}
	if held := e.held(t); held < 10 {
		t.Fatalf("held %v mid-stream, want the prompt's blocks", held)
	}
	cancel()
	stream.Close()
	e2e.WaitFor(t, `kvlease_kv_blocks{state="held"} to return to 0`, func() bool { return e.held(t) == 0 })
	if got := e.metric(t, `vllm:request_success_total{finished_reason="abort",model_name="`+modelName+`"}`); got != 1 {
		t.Errorf("aborted requests %v, want 1", got)
	}
	if got := e.metric(t, `vllm:num_requests_running{model_name="`+modelName+`"}`); got != 0 {
		t.Errorf("running %v", got)
	}
}

func TestModelsEndpoint(t *testing.T) {
	e := startEngine(t, engineOpts{role: engine.RoleBoth})
	c := e.client()
	m, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) != 1 || m.Data[0].ID != modelName || m.Data[0].OwnedBy != "kvlease" {
		t.Errorf("%+v", m.Data)
	}
}
