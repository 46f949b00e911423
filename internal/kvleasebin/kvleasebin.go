// Package kvleasebin builds the kvlease command for the tests that run it
// as a process (internal/e2e/api, internal/e2e/pd, internal/e2e/scenarios,
// internal/chaos, cmd/kvlease): once per test process, into a temporary
// directory that Remove deletes. With KVLEASE_BINARY set, that binary is
// used instead (CI builds it once for every package's tests). Serve starts
// `kvlease serve --port 0` and learns the address the engine bound.
package kvleasebin

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	dir  string
	err  error
)

// Path builds cmd/kvlease the first time it is called and returns the
// binary's path, or the build's error (with the compiler's output).
func Path() (string, error) {
	once.Do(func() {
		if path = os.Getenv("KVLEASE_BINARY"); path != "" {
			return
		}
		if dir, err = os.MkdirTemp("", "kvlease-bin-*"); err != nil {
			return
		}
		path = filepath.Join(dir, "kvlease")
		if out, e := exec.Command("go", "build", "-o", path, "github.com/kvlease/kvlease/cmd/kvlease").CombinedOutput(); e != nil {
			err = errors.New("go build: " + e.Error() + "\n" + string(out))
		}
	})
	return path, err
}

// Build is Path for a test: it fails t when the build failed.
func Build(t testing.TB) string {
	t.Helper()
	p, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Remove deletes the built binary; a TestMain calls it after m.Run.
func Remove() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}
