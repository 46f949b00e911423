package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// Scenario tests of docs/scenarios.md on the simulated cluster. Every scenario
// ends with settle: the cluster idle, no invariant violation, pool
// accounting right and no hold left on any live engine.

func inst(d time.Duration) clock.Instant { return clock.Instant(d) }

// msgLog records the messages delivered to engines.
type msgLog struct {
	entries []msgEntry
}

type msgEntry struct {
	at       clock.Instant
	from, to transport.Addr
	m        wire.Message
}

func logMessages(c *World) *msgLog {
	l := &msgLog{}
	c.OnMessage = func(c *World, from, to transport.Addr, m wire.Message) {
		l.entries = append(l.entries, msgEntry{c.Now, from, to, m})
	}
	return l
}

// releases lists the RELEASE messages P received for lease id.
func (l *msgLog) releases(id wire.LeaseID) []msgEntry {
	var out []msgEntry
	for _, e := range l.entries {
		if r, ok := e.m.(*wire.Release); ok && r.Lease == id {
			out = append(out, e)
		}
	}
	return out
}

func (l *msgLog) reads(id wire.LeaseID) []*wire.Read {
	var out []*wire.Read
	for _, e := range l.entries {
		if r, ok := e.m.(*wire.Read); ok && r.Lease == id {
			out = append(out, r)
		}
	}
	return out
}

// readEnds lists the instants D received a ReadEnd for lease id.
func (l *msgLog) readEnds(id wire.LeaseID) []clock.Instant {
	var out []clock.Instant
	for _, e := range l.entries {
		if r, ok := e.m.(*wire.ReadEnd); ok && r.Lease == id {
			out = append(out, e.at)
		}
	}
	return out
}

func releaseOf(t *testing.T, c *World, node string, r *Req) Release {
	t.Helper()
	if r.Grant == nil {
		t.Fatalf("%s got no lease", r.ID)
	}
	rel, ok := c.Node(node).ReleasedAt[r.Grant.Lease]
	if !ok {
		t.Fatalf("%s: lease %d never released (%v)", r.ID, r.Grant.Lease, c.Node(node).Released)
	}
	return rel
}

func wantDone(t *testing.T, r *Req, pulled bool, fallback xfer.FallbackReason) {
	t.Helper()
	if !r.Done || r.Error != "" || r.Pulled != pulled || r.Fallback != fallback {
		t.Errorf("%s: done %v status %v error %q pulled %v fallback %v; want pulled %v fallback %v",
			r.ID, r.Done, r.Status, r.Error, r.Pulled, r.Fallback, pulled, fallback)
	}
}

// congested is the default cluster whose decoder runs one sequence at a
// time: a long request (hog) keeps later ones waiting for remote KV.
func congested() Spec {
	s := DefaultSpec()
	s.DecodeSched = s.Sched
	s.DecodeSched.MaxNumSeqs = 1
	return s
}

// hog submits a request that decodes for about d (1.5 ms a token).
func hog(c *World, id string, at clock.Instant, d time.Duration) *Req {
	r := newReq(c, id, 32, int(d/(1500*time.Microsecond)))
	c.Submit(at, r)
	return r
}

func TestScenarioS02PrefixCachedOnD(t *testing.T) {
	c := New(DefaultSpec())
	log := logMessages(c)
	a := newReq(c, "a", 64, 8)
	c.Submit(0, a)
	c.RunIdle(time.Second)
	b := newReq(c, "b", 0, 8)
	b.Prompt = append(append([]int32(nil), a.Prompt[:48]...), prompt(99, 40)...)
	c.Submit(c.Now.Add(time.Millisecond), b)
	settle(t, c, 10*time.Second)
	verify(t, c)
	wantDone(t, a, true, 0)
	wantDone(t, b, true, 0)
	reads := log.reads(b.Grant.Lease)
	// b's prompt is 88 tokens: 6 blocks, of which D has the first 3.
	if len(reads) != 1 || fmt.Sprint(reads[0].Indexes) != "[3 4 5]" {
		t.Fatalf("b's reads: %+v", reads)
	}
	if st := c.Node("d0").Core.Consumer().Stats(); st.HitBlocks != 3 || st.PulledBlocks != 4+3 {
		t.Fatalf("consumer stats %+v", st)
	}
	if got := released(c, "p0", wire.ReasonReadDone); got != 2 {
		t.Fatalf("read_done %d", got)
	}
}

func TestScenarioS03AbortWhilePrefilling(t *testing.T) {
	c := New(DefaultSpec())
	// 6000 tokens: three chunks of 2048, a few milliseconds of prefill.
	r := newReq(c, "r", 6000, 8)
	c.Submit(0, r)
	c.Abort(inst(2*ms), r)
	var heldDuring int
	c.OnInstant = func(c *World) {
		if c.Now < inst(2*ms) {
			heldDuring = max(heldDuring, c.Held("p0"))
		}
	}
	settle(t, c, 5*time.Second)
	p := c.Node("p0").Core
	if heldDuring == 0 {
		t.Fatal("the abort did not land during the prefill")
	}
	if r.Status != sched.FinishedAborted || p.Stats().Finished[sched.FinishedAborted] != 1 {
		t.Fatalf("status %v, P finished %v", r.Status, p.Stats().Finished)
	}
	if s := p.Producer().Stats(); s.Granted != 0 || len(c.Node("p0").Released) != 0 {
		t.Fatalf("a lease was granted: %+v", s)
	}
	if c.Node("d0").Core.Stats().Requests != 0 || c.Node("d0").Core.Consumer().Stats().Pulls != 0 {
		t.Fatal("D saw the request")
	}
}

// grantInstant runs a copy of the scenario without faults to learn when
// P answers request id (the simulation is deterministic).
func grantInstant(t *testing.T, spec Spec, mk func(c *World) *Req) clock.Instant {
	t.Helper()
	c := New(spec)
	r := mk(c)
	c.RunIdle(10 * time.Second)
	if r.GrantedAt == 0 {
		t.Fatal("dry run: no grant")
	}
	return r.GrantedAt
}

func TestScenarioS04AbortInTheInstantPFinishes(t *testing.T) {
	mk := func(c *World) *Req {
		r := newReq(c, "r", 100, 8)
		c.Submit(0, r)
		return r
	}
	finish := grantInstant(t, DefaultSpec(), mk)
	c := New(DefaultSpec())
	r := mk(c)
	c.Abort(finish, r) // the client leaves as P writes the response
	settle(t, c, 10*time.Second)
	p := c.Node("p0")
	if p.Core.Producer().Stats().Granted != 1 {
		t.Fatal("no lease granted")
	}
	rel := p.ReleasedAt[firstLease(p)]
	if rel.Reason != wire.ReasonUndelivered || rel.At != finish {
		t.Fatalf("release %+v, want undelivered at %v", rel, finish)
	}
	if len(p.Released) != 1 {
		t.Fatalf("releases %v", p.Released)
	}
	// The abort itself reached P later and found the request finished.
	if p.Core.Stats().Finished[sched.FinishedAborted] != 0 || c.Node("d0").Core.Stats().Requests != 0 {
		t.Fatal("abort after finish changed something")
	}
}

func firstLease(n *Node) wire.LeaseID {
	for id := range n.ReleasedAt {
		return id
	}
	return 0
}

func TestScenarioS05AbortAfterDeliveryBeforeRead(t *testing.T) {
	mk := func(c *World) *Req {
		r := newReq(c, "r", 100, 8)
		c.Submit(0, r)
		return r
	}
	finish := grantInstant(t, DefaultSpec(), mk)
	c := New(DefaultSpec())
	log := logMessages(c)
	r := mk(c)
	// The response reached the proxy; the client leaves before D gets it.
	abortAt := finish.Add(100 * time.Microsecond)
	c.Abort(abortAt, r)
	// A peer holding the token tries to read afterwards.
	probe := c.NewProbe("thief")
	probe.Secret = c.ClusterSecret()
	c.ProbeDial(inst(50*ms), probe, "p0")
	c.At(inst(60*ms), func() {
		c.Net.Send(c.Now, probe.Conn, probe.Name, &wire.Read{ReadID: 1, Lease: r.Grant.Lease, Token: r.Grant.Token, Indexes: []uint32{0}})
	})
	settle(t, c, 10*time.Second)
	rel := releaseOf(t, c, "p0", r)
	if rel.Reason != wire.ReasonAborted || rel.At != abortAt.Add(c.Spec.HTTPDelay) {
		t.Fatalf("release %+v, want aborted when the abort reached P (%v)", rel, abortAt.Add(c.Spec.HTTPDelay))
	}
	if !probe.Authed {
		t.Fatal("probe did not authenticate")
	}
	last := probe.Received[len(probe.Received)-1]
	if re, ok := last.(*wire.ReadEnd); !ok || re.Status != wire.StatusRevoked {
		t.Fatalf("late read got %+v", last)
	}
	for _, m := range probe.Received {
		if _, ok := m.(*wire.Block); ok {
			t.Fatal("a revoked lease served data")
		}
	}
	if len(log.reads(r.Grant.Lease)) != 1 || c.Node("d0").Core.Stats().Requests != 0 {
		t.Fatal("D read or got the request")
	}
}

func TestScenarioS06AbortWhileReading(t *testing.T) {
	slow := DefaultSpec()
	slow.ReadBandwidth = 4e6 // a 200-token prompt's 51 KB take ~13 ms
	for _, where := range []string{"client abort at D", "revocation at P"} {
		t.Run(where, func(t *testing.T) {
			c := New(slow)
			log := logMessages(c)
			r := newReq(c, "r", 200, 8)
			c.Submit(0, r)
			var readStart clock.Instant
			c.OnInstant = func(c *World) {
				if readStart == 0 && r.Grant != nil && len(log.reads(r.Grant.Lease)) > 0 {
					readStart = c.Now
					switch where {
					case "client abort at D":
						c.Abort(c.Now.Add(2*ms), r)
					default:
						c.After(2*ms, func() { r.P.Loop.Abort(c.Now, r.ID) })
					}
				}
			}
			settle(t, c, 10*time.Second)
			if readStart == 0 {
				t.Fatal("no read")
			}
			rel := releaseOf(t, c, "p0", r)
			ends := log.readEnds(r.Grant.Lease)
			if rel.Reason != wire.ReasonAborted || len(ends) != 1 {
				t.Fatalf("release %+v, read ends %v", rel, ends)
			}
			switch where {
			case "client abort at D":
				// D waits for the read's end, then tells P, which frees at
				// once.
				rels := log.releases(r.Grant.Lease)
				if len(rels) == 0 || rels[0].at < ends[0] || rel.At != rels[0].at {
					t.Fatalf("RELEASE at %v, read end %v, freed %v", rels, ends, rel.At)
				}
				if r.Status != sched.FinishedAborted || c.Node("d0").Core.Consumer().Stats().Pulls != 0 {
					t.Fatal("the aborted request was pulled")
				}
			default:
				// P decided during the read and freed when it ended: the
				// read end left P at the instant of the release.
				if rel.At >= ends[0] || rel.At <= readStart.Add(2*ms) {
					t.Fatalf("freed at %v, read from %v, end delivered %v", rel.At, readStart, ends[0])
				}
			}
		})
	}
}

func TestScenarioS07RejectBeforeAdmission(t *testing.T) {
	type path struct {
		name   string
		spec   func(s *Spec)
		setup  func(c *World, r *Req) // r is the request to be rejected
		status int
		err    string
	}
	paths := []path{
		{"invalid field", nil, func(c *World, r *Req) { r.EdgeReject = "invalid field" }, 400, "invalid field"},
		{"unknown model", nil, func(c *World, r *Req) { r.EdgeReject = "unknown model" }, 400, "unknown model"},
		{"prompt too long", nil, func(c *World, r *Req) { r.MaxTokens = 8192 }, 400, "too long"},
		{"queue full", func(s *Spec) {
			*s = congested()
			s.Transfer.MaxWaiting = 1
		}, func(c *World, r *Req) {
			hog(c, "hog", 0, 300*ms)
			c.Submit(inst(5*ms), newReq(c, "waiting", 40, 4)) // fills D's one waiting slot
		}, 429, "queue full"},
		{"shutting down", nil, func(c *World, r *Req) {
			hog(c, "hog", 0, 100*ms) // D drains while it finishes this one
			c.Drain(inst(5*ms), "d0", time.Second)
		}, 503, "shutting down"},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			spec := DefaultSpec()
			if p.spec != nil {
				p.spec(&spec)
			}
			c := New(spec)
			log := logMessages(c)
			r := newReq(c, "r", 100, 8)
			p.setup(c, r)
			c.Submit(inst(10*ms), r)
			settle(t, c, 10*time.Second)
			if r.HTTPStatus != p.status || r.Error == "" || !contains(r.Error, p.err) {
				t.Fatalf("client saw %d %q, want %d %q", r.HTTPStatus, r.Error, p.status, p.err)
			}
			rel := releaseOf(t, c, "p0", r)
			rels := log.releases(r.Grant.Lease)
			if rel.Reason != wire.ReasonRejected || len(rels) == 0 || rel.At != rels[0].at {
				t.Fatalf("release %+v; RELEASE delivered %+v", rel, rels)
			}
			if len(log.reads(r.Grant.Lease)) != 0 {
				t.Fatal("a rejected request was read")
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestScenarioS08RejectNoticeUnreachable(t *testing.T) {
	t.Run("reaches P when the partition heals", func(t *testing.T) {
		// Without a claim deadline (S25's, 500 ms here), which would end
		// the lease before the partition heals: the notice must be retried
		// until it gets through.
		spec := DefaultSpec()
		spec.Transfer.ClaimTimeout = 0
		c := New(spec)
		log := logMessages(c)
		r := newReq(c, "r", 100, 8)
		r.EdgeReject = "unknown model"
		c.Partition(inst(ms), "d0", "p0", time.Second)
		c.Submit(inst(2*ms), r)
		settle(t, c, 10*time.Second)
		rel := releaseOf(t, c, "p0", r)
		rels := log.releases(r.Grant.Lease)
		if rel.Reason != wire.ReasonRejected || rel.At < inst(time.Second+ms) || rel.At != rels[0].at {
			t.Fatalf("release %+v, RELEASE %+v", rel, rels)
		}
		if c.Node("d0").Core.Consumer().Stats().Failures[xfer.FailureUnreachable] < 2 {
			t.Fatalf("D did not retry: %+v", c.Node("d0").Core.Consumer().Stats())
		}
	})
	t.Run("the lease goes unclaimed, never later", func(t *testing.T) {
		c := New(DefaultSpec())
		r := newReq(c, "r", 100, 8)
		r.EdgeReject = "unknown model"
		c.Partition(inst(ms), "d0", "p0", 10*time.Second)
		c.Submit(inst(2*ms), r)
		c.RunUntil(inst(4 * time.Second))
		rel := releaseOf(t, c, "p0", r)
		// No notice and no claim reached P: the claim deadline ends it
		// (S25), long before the lease would have.
		if want := r.GrantedAt.Add(c.Spec.Transfer.ClaimTimeout); rel.Reason != wire.ReasonUnclaimed || rel.At != want {
			t.Fatalf("release %+v, want unclaimed at %v", rel, want)
		}
		// D gave up the notice with the lease: nothing left to do there.
		if !c.Node("d0").Core.Consumer().Idle() {
			t.Fatal("D still retries the notice after the lease expired")
		}
		settle(t, c, 20*time.Second)
	})
}

func TestScenarioS09CongestedDecoderKeepsLease(t *testing.T) {
	spec := congested()
	lease := spec.Transfer.LeaseDuration
	c := New(spec)
	h := hog(c, "hog", 0, 3*lease+time.Second)
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	settle(t, c, 60*time.Second)
	verify(t, c)
	wantDone(t, h, true, 0)
	wantDone(t, r, true, 0)
	if wait := r.FirstAt.Sub(r.SentAt); wait < 3*lease {
		t.Fatalf("r waited only %v", wait)
	}
	if rel := releaseOf(t, c, "p0", r); rel.Reason != wire.ReasonReadDone {
		t.Fatalf("release %+v", rel)
	}
	if n := c.Node("d0").Core.Consumer().Stats().RenewsSent; n < 6 {
		t.Fatalf("%d renewals", n)
	}
}

func TestScenarioS10DecodeCrashBeforePull(t *testing.T) {
	spec := congested()
	c := New(spec)
	hog(c, "hog", 0, time.Second)
	r := newReq(c, "r", 100, 8)
	c.Submit(inst(10*ms), r)
	// After D's claim, which rides its heartbeat at ~500 ms.
	crash := inst(700 * ms)
	c.Crash(crash, "d0")
	settle(t, c, 10*time.Second)
	rel := releaseOf(t, c, "p0", r)
	want := crash.Add(spec.Network.CloseDetectDelay + spec.Transfer.PeerGrace)
	if rel.Reason != wire.ReasonPeerLost || rel.At != want {
		t.Fatalf("release %+v, want peer_lost at %v", rel, want)
	}
	if r.Error == "" {
		t.Fatal("the client saw no error")
	}
}

func TestScenarioS11DecodeCrashBeforeContact(t *testing.T) {
	spec := DefaultSpec()
	// Learn when D admits the request, then crash D right after.
	c0 := New(spec)
	r0 := newReq(c0, "r", 100, 8)
	c0.Submit(0, r0)
	var admitted clock.Instant
	c0.OnInstant = func(c *World) {
		if admitted == 0 && r0.atD {
			admitted = c.Now
		}
	}
	c0.RunIdle(time.Second)

	c := New(spec)
	log := logMessages(c)
	r := newReq(c, "r", 100, 8)
	c.Submit(0, r)
	c.Crash(admitted+1, "d0")
	settle(t, c, 10*time.Second)
	if len(log.entries) != 0 {
		t.Fatalf("D reached P: %+v", log.entries)
	}
	rel := releaseOf(t, c, "p0", r)
	// D never claimed it: released at the claim deadline (S25), not the
	// lease's end.
	if want := r.GrantedAt.Add(spec.Transfer.ClaimTimeout); rel.Reason != wire.ReasonUnclaimed || rel.At != want {
		t.Fatalf("release %+v, want unclaimed at %v", rel, want)
	}
}
