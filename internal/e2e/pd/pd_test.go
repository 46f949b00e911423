package pd

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/proxy"
)

// generator runs one request through an SDK client and returns its text.
type generator struct {
	name string
	run  func(ctx context.Context, c openai.Client) (string, error)
	// leases is the number of leases P grants for the request: one per
	// prompt (0 means 1, -1 none).
	leases int
}

// joinChoices is the texts of a response's choices, each with its index,
// for comparing every choice at once.
func joinChoices[T any](cs []T, get func(T) (int64, string)) string {
	var b strings.Builder
	for _, c := range cs {
		i, text := get(c)
		fmt.Fprintf(&b, "[%d]%s\n", i, text)
	}
	return b.String()
}

func toAny[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func completionChoice(c openai.CompletionChoice) (int64, string) { return c.Index, c.Text }

func completionParams(prompt string) openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel(model),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(24),
	}
}

func chatParams(msg string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage(msg)},
		MaxTokens: openai.Int(24),
	}
}

var generators = []generator{
	{"completion greedy", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("The quick brown fox jumps over the lazy dog, and then")
		p.Temperature = openai.Float(0)
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			return "", err
		}
		return r.Choices[0].Text, nil
	}, 0},
	{"completion seeded", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("Once upon a time in a land far away")
		p.Seed, p.Temperature = openai.Int(42), openai.Float(0.9)
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			return "", err
		}
		return r.Choices[0].Text, nil
	}, 0},
	{"chat", func(ctx context.Context, c openai.Client) (string, error) {
		p := chatParams("What is a lease?")
		p.Seed = openai.Int(7)
		r, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			return "", err
		}
		return r.Choices[0].Message.Content, nil
	}, 0},
	{"chat streaming", func(ctx context.Context, c openai.Client) (string, error) {
		p := chatParams("Tell me about prefill and decode.")
		p.Seed = openai.Int(3)
		p.StreamOptions.IncludeUsage = openai.Bool(true)
		s := c.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
		defer s.Close()
		var b strings.Builder
		usage := false
		for s.Next() {
			ch := s.Current()
			if len(ch.Choices) > 0 {
				b.WriteString(ch.Choices[0].Delta.Content)
			}
			usage = usage || ch.Usage.TotalTokens > 0
		}
		if err := s.Err(); err != nil {
			return "", err
		}
		if !usage {
			return "", fmt.Errorf("no usage chunk")
		}
		return b.String(), nil
	}, 0},
	{"completion streaming", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("Streams of tokens flow")
		p.Temperature = openai.Float(0)
		s := c.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
		defer s.Close()
		var b strings.Builder
		for s.Next() {
			if ch := s.Current(); len(ch.Choices) > 0 {
				b.WriteString(ch.Choices[0].Text)
			}
		}
		return b.String(), s.Err()
	}, 0},
	{"completion batch", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("")
		p.Prompt = openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{
			"The first prompt of a batch, long enough to fill a block", "A second one", "and a third"}}
		p.Seed, p.Temperature = openai.Int(11), openai.Float(1)
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			return "", err
		}
		if len(r.Choices) != 3 || r.Usage.CompletionTokens != 3*24 {
			return "", fmt.Errorf("%d choices, usage %+v", len(r.Choices), r.Usage)
		}
		return joinChoices(r.Choices, completionChoice), nil
	}, 3},
	{"completion batch of token ids, n=2, streaming", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("")
		p.Prompt = openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{
			{72, 101, 108, 108, 111, 44, 32, 116, 111, 107, 101, 110, 115, 32, 111, 102, 32, 97, 32, 112, 114, 111, 109, 112, 116},
			{66, 121, 101}}}
		p.Seed, p.N, p.Temperature = openai.Int(5), openai.Int(2), openai.Float(1)
		p.StreamOptions.IncludeUsage = openai.Bool(true)
		s := c.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
		defer s.Close()
		texts := make([]string, 4)
		var usage int64
		for s.Next() {
			ch := s.Current()
			for _, c := range ch.Choices {
				if c.Index < 0 || c.Index >= 4 {
					return "", fmt.Errorf("choice index %d", c.Index)
				}
				texts[c.Index] += c.Text
			}
			usage += ch.Usage.CompletionTokens
		}
		if err := s.Err(); err != nil {
			return "", err
		}
		if usage != 4*24 {
			return "", fmt.Errorf("usage chunks count %d completion tokens", usage)
		}
		return strings.Join(texts, "|"), nil
	}, 2},
	{"completion n=3", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("Three ways to end this sentence, each its own")
		p.Seed, p.N, p.Temperature = openai.Int(21), openai.Int(3), openai.Float(1)
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			return "", err
		}
		if len(r.Choices) != 3 || r.Choices[0].Text == r.Choices[1].Text {
			return "", fmt.Errorf("choices %+v", r.Choices)
		}
		return joinChoices(r.Choices, completionChoice), nil
	}, 0},
	{"completion logprobs", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("Log-probabilities come from the decode engine")
		p.Seed, p.Logprobs, p.Temperature = openai.Int(13), openai.Int(3), openai.Float(1)
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			return "", err
		}
		lp := r.Choices[0].Logprobs
		if len(lp.Tokens) != 24 {
			return "", fmt.Errorf("%d logprobs for 24 tokens", len(lp.Tokens))
		}
		return r.Choices[0].Text + lp.RawJSON(), nil
	}, 0},
	{"chat logprobs streaming", func(ctx context.Context, c openai.Client) (string, error) {
		p := chatParams("Which token is likely?")
		p.Seed, p.Logprobs, p.TopLogprobs = openai.Int(4), openai.Bool(true), openai.Int(2)
		s := c.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
		defer s.Close()
		var b strings.Builder
		for s.Next() {
			for _, ch := range s.Current().Choices {
				for _, tok := range ch.Logprobs.Content {
					fmt.Fprintf(&b, "%q:%v:%d;", tok.Token, tok.Logprob, len(tok.TopLogprobs))
				}
			}
		}
		return b.String(), s.Err()
	}, 0},
	{"completion echo", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("Echo me back, then go on")
		p.Seed, p.Echo = openai.Int(2), openai.Bool(true)
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			return "", err
		}
		if !strings.HasPrefix(r.Choices[0].Text, "Echo me back, then go on") {
			return "", fmt.Errorf("text %q does not start with the prompt", r.Choices[0].Text)
		}
		return r.Choices[0].Text, nil
	}, 0},
	{"completion echo with logprobs, streaming", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("Score every prompt token")
		p.Seed, p.Echo, p.Logprobs = openai.Int(6), openai.Bool(true), openai.Int(2)
		s := c.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
		defer s.Close()
		var b strings.Builder
		var text strings.Builder
		var cols [4][]any
		for s.Next() {
			// Chunks end wherever the tokens' arrival cuts them: compare
			// the entries, not the chunks.
			for _, ch := range s.Current().Choices {
				text.WriteString(ch.Text)
				lp := ch.Logprobs
				// The SDK's top_logprobs cannot hold the null of the
				// first prompt token: decode them from the raw JSON.
				var tops []map[string]float64
				if err := json.Unmarshal([]byte(lp.JSON.TopLogprobs.Raw()), &tops); err != nil {
					return "", err
				}
				for i, v := range [][]any{toAny(lp.Tokens), toAny(lp.TokenLogprobs), toAny(lp.TextOffset), toAny(tops)} {
					cols[i] = append(cols[i], v...)
				}
			}
		}
		fmt.Fprintf(&b, "%s\n%v", text.String(), cols)
		return b.String(), s.Err()
	}, -1}, // the proxy sends it to D alone: P's KV would leave the prompt unscored
	{"completion penalties and logit_bias", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("Penalties apply on the decode engine as on one engine")
		p.Seed, p.Temperature = openai.Int(17), openai.Float(0.8)
		p.PresencePenalty, p.FrequencyPenalty = openai.Float(0.5), openai.Float(1)
		p.LogitBias = map[string]int64{"101": -100, "116": 3}
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true), option.WithJSONSet("repetition_penalty", 1.3))
		if err != nil {
			return "", err
		}
		return r.Choices[0].Text, nil
	}, 0},
	{"chat greedy logit_bias streaming", func(ctx context.Context, c openai.Client) (string, error) {
		p := chatParams("Biased, greedy")
		p.Temperature, p.LogitBias = openai.Float(0), map[string]int64{"32": -50, "97": 4}
		s := c.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
		defer s.Close()
		var b strings.Builder
		for s.Next() {
			for _, ch := range s.Current().Choices {
				b.WriteString(ch.Delta.Content)
			}
		}
		return b.String(), s.Err()
	}, 0},
	{"completion echo, max_tokens 0", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("Only the prompt comes back")
		p.Echo, p.MaxTokens = openai.Bool(true), openai.Int(0)
		r, err := c.Completions.New(ctx, p)
		if err != nil {
			return "", err
		}
		if r.Choices[0].Text != "Only the prompt comes back" || r.Usage.CompletionTokens != 0 {
			return "", fmt.Errorf("text %q usage %+v", r.Choices[0].Text, r.Usage)
		}
		return r.Choices[0].Text + string(r.Choices[0].FinishReason), nil
	}, 0},
	{"completion prompt_logprobs", func(ctx context.Context, c openai.Client) (string, error) {
		p := completionParams("vLLM's prompt logprobs, every token scored")
		p.Seed = openai.Int(3)
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true), option.WithJSONSet("prompt_logprobs", 2))
		if err != nil {
			return "", err
		}
		plp := r.Choices[0].JSON.ExtraFields["prompt_logprobs"].Raw()
		if !strings.HasPrefix(plp, "[null,{") {
			return "", fmt.Errorf("prompt_logprobs %.80s", plp)
		}
		return r.Choices[0].Text + plp, nil
	}, -1}, // the proxy sends it to D alone, as echo with logprobs
	{"chat n=2 streaming", func(ctx context.Context, c openai.Client) (string, error) {
		p := chatParams("Say it twice, differently.")
		p.Seed, p.N = openai.Int(8), openai.Int(2)
		s := c.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
		defer s.Close()
		texts := make([]string, 2)
		for s.Next() {
			for _, c := range s.Current().Choices {
				if c.Index < 0 || c.Index >= 2 {
					return "", fmt.Errorf("choice index %d", c.Index)
				}
				texts[c.Index] += c.Delta.Content
			}
		}
		return strings.Join(texts, "|"), s.Err()
	}, 0},
	{"chat json_schema", func(ctx context.Context, c openai.Client) (string, error) {
		p := chatParams("Describe a lease as JSON.")
		p.Seed, p.Temperature, p.MaxTokens = openai.Int(4), openai.Float(1), openai.Int(400)
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "lease", Strict: openai.Bool(true), Schema: leaseSchema}}}
		r, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			return "", err
		}
		ch := r.Choices[0]
		if ch.FinishReason == "stop" {
			var v struct {
				ID     *string                   `json:"id"`
				Blocks []int64                   `json:"blocks"`
				Holder *struct{ Engine *string } `json:"holder"`
			}
			if err := json.Unmarshal([]byte(ch.Message.Content), &v); err != nil || v.ID == nil || v.Blocks == nil || v.Holder == nil || v.Holder.Engine == nil {
				return "", fmt.Errorf("%q does not validate (%v)", ch.Message.Content, err)
			}
		}
		return ch.Message.Content + "|" + ch.FinishReason, nil
	}, 0},
	{"chat tool_calls required streaming", func(ctx context.Context, c openai.Client) (string, error) {
		p := chatParams("Look it up.")
		p.Seed, p.Temperature, p.MaxTokens = openai.Int(9), openai.Float(1), openai.Int(80)
		p.Tools = []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "lookup", Parameters: map[string]any{
				"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}}),
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "noop"}),
		}
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			return "", err
		}
		ch := acc.Choices[0]
		var b strings.Builder
		for _, tc := range ch.Message.ToolCalls {
			if ch.FinishReason == "tool_calls" && !json.Valid([]byte(tc.Function.Arguments)) {
				return "", fmt.Errorf("%s(%s): the arguments do not parse", tc.Function.Name, tc.Function.Arguments)
			}
			fmt.Fprintf(&b, "%s(%s);", tc.Function.Name, tc.Function.Arguments)
		}
		if b.Len() == 0 {
			return "", fmt.Errorf("no tool calls: %+v", ch)
		}
		return b.String() + "|" + ch.FinishReason, nil
	}, 0},
}

// leaseSchema is a small nested strict schema for the constrained
// generators.
var leaseSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"id":     map[string]any{"type": "string"},
		"blocks": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "maxItems": 4},
		"holder": map[string]any{"type": "object", "properties": map[string]any{"engine": map[string]any{"type": "string"}},
			"required": []string{"engine"}, "additionalProperties": false},
	},
	"required":             []string{"id", "blocks", "holder"},
	"additionalProperties": false,
}

// TestSDKThroughProxyMatchesSingleEngine: completion, chat and streaming
// through a P/D cluster give exactly the text of one engine doing it all.
func TestSDKThroughProxyMatchesSingleEngine(t *testing.T) {
	ref := client(singleEngine(t).url)
	c := startCluster(t, localcluster.Options{})
	pd := client(c.URL())
	ctx := context.Background()
	for _, g := range generators {
		t.Run(g.name, func(t *testing.T) {
			want, err := g.run(ctx, ref)
			if err != nil {
				t.Fatalf("single engine: %v", err)
			}
			got, err := g.run(ctx, pd)
			if err != nil {
				t.Fatalf("through the proxy: %v", err)
			}
			if got != want || got == "" {
				t.Errorf("through the proxy %q\n        single engine %q", got, want)
			}
		})
	}
	p := c.URLs(proxy.RolePrefill)[0]
	leases := 0
	for _, g := range generators {
		if g.leases >= 0 {
			leases += max(g.leases, 1)
		}
	}
	if granted := e2e.Metric(t, p, `kvlease_leases_granted_total{model_name="`+model+`"}`); granted != float64(leases) {
		t.Errorf("P granted %v leases for %d requests with %d prompts", granted, len(generators), leases)
	}
	waitQuiet(t, c)
}

// TestDecodeEngineKilled: with one of two decode engines killed, every
// request still succeeds through the other, with the same text.
func TestDecodeEngineKilled(t *testing.T) {
	ref := client(singleEngine(t).url)
	c := startCluster(t, localcluster.Options{Decode: 2})
	if err := c.Kill(1); err != nil { // decode0
		t.Fatal(err)
	}
	pd := client(c.URL())
	ctx := context.Background()
	g := generators[0]
	want, err := g.run(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		got, err := g.run(ctx, pd)
		if err != nil || got != want {
			t.Fatalf("request %d with decode0 dead: %q, %v; want %q", i, got, err, want)
		}
	}
	d1 := c.URLs(proxy.RoleDecode)[1]
	if n := e2e.Metric(t, d1, `vllm:request_success_total{finished_reason="length",model_name="`+model+`"}`); n != 6 {
		t.Errorf("decode1 finished %v requests, want all 6", n)
	}
	// The engine comes back on its port and gets legs again. The proxy
	// passes over decode0 (marked down by the failed legs, for DownFor)
	// until a scrape sees it answer, which takes a scrape interval or, on a
	// loaded machine, longer: wait for the proxy to report it up, then send
	// requests until decode0 has served one. Round-robin gives it one leg in
	// two; the bounds only turn a regression into a failure, not a hang.
	if err := c.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	d0 := c.URLs(proxy.RoleDecode)[0]
	up := `kvlease_proxy_engine_up{engine="` + strings.TrimPrefix(d0, "http://") + `",role="decode"}`
	served := func() float64 {
		return e2e.Metric(t, d0, `vllm:request_success_total{finished_reason="length",model_name="`+model+`"}`)
	}
	const maxRequests = 20
	deadline := time.Now().Add(e2e.Timeout)
	for i := 0; served() < 1; i++ {
		if i == maxRequests || time.Now().After(deadline) {
			t.Fatalf("the restarted decode0 served no request of %d sent after the proxy saw it up", i)
		}
		e2e.WaitFor(t, "the proxy to see the restarted decode0 up", func() bool { return e2e.Metric(t, c.URL(), up) == 1 })
		if got, err := g.run(ctx, pd); err != nil || got != want {
			t.Fatalf("after the restart: %q, %v", got, err)
		}
	}
	waitQuiet(t, c)
}

// TestCancelledStreamsLeaveNoLease cancels 50 concurrent streaming requests
// at random moments (some while P prefills, most while D streams) and
// shows through every engine's /metrics that soon after (well before any
// lease could expire) no lease is active and no block held.
func TestCancelledStreamsLeaveNoLease(t *testing.T) {
	c := startCluster(t, localcluster.Options{Decode: 2})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	// A fifth of the clients leave after a random delay of up to 3 ms
	// (around the prefill), a fifth within 300 ms (around the hand-off to
	// D, its queue and its pull), the rest after a random number of
	// streamed events, whatever the machine's speed.
	type leave struct {
		delay  time.Duration
		events int
	}
	plans := make([]leave, 50)
	for i := range plans {
		switch i % 5 {
		case 0:
			plans[i].delay = time.Duration(1+rng.IntN(3000)) * time.Microsecond
		case 1:
			plans[i].delay = time.Duration(1+rng.IntN(300)) * time.Millisecond
		default:
			plans[i].events = 1 + rng.IntN(30)
		}
	}
	pd := client(c.URL())
	var wg sync.WaitGroup
	var mu sync.Mutex
	events := 0
	for i, pl := range plans {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if pl.delay > 0 {
				time.AfterFunc(pl.delay, cancel)
			}
			p := chatParams(fmt.Sprintf("Request %d: write a long story.", i))
			p.MaxTokens = openai.Int(2000)
			s := pd.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true),
				option.WithHeader("X-Request-Id", fmt.Sprintf("cancel-%d", i)))
			n := 0
			for s.Next() {
				if n++; n == pl.events {
					cancel()
				}
			}
			s.Close()
			mu.Lock()
			events += n
			mu.Unlock()
		})
	}
	wg.Wait()
	px := c.Proxy()
	e2e.WaitFor(t, "the proxy to end every request after its client left", func() bool { return px.InFlight() == 0 })
	t.Logf("%d events reached the clients before they left", events)
	waitQuiet(t, c)
	// Every request that reached the proxy ended as client_cancelled (how
	// many reached it before their client left depends on the machine).
	var cancelled, total float64
	for _, o := range []string{proxy.OutcomeOK, proxy.OutcomeClientCancelled, proxy.OutcomeBadRequest,
		proxy.OutcomeOverloaded, proxy.OutcomePrefillError, proxy.OutcomePrefillUnreachable, proxy.OutcomePrefillTimeout,
		proxy.OutcomeDecodeError, proxy.OutcomeDecodeUnavailable, proxy.OutcomeDecodeFailed, proxy.OutcomeDecodeTimeout} {
		v := e2e.Metric(t, c.URL(), `kvlease_proxy_requests_total{outcome="`+o+`"}`)
		total += v
		if o == proxy.OutcomeClientCancelled {
			cancelled = v
		}
	}
	p := c.URLs(proxy.RolePrefill)[0]
	var reasons []string
	for _, r := range []string{"read_done", "aborted", "undelivered", "rejected", "expired"} {
		reasons = append(reasons, fmt.Sprintf("%s %v", r,
			e2e.Metric(t, p, `kvlease_leases_released_total{model_name="`+model+`",reason="`+r+`"}`)))
	}
	t.Logf("P's leases: granted %v; released: %s", e2e.Metric(t, p, `kvlease_leases_granted_total{model_name="`+model+`"}`),
		strings.Join(reasons, ", "))
	if cancelled == 0 || cancelled != total {
		t.Errorf("proxy outcomes: %v client_cancelled of %v; want every request that reached it cancelled", cancelled, total)
	}
}

// waitQuiet waits up to e2e.Timeout for every engine to show no active
// lease, no held block and no request running or waiting, and fails naming
// what is left.
func waitQuiet(t testing.TB, c *localcluster.Cluster) {
	t.Helper()
	deadline := time.Now().Add(e2e.Timeout)
	for {
		var left []string
		for _, e := range c.Engines() {
			for _, s := range []string{
				`kvlease_leases_active{model_name="` + model + `"}`,
				`kvlease_kv_blocks{model_name="` + model + `",state="held"}`,
				`vllm:num_requests_running{model_name="` + model + `"}`,
				`vllm:num_requests_waiting{model_name="` + model + `"}`,
			} {
				if v := e2e.Metric(t, e.URL, s); v > 0 {
					left = append(left, fmt.Sprintf("%s %s = %v", e.Name(), s, v))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the last request ended:\n%s", e2e.Timeout, strings.Join(left, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPDNChoicesSharePulledPrefix: through P/D, n=3 pulls the prompt's KV
// once (one lease) and the decode engine's later choices hit the pulled
// blocks in its prefix cache instead of computing the prompt.
func TestPDNChoicesSharePulledPrefix(t *testing.T) {
	c := startCluster(t, localcluster.Options{})
	pd := client(c.URL())
	d := c.URLs(proxy.RoleDecode)[0]
	p := c.URLs(proxy.RolePrefill)[0]
	hits := func() float64 { return e2e.Metric(t, d, `vllm:prefix_cache_hits_total{model_name="`+model+`"}`) }
	run := func(prompt string, n int64) {
		t.Helper()
		params := completionParams(prompt)
		params.MaxTokens, params.N = openai.Int(4), openai.Int(n)
		r, err := pd.Completions.New(context.Background(), params, option.WithJSONSet("ignore_eos", true))
		if err != nil || len(r.Choices) != int(n) {
			t.Fatalf("n=%d: %v %+v", n, err, r)
		}
	}
	prompt := strings.Repeat("seventy tokens or so of a shared prompt. ", 2) // 84 tokens: 5 full blocks
	h0 := hits()
	run("A"+prompt, 1)
	h1 := hits()
	run("B"+prompt, 3)
	h2 := hits()
	if extra := (h2 - h1) - (h1 - h0); extra < 2*5*16 {
		t.Errorf("n=3 hit %v more prefix tokens on D than n=1, want at least %d (two choices on 5 pulled blocks)", extra, 2*5*16)
	}
	if granted := e2e.Metric(t, p, `kvlease_leases_granted_total{model_name="`+model+`"}`); granted != 2 {
		t.Errorf("P granted %v leases for two requests", granted)
	}
	waitQuiet(t, c)
}
