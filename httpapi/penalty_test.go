package httpapi

import (
	"fmt"
	"strings"
	"testing"
)

// Penalties and logit_bias on the synthetic model, whose distribution
// (34 bytes and EOS) they reshape as vLLM's do: a bias of +100 on 'x'
// makes nearly every token an 'x', −100 on ' ' removes spaces, frequency
// penalties spread the text over the bytes, presence brings unused bytes
// sooner, repetition_penalty (on log-probabilities) sharpens; each is
// reproducible per seed, greedy or not.
func TestPenaltiesAndLogitBias(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	gen := func(extra string) string {
		t.Helper()
		return completionText(t, url, `{"prompt":"Penalize me","max_tokens":200,"seed":1,"ignore_eos":true`+extra+`}`)
	}
	distinctTop := func(s string) (int, int) { // distinct bytes, count of the most common
		counts := map[rune]int{}
		top := 0
		for _, r := range s {
			counts[r]++
			top = max(top, counts[r])
		}
		return len(counts), top
	}
	plain := gen("")
	if x := gen(`,"logit_bias":{"120":100}`); strings.Count(x, "x") < 195 {
		t.Errorf("logit_bias +100 on 'x': %q", x)
	}
	if x := gen(`,"logit_bias":{"32":-100},"temperature":0`); strings.Contains(x, " ") || x == "" {
		t.Errorf("logit_bias -100 on ' ' (greedy): %q", x)
	}
	if !strings.Contains(plain, " ") {
		t.Fatalf("the plain text has no space to remove: %q", plain)
	}
	plainDistinct40, _ := distinctTop(plain[:40])
	_, plainTop := distinctTop(plain)
	for _, extra := range []string{`,"frequency_penalty":2`, `,"presence_penalty":2`, `,"repetition_penalty":2`} {
		got := gen(extra)
		if got != gen(extra) || got == plain {
			t.Errorf("%s: not reproducible, or the plain text", extra)
		}
		distinct40, _ := distinctTop(got[:40])
		_, top := distinctTop(got)
		switch extra {
		case `,"frequency_penalty":2`:
			// Each use of a byte lowers its logit: the common ones
			// give way.
			if top >= plainTop {
				t.Errorf("%s: the most common byte appears %d times, %d without: %q", extra, top, plainTop, got)
			}
		case `,"presence_penalty":2`:
			// A byte used once is penalized: unused ones come sooner.
			if distinct40 <= plainDistinct40 {
				t.Errorf("%s: %d distinct bytes in the first 40, %d without: %q", extra, distinct40, plainDistinct40, got)
			}
		default:
			// The model's logits are log-probabilities, all negative:
			// multiplied by 2, a used byte's probability is squared
			// (renormalized), so the distribution sharpens towards ' '.
			if top <= plainTop {
				t.Errorf("%s: the most common byte appears %d times, %d without: %q", extra, top, plainTop, got)
			}
		}
	}
	// A negative frequency penalty repeats: the most common byte wins more.
	if _, top := distinctTop(gen(`,"frequency_penalty":-2`)); top <= plainTop {
		t.Errorf("frequency_penalty -2: the most common byte %d times, %d without", top, plainTop)
	}
	// allowed_token_ids keeps sampling to them (EOS too, so the text
	// runs to max_tokens).
	if x := completionText(t, url, `{"prompt":"Penalize me","max_tokens":50,"seed":1,"allowed_token_ids":[101,32]}`); len(x) != 50 || strings.Trim(x, "e ") != "" {
		t.Errorf("allowed_token_ids e and ' ': %q", x)
	}
	// bad_words: a one-token word never appears; a longer one never
	// completes, though its tokens appear apart.
	if x := completionText(t, url, `{"prompt":"Penalize me","max_tokens":300,"seed":1,"ignore_eos":true,"bad_words":["e"," th"]}`); strings.Contains(x, "e") ||
		strings.Contains(x, "th") || !strings.Contains(x, "t") || !strings.Contains(x, "h") {
		t.Errorf("bad_words e and th: %q", x)
	}
	// Chat takes them too.
	m := readJSON(t, post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":20,"ignore_eos":true,"logit_bias":{"113":100}}`))
	if c := field(m, "choices", 0, "message", "content").(string); strings.Count(c, "q") < 18 {
		t.Errorf("chat logit_bias: %q", c)
	}
}

// Out-of-range penalties and biases are 400s naming the field.
func TestPenaltyErrors(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	for _, tc := range []struct{ extra, param, msg string }{
		{`"presence_penalty":2.5`, "presence_penalty", "between -2 and 2"},
		{`"frequency_penalty":-3`, "frequency_penalty", "between -2 and 2"},
		{`"repetition_penalty":0`, "repetition_penalty", "(0, 2]"},
		{`"repetition_penalty":2.1`, "repetition_penalty", "(0, 2]"},
		{`"logit_bias":{"5":101}`, "logit_bias", "between -100 and 100"},
		{`"logit_bias":{"a":1}`, "logit_bias", "token ids"},
		{`"logit_bias":{"-1":1}`, "logit_bias", "token ids"},
		{`"logit_bias":{"257":1}`, "logit_bias", "out of vocabulary"},
		{`"logit_bias":[1]`, "logit_bias", "object"},
		{`"presence_penalty":"high"`, "presence_penalty", "number"},
		{`"allowed_token_ids":[]`, "allowed_token_ids", "1 to"},
		{`"bad_words":["  "]`, "bad_words", "non-blank"},
		{`"bad_words":"x"`, "bad_words", "array"},
		{`"allowed_token_ids":[1,300]`, "allowed_token_ids", "out of vocabulary"},
		{`"allowed_token_ids":[-1]`, "allowed_token_ids", "negative"},
	} {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			body := `{"prompt":"x",` + tc.extra + `}`
			if strings.Contains(path, "chat") {
				body = `{"messages":[{"role":"user","content":"x"}],` + tc.extra + `}`
			}
			resp := post(t, url+path, body)
			m := readJSON(t, resp)
			if resp.StatusCode != 400 || field(m, "error", "param") != tc.param || !strings.Contains(fmt.Sprint(field(m, "error", "message")), tc.msg) {
				t.Errorf("%s %s: %d %v", path, tc.extra, resp.StatusCode, m)
			}
		}
	}
}
