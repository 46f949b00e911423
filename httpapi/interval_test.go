package httpapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestStreamInterval: a stream's events follow Config.StreamInterval as
// vLLM's --stream-interval: the first token's event at once, then one each
// time that many tokens came, the last at the end; the text is the same
// whatever the interval.
func TestStreamInterval(t *testing.T) {
	n := newNode(t, nodeOpts{})
	body := `{"prompt":"hello","max_tokens":16,"ignore_eos":true,"temperature":0,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`
	var texts []string
	for _, tt := range []struct {
		every int
		want  []int // completion_tokens of each event with text, the last one's included
	}{
		{1, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{4, []int{1, 5, 9, 13, 16}},
		{16, []int{1, 16}},
		{0, nil}, // as the outputs come: any split
	} {
		t.Run(fmt.Sprint(tt.every), func(t *testing.T) {
			_, url := newServer(t, n, func(c *Config) { c.StreamInterval = tt.every })
			resp := post(t, url+"/v1/completions", body)
			defer resp.Body.Close()
			var got []int
			var text strings.Builder
			for _, ev := range events(t, resp.Body) {
				if ev == "[DONE]" {
					continue
				}
				var chunk struct {
					Choices []struct {
						Text string `json:"text"`
					} `json:"choices"`
					Usage struct {
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(ev), &chunk); err != nil {
					t.Fatalf("%s: %v", ev, err)
				}
				if len(chunk.Choices) == 0 {
					continue // the usage chunk
				}
				got = append(got, chunk.Usage.CompletionTokens)
				text.WriteString(chunk.Choices[0].Text)
			}
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("tokens at each event %v, want %v", got, tt.want)
			}
			if len(got) == 0 || got[len(got)-1] != 16 {
				t.Errorf("tokens at each event %v: the last should be 16", got)
			}
			texts = append(texts, text.String())
		})
	}
	for _, s := range texts[1:] {
		if s != texts[0] {
			t.Errorf("texts differ with the interval: %q vs %q", s, texts[0])
		}
	}
	if _, err := New(n, Config{ModelName: testModel, StreamInterval: -1}); err == nil {
		t.Error("a negative interval was accepted")
	}
}
