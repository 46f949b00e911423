package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestViaNames(t *testing.T) {
	const me = "kvlease-0123456789abcdef"
	for _, c := range []struct {
		vs   []string
		want bool
	}{
		{nil, false},
		{[]string{"1.1 " + me}, true},
		{[]string{"2 " + me}, true},
		{[]string{"1.0 fred, 1.1 p.example.net"}, false},
		{[]string{"1.0 fred, 1.1 " + me + " (kvlease)"}, true},
		{[]string{"1.1 envoy", "HTTP/1.1  \t" + me}, true},
		{[]string{"1.1 " + me + "0"}, false},    // another pseudonym that starts the same
		{[]string{"1.1 x-" + me}, false},        // or ends the same
		{[]string{me}, false},                   // no protocol: not an entry received by me
		{[]string{",, 1.1 a ,1.1 " + me}, true}, // empty members
		{[]string{"1.1 a (" + me + ")"}, false}, // a comment naming it
	} {
		if got := viaNames(c.vs, me); got != c.want {
			t.Errorf("viaNames(%q) = %v, want %v", c.vs, got, c.want)
		}
	}
}

// loopProxy is a proxy serving on a listener bound before New, so that
// its own URL can be one of its engines.
type loopProxy struct {
	p   *Proxy
	ln  net.Listener
	url string
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func serveProxy(t *testing.T, ln net.Listener, prefill, decode []string) *loopProxy {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ScrapeInterval = 0
	cfg.Prefill, cfg.Decode = prefill, decode
	p, err := New(cfg)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, ln, 10*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		p.Close()
	})
	return &loopProxy{p: p, ln: ln, url: "http://" + ln.Addr().String()}
}

func (lp *loopProxy) outcome(o string) float64 {
	return testutil.ToFloat64(lp.p.m.requests.WithLabelValues(o))
}

// postLoop sends a completion to url and returns the status and body.
func postLoop(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

const loopMessage = "this request already passed through this kvlease proxy"

// TestLoopToItself: a proxy one of whose engine URLs is its own answers
// 508 naming the loop at once (not 429 after 4,096 nested requests), for a
// streamed request too, and counts loop_detected (the pass that came back
// and the pass that forwarded it).
func TestLoopToItself(t *testing.T) {
	t.Run("prefill", func(t *testing.T) {
		ln := listenLoopback(t)
		d := newFake(t, RoleDecode)
		px := serveProxy(t, ln, []string{"http://" + ln.Addr().String()}, []string{d.url()})
		for _, body := range []string{`{"prompt":"hi"}`, `{"prompt":"hi","stream":true}`} {
			code, got := postLoop(t, px.url, body)
			if code != http.StatusLoopDetected || !strings.Contains(got, loopMessage) || !strings.Contains(got, px.p.viaName) {
				t.Errorf("%s: %d %s", body, code, got)
			}
		}
		if n := px.outcome(OutcomeLoopDetected); n != 4 {
			t.Errorf("loop_detected %v, want 4 (two requests, two passes each)", n)
		}
		if n := px.outcome(OutcomeOverloaded); n != 0 {
			t.Errorf("overloaded %v", n)
		}
		if n := len(d.requests()); n != 0 {
			t.Errorf("D got %d requests", n)
		}
	})
	t.Run("decode", func(t *testing.T) {
		ln := listenLoopback(t)
		p := newFake(t, RolePrefill)
		px := serveProxy(t, ln, []string{p.url()}, []string{"http://" + ln.Addr().String()})
		code, got := postLoop(t, px.url, `{"prompt":"hi"}`)
		if code != http.StatusLoopDetected || !strings.Contains(got, loopMessage) {
			t.Errorf("%d %s", code, got)
		}
		if n := px.outcome(OutcomeLoopDetected); n != 2 {
			t.Errorf("loop_detected %v, want 2", n)
		}
		// The outer pass's prefill leg went to P, which holds a lease:
		// released at once, not tried on another decode engine.
		if reqs := p.requests(); len(reqs) != 1 || p.abortCount(reqs[0].id) != 1 {
			t.Errorf("P: %d requests, aborts %d", len(reqs), p.totalAborts())
		}
	})
	t.Run("models", func(t *testing.T) {
		ln := listenLoopback(t)
		p := newFake(t, RolePrefill)
		px := serveProxy(t, ln, []string{p.url()}, []string{"http://" + ln.Addr().String()})
		resp, err := http.Get(px.url + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusLoopDetected || !strings.Contains(string(b), loopMessage) {
			t.Errorf("%d %s", resp.StatusCode, b)
		}
	})
}

// TestLoopBetweenTwoProxies: proxies A and B, each the other's prefill
// engine: the request comes back to A, which answers 508, and B and A
// pass that to the client.
func TestLoopBetweenTwoProxies(t *testing.T) {
	lnA, lnB := listenLoopback(t), listenLoopback(t)
	d := newFake(t, RoleDecode)
	a := serveProxy(t, lnA, []string{"http://" + lnB.Addr().String()}, []string{d.url()})
	b := serveProxy(t, lnB, []string{"http://" + lnA.Addr().String()}, []string{d.url()})
	code, got := postLoop(t, a.url, `{"prompt":"hi"}`)
	if code != http.StatusLoopDetected || !strings.Contains(got, loopMessage) || !strings.Contains(got, a.p.viaName) {
		t.Errorf("%d %s", code, got)
	}
	if na, nb := a.outcome(OutcomeLoopDetected), b.outcome(OutcomeLoopDetected); na != 2 || nb != 1 {
		t.Errorf("loop_detected: A %v (want 2), B %v (want 1)", na, nb)
	}
	if n := a.outcome(OutcomeOverloaded) + b.outcome(OutcomeOverloaded); n != 0 {
		t.Errorf("overloaded %v", n)
	}
}

// TestViaOnLegs: both legs of a normal request carry one Via entry, the
// proxy's, after the client's own entries when it sent some.
func TestViaOnLegs(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	if resp := r.post("/v1/completions", `{"prompt":"hi"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, readAll(t, resp))
	}
	want := "1.1 " + r.p.viaName
	for _, f := range []*fakeEngine{r.pre[0], r.dec[0]} {
		reqs := f.requests()
		if len(reqs) != 1 {
			t.Fatalf("%s: %d requests", f.role, len(reqs))
		}
		if got := reqs[0].header["Via"]; len(got) != 1 || got[0] != want {
			t.Errorf("%s got Via %q, want [%q]", f.role, got, want)
		}
	}
	if resp := r.post("/v1/completions", `{"prompt":"hi"}`, "Via", "1.1 envoy"); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, readAll(t, resp))
	}
	for _, f := range []*fakeEngine{r.pre[0], r.dec[0]} {
		reqs := f.requests()
		if got := reqs[len(reqs)-1].header.Values("Via"); strings.Join(got, ", ") != "1.1 envoy, "+want {
			t.Errorf("%s got Via %q after the client's 1.1 envoy", f.role, got)
		}
	}
}
