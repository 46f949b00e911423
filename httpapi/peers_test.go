package httpapi

import (
	"strings"
	"testing"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/openai"
)

func TestKVPeers(t *testing.T) {
	p, err := ParseKVPeers(" 10.1.0.0/16, 192.168.7.9 ,fd00::/8, p0.prefill.svc:9000, [::1]:9001")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		ok   bool
	}{
		{"10.1.2.3", 9000, true}, {"10.1.2.3", 1, true}, {"10.2.0.1", 9000, false},
		{"192.168.7.9", 9000, true}, {"192.168.7.10", 9000, false}, {"::ffff:192.168.7.9", 9000, true},
		{"fd12::7", 9000, true}, {"fe80::1", 9000, false},
		{"p0.prefill.svc", 9000, true}, {"P0.Prefill.SVC", 9000, true}, {"p0.prefill.svc", 9001, false}, {"p1.prefill.svc", 9000, false},
		{"::1", 9001, true}, {"[::1]", 9001, true}, {"::1", 9000, false},
		{"localhost", 9001, false}, // names are not resolved
	} {
		if got := p.Allow(tc.host, tc.port); got != tc.ok {
			t.Errorf("Allow(%s, %d) = %v, want %v", tc.host, tc.port, got, tc.ok)
		}
	}
	for _, bad := range []string{"", " , ", "10.0.0.0/33", "host", "host:0", "host:x", ":9000"} {
		if _, err := ParseKVPeers(bad); err == nil {
			t.Errorf("ParseKVPeers(%q) accepted", bad)
		}
	}
}

// TestDecodeKVPeersRefuse: a decode engine with --kv-peers refuses, with
// 400 naming the endpoint and before dialling anything (no rejection
// notice goes to the named P), a request whose kv_transfer_params name an
// endpoint it does not allow, and admits one it allows.
func TestDecodeKVPeersRefuse(t *testing.T) {
	eng := &recordingEngine{Node: newNode(t, nodeOpts{role: engine.RoleDecode})}
	body := decodeBody("")
	if !strings.Contains(body, `"remote_host":"127.0.0.1"`) || !strings.Contains(body, `"remote_port":9001`) {
		t.Fatalf("decodeBody changed: %s", body)
	}
	peers, err := ParseKVPeers("10.0.0.0/8,127.0.0.1:9002")
	if err != nil {
		t.Fatal(err)
	}
	_, url := newServer(t, eng, func(c *Config) { c.KVPeers = peers })
	resp := post(t, url+"/v1/completions", body)
	m := readJSON(t, resp)
	if msg, _ := field(m, "error", "message").(string); resp.StatusCode != 400 || field(m, "error", "param") != "kv_transfer_params.remote_host" ||
		!strings.Contains(msg, "127.0.0.1:9001") || !strings.Contains(msg, "--kv-peers") {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	if rej := eng.takeRejected(); len(rej) != 0 {
		t.Errorf("sent a rejection notice to a peer it may not dial: %v", rej)
	}
	allowed, _ := ParseKVPeers("127.0.0.0/8")
	ds, _ := newServer(t, eng, func(c *Config) { c.KVPeers = allowed })
	raw := body[strings.Index(body, `"kv_transfer_params":`)+len(`"kv_transfer_params":`) : len(body)-1]
	kv, e := openai.ParseKVTransferParams([]byte(raw))
	if e != nil {
		t.Fatal(e)
	}
	var req engine.Request
	if e := ds.setRemote(&req, kv, 8); e != nil || req.Remote.Addr != "127.0.0.1:9001" {
		t.Errorf("an allowed endpoint: %v %v", req.Remote, e)
	}
}
