package netem

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"
)

// chanDev is a Device in memory: send puts a packet for the Forwarder to
// read, got receives what the Forwarder writes.
type chanDev struct {
	send, got chan []byte
	closed    chan struct{}
}

func newChanDev() *chanDev {
	return &chanDev{send: make(chan []byte), got: make(chan []byte, 100), closed: make(chan struct{})}
}

func (d *chanDev) Read(b []byte) (int, error) {
	select {
	case p := <-d.send:
		return copy(b, p), nil
	case <-d.closed:
		return 0, errors.New("closed")
	}
}

func (d *chanDev) Write(b []byte) (int, error) {
	d.got <- append([]byte(nil), b...)
	return len(b), nil
}

func (d *chanDev) Close() error {
	select {
	case <-d.closed:
	default:
		close(d.closed)
	}
	return nil
}

var (
	addrA = netip.MustParseAddr("10.213.7.2")
	addrB = netip.MustParseAddr("10.213.7.3")
	addrC = netip.MustParseAddr("10.213.7.4")
)

// ipv4 is a minimal IPv4 packet from src to dst carrying payload.
func ipv4(src, dst netip.Addr, payload string) []byte {
	p := make([]byte, 20, 20+len(payload))
	p[0] = 0x45
	s, d := src.As4(), dst.As4()
	copy(p[12:16], s[:])
	copy(p[16:20], d[:])
	return append(p, payload...)
}

func setup(t *testing.T, limit int) (*Forwarder, *chanDev, *chanDev) {
	f := NewForwarder(rand.New(rand.NewPCG(1, 2)), limit, nil)
	a, b := newChanDev(), newChanDev()
	if err := f.Add(addrA, a); err != nil {
		t.Fatal(err)
	}
	if err := f.Add(addrB, b); err != nil {
		t.Fatal(err)
	}
	return f, a, b
}

// TestForwarderRoutesByDestination: a packet goes to the device of its
// destination address, at once and unchanged on a healthy link; others
// are counted as unroutable.
func TestForwarderRoutesByDestination(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, a, b := setup(t, 0)
		defer f.Close()
		p := ipv4(addrA, addrB, "hello")
		a.send <- p
		synctest.Wait()
		select {
		case got := <-b.got:
			if !bytes.Equal(got, p) {
				t.Fatalf("B got %x, want %x", got, p)
			}
		default:
			t.Fatal("B got nothing")
		}
		b.send <- ipv4(addrB, addrC, "nobody") // no device has C
		b.send <- []byte{0x60, 0, 0, 0}        // IPv6
		b.send <- []byte{0x45}                 // too short
		synctest.Wait()
		if s := f.Stats(); s.Unroutable != 3 || s.Offered != 1 || s.Delivered != 1 {
			t.Errorf("stats %+v", s)
		}
		if len(a.got) != 0 {
			t.Error("A got a packet it was not sent")
		}
	})
}

// TestForwarderDelaysBothWays: a fault on A's link delays what A sends
// and what it receives; B's link adds its own; healing A leaves B's.
func TestForwarderDelaysBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, a, b := setup(t, 0)
		defer f.Close()
		must(t, f.Set(addrA, Fault{Delay: 50 * time.Millisecond}))
		must(t, f.Set(addrB, Fault{Delay: 20 * time.Millisecond}))
		cases := []struct {
			from, to *chanDev
			src, dst netip.Addr
			want     time.Duration
		}{
			{a, b, addrA, addrB, 70 * time.Millisecond},
			{b, a, addrB, addrA, 70 * time.Millisecond},
		}
		for _, c := range cases {
			start := time.Now()
			c.from.send <- ipv4(c.src, c.dst, "x")
			<-c.to.got
			if d := time.Since(start); d != c.want {
				t.Errorf("%v -> %v took %v, want %v", c.src, c.dst, d, c.want)
			}
		}
		must(t, f.Set(addrA, Fault{}))
		start := time.Now()
		a.send <- ipv4(addrA, addrB, "x")
		<-b.got
		if d := time.Since(start); d != 20*time.Millisecond {
			t.Errorf("after healing A: %v, want B's 20ms", d)
		}
	})
}

// TestForwarderLossAndOverflowCounted: every packet sent is delivered,
// lost or dropped for want of room, and the counts say which.
func TestForwarderLossAndOverflowCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, a, b := setup(t, 5)
		defer f.Close()
		must(t, f.Set(addrA, Fault{Delay: time.Second, Loss: 0.5}))
		const n = 40
		for i := range n {
			a.send <- ipv4(addrA, addrB, string(rune('a'+i%26)))
		}
		time.Sleep(2 * time.Second) // fake time: the queue drains
		synctest.Wait()
		s := f.Stats()
		if int(s.Delivered) != len(b.got) || s.Delivered != 5 || s.Lost+s.Overflow+s.Delivered != n || s.Lost == 0 || s.Overflow == 0 {
			t.Errorf("stats %+v, B got %d", s, len(b.got))
		}
	})
}

func TestForwarderRefusesBadSetup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _, _ := setup(t, 0)
		if err := f.Add(addrA, newChanDev()); err == nil {
			t.Error("a second device with A's address was accepted")
		}
		if err := f.Set(addrC, Fault{Loss: 0.1}); err == nil {
			t.Error("a fault on an address without a device was accepted")
		}
		if err := f.Set(addrA, Fault{Loss: 2}); err == nil {
			t.Error("an invalid fault was accepted")
		}
		must(t, f.Close())
		must(t, f.Close())
		if err := f.Add(addrC, newChanDev()); err == nil {
			t.Error("a closed forwarder accepted a device")
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
