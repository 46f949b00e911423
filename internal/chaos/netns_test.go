package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/chaos/netem"
)

func needRoot(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
}

func needNetem(t *testing.T) {
	t.Helper()
	if err := NetemAvailable(); err != nil {
		t.Skip(err)
	}
}

// twoNodes makes a Net of nodes a and b, closed when t ends.
func twoNodes(t *testing.T, seed uint64) (n *Net, a, b *Node) {
	t.Helper()
	needRoot(t)
	ctx := context.Background()
	n, err := NewNet(ctx, seed, nil)
	must(t, err)
	t.Cleanup(func() { n.Close() })
	a, err = n.AddNode(ctx, "a")
	must(t, err)
	b, err = n.AddNode(ctx, "b")
	must(t, err)
	return n, a, b
}

// TestNetCloseLeavesNothing: Close removes every namespace, veth and the
// bridge, faults in force or not.
func TestNetCloseLeavesNothing(t *testing.T) {
	ctx := context.Background()
	n, a, b := twoNodes(t, 1)
	must(t, n.Partition(ctx, a, b))
	must(t, n.Lossy(ctx, a, 20))
	must(t, n.Slow(ctx, b, "1mbit"))
	if NetemAvailable() == nil {
		must(t, n.Impair(ctx, b, netem.Fault{Delay: time.Millisecond, Loss: 0.1}))
	}
	must(t, n.Close())
	links, err := output(ctx, "ip", "-o", "link", "show")
	must(t, err)
	nss, err := output(ctx, "ip", "netns", "list")
	must(t, err)
	if strings.Contains(links, "kvc"+n.id) || strings.Contains(nss, "-"+n.id+"-") {
		t.Errorf("left behind:\n%s\n%s", links, nss)
	}
}

// TestSweepRemovesOrphanLinks: a veth end of a run whose bridge is gone
// (the namespace holding its peer outlived the run) is removed by the
// next run.
func TestSweepRemovesOrphanLinks(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	must(t, run(ctx, "ip", "link", "add", "kvcdeadv0", "type", "veth", "peer", "name", "kvcdeadv1"))
	n, err := NewNet(ctx, 1, nil)
	must(t, err)
	defer n.Close()
	if links, _ := output(ctx, "ip", "-o", "link", "show"); strings.Contains(links, "kvcdead") {
		run(ctx, "ip", "link", "del", "kvcdeadv0")
		t.Fatalf("an orphan veth survived the sweep:\n%s", links)
	}
}
