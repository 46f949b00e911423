package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

func init() {
	register(command{
		name:    "version",
		summary: "the version of this binary: the module version and the commit it was built from (also kvlease --version)",
		run: func(_ context.Context, args []string, stdout, stderr io.Writer) error {
			if err := parseFlags(newFlagSet("version", stderr), args); err != nil {
				return err
			}
			printVersion(stdout)
			return nil
		},
	})
}

// buildVersion may be set with -ldflags "-X main.buildVersion=...".
var buildVersion string

// version is buildVersion if set, else the module version of the build,
// else "dev".
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func printVersion(w io.Writer) {
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(w, versionLine(bi))
}

// versionLine is "kvlease VERSION (commit REV[, modified], TIME; GO)" from
// the build's module version and the VCS stamp go build records in a
// checkout (vcs.revision, vcs.time, vcs.modified); "commit unknown" when
// the build has none (go run, go test, -buildvcs=false).
func versionLine(bi *debug.BuildInfo) string {
	rev, when, modified, goVersion := "unknown", "", false, "go?"
	if bi != nil {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	parts := []string{"commit " + rev}
	if modified {
		parts[0] += ", modified"
	}
	if when != "" {
		parts = append(parts, when)
	}
	return fmt.Sprintf("kvlease %s (%s; %s)", versionOf(bi), strings.Join(parts, ", "), goVersion)
}
