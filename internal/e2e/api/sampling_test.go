package api

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// n=3 through the official SDK: three choices at indexes 0..2, choice j
// the text of the same request alone with seed + j; streamed, the same.
func TestSDKN(t *testing.T) {
	c := startEngine(t, engineOpts{}).client()
	ctx := context.Background()
	p := completion("Three endings for one prompt, sharing its blocks:", 10)
	p.Temperature = openai.Float(1)
	var want []string
	for j := range 3 {
		p.Seed = openai.Int(int64(30 + j))
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.Choices[0].Text)
	}
	p.Seed, p.N = openai.Int(30), openai.Int(3)
	r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Choices) != 3 || r.Usage.CompletionTokens != 30 {
		t.Fatalf("choices %+v usage %+v", r.Choices, r.Usage)
	}
	for j, ch := range r.Choices {
		if ch.Index != int64(j) || ch.Text != want[j] {
			t.Errorf("choice %d: index %d %q, want %q", j, ch.Index, ch.Text, want[j])
		}
	}
	s := c.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
	got := make([]string, 3)
	for s.Next() {
		for _, ch := range s.Current().Choices {
			got[ch.Index] += ch.Text
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("streamed %q, want %q", got, want)
	}
}

// logprobs through the official SDK, both shapes: one entry per token,
// the texts making the text, log-probabilities ≤ 0, the documented number
// of alternatives, most probable first.
func TestSDKLogprobs(t *testing.T) {
	c := startEngine(t, engineOpts{}).client()
	ctx := context.Background()
	p := completion("Probabilities, please", 8)
	p.Logprobs, p.Seed = openai.Int(3), openai.Int(1)
	r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	lp := r.Choices[0].Logprobs
	if len(lp.Tokens) != 8 || strings.Join(lp.Tokens, "") != r.Choices[0].Text || len(lp.TextOffset) != 8 || len(lp.TopLogprobs) != 8 {
		t.Fatalf("logprobs %+v for %q", lp, r.Choices[0].Text)
	}
	for k, v := range lp.TokenLogprobs {
		if !(v <= 0) || math.IsInf(v, 0) {
			t.Errorf("token_logprobs[%d] = %v", k, v)
		}
	}
	for k, top := range lp.TopLogprobs {
		// logprobs 3: the three most probable, plus the sampled token
		// when it is not among them (vLLM's shape).
		if v, ok := top[lp.Tokens[k]]; len(top) < 3 || len(top) > 4 || !ok || v != lp.TokenLogprobs[k] || top[" "] < top["e"] {
			t.Errorf("top_logprobs[%d] = %v for %q", k, top, lp.Tokens[k])
		}
	}

	cp := openai.ChatCompletionNewParams{
		Model:    modelName,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		Logprobs: openai.Bool(true), TopLogprobs: openai.Int(4), MaxTokens: openai.Int(5),
	}
	cr, err := c.Chat.Completions.New(ctx, cp, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	content := cr.Choices[0].Logprobs.Content
	var text strings.Builder
	for _, tok := range content {
		text.WriteString(tok.Token)
		if len(tok.TopLogprobs) != 4 || tok.TopLogprobs[0].Token != " " || tok.TopLogprobs[0].Logprob < tok.TopLogprobs[3].Logprob {
			t.Errorf("top_logprobs %+v", tok.TopLogprobs)
		}
		if len(tok.Bytes) != len(tok.Token) || tok.Logprob > 0 {
			t.Errorf("token %+v", tok)
		}
	}
	if len(content) != 5 || text.String() != cr.Choices[0].Message.Content {
		t.Errorf("content %d tokens %q, message %q", len(content), text.String(), cr.Choices[0].Message.Content)
	}
}

// Penalties and logit_bias through the official SDK behave as OpenAI
// documents them: a bias of 100 makes its token (nearly) exclusive, −100
// bans it; a frequency penalty lowers the most repeated token's count;
// out of range is a 400 naming the field.
func TestSDKPenaltiesAndLogitBias(t *testing.T) {
	c := startEngine(t, engineOpts{}).client()
	ctx := context.Background()
	gen := func(mut func(*openai.CompletionNewParams)) string {
		t.Helper()
		p := completion("Bias and penalties", 120)
		p.Seed = openai.Int(9)
		mut(&p)
		r, err := c.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		return r.Choices[0].Text
	}
	if x := gen(func(p *openai.CompletionNewParams) { p.LogitBias = map[string]int64{"107": 100} }); strings.Count(x, "k") < 115 {
		t.Errorf("logit_bias +100 on 'k': %q", x)
	}
	if x := gen(func(p *openai.CompletionNewParams) { p.LogitBias = map[string]int64{"32": -100, "101": -100} }); strings.ContainsAny(x, " e") {
		t.Errorf("logit_bias -100 on ' ' and 'e': %q", x)
	}
	most := func(s string) int {
		n := map[rune]int{}
		top := 0
		for _, r := range s {
			n[r]++
			top = max(top, n[r])
		}
		return top
	}
	plain := gen(func(*openai.CompletionNewParams) {})
	if pen := gen(func(p *openai.CompletionNewParams) { p.FrequencyPenalty = openai.Float(2) }); most(pen) >= most(plain) {
		t.Errorf("frequency_penalty 2: most repeated byte %d times, %d without", most(pen), most(plain))
	}
	p := completion("x", 2)
	p.PresencePenalty = openai.Float(3)
	_, err := c.Completions.New(ctx, p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "presence_penalty" {
		t.Errorf("presence_penalty 3: %v", err)
	}
	cp := openai.ChatCompletionNewParams{
		Model:     modelName,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		LogitBias: map[string]int64{"300": 5}, MaxTokens: openai.Int(3),
	}
	_, err = c.Chat.Completions.New(ctx, cp)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "logit_bias" {
		t.Errorf("logit_bias out of vocabulary: %v", err)
	}
}
