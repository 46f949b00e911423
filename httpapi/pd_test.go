package httpapi

import (
	"net"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/wire"
)

const pdPrompt = "A prompt long enough for three blocks of sixteen tokens each, give or take."

// The prefill leg as vLLM's toy proxy and llm-d's sidecar send it.
const prefillBody = `{"model":"` + testModel + `","prompt":"` + pdPrompt + `","max_tokens":1,"stream":false,` +
	`"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`

var (
	hex16 = regexp.MustCompile(`^[0-9a-f]{16}$`)
	hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

func TestPrefillAnswersWithLease(t *testing.T) {
	n := newNode(t, nodeOpts{role: engine.RolePrefill})
	_, url := newServer(t, n, nil)
	resp := post(t, url+"/v1/completions", prefillBody, "X-Request-Id", "pd-1")
	m := readJSON(t, resp)
	kv, _ := m["kv_transfer_params"].(map[string]any)
	if resp.StatusCode != 200 || kv == nil {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	blocks := (len(pdPrompt) + 15) / 16
	ids, _ := kv["remote_block_ids"].([]any)
	ep, _ := n.TransferEndpoint()
	for k, want := range map[string]any{
		"do_remote_prefill": true, "do_remote_decode": false, "remote_engine_id": "engine-prefill",
		"remote_request_id": "pd-1", "remote_host": "127.0.0.1", "remote_port": float64(ep.Port), "tp_size": 1.0,
		"remote_num_tokens": float64(len(pdPrompt)),
	} {
		if kv[k] != want {
			t.Errorf("%s = %v, want %v", k, kv[k], want)
		}
	}
	if len(ids) != blocks {
		t.Errorf("remote_block_ids %v, want %d blocks", ids, blocks)
	}
	if id, _ := kv["lease_id"].(string); !hex16.MatchString(id) {
		t.Errorf("lease_id %v", kv["lease_id"])
	}
	if tok, _ := kv["lease_token"].(string); !hex32.MatchString(tok) {
		t.Errorf("lease_token %v", kv["lease_token"])
	}
	if ms, _ := kv["lease_expires_in_ms"].(float64); ms <= 0 || ms > 30000 {
		t.Errorf("lease_expires_in_ms %v", kv["lease_expires_in_ms"])
	}
	// The lease holds the prompt's blocks ...
	if s := n.Stats(); s.Pool.Held != blocks {
		t.Errorf("held %d, want the lease's %d", s.Pool.Held, blocks)
	}
	// ... until the proxy reports that its client left: revoked at once.
	resp = post(t, url+"/kvlease/v1/requests/pd-1/abort", "")
	if m := readJSON(t, resp); field(m, "result") != "already_finished" {
		t.Errorf("abort: %v", m)
	}
	if s := n.Stats(); s.Pool.Held != 0 {
		t.Errorf("held %d after the abort revoked the lease", s.Pool.Held)
	}
}

// The parsed response decodes into openai's types and round-trips as the
// decode leg's kv_transfer_params.
func TestPrefillParamsParseForDecode(t *testing.T) {
	n := newNode(t, nodeOpts{role: engine.RolePrefill})
	s, url := newServer(t, n, nil)
	resp := post(t, url+"/v1/completions", prefillBody, "X-Request-Id", "pd-2")
	m := readJSON(t, resp)
	raw, _ := jsonMarshal(m["kv_transfer_params"])
	kv, e := openai.ParseKVTransferParams(raw)
	if e != nil {
		t.Fatal(e)
	}
	if e := kv.Validate(); e != nil {
		t.Fatalf("the decode leg's params do not validate: %v", e)
	}
	// A decode engine turns them into the remote prefix to pull.
	d := newNode(t, nodeOpts{role: engine.RoleDecode})
	ds, err := New(d, Config{ModelName: testModel})
	if err != nil {
		t.Fatal(err)
	}
	var req engine.Request
	e = ds.setRemote(&req, kv, len(pdPrompt))
	r := req.Remote
	if e != nil || r == nil {
		t.Fatalf("remote: %v %v", r, e)
	}
	ep, _ := n.TransferEndpoint()
	if r.Addr != ep.Addr() || r.EngineID != "engine-prefill" || r.NumBlocks != (len(pdPrompt)+15)/16 ||
		r.NumTokens != len(pdPrompt) || r.Token.String() != kv.LeaseToken || r.Lease.Hex() != field(m, "kv_transfer_params", "lease_id") {
		t.Errorf("remote %+v from %s", r, raw)
	}
	_ = s
}

// A prefill answer that cannot be written releases the lease at once.
func TestPrefillUndeliveredReleases(t *testing.T) {
	n := newNode(t, nodeOpts{role: engine.RolePrefill})
	s, _ := newServer(t, n, nil)
	w := &failingWriter{}
	req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(prefillBody))
	req.Header.Set("X-Request-Id", "pd-3")
	s.ServeHTTP(w, req)
	if w.status != 200 {
		t.Fatalf("status %d", w.status)
	}
	waitFor(t, "the undelivered lease to be released", func() bool { return n.Stats().Pool.Held == 0 })
}

func TestPrefillRefusesStreaming(t *testing.T) {
	_, url := newServer(t, newNode(t, nodeOpts{role: engine.RolePrefill}), nil)
	resp := post(t, url+"/v1/completions", strings.Replace(prefillBody, `"stream":false`, `"stream":true`, 1))
	if m := readJSON(t, resp); resp.StatusCode != 400 || field(m, "error", "param") != "stream" {
		t.Errorf("%d %v", resp.StatusCode, m)
	}
}

// decodeBody is a decode leg carrying a lease from P.
func decodeBody(extra string) string {
	return `{"model":"` + testModel + `","prompt":"` + pdPrompt + `","max_tokens":4` + extra + `,"kv_transfer_params":{` +
		`"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"p1","remote_request_id":"r",` +
		`"remote_host":"127.0.0.1","remote_port":9001,"remote_block_ids":[[4,5,6,7,8]],"tp_size":1,"remote_num_tokens":75,` +
		`"lease_token":"00112233445566778899aabbccddeeff","lease_expires_in_ms":29000,"lease_id":"00000000000000ab","x_extra":{"a":1}}}`
}

// Every refusal of a decode leg before admission tells P at once.
func TestDecodeRejectionsReleaseTheLease(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		hdr    []string
		refuse engine.AddResult
		status int
	}{
		{"wrong type elsewhere", strings.Replace(decodeBody(""), `"max_tokens":4`, `"max_tokens":"4"`, 1), nil, 0, 400},
		{"invalid value", decodeBody(`,"temperature":7`), nil, 0, 400},
		{"unsupported", decodeBody(`,"suffix":"x"`), nil, 0, 400},
		{"unknown model", strings.Replace(decodeBody(""), testModel, "other", 1), nil, 0, 404},
		{"too long", strings.Replace(decodeBody(""), `"max_tokens":4`, `"max_tokens":5000`, 1), nil, 0, 400},
		{"bad request id", decodeBody(""), []string{"X-Request-Id", "bad id"}, 0, 400},
		{"queue full", decodeBody(""), nil, engine.RejectedQueueFull, 429},
		{"shutting down", decodeBody(""), nil, engine.RejectedShuttingDown, 503},
		{"inconsistent blocks", strings.Replace(decodeBody(""), `"remote_num_tokens":75`, `"remote_num_tokens":20`, 1), nil, 0, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := &recordingEngine{Node: newNode(t, nodeOpts{role: engine.RoleDecode}), refuse: tc.refuse}
			_, url := newServer(t, eng, nil)
			resp := post(t, url+"/v1/completions", tc.body, tc.hdr...)
			m := readJSON(t, resp)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %v", resp.StatusCode, tc.status, m)
			}
			rej := eng.takeRejected()
			if len(rej) == 0 {
				t.Fatal("P was not told")
			}
			r := rej[0]
			if r.Lease != wire.LeaseID(0xab) || r.Token.String() != "00112233445566778899aabbccddeeff" || r.Addr != "127.0.0.1:9001" || r.ExpiresIn.Milliseconds() != 29000 {
				t.Errorf("rejected %+v", r)
			}
		})
	}
}

// Params that cannot name a lease cannot release one; the client is told
// which field is wrong.
func TestDecodeBadParams(t *testing.T) {
	eng := &recordingEngine{Node: newNode(t, nodeOpts{role: engine.RoleDecode})}
	_, url := newServer(t, eng, nil)
	for _, tc := range []struct{ from, to, param string }{
		{`,"lease_id":"00000000000000ab"`, ``, "kv_transfer_params.lease_id"},
		{`"lease_id":"00000000000000ab"`, `"lease_id":"xyz"`, "kv_transfer_params.lease_id"},
		{`"lease_token":"00112233445566778899aabbccddeeff",`, ``, "kv_transfer_params.lease_token"},
		{`"remote_port":9001`, `"remote_port":"9001"`, "kv_transfer_params.remote_port"},
	} {
		resp := post(t, url+"/v1/completions", strings.Replace(decodeBody(""), tc.from, tc.to, 1))
		if m := readJSON(t, resp); resp.StatusCode != 400 || field(m, "error", "param") != tc.param {
			t.Errorf("%s -> %s: %d %v", tc.from, tc.to, resp.StatusCode, m)
		}
	}
	if rej := eng.takeRejected(); len(rej) != 0 {
		t.Errorf("rejected %v without a usable lease", rej)
	}
}

// Without a Rejecter, the server makes the core send the notice: the core
// counts an invalid submission. (node.Node is a Rejecter; plainEngine
// hides its Reject.)
func TestDecodeRejectionThroughCore(t *testing.T) {
	n := newNode(t, nodeOpts{role: engine.RoleDecode})
	_, url := newServer(t, plainEngine{n}, nil)
	resp := post(t, url+"/v1/completions", strings.Replace(decodeBody(""), testModel, "other", 1))
	readJSON(t, resp)
	if got := n.Stats().Rejected[engine.RejectedInvalid]; got != 1 {
		t.Errorf("core rejections %d, want 1", got)
	}
}

// plainEngine is an Engine that is not a Rejecter.
type plainEngine struct{ Engine }

// The node is the server's Rejecter: a decode engine's own refusals reach
// P through it, also while it drains.
func TestNodeIsRejecter(t *testing.T) {
	var eng Engine = newNode(t, nodeOpts{role: engine.RoleDecode})
	if _, ok := eng.(Rejecter); !ok {
		t.Fatal("node.Node is not a Rejecter")
	}
}

// A decode engine that is shutting down answers 503, and the prefill
// engine hears at once that its lease will not be read (RELEASE rejected).
func TestDrainingDecodeReleasesTheLease(t *testing.T) {
	p := newNode(t, nodeOpts{role: engine.RolePrefill})
	_, pURL := newServer(t, p, nil)
	d := newNode(t, nodeOpts{role: engine.RoleDecode})
	_, dURL := newServer(t, d, nil)
	m := readJSON(t, post(t, pURL+"/v1/completions", prefillBody, "X-Request-Id", "pd-drain"))
	raw, _ := jsonMarshal(m["kv_transfer_params"])
	d.Drain()
	body := `{"model":"` + testModel + `","prompt":"` + pdPrompt + `","max_tokens":4,"kv_transfer_params":` + string(raw) + `}`
	resp := post(t, dURL+"/v1/completions", body, "X-Request-Id", "pd-drain")
	if e := readJSON(t, resp); resp.StatusCode != 503 {
		t.Fatalf("draining decode engine answered %d %v, want 503", resp.StatusCode, e)
	}
	waitFor(t, "P to release the lease as rejected", func() bool {
		st := p.Stats()
		return st.Producer.Released[wire.ReasonRejected] == 1 && st.Producer.Active == 0 && st.Pool.Held == 0
	})
}

// silentPeer listens on loopback, accepts and never answers: a prefill
// engine that hangs. It returns the port.
func silentPeer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// An admitted decode leg waits for its remote prefix; an abort ends it.
func TestDecodeAdmittedThenAborted(t *testing.T) {
	n := newNode(t, nodeOpts{role: engine.RoleDecode})
	_, url := newServer(t, n, nil)
	body := strings.Replace(decodeBody(""), `"remote_port":9001`, `"remote_port":`+silentPeer(t), 1)
	done := make(chan map[string]any, 1)
	go func() {
		resp := post(t, url+"/v1/completions", body, "X-Request-Id", "d-1")
		done <- readJSON(t, resp)
	}()
	waitFor(t, "the request to wait for its prefix", func() bool { return n.Stats().Requests == 1 })
	resp := post(t, url+"/kvlease/v1/requests/d-1/abort", "")
	if m := readJSON(t, resp); field(m, "result") != "aborted" {
		t.Errorf("abort: %v", m)
	}
	m := <-done
	if field(m, "choices", 0, "finish_reason") != "abort" {
		t.Errorf("response %v", m)
	}
}

// An engine without P/D transfer ignores the fields and serves the request
// whole, as vLLM does without a KV connector.
func TestSingleEngineIgnoresPDFields(t *testing.T) {
	n := newNode(t, nodeOpts{})
	_, url := newServer(t, n, nil)
	for _, body := range []string{prefillBody, decodeBody("")} {
		resp := post(t, url+"/v1/completions", body)
		m := readJSON(t, resp)
		if resp.StatusCode != 200 || m["kv_transfer_params"] != nil || field(m, "choices", 0, "text") == nil {
			t.Errorf("%d %v", resp.StatusCode, m)
		}
	}
	if s := n.Stats(); s.Pool.Held != 0 {
		t.Errorf("held %d", s.Pool.Held)
	}
}

func TestLeaseIDFormat(t *testing.T) {
	for _, id := range []wire.LeaseID{1, 0xab, 0xffffffffffffffff, 0x0123456789abcdef} {
		s := id.Hex()
		kv := &openai.KVTransferParams{Extra: []openai.KVExtraField{{Key: LeaseIDField, Value: []byte(`"` + s + `"`)}}}
		got, e := leaseID(kv)
		var req engine.Request
		err := node.PullRemote(&req, node.Pull{LeaseID: got}, engine.Config{})
		if !hex16.MatchString(s) || e != nil || got != s || err != nil || req.Remote.Lease != id {
			t.Errorf("%#x -> %q -> %q %v %v", uint64(id), s, got, e, err)
		}
	}
}
