package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/cmd/internal/cli"
	"github.com/kvlease/kvlease/internal/kvleasebin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kvleasebin.Remove()
	os.Exit(code)
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := program.Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCommands: kvlease has the serving commands and the tools, and lists
// them all.
func TestCommands(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-h")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: kvlease <command>") {
		t.Fatalf("-h: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, name := range []string{"bench", "chaos", "demo", "proxy", "serve", "sim", "up", "version"} {
		if !strings.Contains(stdout, "\n  "+name+" ") {
			t.Errorf("-h does not list %s:\n%s", name, stdout)
		}
	}
}

// TestHelpOnStdout: -h and --help of every command print its usage, its
// summary and its flags on stdout and exit 0, as Go's own tools do (so
// `kvlease serve -h | less` shows them).
func TestHelpOnStdout(t *testing.T) {
	for _, c := range cli.Commands() {
		for _, h := range []string{"-h", "--help"} {
			code, stdout, stderr := runCmd(t, c.Name, h)
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: kvlease "+c.Name+" [flags]\n\n"+c.Summary+"\n") {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", c.Name, h, code, stdout, stderr)
			}
		}
	}
	if _, stdout, _ := runCmd(t, "serve", "-h"); !strings.Contains(stdout, "-kv-events-encoding string") {
		t.Errorf("serve -h lists no flags:\n%s", stdout)
	}
}

// TestBadFlagOneLine: the tools follow the rule of every command: a flag
// the flag package refuses is one line naming it, then a pointer to the
// command's -h; exit 2, nothing on stdout.
func TestBadFlagOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--port", "eighty"},
		{"bench", "stray"},
		{"sim", "--no-such-flag"},
	} {
		code, stdout, stderr := runCmd(t, args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || stdout != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "kvlease "+args[0]+": ") ||
			lines[1] != "Run 'kvlease "+args[0]+" -h' for its flags." {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}
