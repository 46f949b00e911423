package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/internal/kvleasebin"
)

// kvleaseBinary is the kvlease binary (built once per test process).
func kvleaseBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the kvlease binary")
	}
	return kvleasebin.Build(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	kvleasebin.Remove()
	os.Exit(code)
}

// process is a running kvlease serve and its stderr.
type process struct {
	*kvleasebin.Process
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve starts kvlease serve with args (plus --port 0) and waits for its
// announcement; the test's cleanup kills it if it still runs.
func serve(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(kvleaseBinary(t), append([]string{"serve", "--port", "0"}, args...)...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	kp, err := kvleasebin.Serve(cmd, 30*time.Second)
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		kp.Wait()
	})
	return &process{Process: kp, stderr: stderr}
}

// terminate sends SIGTERM and returns the exit error (nil for exit 0).
func (p *process) terminate(t *testing.T) error {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after SIGTERM; stderr:\n%s", p.stderr.String())
		return nil
	}
}

// The binary as a user runs it: serve, a completion through the SDK, a
// streaming chat through curl's eyes, SIGTERM, exit 0.
func TestBinaryServeAndSIGTERM(t *testing.T) {
	p := serve(t, "--profile", "tiny", "--model", "tiny-model", "--log-level", "warn")
	c := openai.NewClient(option.WithBaseURL(p.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	r, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "tiny-model", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hello")},
		MaxTokens: openai.Int(8), Seed: openai.Int(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Usage.PromptTokens != 5 || r.Choices[0].Text == "" && r.Usage.CompletionTokens > 1 {
		t.Errorf("%+v", r)
	}
	resp, err := http.Post(p.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "data: {") || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("stream %q", body)
	}
	if err := p.terminate(t); err != nil {
		t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, p.stderr.String())
	}
}

// Two real processes, a prefill and a decode engine sharing a secret: the
// decode engine pulls the prefill's KV over TCP and P frees it (S1).
func TestBinaryPrefillDecode(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--profile", "tiny", "--model", "m", "--cluster-secret-file", secretFile, "--kv-lease", "3s", "--log-level", "warn"}
	pe := serve(t, append([]string{"--role", "prefill", "--transfer-port", "0"}, common...)...)
	de := serve(t, append([]string{"--role", "decode"}, common...)...)
	single := serve(t, "--profile", "tiny", "--model", "m", "--log-level", "warn")
	if !strings.Contains(pe.Line, "transfer on 127.0.0.1:") {
		t.Fatalf("prefill announcement %q", pe.Line)
	}
	const prompt = "Two processes, one request, and the KV cache in between."
	status, m := e2e.PostJSON(t, pe.URL+"/v1/completions", `{"model":"m","prompt":"`+prompt+`","max_tokens":1,`+
		`"kv_transfer_params":{"do_remote_decode":true}}`, "X-Request-Id", "bin-1")
	if status != 200 {
		t.Fatalf("prefill %d %v", status, m)
	}
	kv, _ := json.Marshal(m["kv_transfer_params"])
	body := `{"model":"m","prompt":"` + prompt + `","max_tokens":16,"seed":4,"temperature":0.7,"ignore_eos":true`
	status, dm := e2e.PostJSON(t, de.URL+"/v1/completions", body+`,"kv_transfer_params":`+string(kv)+`}`, "X-Request-Id", "bin-1")
	_, sm := e2e.PostJSON(t, single.URL+"/v1/completions", body+`}`)
	dText, _ := dm["choices"].([]any)[0].(map[string]any)["text"].(string)
	sText, _ := sm["choices"].([]any)[0].(map[string]any)["text"].(string)
	if status != 200 || dText != sText {
		t.Errorf("decode %d %q, single engine %q", status, dText, sText)
	}
	pEngine := &testEngine{url: pe.URL}
	e2e.WaitFor(t, "P to free the blocks D read", func() bool {
		return pEngine.metric(t, `kvlease_kv_blocks{model_name="m",state="held"}`) == 0
	})
	if got := pEngine.metric(t, `kvlease_leases_released_total{model_name="m",reason="read_done"}`); got != 1 {
		t.Errorf("released read_done %v", got)
	}
	for _, p := range []*process{pe, de, single} {
		if err := p.terminate(t); err != nil {
			t.Errorf("exit: %v; stderr:\n%s", err, p.stderr.String())
		}
	}
}
