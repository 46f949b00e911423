package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// A completions batch goes through both legs once per prompt, each with
// one prompt and its own engine id; the answers merge into one: choices
// renumbered prompt by prompt, usage summed; streamed, one usage chunk
// and one [DONE].
func TestBatchSplitsAndMerges(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	resp := r.post("/v1/completions", `{"prompt":["a","b","c"],"max_tokens":2,"n":1}`, "X-Request-Id", "batch-1")
	body := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var m struct {
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || len(m.Choices) != 3 {
		t.Fatalf("%s: %v", body, err)
	}
	for i, c := range m.Choices {
		if c.Index != i || c.Text != fakeText(2) {
			t.Errorf("choice %d: %+v", i, c)
		}
	}
	if !strings.Contains(body, `"prompt_tokens":36,"completion_tokens":6,"total_tokens":42`) {
		t.Errorf("usage not summed: %s", body)
	}
	prompts := map[string]bool{}
	for _, f := range []*fakeEngine{r.pre[0], r.dec[0]} {
		reqs := f.requests()
		if len(reqs) != 3 {
			t.Fatalf("%s got %d requests", f.role, len(reqs))
		}
		for _, q := range reqs {
			prompts[f.role+string(q.body.get("prompt"))] = true
			if !strings.HasPrefix(q.engineID, "batch-1") {
				t.Errorf("engine id %q", q.engineID)
			}
		}
	}
	if len(prompts) != 6 {
		t.Errorf("each leg should see each prompt once: %v", prompts)
	}

	resp = r.post("/v1/completions", `{"prompt":[[1],[2]],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`)
	evs := streamEvents(t, resp)
	if evs[len(evs)-1] != "[DONE]" || strings.Count(strings.Join(evs, "\n"), "[DONE]") != 1 {
		t.Fatalf("events %q", evs)
	}
	texts := map[float64]string{}
	usages := 0
	for _, e := range evs[:len(evs)-1] {
		var ch map[string]any
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatalf("%q: %v", e, err)
		}
		cs := ch["choices"].([]any)
		if len(cs) == 0 {
			usages++
			if u := ch["usage"].(map[string]any); u["completion_tokens"] != 6.0 || u["prompt_tokens"] != 24.0 {
				t.Errorf("usage chunk %v", u)
			}
			continue
		}
		c := cs[0].(map[string]any)
		texts[c["index"].(float64)] += c["text"].(string)
	}
	if usages != 1 || len(texts) != 2 || texts[0] != fakeText(3) || texts[1] != fakeText(3) {
		t.Errorf("usage chunks %d, texts %v", usages, texts)
	}
}

// When one prompt of a batch fails (here P refuses it), the client gets
// that error and the other prompts are aborted on both engines.
func TestBatchFailureAbortsTheRest(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	started := make(chan struct{}, 4)
	r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		started <- struct{}{}
		<-ctx.Done() // generates until aborted
		return true
	}
	r.pre[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		if string(req.body.get("prompt")) != `"bad"` {
			return false
		}
		<-started // the good prompt is decoding
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":{"message":"bad prompt","type":"invalid_request_error","param":"prompt","code":null}}`)
		return true
	}
	resp := r.post("/v1/completions", `{"prompt":["good","bad"],"max_tokens":2}`, "X-Request-Id", "b2")
	body := readAll(t, resp)
	if resp.StatusCode != 400 || !strings.Contains(body, "bad prompt") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	waitFor(t, "the good prompt's abort on D and P", func() bool {
		return r.dec[0].totalAborts() > 0 && r.pre[0].totalAborts() > 0
	})
}

func TestBatchPromptsBound(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	resp := r.post("/v1/completions", `{"prompt":[`+strings.Repeat(`"a",`, 256)+`"a"]}`)
	if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "at most 256") {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
	if n := len(r.pre[0].requests()); n != 0 {
		t.Errorf("P got %d requests", n)
	}
}

// A batch keeps at most maxBatchInFlight prompts in flight, and answers
// every prompt.
func TestBatchBoundsPromptsInFlight(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	var mu sync.Mutex
	inFlight, peak := 0, 0
	r.pre[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		r.pre[0].answerPrefill(w, req)
		return true
	}
	r.dec[0].hook = func(ctx context.Context, w http.ResponseWriter, req *fakeReq) bool {
		r.dec[0].answerDecode(ctx, w, req, 0)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return true
	}
	prompts := make([]string, 40)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("%q", fmt.Sprint("p", i))
	}
	resp := r.post("/v1/completions", `{"prompt":[`+strings.Join(prompts, ",")+`],"max_tokens":1}`)
	body := readAll(t, resp)
	if resp.StatusCode != 200 || strings.Count(body, `"index":`) != 40 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if peak > maxBatchInFlight || peak == 0 {
		t.Errorf("%d prompts in flight at once, want at most %d", peak, maxBatchInFlight)
	}
}
