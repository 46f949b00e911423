package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/cmd/internal/clitest"
)

func TestProxyFlagsAreValidated(t *testing.T) {
	ok := []string{"--prefill", "http://127.0.0.1:8100", "--decode", "http://127.0.0.1:8200"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--decode", "http://a:1"}, "--prefill: give at least one"},
		{[]string{"--prefill", "http://a:1"}, "--decode: give at least one"},
		{[]string{"--prefill", "127.0.0.1:8100", "--decode", "http://a:1"}, "--prefill"},
		{[]string{"--prefill", "http://a:1", "--decode", "http://a:1/v1"}, "--decode"},
		{append([]string{"--policy", "random"}, ok...), "--policy"},
		{append([]string{"--port", "70000"}, ok...), "--port"},
		{append([]string{"--max-body-bytes", "0"}, ok...), "--max-body-bytes"},
		{append([]string{"--decode-attempts", "0"}, ok...), "--decode-attempts"},
		{append([]string{"--prefill-timeout", "-1s"}, ok...), "--prefill-timeout"},
		{append([]string{"--scrape-interval", "-1s"}, ok...), "--scrape-interval"},
		{[]string{"--prefill", "http://a:1,http://a:1", "--decode", "http://b:1"}, "listed twice"},
	}
	for _, c := range cases {
		code, _, stderr := runCmd(t, append([]string{"proxy"}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("proxy %v: exit %d, stderr %q; want 1 and %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, _ := runCmd(t, "proxy", "--prefill"); code != 2 {
		t.Errorf("a flag without its value: exit %d, want 2", code)
	}
	f, err := parseProxyFlags(append([]string{"--policy", "least-loaded", "--port", "0", "--host", "::1"},
		"--prefill", "http://p:1, http://q:2", "--decode", "http://d:3/"), io.Discard)
	if err != nil || f.addr != "[::1]:0" || len(f.cfg.Prefill) != 2 || f.cfg.Decode[0] != "http://d:3" ||
		f.cfg.Route.Policy.String() != "least-loaded" {
		t.Errorf("parseProxyFlags = %+v, %v", f, err)
	}
}

func TestProxyServesAndStops(t *testing.T) {
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"choices":[],"kv_transfer_params":{"do_remote_prefill":true}}`))
	}))
	defer p.Close()
	var decodeBody string
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			return
		}
		b, _ := io.ReadAll(r.Body)
		decodeBody = string(b)
		w.Write([]byte(`{"choices":[{"text":"hi"}]}`))
	}))
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb clitest.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- Program{Name: "kvlease"}.Run(ctx, []string{"proxy", "--port", "0", "--prefill", p.URL, "--decode", d.URL}, &out, &errb)
	}()
	m := clitest.WaitFor(t, &out, regexp.MustCompile(`kvlease proxy on (http://\S+) `), exited)
	resp, err := http.Post(m[1]+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"choices":[{"text":"hi"}]}` ||
		decodeBody != `{"prompt":"x","kv_transfer_params":{"do_remote_prefill":true}}` {
		t.Errorf("through the proxy: %d %s; decode leg %s", resp.StatusCode, body, decodeBody)
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("exit %d after cancel; stderr %s", code, errb.String())
	}
}
