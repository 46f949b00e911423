// Package scenarios holds the end-to-end tests of the P/D lifecycle scenarios
// of docs/scenarios.md (tests only): every test starts real `kvlease serve`
// processes on 127.0.0.1 — a prefill engine (P) and a decode engine (D)
// sharing a cluster secret, with a 3 s lease — drives them as a P/D proxy
// and its clients would, and checks P's pool and
// kvlease_leases_released_total{reason} through /metrics. Wherever D
// produces tokens they must equal those of a single `--role both` engine
// for the same request. Tests are named after their scenario id
// (TestE2ES01HappyPath, ...).
//
// The binary is built once from the working tree by TestMain, or taken from
// $KVLEASE_BINARY when set. With -short every test is skipped. None sleeps
// to wait for something: they wait for a condition with a deadline.
//
// The package has only test files, so it needs no place in the repository's
// purity classification.
package scenarios

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

const (
	modelName = "m"
	// numBlocks is every engine's pool capacity (the accounting check
	// free + evictable + held == numBlocks).
	numBlocks = 1024
	// lease is the P/D engines' --kv-lease: heartbeat lease/6, extension
	// 2·lease/3, peer grace lease/15 (xfer.Config.WithLease).
	lease = 3 * time.Second
)

var (
	binPath    string // the kvlease binary
	secretFile string // the cluster secret P and D share (0600)
	secret     []byte // its contents, for the raw wire clients
	tmpDir     string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips itself
	}
	code := func() int {
		var err error
		if tmpDir, err = os.MkdirTemp("", "kvlease-pdscen-*"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(tmpDir)
		var raw [32]byte
		rand.Read(raw[:])
		secret = []byte(hex.EncodeToString(raw[:]))
		secretFile = filepath.Join(tmpDir, "secret")
		if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer kvleasebin.Remove()
		if binPath, err = kvleasebin.Path(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stopReference()
		return m.Run()
	}()
	os.Exit(code)
}

// skipShort marks t parallel and skips it under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kvlease serve processes")
	}
	t.Parallel()
}

// engine is one running `kvlease serve` process.
type engine struct {
	name     string
	cmd      *exec.Cmd
	url      string // http://127.0.0.1:port
	transfer string // P's transfer address (host:port); "" for D
	stderr   *lockedBuffer
	done     <-chan struct{} // closed when the process has exited
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // enough to diagnose; do not grow without bound
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// transferRE reads P's transfer address from its announcement.
var transferRE = regexp.MustCompile(`transfer on (\S+) \(engine id`)

// baseArgs are the flags every engine of this package shares: the model,
// its KV shape and seed must agree between P, D and the reference.
func baseArgs() []string {
	return []string{"--port", "0", "--profile", "tiny", "--model", modelName, "--num-blocks", strconv.Itoa(numBlocks),
		"--seed", "7", "--log-level", "warn"}
}

// pdArgs are the P/D flags on top of baseArgs.
func pdArgs(role string) []string {
	return append(baseArgs(), "--role", role, "--cluster-secret-file", secretFile, "--kv-lease", lease.String())
}

// startProcess starts kvlease serve with args and waits for its
// announcement line.
func startProcess(name string, args ...string) (*engine, error) {
	cmd := exec.Command(binPath, append([]string{"serve"}, args...)...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	p, err := kvleasebin.Serve(cmd, e2e.Timeout)
	if err != nil {
		return nil, fmt.Errorf("%s: %v; stderr:\n%s", name, err, stderr.String())
	}
	e := &engine{name: name, cmd: cmd, url: p.URL, stderr: stderr, done: p.Done()}
	if m := transferRE.FindStringSubmatch(p.Line); m != nil {
		e.transfer = m[1]
	}
	return e, nil
}

// start starts an engine for t; t's cleanup kills it and, if t failed,
// shows its log.
func start(t *testing.T, name string, args ...string) *engine {
	t.Helper()
	e, err := startProcess(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.cmd.Process.Kill()
		<-e.done
		if t.Failed() {
			if s := e.stderr.String(); s != "" {
				t.Logf("%s stderr:\n%s", e.name, s)
			}
		}
	})
	return e
}

// startP starts a prefill engine with a transfer listener.
func startP(t *testing.T, extra ...string) *engine {
	t.Helper()
	// No claim deadline unless a test sets one (S25 does): with the 3 s
	// lease it is 1 s, which the prefill-to-claim path of the other
	// scenarios can exceed on a loaded machine.
	e := start(t, "P", append(append(pdArgs("prefill"), "--transfer-port", "0", "--kv-claim-timeout", "0s"), extra...)...)
	if e.transfer == "" {
		t.Fatalf("P announced no transfer address")
	}
	return e
}

// startD starts a decode engine.
func startD(t *testing.T, name string, extra ...string) *engine {
	t.Helper()
	return start(t, name, append(pdArgs("decode"), extra...)...)
}

// kill9 kills e with SIGKILL (no chance to close anything itself) and
// waits for it to be gone.
func (e *engine) kill9(t *testing.T) {
	t.Helper()
	if err := e.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.done:
	case <-time.After(e2e.Timeout):
		t.Fatalf("%s still runs after SIGKILL", e.name)
	}
}

// The references: `kvlease serve --role both` engines without a secret,
// one per set of model flags (profile, digest-only), shared by every test
// (requests are independent and seeded).
var (
	refMu   sync.Mutex
	refs    = map[string]*refEngine{}
	refList []*refEngine
)

type refEngine struct {
	once sync.Once
	e    *engine
	err  error
}

// reference returns the single engine of the model flags modelArgs
// (baseArgs' by default), starting it on first use.
func reference(t *testing.T, modelArgs ...string) *engine {
	t.Helper()
	key := strings.Join(modelArgs, " ")
	refMu.Lock()
	r := refs[key]
	if r == nil {
		r = &refEngine{}
		refs[key] = r
		refList = append(refList, r)
	}
	refMu.Unlock()
	r.once.Do(func() {
		r.e, r.err = startProcess("reference "+key, append(append(baseArgs(), modelArgs...), "--role", "both")...)
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.e
}

func stopReference() {
	refMu.Lock()
	defer refMu.Unlock()
	for _, r := range refList {
		if r.e != nil {
			r.e.cmd.Process.Kill()
			<-r.e.done
		}
	}
}

// job is one completion request, sent to P (prefill leg), D (decode leg)
// and the reference alike.
type job struct {
	id        string // X-Request-Id; unique across the package
	prompt    string
	maxTokens int64
	seed      int64
	modelArgs []string // model flags of P and D beyond baseArgs, for the reference
}

func (j job) params() openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel(modelName),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(j.prompt)},
		MaxTokens:   openai.Int(j.maxTokens),
		Seed:        openai.Int(j.seed),
		Temperature: openai.Float(0.8),
	}
}

// complete sends j to e through the openai-go SDK, with kv as
// kv_transfer_params when not nil, and ignore_eos so the length is fixed.
func (e *engine) complete(ctx context.Context, j job, id string, kv json.RawMessage) (*openai.Completion, error) {
	c := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	opts := []option.RequestOption{option.WithHeader("X-Request-Id", id), option.WithJSONSet("ignore_eos", true)}
	if kv != nil {
		opts = append(opts, option.WithJSONSet("kv_transfer_params", kv))
	}
	return c.Completions.New(ctx, j.params(), opts...)
}

// prefill sends j's prefill leg to P as vLLM's and llm-d's proxies do
// (max_tokens 1, do_remote_decode) and returns P's kv_transfer_params.
func (e *engine) prefill(t *testing.T, j job) json.RawMessage {
	t.Helper()
	status, m := e2e.PostJSON(t, e.url+"/v1/completions", prefillBody(j.prompt), "X-Request-Id", j.id)
	if status != 200 || m["kv_transfer_params"] == nil {
		t.Fatalf("prefill %s: %d %v", j.id, status, m)
	}
	raw, _ := json.Marshal(m["kv_transfer_params"])
	return raw
}

func prefillBody(prompt string) string {
	p, _ := json.Marshal(prompt)
	return `{"model":"` + modelName + `","prompt":` + string(p) + `,"max_tokens":1,"stream":false,` +
		`"kv_transfer_params":{"do_remote_decode":true}}`
}

// decodeMatches sends j's decode leg with kv to d and checks that its
// tokens equal the reference engine's for the same request.
func decodeMatches(t *testing.T, d *engine, j job, kv json.RawMessage) {
	t.Helper()
	got, err := d.complete(context.Background(), j, j.id, kv)
	if err != nil {
		t.Fatalf("decode %s on %s: %v", j.id, d.name, err)
	}
	matchesReference(t, j, got)
}

// matchesReference checks got against the reference engine's answer to j.
func matchesReference(t *testing.T, j job, got *openai.Completion) {
	t.Helper()
	want, err := reference(t, j.modelArgs...).complete(context.Background(), j, "ref-"+j.id, nil)
	if err != nil {
		t.Fatalf("reference %s: %v", j.id, err)
	}
	if got.Choices[0].Text != want.Choices[0].Text || got.Usage.CompletionTokens != want.Usage.CompletionTokens {
		t.Errorf("%s: decode engine %q (%d tokens), single engine %q (%d tokens)", j.id,
			got.Choices[0].Text, got.Usage.CompletionTokens, want.Choices[0].Text, want.Usage.CompletionTokens)
	}
}

// abort calls e's abort endpoint for request id, as a proxy does when its
// client leaves.
func (e *engine) abort(t *testing.T, id string) string {
	t.Helper()
	status, m := e2e.PostJSON(t, e.url+"/kvlease/v1/requests/"+id+"/abort", "")
	if status != 200 {
		t.Fatalf("abort %s on %s: %d %v", id, e.name, status, m)
	}
	r, _ := m["result"].(string)
	return r
}

// metrics is one scrape of /metrics: series (name and labels as exposed,
// labels sorted by name) to value.
type metrics map[string]float64

func (e *engine) metrics(t testing.TB) metrics {
	t.Helper()
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		t.Fatalf("%s /metrics: %v", e.name, err)
	}
	defer resp.Body.Close()
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%s /metrics: %q: %v", e.name, line, err)
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s /metrics: %v", e.name, err)
	}
	return m
}

// get returns series name{model_name="m", labels...} (labels as name,
// value pairs), or -1 when it is not exported.
func (m metrics) get(name string, labels ...string) float64 {
	kv := []string{`model_name="` + modelName + `"`}
	for i := 0; i+1 < len(labels); i += 2 {
		kv = append(kv, labels[i]+`="`+labels[i+1]+`"`)
	}
	slices.Sort(kv)
	v, ok := m[name+"{"+strings.Join(kv, ",")+"}"]
	if !ok {
		return -1
	}
	return v
}

// sum adds every series of name (any labels).
func (m metrics) sum(name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

func (m metrics) held() float64 { return m.get("kvlease_kv_blocks", "state", "held") }

// releaseReasons are the label values of kvlease_leases_released_total.
var releaseReasons = []string{"read_done", "rejected", "aborted", "undelivered", "peer_lost", "expired", "fallback", "shutdown", "unclaimed"}

// released returns kvlease_leases_released_total by reason, zeros left out.
func (m metrics) released() map[string]float64 {
	r := map[string]float64{}
	for _, reason := range releaseReasons {
		if v := m.get("kvlease_leases_released_total", "reason", reason); v != 0 {
			r[reason] = v
		}
	}
	return r
}

// wantReleased checks P's releases by reason: exactly want, every other
// reason zero.
func wantReleased(t *testing.T, p *engine, want map[string]float64) {
	t.Helper()
	if got := p.metrics(t).released(); !mapsEqual(got, want) {
		t.Errorf("P released %v, want %v", got, want)
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkSettled is the end of every scenario on every engine: no block held,
// no lease live, and free + evictable + held == capacity.
func checkSettled(t *testing.T, engines ...*engine) {
	t.Helper()
	for _, e := range engines {
		var m metrics
		err := e2e.Poll(e2e.Timeout, func() bool {
			m = e.metrics(t)
			return m.held() == 0 && m.get("kvlease_leases_active") <= 0
		})
		if err != nil {
			t.Errorf("%s holds %v blocks and %v leases", e.name, m.held(), m.get("kvlease_leases_active"))
		}
		total := m.get("kvlease_kv_blocks", "state", "free") + m.get("kvlease_kv_blocks", "state", "evictable") + m.held()
		if total != numBlocks {
			t.Errorf("%s: free + evictable + held = %v, capacity %d", e.name, total, numBlocks)
		}
	}
}

// blocker is a long plain request keeping a decode engine with
// --max-num-seqs 1 busy, so that requests behind it wait in its queue.
type blocker struct {
	id   string
	done chan error
}

// startBlocker sends a plain request of maxTokens tokens to e and waits
// until e runs it. It occupies e for at least maxTokens decode steps of e's
// profile (≥ 1.5 ms each for tiny, ≥ 6.5 ms for llama-8b): the modelled
// step time is a lower bound of the wall time the engine takes.
func startBlocker(t *testing.T, e *engine, id string, maxTokens int64) *blocker {
	t.Helper()
	b := &blocker{id: id, done: make(chan error, 1)}
	go func() {
		_, err := e.complete(context.Background(), job{id: id, prompt: "Keep the decode engine busy.", maxTokens: maxTokens, seed: 1}, id, nil)
		b.done <- err
	}()
	e2e.WaitFor(t, e.name+" to run "+id, func() bool { return e.metrics(t).get("vllm:num_requests_running") == 1 })
	return b
}
