package interop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// waitTimeout bounds every wait for a condition (generous: the tests run
// beside others on a loaded machine).
const waitTimeout = 30 * time.Second

// kvleaseBin is the serving binary (kvlease-server, as the image runs it)
// built from the checkout this module's replace points at (../), once for
// the test process.
var kvleaseBin string

func TestMain(m *testing.M) {
	// llm-d's components log through controller-runtime's logger; the
	// tests check what they do, not what they say.
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "kvlease-interop-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kvleaseBin = filepath.Join(dir, "kvlease-server")
	build := exec.Command("go", "build", "-o", kvleaseBin, "./cmd/kvlease-server")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/kvlease-server: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// engine is one `kvlease serve` process.
type engine struct {
	URL string
	// Events and Replay are the KV events' PUB and ROUTER endpoints
	// (tcp://host:port) when serve publishes them.
	Events, Replay string
	// Line is serve's startup line.
	Line string
}

var (
	serveLine  = regexp.MustCompile(`^kvlease serve on (http://\S+): `)
	eventsLine = regexp.MustCompile(`kv events on (tcp://\S+) \((\w+) encoding(?:, replay on (tcp://\S+))?\)`)
)

// serve starts `kvlease serve` with args on a free port and waits for its
// startup line; the test's cleanup stops it with SIGTERM and fails the
// test if it does not exit cleanly.
func serve(t *testing.T, args ...string) engine {
	t.Helper()
	cmd := exec.Command(kvleaseBin, append([]string{"serve", "--host", "127.0.0.1", "--port", "0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &logBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	var e engine
	select {
	case l, ok := <-lines:
		m := serveLine.FindStringSubmatch(l)
		if !ok || m == nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("kvlease serve %v did not start: %q\n%s", args, l, stderr.String())
		}
		e = engine{URL: m[1], Line: l}
		if m := eventsLine.FindStringSubmatch(l); m != nil {
			e.Events, e.Replay = m[1], m[3]
		}
	case <-time.After(waitTimeout):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("kvlease serve %v did not start within %v\n%s", args, waitTimeout, stderr.String())
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("kvlease serve after SIGTERM: %v\n%s", err, stderr.String())
		}
	})
	return e
}

// logBuffer collects a process's stderr, which exec copies from a
// goroutine while a failing test may read it.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// metric returns the value of the series named exactly name (with its
// labels, as /metrics prints them) on url's /metrics, or -1 when absent.
func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	return -1
}

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("waited %v for %s", waitTimeout, what)
	}
}

// poll polls cond until it holds (true) or waitTimeout passes (false).
func poll(cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}
