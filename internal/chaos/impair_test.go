package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/chaos/netem"
)

// TestImpairRealTCP: with every netem fault at once on a's link, a TCP
// stream from a to b arrives whole and unchanged — the kernels' TCP
// retransmits what was lost and drops what was corrupted by its checksum
// — while the forwarder's counts show each fault acted and the kernels'
// counters show (nearly) every corrupted packet caught. Heal puts the routes back
// on the bridge.
func TestImpairRealTCP(t *testing.T) {
	needNetem(t)
	ctx := context.Background()
	n, a, b := twoNodes(t, 42)
	fault := netem.Fault{Delay: 5 * time.Millisecond, Jitter: 5 * time.Millisecond,
		Loss: 0.05, Duplicate: 0.05, Reorder: 0.1, Corrupt: 0.05}
	must(t, n.Impair(ctx, a, fault))
	if routes, _ := output(ctx, "ip", "-n", a.NS, "route"); !strings.Contains(routes, b.IP+" dev "+tunName) {
		t.Fatalf("a's route to b is not on the TUN device:\n%s", routes)
	}

	var ln net.Listener
	must(t, inNamespace(b.NS, func() (err error) {
		ln, err = net.Listen("tcp", b.IP+":0")
		return err
	}))
	defer ln.Close()
	got := make(chan [32]byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Minute))
		h := sha256.New()
		io.Copy(h, c)
		var sum [32]byte
		h.Sum(sum[:0])
		c.Write(sum[:])
		got <- sum
	}()
	data := make([]byte, 512<<10)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var c net.Conn
	must(t, inNamespace(a.NS, func() (err error) {
		c, err = net.DialTimeout("tcp", ln.Addr().String(), time.Minute)
		return err
	}))
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	_, err := c.Write(data)
	must(t, err)
	must(t, c.(*net.TCPConn).CloseWrite())
	echo, err := io.ReadAll(c)
	must(t, err)
	want := sha256.Sum256(data)
	if sum := <-got; sum != want || !bytes.Equal(echo, want[:]) {
		t.Fatalf("the stream arrived changed: sha256 %x (echoed %x), sent %x", sum, echo, want)
	}

	// The kernels' counts first: the connection's last packets (FINs,
	// ACKs) may still be on their way, and a packet the kernels caught
	// was corrupted before they were read, so it is in the netem's counts
	// read after.
	hdr, tcp, err := n.ChecksumErrors(ctx)
	must(t, err)
	s := n.NetemStats()
	t.Logf("netem %v: %+v", fault, s)
	t.Logf("caught by checksums: %d IP headers, %d TCP segments", hdr, tcp)
	if s.Lost == 0 || s.Duplicated == 0 || s.Reordered == 0 || s.Corrupted == 0 || s.Delivered == 0 {
		t.Errorf("a fault did not act: %+v", s)
	}
	// Nothing else corrupts packets here, so the kernels' counts are at
	// most the netem's; a flip that makes the packet IPv6 (dropped,
	// uncounted) or the TCP header length too small (counted as InErrs,
	// not a checksum error) escapes them, rarely.
	if caught := uint64(hdr+tcp) + s.WriteErrors; caught > s.Corrupted || caught < s.Corrupted*3/4 {
		t.Errorf("%d packets corrupted, %d dropped by a checksum or refused by the TUN device", s.Corrupted, caught)
	}

	must(t, n.Heal(ctx, a))
	for _, nd := range []*Node{a, b} {
		if routes, _ := output(ctx, "ip", "-n", nd.NS, "route"); strings.Contains(routes, tunName) {
			t.Errorf("after Heal, %s still routes over the TUN device:\n%s", nd.Name, routes)
		}
	}
}

func TestSnmpField(t *testing.T) {
	snmp := "Ip: Forwarding DefaultTTL InReceives InHdrErrors\nIp: 2 64 100 7\n" +
		"Tcp: RtoAlgorithm InSegs InCsumErrors OutRsts\nTcp: 1 50 3 0\n"
	if v, err := snmpField(snmp, "Ip:", "InHdrErrors"); v != 7 || err != nil {
		t.Errorf("InHdrErrors = %d, %v", v, err)
	}
	if v, err := snmpField(snmp, "Tcp:", "InCsumErrors"); v != 3 || err != nil {
		t.Errorf("InCsumErrors = %d, %v", v, err)
	}
	if _, err := snmpField(snmp, "Udp:", "InCsumErrors"); err == nil {
		t.Error("a missing counter gave no error")
	}
}
