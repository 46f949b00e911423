package localcluster

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvlease/kvlease/proxy"
)

// fakeOptions runs engines as this test binary in fake-engine mode.
func fakeOptions(t *testing.T, mode string) Options {
	t.Helper()
	if mode == "" {
		mode = "ok"
	}
	return Options{Binary: os.Args[0], Env: []string{fakeEngineEnv + "=" + mode}, ReadyTimeout: 20 * time.Second,
		StopTimeout: 5 * time.Second}
}

func start(t *testing.T, opt Options) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func complete(t *testing.T, c *Cluster) (int, string) {
	t.Helper()
	resp, err := http.Post(c.URL()+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStartServeClose(t *testing.T) {
	opt := fakeOptions(t, "")
	opt.Decode = 2
	c := start(t, opt)
	es := c.Engines()
	if len(es) != 3 || es[0].Name() != "prefill0" || es[1].Name() != "decode0" || es[2].Name() != "decode1" ||
		es[2].Index != 2 || es[2].RoleIndex != 1 {
		t.Fatalf("engines %+v", es)
	}
	if got := c.URLs(proxy.RoleDecode); len(got) != 2 || got[0] != es[1].URL {
		t.Errorf("URLs(decode) = %v", got)
	}
	for i := range es {
		if !c.Running(i) || c.PID(i) == 0 {
			t.Errorf("engine %d not running", i)
		}
	}
	st, err := os.Stat(c.SecretFile())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("secret file: %v, %v", st, err)
	}
	for range 2 {
		if code, body := complete(t, c); code != 200 || !strings.Contains(body, "decoded by") {
			t.Errorf("through the proxy: %d %s", code, body)
		}
	}
	logDir := es[0].LogPath[:strings.LastIndex(es[0].LogPath, "/")]
	if b, _ := os.ReadFile(es[0].LogPath); !strings.Contains(string(b), "fake prefill engine on") {
		t.Errorf("prefill log: %q", b)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	c.Close() // twice is harmless
	for i := range es {
		if c.Running(i) {
			t.Errorf("engine %d still running after Close", i)
		}
	}
	if _, err := os.Stat(c.SecretFile()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("secret file left behind: %v", err)
	}
	if _, err := os.Stat(logDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary log directory left behind: %v", err)
	}
	if _, err := http.Get(c.URL() + "/health"); err == nil {
		t.Error("the proxy still answers after Close")
	}
	select {
	case x := <-c.Exits():
		t.Errorf("Close reported as an unexpected exit: %v", x)
	default:
	}
}

func TestKillStopRestart(t *testing.T) {
	opt := fakeOptions(t, "")
	opt.Decode = 2
	opt.LogDir = t.TempDir()
	c := start(t, opt)
	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	if c.Running(1) {
		t.Fatal("decode0 runs after Kill")
	}
	if err := c.Kill(1); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second Kill = %v, want ErrNotRunning", err)
	}
	for range 4 {
		if code, body := complete(t, c); code != 200 || !strings.Contains(body, "decoded by") {
			t.Fatalf("with decode0 killed: %d %s", code, body)
		}
	}
	oldPID := c.PID(1)
	if err := c.Restart(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if !c.Running(1) || c.PID(1) == oldPID {
		t.Error("decode0 not running again with a new process")
	}
	resp, err := http.Get(c.Engines()[1].URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("restarted engine on its old port: %v", err)
	}
	resp.Body.Close()
	if err := c.Restart(context.Background(), 2); err != nil { // a running one: stop, then start
		t.Fatal(err)
	}
	if err := c.Stop(0); err != nil {
		t.Fatal(err)
	}
	if code, body := complete(t, c); code != 502 || !strings.Contains(body, "no prefill engine could be reached") {
		t.Errorf("with the only prefill engine stopped: %d %s", code, body)
	}
	if b, _ := os.ReadFile(c.Engines()[0].LogPath); !strings.Contains(string(b), "fake engine: stopping") {
		t.Errorf("Stop did not let the engine shut down on SIGTERM; log %q", b)
	}
	if b, _ := os.ReadFile(c.Engines()[1].LogPath); strings.Count(string(b), "fake decode engine on") != 2 {
		t.Errorf("the log of a restarted engine should hold both runs: %q", b)
	}
	select {
	case x := <-c.Exits():
		t.Errorf("an exit asked for was reported: %v", x)
	default:
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Kill(99) did not panic")
			}
		}()
		c.Kill(99)
	}()
}

func TestUnexpectedExitIsReported(t *testing.T) {
	c := start(t, fakeOptions(t, ""))
	pid := c.PID(1)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case x := <-c.Exits():
		if x.Engine.Name() != "decode0" || x.PID != pid || x.Err == nil || !strings.Contains(x.LogTail, "fake decode engine on") ||
			!strings.Contains(x.String(), "decode0") || !strings.Contains(x.String(), "killed") {
			t.Errorf("report %+v: %s", x, x)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a killed engine was not reported")
	}
}

func TestStartFailures(t *testing.T) {
	if _, err := Start(context.Background(), fakeOptions(t, "fail")); err == nil ||
		!strings.Contains(err.Error(), "exited while starting") || !strings.Contains(err.Error(), "boom, failing as told") {
		t.Errorf("an engine that fails: %v", err)
	}
	opt := fakeOptions(t, "unhealthy")
	opt.ReadyTimeout = 300 * time.Millisecond
	if _, err := Start(context.Background(), opt); err == nil || !strings.Contains(err.Error(), "not healthy") {
		t.Errorf("an engine that never gets healthy: %v", err)
	}
	opt = fakeOptions(t, "")
	opt.Binary = "/nonexistent/kvlease"
	if _, err := Start(context.Background(), opt); err == nil || !strings.Contains(err.Error(), "starting prefill0") {
		t.Errorf("a missing binary: %v", err)
	}
	for _, o := range []Options{{Prefill: -1}, {Decode: MaxEngines + 1}, {ProxyPort: 70000}, {ReadyTimeout: -1}} {
		if _, err := Start(context.Background(), o); err == nil {
			t.Errorf("Start(%+v) succeeded", o)
		}
	}
}

func TestDefaultServeArgs(t *testing.T) {
	e := Engine{Role: "decode", Host: "127.0.0.1", Port: 1, TransferPort: 2, Profile: "tiny", Model: "m"}
	got := strings.Join(DefaultServeArgs(e, "/s"), " ")
	want := "serve --role decode --host 127.0.0.1 --port 1 --transfer-port 2 --profile tiny --cluster-secret-file /s --drain-timeout 5s --model m"
	if got != want {
		t.Errorf("DefaultServeArgs = %q, want %q", got, want)
	}
}

// TestPlaceAndPause: Place moves an engine to the port it chooses and runs
// it under a command prefix that execs in place (here env, as ip netns exec
// does), so the cluster's pid is the engine's and Pause, Resume and Stop
// reach it.
func TestPlaceAndPause(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the engine's environment and state from /proc (Linux)")
	}
	opt := fakeOptions(t, "")
	ports, err := freePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	opt.Place = func(e *Engine) []string {
		if e.Role == proxy.RoleDecode {
			e.Port = ports[0]
		}
		return []string{"env", "KVLEASE_PLACED=1"}
	}
	c := start(t, opt)
	d := c.Engines()[1]
	if d.Port != ports[0] || !strings.HasSuffix(d.URL, ":"+strconv.Itoa(ports[0])) {
		t.Fatalf("placed decode engine %+v, want port %d", d, ports[0])
	}
	if code, body := complete(t, c); code != 200 || !strings.Contains(body, "decoded by "+strconv.Itoa(ports[0])) {
		t.Fatalf("through the proxy: %d %s", code, body)
	}
	if env, _ := os.ReadFile("/proc/" + strconv.Itoa(c.PID(1)) + "/environ"); !strings.Contains(string(env), "KVLEASE_PLACED=1") {
		t.Fatal("the engine did not run under the prefix, or under another pid")
	}
	state := func() byte {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(c.PID(1)) + "/stat")
		_, after, _ := strings.Cut(string(b), ") ")
		return after[0]
	}
	if err := c.Pause(1); err != nil {
		t.Fatal(err)
	}
	waitState := func(want func(byte) bool, what string) {
		deadline := time.Now().Add(20 * time.Second)
		for !want(state()) {
			if time.Now().After(deadline) {
				t.Fatalf("decode0 not %s: state %c", what, state())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitState(func(s byte) bool { return s == 'T' }, "stopped after Pause")
	if err := c.Resume(1); err != nil {
		t.Fatal(err)
	}
	waitState(func(s byte) bool { return s != 'T' }, "running after Resume")
	if err := c.Pause(1); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(1); err != nil { // resumed by Stop, so SIGTERM acts
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(d.LogPath); !strings.Contains(string(b), "fake engine: stopping") {
		t.Errorf("a paused engine did not shut down on Stop's SIGTERM; log %q", b)
	}
	if err := c.Pause(1); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Pause of a stopped engine = %v, want ErrNotRunning", err)
	}
}

// TestPortTakenBeforeBind: an engine whose port another process took
// between freePorts and its bind is launched again on fresh ports (its
// failed launch not reported as an exit), at most portAttempts times, and
// then the error names the port and the cause.
func TestPortTakenBeforeBind(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	// takeFirst makes prefill0's first n launches use the taken port, as if
	// another process had bound it after freePorts released it.
	takeFirst := func(n int) (Options, *int) {
		opt := fakeOptions(t, "")
		launches := new(int)
		opt.ServeArgs = func(e Engine, secretFile string) []string {
			if e.Name() == "prefill0" {
				if *launches++; *launches <= n {
					e.Port = takenPort
				}
			}
			return DefaultServeArgs(e, secretFile)
		}
		return opt, launches
	}

	opt, launches := takeFirst(1)
	c := start(t, opt)
	if p := c.Engines()[0].Port; p == takenPort || *launches != 2 {
		t.Errorf("prefill0 on port %d after %d launches; port %d was taken", p, *launches, takenPort)
	}
	if code, body := complete(t, c); code != http.StatusOK {
		t.Errorf("after the retry: %d %s", code, body)
	}
	select {
	case x := <-c.Exits():
		t.Errorf("the launch that found its port taken was reported: %s", x)
	default:
	}

	opt, launches = takeFirst(portAttempts)
	_, err = Start(context.Background(), opt)
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), strconv.Itoa(takenPort)) ||
		*launches != portAttempts {
		t.Errorf("a port taken %d times: %d launches, %v", portAttempts, *launches, err)
	}
}
