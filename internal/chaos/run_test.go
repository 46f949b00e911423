package chaos

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSummarize: each fault is matched with P's first release of a
// fault's reason after its start and before the next fault's; the table
// gives the count, the reasons and the times per kind; releases of a
// fault's reason far from any fault are counted apart. (Needs no root.)
func TestSummarize(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	w := &Watch{events: []ReleaseEvent{
		{At: at(500 * time.Millisecond), Reason: "read_done", N: 3},
		{At: at(3100 * time.Millisecond), Reason: "expired", N: 2},
		{At: at(10200 * time.Millisecond), Reason: "peer_lost", N: 1},
		{At: at(20500 * time.Millisecond), Reason: "aborted", N: 1}, // a client's hang-up
		{At: at(30 * time.Second), Reason: "unclaimed", N: 1},       // after the next fault began
		{At: at(60 * time.Second), Reason: "expired", N: 2},         // long after every fault healed
	}}
	rep := &Report{Faults: []Fault{
		{Kind: "partition-long", startedAt: at(0)},
		{Kind: "partition-long", startedAt: at(10 * time.Second)},
		{Kind: "kill-decode", startedAt: at(20 * time.Second)},
		{Kind: "kill-proxy", startedAt: at(25 * time.Second), For: time.Second},
	}, Answered: 5, Equal: 5, Lease: 3 * time.Second}
	rep.Netem.Offered, rep.Netem.Corrupted, rep.ChecksumTCP = 100, 3, 3
	rep.Released = map[string]float64{"unclaimed": 1, "expired": 4}
	rep.ClaimedAfterRelease = map[string]float64{"unclaimed": 1}
	summarize(rep, w)
	if f := rep.Faults[0]; !f.Released || f.Release != 3100*time.Millisecond || f.ReleaseReason != "expired" {
		t.Errorf("first fault %+v", f)
	}
	if f := rep.Faults[2]; f.Released {
		t.Errorf("kill-decode matched an abort or a release after the next fault began: %+v", f)
	}
	if f := rep.Faults[3]; !f.Released || f.ReleaseReason != "unclaimed" {
		t.Errorf("kill-proxy %+v", f)
	}
	if got := nonZero(rep.Unexplained); len(got) != 1 || got["expired"] != 2 {
		t.Errorf("Unexplained = %v, want the 2 expired long after the faults", got)
	}
	if rep.FaultsByKind["partition-long"] != 2 || rep.ReleaseP99["partition-long"] != 3100*time.Millisecond ||
		rep.ReleaseMedian["partition-long"] != 3100*time.Millisecond {
		t.Errorf("by kind %v, p99 %v, median %v", rep.FaultsByKind, rep.ReleaseP99, rep.ReleaseMedian)
	}
	if got := w.Totals(); got["read_done"] != 3 || got["expired"] != 4 {
		t.Errorf("Totals = %v", got)
	}
	var b strings.Builder
	rep.Write(&b)
	for _, want := range []string{"expired 1, peer_lost 1", "kill-proxy", "OK: every answer equal", "3 corrupted", "3 by TCP's", "later claimed by a decode engine (which recomputed): 1 of 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	rep.Leftover = []string{"prefill0 kvlease_leases_active[] = 1"}
	b.Reset()
	rep.Write(&b)
	if rep.OK() || !strings.Contains(b.String(), "LEFT HELD") || !strings.Contains(b.String(), "FAILED") {
		t.Errorf("a report with a leftover:\n%s", b.String())
	}
}

// TestNetemFaultsValid: every netem kind of the random schedule draws a
// valid fault that does what its name says. (Needs no root.)
func TestNetemFaultsValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := 0
	for _, k := range FaultKinds {
		if !slices.Contains(netemKinds, k) {
			continue
		}
		kinds++
		for range 100 {
			f := netemFault(k, rng)
			if err := f.Validate(); err != nil || f.Delay == 0 {
				t.Fatalf("%s: %v: %v", k, f, err)
			}
			if map[string]float64{"jitter-loss": f.Loss, "reorder": f.Reorder, "duplicate": f.Duplicate, "corrupt": f.Corrupt}[k] == 0 {
				t.Fatalf("%s drew %v", k, f)
			}
		}
	}
	if kinds != 4 {
		t.Errorf("%d netem kinds in FaultKinds, want 4", kinds)
	}
}
