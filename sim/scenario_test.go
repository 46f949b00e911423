package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
)

const ms = time.Millisecond

func prompt(seed, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(97 + (seed*31+i*7)%26)
	}
	return p
}

func newReq(c *World, id string, promptLen, maxTokens int) *Req {
	return &Req{ID: id, Prompt: prompt(len(id)+promptLen, promptLen), MaxTokens: maxTokens, IgnoreEOS: true,
		P: c.Node("p0"), D: c.Node("d0")}
}

// settle runs the cluster until it is idle and checks the end state every
// scenario shares: no violation; on every live engine the pool accounting
// right, no hold and no lease left; every completed output the oracle's.
func settle(t *testing.T, c *World, limit time.Duration) {
	t.Helper()
	if !c.RunIdle(limit) {
		t.Fatalf("cluster not idle after %v (now %v)", limit, c.Now)
	}
	for _, v := range c.Violations {
		t.Error(v)
	}
	for _, n := range c.Nodes {
		if n.Crashed {
			continue
		}
		if err := n.Core.Check(); err != nil {
			t.Errorf("%s: %v", n.Name, err)
		}
		if h := n.Core.Pool().NumHeld(); h != 0 {
			t.Errorf("%s still holds %d blocks", n.Name, h)
		}
		if p := n.Core.Producer(); p != nil && p.NumLeases() != 0 {
			t.Errorf("%s still has %d leases", n.Name, p.NumLeases())
		}
	}
	verify(t, c) // every completed request's output is the oracle's
}

func verify(t *testing.T, c *World) {
	t.Helper()
	for _, bad := range NewOracle(c.Spec).Verify(c) {
		t.Error(bad)
	}
}

func released(c *World, node string, r wire.Reason) int { return c.Node(node).Released[r] }

func TestScenarioS01HappyPath(t *testing.T) {
	c := New(DefaultSpec())
	var rs []*Req
	for i := 0; i < 8; i++ {
		r := newReq(c, fmt.Sprintf("r%d", i), 40+i*9, 12)
		rs = append(rs, r)
		c.Submit(clock.Instant(i)*clock.Instant(ms), r)
	}
	var freedAt, releaseAt clock.Instant
	c.OnInstant = func(c *World) {
		if releaseAt == 0 && released(c, "p0", wire.ReasonReadDone) > 0 {
			releaseAt = c.Now
		}
		if freedAt == 0 && releaseAt != 0 && c.Leases("p0") < 8 {
			freedAt = c.Now
		}
	}
	settle(t, c, 30*time.Second)
	verify(t, c)
	for _, r := range rs {
		if !r.Done || r.Status != sched.FinishedLength || !r.Pulled || r.Fallback != 0 {
			t.Errorf("%s: done %v status %v pulled %v fallback %v error %q", r.ID, r.Done, r.Status, r.Pulled, r.Fallback, r.Error)
		}
	}
	if got := released(c, "p0", wire.ReasonReadDone); got != len(rs) {
		t.Errorf("read_done releases = %d, want %d (all: %v)", got, len(rs), c.Node("p0").Released)
	}
	if freedAt != releaseAt {
		t.Errorf("lease freed at %v, release counted at %v: P must free in the step that handles the release", freedAt, releaseAt)
	}
}

var _ = model.NoToken
