package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/engine"
)

// FuzzGenerate sends arbitrary bodies to both generation endpoints of a
// decode engine (the role with the most paths; requests that would pull a
// remote prefix from an arbitrary address are refused as queue full): the
// server never panics, answers with a status it documents, and an error
// in OpenAI's shape.
func FuzzGenerate(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","max_tokens":3}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":[1,2,3],"stop":["a","b"],"max_tokens":8,"ignore_eos":true}`,
		`{"prompt":"x","kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"p","remote_request_id":"r","remote_host":"127.0.0.1","remote_port":1,"remote_block_ids":[1],"lease_token":"00112233445566778899aabbccddeeff","lease_id":"00000000000000ab"}}`,
		`{"prompt":"x","max_tokens":"many"}`,
		`{"model":"nope","prompt":"x"}`,
		`{"prompt":["ab","c"],"n":2,"max_tokens":4,"echo":true,"logprobs":2,"stream":true}`,
		`{"prompt":[[1,2],[3]],"max_tokens":0,"echo":true,"logprobs":1,"prompt_logprobs":2,"return_token_ids":true}`,
		`{"messages":[{"role":"user","content":"hi"}],"n":3,"logprobs":true,"top_logprobs":2,"logit_bias":{"101":5},"presence_penalty":1,"bad_words":["e"],"allowed_token_ids":[32,101]}`,
		`[`, `null`, ``,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	eng := &recordingEngine{Node: newNode(f, nodeOpts{role: engine.RoleDecode, maxLen: 256}), refuseRemote: true}
	s, _ := newServer(f, eng, func(c *Config) { c.MaxBodyBytes = 1 << 16 })
	ok := map[int]bool{200: true, 400: true, 404: true, 413: true, 429: true, 500: true, 503: true}
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		eng.takeRejected() // bounded memory over a long run
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
		if !ok[w.Code] {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body.String())
		}
		if w.Code != 200 && !strings.HasPrefix(w.Body.String(), `{"error":{`) {
			t.Fatalf("error body %q", w.Body.String())
		}
	})
}
