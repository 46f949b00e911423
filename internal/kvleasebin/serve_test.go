package kvleasebin

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestServe reads the address from the announcement, and says why when a
// process exits first, announces something else, or says nothing in time.
func TestServe(t *testing.T) {
	p, err := Serve(exec.Command("sh", "-c", `printf 'kvlease serve on http://127.0.0.1:4242: model m\nmore\n'; exec sleep 30`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.Cmd.Process.Kill()
	if p.Wait() == nil || p.URL != "http://127.0.0.1:4242" || p.Line != "kvlease serve on http://127.0.0.1:4242: model m" {
		t.Errorf("URL %q, line %q", p.URL, p.Line)
	}
	for _, c := range []struct {
		script string
		want   string
	}{
		{"echo listen: address already in use >&2; exit 1", "exited (exit status 1) before announcing"},
		{"echo hello; exec sleep 30", `announced "hello"`},
		{"exec sleep 30", "did not announce its address within"},
	} {
		_, err := Serve(exec.Command("sh", "-c", c.script), 300*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.script, err, c.want)
		}
	}
}
