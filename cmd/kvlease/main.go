// Command kvlease is the one binary of kvlease: an engine (serve), a P/D
// proxy (proxy), a local cluster (up), a load generator (bench), the demo
// (demo) and the deterministic cluster simulator (sim).
//
// Each subcommand lives in its own file and registers itself in init, so
// the dispatch here never changes when one is added.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// command is one subcommand. run parses args itself (with a flag.FlagSet
// named after the command) and returns an error to print, or errUsage when
// the flag package already printed the problem.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands []command

func register(c command) {
	if slices.ContainsFunc(commands, func(o command) bool { return o.name == c.name }) {
		panic("kvlease: command registered twice: " + c.name)
	}
	commands = append(commands, c)
}

// errUsage means the usage was already printed: exit 2 without more words.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	slices.SortFunc(commands, func(a, b command) int { return strings.Compare(a.name, b.name) })
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "kvlease: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := commands[i].run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintf(stderr, "kvlease %s: %v\n", args[0], err)
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kvlease <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-6s  %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'kvlease <command> -h' for the flags of a command.")
}

// newFlagSet returns a FlagSet for a subcommand that reports errors instead
// of exiting, with its output on stderr.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kvlease "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args into fs and maps the flag package's errors to
// errUsage (it has printed them) or flag.ErrHelp. Positional arguments are
// refused: every input of every command is a named flag.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (all inputs are flags)\n", fs.Name(), fs.Arg(0))
		return errUsage
	}
	return nil
}
