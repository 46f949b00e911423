package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/llm-d/llm-d-inference-scheduler/pkg/common"
	"github.com/llm-d/llm-d-inference-scheduler/pkg/sidecar/proxy"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

const pdModel = "kvlease-tiny" // serve's default name for the tiny profile

// pdRequest is one request of the P/D comparison: its path, its body,
// and how to read the answer's text.
type pdRequest struct {
	name, path string
	body       map[string]any
}

var pdRequests = []pdRequest{
	{"completion greedy", "/v1/completions", map[string]any{
		"prompt":     "The quick brown fox jumps over the lazy dog, and then it runs across the wide green field to the river",
		"max_tokens": 24, "temperature": 0, "ignore_eos": true}},
	{"completion seeded", "/v1/completions", map[string]any{
		"prompt": "Once upon a time in a land far away", "max_tokens": 24, "seed": 42, "temperature": 0.9, "ignore_eos": true}},
	{"completion streaming", "/v1/completions", map[string]any{
		"prompt": "Streams of tokens flow from the decode engine", "max_tokens": 24, "temperature": 0, "ignore_eos": true,
		"stream": true}},
	{"chat", "/v1/chat/completions", map[string]any{
		"messages":   []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a lease?"}},
		"max_tokens": 24, "seed": 7}},
	{"chat streaming", "/v1/chat/completions", map[string]any{
		"messages":   []map[string]string{{"role": "user", "content": "Tell me about prefill and decode."}},
		"max_tokens": 24, "seed": 3, "ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}}},
}

// answer posts r to base (with the prefill header when prefill is not
// empty) and returns the answer's text: the first choice's text or
// message content, the deltas joined when streamed.
func answer(t *testing.T, base string, r pdRequest, prefill string) string {
	t.Helper()
	body := map[string]any{"model": pdModel}
	for k, v := range r.body {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+r.path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if prefill != "" {
		req.Header.Set(common.PrefillPodHeader, prefill)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s %s", base, resp.Status, msg)
	}
	type choice struct {
		Text    string `json:"text"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	}
	type chunk struct {
		Choices []choice `json:"choices"`
	}
	text := func(c chunk) string {
		if len(c.Choices) == 0 {
			return ""
		}
		return c.Choices[0].Text + c.Choices[0].Message.Content + c.Choices[0].Delta.Content
	}
	if r.body["stream"] != true {
		var c chunk
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			t.Fatal(err)
		}
		return text(c)
	}
	var out strings.Builder
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("stream chunk %q: %v", data, err)
		}
		out.WriteString(text(c))
	}
	if !done {
		t.Fatalf("%s: stream ended without [DONE]", base)
	}
	return out.String()
}

// addrSink is a logr sink that catches the address llm-d's sidecar logs
// when it listens ("starting", "addr", ln.Addr()): NewProxy takes a port
// number, not a listener, so the test hands it port 0 and learns the port
// the kernel chose, instead of picking a free port that another process
// could take before the sidecar binds it.
type addrSink struct {
	addr chan<- string
}

func (s addrSink) Init(logr.RuntimeInfo)          {}
func (s addrSink) Enabled(int) bool               { return true }
func (s addrSink) Error(error, string, ...any)    {}
func (s addrSink) WithValues(...any) logr.LogSink { return s }
func (s addrSink) WithName(string) logr.LogSink   { return s }
func (s addrSink) Info(_ int, msg string, kv ...any) {
	if msg != "starting" {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "addr" {
			select {
			case s.addr <- fmt.Sprint(kv[i+1]):
			default:
			}
		}
	}
}

// TestPDSidecarMatchesSingleEngine runs llm-d-inference-scheduler's P/D
// sidecar (pkg/sidecar/proxy, connector nixlv2, as cmd/pd-sidecar starts
// it) in front of a kvlease decode engine, with a kvlease prefill engine
// named in x-prefiller-host-port as llm-d's scheduler names it: every
// answer (completion, chat, streamed or not, greedy or seeded) equals the
// answer of one `kvlease serve --role both` engine, and each request went
// through P/D (P granted one lease per request and every lease ended in a
// read by D).
func TestPDSidecarMatchesSingleEngine(t *testing.T) {
	single := serve(t, "--role", "both", "--profile", "tiny", "--transfer-port", "0")
	// A prefill and a decode engine as llm-d deploys them: the same
	// cluster secret; D learns P's transfer endpoint from the
	// kv_transfer_params of P's answer, which the sidecar passes on.
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("cd", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := serve(t, "--role", "prefill", "--profile", "tiny", "--transfer-port", "0", "--cluster-secret-file", secret).URL
	d := serve(t, "--role", "decode", "--profile", "tiny", "--transfer-port", "0", "--cluster-secret-file", secret).URL
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	decodeURL, err := url.Parse(d)
	if err != nil {
		t.Fatal(err)
	}
	prefillHostPort := strings.TrimPrefix(p, "http://")

	listening := make(chan string, 1)
	ctx = ctrllog.IntoContext(ctx, logr.New(addrSink{addr: listening}))
	sidecar := proxy.NewProxy("0", decodeURL, proxy.Config{Connector: proxy.ConnectorNIXLV2})
	allow, err := proxy.NewAllowlistValidator(false, "", "")
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- sidecar.Start(ctx, nil, allow) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("sidecar: %v", err)
		}
	}()
	var base string
	select {
	case addr := <-listening:
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("the sidecar logged address %q: %v", addr, err)
		}
		base = "http://127.0.0.1:" + port
	case err := <-stopped:
		stopped <- err // for the deferred wait
		t.Fatalf("sidecar stopped before listening: %v", err)
	case <-time.After(waitTimeout):
		t.Fatalf("the sidecar did not log its address (\"starting\", \"addr\") within %v", waitTimeout)
	}
	waitFor(t, "the sidecar's /health", func() bool {
		select {
		case err := <-stopped:
			t.Fatalf("sidecar stopped: %v", err)
		default:
		}
		resp, err := http.Get(base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	for _, r := range pdRequests {
		t.Run(r.name, func(t *testing.T) {
			want := answer(t, single.URL, r, "")
			got := answer(t, base, r, prefillHostPort)
			if got != want || got == "" {
				t.Errorf("through llm-d's sidecar %q\n            single engine %q", got, want)
			}
		})
	}
	granted := `kvlease_leases_granted_total{model_name="` + pdModel + `"}`
	read := `kvlease_leases_released_total{model_name="` + pdModel + `",reason="read_done"}`
	if g := metric(t, p, granted); g != float64(len(pdRequests)) {
		t.Errorf("P granted %v leases for %d requests through the sidecar", g, len(pdRequests))
	}
	waitFor(t, "every lease to end in a read", func() bool { return metric(t, p, read) == float64(len(pdRequests)) })
	t.Logf("%d requests through llm-d's pd-sidecar (nixlv2) equal to a single engine; P: %s", len(pdRequests), fmt.Sprint(metric(t, p, read), " leases read"))
}
