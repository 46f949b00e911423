package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kvlease/kvlease/cmd/internal/cli"
	"github.com/kvlease/kvlease/internal/tlsfiles"
	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/proxy/route"
)

func init() {
	cli.Register(cli.Command{
		Name:    "up",
		Summary: "a local P/D cluster on loopback: prefill and decode engines behind the proxy",
		Run:     runUp,
	})
}

// parseUpFlags turns kvlease up's flags into cluster options, and says
// what the engines serve.
func parseUpFlags(args []string, stderr io.Writer) (localcluster.Options, string, error) {
	fs := cli.NewFlagSet("up", stderr)
	var opt localcluster.Options
	fs.IntVar(&opt.Prefill, "prefill", 1, fmt.Sprintf("prefill engines (1..%d)", localcluster.MaxEngines))
	fs.IntVar(&opt.Decode, "decode", 1, fmt.Sprintf("decode engines (1..%d)", localcluster.MaxEngines))
	fs.IntVar(&opt.ProxyPort, "port", 8080, "the proxy's port (0 picks a free one); engines get free ports")
	fs.StringVar(&opt.Profile, "profile", "tiny", "the engines' model profile (kvlease serve --profile)")
	fs.StringVar(&opt.Model, "model", "", "served model name (kvlease serve --model; empty for serve's default)")
	policy := fs.String("policy", route.RoundRobin.String(), "the proxy's engine choice: "+strings.Join(route.Policies, " or "))
	fs.StringVar(&opt.LogDir, "log-dir", "", "directory for the engines' logs (default: a new one under $TMPDIR, kept)")
	serveArgs := fs.String("serve-args", "", "more flags for every engine, space-separated (e.g. \"--num-blocks 4096\")")
	fs.StringVar(&opt.Binary, "binary", "", "kvlease binary to run the engines with (default: this one)")
	fs.DurationVar(&opt.ReadyTimeout, "ready-timeout", 60*time.Second, "how long each engine may take to answer /health")
	mf := addModelFileFlags(fs)
	tlsOn := fs.Bool("tls", false, "HTTPS everywhere: a throwaway CA and certificate for 127.0.0.1 in the log directory (tls/ca.pem for clients)")
	fs.BoolVar(&opt.ClientCerts, "tls-client-certs", false, "with --tls: the engines require a client certificate (mutual TLS), which the proxy presents")
	if err := cli.ParseFlags(fs, args); err != nil {
		return opt, "", err
	}
	if *tlsOn {
		opt.TLS = &tlsfiles.Local{} // written when the log directory exists
	} else if opt.ClientCerts {
		return opt, "", errors.New("--tls-client-certs: needs --tls")
	}
	switch {
	case opt.Prefill < 1 || opt.Prefill > localcluster.MaxEngines:
		return opt, "", fmt.Errorf("--prefill %d: want 1..%d engines", opt.Prefill, localcluster.MaxEngines)
	case opt.Decode < 1 || opt.Decode > localcluster.MaxEngines:
		return opt, "", fmt.Errorf("--decode %d: want 1..%d engines", opt.Decode, localcluster.MaxEngines)
	case opt.Profile == "":
		return opt, "", fmt.Errorf("--profile: name a profile, e.g. --profile tiny")
	case opt.ReadyTimeout <= 0:
		return opt, "", fmt.Errorf("--ready-timeout %v: want a positive duration such as 60s", opt.ReadyTimeout)
	}
	if err := cli.CheckPort("--port", opt.ProxyPort); err != nil {
		return opt, "", err
	}
	var err error
	if opt.Policy, err = route.ParsePolicy(*policy); err != nil {
		return opt, "", fmt.Errorf("--policy: %v", err)
	}
	if err := mf.check(); err != nil {
		return opt, "", err
	}
	opt.ExtraServeArgs = append(mf.serveArgs(), strings.Fields(*serveArgs)...)
	return opt, mf.describe(opt.Profile), nil
}

// portFree reports, when port is not 0, whether host:port can be listened
// on now; if not, an error naming --port and a port that is free.
func portFree(host string, port int) error {
	if port == 0 {
		return nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err == nil {
		return ln.Close()
	}
	suggest := "--port 0 (a free port)"
	for p := port + 1; p <= min(port+100, 65535); p++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			ln.Close()
			suggest = fmt.Sprintf("--port %d, or --port 0 for any free one", p)
			break
		}
	}
	return fmt.Errorf("--port %d: cannot listen on %s:%d (%v); nothing was started: pick another with %s",
		port, host, port, errors.Unwrap(err), suggest)
}

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opt, what, err := parseUpFlags(args, stderr)
	if err != nil {
		return err
	}
	// The proxy's port is the one the user named: check it before
	// starting anything (the engines' ports are picked free).
	if err := portFree("127.0.0.1", opt.ProxyPort); err != nil {
		return err
	}
	if opt.LogDir == "" {
		if opt.LogDir, err = os.MkdirTemp("", "kvlease-up-*"); err != nil {
			return err
		}
	}
	if opt.TLS != nil {
		dir := filepath.Join(opt.LogDir, "tls")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		l, err := tlsfiles.WriteLocal(dir, "127.0.0.1", "::1", "localhost")
		if err != nil {
			return fmt.Errorf("--tls: %w", err)
		}
		opt.TLS = &l
	}
	opt.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintf(stdout, "kvlease up: starting %d prefill and %d decode engine(s), %s...\n",
		opt.Prefill, opt.Decode, what)
	c, err := localcluster.Start(ctx, opt)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting: Start stopped what it began
		}
		return fmt.Errorf("%w\n(the engines' logs are in %s)", err, opt.LogDir)
	}
	printCluster(stdout, c, opt)
	for {
		select {
		case x := <-c.Exits():
			fmt.Fprintf(stderr, "kvlease up: %s\n  the proxy routes around it; its log %s ends:\n%s\n",
				x, x.Engine.LogPath, indent(x.LogTail, "    | "))
		case <-ctx.Done():
			fmt.Fprintln(stdout, "\nkvlease up: stopping the proxy and the engines...")
			err := c.Close()
			fmt.Fprintf(stdout, "kvlease up: stopped (logs kept in %s)\n", opt.LogDir)
			return err
		}
	}
}

func printCluster(w io.Writer, c *localcluster.Cluster, opt localcluster.Options) {
	fmt.Fprintf(w, "\n  %-9s %-24s %s\n", "proxy", c.URL(), "policy "+opt.Policy.String()+"; GET /health, GET /metrics")
	for _, e := range c.Engines() {
		fmt.Fprintf(w, "  %-9s %-24s pid %d, transfer port %d, log %s\n", e.Name(), e.URL, c.PID(e.Index), e.TransferPort, e.LogPath)
	}
	curl := "curl"
	if opt.TLS != nil {
		curl = "curl --cacert " + opt.TLS.CAFile
		fmt.Fprintf(w, "\nHTTPS: the CA is %s (certificate %s, key %s)\n", opt.TLS.CAFile, opt.TLS.CertFile, opt.TLS.KeyFile)
	}
	fmt.Fprintf(w, "\nTry it:\n\n"+
		"  %[2]s -s %[1]s/v1/completions -H 'Content-Type: application/json' \\\n"+
		"    -d '{\"prompt\": \"The quick brown fox\", \"max_tokens\": 16}'\n\n"+
		"  %[2]s -sN %[1]s/v1/chat/completions -H 'Content-Type: application/json' \\\n"+
		"    -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}], \"max_tokens\": 16, \"stream\": true}'\n\n"+
		"Ctrl-C stops everything.\n", c.URL(), curl)
}

func indent(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return prefix + "(empty)"
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
