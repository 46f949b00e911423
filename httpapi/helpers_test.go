package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/httpserver/httpservertest"
	"github.com/kvlease/kvlease/kvblock"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/xfer"
)

const testModel = "kvlease-test"

// nodeOpts shape a test engine.
type nodeOpts struct {
	profile    string // default "zero"; "slow" is slowProfile
	role       engine.Role
	transfer   bool // configure P/D transfer (required for prefill/decode)
	numBlocks  int
	maxWaiting int
	maxLen     int
}

func newNode(t testing.TB, o nodeOpts) *node.Node {
	t.Helper()
	if o.profile == "" {
		o.profile = "zero"
	}
	if o.numBlocks == 0 {
		o.numBlocks = 512
	}
	if o.maxLen == 0 {
		o.maxLen = 2048
	}
	prof, ok := synth.LookupProfile(o.profile)
	if o.profile == "slow" {
		prof, ok = slowProfile(), true
	}
	if !ok {
		t.Fatalf("no profile %q", o.profile)
	}
	sc := sched.DefaultConfig()
	if o.maxWaiting > 0 {
		sc.MaxWaiting = o.maxWaiting
	}
	cfg := engine.Config{
		Pool:        kvblock.Config{NumBlocks: o.numBlocks, BlockSizeTokens: 16},
		Sched:       sc,
		MaxModelLen: o.maxLen, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 1024,
		Role:           o.role,
	}
	if o.transfer || o.role != engine.RoleBoth {
		tc := xfer.DefaultConfig(xfer.PolicyLease)
		cfg.Transfer, cfg.Secret, cfg.EngineID = &tc, []byte("test secret"), "engine-"+o.role.String()
	}
	core := engine.NewCore(cfg, rand.New(rand.NewPCG(1, 2)))
	var ncfg node.Config
	if cfg.Transfer != nil {
		tr, err := tcp.New(tcp.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if o.role != engine.RoleDecode {
			if err := tr.Listen("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
		}
		ncfg.Transport = tr
	}
	n := node.New(core, synth.New(prof, core.Pool(), 7), ncfg)
	ctx, cancel := context.WithCancel(context.Background())
	go n.Run(ctx)
	t.Cleanup(func() { cancel(); <-n.Done() })
	return n
}

// slowProfile is tiny with 25 ms decode steps. The modelled step time is a
// lower bound of the engine's wall time, so a request of 1000 tokens runs
// for at least 25 s: a test acting on it while it runs (a disconnect, an
// abort, a duplicate id) finds it running however loaded the machine, and
// ends it, so it costs the test no time.
func slowProfile() synth.Profile {
	p, _ := synth.LookupProfile("tiny")
	p.Name, p.DecodePerStep = "slow", 25*time.Millisecond
	return p
}

// newServer serves eng on a loopback server, as kvlease serve does (httpserver).
func newServer(t testing.TB, eng Engine, mut func(*Config)) (*Server, string) {
	t.Helper()
	cfg := Config{ModelName: testModel, Version: "test"}
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httpservertest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// post sends body as JSON with optional headers (name, value, ...).
func post(t testing.TB, url, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readJSON decodes resp's body into a generic map and closes it.
func readJSON(t testing.TB, resp *http.Response) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return m
}

// events reads a server-sent event stream to its end and returns the data
// of each event.
func events(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an event line: %q", line)
		}
		out = append(out, data)
	}
	return out
}

// get returns the body of a GET.
func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// field walks m along a path of keys and indexes.
func field(m any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			mm, _ := m.(map[string]any)
			m = mm[k]
		case int:
			a, _ := m.([]any)
			if k >= len(a) {
				return nil
			}
			m = a[k]
		}
	}
	return m
}

// recordingEngine wraps a Node: it can refuse every submission with a
// fixed result and records rejection notices (it is a Rejecter).
type recordingEngine struct {
	*node.Node
	refuse engine.AddResult
	// refuseRemote refuses (queue full) requests with a remote prefix, so
	// no pull to an arbitrary address is ever started.
	refuseRemote bool
	// refuseID, when set, refuses (queue full) the requests whose id it
	// matches.
	refuseID func(id string) bool

	mu       sync.Mutex
	rejected []xfer.Remote
}

func (e *recordingEngine) Start(req *engine.Request, opt node.SubmitOptions) *node.Stream {
	if e.refuse != engine.Accepted {
		return node.RefusedStream(req.ID, e.refuse)
	}
	if e.refuseID != nil && e.refuseID(req.ID) {
		return node.RefusedStream(req.ID, engine.RejectedQueueFull)
	}
	if e.refuseRemote && req.Remote != nil {
		return node.RefusedStream(req.ID, engine.RejectedQueueFull)
	}
	return e.Node.Start(req, opt)
}

func (e *recordingEngine) Reject(req *engine.Request) {
	e.mu.Lock()
	e.rejected = append(e.rejected, *req.Remote)
	e.mu.Unlock()
}

func (e *recordingEngine) takeRejected() []xfer.Remote {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.rejected
	e.rejected = nil
	return r
}

// failingWriter is a ResponseWriter whose writes fail, as to a client that
// has gone.
type failingWriter struct {
	h      http.Header
	status int
}

func (w *failingWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}
func (w *failingWriter) WriteHeader(s int)           { w.status = s }
func (w *failingWriter) Write(b []byte) (int, error) { return 0, io.ErrClosedPipe }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
