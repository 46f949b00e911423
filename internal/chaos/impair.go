package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kvlease/kvlease/internal/chaos/netem"
)

// Impair puts fault on nd's link, as tc netem would on a kernel that has
// it: every packet between nd and another node (both ways) goes through
// the harness's userspace netem, which delays, drops, reorders,
// duplicates or corrupts it as fault says. The routes between nd and
// each other node move onto the nodes' TUN devices (the same addresses,
// so open connections carry on); what the root namespace (the harness's
// scrapes and clients) exchanges with nd stays on the bridge. Impairing
// an impaired node replaces its fault. The tc faults (Cut, Isolate,
// Lossy, Slow) act on the bridge path only, so they do not combine with
// an Impair on the same pair of nodes. Heal ends it.
func (n *Net) Impair(ctx context.Context, nd *Node, fault netem.Fault) error {
	if err := NetemAvailable(); err != nil {
		return err
	}
	if err := fault.Validate(); err != nil {
		return err
	}
	if fault.IsZero() {
		return n.unimpair(ctx, nd)
	}
	n.mu.Lock()
	_, already := n.impaired[nd]
	n.impaired[nd] = fault
	peers := n.peersLocked(nd)
	n.mu.Unlock()
	if err := n.fwd.Set(netip4(nd), fault); err != nil {
		return err
	}
	if already {
		return nil
	}
	var steps [][]string
	for _, p := range peers {
		steps = append(steps, tunRoute("replace", nd, p), tunRoute("replace", p, nd))
	}
	return runAll(ctx, steps)
}

// unimpair heals nd's netem fault: packets between nd and a node that is
// not impaired itself go back to the bridge. Packets still queued in the
// forwarder are delivered as they were to be.
func (n *Net) unimpair(ctx context.Context, nd *Node) error {
	n.mu.Lock()
	_, was := n.impaired[nd]
	delete(n.impaired, nd)
	var steps [][]string
	for _, p := range n.peersLocked(nd) {
		if _, still := n.impaired[p]; !still {
			steps = append(steps, tunRoute("del", nd, p), tunRoute("del", p, nd))
		}
	}
	n.mu.Unlock()
	if !was {
		return nil
	}
	return errors.Join(n.fwd.Set(netip4(nd), netem.Fault{}), runAll(ctx, steps))
}

func netip4(nd *Node) netip.Addr { return netip.MustParseAddr(nd.IP) }

func (n *Net) peersLocked(nd *Node) []*Node {
	var out []*Node
	for _, p := range n.nodes {
		if p != nd {
			out = append(out, p)
		}
	}
	return out
}

// tunRoute is the ip command that sends from's packets for to over from's
// TUN device (verb replace) or back over the bridge (verb del).
func tunRoute(verb string, from, to *Node) []string {
	args := []string{"ip", "-n", from.NS, "route", verb, to.IP + "/32", "dev", tunName}
	if verb != "del" {
		args = append(args, "src", from.IP)
	}
	return args
}

func runAll(ctx context.Context, steps [][]string) error {
	var errs []error
	for _, args := range steps {
		errs = append(errs, run(ctx, args...))
	}
	return errors.Join(errs...)
}

// NetemStats returns what the userspace netem did so far, over every
// link.
func (n *Net) NetemStats() netem.ForwardStats { return n.fwd.Stats() }

// ChecksumErrors returns, over every node, the IPv4 packets whose header
// failed its checksum (Ip InHdrErrors, which also counts other header
// faults) and the TCP segments that failed theirs (Tcp InCsumErrors):
// how many corrupted packets the kernels caught, from /proc/net/snmp in
// each namespace.
func (n *Net) ChecksumErrors(ctx context.Context) (ipHeader, tcp int, err error) {
	n.mu.Lock()
	nodes := append([]*Node(nil), n.nodes...)
	n.mu.Unlock()
	for _, nd := range nodes {
		out, err := output(ctx, append(nd.Exec(), "cat", "/proc/net/snmp")...)
		if err != nil {
			return 0, 0, err
		}
		h, err := snmpField(out, "Ip:", "InHdrErrors")
		if err != nil {
			return 0, 0, err
		}
		c, err := snmpField(out, "Tcp:", "InCsumErrors")
		if err != nil {
			return 0, 0, err
		}
		ipHeader += h
		tcp += c
	}
	return ipHeader, tcp, nil
}

// snmpField reads one counter of /proc/net/snmp: a line of names after
// prefix, then a line of values after it.
func snmpField(snmp, prefix, name string) (int, error) {
	var names []string
	for line := range strings.Lines(snmp) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != prefix {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, k := range names {
			if k == name && i < len(f) {
				return strconv.Atoi(f[i])
			}
		}
		break
	}
	return 0, fmt.Errorf("chaos: /proc/net/snmp has no %s %s", prefix, name)
}
