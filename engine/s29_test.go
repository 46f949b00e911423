package engine

import (
	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
)

// s29Driver steps a core instant by instant and keeps every output.
type s29Driver struct {
	t    *testing.T
	core *Core
	exec *synth.Executor
	now  clock.Instant
	outs []Output
}

// step runs one core step (and its batch), recording the outputs.
func (d *s29Driver) step() {
	rd := d.core.Step(d.now)
	d.outs = append(d.outs, rd.Outputs...)
	if rd.Batch != nil {
		var res model.StepResult
		d.exec.Execute(rd.Batch, &res)
		d.now = d.now.Add(res.Duration)
		d.core.Complete(d.now, &res)
	}
	if err := d.core.Check(); err != nil {
		d.t.Fatal(err)
	}
}

// finished returns the finished output of core request req, stepping until
// it comes.
func (d *s29Driver) finished(req uint64) Output {
	d.t.Helper()
	for range 1000 {
		for _, o := range d.outs {
			if o.Req == req && o.Finished {
				return o
			}
		}
		d.step()
	}
	d.t.Fatalf("request %d did not finish", req)
	return Output{}
}

func (d *s29Driver) add(req *Request) uint64 {
	d.t.Helper()
	if res := d.core.Add(d.now, req); res != Accepted {
		d.t.Fatalf("Add(%s): %v", req.ID, res)
	}
	return d.core.byExt[req.ID].ID
}

func (d *s29Driver) live(req uint64) bool {
	r := d.core.byID.Get(req)
	return r != nil && d.core.byExt[r.ext] == r
}

func s29Prompt(base int32) []int32 {
	p := make([]int32, 40)
	for i := range p {
		p[i] = base + int32(i)
	}
	return p
}

// TestScenarioS29ReusedRequestID (core level): request A finishes with a
// lease; request B takes A's X-Request-Id. Everything A's handler does
// afterwards (stop, abort, delivered), addressed by A's core id and lease,
// reaches neither B nor B's lease; B's grant leaves A's lease alone. Only
// the id-addressed Abort (the abort endpoint) names "whatever has the id".
func TestScenarioS29ReusedRequestID(t *testing.T) {
	core, exec := transferCore(t, RolePrefill)
	d := &s29Driver{t: t, core: core, exec: exec}
	a := d.add(&Request{ID: "dup", Prompt: s29Prompt(40), MaxTokens: 1, RemoteDecode: true})
	outA := d.finished(a)
	if outA.Grant == nil || outA.ID != "dup" {
		t.Fatalf("A's finished output %+v", outA)
	}
	gA := outA.Grant.Lease

	// B reuses the id while A's lease lives.
	b := d.add(&Request{ID: "dup", Prompt: s29Prompt(150), MaxTokens: 1, RemoteDecode: true})
	if b == a {
		t.Fatal("B got A's core id")
	}
	if !d.live(b) {
		t.Fatal("B is not live")
	}
	// A's handler: a stop string matched late, the client left.
	if res := core.StopReq(d.now, a); res != AbortAlreadyFinished || !d.live(b) {
		t.Fatalf("StopReq(A) = %v; B live %v", res, d.live(b))
	}
	if res := core.AbortReq(d.now, a, 0); res != AbortAlreadyFinished || !d.live(b) {
		t.Fatalf("AbortReq(A) = %v; B live %v", res, d.live(b))
	}
	if _, ok := core.Producer().Lease(gA); !ok {
		t.Fatal("A's lease ended before anyone addressed it")
	}
	outB := d.finished(b)
	if outB.Status != sched.FinishedLength || outB.Grant == nil || outB.Grant.Lease == gA {
		t.Fatalf("B's finished output %+v (A's lease %d)", outB, gA)
	}
	gB := outB.Grant.Lease
	if _, ok := core.Producer().Lease(gA); !ok {
		t.Fatal("B's grant under A's id released A's lease")
	}
	// A's handler: its response was not delivered. Only A's lease goes.
	core.DeliveredLease(d.now, gA, false)
	st := core.Producer().Stats()
	if _, ok := core.Producer().Lease(gA); ok || st.Released[wire.ReasonUndelivered] != 1 {
		t.Fatalf("A's undelivered lease: released %v", st.Released)
	}
	if _, ok := core.Producer().Lease(gB); !ok {
		t.Fatal("A's undelivered report released B's lease")
	}
	// B's was delivered; A's handler aborting again touches nothing.
	core.DeliveredLease(d.now, gB, true)
	if res := core.AbortReq(d.now, a, gA); res != AbortAlreadyFinished {
		t.Fatalf("AbortReq(A) after its lease ended = %v", res)
	}
	if _, ok := core.Producer().Lease(gB); !ok {
		t.Fatal("A's abort reached B's lease")
	}
	// B's own abort revokes B's lease (it was delivered: aborted).
	if res := core.AbortReq(d.now, b, gB); res != AbortAlreadyFinished {
		t.Fatalf("AbortReq(B) = %v", res)
	}
	st = core.Producer().Stats()
	if st.Released[wire.ReasonAborted] != 1 || core.Producer().NumLeases() != 0 || core.Pool().NumHeld() != 0 {
		t.Fatalf("released %v, %d leases, %d blocks held", st.Released, core.Producer().NumLeases(), core.Pool().NumHeld())
	}
	if err := core.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestScenarioS29AbortReqOfALiveRequest: while the request lives, AbortReq
// and StopReq end it exactly as Abort and Stop do.
func TestScenarioS29AbortReqOfALiveRequest(t *testing.T) {
	core, exec := transferCore(t, RolePrefill)
	d := &s29Driver{t: t, core: core, exec: exec}
	a := d.add(&Request{ID: "a", Prompt: s29Prompt(40), MaxTokens: 50})
	b := d.add(&Request{ID: "b", Prompt: s29Prompt(100), MaxTokens: 50})
	d.step()
	if res := core.AbortReq(d.now, a, 0); res != Aborted {
		t.Fatalf("AbortReq(live a) = %v", res)
	}
	if res := core.StopReq(d.now, b); res != Aborted {
		t.Fatalf("StopReq(live b) = %v", res)
	}
	if o := d.finished(a); o.Status != sched.FinishedAborted {
		t.Fatalf("a: %+v", o)
	}
	if o := d.finished(b); o.Status != sched.FinishedStopped || o.Grant != nil {
		t.Fatalf("b: %+v", o)
	}
	if res := core.StopReq(d.now, 12345); res != AbortAlreadyFinished {
		t.Fatalf("StopReq(never seen) = %v", res)
	}
	for range 3 {
		d.step()
	}
	if core.Pool().NumHeld() != 0 {
		t.Fatalf("%d blocks held", core.Pool().NumHeld())
	}
}
