package cli

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Program{Name: "kvlease"}.Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUnknownCommandAndUsage(t *testing.T) {
	if code, _, stderr := runCmd(t, "frobnicate"); code != 2 || stderr != "kvlease: unknown command \"frobnicate\"\nRun 'kvlease -h' for the commands.\n" {
		t.Errorf("unknown command: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCmd(t); code != 2 || !strings.Contains(stderr, "serve") {
		t.Errorf("no command: exit %d, stderr %q", code, stderr)
	}
	for _, h := range []string{"help", "-h", "--help"} {
		if code, stdout, stderr := runCmd(t, h); code != 0 || !strings.HasPrefix(stdout, "usage: kvlease <command>") || stderr != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", h, code, stdout, stderr)
		}
	}
}

// TestBadFlagOneLine: a flag the flag package refuses (a bad value, an
// unknown flag, a stray argument) is one line naming it, then a pointer to
// the command's -h; exit 2, nothing on stdout, no usage dump.
func TestBadFlagOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--num-blocks", "abc"},
		{"serve", "--no-such-flag"},
		{"proxy", "stray"},
		{"version", "--short"},
	} {
		code, stdout, stderr := runCmd(t, args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || stdout != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "kvlease "+args[0]+": ") ||
			lines[1] != "Run 'kvlease "+args[0]+" -h' for its flags." {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestVersion: `kvlease version` and `kvlease --version` print the
// version line; the line names the module version and the VCS stamp of
// the build (go build records vcs.revision, vcs.time and vcs.modified in
// a checkout).
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		if code, stdout, stderr := runCmd(t, args...); code != 0 || stderr != "" || !strings.HasPrefix(stdout, "kvlease ") ||
			strings.Count(stdout, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/kvlease/kvlease", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "32feab9fcfda38058b28a51d144dae6b07976b0b"},
			{Key: "vcs.time", Value: "2026-11-28T01:37:42Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionLine(bi), "kvlease v1.2.3 (commit 32feab9fcfda38058b28a51d144dae6b07976b0b, modified, 2026-11-28T01:37:42Z; go1.26.8)"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	bi.Main.Version, bi.Settings = "(devel)", nil
	if got, want := versionLine(bi), "kvlease dev (commit unknown; go1.26.8)"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
}
