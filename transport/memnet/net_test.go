package memnet

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

const ms = time.Millisecond

// at is an instant n milliseconds after the epoch.
func at(n int) clock.Instant { return clock.Instant(time.Duration(n) * ms) }

// harness drives a Net and records every delivery with its instant.
type harness struct {
	t   *testing.T
	net *Net
	now clock.Instant
	log []logged
	buf []Delivery
}

type logged struct {
	at clock.Instant
	d  Delivery
}

func newHarness(t *testing.T, seed uint64, f Conditions) *harness {
	return &harness{t: t, net: New(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), f)}
}

// runUntil delivers every event due at or before until, advancing now from
// event to event, and returns what was delivered.
func (h *harness) runUntil(until clock.Instant) []logged {
	start := len(h.log)
	for {
		next := h.net.Next()
		if next == clock.Never || next > until {
			break
		}
		h.now = max(h.now, next)
		h.buf = h.net.Deliver(h.now, h.buf[:0])
		for _, d := range h.buf {
			if d.To != d.Event.Local {
				h.t.Fatalf("delivery to %s of an event for %s", d.To, d.Event.Local)
			}
			h.log = append(h.log, logged{h.now, d})
		}
	}
	if until != clock.Never {
		h.now = max(h.now, until)
	}
	return h.log[start:]
}

// runAll delivers everything pending; now stays at the last event.
func (h *harness) runAll() []logged { return h.runUntil(clock.Never) }

// open dials from → to on a network without faults and runs until both ends
// are up.
func (h *harness) open(from, to transport.Addr) transport.ConnID {
	h.t.Helper()
	c := h.net.Dial(h.now, from, to)
	var dialed, accepted bool
	for _, l := range h.runUntil(h.now.Add(time.Hour)) {
		e := l.d.Event
		if e.Conn != c {
			continue
		}
		switch e.Kind {
		case transport.Dialed:
			dialed = e.Local == from && e.Remote == to
		case transport.Accepted:
			accepted = e.Local == to && e.Remote == from
		default:
			h.t.Fatalf("unexpected %v while opening", e)
		}
	}
	if !dialed || !accepted {
		h.t.Fatalf("dial %s→%s: dialed %v accepted %v", from, to, dialed, accepted)
	}
	return c
}

// events returns the events of log for one end of one connection.
func events(log []logged, c transport.ConnID, local transport.Addr) []transport.Event {
	var out []transport.Event
	for _, l := range log {
		if l.d.Event.Conn == c && l.d.Event.Local == local {
			out = append(out, l.d.Event)
		}
	}
	return out
}

// seqs returns the Renew.Seq of every Received event of evs, in order.
func seqs(evs []transport.Event) []uint64 {
	var out []uint64
	for _, e := range evs {
		if e.Kind == transport.Received {
			out = append(out, e.Msg.(*wire.Renew).Seq)
		}
	}
	return out
}

func kinds(evs []transport.Event) string {
	var s []string
	for _, e := range evs {
		if e.Kind != transport.Received {
			s = append(s, e.Kind.String())
		}
	}
	return strings.Join(s, ",")
}

func renew(seq uint64) *wire.Renew { return &wire.Renew{Seq: seq} }

func iota(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// checkContract checks the transport contract on a delivery log, per end of
// each connection: the first event opens it (or DialFailed ends it), nothing
// follows Closed or DialFailed, Closed comes at most once.
func checkContract(t *testing.T, log []logged) {
	t.Helper()
	type key struct {
		c transport.ConnID
		a transport.Addr
	}
	state := map[key]string{} // "" → "open" → "done"
	for i, l := range log {
		e := l.d.Event
		k := key{e.Conn, e.Local}
		if i > 0 && l.at < log[i-1].at {
			t.Fatalf("delivery %d at %v before the previous one at %v", i, l.at, log[i-1].at)
		}
		switch st := state[k]; {
		case st == "done":
			t.Fatalf("delivery %d: %v after the end was done", i, e)
		case st == "" && e.Kind != transport.Dialed && e.Kind != transport.Accepted && e.Kind != transport.DialFailed:
			t.Fatalf("delivery %d: %v before the end was opened", i, e)
		case st == "open" && (e.Kind == transport.Dialed || e.Kind == transport.Accepted || e.Kind == transport.DialFailed):
			t.Fatalf("delivery %d: %v on an open end", i, e)
		}
		switch e.Kind {
		case transport.Dialed, transport.Accepted:
			state[k] = "open"
		case transport.DialFailed, transport.Closed:
			state[k] = "done"
			if e.Reason == "" {
				t.Fatalf("delivery %d: %v without a reason", i, e)
			}
		case transport.Received:
			if e.Msg == nil {
				t.Fatalf("delivery %d: %v without a message", i, e)
			}
		}
	}
}

func TestOrderingWithoutFaults(t *testing.T) {
	h := newHarness(t, 1, Conditions{MinDelay: 1 * ms, MaxDelay: 20 * ms})
	h.net.Listen("p")
	c1 := h.open("d1", "p")
	c2 := h.open("d2", "p")
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 2000
	var seq [4]uint64
	for i := 0; i < n; i++ {
		// Send on a random connection and direction, then advance a random
		// amount, often less than the latency, so many are in flight.
		k := rng.IntN(4)
		c, from := c1, transport.Addr("d1")
		switch k {
		case 1:
			from = "p"
		case 2:
			c, from = c2, "d2"
		case 3:
			c, from = c2, "p"
		}
		if !h.net.Send(h.now, c, from, renew(seq[k])) {
			t.Fatalf("send %d refused", i)
		}
		seq[k]++
		h.runUntil(h.now.Add(time.Duration(rng.IntN(3000)) * time.Microsecond))
	}
	h.runAll()
	checkContract(t, h.log)
	for k, end := range []struct {
		c     transport.ConnID
		local transport.Addr
	}{{c1, "p"}, {c1, "d1"}, {c2, "p"}, {c2, "d2"}} {
		if got := seqs(events(h.log, end.c, end.local)); !slices.Equal(got, iota(0, seq[k])) {
			t.Errorf("conn %d towards %s: received %d messages out of order or with gaps", end.c, end.local, len(got))
		}
	}
	st := h.net.Stats()
	if st.Sent != n || st.Delivered != n || st.Dropped+st.Duplicated+st.Reordered+st.Discarded+st.Overflows != 0 {
		t.Errorf("stats %+v", st)
	}
}

// workload runs random operations (dials, sends, closes, partitions, heals,
// crashes, restarts) against a Net with faults f and returns the delivery
// log, a hash of it and the per-direction send order.
func workload(t *testing.T, seed uint64, f Conditions, steps int) (*harness, uint64, map[dirKey][]uint64) {
	h := newHarness(t, seed, f)
	ops := rand.New(rand.NewPCG(seed, 42))
	ds := []transport.Addr{"d1", "d2", "d3"}
	ps := []transport.Addr{"p1", "p2"}
	for _, p := range ps {
		h.net.Listen(p)
	}
	type end struct {
		c transport.ConnID
		a transport.Addr
	}
	var ends []end // ends that were opened at some point
	sent := map[dirKey][]uint64{}
	var seq uint64
	seen := 0
	collect := func() {
		for ; seen < len(h.log); seen++ {
			if ev := h.log[seen].d.Event; ev.Kind == transport.Dialed || ev.Kind == transport.Accepted {
				ends = append(ends, end{ev.Conn, ev.Local})
			}
		}
	}
	for i := 0; i < steps; i++ {
		switch r := ops.IntN(100); {
		case r < 8:
			h.net.Dial(h.now, ds[ops.IntN(len(ds))], ps[ops.IntN(len(ps))])
		case r < 60 && len(ends) > 0:
			e := ends[ops.IntN(len(ends))]
			seq++
			if h.net.Send(h.now, e.c, e.a, renew(seq)) {
				k := dirKey{e.c, e.a}
				sent[k] = append(sent[k], seq)
			}
		case r < 63 && len(ends) > 0:
			e := ends[ops.IntN(len(ends))]
			h.net.Close(h.now, e.c, e.a)
		case r < 66:
			h.net.Partition(h.now, ds[ops.IntN(len(ds))], ps[ops.IntN(len(ps))])
		case r < 70:
			h.net.Heal(h.now, ds[ops.IntN(len(ds))], ps[ops.IntN(len(ps))])
		case r < 71:
			h.net.Crash(h.now, ps[ops.IntN(len(ps))])
		case r < 73:
			p := ps[ops.IntN(len(ps))]
			h.net.Restart(p)
			h.net.Listen(p)
		default:
			h.runUntil(h.now.Add(time.Duration(ops.IntN(5000)) * time.Microsecond))
			collect()
		}
	}
	// Liveness phase: heal everything, close every connection, drain.
	for _, d := range ds {
		for _, p := range ps {
			h.net.Heal(h.now, d, p)
		}
	}
	h.runAll()
	collect() // ends opened while draining must be closed too
	for _, e := range ends {
		h.net.Close(h.now, e.c, e.a)
	}
	h.runAll()
	hash := fnv.New64a()
	for _, l := range h.log {
		fmt.Fprintf(hash, "%d %v", l.at, l.d.Event)
		if m, ok := l.d.Event.Msg.(*wire.Renew); ok {
			fmt.Fprintf(hash, " %d", m.Seq)
		}
		hash.Write([]byte{'\n'})
	}
	return h, hash.Sum64(), sent
}

type dirKey struct {
	c    transport.ConnID
	from transport.Addr
}

var allFaults = Conditions{
	MinDelay: 100 * time.Microsecond, MaxDelay: 3 * ms,
	DropProb: 0.002, DupProb: 0.05, ReorderProb: 0.05,
	CloseDetectDelay: 10 * ms, PartitionTimeout: 50 * ms,
}

func TestSameSeedSameDeliveries(t *testing.T) {
	h1, a, _ := workload(t, 11, allFaults, 5000)
	_, b, _ := workload(t, 11, allFaults, 5000)
	if a != b {
		t.Fatalf("same seed, different delivery hashes %x and %x", a, b)
	}
	if len(h1.log) < 500 {
		t.Fatalf("workload too small to mean anything: %d deliveries", len(h1.log))
	}
	_, c, _ := workload(t, 12, allFaults, 5000)
	if a == c {
		t.Fatalf("seeds 11 and 12 gave the same delivery hash %x", a)
	}
}

// TestWorkloadKeepsContract runs the random workload over many seeds and
// checks the transport contract, message conservation, and, without dup and
// reorder, that each direction receives exactly a prefix of what was sent,
// in order, whatever drops, closes, partitions and crashes happened.
func TestWorkloadKeepsContract(t *testing.T) {
	tcpLike := allFaults
	tcpLike.DupProb, tcpLike.ReorderProb = 0, 0
	for seed := uint64(1); seed <= 20; seed++ {
		for name, f := range map[string]Conditions{"tcp": tcpLike, "all": allFaults} {
			h, _, sent := workload(t, seed, f, 3000)
			checkContract(t, h.log)
			st := h.net.Stats()
			if st.Sent+st.Duplicated != st.Delivered+st.Dropped+st.Discarded {
				t.Errorf("seed %d %s: messages not conserved: %+v", seed, name, st)
			}
			if n := h.net.Conns(); n != 0 {
				t.Errorf("seed %d %s: %d connections live after closing all", seed, name, n)
			}
			if len(h.net.heap) != 0 || len(h.net.free) != len(h.net.items) {
				t.Errorf("seed %d %s: %d items pending, %d of %d slots free", seed, name, len(h.net.heap), len(h.net.free), len(h.net.items))
			}
			if name != "tcp" {
				continue
			}
			got := map[dirKey][]uint64{}
			for _, l := range h.log {
				if e := l.d.Event; e.Kind == transport.Received {
					k := dirKey{e.Conn, e.Remote}
					got[k] = append(got[k], e.Msg.(*wire.Renew).Seq)
				}
			}
			for k, s := range sent {
				if g := got[k]; len(g) > len(s) || !slices.Equal(g, s[:len(g)]) {
					t.Errorf("seed %d: conn %d from %s: received %v, not a prefix of sent %v", seed, k.c, k.from, g, s)
				}
			}
		}
	}
}

func TestPartitionHoldsThenHeals(t *testing.T) {
	h := newHarness(t, 3, Conditions{MinDelay: 1 * ms, MaxDelay: 10 * ms, CloseDetectDelay: 5 * ms})
	h.net.Listen("p")
	c := h.open("d", "p")
	for i := uint64(0); i < 10; i++ {
		h.net.Send(h.now, c, "d", renew(i))
		h.net.Send(h.now, c, "p", renew(100+i))
	}
	h.net.Partition(h.now, "p", "d") // either order names the pair
	for i := uint64(10); i < 20; i++ {
		h.net.Send(h.now, c, "d", renew(i))
		h.net.Send(h.now, c, "p", renew(100+i))
	}
	h.net.Close(h.now, c, "d") // its FIN is held too, behind the data
	if got := h.runUntil(h.now.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("delivered during the partition: %v", got[0].d.Event)
	}
	if id := h.net.Dial(h.now, "d", "p"); true {
		got := h.runUntil(h.now.Add(time.Hour))
		if len(got) != 1 || got[0].d.Event.Kind != transport.DialFailed || got[0].d.Event.Conn != id || got[0].d.Event.Reason != ReasonUnreachable {
			t.Fatalf("dial across a partition: %v", got)
		}
	}
	h.net.Heal(h.now, "d", "p")
	h.runAll()
	checkContract(t, h.log)
	pe := events(h.log, c, "p")
	if got := seqs(pe); !slices.Equal(got, iota(0, 20)) {
		t.Errorf("p received %v, want 0..19 in order", got)
	}
	if last := pe[len(pe)-1]; last.Kind != transport.Closed || last.Reason != ReasonClosedByPeer {
		t.Errorf("p's last event %v, want Closed by peer", last)
	}
	// d closed its end, so what p sent is discarded, not delivered.
	if got := seqs(events(h.log, c, "d")); len(got) != 0 {
		t.Errorf("d received %v after closing", got)
	}
	if st := h.net.Stats(); st.Delivered != 20 || st.Discarded != 20 {
		t.Errorf("stats %+v", st)
	}
}

func TestShortPartitionKeepsConnection(t *testing.T) {
	h := newHarness(t, 4, Conditions{MinDelay: 1 * ms, MaxDelay: 10 * ms, PartitionTimeout: time.Second})
	h.net.Listen("p")
	c := h.open("d", "p")
	for i := uint64(0); i < 5; i++ {
		h.net.Send(h.now, c, "d", renew(i))
	}
	h.net.Partition(h.now, "d", "p")
	h.runUntil(h.now.Add(900 * ms))
	h.net.Heal(h.now, "d", "p")
	h.net.Partition(h.now, "d", "p") // a new partition: its own timeout
	h.runUntil(h.now.Add(900 * ms))
	h.net.Heal(h.now, "d", "p")
	h.runUntil(h.now.Add(time.Hour))
	checkContract(t, h.log)
	if got := events(h.log, c, "p"); !slices.Equal(seqs(got), iota(0, 5)) || kinds(got) != "accepted" {
		t.Errorf("p got %v", got)
	}
	if !h.net.Send(h.now, c, "p", renew(9)) {
		t.Error("connection closed by partitions shorter than the timeout")
	}
}

func TestLongPartitionClosesBothEnds(t *testing.T) {
	h := newHarness(t, 5, Conditions{MinDelay: 1 * ms, MaxDelay: 10 * ms, PartitionTimeout: time.Second})
	h.net.Listen("p")
	c := h.open("d", "p")
	other := h.open("d2", "p") // not partitioned: unaffected
	start := h.now
	h.net.Partition(h.now, "d", "p")
	for i := uint64(0); i < 5; i++ {
		h.net.Send(h.now, c, "d", renew(i))
	}
	got := h.runUntil(h.now.Add(time.Hour))
	if len(got) != 2 {
		t.Fatalf("want Closed at both ends, got %v", got)
	}
	for _, l := range got {
		e := l.d.Event
		if e.Kind != transport.Closed || e.Conn != c || e.Reason != ReasonPartitionTimeout || l.at.Sub(start) != time.Second {
			t.Errorf("got %v at %v after the partition, want Closed(partition timeout) after 1s", e, l.at.Sub(start))
		}
	}
	if h.net.Send(h.now, c, "d", renew(9)) || h.net.Send(h.now, c, "p", renew(9)) {
		t.Error("Send on a closed connection succeeded")
	}
	h.net.Heal(h.now, "d", "p")
	if got := h.runAll(); len(got) != 0 {
		t.Errorf("delivered after the timeout: %v", got[0].d.Event)
	}
	if st := h.net.Stats(); st.Discarded != 5 || st.Delivered != 0 {
		t.Errorf("stats %+v, want the 5 held messages discarded", st)
	}
	if !h.net.Send(h.now, other, "d2", renew(1)) {
		t.Error("an unrelated connection was closed")
	}
}

func TestDropClosesConnection(t *testing.T) {
	h := newHarness(t, 6, Conditions{MinDelay: 1 * ms, MaxDelay: 10 * ms, DropProb: 0.05, CloseDetectDelay: 200 * ms})
	h.net.Listen("p")
	c := h.open("d", "p")
	var sent uint64
	var dropAt clock.Instant
	for ; sent < 1000 && h.net.Stats().Dropped == 0; sent++ {
		dropAt = h.now
		if !h.net.Send(h.now, c, "d", renew(sent)) {
			t.Fatalf("send %d refused before Closed", sent)
		}
		h.runUntil(h.now.Add(ms))
	}
	if h.net.Stats().Dropped != 1 {
		t.Fatal("no message dropped with DropProb 0.05 in 1000 sends")
	}
	for i := 0; i < 5; i++ { // the sender does not know yet: accepted, lost
		if !h.net.Send(h.now, c, "d", renew(sent)) {
			t.Fatal("send refused before the sender learned of the loss")
		}
		sent++
	}
	h.runAll()
	checkContract(t, h.log)
	pe := events(h.log, c, "p")
	got := seqs(pe)
	lost := h.net.Stats().Dropped
	if want := iota(0, uint64(len(got))); !slices.Equal(got, want) || len(got) >= int(sent) || lost != 1 {
		t.Errorf("p received %v of %d sent", got, sent)
	}
	for _, end := range []transport.Addr{"d", "p"} {
		evs := events(h.log, c, end)
		last := evs[len(evs)-1]
		at := h.log[slices.IndexFunc(h.log, func(l logged) bool { return l.d.Event == last })].at
		if last.Kind != transport.Closed || last.Reason != ReasonMessageLost || at.Sub(dropAt) < 200*ms {
			t.Errorf("%s: last event %v at %v after the drop, want Closed(message lost) after CloseDetectDelay", end, last, at.Sub(dropAt))
		}
	}
	if h.net.Send(h.now, c, "d", renew(0)) {
		t.Error("Send succeeded after Closed")
	}
}

func TestCrashClosesPeersAndDiscards(t *testing.T) {
	f := Conditions{MinDelay: 5 * ms, MaxDelay: 5 * ms, CloseDetectDelay: 100 * ms}
	h := newHarness(t, 7, f)
	h.net.Listen("p")
	c1 := h.open("d1", "p")
	c2 := h.open("d2", "p")
	for i := uint64(0); i < 3; i++ {
		h.net.Send(h.now, c1, "p", renew(i))
		h.net.Send(h.now, c1, "d1", renew(i))
		h.net.Send(h.now, c2, "d2", renew(i))
	}
	h.net.Close(h.now, c2, "d2") // p's Closed for this is pending: discarded too
	pending := h.net.Dial(h.now, "d3", "p")
	crashAt := h.now
	h.net.Crash(h.now, "p")
	if h.net.Send(h.now, c1, "p", renew(9)) {
		t.Error("a crashed node sent")
	}
	if id := h.net.Dial(h.now, "p", "d1"); id != 0 {
		t.Errorf("a crashed node dialed: %d", id)
	}
	h.net.Listen("p") // ignored while crashed
	refused := h.net.Dial(h.now, "d1", "p")
	got := h.runAll()
	checkContract(t, h.log)
	for _, l := range got {
		e := l.d.Event
		switch {
		case e.Local == "p":
			t.Errorf("delivered to the crashed node: %v", e)
		case e.Kind == transport.Received:
			t.Errorf("a message from the crashed node arrived: %v", e)
		case e.Conn == refused:
			if e.Kind != transport.DialFailed || e.Reason != ReasonUnreachable || l.at.Sub(crashAt) != 100*ms {
				t.Errorf("dial to the crashed node: %v after %v", e, l.at.Sub(crashAt))
			}
		case e.Conn == c1 || e.Conn == pending:
			if e.Kind == transport.Dialed && e.Conn == pending {
				continue // the handshake completed before the crash; Closed follows
			}
			if e.Kind != transport.Closed || e.Reason != ReasonPeerCrashed || l.at.Sub(crashAt) != 100*ms {
				t.Errorf("peer of the crashed node: %v after %v, want Closed(peer crashed) after 100ms", e, l.at.Sub(crashAt))
			}
		default:
			t.Errorf("unexpected %v", e)
		}
	}
	if k := kinds(events(got, pending, "d3")); k != "dialed,closed" {
		t.Errorf("dial in flight when the listener crashed: %s", k)
	}
	if st := h.net.Stats(); st.Delivered != 0 || st.Discarded != 9 {
		t.Errorf("stats %+v, want 9 messages discarded", st)
	}
	if n := h.net.Conns(); n != 0 {
		t.Errorf("%d connections live after the crash", n)
	}
	// Restart: fresh connections only.
	h.net.Restart("p")
	if h.net.Send(h.now, c1, "d1", renew(1)) {
		t.Error("Send on a connection of the crashed incarnation")
	}
	if id := h.net.Dial(h.now, "d1", "p"); true {
		got := h.runAll()
		if len(got) != 1 || got[0].d.Event.Kind != transport.DialFailed || got[0].d.Event.Conn != id || got[0].d.Event.Reason != ReasonRefused {
			t.Fatalf("dial to a restarted node that does not listen yet: %v", got)
		}
	}
	h.net.Listen("p")
	c := h.open("d1", "p")
	h.net.Send(h.now, c, "d1", renew(1))
	if got := seqs(events(h.runAll(), c, "p")); !slices.Equal(got, []uint64{1}) {
		t.Errorf("after restart p received %v", got)
	}
}

func TestDialFailures(t *testing.T) {
	f := Conditions{MinDelay: 2 * ms, MaxDelay: 2 * ms, CloseDetectDelay: 50 * ms, MaxConns: 2}
	cases := []struct {
		name   string
		setup  func(n *Net)
		from   transport.Addr
		to     transport.Addr
		reason string
		after  time.Duration
	}{
		{"nobody", func(n *Net) {}, "d", "p", ReasonRefused, 4 * ms},
		{"unlistened", func(n *Net) { n.Listen("p"); n.Unlisten("p") }, "d", "p", ReasonRefused, 4 * ms},
		{"crashed", func(n *Net) { n.Listen("p"); n.Crash(0, "p") }, "d", "p", ReasonUnreachable, 50 * ms},
		{"partitioned", func(n *Net) { n.Listen("p"); n.Partition(0, "d", "p") }, "d", "p", ReasonUnreachable, 50 * ms},
		{"self", func(n *Net) { n.Listen("p") }, "p", "p", ReasonSelfDial, 0},
		{"too many", func(n *Net) { n.Listen("p"); n.Dial(0, "a", "p"); n.Dial(0, "b", "p") }, "d", "p", ReasonTooManyConns, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, f)
			tc.setup(h.net)
			id := h.net.Dial(0, tc.from, tc.to)
			if h.net.Send(0, id, tc.from, renew(1)) {
				t.Error("Send on a dialing connection succeeded")
			}
			h.runAll()
			evs := events(h.log, id, tc.from)
			if len(evs) != 1 || evs[0].Kind != transport.DialFailed || evs[0].Reason != tc.reason || evs[0].Remote != tc.to {
				t.Fatalf("got %v, want DialFailed(%s)", evs, tc.reason)
			}
			if at := h.log[len(h.log)-1].at; h.log[len(h.log)-1].d.Event.Conn == id && at != clock.Instant(tc.after) {
				t.Errorf("DialFailed at %v, want %v", at, tc.after)
			}
			if tc.from != tc.to && len(events(h.log, id, tc.to)) != 0 {
				t.Error("the target heard of a failed dial")
			}
		})
	}
}
