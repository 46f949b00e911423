package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// TestScenarioS24RenewAndReadAfterDueBeforeSweep: P hangs across a lease's
// deadline while D, congested, keeps renewing it and then reads it. When P
// resumes, it handles the RENEWs and the READ waiting for it before its
// next sweep, all after the lease's due instant: each is refused as
// expired, no block is sent, the lease is released expired at that instant
// (once), and D falls back and still answers correctly. The expiry
// invariants (invariants.go) run on every message.
func TestScenarioS24RenewAndReadAfterDueBeforeSweep(t *testing.T) {
	spec := congested()
	tc := spec.Transfer // lease 3 s, heartbeat 500 ms, extension 2 s
	c := New(spec)
	log := logMessages(c)
	h := hog(c, "hog", 0, 2*time.Second) // D admits r only when the hog ends
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	hangAt, hangFor := inst(time.Second), 3*time.Second
	c.Hang(hangAt, "p0", hangFor)
	settle(t, c, 60*time.Second)
	wantDone(t, h, true, 0)
	if !r.Done || r.Error != "" || r.Pulled || r.Fallback != xfer.FallbackLeaseGone {
		t.Fatalf("r: done %v error %q pulled %v fallback %v, want lease_gone", r.Done, r.Error, r.Pulled, r.Fallback)
	}
	resume := hangAt.Add(hangFor)
	rel := releaseOf(t, c, "p0", r)
	if rel.Reason != wire.ReasonExpired || rel.At != resume {
		t.Fatalf("release %+v, want expired at the resume, %v", rel, resume)
	}
	if n := c.Node("p0").Released[wire.ReasonExpired]; n != 1 {
		t.Fatalf("expired counted %d times", n)
	}
	// What reached D about the lease after P resumed.
	var renewsRefused, readEnds int
	for _, e := range log.entries {
		if e.to != "d0" || e.at < resume {
			continue
		}
		switch m := e.m.(type) {
		case *wire.Block:
			if m.Lease == r.Grant.Lease {
				t.Fatalf("a block of the expired lease reached D at %v", e.at)
			}
		case *wire.ReadEnd:
			if m.Lease == r.Grant.Lease {
				readEnds++
				if m.Status != wire.StatusExpired {
					t.Fatalf("READ answered %v", m.Status)
				}
			}
		case *wire.RenewAck:
			for _, res := range m.Results {
				if res.ID != r.Grant.Lease {
					continue
				}
				if res.Status != wire.StatusExpired || res.ExpiresInMs != 0 {
					t.Fatalf("RENEW answered %+v", res)
				}
				renewsRefused++
			}
		}
	}
	// D renewed while P hung (every other heartbeat, then every one once
	// P's silence stopped extending its view of the lease), and read once
	// the hog ended.
	if want := int(hangFor/(2*tc.HeartbeatInterval)) - 1; renewsRefused < want || readEnds != 1 {
		t.Fatalf("after the resume D got %d refused renewals (want ≥ %d) and %d READ_ENDs", renewsRefused, want, readEnds)
	}
}

// TestScenarioS24WrappedRemainderIsCaught shows the simulator's check on
// ExpiresInMs can fail: a RENEW_ACK with a negative remainder wrapped to
// ~49 days, as P computed it before the clamp, is a violation.
func TestScenarioS24WrappedRemainderIsCaught(t *testing.T) {
	c := New(congested())
	hog(c, "hog", 0, time.Second)
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	c.At(inst(300*ms), func() {
		c.Inject(c.Now, "p0", "d0", &wire.RenewAck{Seq: 1, Results: []wire.RenewResult{
			{ID: r.Grant.Lease, Status: wire.StatusOK, ExpiresInMs: 4294967295}}})
	})
	c.RunIdle(60 * time.Second)
	if len(c.Violations) == 0 || !strings.Contains(strings.Join(c.Violations, "\n"), "beyond the policy's maximum") {
		t.Fatalf("violations %q", c.Violations)
	}
}
