package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The reference renderer: testdata/hf_render.py, Hugging Face's
// apply_chat_template semantics on python3-jinja2, fed the conversations
// of testdata/conversations.json as an OpenAI client sends them.

// refNow is the clock both renderers see (strftime_now).
var refNow = time.Date(2024, time.July, 26, 9, 30, 0, 0, time.UTC)

// refCase is one conversation of testdata/conversations.json.
type refCase struct {
	Name     string `json:"name"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	Kwargs              json.RawMessage `json:"chat_template_kwargs"`
}

func (c *refCase) conversation(t *testing.T) *Conversation {
	conv := &Conversation{AddGenerationPrompt: c.AddGenerationPrompt == nil || *c.AddGenerationPrompt, Kwargs: c.Kwargs}
	if string(c.Tools) != "null" {
		conv.Tools = c.Tools
	}
	for _, m := range c.Messages {
		msg := Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
			msg.ToolCalls = m.ToolCalls
		}
		var s string
		var parts []struct{ Text string }
		switch {
		case json.Unmarshal(m.Content, &s) == nil:
			msg.Content = s
		case json.Unmarshal(m.Content, &parts) == nil:
			for i, p := range parts {
				if i > 0 {
					msg.Content += "\n"
				}
				msg.Content += p.Text
			}
		}
		conv.Messages = append(conv.Messages, msg)
	}
	return conv
}

func loadCases(t *testing.T) ([]refCase, json.RawMessage) {
	raw, err := os.ReadFile("testdata/conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []refCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases, raw
}

// noPython says why the reference renderer cannot run.
const noPython = "no python3 with jinja2 (Debian: apt-get install python3-jinja2): the reference renderer cannot run"

// findPython is a python3 that imports jinja2 (KVLEASE_PYTHON first, as
// model/llama's tests take it), or "".
func findPython() string {
	for _, py := range []string{os.Getenv("KVLEASE_PYTHON"), "python3", "/usr/bin/python3"} {
		if py != "" && exec.Command(py, "-c", "import jinja2").Run() == nil {
			return py
		}
	}
	return ""
}

// referencePython is findPython's, or skips the test.
func referencePython(t *testing.T) string {
	py := findPython()
	if py == "" {
		t.Skip(noPython)
	}
	return py
}

type refResult struct {
	Text  *string `json:"text"`
	Error *string `json:"error"`
	Kind  string  `json:"kind"`
}

// refJob is one template for testdata/hf_render.py.
type refJob struct {
	src string
	tok Tokens
}

// refOutput is hf_render.py's answer for one template: its renders, or
// why it does not compile.
type refOutput struct {
	results      []refResult
	compileError string
}

// renderReference renders every case with every template in one run of
// testdata/hf_render.py.
func renderReference(t *testing.T, py string, jobs []refJob, cases json.RawMessage) []refOutput {
	req := make([]map[string]any, len(jobs))
	for i, j := range jobs {
		req[i] = map[string]any{"template": j.src, "now": refNow.Format("2006-01-02T15:04:05"),
			"bos_token": j.tok.BOS, "eos_token": j.tok.EOS, "cases": cases}
	}
	body, _ := json.Marshal(req)
	cmd := exec.Command(py, "testdata/hf_render.py")
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_render.py: %v\n%s", err, stderr.String())
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil || len(raw) != len(jobs) {
		t.Fatalf("hf_render.py output: %v (%d results for %d templates)", err, len(raw), len(jobs))
	}
	res := make([]refOutput, len(jobs))
	for i, r := range raw {
		var compile struct {
			Error string `json:"compile_error"`
		}
		if json.Unmarshal(r, &compile) == nil && compile.Error != "" {
			res[i].compileError = compile.Error
			continue
		}
		if err := json.Unmarshal(r, &res[i].results); err != nil {
			t.Fatalf("hf_render.py output: %v", err)
		}
	}
	return res
}

// templateTokens are the bos_token and eos_token the model files of a
// template carry (tokenizer_config.json's, as Hugging Face renders them).
func templateTokens(name string) Tokens {
	switch {
	case strings.HasPrefix(name, "meta-llama-Llama-3"):
		return Tokens{"<|begin_of_text|>", "<|eot_id|>"}
	case strings.HasPrefix(name, "deepseek-ai-DeepSeek-R1-Distill"):
		return Tokens{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"}
	case strings.HasPrefix(name, "Qwen-"), strings.HasPrefix(name, "HuggingFaceTB-SmolLM3"):
		return Tokens{"", "<|im_end|>"}
	}
	return Tokens{"<s>", "</s>"}
}

// requiredTemplates must render byte-equal to the reference on every
// conversation (or refuse it with the reference's message).
var requiredTemplates = []string{
	"meta-llama-Llama-3.1-8B-Instruct.jinja",
	"meta-llama-Llama-3.2-3B-Instruct.jinja",
	"meta-llama-Llama-3.3-70B-Instruct.jinja",
	"Qwen-Qwen2.5-7B-Instruct.jinja",
	"Qwen-Qwen3-0.6B.jinja",
	"Qwen-QwQ-32B.jinja",
	"mistralai-Mistral-Nemo-Instruct-2407.jinja",
	"Mistral-Small-3.2-24B-Instruct-2506.jinja",
	"HuggingFaceTB-SmolLM3-3B.jinja",
	"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
	"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
}

// TestTemplatesMatchReference renders llama.cpp's collection of real chat
// templates (as their models ship them) with every conversation of
// testdata/conversations.json, here and with the reference, and requires
// the same bytes, or the same raise_exception message, for
// requiredTemplates; the others are reported.
func TestTemplatesMatchReference(t *testing.T) {
	dir := os.Getenv("KVLEASE_LLAMACPP")
	if dir == "" {
		t.Skip("KVLEASE_LLAMACPP is not set: the llama.cpp source with models/templates is needed")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "models", "templates", "*.jinja"))
	if len(files) == 0 {
		t.Fatalf("no templates in %s/models/templates", dir)
	}
	py := referencePython(t)
	cases, raw := loadCases(t)
	for _, name := range requiredTemplates {
		if !slices.Contains(files, filepath.Join(dir, "models", "templates", name)) {
			t.Errorf("%s is not among llama.cpp's templates", name)
		}
	}
	jobs := make([]refJob, len(files))
	for i, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		jobs[i] = refJob{string(src), templateTokens(filepath.Base(f))}
	}
	refs := renderReference(t, py, jobs, raw)
	total, equal := 0, 0
	var summary []string
	for fi, f := range files {
		name := filepath.Base(f)
		required := slices.Contains(requiredTemplates, name)
		report := t.Logf
		if required {
			report = t.Errorf
		}
		src, tok := jobs[fi].src, jobs[fi].tok
		ref, compileErr := refs[fi].results, refs[fi].compileError
		if compileErr != "" {
			report("%s: the reference does not compile it: %s", name, compileErr)
			continue
		}
		tmpl, err := Parse(src)
		if err != nil {
			report("%s: %v", name, err)
			summary = append(summary, name+": does not compile")
			continue
		}
		n := 0
		for i, c := range cases {
			got, err := tmpl.Render(c.conversation(t), tok, refNow)
			want := ref[i]
			total++
			switch {
			case want.Error != nil && err != nil:
				if err.Error() == *want.Error {
					n++
				} else {
					report("%s/%s: raised %q, the reference %q", name, c.Name, err, *want.Error)
				}
			case want.Error != nil:
				report("%s/%s: rendered, the reference raised %q", name, c.Name, *want.Error)
			case err != nil:
				report("%s/%s: %v; the reference rendered it", name, c.Name, err)
			case got != *want.Text:
				report("%s/%s: differs from the reference %s", name, c.Name, firstDiff(got, *want.Text))
			default:
				n++
			}
		}
		equal += n
		summary = append(summary, name+": "+itoa(n)+"/"+itoa(len(cases)))
	}
	t.Logf("%d of %d renders equal to the reference:\n%s", equal, total, strings.Join(summary, "\n"))
}

func itoa(n int) string { return fmtInt(n) }

func fmtInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-60)
	return "at byte " + fmtInt(i) + ":\n got  " + quote(got[lo:min(len(got), i+100)]) + "\n want " + quote(want[lo:min(len(want), i+100)])
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
