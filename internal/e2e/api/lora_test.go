package api

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/httpapi"
	"github.com/kvlease/kvlease/internal/e2e"
)

// adapterDir makes a PEFT-style LoRA adapter directory.
func adapterDir(t *testing.T, weights string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"adapter_config.json":       `{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["q_proj","k_proj","v_proj","o_proj"]}`,
		"adapter_model.safetensors": weights,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSDKLoRAAdapters: through the official openai-go SDK, requests name a
// LoRA adapter as their model: the answer is the adapter's (not the base
// model's, not the other adapter's), whole and streamed alike, and names
// the adapter; the models list shows each adapter with the base model as
// its parent; an unknown adapter is a 404 the SDK reports as such.
func TestSDKLoRAAdapters(t *testing.T) {
	sqlDir, chatDir := adapterDir(t, "sql"), adapterDir(t, "chat")
	e := startEngine(t, engineOpts{lora: &httpapi.LoRAConfig{MaxLoRAs: 2,
		Modules: []httpapi.LoRAModule{{Name: "sql", Path: sqlDir}, {Name: "chat", Path: chatDir}}}})
	c := e.client()
	ctx := context.Background()

	texts := map[string]string{}
	for _, m := range []string{modelName, "sql", "chat"} {
		params := openai.ChatCompletionNewParams{
			Model:       m,
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Name three colours.")},
			MaxTokens:   openai.Int(20),
			Temperature: openai.Float(0.7),
			Seed:        openai.Int(3),
		}
		r, err := c.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if r.Model != m || r.Choices[0].Message.Content == "" {
			t.Fatalf("%s: answered as %q: %q", m, r.Model, r.Choices[0].Message.Content)
		}
		texts[m] = r.Choices[0].Message.Content
		st := c.Chat.Completions.NewStreaming(ctx, params)
		var streamed strings.Builder
		for st.Next() {
			ch := st.Current()
			if ch.Model != m {
				t.Fatalf("%s: a chunk names %q", m, ch.Model)
			}
			if len(ch.Choices) > 0 {
				streamed.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		if err := st.Err(); err != nil || streamed.String() != texts[m] {
			t.Fatalf("%s: streamed %q (%v), whole %q", m, streamed.String(), err, texts[m])
		}
	}
	if texts["sql"] == texts[modelName] || texts["chat"] == texts[modelName] || texts["sql"] == texts["chat"] {
		t.Fatalf("adapters answer alike: %q", texts)
	}

	page, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, m := range page.Data {
		ids = append(ids, m.ID)
		var raw struct {
			Root   string  `json:"root"`
			Parent *string `json:"parent"`
		}
		if err := json.Unmarshal([]byte(m.RawJSON()), &raw); err != nil {
			t.Fatal(err)
		}
		if i == 0 && raw.Parent != nil || i > 0 && (raw.Parent == nil || *raw.Parent != modelName || raw.Root == "") {
			t.Errorf("card %s: root %q parent %v", m.ID, raw.Root, raw.Parent)
		}
	}
	if strings.Join(ids, ",") != modelName+",sql,chat" {
		t.Errorf("models %v", ids)
	}

	_, err = c.Completions.New(ctx, openai.CompletionNewParams{Model: "nope",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Fatalf("unknown adapter: %v", err)
	}
}

// TestSDKLoRAMaxLoRAs: with --max-loras 1, while a request of one adapter
// runs, a request of another waits, and vllm:lora_requests_info says so
// (running sql, waiting chat) as llm-d's endpoint picker reads it; the
// base model's requests are not held back.
func TestSDKLoRAMaxLoRAs(t *testing.T) {
	e := startEngine(t, engineOpts{profile: "slow", lora: &httpapi.LoRAConfig{MaxLoRAs: 1,
		Modules: []httpapi.LoRAModule{{Name: "sql", Path: adapterDir(t, "sql")}, {Name: "chat", Path: adapterDir(t, "chat")}}}})
	c := e.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A stream's response starts with its first token, so each runs in
	// its own goroutine.
	long := func(m string) {
		go func() {
			st := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(m),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("go on")}, MaxTokens: openai.Int(3000)},
				option.WithJSONSet("ignore_eos", true))
			for st.Next() {
			}
			st.Close()
		}()
	}
	long("sql")
	e2e.WaitFor(t, "sql running", func() bool {
		return e.metric(t, `vllm:lora_requests_info{max_lora="1",running_lora_adapters="sql",waiting_lora_adapters=""}`) > 0
	})
	long("chat")
	e2e.WaitFor(t, "chat waiting behind sql", func() bool {
		return e.metric(t, `vllm:lora_requests_info{max_lora="1",running_lora_adapters="sql",waiting_lora_adapters="chat"}`) > 0
	})
	// The base model runs beside sql (ignore_eos: an unseeded request
	// may draw EOS, once in 96 per token).
	r, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(modelName),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(2)},
		option.WithJSONSet("ignore_eos", true))
	if err != nil || r.Choices[0].FinishReason != "length" {
		t.Fatalf("base model beside sql: %v %+v", err, r)
	}
	if v := e.metric(t, `vllm:num_requests_waiting{model_name="`+modelName+`"}`); v != 1 {
		t.Errorf("%v waiting, want chat's request", v)
	}
	cancel()
	e2e.WaitFor(t, "the adapters' requests to end", func() bool {
		return e.metric(t, `vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""}`) > 0 && e.held(t) == 0
	})
}
