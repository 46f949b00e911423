package httpapi

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/kvlease/kvlease/openai"
)

func TestTokenizeDetokenize(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	m := readJSON(t, post(t, url+"/tokenize", `{"prompt":"Hi!","return_token_strs":true}`))
	if fmt.Sprint(m["tokens"]) != "[72 105 33]" || m["count"] != 3.0 || m["max_model_len"] != 2048.0 ||
		fmt.Sprint(m["token_strs"]) != "[H i !]" {
		t.Errorf("tokenize %v", m)
	}
	m = readJSON(t, post(t, url+"/tokenize", `{"model":"`+testModel+`","prompt":""}`))
	if fmt.Sprint(m["tokens"]) != "[]" || m["count"] != 0.0 || m["token_strs"] != nil {
		t.Errorf("empty prompt %v", m)
	}
	// A chat counts as many tokens as the completion's usage would.
	chat := `"messages":[{"role":"user","content":"Hello?"}]`
	m = readJSON(t, post(t, url+"/tokenize", `{`+chat+`}`))
	u := readJSON(t, post(t, url+"/v1/chat/completions", `{`+chat+`,"max_tokens":1}`))
	if m["count"] != field(u, "usage", "prompt_tokens") {
		t.Errorf("tokenize counts %v, usage %v", m["count"], field(u, "usage", "prompt_tokens"))
	}
	m = readJSON(t, post(t, url+"/tokenize", `{`+chat+`,"add_generation_prompt":false}`))
	if !(m["count"].(float64) < field(u, "usage", "prompt_tokens").(float64)) {
		t.Errorf("add_generation_prompt false counts %v", m["count"])
	}
	m = readJSON(t, post(t, url+"/detokenize", `{"tokens":[72,105,33]}`))
	if m["prompt"] != "Hi!" {
		t.Errorf("detokenize %v", m)
	}
	for _, tc := range []struct {
		path, body string
		status     int
		param      any
	}{
		{"/tokenize", `{"prompt":5}`, 400, "prompt"},
		{"/tokenize", `{}`, 400, "prompt"},
		{"/tokenize", `{"prompt":"a",` + chat + `}`, 400, "prompt"},
		{"/tokenize", `{"messages":[]}`, 400, "messages"},
		{"/tokenize", `{"model":"other","prompt":"a"}`, 404, "model"},
		{"/tokenize", `[1]`, 400, nil},
		{"/detokenize", `{"tokens":[1,-1]}`, 400, "tokens"},
		{"/detokenize", `{"tokens":[99999999]}`, 400, "tokens"},
		{"/detokenize", `{"tokens":"ab"}`, 400, "tokens"},
		{"/detokenize", `{}`, 400, "tokens"},
	} {
		resp := post(t, url+tc.path, tc.body)
		if resp.StatusCode != tc.status {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Errorf("%s %s: %d %s", tc.path, tc.body, resp.StatusCode, b)
			continue
		}
		if got := field(readJSON(t, resp), "error", "param"); tc.param != nil && got != tc.param {
			t.Errorf("%s %s: param %v, want %v", tc.path, tc.body, got, tc.param)
		}
	}
	if code, _ := get(t, url+"/tokenize"); code != 405 {
		t.Errorf("GET /tokenize %d", code)
	}
}

// truncate_prompt_tokens keeps the last (or, with truncation_side "right",
// the first) N prompt tokens: the answer is the one to that prompt.
func TestTruncatePromptTokens(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	const prompt = "The quick brown fox jumps over the lazy dog"
	ask := func(extra string) map[string]any {
		return readJSON(t, post(t, url+"/v1/completions", `{"max_tokens":8,"seed":3,"temperature":0.9,"ignore_eos":true,`+extra+`}`))
	}
	for _, tc := range []struct{ extra, same string }{
		{`"prompt":"` + prompt + `","truncate_prompt_tokens":8`, prompt[len(prompt)-8:]},
		{`"prompt":"` + prompt + `","truncate_prompt_tokens":8,"truncation_side":"right"`, prompt[:8]},
		{`"prompt":"` + prompt + `","truncate_prompt_tokens":-1`, prompt},
		{`"prompt":"` + prompt + `","truncate_prompt_tokens":100`, prompt},
	} {
		got, want := ask(tc.extra), ask(`"prompt":"`+tc.same+`"`)
		if field(got, "choices", 0, "text") != field(want, "choices", 0, "text") ||
			field(got, "usage", "prompt_tokens") != float64(len(tc.same)) {
			t.Errorf("%s: %v, want %v", tc.extra, got, want)
		}
	}
}

// optTokenizer is the byte tokenizer, recording the options text prompts
// are encoded with.
type optTokenizer struct {
	byteTokenizer
	mu   sync.Mutex
	opts []openai.Tokenization
}

func (o *optTokenizer) AppendEncode(dst []int32, text string, opt openai.Tokenization) []int32 {
	o.mu.Lock()
	o.opts = append(o.opts, opt)
	o.mu.Unlock()
	return o.byteTokenizer.AppendEncode(dst, text, opt)
}

func (o *optTokenizer) take() []openai.Tokenization {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.opts
	o.opts = nil
	return got
}

// TestTokenizationFieldsReachTheTokenizer: add_special_tokens and
// split_special_tokens of /tokenize and of every prompt of a completions
// batch reach the tokenizer; bad words are encoded without added special
// tokens.
func TestTokenizationFieldsReachTheTokenizer(t *testing.T) {
	tok := &optTokenizer{}
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, func(c *Config) { c.Tokenizer = tok })
	off := openai.Tokenization{NoAddSpecialTokens: true, SplitSpecialTokens: true}
	for _, tc := range []struct {
		path, body string
		want       []openai.Tokenization
	}{
		{"/tokenize", `{"prompt":"Hi"}`, []openai.Tokenization{{}}},
		{"/tokenize", `{"prompt":"Hi","add_special_tokens":false,"split_special_tokens":true}`, []openai.Tokenization{off}},
		{"/v1/completions", `{"prompt":"Hi","max_tokens":1}`, []openai.Tokenization{{}}},
		{"/v1/completions", `{"prompt":["Hi","Ho"],"max_tokens":1,"add_special_tokens":false,"split_special_tokens":true}`, []openai.Tokenization{off, off}},
		{"/v1/completions", `{"prompt":"Hi","max_tokens":1,"bad_words":["x"]}`, []openai.Tokenization{{}, {NoAddSpecialTokens: true}, {NoAddSpecialTokens: true}}},
	} {
		resp := post(t, url+tc.path, tc.body)
		readJSON(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d", tc.path, tc.body, resp.StatusCode)
		}
		got := tok.take()
		slices.SortFunc(got, func(a, b openai.Tokenization) int { return cmpOpt(a) - cmpOpt(b) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: encoded with %+v, want %+v", tc.path, tc.body, got, tc.want)
		}
	}
}

func cmpOpt(o openai.Tokenization) int {
	n := 0
	if o.NoAddSpecialTokens {
		n++
	}
	if o.SplitSpecialTokens {
		n += 2
	}
	return n
}
