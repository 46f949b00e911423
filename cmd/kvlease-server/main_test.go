package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestServerCommands: kvlease-server has the serving commands, says where
// the tools are, and a tool's name is an unknown command.
func TestServerCommands(t *testing.T) {
	var out, errb bytes.Buffer
	if code := program.Run(context.Background(), []string{"-h"}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("-h: exit %d, stderr %q", code, errb.String())
	}
	usage := out.String()
	for _, name := range []string{"proxy", "serve", "version"} {
		if !strings.Contains(usage, "\n  "+name+" ") {
			t.Errorf("-h does not list %s:\n%s", name, usage)
		}
	}
	if !strings.HasPrefix(usage, "usage: kvlease-server <command>") || !strings.Contains(usage, "go run ./cmd/kvlease -h") ||
		strings.Contains(usage, "\n  bench ") {
		t.Errorf("-h:\n%s", usage)
	}
	out.Reset()
	if code := program.Run(context.Background(), []string{"bench"}, &out, &errb); code != 2 ||
		errb.String() != "kvlease-server: unknown command \"bench\"\nRun 'kvlease-server -h' for the commands.\n" {
		t.Errorf("bench: exit %d, stderr %q", code, errb.String())
	}
}

// notLinked are the import paths (and their subpackages) the serving
// binary must not link: the tools' packages and what only they need
// (plots with their fonts, PDF and LaTeX backends, the progress bar).
var notLinked = []string{
	"gonum.org/v1/",
	"codeberg.org/go-fonts/",
	"codeberg.org/go-latex/",
	"codeberg.org/go-pdf/",
	"git.sr.ht/~sbinet/gg",
	"github.com/ajstarks/svgo",
	"github.com/golang/freetype",
	"golang.org/x/image/",
	"github.com/schollz/progressbar/",
	"github.com/kvlease/kvlease/bench",
	"github.com/kvlease/kvlease/sim",
	"github.com/kvlease/kvlease/localcluster",
	"github.com/kvlease/kvlease/internal/chaos",
	"github.com/kvlease/kvlease/cmd/kvlease",
}

func linked(t *testing.T, pkg string) (bad []string) {
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, p := range notLinked {
			if dep == strings.TrimSuffix(p, "/") || strings.HasPrefix(dep, strings.TrimSuffix(p, "/")+"/") {
				bad = append(bad, dep)
			}
		}
	}
	return bad
}

// TestServerLinksNoTools: `go list -deps ./cmd/kvlease-server` has none
// of notLinked. The same check finds plots and the progress bar in
// kvlease, which links the tools, so it can fail.
func TestServerLinksNoTools(t *testing.T) {
	if bad := linked(t, "github.com/kvlease/kvlease/cmd/kvlease-server"); len(bad) > 0 {
		t.Errorf("kvlease-server links %d packages of the tools or their dependencies: %s", len(bad), strings.Join(bad, " "))
	}
	full := strings.Join(linked(t, "github.com/kvlease/kvlease/cmd/kvlease"), " ")
	for _, want := range []string{"gonum.org/v1/plot", "github.com/schollz/progressbar/v3", "github.com/kvlease/kvlease/bench"} {
		if !strings.Contains(" "+full+" ", " "+want+" ") {
			t.Errorf("the check does not find %s in kvlease's dependencies: %s", want, full)
		}
	}
}
