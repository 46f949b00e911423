package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvlease/kvlease/internal/kvleasebin"
	"github.com/kvlease/kvlease/localcluster"
	"github.com/kvlease/kvlease/proxy"
)

// Ports every process uses inside its own namespace.
const (
	enginePort   = 8000
	transferPort = 9000
	proxyPort    = 8080
)

// Options configures Start.
type Options struct {
	// Binary is the kvlease executable; "" is this process's own.
	Binary string
	// Prefill and Decode are the engine counts; 0 means 1.
	Prefill, Decode int
	// Lease is every engine's --kv-lease (heartbeat, extension and peer
	// grace scale with it); 0 is 3 s.
	Lease time.Duration
	// ExtraServeArgs are appended to every engine's command line.
	ExtraServeArgs []string
	// LogDir receives the processes' logs; "" is a temporary directory
	// removed by Close.
	LogDir string
	// Logger receives the harness's and the cluster's logs; nil discards.
	Logger *slog.Logger
	// Seed draws the fate of every packet through the userspace netem
	// (Net.Impair).
	Seed uint64
}

// Harness is a P/D cluster with each engine and the proxy in its own
// network namespace of a Net, and a single `--role both` engine on
// loopback as the reference for every answer.
type Harness struct {
	Net     *Net
	Cluster *localcluster.Cluster
	opt     Options
	nodes   map[string]*Node // by process name: prefill0, decode0, proxy0

	refURL string
	ref    *kvleasebin.Process
	refMu  sync.Mutex
	refAns map[string]string
}

// Start creates the network, starts the engines and the proxy in it and
// the reference engine, and waits for all of them to be healthy. On error
// everything started is stopped and removed.
func Start(ctx context.Context, opt Options) (h *Harness, err error) {
	if opt.Prefill == 0 {
		opt.Prefill = 1
	}
	if opt.Decode == 0 {
		opt.Decode = 1
	}
	if opt.Lease == 0 {
		opt.Lease = 3 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Binary == "" {
		if opt.Binary, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	h = &Harness{opt: opt, nodes: map[string]*Node{}, refAns: map[string]string{}}
	defer func() {
		if err != nil {
			h.Close()
			h = nil
		}
	}()
	if h.Net, err = NewNet(ctx, opt.Seed, opt.Logger); err != nil {
		return h, err
	}
	var names []string
	for i := range opt.Prefill {
		names = append(names, proxy.RolePrefill+strconv.Itoa(i))
	}
	for i := range opt.Decode {
		names = append(names, proxy.RoleDecode+strconv.Itoa(i))
	}
	for _, name := range append(names, localcluster.RoleProxy+"0") {
		if h.nodes[name], err = h.Net.AddNode(ctx, name); err != nil {
			return h, err
		}
	}
	h.Cluster, err = localcluster.Start(ctx, localcluster.Options{
		Prefill: opt.Prefill, Decode: opt.Decode, Binary: opt.Binary, LogDir: opt.LogDir,
		ExtraServeArgs: append([]string{"--kv-lease", opt.Lease.String()}, opt.ExtraServeArgs...),
		ProxyProcess:   true,
		Place: func(e *localcluster.Engine) []string {
			nd := h.nodes[e.Name()]
			e.Host, e.Port, e.TransferPort = nd.IP, enginePort, transferPort
			if e.Role == localcluster.RoleProxy {
				e.Port = proxyPort
			}
			return nd.Exec()
		},
		ReadyTimeout: 60 * time.Second,
		StopTimeout:  10 * time.Second,
		Logger:       opt.Logger,
	})
	if err != nil {
		return h, err
	}
	return h, h.startReference(ctx)
}

// startReference runs kvlease serve --role both on a loopback port of
// its own choosing (--port 0), which it announces.
func (h *Harness) startReference(ctx context.Context) error {
	cmd := exec.Command(h.opt.Binary, "serve", "--role", "both", "--host", "127.0.0.1", "--port", "0", "--profile", "tiny")
	cmd.SysProcAttr = sysProcAttr()
	var log *os.File
	if h.opt.LogDir != "" {
		if f, err := os.Create(filepath.Join(h.opt.LogDir, "reference.log")); err == nil {
			cmd.Stderr, log = f, f
			defer f.Close()
		}
	}
	ref, err := kvleasebin.Serve(cmd, time.Minute)
	if err != nil {
		return fmt.Errorf("reference engine: %w", err)
	}
	if log != nil {
		fmt.Fprintln(log, ref.Line)
	}
	h.ref, h.refURL = ref, ref.URL
	return waitCond(ctx, time.Minute, func() error {
		resp, err := http.Get(h.refURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("reference /health: %s", resp.Status)
		}
		return nil
	})
}

// Node returns the namespace of a process: "prefill0", "decode1",
// "proxy0".
func (h *Harness) Node(name string) *Node {
	nd := h.nodes[name]
	if nd == nil {
		panic("chaos: no node " + name)
	}
	return nd
}

// Index returns the cluster index of a process name (the proxy's too).
func (h *Harness) Index(name string) int {
	if name == localcluster.RoleProxy+"0" {
		return h.Cluster.ProxyIndex()
	}
	for _, e := range h.Cluster.Engines() {
		if e.Name() == name {
			return e.Index
		}
	}
	panic("chaos: no engine " + name)
}

// Lease is the lease the engines run with.
func (h *Harness) Lease() time.Duration { return h.opt.Lease }

// Close stops the processes, then removes the network. Safe to call more
// than once.
func (h *Harness) Close() error {
	var errs []error
	if h.Cluster != nil {
		errs = append(errs, h.Cluster.Close())
	}
	if h.ref != nil {
		h.ref.Cmd.Process.Signal(syscall.SIGTERM)
		h.ref.Wait()
		h.ref = nil
	}
	if h.Net != nil {
		errs = append(errs, h.Net.Close())
	}
	return errors.Join(errs...)
}

// Exited returns the engines (or the proxy) that died unasked so far.
func (h *Harness) Exited() []localcluster.Exit {
	var out []localcluster.Exit
	for {
		select {
		case x := <-h.Cluster.Exits():
			out = append(out, x)
		default:
			return out
		}
	}
}

// Metrics is one engine's /metrics: each sample's series (name and
// labels, as exposed) to its value.
type Metrics map[string]float64

// Scrape reads url's /metrics.
func Scrape(ctx context.Context, url string) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", url, resp.Status)
	}
	m := Metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("%s/metrics: %q: %w", url, line, err)
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// Sum adds the samples of metric name whose labels include every
// key="value" of match.
func (m Metrics) Sum(name string, match ...string) float64 {
	total := 0.0
	for series, v := range m {
		base, labels, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		ok := true
		for _, kv := range match {
			ok = ok && strings.Contains(labels, kv)
		}
		if ok {
			total += v
		}
	}
	return total
}

// ByLabel returns the samples of metric name by the value of label key.
func (m Metrics) ByLabel(name, key string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range m {
		base, labels, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		_, after, ok := strings.Cut(labels, key+`="`)
		if !ok {
			continue
		}
		val, _, _ := strings.Cut(after, `"`)
		out[val] += v
	}
	return out
}

// Released returns the leases released so far by reason, over every
// prefill engine.
func (h *Harness) Released(ctx context.Context) (map[string]float64, error) {
	return h.sumByLabel(ctx, proxy.RolePrefill, "kvlease_leases_released_total", "reason")
}

// ClaimedAfterRelease returns the leases the prefill engines saw claimed
// by a decode engine after they had released them, by release reason.
func (h *Harness) ClaimedAfterRelease(ctx context.Context) (map[string]float64, error) {
	return h.sumByLabel(ctx, proxy.RolePrefill, "kvlease_leases_claimed_after_release_total", "reason")
}

// Fallbacks returns the decode engines' fallbacks to recompute by reason.
func (h *Harness) Fallbacks(ctx context.Context) (map[string]float64, error) {
	return h.sumByLabel(ctx, proxy.RoleDecode, "kvlease_remote_prefill_fallbacks_total", "reason")
}

func (h *Harness) sumByLabel(ctx context.Context, role, name, key string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, url := range h.Cluster.URLs(role) {
		m, err := Scrape(ctx, url)
		if err != nil {
			return nil, err
		}
		for k, v := range m.ByLabel(name, key) {
			out[k] += v
		}
	}
	return out, nil
}

// Leftover lists what some engine still holds: active leases, held
// blocks, running or waiting requests. Empty means settled.
func (h *Harness) Leftover(ctx context.Context) ([]string, error) {
	var left []string
	for _, e := range h.Cluster.Engines() {
		m, err := Scrape(ctx, e.URL)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		for _, s := range []struct {
			name  string
			match []string
		}{
			{"kvlease_leases_active", nil},
			{"kvlease_kv_blocks", []string{`state="held"`}},
			{"vllm:num_requests_running", nil},
			{"vllm:num_requests_waiting", nil},
		} {
			if v := m.Sum(s.name, s.match...); v > 0 {
				left = append(left, fmt.Sprintf("%s %s%v = %v", e.Name(), s.name, s.match, v))
			}
		}
	}
	sort.Strings(left)
	return left, nil
}

// Settle waits, up to timeout, until no engine holds anything (Leftover
// is empty). Without faults every lease ends by a read, an abort or its
// expiry, so timeout should exceed the lease with room for a slow
// machine.
func (h *Harness) Settle(ctx context.Context, timeout time.Duration) error {
	var last []string
	err := waitCond(ctx, timeout, func() error {
		left, err := h.Leftover(ctx)
		if err != nil {
			return err
		}
		last = left
		if len(left) > 0 {
			return errors.New("not settled")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("chaos: not settled within %v: %v; still held:\n%s", timeout, err, strings.Join(last, "\n"))
	}
	return nil
}

// waitCond polls cond until it returns nil, ctx ends or timeout passes;
// the error then carries cond's last error.
func waitCond(ctx context.Context, timeout time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// ReleaseEvent is a rise of P's release counter of one reason, as seen by
// a Watch.
type ReleaseEvent struct {
	At     time.Time
	Reason string
	N      float64 // by how much it rose since the previous scrape
}

// Watch polls the prefill engines' release counters and records each
// rise with its time: the outside view of when P freed what. A scrape
// that fails (a paused or partitioned engine) is skipped.
type Watch struct {
	mu     sync.Mutex
	events []ReleaseEvent
	// late sums the rises of the leases claimed after their release, by
	// release reason.
	late map[string]float64
	done chan struct{}
	stop context.CancelFunc
}

// WatchReleases starts a Watch that scrapes every period until Stop.
func (h *Harness) WatchReleases(period time.Duration) *Watch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watch{late: map[string]float64{}, done: make(chan struct{}), stop: cancel}
	go func() {
		defer close(w.done)
		var last, lastLate map[string]float64 // nil until the first scrape: the baseline is no event
		rises := func(got, last map[string]float64, rose func(r string, n float64)) {
			for r, v := range got {
				if v < last[r] { // a prefill engine restarted: its counters began again
					last[r] = 0
				}
				if v > last[r] {
					rose(r, v-last[r])
					last[r] = v
				}
			}
		}
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			if got, err := h.Released(ctx); err == nil && last == nil {
				last = got
			} else if err == nil {
				now := time.Now()
				w.mu.Lock()
				rises(got, last, func(r string, n float64) {
					w.events = append(w.events, ReleaseEvent{At: now, Reason: r, N: n})
				})
				w.mu.Unlock()
			}
			if got, err := h.ClaimedAfterRelease(ctx); err == nil && lastLate == nil {
				lastLate = got
			} else if err == nil {
				w.mu.Lock()
				rises(got, lastLate, func(r string, n float64) { w.late[r] += n })
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// Stop ends the polling and waits for it.
func (w *Watch) Stop() {
	w.stop()
	<-w.done
}

// Totals returns the releases seen by reason. Releases by an engine in
// the scrape period before it was killed are not seen.
func (w *Watch) Totals() map[string]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]float64{}
	for _, e := range w.events {
		out[e.Reason] += e.N
	}
	return out
}

// ClaimedAfterRelease returns the leases seen claimed by a decode engine
// after P released them, by release reason (a D that then recomputed).
func (w *Watch) ClaimedAfterRelease() map[string]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.late)
}

// FirstAfter returns how long after t the first release of one of reasons
// was seen, and whether there was one.
func (w *Watch) FirstAfter(t time.Time, reasons ...string) (time.Duration, bool) {
	e, ok := w.firstAfter(t, reasons)
	return e.At.Sub(t), ok
}

func (w *Watch) firstAfter(t time.Time, reasons []string) (ReleaseEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		if !e.At.Before(t) && slices.Contains(reasons, e.Reason) {
			return e, true
		}
	}
	return ReleaseEvent{}, false
}

// nonZero drops the zero counts of m, for printing.
func nonZero(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}
