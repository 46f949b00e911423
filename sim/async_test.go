package sim

import (
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
)

// Issue 29: an engine's loop keeps serving its leases while its model
// computes, and a message is judged on when it reached the engine.

// TestScenarioBusyPrefillServesReadOnTime: P's loop is busy (not its
// process stopped, as in S24) across lease r's due instant, while D's READ
// of r, sent once D's seat freed, reached P's transport before that
// instant. When P's loop resumes it handles the READ as of its arrival: the
// lease was live then, so the READ pins it and P streams its blocks; D
// decodes from the pulled prefix and the lease ends read_done. (Judged at
// the instant the loop handled it, the lease would have expired under a
// READ that came on time.)
func TestScenarioBusyPrefillServesReadOnTime(t *testing.T) {
	c := New(congested()) // lease 3 s, heartbeat 500 ms, extension 2 s
	h := hog(c, "hog", 0, 2*time.Second)
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	pauseAt, pauseFor := inst(1500*ms), 2500*time.Millisecond
	c.Pause(pauseAt, "p0", pauseFor)
	var readAt, dueAtPause clock.Instant
	c.OnMessage = func(c *World, from, to transport.Addr, m wire.Message) {
		if rd, ok := m.(*wire.Read); ok && to == "p0" && readAt == 0 && rd.Lease == leaseOf(r) {
			readAt = c.Now
		}
	}
	c.At(pauseAt, func() {
		if info, ok := c.Node("p0").Core.Producer().Lease(leaseOf(r)); ok {
			dueAtPause = dueAt(info)
		}
	})
	settle(t, c, 60*time.Second)
	resume := pauseAt.Add(pauseFor)
	if readAt == 0 || readAt < pauseAt || readAt >= dueAtPause || dueAtPause >= resume {
		t.Fatalf("READ reached P at %v; pause %v-%v; lease due at %v: want the READ during the pause, before the due instant, and the due instant before the resume",
			readAt, pauseAt, resume, dueAtPause)
	}
	wantDone(t, h, true, 0)
	wantDone(t, r, true, 0)
	if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonReadDone {
		t.Fatalf("r's lease released %+v, want read_done", rel)
	}
	if c.EarlyFrees != 0 || c.Node("p0").Released[wire.ReasonExpired] != 0 {
		t.Fatalf("P's releases %v, early frees %d", c.Node("p0").Released, c.EarlyFrees)
	}
}

// TestScenarioLongPrefillStepKeepsLease: P's model is slow (a 1,000-token
// prefill step lasts two leases). While P computes one, D — its seat
// taken — holds lease r in its queue and renews it: P's loop answers, and
// when D's seat frees D pulls r's blocks from P before P's step ends.
func TestScenarioLongPrefillStepKeepsLease(t *testing.T) {
	spec := congested()
	lease := spec.Transfer.LeaseDuration
	step := spec.Profile.Duration(&model.Batch{Seqs: []model.Seq{{Count: 1000}}})
	spec.PrefillStepScale = float64(2*lease) / float64(step)
	c := New(spec)
	h := hog(c, "hog", 0, 5*lease/2)
	h.Local = true // straight to D: its seat
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	long := newReq(c, "long", 1000, 1)
	var grantedAt, readAt, longStepEnd time.Duration
	c.OnInstant = func(c *World) {
		if grantedAt == 0 && r.Grant != nil {
			grantedAt = time.Duration(c.Now)
			c.Submit(c.Now, long) // P's next step: long's prefill
		}
		if rel, ok := c.Node("p0").ReleasedAt[leaseOf(r)]; ok && readAt == 0 {
			readAt = time.Duration(rel.At)
		}
		if longStepEnd == 0 && long.responded {
			longStepEnd = time.Duration(c.Now)
		}
	}
	settle(t, c, 10*time.Minute)
	wantDone(t, h, false, 0)
	wantDone(t, r, true, 0)
	wantDone(t, long, true, 0)
	if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonReadDone {
		t.Fatalf("r's lease released %+v, want read_done", rel)
	}
	if c.EarlyFrees != 0 || c.Node("p0").Released[wire.ReasonExpired] != 0 {
		t.Fatalf("P's releases %v, early frees %d", c.Node("p0").Released, c.EarlyFrees)
	}
	// D waited in its queue for longer than a lease, and read during
	// P's step.
	if readAt-grantedAt < lease || readAt > longStepEnd {
		t.Fatalf("r granted at %v, read at %v, long's step ended at %v: want a read more than a lease (%v) after the grant, before the step's end",
			grantedAt, readAt, longStepEnd, lease)
	}
}

func leaseOf(r *Req) wire.LeaseID {
	if r.Grant == nil {
		return 0
	}
	return r.Grant.Lease
}
