package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

func init() {
	Register(Command{
		Name:    "version",
		Summary: "the version of this binary: the module version and the commit it was built from (also --version)",
		Run: func(_ context.Context, args []string, stdout, stderr io.Writer) error {
			if err := ParseFlags(NewFlagSet("version", stderr), args); err != nil {
				return err
			}
			printVersion(stdout)
			return nil
		},
	})
}

// Version is the version of the binary running: its Program.Version if
// set, else the module version of the build, else "dev". Both binaries
// report kvlease's version.
func Version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	if running.Version != "" {
		return running.Version
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
