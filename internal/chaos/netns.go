package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvlease/kvlease/internal/chaos/netem"
)

// nsPrefix starts the name of every namespace the harness creates:
// kvc-<pid>-<run id>-<node>. The pid lets a later run remove what a run
// that died (kill -9) left behind.
const nsPrefix = "kvc-"

// MaxNodes bounds the nodes of one Net (addresses .2 to .201 of its /24).
const MaxNodes = 200

// dropClass is the htb class whose leaf queue (pfifo limit 0) drops every
// packet sent to it: a silent drop, no RST, no ICMP. linkClass carries
// everything else.
const (
	linkClass = "1:10"
	dropClass = "1:99"
)

// Available reports why the harness cannot run here, or nil: it needs
// root, ip and tc.
func Available() error {
	if runtime.GOOS != "linux" {
		return errors.New("chaos: needs Linux (network namespaces, tc)")
	}
	if os.Geteuid() != 0 {
		return errors.New("chaos: needs root (network namespaces, tc)")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("chaos: %s not found (Debian: apt-get install iproute2)", tool)
		}
	}
	return nil
}

// NetemAvailable reports why Impair (the userspace netem) cannot run
// here, or nil: besides Available's needs, it needs /dev/net/tun. Without
// it a Net still makes every tc fault and Impair fails saying so.
func NetemAvailable() error {
	if err := Available(); err != nil {
		return err
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("chaos: netem faults need /dev/net/tun (the tun module): %w", err)
	}
	return nil
}

// Net is a private network on this machine: a bridge in the root
// namespace with 10.213.S.1/24, and one network namespace per node joined
// to it by a veth pair, with 10.213.S.(2+i). Nodes have no default route,
// so nothing they send can leave the bridge; the root namespace (the
// harness itself, the clients) reaches them through it.
//
// Every link has an htb root queue on both ends (the node's eth0 for what
// it sends, the bridge port for what it receives), so that faults are tc
// filters and class changes: Cut, Partition, Isolate, Lossy, Slow, Heal.
//
// Every node also has a TUN device (kvtun) held by this process, which
// a userspace netem (package netem) forwards between: Impair moves the
// routes between a node and the other nodes onto it, so that their
// packets are delayed, lost, reordered, duplicated or corrupted on the
// way; the root namespace keeps reaching every node over the bridge.
// A Net is safe for concurrent use.
type Net struct {
	id     string // 4 hex digits
	bridge string
	subnet string // "10.213.S."
	fwd    *netem.Forwarder

	mu       sync.Mutex
	nodes    []*Node
	prio     int              // last filter priority handed out
	filter   map[string][]int // device key -> filter priorities set
	impaired map[*Node]netem.Fault
	closed   bool
}

// Node is one network namespace of a Net.
type Node struct {
	Name string
	// NS is the namespace (ip netns exec NS ...), IP its address.
	NS, IP string
	host   string // the bridge end of its veth pair
}

// live holds the Nets to tear down when the process is interrupted.
var (
	liveMu   sync.Mutex
	live     = map[*Net]bool{}
	onSignal sync.Once
)

// NewNet creates the bridge of a new Net after removing what dead runs
// left behind. Close tears it down; SIGINT or SIGTERM to this process also
// does, before the signal takes its usual effect. The netem forwarder
// draws every packet's fate from seed; log (nil: discard) receives each
// Impair and Heal with its counts.
func NewNet(ctx context.Context, seed uint64, log *slog.Logger) (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	sweep(ctx)
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	n := &Net{id: hex.EncodeToString(b[:]), filter: map[string][]int{}, impaired: map[*Node]netem.Fault{},
		fwd: netem.NewForwarder(mrand.New(mrand.NewPCG(seed, 0x6e6574656d)), netem.DefaultLimit, log)}
	n.bridge = "kvc" + n.id + "br"
	s, err := freeSubnet(ctx)
	if err != nil {
		return nil, err
	}
	n.subnet = "10.213." + strconv.Itoa(s) + "."
	liveMu.Lock()
	live[n] = true
	liveMu.Unlock()
	onSignal.Do(watchSignals)
	for _, args := range [][]string{
		{"ip", "link", "add", n.bridge, "type", "bridge"},
		{"ip", "addr", "add", n.subnet + "1/24", "dev", n.bridge},
		{"ip", "link", "set", n.bridge, "up"},
	} {
		if err := run(ctx, args...); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// watchSignals tears every live Net down on SIGINT or SIGTERM, then lets
// the signal act as it would have (the process dies of it).
func watchSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-ch
		liveMu.Lock()
		nets := make([]*Net, 0, len(live))
		for n := range live {
			nets = append(nets, n)
		}
		liveMu.Unlock()
		for _, n := range nets {
			n.Close()
		}
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
}

// sweep deletes the namespaces and bridges of runs whose process is gone,
// and veth ends (kvc<run>v<i>) whose run's bridge is gone: a run creates
// its bridge before its links and deletes its links before its bridge.
func sweep(ctx context.Context) {
	if links, err := output(ctx, "ip", "-o", "link", "show"); err == nil {
		for line := range strings.Lines(links) {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if len(name) > 8 && strings.HasPrefix(name, "kvc") && name[7] == 'v' &&
				!strings.Contains(links, " kvc"+name[3:7]+"br:") {
				run(ctx, "ip", "link", "del", name)
			}
		}
	}
	out, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return
	}
	for line := range strings.Lines(out) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		parts := strings.SplitN(rest, "-", 3)
		if len(parts) != 3 {
			continue
		}
		pid, err := strconv.Atoi(parts[0])
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		run(ctx, "ip", "netns", "del", name)
		run(ctx, "ip", "link", "del", "kvc"+parts[1]+"br")
	}
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil || errors.Is(syscall.Kill(pid, 0), syscall.EPERM)
}

// freeSubnet picks S in 1..254 such that no interface has an address in
// 10.213.S.0/24.
func freeSubnet(ctx context.Context) (int, error) {
	out, err := output(ctx, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		return 0, err
	}
	for range 64 {
		v, err := rand.Int(rand.Reader, big.NewInt(254))
		if err != nil {
			return 0, err
		}
		s := int(v.Int64()) + 1
		if !strings.Contains(out, " 10.213."+strconv.Itoa(s)+".") {
			return s, nil
		}
	}
	return 0, errors.New("chaos: no free 10.213.S.0/24 subnet")
}

// AddNode creates a namespace joined to the bridge, with loopback up.
func (n *Net) AddNode(ctx context.Context, name string) (*Node, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("chaos: net closed")
	}
	i := len(n.nodes)
	if i >= MaxNodes {
		n.mu.Unlock()
		return nil, fmt.Errorf("chaos: at most %d nodes", MaxNodes)
	}
	nd := &Node{Name: name, NS: fmt.Sprintf("%s%d-%s-%s", nsPrefix, os.Getpid(), n.id, name),
		IP: n.subnet + strconv.Itoa(2+i), host: fmt.Sprintf("kvc%sv%d", n.id, i)}
	n.nodes = append(n.nodes, nd)
	n.mu.Unlock()
	steps := [][]string{
		{"ip", "netns", "add", nd.NS},
		{"ip", "link", "add", nd.host, "type", "veth", "peer", "name", "eth0", "netns", nd.NS},
		{"ip", "link", "set", nd.host, "master", n.bridge, "up"},
		{"ip", "-n", nd.NS, "addr", "add", nd.IP + "/24", "dev", "eth0"},
		{"ip", "-n", nd.NS, "link", "set", "eth0", "up"},
		{"ip", "-n", nd.NS, "link", "set", "lo", "up"},
	}
	for _, dev := range nd.devs() {
		steps = append(steps,
			dev.tc("qdisc", "add", "root", "handle", "1:", "htb", "default", "10"),
			dev.tc("class", "add", "parent", "1:", "classid", linkClass, "htb", "rate", "10gbit", "quantum", "60000"),
			dev.tc("class", "add", "parent", "1:", "classid", dropClass, "htb", "rate", "10gbit", "quantum", "60000"),
			dev.tc("qdisc", "add", "parent", dropClass, "pfifo", "limit", "0"))
	}
	for _, args := range steps {
		if err := run(ctx, args...); err != nil {
			return nil, fmt.Errorf("chaos: node %s: %w", name, err)
		}
	}
	if NetemAvailable() != nil {
		return nd, nil // Impair will say why it cannot
	}
	tun, err := openTun(nd.NS)
	if err != nil {
		return nil, fmt.Errorf("chaos: node %s: %w", name, err)
	}
	if err := n.fwd.Add(netip.MustParseAddr(nd.IP), tun); err != nil {
		return nil, fmt.Errorf("chaos: node %s: %w", name, err)
	}
	if err := run(ctx, "ip", "-n", nd.NS, "link", "set", tunName, "up"); err != nil {
		return nil, fmt.Errorf("chaos: node %s: %w", name, err)
	}
	return nd, nil
}

// Exec is the command prefix that runs a program inside nd's namespace.
// ip netns exec execs the program in place, so its pid is the program's.
func (nd *Node) Exec() []string { return []string{"ip", "netns", "exec", nd.NS} }

// dev is one end of a node's link: the node's eth0 (ns set: what the node
// sends) or the bridge port (what it receives).
type dev struct{ ns, name string }

func (nd *Node) devs() [2]dev { return [2]dev{{nd.NS, "eth0"}, {"", nd.host}} }

func (d dev) key() string { return d.ns + "/" + d.name }

// tc is a tc command on d: verb and object are e.g. "qdisc", "add".
func (d dev) tc(object, verb string, rest ...string) []string {
	args := []string{"tc"}
	if d.ns != "" {
		args = append(args, "-n", d.ns)
	}
	return append(append(args, object, verb, "dev", d.name), rest...)
}

// addFilter sends the packets that match on d to the drop class.
func (n *Net) addFilter(ctx context.Context, d dev, match ...string) error {
	n.mu.Lock()
	n.prio++
	prio := n.prio
	n.filter[d.key()] = append(n.filter[d.key()], prio)
	n.mu.Unlock()
	args := d.tc("filter", "add", append([]string{"parent", "1:", "protocol", "ip", "prio", strconv.Itoa(prio)}, match...)...)
	return run(ctx, append(args, "flowid", dropClass)...)
}

// Cut drops every packet from sends to to, silently: one way of a
// partition.
func (n *Net) Cut(ctx context.Context, from, to *Node) error {
	return n.addFilter(ctx, from.devs()[0], "u32", "match", "ip", "dst", to.IP+"/32")
}

// Partition cuts a from b both ways.
func (n *Net) Partition(ctx context.Context, a, b *Node) error {
	if err := n.Cut(ctx, a, b); err != nil {
		return err
	}
	return n.Cut(ctx, b, a)
}

// Isolate drops everything nd sends or receives.
func (n *Net) Isolate(ctx context.Context, nd *Node) error {
	for _, d := range nd.devs() {
		if err := n.addFilter(ctx, d, "u32", "match", "u32", "0", "0"); err != nil {
			return err
		}
	}
	return nil
}

// Lossy drops each packet nd sends or receives with probability pct/100,
// independently: a classic BPF classifier on the kernel's random number.
func (n *Net) Lossy(ctx context.Context, nd *Node, pct int) error {
	if pct <= 0 || pct > 100 {
		return fmt.Errorf("chaos: loss %d%%: want 1..100", pct)
	}
	// ld rand; jge threshold → drop; ret 0 (no match). A cls_bpf
	// program's -1 is "the filter's class". jge compares unsigned.
	threshold := uint64(100-pct) * (1 << 32) / 100
	code := fmt.Sprintf("4,32 0 0 4294963256,53 0 1 %d,6 0 0 4294967295,6 0 0 0", threshold)
	for _, d := range nd.devs() {
		if err := n.addFilter(ctx, d, "bpf", "bytecode", code); err != nil {
			return err
		}
	}
	return nil
}

// Slow caps nd's link at rate (tc syntax, e.g. "2mbit") both ways: its
// queues then delay packets by however much traffic waits before them.
func (n *Net) Slow(ctx context.Context, nd *Node, rate string) error {
	for _, d := range nd.devs() {
		if err := run(ctx, d.tc("class", "change", "parent", "1:", "classid", linkClass, "htb",
			"rate", rate, "ceil", rate, "quantum", "1514")...); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every fault on nd's link: the filters on both of its ends,
// any rate cap and any Impair. A Cut towards nd made on another node
// stays.
func (n *Net) Heal(ctx context.Context, nd *Node) error {
	errs := []error{n.unimpair(ctx, nd)}
	for _, d := range nd.devs() {
		n.mu.Lock()
		prios := n.filter[d.key()]
		delete(n.filter, d.key())
		n.mu.Unlock()
		for _, p := range prios {
			if err := run(ctx, d.tc("filter", "del", "parent", "1:", "prio", strconv.Itoa(p))...); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, run(ctx, d.tc("class", "change", "parent", "1:", "classid", linkClass, "htb",
			"rate", "10gbit", "ceil", "10gbit", "quantum", "60000")...))
	}
	return errors.Join(errs...)
}

// HealAll heals every node.
func (n *Net) HealAll(ctx context.Context) error {
	n.mu.Lock()
	nodes := append([]*Node(nil), n.nodes...)
	n.mu.Unlock()
	var errs []error
	for _, nd := range nodes {
		errs = append(errs, n.Heal(ctx, nd))
	}
	return errors.Join(errs...)
}

// Dropped returns the packets dropped by faults on nd's link so far (both
// ends), from tc's counters.
func (n *Net) Dropped(ctx context.Context, nd *Node) (int, error) {
	total := 0
	for _, d := range nd.devs() {
		args := []string{"tc", "-s"}
		if d.ns != "" {
			args = append(args, "-n", d.ns)
		}
		out, err := output(ctx, append(args, "class", "show", "dev", d.name, "classid", dropClass)...)
		if err != nil {
			return 0, err
		}
		_, after, ok := strings.Cut(out, "dropped ")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(after, ",")
		k, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("chaos: tc counters %q: %w", out, err)
		}
		total += k
	}
	return total, nil
}

// Close deletes every namespace and the bridge and closes the TUN devices
// (the kernel removes them with their last file). Processes still running in a namespace keep it alive
// until they exit: stop them first. Safe to call more than once.
func (n *Net) Close() error {
	n.mu.Lock()
	nodes := n.nodes
	done := n.closed
	n.closed = true
	n.mu.Unlock()
	if done {
		return nil
	}
	liveMu.Lock()
	delete(live, n)
	liveMu.Unlock()
	var errs []error
	errs = append(errs, n.fwd.Close())
	// A fresh context: Close also runs when the caller's has ended.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, nd := range nodes {
		// The veth pair first: a namespace outlives its name while
		// anything holds it (a process still inside, or an orphaned TCP
		// socket of a killed engine retransmitting into a cut link), and
		// its veth pair with it.
		if err := run(ctx, "ip", "link", "del", nd.host); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
		if err := run(ctx, "ip", "netns", "del", nd.NS); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	if err := run(ctx, "ip", "link", "del", n.bridge); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, args ...string) error {
	_, err := output(ctx, args...)
	return err
}

func output(ctx context.Context, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("chaos: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
