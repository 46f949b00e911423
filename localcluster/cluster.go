package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvlease/kvlease/internal/tlsfiles"
	"github.com/kvlease/kvlease/proxy"
	"github.com/kvlease/kvlease/proxy/route"
)

// MaxEngines bounds the engines of one role.
const MaxEngines = 64

// RoleProxy is the Engine.Role of the proxy when it runs as a process
// (Options.ProxyProcess).
const RoleProxy = "proxy"

// Options configures Start. The zero value is one prefill and one decode
// engine of the tiny profile behind a round-robin proxy on a free port.
type Options struct {
	// Prefill and Decode are the engine counts; 0 means 1.
	Prefill, Decode int
	// Profile is the engines' latency profile (serve --profile); "" is
	// "tiny".
	Profile string
	// Model is the served model name (serve --model); "" leaves serve's
	// default.
	Model string
	// Host is the loopback address everything listens on; "" is
	// 127.0.0.1.
	Host string
	// ProxyPort is the proxy's port; 0 picks a free one.
	ProxyPort int
	// Policy is the proxy's routing policy.
	Policy route.Policy
	// Proxy, when set, adjusts the proxy's config after the cluster
	// filled in the engines and the policy.
	Proxy func(*proxy.Config)

	// Binary is the kvlease executable to run engines with; "" is this
	// process's own executable (os.Executable).
	Binary string
	// ServeArgs, when set, replaces the default command line of an
	// engine (see DefaultServeArgs).
	ServeArgs func(e Engine, secretFile string) []string
	// ExtraServeArgs are appended to each engine's command line.
	ExtraServeArgs []string
	// Env is added to each engine's environment.
	Env []string
	// LogDir receives one log file per engine (prefill0.log, ...),
	// appended to across restarts; "" makes a temporary directory that
	// Close removes.
	LogDir string

	// ReadyTimeout bounds the wait for an engine's /health; 0 is 60 s.
	ReadyTimeout time.Duration
	// StopTimeout is how long a stopped engine has between SIGTERM and
	// SIGKILL; 0 is 10 s.
	StopTimeout time.Duration
	// DrainTimeout is how long Close lets the proxy's requests finish
	// before aborting them; 0 is 2 s.
	DrainTimeout time.Duration
	// Logger receives the cluster's and the proxy's logs; nil discards.
	Logger *slog.Logger

	// Place, when set, places each process before its command line is
	// built (the engines, then the proxy when ProxyProcess is set): it may
	// change the Host, Port and TransferPort the cluster picked, and
	// returns the command prefix the process runs under, such as
	// ["ip", "netns", "exec", NAME] (nil: none). The prefix must exec the
	// kvlease binary in place (same pid), so that signals reach it.
	Place func(e *Engine) []string
	// ProxyProcess runs the proxy as a child process (kvlease proxy) with
	// the engines' URLs, instead of in-process: it can then be killed and
	// restarted like an engine, at index ProxyIndex. Options.Proxy is
	// not applied to it; ProxyArgs are appended to its command line.
	ProxyProcess bool
	ProxyArgs    []string

	// TLS, when set, makes every HTTP port HTTPS with its certificate
	// (kvlease up --tls writes a throwaway one): the engines serve it,
	// the proxy serves it and verifies the engines against its CA.
	TLS *tlsfiles.Local
	// ClientCerts (with TLS) makes the engines require a client
	// certificate signed by the CA (--ssl-cert-reqs 2); the proxy
	// presents TLS's.
	ClientCerts bool
}

func (o *Options) fill() error {
	if o.Prefill == 0 {
		o.Prefill = 1
	}
	if o.Decode == 0 {
		o.Decode = 1
	}
	if o.Profile == "" {
		o.Profile = "tiny"
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 10 * time.Second
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Prefill < 1 || o.Prefill > MaxEngines:
		return fmt.Errorf("cluster: Prefill %d: want 1..%d", o.Prefill, MaxEngines)
	case o.Decode < 1 || o.Decode > MaxEngines:
		return fmt.Errorf("cluster: Decode %d: want 1..%d", o.Decode, MaxEngines)
	case o.ProxyPort < 0 || o.ProxyPort > 65535:
		return fmt.Errorf("cluster: ProxyPort %d: want 0..65535", o.ProxyPort)
	case o.ReadyTimeout < 0 || o.StopTimeout < 0 || o.DrainTimeout < 0:
		return errors.New("cluster: timeouts must not be negative")
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cluster: finding the kvlease binary: %w", err)
		}
		o.Binary = exe
	}
	return nil
}

// Engine describes one engine of a cluster. It does not change across
// restarts.
type Engine struct {
	// Index is the engine's position in Cluster.Engines: prefill engines
	// first, then decode engines (a proxy process: Cluster.ProxyIndex).
	Index int
	// Role is proxy.RolePrefill or proxy.RoleDecode (RoleProxy for a
	// proxy process); RoleIndex its position among the engines of its
	// role.
	Role      string
	RoleIndex int
	// URL is the engine's HTTP base URL; Port and TransferPort its HTTP
	// and P/D transfer ports.
	URL          string
	Host         string
	Port         int
	TransferPort int
	// Profile and Model are what it serves.
	Profile, Model string
	// LogPath is the file with its output.
	LogPath string
}

// Name is "prefill0", "decode1", ...
func (e Engine) Name() string { return e.Role + strconv.Itoa(e.RoleIndex) }

// DefaultServeArgs is an engine's command line: kvlease serve with its
// role, ports, profile, model and the cluster secret, and a drain shorter
// than the default StopTimeout, so that a stopped engine serves its
// outstanding leases and exits before it would be killed (flags given
// after these win).
func DefaultServeArgs(e Engine, secretFile string) []string {
	args := []string{"serve", "--role", e.Role, "--host", e.Host,
		"--port", strconv.Itoa(e.Port), "--transfer-port", strconv.Itoa(e.TransferPort),
		"--profile", e.Profile, "--cluster-secret-file", secretFile, "--drain-timeout", "5s"}
	if e.Model != "" {
		args = append(args, "--model", e.Model)
	}
	return args
}

// Exit reports an engine process that ended without Kill, Stop, Restart
// or Close asking it to.
type Exit struct {
	Engine Engine
	PID    int
	// Err is the process's end: an *exec.ExitError, or nil for exit 0.
	Err error
	// LogTail is the end of its log, for the report.
	LogTail string
}

func (x Exit) String() string {
	status := "exit status 0"
	if x.Err != nil {
		status = x.Err.Error()
	}
	return fmt.Sprintf("engine %s (pid %d, %s) exited unexpectedly: %s", x.Engine.Name(), x.PID, x.Engine.URL, status)
}

// ErrNotRunning is returned by Kill and Stop for an engine that has no
// process.
var ErrNotRunning = errors.New("cluster: engine not running")

// Cluster is a running local cluster.
type Cluster struct {
	opt        Options
	engines    []*proc
	secretFile string
	tempLogDir string

	px        *proxy.Proxy
	proxyProc *proc // the proxy's process, with Options.ProxyProcess
	proxyURL  string
	stopProxy context.CancelFunc
	served    chan error

	exits     chan Exit
	closeOnce sync.Once
	closeErr  error
}

// proc is one engine and its current process.
type proc struct {
	info   Engine
	env    []string
	prefix []string // runs the binary under this command (Options.Place)
	args   []string

	mu  sync.Mutex // serializes Kill, Stop, Restart and Close of this engine
	cur *run       // the latest process, nil before the first launch
}

// run is one process of an engine. Its waiter goroutine sets err and then
// closes done; it takes no lock, so a holder of proc.mu may wait on done.
type run struct {
	cmd   *exec.Cmd
	done  chan struct{}
	err   error       // valid after done
	asked atomic.Bool // the process was told to stop: do not report its exit
	// logFrom is the size of the engine's log when this process started.
	logFrom int64
}

// Start launches a cluster: it returns when every engine answers /health
// and the proxy listens, or with an error (after stopping whatever it
// started) when an engine exits, does not become healthy within
// ReadyTimeout, or ctx ends.
func Start(ctx context.Context, opt Options) (c *Cluster, err error) {
	if err := opt.fill(); err != nil {
		return nil, err
	}
	c = &Cluster{opt: opt, exits: make(chan Exit, 2*(opt.Prefill+opt.Decode+1))}
	defer func() {
		if err != nil {
			c.Close()
			c = nil
		}
	}()
	if c.secretFile, err = writeSecret(); err != nil {
		return c, err
	}
	logDir := opt.LogDir
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "kvlease-cluster-*"); err != nil {
			return c, fmt.Errorf("cluster: %w", err)
		}
		c.tempLogDir = logDir
	} else if err = os.MkdirAll(logDir, 0o755); err != nil {
		return c, fmt.Errorf("cluster: %w", err)
	}
	n := opt.Prefill + opt.Decode
	ports, err := freePorts(opt.Host, 2*n)
	if err != nil {
		return c, err
	}
	for i := range n {
		e := Engine{Index: i, Role: proxy.RolePrefill, RoleIndex: i, Host: opt.Host,
			Port: ports[2*i], TransferPort: ports[2*i+1], Profile: opt.Profile, Model: opt.Model}
		if i >= opt.Prefill {
			e.Role, e.RoleIndex = proxy.RoleDecode, i-opt.Prefill
		}
		p := &proc{env: opt.Env}
		c.setEngine(p, e, logDir)
		c.engines = append(c.engines, p)
	}
	for _, p := range c.engines {
		if err := c.launch(p); err != nil {
			return c, err
		}
	}
	for _, p := range c.engines {
		if err := c.startEngine(ctx, p, logDir); err != nil {
			return c, err
		}
	}
	if opt.ProxyProcess {
		// Built once the engines are up: a retry may have moved one.
		e := Engine{Index: n, Role: RoleProxy, Host: opt.Host, Port: opt.ProxyPort}
		if e.Port == 0 {
			p, err := freePorts(opt.Host, 1)
			if err != nil {
				return c, err
			}
			e.Port = p[0]
		}
		prefix := c.place(&e)
		e.LogPath = filepath.Join(logDir, "proxy.log")
		args := append([]string{"proxy", "--host", e.Host, "--port", strconv.Itoa(e.Port),
			"--prefill", strings.Join(c.URLs(proxy.RolePrefill), ","),
			"--decode", strings.Join(c.URLs(proxy.RoleDecode), ","),
			"--policy", opt.Policy.String(), "--drain-timeout", opt.DrainTimeout.String()}, c.tlsArgs(RoleProxy)...)
		args = append(args, opt.ProxyArgs...)
		p := &proc{info: e, prefix: prefix, args: args, env: opt.Env}
		c.proxyProc = p
		c.proxyURL = p.info.URL
		if err := c.launch(p); err != nil {
			return c, err
		}
		return c, c.waitHealthy(ctx, p)
	}
	return c, c.startProxy()
}

// portAttempts bounds the launches of an engine whose port was taken
// between freePorts and its bind.
const portAttempts = 3

// setEngine places engine e and builds its command line into p.
func (c *Cluster) setEngine(p *proc, e Engine, logDir string) {
	p.prefix = c.place(&e)
	e.LogPath = filepath.Join(logDir, e.Name()+".log")
	build := c.opt.ServeArgs
	if build == nil {
		build = DefaultServeArgs
	}
	args := append(build(e, c.secretFile), c.tlsArgs("")...)
	p.args = append(args, c.opt.ExtraServeArgs...)
	p.info = e
}

// startEngine waits for launched engine p to become healthy. The
// engines' ports must be fixed before they start (the proxy's engine
// list names them, and Restart brings an engine back on its port), so
// freePorts picks them and releases them before the engines bind: if
// another process took one meanwhile, the engine exits with "address
// already in use" and startEngine launches it again on fresh ports, at
// most portAttempts times. Ports that Options.Place chose are its own and
// are not changed.
func (c *Cluster) startEngine(ctx context.Context, p *proc, logDir string) error {
	for attempt := 1; ; attempt++ {
		err := c.waitHealthy(ctx, p)
		if err == nil || c.opt.Place != nil || attempt == portAttempts || !c.portTaken(p) {
			return err
		}
		ports, perr := freePorts(c.opt.Host, 2)
		if perr != nil {
			return errors.Join(err, perr)
		}
		e := p.info
		c.opt.Logger.Warn("engine's port was taken before it bound it; launching it on fresh ports",
			"engine", e.Name(), "port", e.Port, "transfer_port", e.TransferPort, "new_port", ports[0], "new_transfer_port", ports[1])
		e.Port, e.TransferPort = ports[0], ports[1]
		c.setEngine(p, e, logDir)
		if err := c.launch(p); err != nil {
			return err
		}
	}
}

// portTaken reports whether p's process has exited and its log since it
// started says a listener's address was in use. It then takes the exit's
// report out of Exits: the engine is launched again.
func (c *Cluster) portTaken(p *proc) bool {
	p.mu.Lock()
	r := p.cur
	p.mu.Unlock()
	select {
	case <-r.done:
	default:
		return false
	}
	b, err := os.ReadFile(p.info.LogPath)
	if err != nil || int64(len(b)) < r.logFrom || !strings.Contains(string(b[r.logFrom:]), "address already in use") {
		return false
	}
	// Nothing else reads Exits before Start returns.
	var others []Exit
	for len(c.exits) > 0 {
		if x := <-c.exits; x.PID != r.cmd.Process.Pid {
			others = append(others, x)
		}
	}
	for _, x := range others {
		c.exits <- x
	}
	return true
}

// tlsArgs are the HTTPS flags of an engine, or of the proxy process
// (role RoleProxy).
func (c *Cluster) tlsArgs(role string) []string {
	t := c.opt.TLS
	if t == nil {
		return nil
	}
	args := []string{"--ssl-certfile", t.CertFile, "--ssl-keyfile", t.KeyFile}
	switch {
	case role == RoleProxy:
		args = append(args, "--engine-ssl-ca-certs", t.CAFile)
		if c.opt.ClientCerts {
			args = append(args, "--engine-ssl-certfile", t.CertFile, "--engine-ssl-keyfile", t.KeyFile)
		}
	case c.opt.ClientCerts:
		args = append(args, "--ssl-ca-certs", t.CAFile, "--ssl-cert-reqs", "2")
	}
	return args
}

// clientTLS is the client configuration of the cluster's own requests
// (health checks, the proxy's legs): the CA, and the client certificate
// when the engines require one. Nil without TLS.
func (c *Cluster) clientTLS() (*tls.Config, error) {
	t := c.opt.TLS
	if t == nil {
		return nil, nil
	}
	f := tlsfiles.ClientFiles{CAFile: t.CAFile}
	if c.opt.ClientCerts {
		f.CertFile, f.KeyFile = t.CertFile, t.KeyFile
	}
	return tlsfiles.Client(f, c.opt.Logger)
}

func (c *Cluster) scheme() string {
	if c.opt.TLS != nil {
		return "https://"
	}
	return "http://"
}

// place applies Options.Place to e and sets its URL; it returns the
// command prefix.
func (c *Cluster) place(e *Engine) []string {
	var prefix []string
	if c.opt.Place != nil {
		prefix = c.opt.Place(e)
	}
	e.URL = c.scheme() + net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
	return prefix
}

func (c *Cluster) startProxy() error {
	cfg := proxy.DefaultConfig()
	cfg.Route.Policy = c.opt.Policy
	cfg.Logger = c.opt.Logger
	for _, p := range c.engines {
		if p.info.Role == proxy.RolePrefill {
			cfg.Prefill = append(cfg.Prefill, p.info.URL)
		} else {
			cfg.Decode = append(cfg.Decode, p.info.URL)
		}
	}
	if c.opt.TLS != nil {
		var err error
		if cfg.EngineTLS, err = c.clientTLS(); err != nil {
			return err
		}
		if cfg.TLS, err = tlsfiles.Server(tlsfiles.ServerFiles{CertFile: c.opt.TLS.CertFile, KeyFile: c.opt.TLS.KeyFile}, c.opt.Logger); err != nil {
			return err
		}
	}
	if c.opt.Proxy != nil {
		c.opt.Proxy(&cfg)
	}
	px, err := proxy.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.opt.Host, strconv.Itoa(c.opt.ProxyPort)))
	if err != nil {
		return fmt.Errorf("cluster: proxy port: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.px, c.stopProxy, c.served = px, cancel, make(chan error, 1)
	c.proxyURL = c.scheme() + ln.Addr().String()
	go func() { c.served <- px.Serve(ctx, ln, c.opt.DrainTimeout) }()
	return nil
}

// launch starts p's process and its waiter.
func (c *Cluster) launch(p *proc) error {
	logf, err := os.OpenFile(p.info.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	var logFrom int64 // the log's size before this process writes to it
	if st, err := logf.Stat(); err == nil {
		logFrom = st.Size()
	}
	argv := append(append(append([]string(nil), p.prefix...), c.opt.Binary), p.args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: starting %s: %w", p.info.Name(), err)
	}
	logf.Close() // the child has its own descriptor
	r := &run{cmd: cmd, done: make(chan struct{}), logFrom: logFrom}
	p.cur = r
	c.opt.Logger.Info("engine started", "peer", p.info.URL, "engine", p.info.Name(), "pid", cmd.Process.Pid)
	go func() {
		r.err = cmd.Wait()
		// done closes last: whoever waits on it (Close, Stop) knows this
		// goroutine has also finished logging and reporting.
		defer close(r.done)
		if r.asked.Load() {
			return
		}
		x := Exit{Engine: p.info, PID: cmd.Process.Pid, Err: r.err, LogTail: tail(p.info.LogPath, 2048)}
		c.opt.Logger.Warn("engine exited unexpectedly", "engine", p.info.Name(), "reason", x.String())
		select {
		case c.exits <- x:
		default: // nobody reads the reports; Exits is bounded
		}
	}()
	return nil
}

// waitHealthy polls p's /health until it answers 200.
func (c *Cluster) waitHealthy(ctx context.Context, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, c.opt.ReadyTimeout)
	defer cancel()
	p.mu.Lock()
	r := p.cur
	p.mu.Unlock()
	ctls, err := c.clientTLS()
	if err != nil {
		return err
	}
	tr := &http.Transport{TLSClientConfig: ctls}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: time.Second, Transport: tr}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.info.URL+"/health", nil)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.done:
			status := "exit status 0"
			if r.err != nil {
				status = r.err.Error()
			}
			return fmt.Errorf("cluster: engine %s exited while starting (%s); its log %s ends:\n%s",
				p.info.Name(), status, p.info.LogPath, tail(p.info.LogPath, 2048))
		case <-ctx.Done():
			return fmt.Errorf("cluster: engine %s not healthy at %s/health within %v: %w; its log %s ends:\n%s",
				p.info.Name(), p.info.URL, c.opt.ReadyTimeout, ctx.Err(), p.info.LogPath, tail(p.info.LogPath, 2048))
		case <-tick.C:
		}
	}
}

// URL returns the proxy's base URL.
func (c *Cluster) URL() string { return c.proxyURL }

// Proxy returns the in-process proxy; nil with Options.ProxyProcess.
func (c *Cluster) Proxy() *proxy.Proxy { return c.px }

// ProxyIndex is the index that Kill, Stop, Restart, Running and PID take
// for the proxy's process (Options.ProxyProcess), and -1 without one.
func (c *Cluster) ProxyIndex() int {
	if c.proxyProc == nil {
		return -1
	}
	return len(c.engines)
}

// SecretFile returns the path of the cluster secret (0600).
func (c *Cluster) SecretFile() string { return c.secretFile }

// Engines returns every engine, prefill first.
func (c *Cluster) Engines() []Engine {
	out := make([]Engine, len(c.engines))
	for i, p := range c.engines {
		out[i] = p.info
	}
	return out
}

// URLs returns the base URLs of the engines of role.
func (c *Cluster) URLs(role string) []string {
	var out []string
	for _, p := range c.engines {
		if p.info.Role == role {
			out = append(out, p.info.URL)
		}
	}
	return out
}

// Exits reports engines that exited without being asked to. The channel
// holds up to twice the number of engines; reports beyond are dropped
// (and logged).
func (c *Cluster) Exits() <-chan Exit { return c.exits }

// Close stops the proxy (draining, then aborting requests in flight), then
// every engine (SIGTERM, SIGKILL after StopTimeout), waits for them, and
// removes the secret file and any temporary log directory. It returns the
// proxy's serving error, if any. Safe to call more than once.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		if c.stopProxy != nil {
			c.stopProxy()
			c.closeErr = <-c.served
		}
		if p := c.proxyProc; p != nil {
			p.mu.Lock()
			p.signalAndWait(syscall.SIGTERM, c.opt.StopTimeout)
			p.mu.Unlock()
		}
		var wg sync.WaitGroup
		for _, p := range c.engines {
			wg.Go(func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.signalAndWait(syscall.SIGTERM, c.opt.StopTimeout)
			})
		}
		wg.Wait()
		if c.secretFile != "" {
			os.Remove(c.secretFile)
		}
		if c.tempLogDir != "" {
			os.RemoveAll(c.tempLogDir)
		}
	})
	return c.closeErr
}

// writeSecret writes a fresh 256-bit cluster secret, hex-encoded, to a new
// file readable only by this user.
func writeSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cluster: generating the secret: %w", err)
	}
	f, err := os.CreateTemp("", "kvlease-secret-*")
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(b[:]) + "\n")
	if cerr := f.Chmod(0o600); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("cluster: writing the secret: %w", err)
	}
	return f.Name(), nil
}

// freePorts returns n distinct ports free on host now. They are released
// before the engines bind them; another process could take one in between,
// and startEngine then launches the engine again on fresh ports.
func freePorts(host string, n int) ([]int, error) {
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("cluster: finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last maxBytes of the file at path.
func tail(path string, maxBytes int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-maxBytes, 0)
	b := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(b, off)
	return string(b[:n])
}
