package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUnknownCommandAndUsage(t *testing.T) {
	if code, _, stderr := runCmd(t, "frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCmd(t); code != 2 || !strings.Contains(stderr, "demo") {
		t.Errorf("no command: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := runCmd(t, "help"); code != 0 {
		t.Errorf("help: exit %d", code)
	}
}
