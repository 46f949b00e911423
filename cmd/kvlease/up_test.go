package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/cmd/internal/clitest"
)

func TestUpFlagsAreValidated(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--prefill", "0"}, "--prefill 0"},
		{[]string{"--decode", "65"}, "--decode 65"},
		{[]string{"--port", "-1"}, "--port"},
		{[]string{"--policy", "x"}, "--policy"},
		{[]string{"--profile", ""}, "--profile"},
		{[]string{"--ready-timeout", "0s"}, "--ready-timeout"},
		{[]string{"--tls-client-certs"}, "--tls-client-certs: needs --tls"},
	}
	for _, c := range cases {
		code, _, stderr := runCmd(t, append([]string{"up"}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("up %v: exit %d, stderr %q; want 1 and %q", c.args, code, stderr, c.want)
		}
	}
	opt, _, err := parseUpFlags([]string{"--decode", "2", "--serve-args", " --num-blocks  64 ", "--policy", "least-loaded"}, io.Discard)
	if err != nil || opt.Prefill != 1 || opt.Decode != 2 || opt.Profile != "tiny" || opt.ProxyPort != 8080 ||
		strings.Join(opt.ExtraServeArgs, " ") != "--num-blocks 64" || opt.Policy.String() != "least-loaded" {
		t.Errorf("parseUpFlags = %+v, %v", opt, err)
	}
	if opt, _, err := parseUpFlags([]string{"--tls", "--tls-client-certs"}, io.Discard); err != nil || opt.TLS == nil || !opt.ClientCerts {
		t.Errorf("--tls --tls-client-certs: %+v, %v", opt, err)
	}
}

// buildUpFake builds the stand-in for kvlease serve (testdata/upfake).
func buildUpFake(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "upfake")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/upfake").CombinedOutput(); err != nil {
		t.Fatalf("building the fake engine: %v\n%s", err, out)
	}
	return bin
}

func TestUpRunsAClusterAndStops(t *testing.T) {
	bin := buildUpFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb clitest.Buffer
	exited := make(chan int, 1)
	logDir := t.TempDir()
	go func() {
		exited <- program.Run(ctx, []string{"up", "--binary", bin, "--port", "0", "--decode", "2", "--log-dir", logDir,
			"--serve-args", "--num-blocks 64"}, &out, &errb)
	}()
	m := clitest.WaitFor(t, &out, regexp.MustCompile(`(?s)proxy\s+(http://\S+).*decode1 .*Ctrl-C stops everything`), exited)
	// The printed curl works (run as a shell would, if curl is here).
	curl := regexp.MustCompile(`(?s)  (curl -s http\S+/v1/completions.*?)\n\n`).FindStringSubmatch(out.String())
	if curl == nil {
		t.Fatalf("no curl command printed:\n%s", out.String())
	}
	if _, err := exec.LookPath("curl"); err == nil {
		got, err := exec.Command("sh", "-c", strings.ReplaceAll(curl[1], "\\\n", "")).CombinedOutput()
		if err != nil || !strings.Contains(string(got), "hello from upfake") {
			t.Errorf("the printed curl: %v: %s", err, got)
		}
	} else {
		resp, err := http.Post(m[1]+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	if !strings.Contains(out.String(), "stopped (logs kept in "+logDir) {
		t.Errorf("no stop message:\n%s", out.String())
	}
	if _, err := http.Get(m[1] + "/health"); err == nil {
		t.Error("the proxy still answers after up stopped")
	}
}

func TestUpReportsADyingEngine(t *testing.T) {
	bin := buildUpFake(t)
	t.Setenv("UPFAKE_DIE_AFTER_HEALTH", "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb clitest.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- program.Run(ctx, []string{"up", "--binary", bin, "--port", "0", "--log-dir", t.TempDir()}, &out, &errb)
	}()
	clitest.WaitFor(t, &errb, regexp.MustCompile(`(?s)engine decode0 \(pid \d+, \S+\) exited unexpectedly: exit status 7.*upfake: dying as told`), exited)
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("exit %d", code)
	}
}

func TestUpFailsClearlyWhenAnEngineCannotStart(t *testing.T) {
	code, _, stderr := runCmd(t, "up", "--binary", "/bin/false", "--port", "0", "--log-dir", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "exited while starting") || !strings.Contains(stderr, "logs are in") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestUpPortTaken: with the proxy's port taken, kvlease up says so and
// suggests --port before it starts anything (here --binary names no
// program: starting an engine would fail with another error).
func TestUpPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	code, stdout, stderr := runCmd(t, "up", "--port", port, "--binary", filepath.Join(t.TempDir(), "none"), "--log-dir", t.TempDir())
	if code != 1 || stdout != "" || !strings.Contains(stderr, "--port "+port+": cannot listen on 127.0.0.1:"+port) ||
		!strings.Contains(stderr, "nothing was started: pick another with --port ") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
