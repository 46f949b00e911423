package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/chat"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/sched"
)

func TestCompletion(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	body := `{"model":"` + testModel + `","prompt":"Hello, world","max_tokens":12,"seed":42,"temperature":0.8,"ignore_eos":true}`
	resp := post(t, url+"/v1/completions", body, "X-Request-Id", "req-1")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := resp.Header.Get("X-Request-Id"); got != "req-1" {
		t.Errorf("X-Request-Id %q, want req-1", got)
	}
	var r openai.CompletionResponse
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if r.ID != "cmpl-req-1" || r.Object != "text_completion" || r.Model != testModel || len(r.Choices) != 1 {
		t.Fatalf("response %s", b)
	}
	c := r.Choices[0]
	if c.FinishReason != openai.FinishLength || !c.StopReason.IsNull() {
		t.Errorf("finish %q stop %v, want length/null", c.FinishReason, c.StopReason)
	}
	if r.Usage.PromptTokens != len("Hello, world") || r.Usage.CompletionTokens != 12 || r.Usage.TotalTokens != 12+12 {
		t.Errorf("usage %+v", r.Usage)
	}
	if c.Text == "" || len(c.Text) > 12*3 { // at most 12 bytes, each maybe U+FFFD
		t.Errorf("text %q", c.Text)
	}
	if !strings.Contains(string(b), `"prompt_tokens_details":{"cached_tokens":0}`) {
		t.Errorf("no cached_tokens in %s", b)
	}

	// Same seed, same output; the prompt's blocks are now cached.
	resp = post(t, url+"/v1/completions", body)
	var r2 openai.CompletionResponse
	json.NewDecoder(resp.Body).Decode(&r2)
	resp.Body.Close()
	if r2.Choices[0].Text != c.Text {
		t.Errorf("same seed gave %q then %q", c.Text, r2.Choices[0].Text)
	}
	if r2.ID == "cmpl-req-1" || !strings.HasPrefix(r2.ID, "cmpl-") {
		t.Errorf("generated id %q", r2.ID)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on a request without one")
	}
}

func TestPrefixCacheShowsInUsage(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	prompt := strings.Repeat("abcdefgh", 8) // 64 tokens: 4 full blocks
	body := `{"prompt":"` + prompt + `","max_tokens":2,"ignore_eos":true}`
	readJSON(t, post(t, url+"/v1/completions", body))
	m := readJSON(t, post(t, url+"/v1/completions", body))
	cached := field(m, "usage", "prompt_tokens_details", "cached_tokens").(float64)
	if cached < 48 {
		t.Errorf("cached_tokens %v on a repeated 64-token prompt, want at least 48", cached)
	}
}

func TestChatCompletion(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	body := `{"model":"` + testModel + `","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Hi"}],"max_completion_tokens":5,"max_tokens":100,"ignore_eos":true,"seed":1}`
	m := readJSON(t, post(t, url+"/v1/chat/completions", body))
	if field(m, "object") != "chat.completion" || field(m, "choices", 0, "message", "role") != "assistant" {
		t.Fatalf("response %v", m)
	}
	if got := field(m, "usage", "completion_tokens"); got != 5.0 {
		t.Errorf("completion_tokens %v, want 5 (max_completion_tokens wins)", got)
	}
	want := len(chat.RenderFixed(&chat.Conversation{Messages: []openai.ChatMessage{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "Hi"}}, AddGenerationPrompt: true}))
	if got := field(m, "usage", "prompt_tokens"); got != float64(want) {
		t.Errorf("prompt_tokens %v, want %d (the template's bytes)", got, want)
	}
}

// A streamed completion has the same text as a whole one with the same
// seed, ends with a usage chunk and [DONE].
func TestStreamingMatchesWhole(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	const params = `"prompt":"Stream me","max_tokens":40,"seed":9,"temperature":1,"ignore_eos":true`
	whole := readJSON(t, post(t, url+"/v1/completions", `{`+params+`}`))
	resp := post(t, url+"/v1/completions", `{`+params+`,"stream":true,"stream_options":{"include_usage":true}}`, "X-Request-Id", "s1")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	evs := events(t, resp.Body)
	resp.Body.Close()
	if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("events %q", evs)
	}
	var text strings.Builder
	var finish any
	for i, e := range evs[:len(evs)-2] {
		var ch map[string]any
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatalf("event %d %q: %v", i, e, err)
		}
		if field(ch, "id") != "cmpl-s1" || field(ch, "usage") != nil {
			t.Errorf("chunk %v", ch)
		}
		text.WriteString(field(ch, "choices", 0, "text").(string))
		finish = field(ch, "choices", 0, "finish_reason")
	}
	if finish != "length" {
		t.Errorf("last finish_reason %v", finish)
	}
	if want := field(whole, "choices", 0, "text"); text.String() != want {
		t.Errorf("streamed %q, whole %q", text.String(), want)
	}
	var u map[string]any
	json.Unmarshal([]byte(evs[len(evs)-2]), &u)
	if n := len(field(u, "choices").([]any)); n != 0 || field(u, "usage", "completion_tokens") != 40.0 {
		t.Errorf("usage chunk %v", u)
	}
}

func TestStreamingChat(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	resp := post(t, url+"/v1/chat/completions",
		`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`)
	evs := events(t, resp.Body)
	resp.Body.Close()
	var first map[string]any
	json.Unmarshal([]byte(evs[0]), &first)
	if field(first, "object") != "chat.completion.chunk" || field(first, "choices", 0, "delta", "role") != "assistant" {
		t.Errorf("first chunk %s", evs[0])
	}
	var last map[string]any
	json.Unmarshal([]byte(evs[len(evs)-3]), &last)
	if field(last, "choices", 0, "finish_reason") != "length" || field(last, "usage", "completion_tokens") != 8.0 {
		t.Errorf("last chunk %s", evs[len(evs)-3])
	}
}

// Stop strings end the text before the stop string, say which matched,
// and free the request in the engine.
func TestStopString(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	const params = `"prompt":"The quick brown fox","max_tokens":64,"temperature":0,"ignore_eos":true`
	full := field(readJSON(t, post(t, url+"/v1/completions", `{`+params+`}`)), "choices", 0, "text").(string)
	// Pick a stop string of valid UTF-8 from the middle of the output.
	var stop string
	for i := 10; i+2 <= len(full); i++ {
		if s := full[i : i+2]; strings.ToValidUTF8(s, "") == s && !strings.Contains(full[:i+1], s) {
			stop = s
			break
		}
	}
	if stop == "" {
		t.Skipf("no usable stop string in %q", full)
	}
	want := full[:strings.Index(full, stop)]
	stopJSON, _ := json.Marshal(stop)
	for _, stream := range []bool{false, true} {
		body := `{` + params + `,"stop":["zzzz",` + string(stopJSON) + `]`
		if stream {
			resp := post(t, url+"/v1/completions", body+`,"stream":true}`)
			evs := events(t, resp.Body)
			resp.Body.Close()
			var text strings.Builder
			var last map[string]any
			for _, e := range evs[:len(evs)-1] {
				json.Unmarshal([]byte(e), &last)
				text.WriteString(field(last, "choices", 0, "text").(string))
			}
			if text.String() != want || field(last, "choices", 0, "finish_reason") != "stop" || field(last, "choices", 0, "stop_reason") != stop {
				t.Errorf("stream: text %q (want %q), last chunk %v", text.String(), want, last)
			}
			continue
		}
		m := readJSON(t, post(t, url+"/v1/completions", body+`}`))
		if got := field(m, "choices", 0, "text"); got != want {
			t.Errorf("text %q, want %q", got, want)
		}
		if field(m, "choices", 0, "finish_reason") != "stop" || field(m, "choices", 0, "stop_reason") != stop {
			t.Errorf("choice %v", field(m, "choices", 0))
		}
		// completion_tokens counts up to the token completing the stop:
		// the fewest tokens whose text holds it. (Bytes of invalid UTF-8
		// show as U+FFFD, so text length is no token count.)
		k := 1
		for ; k < 64; k++ {
			m := readJSON(t, post(t, url+"/v1/completions", `{`+strings.Replace(params, "64", itoa(k), 1)+`}`))
			if strings.Contains(field(m, "choices", 0, "text").(string), stop) {
				break
			}
		}
		if got := field(m, "usage", "completion_tokens"); got != float64(k) {
			t.Errorf("completion_tokens %v, want %d", got, k)
		}
	}
	waitFor(t, "the stopped requests to be freed", func() bool { s := n.Stats(); return s.Requests == 0 && s.Pool.Held == 0 })
	// A stop string is a success, not an abort, in the engine's counters
	// (vllm:request_success_total{finished_reason}).
	if st := n.Stats(); st.Finished[sched.FinishedAborted] != 0 {
		t.Errorf("stop strings counted as aborts: %v", st.Finished)
	}
}

// A stop token id ends generation with stop_reason the id, and its text
// is left out.
func TestStopTokenID(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	const params = `"prompt":"Tokens","max_tokens":64,"temperature":0,"ignore_eos":true`
	full := field(readJSON(t, post(t, url+"/v1/completions", `{`+params+`}`)), "choices", 0, "text").(string)
	tok := full[5]
	m := readJSON(t, post(t, url+"/v1/completions", `{`+params+`,"stop_token_ids":[`+itoa(int(tok))+`]}`))
	want := full[:strings.IndexByte(full, tok)]
	if field(m, "choices", 0, "text") != want || field(m, "choices", 0, "stop_reason") != float64(tok) {
		t.Errorf("choice %v, want text %q stop_reason %d", field(m, "choices", 0), want, tok)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestModelsHealthVersion(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	code, body := get(t, url+"/v1/models")
	var ml openai.ModelList
	if err := json.Unmarshal([]byte(body), &ml); err != nil || code != 200 || len(ml.Data) != 1 ||
		ml.Data[0].ID != testModel || ml.Data[0].MaxModelLen != 2048 || ml.Object != "list" {
		t.Errorf("models %d %s", code, body)
	}
	if code, _ := get(t, url+"/health"); code != 200 {
		t.Errorf("health %d", code)
	}
	if code, body := get(t, url+"/version"); code != 200 || body != `{"version":"test"}` {
		t.Errorf("version %d %s", code, body)
	}
	code, body = get(t, url+"/metrics")
	if code != 200 {
		t.Errorf("metrics %d", code)
	}
	for _, want := range []string{`vllm:num_requests_running{model_name="kvlease-test"}`, `kvlease_kv_blocks{model_name="kvlease-test",state="held"} 0`,
		`kvlease_leases_active{model_name="kvlease-test"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	n.Drain()
	if code, body := get(t, url+"/health"); code != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("health while draining: %d %s", code, body)
	}
}

// A streaming client that disconnects mid-generation aborts its request:
// its blocks go back to the pool.
func TestStreamingDisconnectAborts(t *testing.T) {
	n := newNode(t, nodeOpts{profile: "slow"})
	_, url := newServer(t, n, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions",
		strings.NewReader(`{"prompt":"long one","max_tokens":1900,"ignore_eos":true,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	if s := n.Stats(); s.Pool.Held == 0 || s.Requests != 1 {
		t.Fatalf("mid-stream: held %d, requests %d", s.Pool.Held, s.Requests)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the aborted request's blocks", func() bool { s := n.Stats(); return s.Pool.Held == 0 && s.Requests == 0 })
	if got := n.Stats().Finished[sched.FinishedAborted]; got != 1 {
		t.Errorf("aborted count %d", got)
	}
}

// A non-streaming client that leaves while its request runs aborts it too.
func TestWholeDisconnectAborts(t *testing.T) {
	n := newNode(t, nodeOpts{profile: "slow"})
	_, url := newServer(t, n, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions",
			strings.NewReader(`{"prompt":"long one","max_tokens":1900,"ignore_eos":true}`))
		_, err := http.DefaultClient.Do(req)
		done <- err
	}()
	waitFor(t, "the request to run", func() bool { return n.Stats().Requests == 1 })
	cancel()
	<-done
	waitFor(t, "the aborted request's blocks", func() bool { s := n.Stats(); return s.Pool.Held == 0 && s.Requests == 0 })
}

func TestAbortEndpoint(t *testing.T) {
	n := newNode(t, nodeOpts{profile: "slow"})
	_, url := newServer(t, n, nil)
	resp := post(t, url+"/kvlease/v1/requests/nobody/abort", "")
	if m := readJSON(t, resp); resp.StatusCode != 404 || field(m, "error", "param") != "id" {
		t.Errorf("unknown id: %d %v", resp.StatusCode, m)
	}
	stream := post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":1900,"ignore_eos":true,"stream":true}`, "X-Request-Id", "victim:1")
	br := bufio.NewReader(stream.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp = post(t, url+"/kvlease/v1/requests/victim:1/abort", "")
	if m := readJSON(t, resp); resp.StatusCode != 200 || field(m, "result") != "aborted" || field(m, "id") != "victim:1" {
		t.Errorf("abort: %d %v", resp.StatusCode, m)
	}
	evs := events(t, br)
	stream.Body.Close()
	var last map[string]any
	json.Unmarshal([]byte(evs[len(evs)-2]), &last)
	if evs[len(evs)-1] != "[DONE]" || field(last, "choices", 0, "finish_reason") != "abort" {
		t.Errorf("stream after abort ends with %q", evs[len(evs)-2:])
	}
	resp = post(t, url+"/kvlease/v1/requests/victim:1/abort", "")
	if m := readJSON(t, resp); resp.StatusCode != 200 || field(m, "result") != "already_finished" {
		t.Errorf("second abort: %d %v", resp.StatusCode, m)
	}
	// The id from X-Request-Id when the path segment is empty.
	resp = post(t, url+"/kvlease/v1/requests//abort", "", "X-Request-Id", "victim:1")
	if m := readJSON(t, resp); resp.StatusCode != 200 || field(m, "result") != "already_finished" {
		t.Errorf("abort by header: %d %v", resp.StatusCode, m)
	}
	// Torn down when the step that ran it completes.
	waitFor(t, "the aborted request's blocks", func() bool { return n.Stats().Pool.Held == 0 })
}

// The engine's result of Submit decides the error; unknown values are
// internal errors, never a panic.
func TestRefusalsMapToStatuses(t *testing.T) {
	for _, tc := range []struct {
		res    engine.AddResult
		status int
		retry  string
	}{
		{engine.RejectedQueueFull, 429, "1"},
		{engine.RejectedShuttingDown, 503, ""},
		{engine.RejectedDuplicate, 400, ""},
		{engine.RejectedTooLong, 400, ""},
		{engine.RejectedInvalid, 400, ""},
		{engine.AddResult(99), 500, ""},
	} {
		eng := &recordingEngine{Node: newNode(t, nodeOpts{}), refuse: tc.res}
		_, url := newServer(t, eng, nil)
		resp := post(t, url+"/v1/completions", `{"prompt":"hi","max_tokens":2}`, "X-Request-Id", "r")
		m := readJSON(t, resp)
		if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != tc.retry || field(m, "error", "message") == "" {
			t.Errorf("%v: %d Retry-After %q %v", tc.res, resp.StatusCode, resp.Header.Get("Retry-After"), m)
		}
		if resp.Header.Get("X-Request-Id") != "r" {
			t.Errorf("%v: no X-Request-Id on the error", tc.res)
		}
	}
}

// Stop strings count only from the min_tokens-th token on, as in vLLM: an
// occurrence that ends earlier is part of the text.
func TestStopStringWaitsForMinTokens(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	const params = `"prompt":"The quick brown fox","max_tokens":64,"temperature":0,"ignore_eos":true`
	full := field(readJSON(t, post(t, url+"/v1/completions", `{`+params+`}`)), "choices", 0, "text").(string)
	// An ASCII byte that occurs twice, with only ASCII before its second
	// occurrence (so byte offsets are token offsets).
	first, second := -1, -1
	for i := 0; i < len(full) && second < 0; i++ {
		c := full[i]
		if c >= 0x80 {
			break
		}
		if j := strings.IndexByte(full[i+1:], c); j >= 0 && c > ' ' && strings.ToValidUTF8(full[:i+1+j+1], "") == full[:i+1+j+1] && !strings.ContainsFunc(full[:i+1+j+1], func(r rune) bool { return r >= 0x80 }) {
			first, second = i, i+1+j
		}
	}
	if second < 0 {
		t.Skipf("no repeated ASCII byte in %q", full)
	}
	stopJSON, _ := json.Marshal(full[first : first+1])
	body := `{` + params + `,"stop":[` + string(stopJSON) + `]`
	if m := readJSON(t, post(t, url+"/v1/completions", body+`}`)); field(m, "choices", 0, "text") != full[:first] {
		t.Fatalf("without min_tokens: text %q, want %q", field(m, "choices", 0, "text"), full[:first])
	}
	m := readJSON(t, post(t, url+"/v1/completions", body+`,"min_tokens":`+itoa(first+2)+`}`))
	if got := field(m, "choices", 0, "text"); got != full[:second] {
		t.Errorf("min_tokens %d: text %q, want %q (the first %q is before min_tokens)", first+2, got, full[:second], full[first:first+1])
	}
	if field(m, "choices", 0, "finish_reason") != "stop" {
		t.Errorf("finish_reason %v", field(m, "choices", 0, "finish_reason"))
	}
}
