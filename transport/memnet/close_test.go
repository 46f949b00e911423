package memnet

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

func TestCloseDeliversThenCloses(t *testing.T) {
	h := newHarness(t, 9, Conditions{MinDelay: 1 * ms, MaxDelay: 30 * ms})
	h.net.Listen("p")
	c := h.open("d", "p")
	for i := uint64(0); i < 50; i++ {
		h.net.Send(h.now, c, "p", renew(i))
	}
	h.net.Close(h.now, c, "p")
	h.net.Close(h.now, c, "p")        // repeated: nothing
	h.net.Close(h.now, c, "stranger") // not an end: nothing
	h.net.Close(h.now, 999, "p")      // unknown: nothing
	if h.net.Send(h.now, c, "p", renew(99)) {
		t.Error("Send after Close succeeded")
	}
	if !h.net.Send(h.now, c, "d", renew(7)) {
		t.Error("the peer cannot know yet that the connection is closed")
	}
	h.runAll()
	checkContract(t, h.log)
	de := events(h.log, c, "d")
	if !slices.Equal(seqs(de), iota(0, 50)) || kinds(de) != "dialed,closed" || de[len(de)-1].Reason != ReasonClosedByPeer {
		t.Errorf("d got %v", de)
	}
	if pe := events(h.log, c, "p"); kinds(pe) != "accepted" || len(seqs(pe)) != 0 {
		t.Errorf("p got %v after closing", pe)
	}
	if h.net.Conns() != 0 {
		t.Errorf("%d connections live", h.net.Conns())
	}
}

func TestCloseBeforeDialedCancels(t *testing.T) {
	h := newHarness(t, 10, Conditions{MinDelay: 5 * ms, MaxDelay: 5 * ms})
	h.net.Listen("p")
	c := h.net.Dial(0, "d", "p")
	h.net.Close(0, c, "d")
	h.runAll()
	checkContract(t, h.log)
	if k := kinds(events(h.log, c, "d")); k != "" {
		t.Errorf("d got %s after cancelling its dial", k)
	}
	if k := kinds(events(h.log, c, "p")); k != "accepted,closed" {
		t.Errorf("p got %s", k)
	}
}

func TestDupAndReorderRates(t *testing.T) {
	const n = 20000
	const dupP, reorderP = 0.1, 0.2
	h := newHarness(t, 12, Conditions{MinDelay: 1 * ms, MaxDelay: 5 * ms, DupProb: dupP, ReorderProb: reorderP})
	h.net.Listen("p")
	c := h.open("d", "p")
	for i := uint64(0); i < n; i++ {
		h.net.Send(h.now, c, "d", renew(i))
		if i%10 == 9 {
			h.runUntil(h.now.Add(ms))
		}
	}
	h.runAll()
	checkContract(t, h.log)
	st := h.net.Stats()
	within := func(got uint64, p float64) bool {
		return float64(got) > 0.9*p*n && float64(got) < 1.1*p*n
	}
	if !within(st.Duplicated, dupP) || !within(st.Reordered, reorderP) {
		t.Errorf("stats %+v: want about %.0f duplicated and %.0f reordered", st, dupP*n, reorderP*n)
	}
	got := seqs(events(h.log, c, "p"))
	count := make([]int, n)
	for _, s := range got {
		count[s]++
	}
	var dups uint64
	for s, k := range count {
		if k < 1 || k > 2 {
			t.Fatalf("message %d delivered %d times", s, k)
		}
		dups += uint64(k - 1)
	}
	if dups != st.Duplicated || uint64(len(got)) != st.Delivered {
		t.Errorf("%d duplicates and %d deliveries observed, stats say %+v", dups, len(got), st)
	}
}

// TestReorderCountsOvertakes checks that Stats.Reordered is exactly the
// number of inversions in the delivered order.
func TestReorderCountsOvertakes(t *testing.T) {
	const n = 3000
	h := newHarness(t, 13, Conditions{MinDelay: 1 * ms, MaxDelay: 5 * ms, ReorderProb: 0.3})
	h.net.Listen("p")
	c := h.open("d", "p")
	for i := uint64(0); i < n; i++ {
		h.net.Send(h.now, c, "d", renew(i))
		if i%7 == 6 {
			h.runUntil(h.now.Add(ms))
		}
	}
	h.runAll()
	got := seqs(events(h.log, c, "p"))
	if len(got) != n {
		t.Fatalf("%d of %d delivered", len(got), n)
	}
	var inversions uint64
	for i := range got {
		for j := i + 1; j < len(got); j++ {
			if got[i] > got[j] {
				inversions++
			}
		}
	}
	if st := h.net.Stats(); inversions != st.Reordered || inversions == 0 {
		t.Errorf("%d inversions delivered, Stats.Reordered = %d", inversions, st.Reordered)
	}
}

func TestQueueBound(t *testing.T) {
	h := newHarness(t, 14, Conditions{MinDelay: ms, MaxDelay: ms})
	h.net.Listen("p")
	c := h.open("d", "p")
	for i := 0; i < DefaultMaxQueuedPerConn; i++ {
		if !h.net.Send(h.now, c, "d", renew(uint64(i))) {
			t.Fatalf("send %d refused below the bound", i)
		}
	}
	if h.net.Send(h.now, c, "d", renew(0)) {
		t.Fatal("send beyond DefaultMaxQueuedPerConn accepted")
	}
	if h.net.Send(h.now, c, "p", renew(0)) || h.net.Send(h.now, c, "d", renew(0)) {
		t.Fatal("send on an overflowed connection accepted")
	}
	got := h.runAll()
	checkContract(t, h.log)
	if len(got) != 2 {
		t.Fatalf("want Closed at both ends and nothing else, got %d events", len(got))
	}
	for _, l := range got {
		if e := l.d.Event; e.Kind != transport.Closed || e.Reason != ReasonQueueOverflow {
			t.Errorf("got %v, want Closed(queue overflow)", e)
		}
	}
	if st := h.net.Stats(); st.Overflows != 1 || st.Discarded != DefaultMaxQueuedPerConn || st.Sent != DefaultMaxQueuedPerConn {
		t.Errorf("stats %+v", st)
	}
}

func TestQueueBoundCountsOnlyUndelivered(t *testing.T) {
	h := newHarness(t, 15, Conditions{MinDelay: ms, MaxDelay: ms, MaxQueuedPerConn: 4})
	h.net.Listen("p")
	c := h.open("d", "p")
	for round := 0; round < 10; round++ {
		for i := 0; i < 4; i++ {
			if !h.net.Send(h.now, c, "d", renew(uint64(i))) {
				t.Fatalf("round %d: send %d refused", round, i)
			}
		}
		if !h.net.Send(h.now, c, "p", renew(0)) {
			t.Fatal("the other direction has its own bound")
		}
		h.runAll()
	}
	if st := h.net.Stats(); st.Delivered != 50 || st.Overflows != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPartitionHoldsAgainstQueueBound(t *testing.T) {
	h := newHarness(t, 16, Conditions{MinDelay: ms, MaxDelay: ms, MaxQueuedPerConn: 3})
	h.net.Listen("p")
	c := h.open("d", "p")
	h.net.Partition(h.now, "d", "p")
	for i := 0; i < 3; i++ {
		h.net.Send(h.now, c, "d", renew(uint64(i)))
		h.runAll()
	}
	if h.net.Send(h.now, c, "d", renew(3)) {
		t.Fatal("held messages do not count against the bound")
	}
	if got := h.runAll(); len(got) != 2 || got[0].d.Event.Reason != ReasonQueueOverflow {
		t.Fatalf("got %v", got)
	}
}

func TestBlockIsCopiedOnSend(t *testing.T) {
	h := newHarness(t, 17, Conditions{MinDelay: ms, MaxDelay: ms, DupProb: 1})
	h.net.Listen("p")
	c := h.open("d", "p")
	b := &wire.Block{ReadID: 1, Index: 2, Tokens: 2, Digests: []uint64{5, 6}, Data: []byte("kv bytes")}
	if !h.net.Send(h.now, c, "p", b) {
		t.Fatal("send refused")
	}
	copy(b.Data, "XXXXXXXX") // the sender reuses its buffers at once
	b.Digests[0] = 0
	b.Index = 9
	got := h.runAll()
	if len(got) != 2 {
		t.Fatalf("want the block and its duplicate, got %d events", len(got))
	}
	for _, l := range got {
		rb := l.d.Event.Msg.(*wire.Block)
		if rb == b || string(rb.Data) != "kv bytes" || rb.Digests[0] != 5 || rb.Index != 2 || rb.ReadID != 1 {
			t.Errorf("received %+v, want the block as it was at Send", rb)
		}
	}
}

func TestBadInput(t *testing.T) {
	h := newHarness(t, 18, Conditions{})
	h.net.Listen("p")
	c := h.open("d", "p")
	var nilBlock *wire.Block
	for name, ok := range map[string]bool{
		"conn 0":       h.net.Send(0, 0, "d", renew(1)),
		"unknown conn": h.net.Send(0, 99, "d", renew(1)),
		"stranger":     h.net.Send(0, c, "x", renew(1)),
		"nil message":  h.net.Send(0, c, "d", nil),
		"nil block":    h.net.Send(0, c, "d", nilBlock),
	} {
		if ok {
			t.Errorf("Send with %s succeeded", name)
		}
	}
	h.net.Close(0, 0, "")
	h.net.Heal(0, "a", "b")
	h.net.Partition(0, "a", "a")
	h.net.Restart("nobody")
	h.net.Unlisten("nobody")
	if got := h.runAll(); len(got) != 0 {
		t.Errorf("bad input delivered %v", got)
	}
	// Time going backwards is treated as the latest instant seen.
	later := h.now.Add(time.Second)
	h.net.Send(later, c, "d", renew(1))
	h.net.Send(at(5), c, "d", renew(2))
	got := h.runAll()
	if s := seqs(events(got, c, "p")); !slices.Equal(s, []uint64{1, 2}) || got[1].at != later {
		t.Errorf("got %v", got)
	}
}

func TestFaultsValidate(t *testing.T) {
	bad := map[string]Conditions{
		"MinDelay":         {MinDelay: -1},
		"MaxDelay":         {MinDelay: 2, MaxDelay: 1},
		"CloseDetectDelay": {CloseDetectDelay: -1},
		"MaxQueuedPerConn": {MaxQueuedPerConn: -1},
		"MaxConns":         {MaxConns: -1},
		"DropProb":         {DropProb: 1.5},
		"DupProb":          {DupProb: -0.1},
		"ReorderProb":      {ReorderProb: nan()},
	}
	for field, f := range bad {
		err := f.Validate()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate(%s) = %v, want an error naming it", field, err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New accepted a bad %s", field)
				}
			}()
			New(rand.New(rand.NewPCG(1, 1)), f)
		}()
	}
	if err := allFaults.Validate(); err != nil {
		t.Errorf("valid faults rejected: %v", err)
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestNextSkipsDeadEvents(t *testing.T) {
	h := newHarness(t, 19, Conditions{MinDelay: ms, MaxDelay: ms, PartitionTimeout: time.Second})
	h.net.Listen("p")
	c := h.open("d", "p")
	h.net.Partition(h.now, "d", "p")
	h.net.Heal(h.now, "d", "p") // the timeout events are now dead
	h.net.Send(h.now, c, "d", renew(1))
	h.net.Close(h.now, c, "p") // the message to p is now dead
	want := h.now.Add(ms)      // d's Closed
	if got := h.net.Next(); got != want {
		t.Errorf("Next = %v, want %v", got, want)
	}
	h.runAll()
	if got := h.net.Next(); got != clock.Never {
		t.Errorf("Next = %v on an idle network", got)
	}
}
