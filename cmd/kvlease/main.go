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
// from newFlagSet and parseFlags) and returns an error to print; parseFlags'
// errors tell run to print the command's help (-h) or a bad flag's one
// line.
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

// helpRequest is parseFlags' answer to -h or --help: run prints the
// command's flags to stdout and exits 0.
type helpRequest struct{ fs *flag.FlagSet }

func (h *helpRequest) Error() string { return "help requested" }
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

// badFlags is a command line the flag package refused (an unknown flag, a
// bad value, a positional argument): run prints it on one line with a
// pointer to -h and exits 2.
type badFlags struct{ err error }

func (e *badFlags) Error() string { return e.err.Error() }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	slices.SortFunc(commands, func(a, b command) int { return strings.Compare(a.name, b.name) })
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	case "-version", "--version":
		printVersion(stdout)
		return 0
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "kvlease: unknown command %q\nRun 'kvlease -h' for the commands.\n", args[0])
		return 2
	}
	c := commands[i]
	err := c.run(ctx, args[1:], stdout, stderr)
	var help *helpRequest
	var bad *badFlags
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		commandHelp(stdout, c, help.fs)
		return 0
	case errors.As(err, &bad):
		fmt.Fprintf(stderr, "kvlease %s: %v\nRun 'kvlease %s -h' for its flags.\n", c.name, bad.err, c.name)
		return 2
	}
	fmt.Fprintf(stderr, "kvlease %s: %v\n", c.name, err)
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kvlease <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-7s  %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'kvlease <command> -h' for the flags of a command, 'kvlease --version' for the version.")
}

// commandHelp prints a command's usage line, summary and flags.
func commandHelp(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: kvlease %s [flags]\n\n%s\n", c.name, c.summary)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags (each also settable as --flag=value; -flag works too):")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// newFlagSet returns a FlagSet for a subcommand that reports errors
// instead of exiting and prints nothing itself: parseFlags hands its
// errors and help requests to run.
func newFlagSet(name string, _ io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kvlease "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs and returns a *helpRequest for -h or
// --help, a *badFlags for what the flag package refuses. Positional
// arguments are refused: every input of every command is a named flag.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpRequest{fs}
		}
		return &badFlags{err}
	}
	if fs.NArg() > 0 {
		return &badFlags{fmt.Errorf("unexpected argument %q (all inputs are flags)", fs.Arg(0))}
	}
	return nil
}
