package httpapi

import (
	"encoding/json"
	"fmt"

	"math"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/engine"
)

// completionLogprobs is the completions shape of logprobs.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// The synthetic model's raw distribution: ' ' is its most probable token
// (weight 17000 of the 99866 of its 34 bytes, times 1 − 1/96 for EOS),
// then 'e'.
var spaceLogprob = math.Log((1 - 1.0/96) * 17000 / 99866)

// Completions' logprobs: one entry per generated token, whose texts make
// the text, with the model's log-probability (the same at any
// temperature: the raw distribution), the top tokens (plus the sampled
// one) and the offsets; streamed, the same entries chunk by chunk.
func TestCompletionLogprobs(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	const params = `"prompt":"Log my probs","max_tokens":16,"seed":4,"ignore_eos":true,"logprobs":2`
	var first completionLogprobs
	for i, temp := range []string{"1", "0.3"} {
		m := readJSON(t, post(t, url+"/v1/completions", `{`+params+`,"temperature":`+temp+`}`))
		raw, _ := json.Marshal(field(m, "choices", 0, "logprobs"))
		var lp completionLogprobs
		if err := json.Unmarshal(raw, &lp); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		text := field(m, "choices", 0, "text").(string)
		if len(lp.Tokens) != 16 || strings.Join(lp.Tokens, "") != text {
			t.Fatalf("tokens %q, text %q", lp.Tokens, text)
		}
		off := 0
		for k, tok := range lp.Tokens {
			if lp.TextOffset[k] != off {
				t.Errorf("text_offset[%d] = %d, want %d", k, lp.TextOffset[k], off)
			}
			off += len(tok)
			top := lp.TopLogprobs[k]
			if len(top) < 2 || len(top) > 3 || math.Abs(top[" "]-spaceLogprob) > 1e-6 {
				t.Errorf("top_logprobs[%d] = %v, want ' ' at %v and the sampled token", k, top, spaceLogprob)
			}
			if got, ok := top[tok]; !ok || lp.TokenLogprobs[k] == nil || math.Abs(got-*lp.TokenLogprobs[k]) > 1e-9 {
				t.Errorf("token %d %q: logprob %v not in its top %v", k, tok, lp.TokenLogprobs[k], top)
			}
			if tok == " " && math.Abs(*lp.TokenLogprobs[k]-spaceLogprob) > 1e-6 {
				t.Errorf("' ' has logprob %v, want %v", *lp.TokenLogprobs[k], spaceLogprob)
			}
		}
		if i == 0 {
			first = lp
			continue
		}
		// The logprobs of a token are the model's, not the temperature's.
		for k, tok := range lp.Tokens {
			for j, t0 := range first.Tokens {
				if t0 == tok && math.Abs(*first.TokenLogprobs[j]-*lp.TokenLogprobs[k]) > 1e-9 {
					t.Errorf("%q: logprob %v at temperature 1, %v at 0.3", tok, *first.TokenLogprobs[j], *lp.TokenLogprobs[k])
				}
			}
		}
	}

	// Streamed: the chunks' entries add up to the whole answer's.
	whole := readJSON(t, post(t, url+"/v1/completions", `{`+params+`,"stop":["zzz"]}`))
	resp := post(t, url+"/v1/completions", `{`+params+`,"stop":["zzz"],"stream":true}`)
	evs := events(t, resp.Body)
	resp.Body.Close()
	var got completionLogprobs
	for _, e := range evs[:len(evs)-1] {
		var ch map[string]any
		json.Unmarshal([]byte(e), &ch)
		raw, _ := json.Marshal(field(ch, "choices", 0, "logprobs"))
		var lp completionLogprobs
		json.Unmarshal(raw, &lp)
		got.Tokens = append(got.Tokens, lp.Tokens...)
		got.TextOffset = append(got.TextOffset, lp.TextOffset...)
	}
	raw, _ := json.Marshal(field(whole, "choices", 0, "logprobs"))
	var want completionLogprobs
	json.Unmarshal(raw, &want)
	if strings.Join(got.Tokens, "|") != strings.Join(want.Tokens, "|") || len(got.TextOffset) != 16 || got.TextOffset[15] != want.TextOffset[15] {
		t.Errorf("streamed tokens %q offsets %v, whole %q %v", got.Tokens, got.TextOffset, want.Tokens, want.TextOffset)
	}

	// logprobs 0: the sampled token alone; without logprobs: null.
	m := readJSON(t, post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":3,"ignore_eos":true,"logprobs":0}`))
	if top := field(m, "choices", 0, "logprobs", "top_logprobs", 0).(map[string]any); len(top) != 1 {
		t.Errorf("logprobs 0: top %v", top)
	}
	m = readJSON(t, post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":3}`))
	if lp, ok := field(m, "choices", 0).(map[string]any)["logprobs"]; !ok || lp != nil {
		t.Errorf("no logprobs asked: %v", lp)
	}
}

// Chat's logprobs: content entries with token, logprob, bytes and exactly
// top_logprobs alternatives; n choices each have their own.
func TestChatLogprobs(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	m := readJSON(t, post(t, url+"/v1/chat/completions",
		`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"ignore_eos":true,"seed":2,"logprobs":true,"top_logprobs":3,"n":2}`))
	for j := range 2 {
		content, _ := field(m, "choices", j, "logprobs", "content").([]any)
		if len(content) != 6 {
			t.Fatalf("choice %d: content %v", j, field(m, "choices", j, "logprobs"))
		}
		var text strings.Builder
		for _, c := range content {
			tok := field(c, "token").(string)
			text.WriteString(tok)
			bs := field(c, "bytes").([]any)
			if len(bs) != len(tok) || (len(bs) == 1 && bs[0] != float64(tok[0])) {
				t.Errorf("token %q bytes %v", tok, bs)
			}
			top := field(c, "top_logprobs").([]any)
			if len(top) != 3 || field(top[0], "token") != " " || math.Abs(field(top[0], "logprob").(float64)-spaceLogprob) > 1e-6 {
				t.Errorf("top_logprobs %v", top)
			}
		}
		if text.String() != field(m, "choices", j, "message", "content") {
			t.Errorf("choice %d: tokens %q, content %q", j, text.String(), field(m, "choices", j, "message", "content"))
		}
	}
}

// echo puts the prompt before the text; with logprobs the prompt's tokens
// come first (the first without a logprob, as vLLM), scored by the model
// even when the prompt is cached, with offsets over prompt and text;
// streamed, the first chunk carries them.
func TestEcho(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	const prompt = "Echo this prompt, which fills more than one block."
	const params = `"max_tokens":5,"seed":8,"ignore_eos":true`
	plain := completionText(t, url, `{"prompt":"`+prompt+`",`+params+`}`)
	if got := completionText(t, url, `{"prompt":"`+prompt+`",`+params+`,"echo":true}`); got != prompt+plain {
		t.Errorf("echo: %q, want %q", got, prompt+plain)
	}
	for _, stream := range []bool{false, true} {
		body := `{"prompt":"` + prompt + `",` + params + `,"echo":true,"logprobs":1}`
		var lp completionLogprobs
		var text string
		if !stream {
			m := readJSON(t, post(t, url+"/v1/completions", body))
			raw, _ := json.Marshal(field(m, "choices", 0, "logprobs"))
			json.Unmarshal(raw, &lp)
			text = field(m, "choices", 0, "text").(string)
		} else {
			resp := post(t, url+"/v1/completions", strings.Replace(body, "{", `{"stream":true,`, 1))
			evs := events(t, resp.Body)
			resp.Body.Close()
			for _, e := range evs[:len(evs)-1] {
				var ch map[string]any
				json.Unmarshal([]byte(e), &ch)
				text += field(ch, "choices", 0, "text").(string)
				raw, _ := json.Marshal(field(ch, "choices", 0, "logprobs"))
				var part completionLogprobs
				json.Unmarshal(raw, &part)
				lp.Tokens = append(lp.Tokens, part.Tokens...)
				lp.TokenLogprobs = append(lp.TokenLogprobs, part.TokenLogprobs...)
				lp.TopLogprobs = append(lp.TopLogprobs, part.TopLogprobs...)
				lp.TextOffset = append(lp.TextOffset, part.TextOffset...)
			}
		}
		if text != prompt+plain || strings.Join(lp.Tokens, "") != text || len(lp.Tokens) != len(prompt)+5 {
			t.Fatalf("stream %v: text %q, tokens %q", stream, text, lp.Tokens)
		}
		if lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
			t.Errorf("the first prompt token has logprob %v top %v, want null", lp.TokenLogprobs[0], lp.TopLogprobs[0])
		}
		for k := 1; k < len(lp.Tokens); k++ {
			if lp.TextOffset[k] != k || lp.TokenLogprobs[k] == nil {
				t.Fatalf("entry %d: offset %d logprob %v", k, lp.TextOffset[k], lp.TokenLogprobs[k])
			}
			want := -9999.0 // a byte the synthetic model never produces
			if tok := lp.Tokens[k]; strings.Contains("etaoinshrdlcumwfgypb,.vk\n'-jx?!qz ", tok) {
				want = *lp.TokenLogprobs[k] // checked below for ' '
			}
			if lp.Tokens[k] == " " {
				want = spaceLogprob
			}
			if math.Abs(*lp.TokenLogprobs[k]-want) > 1e-5 {
				t.Errorf("stream %v: token %d %q logprob %v, want %v", stream, k, lp.Tokens[k], *lp.TokenLogprobs[k], want)
			}
		}
	}
}

// A decode engine refuses echo with logprobs on a remote prefix: the
// prompt's tokens would have no scores.
func TestEchoLogprobsRefusesARemotePrefix(t *testing.T) {
	eng := &recordingEngine{Node: newNode(t, nodeOpts{role: engine.RoleDecode}), refuseRemote: true}
	_, url := newServer(t, eng, nil)
	resp := post(t, url+"/v1/completions", decodeBody(`,"echo":true,"logprobs":1`))
	m := readJSON(t, resp)
	if resp.StatusCode != 400 || field(m, "error", "param") != "echo" {
		t.Errorf("status %d: %v", resp.StatusCode, m)
	}
	if len(eng.takeRejected()) == 0 {
		t.Error("P was not told")
	}
}

// vLLM's prompt_logprobs: per prompt token null (the first) or an object
// from token ids to logprob, rank and decoded token, holding the prompt
// token and the top ones; on completions per choice, on chat for the
// response; not with stream; a decode engine refuses them with a remote
// prefix.
func TestPromptLogprobs(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	const prompt = "score a prompt"
	m := readJSON(t, post(t, url+"/v1/completions", `{"prompt":"`+prompt+`","max_tokens":2,"prompt_logprobs":2}`))
	plp, _ := field(m, "choices", 0, "prompt_logprobs").([]any)
	if len(plp) != len(prompt) || plp[0] != nil {
		t.Fatalf("prompt_logprobs %v", field(m, "choices", 0))
	}
	for k := 1; k < len(prompt); k++ {
		entry := plp[k].(map[string]any)
		tok := fmt.Sprint(int(prompt[k]))
		own, ok := entry[tok].(map[string]any)
		if !ok || own["decoded_token"] != string(prompt[k]) {
			t.Fatalf("entry %d %v lacks the prompt token %s", k, entry, tok)
		}
		top := entry["32"].(map[string]any) // ' ', the most probable
		if top["rank"] != 1.0 || math.Abs(top["logprob"].(float64)-spaceLogprob) > 1e-6 {
			t.Errorf("entry %d: ' ' is %v", k, top)
		}
		if n := len(entry); n != 2 && n != 3 {
			t.Errorf("entry %d has %d tokens, want the prompt token and the top 2", k, n)
		}
		if prompt[k] == ' ' && own["rank"] != 1.0 || prompt[k] == 'o' && own["rank"] != 5.0 {
			t.Errorf("entry %d: %q ranks %v", k, prompt[k], own["rank"])
		}
	}
	if m := readJSON(t, post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":2}`)); strings.Contains(fmt.Sprint(m), "prompt_logprobs") {
		t.Errorf("prompt_logprobs without asking: %v", m)
	}
	m = readJSON(t, post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"prompt_logprobs":0,"n":2}`))
	if plp, _ := field(m, "prompt_logprobs").([]any); len(plp) < 5 || plp[0] != nil || len(plp[3].(map[string]any)) != 1 {
		t.Errorf("chat prompt_logprobs %v", field(m, "prompt_logprobs"))
	}
	resp := post(t, url+"/v1/completions", `{"prompt":"x","stream":true,"prompt_logprobs":1}`)
	if m := readJSON(t, resp); resp.StatusCode != 400 || field(m, "error", "param") != "prompt_logprobs" {
		t.Errorf("stream: %d %v", resp.StatusCode, m)
	}
	eng := &recordingEngine{Node: newNode(t, nodeOpts{role: engine.RoleDecode}), refuseRemote: true}
	_, durl := newServer(t, eng, nil)
	resp = post(t, durl+"/v1/completions", decodeBody(`,"prompt_logprobs":1`))
	if m := readJSON(t, resp); resp.StatusCode != 400 || field(m, "error", "param") != "prompt_logprobs" || len(eng.takeRejected()) == 0 {
		t.Errorf("decode with a remote prefix: %d %v", resp.StatusCode, m)
	}
}

// return_token_ids adds the prompt's and the generated token ids (the
// byte tokenizer's: the bytes), whole and streamed chunk by chunk;
// return_tokens_as_token_ids writes logprobs' tokens as "token_id:<id>".
func TestReturnTokenIDs(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	ids := func(v any) string {
		var b strings.Builder
		for _, x := range v.([]any) {
			b.WriteByte(byte(x.(float64)))
		}
		return b.String()
	}
	const body = `{"prompt":"ids","max_tokens":6,"seed":2,"ignore_eos":true,"return_token_ids":true`
	m := readJSON(t, post(t, url+"/v1/completions", body+`}`))
	text := field(m, "choices", 0, "text").(string)
	if got := ids(field(m, "choices", 0, "token_ids")); got != text || ids(field(m, "choices", 0, "prompt_token_ids")) != "ids" {
		t.Errorf("token_ids %q for %q, prompt_token_ids %v", got, text, field(m, "choices", 0, "prompt_token_ids"))
	}
	resp := post(t, url+"/v1/completions", body+`,"stream":true}`)
	evs := events(t, resp.Body)
	resp.Body.Close()
	var streamed, prompt strings.Builder
	for _, e := range evs[:len(evs)-1] {
		var ch map[string]any
		json.Unmarshal([]byte(e), &ch)
		streamed.WriteString(ids(field(ch, "choices", 0, "token_ids")))
		if p := field(ch, "choices", 0, "prompt_token_ids"); p != nil {
			prompt.WriteString(ids(p))
		}
	}
	if streamed.String() != text || prompt.String() != "ids" {
		t.Errorf("streamed token_ids %q, prompt %q; want %q, %q", streamed.String(), prompt.String(), text, "ids")
	}
	m = readJSON(t, post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"ignore_eos":true,"return_token_ids":true,"logprobs":true,"return_tokens_as_token_ids":true}`))
	content := field(m, "choices", 0, "message", "content").(string)
	if got := ids(field(m, "choices", 0, "token_ids")); got != content || len(field(m, "prompt_token_ids").([]any)) < 5 {
		t.Errorf("chat token_ids %q for %q, prompt_token_ids %v", got, content, field(m, "prompt_token_ids"))
	}
	if tok := field(m, "choices", 0, "logprobs", "content", 0, "token"); tok != fmt.Sprintf("token_id:%d", content[0]) {
		t.Errorf("token as id: %v", tok)
	}
	if m := readJSON(t, post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":2}`)); strings.Contains(fmt.Sprint(m), "token_ids") {
		t.Errorf("token ids without asking: %v", m)
	}
}

// max_tokens 0 with echo is the prompt alone (vLLM's scoring request):
// its text, with logprobs its tokens' scores, no generated token, usage
// completion_tokens 0, finish_reason length; without echo it is a 400.
func TestEchoMaxTokensZero(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{}), nil)
	const prompt = "score only this"
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":0,"echo":true,"logprobs":1,"stream":%v,"stream_options":%s}`, prompt, stream,
			map[bool]string{false: "null", true: `{"include_usage":true}`}[stream])
		var text, finish string
		var toks []any
		var usage any
		resp := post(t, url+"/v1/completions", body)
		if !stream {
			m := readJSON(t, resp)
			text, _ = field(m, "choices", 0, "text").(string)
			finish, _ = field(m, "choices", 0, "finish_reason").(string)
			toks, _ = field(m, "choices", 0, "logprobs", "tokens").([]any)
			usage = field(m, "usage", "completion_tokens")
		} else {
			evs := events(t, resp.Body)
			resp.Body.Close()
			for _, e := range evs[:len(evs)-1] {
				var ch map[string]any
				json.Unmarshal([]byte(e), &ch)
				if len(field(ch, "choices").([]any)) == 0 {
					usage = field(ch, "usage", "completion_tokens")
					continue
				}
				text += field(ch, "choices", 0, "text").(string)
				if f, ok := field(ch, "choices", 0, "finish_reason").(string); ok {
					finish = f
				}
				t2, _ := field(ch, "choices", 0, "logprobs", "tokens").([]any)
				toks = append(toks, t2...)
			}
		}
		if text != prompt || finish != "length" || len(toks) != len(prompt) || usage != 0.0 {
			t.Errorf("stream %v: text %q finish %q %d tokens usage %v", stream, text, finish, len(toks), usage)
		}
	}
	resp := post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":0}`)
	if m := readJSON(t, resp); resp.StatusCode != 400 || field(m, "error", "param") != "max_tokens" {
		t.Errorf("max_tokens 0 without echo: %d %v", resp.StatusCode, m)
	}
}
