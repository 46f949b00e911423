package node

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// A stop the edge detects (a stop string) finishes the request as stopped,
// not aborted, frees its blocks and leaves finished requests alone.
func TestNodeStopFinishesAsStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := startNode(t, time.Millisecond, Config{})
		s, _ := n.Submit(req("r1", 100))
		if buf, err := s.Recv(context.Background(), nil); err != nil || len(buf) == 0 {
			t.Fatalf("first Recv: %v %v", buf, err)
		}
		if got := n.Stop("r1"); got != engine.Aborted {
			t.Fatalf("Stop: %v", got)
		}
		outs := drain(t, s)
		if last := outs[len(outs)-1]; !last.Finished || last.Status != sched.FinishedStopped {
			t.Fatalf("last output %+v, want finished stopped", last)
		}
		if got := n.Stop("r1"); got != engine.AbortAlreadyFinished {
			t.Errorf("second Stop: %v", got)
		}
		if got := n.Stop("nope"); got != engine.AbortUnknown {
			t.Errorf("Stop of an unknown id: %v", got)
		}
		if err := n.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := n.Stats()
		if st.Pool.Held != 0 || st.Finished[sched.FinishedStopped] != 1 || st.Finished[sched.FinishedAborted] != 0 {
			t.Errorf("after Stop: held %d, finished %v", st.Pool.Held, st.Finished)
		}
	})
}

// A remote-decode prefill stopped by the edge gets no lease: its blocks
// are freed at once.
func TestPDStoppedPrefillGrantsNoLease(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(30 * time.Second)
	p := startPD(t, engine.RolePrefill, "p0", xc, stepExec{5 * time.Millisecond}, nil)
	s, res := p.Submit(&engine.Request{ID: "r", Prompt: pdPrompt(5, 40), MaxTokens: 50, IgnoreEOS: true, RemoteDecode: true})
	if res != engine.Accepted {
		t.Fatalf("P refused: %v", res)
	}
	if _, err := s.Recv(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	p.Stop("r")
	outs := drain(t, s)
	if last := outs[len(outs)-1]; last.Status != sched.FinishedStopped || last.Grant != nil {
		t.Fatalf("stopped prefill ended %+v, want stopped without a grant", last)
	}
	waitFor(t, "P to free the blocks", func() bool { st := p.Stats(); return st.Pool.Held == 0 && st.Producer.Active == 0 })
	if g := p.Stats().Producer.Granted; g != 0 {
		t.Errorf("%d leases granted", g)
	}
}

// A draining decode engine refuses requests carrying a lease, and P is
// told at once (RELEASE rejected), whether the node refuses the submission
// itself or the edge calls Reject.
func TestPDDrainingDecodeRejects(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(30 * time.Second)
	p := startPD(t, engine.RolePrefill, "p0", xc, nil, nil)
	d := startPD(t, engine.RoleDecode, "d0", xc, nil, nil)
	ep, _ := p.TransferEndpoint()
	prompt := pdPrompt(12, 40)
	g1 := prefill(t, p, "r1", prompt)
	g2 := prefill(t, p, "r2", prompt)
	d.Drain()
	if _, res := d.Submit(&engine.Request{ID: "r1", Prompt: prompt, MaxTokens: 4, Remote: ep.Remote(g1)}); res != engine.RejectedShuttingDown {
		t.Fatalf("draining D answered %v, want shutting down", res)
	}
	d.Reject(&engine.Request{Remote: ep.Remote(g2)}) // what the HTTP layer does for its own refusals
	got := map[wire.LeaseID]wire.Reason{}
	for range 2 {
		r := p.nextRelease(t)
		got[r.lease] = r.reason
	}
	if got[g1.Lease] != wire.ReasonRejected || got[g2.Lease] != wire.ReasonRejected {
		t.Fatalf("releases %v, want leases %d and %d rejected", got, g1.Lease, g2.Lease)
	}
	waitFor(t, "P to drop the lease holds", func() bool { st := p.Stats(); return st.Pool.Held == 0 && st.Producer.Active == 0 })
}

// OnTransfer sees each pull a decode node finishes, with its duration.
func TestPDOnTransferSeesPulls(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(5 * time.Second)
	pulls := make(chan xfer.Done, 4)
	p := startPD(t, engine.RolePrefill, "p0", xc, nil, nil)
	d := startPDWith(t, engine.RoleDecode, "d0", xc, nil, nil, Config{OnTransfer: func(x xfer.Done) { pulls <- x }})
	ep, _ := p.TransferEndpoint()
	prompt := pdPrompt(13, 100)
	g := prefill(t, p, "r", prompt)
	s, res := d.Submit(&engine.Request{ID: "r", Prompt: prompt, MaxTokens: 4, IgnoreEOS: true, Remote: ep.Remote(g)})
	if res != engine.Accepted {
		t.Fatalf("D refused: %v", res)
	}
	drain(t, s)
	select {
	case x := <-pulls:
		if x.Outcome != xfer.Pulled || x.Bytes == 0 || x.Duration < 0 {
			t.Errorf("OnTransfer got %+v, want a pull", x)
		}
	default:
		t.Fatal("OnTransfer was not called before the request's first output")
	}
}

// S23 at the node: a draining prefill node refuses new requests and keeps
// serving its outstanding lease until D reads it; then it is drained.
func TestPDDrainByServesOutstandingLeases(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(30 * time.Second)
	p := startPD(t, engine.RolePrefill, "p0", xc, nil, nil)
	d := startPD(t, engine.RoleDecode, "d0", xc, nil, nil)
	ep, _ := p.TransferEndpoint()
	prompt := pdPrompt(14, 70)
	g := prefill(t, p, "r", prompt)

	p.DrainBy(time.Now().Add(time.Minute))
	if _, res := p.Submit(&engine.Request{ID: "late", Prompt: prompt, MaxTokens: 1}); res != engine.RejectedShuttingDown {
		t.Errorf("draining P answered %v, want shutting down", res)
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.WaitDrained(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("P drained with a lease outstanding: %v", err)
	}
	s, res := d.Submit(&engine.Request{ID: "r", Prompt: prompt, MaxTokens: 4, IgnoreEOS: true, Remote: ep.Remote(g)})
	if res != engine.Accepted {
		t.Fatalf("D refused: %v", res)
	}
	outs := drain(t, s)
	if !outs[0].Pulled {
		t.Errorf("D did not pull from the draining P: %+v", outs[0])
	}
	if r := p.nextRelease(t); r.lease != g.Lease || r.reason != wire.ReasonReadDone {
		t.Errorf("release %+v, want lease %d read_done", r, g.Lease)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), pdWait)
	defer cancel2()
	if err := p.WaitDrained(ctx); err != nil {
		t.Fatalf("P not drained after the read: %v", err)
	}
	if st := p.Stats(); st.Pool.Held != 0 || st.Producer.Active != 0 {
		t.Errorf("drained P holds %d blocks, %d leases", st.Pool.Held, st.Producer.Active)
	}
}

// At the drain deadline, leases nobody read are released (shutdown) and
// the node is drained.
func TestPDDrainByDeadlineEndsLeases(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(30 * time.Second)
	p := startPD(t, engine.RolePrefill, "p0", xc, nil, nil)
	g := prefill(t, p, "r", pdPrompt(15, 40))
	p.DrainBy(time.Now().Add(30 * time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), pdWait)
	defer cancel()
	if err := p.WaitDrained(ctx); err != nil {
		t.Fatalf("WaitDrained: %v", err)
	}
	if r := p.nextRelease(t); r.lease != g.Lease || r.reason != wire.ReasonShutdown {
		t.Errorf("release %+v, want lease %d shutdown", r, g.Lease)
	}
	if st := p.Stats(); st.Pool.Held != 0 {
		t.Errorf("%d blocks held after the drain deadline", st.Pool.Held)
	}
}

// Start returns at once; the outcome comes with the first Recv.
func TestNodeStartReportsOutcomeThroughRecv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := startNode(t, time.Millisecond, Config{})
		s := n.Start(req("r1", 50), SubmitOptions{})
		buf, err := s.Recv(context.Background(), nil)
		if err != nil || len(buf) == 0 || s.Refusal() != engine.Accepted {
			t.Fatalf("first Recv of an accepted request: %v %v %v", buf, err, s.Refusal())
		}
		// A duplicate id is refused through Recv, and aborting its
		// stream leaves the live request of that id alone.
		dup := n.Start(req("r1", 5), SubmitOptions{})
		if got := dup.Abort(); got != engine.AbortUnknown {
			t.Errorf("Abort of the refused duplicate: %v", got)
		}
		if _, err := dup.Recv(context.Background(), nil); !errors.Is(err, ErrRefused) || dup.Refusal() != engine.RejectedDuplicate {
			t.Errorf("duplicate: %v, %v; want ErrRefused, duplicate", err, dup.Refusal())
		}
		if _, err := dup.Recv(context.Background(), nil); err != io.EOF {
			t.Errorf("Recv after the refusal: %v, want EOF", err)
		}
		outs := drain(t, s)
		if last := outs[len(outs)-1]; last.Status != sched.FinishedLength {
			t.Errorf("the original ended %+v; the duplicate's abort reached it", last)
		}
		// FinishedOnly: one wake-up with every output, in a buffer sized
		// for them.
		s = n.Start(req("r2", 16), SubmitOptions{FinishedOnly: true})
		buf, err = s.Recv(context.Background(), nil)
		if err != nil || len(buf) != 16 || !buf[15].Finished || cap(buf) != 17 {
			t.Errorf("FinishedOnly Recv: %d outputs (cap %d), %v", len(buf), cap(buf), err)
		}
		n.Drain()
		late := n.Start(req("r3", 5), SubmitOptions{})
		if _, err := late.Recv(context.Background(), nil); !errors.Is(err, ErrRefused) || late.Refusal() != engine.RejectedShuttingDown {
			t.Errorf("Start while draining: %v %v", err, late.Refusal())
		}
		rs := RefusedStream("x", engine.RejectedQueueFull)
		if _, err := rs.Recv(context.Background(), nil); !errors.Is(err, ErrRefused) || rs.Refusal() != engine.RejectedQueueFull || rs.Abort() != engine.AbortUnknown {
			t.Errorf("RefusedStream: %v %v", err, rs.Refusal())
		}
	})
}
