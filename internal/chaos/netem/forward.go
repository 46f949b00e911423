package netem

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// Device is one end a Forwarder reads IP packets from and writes them to:
// each Read returns one whole packet, each Write takes one (a TUN device
// opened with IFF_TUN|IFF_NO_PI behaves so). Close must end a Read in
// progress.
type Device io.ReadWriteCloser

// maxPacket bounds the packets a Forwarder reads: an IPv4 packet's largest
// size.
const maxPacket = 65535

// Forwarder moves IPv4 packets between devices by destination address,
// through one Queue: a packet from the device of address A to that of B is
// offered with A's fault plus B's (Fault.Plus), and written to B's device
// when it is due. Packets to an address no device has, and packets that
// are not IPv4, are dropped and counted. Safe for concurrent use.
type Forwarder struct {
	log *slog.Logger

	mu         sync.Mutex
	q          *Queue
	devs       []Device
	addrs      []netip.Addr
	byAddr     map[netip.Addr]int
	faults     map[netip.Addr]Fault
	unroutable uint64
	writeErrs  uint64
	closed     bool

	wake chan struct{} // a packet was queued: the writer may need to wake earlier
	done chan struct{}
	wg   sync.WaitGroup
}

// ForwardStats are a Forwarder's counts: its Queue's, and the packets it
// could not route or write.
type ForwardStats struct {
	Stats
	Unroutable  uint64 // not IPv4, or to an address no device has
	WriteErrors uint64 // the destination device refused the write
}

// NewForwarder returns a Forwarder whose Queue draws from rng and holds at
// most limit packets (DefaultLimit if limit <= 0). log (nil: discard)
// receives each fault change with the counts so far.
func NewForwarder(rng *rand.Rand, limit int, log *slog.Logger) *Forwarder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{log: log, q: NewQueue(rng, limit), byAddr: map[netip.Addr]int{},
		faults: map[netip.Addr]Fault{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	f.wg.Go(f.write)
	return f
}

// Add reads packets from dev, whose address is addr, until Close, and
// delivers to it the packets for addr. The Forwarder closes dev.
func (f *Forwarder) Add(addr netip.Addr, dev Device) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		dev.Close()
		return errors.New("netem: forwarder closed")
	}
	if _, dup := f.byAddr[addr]; dup || !addr.Is4() {
		dev.Close()
		return fmt.Errorf("netem: address %v: want a new IPv4 address", addr)
	}
	f.byAddr[addr] = len(f.devs)
	f.devs = append(f.devs, dev)
	f.addrs = append(f.addrs, addr)
	f.wg.Go(func() { f.read(addr, dev) })
	return nil
}

// Set puts fault on the link of addr's device: on every packet it sends
// or receives from now on. The zero Fault heals the link; packets already
// queued keep their fate.
func (f *Forwarder) Set(addr netip.Addr, fault Fault) error {
	if err := fault.Validate(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.byAddr[addr]; !ok {
		return fmt.Errorf("netem: no device with address %v", addr)
	}
	if fault.IsZero() {
		delete(f.faults, addr)
	} else {
		f.faults[addr] = fault
	}
	f.log.Info("netem: link fault", "addr", addr, "fault", fault.String(), "queued", f.q.Len(), "stats", f.statsLocked())
	return nil
}

// Stats returns the counts so far.
func (f *Forwarder) Stats() ForwardStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statsLocked()
}

func (f *Forwarder) statsLocked() ForwardStats {
	return ForwardStats{Stats: f.q.Stats(), Unroutable: f.unroutable, WriteErrors: f.writeErrs}
}

// Close closes every device, drops what is queued and waits for the
// Forwarder's goroutines to end. Safe to call more than once.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	devs := f.devs
	close(f.done)
	f.mu.Unlock()
	var errs []error
	for _, d := range devs {
		errs = append(errs, d.Close())
	}
	f.wg.Wait()
	return errors.Join(errs...)
}

// read offers each packet dev sends to the queue.
func (f *Forwarder) read(from netip.Addr, dev Device) {
	buf := make([]byte, maxPacket)
	for {
		n, err := dev.Read(buf)
		if err != nil {
			select {
			case <-f.done:
			default:
				f.log.Warn("netem: device read failed; its link is down", "addr", from, "err", err)
			}
			return
		}
		f.route(time.Now(), from, buf[:n])
	}
}

// route offers one packet read from the device of from.
func (f *Forwarder) route(now time.Time, from netip.Addr, pkt []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	to, ok := dest(pkt)
	port, known := f.byAddr[to]
	if !ok || !known {
		f.unroutable++
		return
	}
	f.q.Offer(now, Packet{Data: append([]byte(nil), pkt...), Port: port}, f.faults[from].Plus(f.faults[to]))
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// dest returns an IPv4 packet's destination address.
func dest(pkt []byte) (netip.Addr, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(pkt[16:20])), true
}

// write delivers each packet when it is due.
func (f *Forwarder) write() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []Packet
	for {
		f.mu.Lock()
		now := time.Now()
		due = due[:0]
		for {
			p, ok := f.q.Pop(now)
			if !ok {
				break
			}
			due = append(due, p)
		}
		next, queued := f.q.Next()
		devs := f.devs
		f.mu.Unlock()
		failed := 0
		for _, p := range due {
			if _, err := devs[p.Port].Write(p.Data); err != nil {
				failed++
			}
		}
		if failed > 0 {
			f.mu.Lock()
			f.writeErrs += uint64(failed)
			f.mu.Unlock()
		}
		if len(due) > 0 {
			continue // more may have fallen due while writing
		}
		wait := time.Hour
		if queued {
			wait = next.Sub(now)
		}
		timer.Reset(wait)
		select {
		case <-f.done:
			return
		case <-f.wake:
		case <-timer.C:
		}
	}
}
