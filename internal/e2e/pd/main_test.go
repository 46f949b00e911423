// Package pd holds the end-to-end tests of the P/D proxy and the local
// cluster (tests only): it builds the kvlease binary, starts real engines
// as child processes with package localcluster (as `kvlease up` does), and
// talks to the proxy with the official openai-go SDK, comparing against a
// single `kvlease serve --role both` engine and reading every engine's
// /metrics.
//
// The package has only test files, so it needs no place in the repository's
// purity classification.
package pd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/internal/kvleasebin"
	"github.com/kvlease/kvlease/localcluster"
)

const model = "kvlease-tiny" // serve's default name for the tiny profile

func TestMain(m *testing.M) {
	code := m.Run()
	if singleProc != nil {
		singleProc.Cmd.Process.Signal(os.Interrupt)
		singleProc.Wait()
	}
	kvleasebin.Remove()
	os.Exit(code)
}

// kvleaseBinary is the kvlease binary (built once per test process).
func kvleaseBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the kvlease binary and runs engines as processes")
	}
	return kvleasebin.Build(t)
}

// startCluster starts a cluster of the built binary; the test's cleanup
// closes it and fails the test if an engine died on its own.
func startCluster(t testing.TB, opt localcluster.Options) *localcluster.Cluster {
	t.Helper()
	opt.Binary = kvleaseBinary(t)
	opt.ReadyTimeout = 30 * time.Second
	c, err := localcluster.Start(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case x := <-c.Exits():
			t.Errorf("%s; log:\n%s", x, x.LogTail)
		default:
		}
		c.Close()
	})
	return c
}

// single is one `kvlease serve --role both` engine: the reference a P/D
// run must match token for token.
type single struct {
	url string
}

var (
	singleOnce sync.Once
	singleEng  single
	singleErr  error
	singleProc *kvleasebin.Process
)

// singleEngine starts the reference engine once per test process;
// TestMain stops it.
func singleEngine(t testing.TB) single {
	t.Helper()
	bin := kvleaseBinary(t)
	singleOnce.Do(func() {
		cmd := exec.Command(bin, "serve", "--role", "both", "--host", "127.0.0.1", "--port", "0", "--profile", "tiny")
		cmd.Stderr = io.Discard
		if singleProc, singleErr = kvleasebin.Serve(cmd, 30*time.Second); singleErr != nil {
			return
		}
		singleEng.url = singleProc.URL
		singleErr = waitHealthy(singleEng.url)
	})
	if singleErr != nil {
		t.Fatalf("single engine: %v", singleErr)
	}
	return singleEng
}

// serveSingle starts a `kvlease serve --role both` engine with args (the
// tiny profile unless they say otherwise) as a process on a port of its
// own choosing; the test's cleanup stops it. A start that fails shows the
// engine's log.
func serveSingle(t *testing.T, args ...string) string {
	t.Helper()
	bin := kvleaseBinary(t)
	var log bytes.Buffer // read once the process has exited
	cmd := exec.Command(bin, append([]string{"serve", "--role", "both", "--host", "127.0.0.1", "--port", "0"}, args...)...)
	cmd.Stderr = &log
	p, err := kvleasebin.Serve(cmd, 30*time.Second)
	if err != nil {
		t.Fatalf("%v; log:\n%s", err, log.String())
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		p.Wait()
	})
	if err := waitHealthy(p.URL); err != nil {
		cmd.Process.Kill()
		p.Wait()
		t.Fatalf("%v; log:\n%s", err, log.String())
	}
	return p.URL
}

func waitHealthy(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s/health not ready within 30s", url)
}

// client is an SDK client of base without retries, so each error is seen.
func client(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}
