// Package cli is the command line of kvlease's binaries: the table of
// subcommands, the rules every command's flags follow (-h on stdout, a bad
// flag in one line, exit codes, KVLEASE_* from the environment), and the
// serving commands (serve, proxy, version).
//
// Two binaries are built from it. cmd/kvlease-server holds only the
// commands here: it is what the container image runs, and it links no load
// generator, simulator, plotting or progress bar. cmd/kvlease is the one
// command a user runs: the same serving commands plus the tools (demo,
// bench, sim, up, chaos), which register themselves in its own package.
//
// Each subcommand lives in its own file and registers itself in init, so
// the dispatch here never changes when one is added.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
)

// Command is one subcommand. Run parses args itself (with a flag.FlagSet
// from NewFlagSet and ParseFlags) and returns an error to print;
// ParseFlags' errors tell the dispatch to print the command's help (-h) or
// a bad flag's one line.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands []Command

// Register adds a command to the table; a package's init calls it.
func Register(c Command) {
	if slices.ContainsFunc(commands, func(o Command) bool { return o.Name == c.Name }) {
		panic("kvlease: command registered twice: " + c.Name)
	}
	commands = append(commands, c)
}

// Commands returns the registered commands sorted by name.
func Commands() []Command {
	cs := slices.Clone(commands)
	slices.SortFunc(cs, func(a, b Command) int { return strings.Compare(a.Name, b.Name) })
	return cs
}

// Program is one binary built from the table.
type Program struct {
	// Name is the binary's name, in its usage, its messages and its
	// version line.
	Name string
	// Version, if set, is the version the binary reports (main's
	// buildVersion, set with -ldflags "-X main.buildVersion=..."); empty,
	// the module version of the build, else "dev".
	Version string
	// About, if set, ends the usage: what this binary is not.
	About string
}

// running is the binary running, set by Main before it runs a command:
// Version reports its version.
var running Program

// Main runs the command named by os.Args[1] with the rest of the
// arguments, until it returns or SIGINT or SIGTERM cancels it, and exits
// with its code: 0, 1 for an error, 2 for a bad command line.
func Main(p Program) {
	running = p
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := p.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// helpRequest is ParseFlags' answer to -h or --help: run prints the
// command's flags to stdout and exits 0.
type helpRequest struct{ fs *flag.FlagSet }

func (h *helpRequest) Error() string { return "help requested" }
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

// badFlags is a command line the flag package refused (an unknown flag, a
// bad value, a positional argument): run prints it on one line with a
// pointer to -h and exits 2.
type badFlags struct{ err error }

func (e *badFlags) Error() string { return e.err.Error() }

// Run runs the command args[0] names with the rest of args and returns the
// exit code; Main calls it, and the tests of the binaries.
func (p Program) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	commands := Commands()
	if len(args) == 0 {
		p.usage(stderr, commands)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		p.usage(stdout, commands)
		return 0
	case "-version", "--version":
		printVersion(stdout)
		return 0
	}
	i := slices.IndexFunc(commands, func(c Command) bool { return c.Name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "%s: unknown command %q\nRun '%s -h' for the commands.\n", p.Name, args[0], p.Name)
		return 2
	}
	c := commands[i]
	err := c.Run(ctx, args[1:], stdout, stderr)
	var help *helpRequest
	var bad *badFlags
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		p.commandHelp(stdout, c, help.fs)
		return 0
	case errors.As(err, &bad):
		fmt.Fprintf(stderr, "%s %s: %v\nRun '%s %s -h' for its flags.\n", p.Name, c.Name, bad.err, p.Name, c.Name)
		return 2
	}
	fmt.Fprintf(stderr, "%s %s: %v\n", p.Name, c.Name, err)
	return 1
}

func (p Program) usage(w io.Writer, commands []Command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", p.Name)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-7s  %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for the flags of a command, '%s --version' for the version.\n", p.Name, p.Name)
	if p.About != "" {
		fmt.Fprintf(w, "\n%s\n", p.About)
	}
}

// commandHelp prints a command's usage line, summary and flags.
func (p Program) commandHelp(w io.Writer, c Command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s %s [flags]\n\n%s\n", p.Name, c.Name, c.Summary)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags (each also settable as --flag=value; -flag works too):")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// NewFlagSet returns a FlagSet for a subcommand that reports errors
// instead of exiting and prints nothing itself: ParseFlags hands its
// errors and help requests to the dispatch.
func NewFlagSet(name string, _ io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// ParseFlags parses args into fs and returns a *helpRequest for -h or
// --help, a *badFlags for what the flag package refuses. Positional
// arguments are refused: every input of every command is a named flag.
func ParseFlags(fs *flag.FlagSet, args []string) error {
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

// StartCPUProfile writes a CPU profile of this process to path until the
// returned function is called.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
