package engine

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

func transferCore(t *testing.T, role Role) (*Core, *synth.Executor) {
	t.Helper()
	prof, _ := synth.LookupProfile("tiny")
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(3 * time.Second)
	xc.ClaimTimeout = 0 // no decode engine claims these leases (S25 is xfer's and sim's)
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: 64, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sched.DefaultConfig(),
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 16, Role: role, EngineID: "e-" + role.String(), Transfer: &xc, Secret: []byte("s"),
	}, rand.New(rand.NewPCG(1, 2)))
	return core, synth.New(prof, core.Pool(), 5)
}

// prefillLease runs a remote-decode prefill to its end and returns the
// grant and the instant.
func prefillLease(t *testing.T, core *Core, exec *synth.Executor, id string) (*xfer.Grant, clock.Instant) {
	t.Helper()
	now := clock.Instant(0)
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(40 + i)
	}
	if res := core.Add(now, &Request{ID: id, Prompt: prompt, MaxTokens: 1, RemoteDecode: true}); res != Accepted {
		t.Fatal(res)
	}
	var res model.StepResult
	for range 100 {
		rd := core.Step(now)
		for _, o := range rd.Outputs {
			if o.Finished {
				if o.Grant == nil {
					t.Fatalf("no grant: %+v", o)
				}
				core.Delivered(now, id, true)
				return o.Grant, now
			}
		}
		if rd.Batch != nil {
			exec.Execute(rd.Batch, &res)
			now = now.Add(res.Duration)
			core.Complete(now, &res)
		}
	}
	t.Fatal("prefill did not finish")
	return nil, 0
}

func TestCoreDrainByEndsLeasesAtTheDeadline(t *testing.T) {
	core, exec := transferCore(t, RolePrefill)
	g, now := prefillLease(t, core, exec, "r")
	deadline := now.Add(time.Second)
	core.DrainBy(deadline)
	if res := core.Add(now, &Request{ID: "late", Prompt: []int32{1, 2}, MaxTokens: 1, RemoteDecode: true}); res != RejectedShuttingDown {
		t.Fatalf("add while draining: %v", res)
	}
	if core.Drained() || core.NextDeadline() != deadline {
		t.Fatalf("drained %v next %v, want %v", core.Drained(), core.NextDeadline(), deadline)
	}
	core.Step(deadline - 1)
	if core.Producer().NumLeases() != 1 {
		t.Fatal("lease ended before the drain deadline")
	}
	core.Step(deadline)
	st := core.Producer().Stats()
	if st.Released[wire.ReasonShutdown] != 1 || !core.Drained() || core.Pool().NumHeld() != 0 {
		t.Fatalf("released %v drained %v held %d", st.Released, core.Drained(), core.Pool().NumHeld())
	}
	if _, live := core.Producer().Lease(g.Lease); live {
		t.Fatal("lease still live")
	}
	if err := core.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestCoreDrainedOnceLeasesEnd(t *testing.T) {
	core, exec := transferCore(t, RolePrefill)
	_, now := prefillLease(t, core, exec, "r")
	core.Drain() // no deadline: leases are served until they end
	if core.Drained() || core.NextDeadline() != now.Add(3*time.Second) {
		t.Fatalf("drained %v next %v", core.Drained(), core.NextDeadline())
	}
	core.Abort(now, "r") // delivered, then aborted: revoked
	if !core.Drained() || core.Producer().Stats().Released[wire.ReasonAborted] != 1 {
		t.Fatalf("drained %v released %v", core.Drained(), core.Producer().Stats().Released)
	}
	if !core.Drained() {
		t.Fatal("not drained")
	}
	idle, _ := transferCore(t, RoleDecode)
	if idle.Drained() {
		t.Fatal("drained without Drain")
	}
	idle.DrainBy(0)
	if !idle.Drained() {
		t.Fatal("an idle draining core is not drained")
	}
}

func TestCoreDuplicateDoesNotRejectOriginalLease(t *testing.T) {
	core, _ := transferCore(t, RoleDecode)
	prompt := make([]int32, 40)
	remote := &xfer.Remote{EngineID: "p", Addr: "p:1", Lease: 7, NumBlocks: 3, NumTokens: 40, ExpiresIn: time.Second}
	add := func(r *xfer.Remote) AddResult {
		return core.Add(0, &Request{ID: "r", Prompt: prompt, MaxTokens: 4, Remote: r})
	}
	if res := add(remote); res != Accepted {
		t.Fatal(res)
	}
	if res := add(remote); res != RejectedDuplicate || core.Consumer().NumNotices() != 0 {
		t.Fatalf("duplicate with the same lease: %v, %d notices", res, core.Consumer().NumNotices())
	}
	other := *remote
	other.Lease = 8
	if res := add(&other); res != RejectedDuplicate || core.Consumer().NumNotices() != 1 {
		t.Fatalf("duplicate with another lease: %v, %d notices", res, core.Consumer().NumNotices())
	}
	if !core.Consumer().Has(1) {
		t.Fatal("the original request left the consumer")
	}
}

func TestCoreRejectionsNotifyP(t *testing.T) {
	core, _ := transferCore(t, RoleDecode)
	remote := &xfer.Remote{EngineID: "p", Addr: "p:1", Lease: 9, NumBlocks: 1, NumTokens: 4, ExpiresIn: time.Second}
	cases := []struct {
		req  *Request
		want AddResult
	}{
		{&Request{ID: "a", Prompt: nil, MaxTokens: 4, Remote: remote}, RejectedInvalid},
		{&Request{ID: "b", Prompt: []int32{1, 2, 3, 4}, MaxTokens: 1 << 20, Remote: remote}, RejectedTooLong},
		{&Request{ID: "c", Prompt: []int32{1, 2, 3}, MaxTokens: 4, Remote: remote}, RejectedInvalid}, // NumTokens > prompt
	}
	for i, tc := range cases {
		r := *tc.req.Remote
		r.Lease = wire.LeaseID(100 + i)
		tc.req.Remote = &r
		if res := core.Add(0, tc.req); res != tc.want {
			t.Fatalf("%s: %v, want %v", tc.req.ID, res, tc.want)
		}
		if core.Consumer().NumNotices() != i+1 {
			t.Fatalf("%s: %d notices", tc.req.ID, core.Consumer().NumNotices())
		}
	}
	core.Drain()
	if res := core.Add(0, &Request{ID: "d", Prompt: []int32{1, 2, 3, 4}, MaxTokens: 4, Remote: remote}); res != RejectedShuttingDown || core.Consumer().NumNotices() != 4 {
		t.Fatalf("draining: %v, %d notices", res, core.Consumer().NumNotices())
	}
}

// The recent set remembers exactly the last n ids added, an id added twice
// as long as either copy is among them, and nothing when n is 0.
func TestRecentSet(t *testing.T) {
	s := newRecentSet(4)
	for i := range 6 {
		s.add(strconv.Itoa(i))
	}
	for i := range 6 {
		if want := i >= 2; s.has(strconv.Itoa(i)) != want {
			t.Errorf("has(%d) = %v, want %v", i, !want, want)
		}
	}
	fresh := newRecentSet(4)
	if s.has("") || s.has("6") || fresh.has("") {
		t.Error("has an id never added")
	}
	s.add("3") // a reused id: its older copy leaves the ring first
	s.add("x")
	s.add("y")
	if !s.has("3") {
		t.Error("forgot an id whose newer copy is in the ring")
	}
	s.add("") // an empty id is an id like any other
	if !s.has("") {
		t.Error("forgot the empty id")
	}
	empty := newRecentSet(0)
	empty.add("a")
	if empty.has("a") {
		t.Error("a set of size 0 remembers")
	}
}
