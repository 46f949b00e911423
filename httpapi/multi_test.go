package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/sched"
)

// completionText is choice 0's text of a single-prompt completion.
func completionText(t *testing.T, url, body string) string {
	t.Helper()
	m := readJSON(t, post(t, url+"/v1/completions", body))
	s, ok := field(m, "choices", 0, "text").(string)
	if !ok {
		t.Fatalf("no text in %v", m)
	}
	return s
}

// A batch of prompts (strings, or token-id arrays) is answered with one
// choice per prompt in the batch's order, each the text the prompt alone
// gets; usage adds them up.
func TestBatchPrompts(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	const params = `"max_tokens":9,"seed":3,"temperature":0.9,"ignore_eos":true`
	prompts := []string{"first prompt", "the second one", "3"}
	var want []string
	for _, p := range prompts {
		want = append(want, completionText(t, url, `{"prompt":"`+p+`",`+params+`}`))
	}
	toks := make([]string, len(prompts))
	for i, p := range prompts {
		var ids []string
		for _, b := range []byte(p) {
			ids = append(ids, fmt.Sprint(b))
		}
		toks[i] = "[" + strings.Join(ids, ",") + "]"
	}
	for _, batch := range []string{`["first prompt","the second one","3"]`, "[" + strings.Join(toks, ",") + "]"} {
		m := readJSON(t, post(t, url+"/v1/completions", `{"prompt":`+batch+`,`+params+`}`))
		cs, _ := field(m, "choices").([]any)
		if len(cs) != len(prompts) {
			t.Fatalf("batch %s: %d choices: %v", batch, len(cs), m)
		}
		for i := range prompts {
			if field(m, "choices", i, "index") != float64(i) || field(m, "choices", i, "text") != want[i] {
				t.Errorf("batch %s: choice %d is %v, want index %d text %q", batch, i, field(m, "choices", i), i, want[i])
			}
		}
		if pt := field(m, "usage", "prompt_tokens"); pt != float64(len("first prompt")+len("the second one")+1) {
			t.Errorf("prompt_tokens %v", pt)
		}
		if ct := field(m, "usage", "completion_tokens"); ct != 27.0 {
			t.Errorf("completion_tokens %v, want 27", ct)
		}
	}
}

// n choices from one prompt: choice j samples with seed + j, so each
// equals a single request with that seed; they share the prompt's full
// blocks (the engine's prefix cache counts the hits); streamed they are
// the same texts.
func TestNChoices(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	prompt := strings.Repeat("shared prefix ", 5) // 70 tokens: 4 full blocks
	const params = `"max_tokens":12,"temperature":1,"ignore_eos":true`
	var want []string
	for j := range 3 {
		want = append(want, completionText(t, url, fmt.Sprintf(`{"prompt":%q,"seed":%d,%s}`, prompt+"x", 10+j, params)))
	}
	if want[0] == want[1] && want[1] == want[2] {
		t.Fatalf("three seeds gave the same text %q", want[0])
	}
	hits := n.Stats().Sched.PrefixHitTokens
	m := readJSON(t, post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"seed":10,"n":3,%s}`, prompt, params)))
	for j := range 3 {
		// The prompt differs from the singles' (no "x"): the texts are
		// checked against a second batch below; here only the shape.
		if field(m, "choices", j, "index") != float64(j) || field(m, "choices", j, "finish_reason") != "length" {
			t.Errorf("choice %d: %v", j, field(m, "choices", j))
		}
	}
	// The two later choices hit the first one's 4 full blocks.
	if got := n.Stats().Sched.PrefixHitTokens - hits; got < 2*64 {
		t.Errorf("n=3 hit %d prefix tokens, want at least %d (two choices sharing 4 blocks)", got, 2*64)
	}
	if pt := field(m, "usage", "prompt_tokens"); pt != float64(len(prompt)) {
		t.Errorf("prompt_tokens %v, want the prompt once (%d)", pt, len(prompt))
	}
	if ct := field(m, "usage", "completion_tokens"); ct != 36.0 {
		t.Errorf("completion_tokens %v", ct)
	}

	// Choice j equals the single request with seed + j.
	m = readJSON(t, post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"seed":10,"n":3,%s}`, prompt+"x", params)))
	for j := range 3 {
		if got := field(m, "choices", j, "text"); got != want[j] {
			t.Errorf("choice %d: %q, want %q (seed %d alone)", j, got, want[j], 10+j)
		}
	}

	// Streamed, chat and completions: the same texts per index.
	resp := post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"seed":10,"n":3,"stream":true,"stream_options":{"include_usage":true},%s}`, prompt+"x", params))
	evs := events(t, resp.Body)
	resp.Body.Close()
	texts, finishes, usage := streamedChoices(t, evs, false)
	for j := range 3 {
		if texts[j] != want[j] || finishes[j] != "length" {
			t.Errorf("streamed choice %d: %q %q, want %q length", j, texts[j], finishes[j], want[j])
		}
	}
	if usage == nil || field(usage, "completion_tokens") != 36.0 {
		t.Errorf("usage chunk %v", usage)
	}

	chat := `{"messages":[{"role":"user","content":"Hi"}],"seed":5,"max_tokens":10,"temperature":1,"ignore_eos":true`
	whole := readJSON(t, post(t, url+"/v1/chat/completions", chat+`,"n":2}`))
	resp = post(t, url+"/v1/chat/completions", chat+`,"n":2,"stream":true}`)
	evs = events(t, resp.Body)
	resp.Body.Close()
	texts, finishes, _ = streamedChoices(t, evs, true)
	for j := range 2 {
		if got := field(whole, "choices", j, "message", "content"); got != texts[j] || finishes[j] != "length" {
			t.Errorf("chat choice %d: whole %q, streamed %q (%q)", j, got, texts[j], finishes[j])
		}
	}
	if texts[0] == texts[1] {
		t.Errorf("chat n=2 gave the same text twice: %q", texts[0])
	}
}

// streamedChoices folds a stream's chunks by choice index: the texts, the
// finish reasons, and the usage chunk (nil without one). A chat stream's
// choices each start with a role chunk.
func streamedChoices(t *testing.T, evs []string, chat bool) (map[int]string, map[int]string, map[string]any) {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("stream without [DONE]: %q", evs)
	}
	texts, finishes := map[int]string{}, map[int]string{}
	roles := map[int]bool{}
	var usage map[string]any
	for _, e := range evs[:len(evs)-1] {
		var ch map[string]any
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		cs := field(ch, "choices").([]any)
		if len(cs) == 0 {
			usage, _ = field(ch, "usage").(map[string]any)
			continue
		}
		k := int(field(cs[0], "index").(float64))
		if _, done := finishes[k]; done {
			t.Errorf("choice %d has a chunk after its finish: %s", k, e)
		}
		if chat {
			if r := field(cs[0], "delta", "role"); r != nil {
				roles[k] = true
			} else if !roles[k] {
				t.Errorf("choice %d: a chunk before its role chunk", k)
			}
			texts[k] += field(cs[0], "delta", "content").(string)
		} else {
			texts[k] += field(cs[0], "text").(string)
		}
		if f, ok := field(cs[0], "finish_reason").(string); ok {
			finishes[k] = f
		}
	}
	return texts, finishes, usage
}

// A bad prompt of a batch is named; a batch with kv_transfer_params is
// refused (P/D takes one prompt per request).
func TestBatchErrors(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{maxLen: 64}), nil)
	for _, tc := range []struct{ body, param, msg string }{
		{`{"prompt":[[1,2],[3,99999]]}`, "prompt[1]", "out of vocabulary"},
		{`{"prompt":["a","` + strings.Repeat("x", 80) + `"]}`, "prompt[1]", "maximum context length"},
		{`{"prompt":["a",""]}`, "prompt[1]", "empty"},
		{`{"prompt":["a","b"],"kv_transfer_params":{"do_remote_decode":true}}`, "kv_transfer_params", "one prompt"},
		{`{"prompt":"a","n":129}`, "n", "between 1 and 128"},
		{`{"prompt":["a","b","c"],"n":100}`, "n", "at most 256"},
	} {
		resp := post(t, url+"/v1/completions", tc.body)
		m := readJSON(t, resp)
		if resp.StatusCode != 400 || field(m, "error", "param") != tc.param || !strings.Contains(fmt.Sprint(field(m, "error", "message")), tc.msg) {
			t.Errorf("%s: %d %v, want 400 param %s (%q)", tc.body, resp.StatusCode, m, tc.param, tc.msg)
		}
	}
}

// A client that leaves a stream of n choices aborts all of them.
func TestNChoicesDisconnectAbortsAll(t *testing.T) {
	n := newNode(t, nodeOpts{profile: "slow"})
	_, url := newServer(t, n, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions",
		strings.NewReader(`{"prompt":"long ones","max_tokens":1900,"ignore_eos":true,"stream":true,"n":3}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three running choices", func() bool { return n.Stats().Requests == 3 })
	cancel()
	resp.Body.Close()
	waitFor(t, "the aborted choices' blocks", func() bool { s := n.Stats(); return s.Pool.Held == 0 && s.Requests == 0 })
	if got := n.Stats().Finished[sched.FinishedAborted]; got != 3 {
		t.Errorf("aborted count %d, want 3", got)
	}
}

// When the engine refuses one choice, the request gets the refusal (429
// with Retry-After; a stream starts only once every choice produced
// output, so it too gets the status) and the other choices are aborted.
func TestNChoicesRefusalAbortsTheOthers(t *testing.T) {
	for _, stream := range []bool{false, true} {
		eng := &recordingEngine{Node: newNode(t, nodeOpts{profile: "slow"}),
			refuseID: func(id string) bool { return strings.HasSuffix(id, "-2") }}
		_, url := newServer(t, eng, nil)
		body := fmt.Sprintf(`{"prompt":"p","max_tokens":1900,"ignore_eos":true,"n":3,"stream":%v}`, stream)
		resp := post(t, url+"/v1/completions", body, "X-Request-Id", "nref")
		m := readJSON(t, resp)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || field(m, "error", "code") != "rate_limit_exceeded" {
			t.Errorf("stream %v: status %d %v", stream, resp.StatusCode, m)
		}
		waitFor(t, "the other choices aborted", func() bool { s := eng.Stats(); return s.Pool.Held == 0 && s.Requests == 0 })
		if got := eng.Stats().Finished[sched.FinishedAborted]; got != 2 {
			t.Errorf("stream %v: aborted %d, want 2", stream, got)
		}
	}
}

// Stop strings end each choice on its own.
func TestNChoicesStopStrings(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	m := readJSON(t, post(t, url+"/v1/completions", `{"prompt":"stop","max_tokens":300,"ignore_eos":true,"seed":4,"n":4,"stop":["e"]}`))
	for j := range 4 {
		text := field(m, "choices", j, "text").(string)
		if strings.Contains(text, "e") || field(m, "choices", j, "finish_reason") != "stop" || field(m, "choices", j, "stop_reason") != "e" {
			t.Errorf("choice %d: %v", j, field(m, "choices", j))
		}
	}
}

// n choices under response_format: each choice is constrained on its own
// and parses, whole and streamed.
func TestNChoicesStructuredOutput(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	const body = `{"prompt":"json","max_tokens":400,"n":3,"seed":1,"response_format":{"type":"json_object"}`
	m := readJSON(t, post(t, url+"/v1/completions", body+`}`))
	resp := post(t, url+"/v1/completions", body+`,"stream":true}`)
	evs := events(t, resp.Body)
	resp.Body.Close()
	texts, _, _ := streamedChoices(t, evs, false)
	for j := range 3 {
		txt := field(m, "choices", j, "text").(string)
		var v map[string]any
		if err := json.Unmarshal([]byte(txt), &v); err != nil || texts[j] != txt {
			t.Errorf("choice %d: %q (%v), streamed %q", j, txt, err, texts[j])
		}
	}
}
