package scenarios

import (
	"testing"

	"github.com/kvlease/kvlease/httpserver/httpservertest"
	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/proxy"
)

// The fault API used as intended: to test a router. kvlease's own proxy
// (in process, round robin over the decode engines, so its first pick is
// the first engine) routes requests to real engines with faults injected;
// the test checks what the proxy's client gets and that no engine holds a
// block afterwards.

// newProxy starts a proxy over p and ds (a fresh one: its round robin
// starts at ds[0]).
func newProxy(t *testing.T, p *engine, ds ...*engine) string {
	t.Helper()
	cfg := proxy.DefaultConfig()
	cfg.Prefill = []string{p.url}
	for _, d := range ds {
		cfg.Decode = append(cfg.Decode, d.url)
	}
	cfg.ScrapeInterval = 0
	px, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httpservertest.NewServer(px)
	t.Cleanup(func() { ts.Close(); px.Close() })
	return ts.URL + "/v1/completions"
}

// clientBody is j as a client sends it to the proxy.
func clientBody(j job) string { return completionBody(j, "") }

func TestE2EFaultsThroughProxy(t *testing.T) {
	skipShort(t)
	p := startP(t, faultArgs()...)
	d1 := startD(t, "D1", faultArgs()...)
	d2 := startD(t, "D2", faultArgs()...)
	newJob := func(id string) job {
		return job{id: id, prompt: pdPrompt + " Proxied " + id + ".", maxTokens: 10, seed: 5}
	}
	run := func(name string, body func(t *testing.T, c counters)) { faultCase(t, name, body, p, d1, d2) }

	// D1 rejects the decode leg with a 503: the proxy tries D2 with the
	// same kv_transfer_params. D1 told P, so D2 usually finds the lease
	// released and recomputes; if D2's read reached P before D1's notice,
	// it pulls. The client gets the right answer either way.
	run("decode_rejected_then_retried", func(t *testing.T, c counters) {
		url := newProxy(t, p, d1, d2)
		j := newJob("px-reject")
		d1.addFault(t, `{"kind":"reject_decode","status":503,"scope":{"request_id":"px-*"}}`)
		textOf(t, j, send(url, clientBody(j), j.id))
		rej, done := c.released(t, p, "rejected"), c.released(t, p, "read_done")
		if rej+done != 1 {
			t.Errorf("P released %v as rejected and %v as read_done, want one lease", rej, done)
		}
		wantInjected(t, d1, c.d, "reject_decode", 1)
		t.Logf("P released the lease as %s", map[bool]string{true: "rejected (D2 recomputed)", false: "read_done (D2 pulled first)"}[rej == 1])
	})

	// The only decode engine rejects: the client gets a 503 and the lease
	// is gone (D's notice, or the proxy's abort, whichever came first; an
	// abort that P handles before it has noted its answer delivered ends
	// the lease as undelivered).
	run("decode_rejected_nowhere_else", func(t *testing.T, c counters) {
		url := newProxy(t, p, d1)
		j := newJob("px-reject-only")
		d1.addFault(t, `{"kind":"reject_decode","status":503,"scope":{"request_id":"px-*"}}`)
		if l := send(url, clientBody(j), j.id); l.status != 503 {
			t.Fatalf("client: %d %v %v", l.status, l.err, l.body)
		}
		e2e.WaitFor(t, "P to release the lease", func() bool {
			return c.released(t, p, "rejected")+c.released(t, p, "aborted")+c.released(t, p, "undelivered") == 1
		})
	})

	// P drops its answer after the grant: the proxy answers 502 and P
	// frees the lease as undelivered at once.
	run("prefill_answer_dropped", func(t *testing.T, c counters) {
		url := newProxy(t, p, d1)
		j := newJob("px-drop")
		p.addFault(t, `{"kind":"drop_response","scope":{"request_id":"px-*"}}`)
		if l := send(url, clientBody(j), j.id); l.status != 502 {
			t.Fatalf("client: %d %v %v", l.status, l.err, l.body)
		}
		c.wantReleasedSince(t, p, map[string]float64{"undelivered": 1})
	})

	// The lease expires at once: D recomputes and the client never knows.
	run("lease_expired_early", func(t *testing.T, c counters) {
		url := newProxy(t, p, d1)
		j := newJob("px-expire")
		p.addFault(t, `{"kind":"expire_lease","scope":{"request_id":"px-*"}}`)
		textOf(t, j, send(url, clientBody(j), j.id))
		c.wantReleasedSince(t, p, map[string]float64{"expired": 1})
		wantFallbacks(t, d1, c.d, "lease_gone", 1)
	})
}
