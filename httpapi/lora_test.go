package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/openai"
)

// writeAdapter makes a PEFT-style adapter directory: adapter_config.json
// with config, and weights as adapter_model.safetensors unless nil.
func writeAdapter(t testing.TB, config string, weights []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if weights != nil {
		if err := os.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), weights, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const peftConfig = `{"peft_type":"LORA","r":8,"lora_alpha":16,"target_modules":["q_proj","v_proj"],"base_model_name_or_path":"x"}`

// complete returns the greedy text of model for a fixed prompt, and the
// response's model.
func complete(t *testing.T, url, model string) (string, string) {
	t.Helper()
	resp := post(t, url+"/v1/completions", `{"model":"`+model+`","prompt":"The adapter says","max_tokens":12,"temperature":0,"ignore_eos":true}`)
	m := readJSON(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("model %s: %d %v", model, resp.StatusCode, m)
	}
	return field(m, "choices", 0, "text").(string), field(m, "model").(string)
}

func loraPost(t *testing.T, url, path, body string) (int, string) {
	t.Helper()
	resp := post(t, url+path, body)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestLoRAServing: an adapter given at start (--lora-modules) and one
// loaded at run time are served by name: each answers differently from the
// base model and from the other, the same every time, and the response
// names the adapter; /v1/models lists them with the base model as parent
// and their path as root; vllm:lora_requests_info exports max_lora; an
// unloaded adapter is an unknown model again.
func TestLoRAServing(t *testing.T) {
	sqlDir := writeAdapter(t, peftConfig, []byte("sql weights"))
	chatDir := writeAdapter(t, peftConfig, []byte("chat weights"))
	_, url := newServer(t, newNode(t, nodeOpts{}), func(c *Config) {
		c.LoRA = &LoRAConfig{MaxLoRAs: 2, RuntimeUpdates: true, Modules: []LoRAModule{{Name: "sql", Path: sqlDir}}}
	})
	base, model := complete(t, url, testModel)
	if model != testModel {
		t.Fatalf("base model answered as %q", model)
	}
	sql, model := complete(t, url, "sql")
	if model != "sql" || sql == base {
		t.Fatalf("sql answered %q as %q; the base model %q", sql, model, base)
	}
	if again, _ := complete(t, url, "sql"); again != sql {
		t.Fatalf("sql answered %q, then %q", sql, again)
	}
	if code, body := loraPost(t, url, "/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"`+chatDir+`"}`); code != 200 ||
		body != "Success: LoRA adapter 'chat' added successfully." {
		t.Fatalf("load: %d %s", code, body)
	}
	chat, _ := complete(t, url, "chat")
	if chat == sql || chat == base {
		t.Fatalf("chat answered %q: sql %q, base %q", chat, sql, base)
	}

	code, body := get(t, url+"/v1/models")
	var ml openai.ModelList
	if err := json.Unmarshal([]byte(body), &ml); err != nil || code != 200 || len(ml.Data) != 3 {
		t.Fatalf("models %d %s", code, body)
	}
	var raw struct {
		Data []map[string]any `json:"data"`
	}
	json.Unmarshal([]byte(body), &raw)
	if d := raw.Data[0]; d["id"] != testModel || d["parent"] != nil || d["root"] != testModel || d["max_model_len"] != float64(2048) {
		t.Errorf("base card %v", d)
	}
	for i, want := range []struct{ id, root string }{{"sql", sqlDir}, {"chat", chatDir}} {
		if d := raw.Data[i+1]; d["id"] != want.id || d["parent"] != testModel || d["root"] != want.root || d["object"] != "model" {
			t.Errorf("card %d: %v, want id %s root %s parent %s", i+1, d, want.id, want.root, testModel)
		}
	}
	if _, body := get(t, url+"/metrics"); !strings.Contains(body, `vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""}`) {
		t.Errorf("metrics lack lora_requests_info:\n%s", grepLines(body, "lora"))
	}

	if code, body := loraPost(t, url, "/v1/unload_lora_adapter", `{"lora_name":"chat"}`); code != 200 ||
		body != "Success: LoRA adapter 'chat' removed successfully." {
		t.Fatalf("unload: %d %s", code, body)
	}
	resp := post(t, url+"/v1/completions", `{"model":"chat","prompt":"x"}`)
	if m := readJSON(t, resp); resp.StatusCode != 404 || field(m, "error", "code") != "model_not_found" {
		t.Errorf("unloaded adapter: %d %v", resp.StatusCode, m)
	}
	// Loaded again from its files, it answers as before.
	if code, body := loraPost(t, url, "/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"`+chatDir+`"}`); code != 200 {
		t.Fatalf("load again: %d %s", code, body)
	}
	if again, _ := complete(t, url, "chat"); again != chat {
		t.Fatalf("chat loaded again answered %q, first %q", again, chat)
	}
	// Another name for sql's files answers as sql.
	if code, body := loraPost(t, url, "/v1/load_lora_adapter", `{"lora_name":"sql2","lora_path":"`+sqlDir+`"}`); code != 200 {
		t.Fatalf("load sql2: %d %s", code, body)
	}
	if alias, _ := complete(t, url, "sql2"); alias != sql {
		t.Fatalf("sql's files under another name answered %q, sql %q", alias, sql)
	}
	// In place: chat takes sql's files, and answers as sql.
	if code, body := loraPost(t, url, "/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"`+sqlDir+`","load_inplace":true}`); code != 200 {
		t.Fatalf("load in place: %d %s", code, body)
	}
	if now, _ := complete(t, url, "chat"); now != sql {
		t.Fatalf("chat reloaded with sql's files answered %q, sql %q", now, sql)
	}
	// The adapters tokenize as the base model.
	if resp := post(t, url+"/tokenize", `{"model":"sql","prompt":"ab"}`); resp.StatusCode != 200 {
		t.Errorf("tokenize with an adapter: %d", resp.StatusCode)
	}
}

// grepLines returns body's lines containing s.
func grepLines(body, s string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLoRAEndpointErrors: vLLM's answers for bad loads and unloads.
func TestLoRAEndpointErrors(t *testing.T) {
	dir := writeAdapter(t, peftConfig, nil)
	_, url := newServer(t, newNode(t, nodeOpts{}), func(c *Config) {
		c.LoRA = &LoRAConfig{RuntimeUpdates: true, MaxModules: 2, Modules: []LoRAModule{{Name: "sql", Path: dir}}}
	})
	for _, tc := range []struct {
		name, path, body string
		status           int
		typ, msg         string
	}{
		{"missing path", "/v1/load_lora_adapter", `{"lora_name":"a"}`, 400, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided."},
		{"not JSON", "/v1/load_lora_adapter", `{"lora_name":1}`, 400, "BadRequestError", "not a JSON object"},
		{"already loaded", "/v1/load_lora_adapter", `{"lora_name":"sql","lora_path":"` + dir + `"}`, 400, "InvalidUserInput", "has already been loaded"},
		{"base model's name", "/v1/load_lora_adapter", `{"lora_name":"` + testModel + `","lora_path":"` + dir + `"}`, 400, "InvalidUserInput", "base model's name"},
		{"comma", "/v1/load_lora_adapter", `{"lora_name":"a,b","lora_path":"` + dir + `"}`, 400, "InvalidUserInput", "except space and ','"},
		{"no such path", "/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"/nonexistent/adapter"}`, 404, "NotFoundError", "No adapter found for /nonexistent/adapter"},
		{"no config", "/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"` + t.TempDir() + `"}`, 404, "NotFoundError", "no adapter_config.json"},
		{"bad config", "/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"` + writeAdapter(t, `[1]`, nil) + `"}`, 400, "BadRequestError", "not a JSON object"},
		{"not LoRA", "/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"` + writeAdapter(t, `{"peft_type":"PREFIX_TUNING"}`, nil) + `"}`, 400, "BadRequestError", "is not LORA"},
		{"rank", "/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"` + writeAdapter(t, `{"r":64}`, nil) + `"}`, 400, "BadRequestError", "LoRA rank 64 is greater than max_lora_rank 16"},
		{"unload nameless", "/v1/unload_lora_adapter", `{}`, 400, "InvalidUserInput", "'lora_name' needs to be provided"},
		{"unload unknown", "/v1/unload_lora_adapter", `{"lora_name":"a"}`, 404, "NotFoundError", "The lora adapter 'a' cannot be found."},
	} {
		resp := post(t, url+tc.path, tc.body)
		m := readJSON(t, resp)
		msg, _ := field(m, "error", "message").(string)
		if resp.StatusCode != tc.status || field(m, "error", "type") != tc.typ || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %v, want %d %s %q", tc.name, resp.StatusCode, m, tc.status, tc.typ, tc.msg)
		}
	}
	// The bound: two adapters at most.
	if code, body := loraPost(t, url, "/v1/load_lora_adapter", `{"lora_name":"b","lora_path":"`+dir+`"}`); code != 200 {
		t.Fatalf("load b: %d %s", code, body)
	}
	if code, body := loraPost(t, url, "/v1/load_lora_adapter", `{"lora_name":"c","lora_path":"`+dir+`"}`); code != 400 || !strings.Contains(body, "unload one first") {
		t.Errorf("over the bound: %d %s", code, body)
	}
	if code, _ := get(t, url+"/v1/load_lora_adapter"); code != 405 {
		t.Errorf("GET load: %d", code)
	}
}

// TestLoRAOff: without runtime updates the endpoints are not there (404,
// as vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING); without LoRA an
// adapter is an unknown model and there is no lora_requests_info; a module
// that does not load fails New.
func TestLoRAOff(t *testing.T) {
	dir := writeAdapter(t, peftConfig, nil)
	_, url := newServer(t, newNode(t, nodeOpts{}), func(c *Config) {
		c.LoRA = &LoRAConfig{Modules: []LoRAModule{{Name: "sql", Path: dir, BaseModelName: testModel}}}
	})
	if code, _ := loraPost(t, url, "/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"`+dir+`"}`); code != 404 {
		t.Errorf("load without runtime updates: %d", code)
	}
	if _, model := complete(t, url, "sql"); model != "sql" {
		t.Errorf("sql answered as %q", model)
	}
	_, url = newServer(t, newNode(t, nodeOpts{}), nil)
	if resp := post(t, url+"/v1/completions", `{"model":"sql","prompt":"x"}`); resp.StatusCode != 404 {
		t.Errorf("adapter without LoRA: %d", resp.StatusCode)
	}
	if _, body := get(t, url+"/metrics"); strings.Contains(body, "lora_requests_info") {
		t.Error("lora_requests_info without LoRA")
	}
	for _, m := range []LoRAModule{
		{Name: "x", Path: "/nonexistent"},
		{Name: "x", Path: dir, BaseModelName: "other"},
		{Name: "x y", Path: dir},
	} {
		if _, err := New(newNode(t, nodeOpts{}), Config{ModelName: testModel, LoRA: &LoRAConfig{Modules: []LoRAModule{m}}}); err == nil {
			t.Errorf("module %+v: New succeeded", m)
		}
	}
}

// TestLoRADecodeRefusesUnknownAdapter: a decode leg naming an adapter this
// engine does not serve gets vLLM's 404, and P is told at once.
func TestLoRADecodeRefusesUnknownAdapter(t *testing.T) {
	eng := &recordingEngine{Node: newNode(t, nodeOpts{role: engine.RoleDecode}), refuseRemote: true}
	dir := writeAdapter(t, peftConfig, nil)
	_, url := newServer(t, eng, func(c *Config) {
		c.LoRA = &LoRAConfig{Modules: []LoRAModule{{Name: "sql", Path: dir}}}
	})
	resp := post(t, url+"/v1/completions", strings.Replace(decodeBody(""), testModel, "chat", 1))
	if m := readJSON(t, resp); resp.StatusCode != 404 || field(m, "error", "message") != "The model `chat` does not exist." {
		t.Errorf("unknown adapter: %d %v", resp.StatusCode, m)
	}
	if rej := eng.takeRejected(); len(rej) != 1 {
		t.Errorf("P was told %d times", len(rej))
	}
}

// TestLoRADigestChecked: a prefill engine that ran an adapter names its
// files' digest in kv_transfer_params (lora_digest); a decode engine
// whose adapter of that name has other files, or that is asked for the
// base model, refuses the decode leg with a 400 naming the field, and
// tells P; the same files pass.
func TestLoRADigestChecked(t *testing.T) {
	dir := writeAdapter(t, peftConfig, []byte("sql weights"))
	digest, err := readAdapter(dir, DefaultMaxLoRARank)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%016x", digest)
	withSQL := func(c *Config) { c.LoRA = &LoRAConfig{Modules: []LoRAModule{{Name: "sql", Path: dir}}} }

	_, pURL := newServer(t, newNode(t, nodeOpts{role: engine.RolePrefill}), withSQL)
	m := readJSON(t, post(t, pURL+"/v1/completions", strings.Replace(prefillBody, testModel, "sql", 1)))
	if got := field(m, "kv_transfer_params", LoRADigestField); got != want {
		t.Fatalf("prefill's lora_digest %v, want %s: %v", got, want, m)
	}
	m = readJSON(t, post(t, pURL+"/v1/completions", prefillBody))
	if kv, _ := m["kv_transfer_params"].(map[string]any); kv == nil || kv[LoRADigestField] != nil {
		t.Fatalf("the base model's prefill: %v", m)
	}

	eng := &recordingEngine{Node: newNode(t, nodeOpts{role: engine.RoleDecode}), refuseRemote: true}
	_, dURL := newServer(t, eng, withSQL)
	leg := func(model, digest string) string {
		return strings.Replace(strings.Replace(decodeBody(""), testModel, model, 1), `"x_extra"`, `"lora_digest":`+digest+`,"x_extra"`, 1)
	}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"other files", leg("sql", `"0000000000000001"`), 400},
		{"base model", leg(testModel, `"`+want+`"`), 400},
		{"malformed", leg("sql", `17`), 400},
		{"same files", leg("sql", `"`+want+`"`), 429}, // past the check: refuseRemote's queue full
		{"no digest from P", strings.Replace(decodeBody(""), testModel, "sql", 1), 429},
	} {
		resp := post(t, dURL+"/v1/completions", tc.body)
		m := readJSON(t, resp)
		if resp.StatusCode != tc.status || tc.status == 400 && field(m, "error", "param") != "kv_transfer_params.lora_digest" {
			t.Errorf("%s: %d %v", tc.name, resp.StatusCode, m)
		}
		if rej := eng.takeRejected(); tc.status == 400 && len(rej) != 1 {
			t.Errorf("%s: P was told %d times", tc.name, len(rej))
		}
	}
}
