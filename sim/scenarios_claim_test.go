package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// S25: P grants a lease and no decode engine ever claims it (the proxy
// dropped the decode leg, as llm-d's sidecar does when the client leaves
// between the legs): released unclaimed within the claim timeout, not at
// the lease's end; a late decode leg falls back with a correct answer.

func TestScenarioS25DecodeLegNeverSent(t *testing.T) {
	for _, pol := range []xfer.Policy{xfer.PolicyLease, xfer.PolicyVLLMLease} {
		t.Run(pol.String(), func(t *testing.T) {
			spec := DefaultSpec()
			spec.Transfer = xfer.DefaultConfig(pol).WithLease(3 * time.Second)
			c := New(spec)
			var lost, kept []*Req
			for i := range 6 {
				r := newReq(c, fmt.Sprintf("r%d", i), 40+16*i, 4)
				if i%2 == 0 {
					r.LostAfterPrefill = true
					lost = append(lost, r)
				} else {
					kept = append(kept, r)
				}
				c.Submit(inst(time.Duration(1+50*i)*ms), r)
			}
			settle(t, c, 30*time.Second)
			verify(t, c)
			for _, r := range kept {
				wantDone(t, r, true, 0)
			}
			var stranded float64
			for _, r := range lost {
				rel := releaseOf(t, c, "p0", r)
				reason, life := wire.ReasonUnclaimed, spec.Transfer.ClaimTimeout
				if pol != xfer.PolicyLease {
					reason, life = wire.ReasonExpired, spec.Transfer.LeaseDuration
				}
				if want := r.GrantedAt.Add(life); rel.Reason != reason || rel.At != want {
					t.Errorf("%s: release %+v, want %v at %v", r.ID, rel, reason, want)
				}
				stranded += float64(len(r.Grant.BlockIDs)) * life.Seconds()
			}
			// The stranded memory is exactly the lost leases' blocks for
			// the claim timeout (lease) or the whole lease (vllm-lease).
			if _, unread := c.Node("p0").BlockSeconds(); unread < stranded*0.999 || unread > stranded*1.001 {
				t.Errorf("unread block-seconds %.3f, want %.3f", unread, stranded)
			}
			if pol == xfer.PolicyLease && c.Node("p0").Released[wire.ReasonUnclaimed] != len(lost) {
				t.Errorf("releases %v", c.Node("p0").Released)
			}
		})
	}
}

func TestScenarioS25LateDecodeLegFallsBack(t *testing.T) {
	spec := DefaultSpec()
	c := New(spec)
	log := logMessages(c)
	r := newReq(c, "r", 100, 8)
	r.DecodeLegDelay = spec.Transfer.ClaimTimeout + 100*ms
	ok := newReq(c, "ok", 90, 8)
	c.Submit(0, r)
	c.Submit(inst(10*ms), ok)
	settle(t, c, 30*time.Second)
	verify(t, c) // the late request's answer is the oracle's: recomputed
	wantDone(t, r, false, xfer.FallbackLeaseGone)
	wantDone(t, ok, true, 0)
	rel := releaseOf(t, c, "p0", r)
	if want := r.GrantedAt.Add(spec.Transfer.ClaimTimeout); rel.Reason != wire.ReasonUnclaimed || rel.At != want {
		t.Fatalf("release %+v, want unclaimed at %v", rel, want)
	}
	// D's READ (sent with its claim: D was not congested) got "expired"
	// and no block.
	for _, e := range log.entries {
		switch m := e.m.(type) {
		case *wire.ReadEnd:
			if m.Lease == r.Grant.Lease && m.Status != wire.StatusExpired {
				t.Fatalf("READ_END %+v", m)
			}
		case *wire.Block:
			if m.Lease == r.Grant.Lease {
				t.Fatal("a block of the released lease was streamed")
			}
		}
	}
	if c.Node("p0").Core.Producer().Stats().ReadsServed != 1 {
		t.Fatal("served a read of the released lease")
	}
}

// D claims a lease when it admits the request: with its next heartbeat
// to P (within one interval; no RENEW of its own), or at once when it
// must dial and handshake first; and a congested D keeps the lease (S9
// unchanged).
func TestScenarioS25ClaimAtAdmission(t *testing.T) {
	spec := congested()
	lease := spec.Transfer.LeaseDuration
	c := New(spec)
	h := hog(c, "hog", 0, 3*lease+time.Second)
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	var admitted, claimed clock.Instant
	c.OnInstant = func(c *World) {
		if admitted == 0 && r.atD {
			admitted = c.Now
		}
		if claimed == 0 && r.Grant != nil {
			if info, live := c.Node("p0").Core.Producer().Lease(r.Grant.Lease); live && info.ClaimBy == clock.Never {
				claimed = c.Now
			}
		}
	}
	settle(t, c, 60*time.Second)
	verify(t, c)
	wantDone(t, h, true, 0)
	wantDone(t, r, true, 0)
	// The claim rides D's next heartbeat to P: within one interval of
	// the admission, well before the claim deadline.
	hb := spec.Transfer.HeartbeatInterval
	if admitted == 0 || claimed < admitted || claimed.Sub(admitted) > hb+10*ms {
		t.Fatalf("admitted at %v, claimed at %v: not within a heartbeat (%v)", admitted, claimed, hb)
	}
	if claimed >= r.GrantedAt.Add(spec.Transfer.ClaimTimeout-hb) {
		t.Fatalf("claimed at %v, less than a heartbeat before the claim deadline", claimed)
	}
	if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonReadDone {
		t.Fatalf("release %+v", rel)
	}
}
