package pd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/model/llama"
)

// writeModel writes a stories260K-shaped GGUF (Q8_0 weights, seeded random,
// a SentencePiece vocabulary and a zephyr chat template) into dir.
func writeModel(t *testing.T, dir string) string {
	t.Helper()
	c := llamatest.Shape260K
	c.HiddenDim = 192 // whole Q8_0 blocks
	w := llamatest.Random(c, 11, false)
	llamatest.Quantize(w, llama.Q8_0)
	v := llamatest.SPMVocab(c.VocabSize)
	v.ChatTemplate = "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}</s>{% endfor %}<|assistant|>"
	var buf bytes.Buffer
	if err := llamatest.WriteGGUF(&buf, w, llamatest.GGUFOptions{Vocab: &v}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stories260k-q8.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveModel starts `kvlease serve --role both --model-file path` as a
// process; the test's cleanup stops it.
func serveModel(t *testing.T, path string) string {
	t.Helper()
	return serveSingle(t, "--model-file", path, "--model", model)
}

// completeTokens posts a completion whose prompt is token ids and returns
// the answer's text and prompt token count.
func completeTokens(t *testing.T, url string, prompt []int32, seed int) (string, int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 12,
		"temperature": 0.8, "seed": seed, "ignore_eos": true})
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	var r struct {
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("%s: %s", url, b)
	}
	return r.Choices[0].Text, r.Usage.PromptTokens
}

// TestRealModelPDMatchesSingleEngine: with a real (random-weight) llama
// model, a P/D cluster of `kvlease serve` processes — P computes the
// prompt's keys and values into its pool, D pulls them over the transfer
// protocol and attends over them — answers every request exactly as one
// engine does: completions and chats, greedy and seeded, streamed or not,
// text prompts and token-id prompts (passed to the model verbatim).
func TestRealModelPDMatchesSingleEngine(t *testing.T) {
	path := writeModel(t, t.TempDir())
	ref := serveModel(t, path)
	c := startCluster(t, localcluster.Options{Model: model, ExtraServeArgs: []string{"--model-file", path}})
	ctx := context.Background()
	for _, g := range generators {
		t.Run(g.name, func(t *testing.T) {
			want, err := g.run(ctx, client(ref))
			if err != nil {
				t.Fatalf("single engine: %v", err)
			}
			got, err := g.run(ctx, client(c.URL()))
			if err != nil {
				t.Fatalf("P/D: %v", err)
			}
			if got != want {
				t.Fatalf("P/D answered %q, the single engine %q", got, want)
			}
			if want == "" {
				t.Fatal("empty answer: the comparison shows nothing")
			}
		})
	}
	prompt := make([]int32, 70) // over four 16-token blocks
	for i := range prompt {
		prompt[i] = int32(3 + (i*37)%500)
	}
	want, n := completeTokens(t, ref, prompt, 5)
	got, _ := completeTokens(t, c.URL(), prompt, 5)
	if n != len(prompt) {
		t.Errorf("prompt_tokens %d for %d token ids: they were not passed verbatim", n, len(prompt))
	}
	if got != want {
		t.Errorf("token-id prompt: P/D answered %q, the single engine %q", got, want)
	}
	var pulled float64
	for _, e := range c.Engines() {
		if e.Role == "decode" {
			pulled += e2e.Metric(t, e.URL, `kvlease_transfer_bytes_total{direction="in",model_name="`+model+`"}`)
		}
	}
	if pulled <= 0 {
		t.Errorf("the decode engines pulled %v bytes of KV: no P/D transfer happened", pulled)
	}
}
