package node

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/sched"
)

// TestScenarioS29NodeStreams (node level, real loop and goroutine): an abort of A and the
// add of B under A's id arrive in one batch of the loop, so A's finished
// output is produced after B took the id: it still reaches A's stream, and
// B runs to its end. Then, while a third request C holds the id, A's stream
// aborts, stops and reports delivery again: C is untouched.
func TestScenarioS29NodeStreams(t *testing.T) {
	n := New(testCore(t, 64), stepExec{time.Millisecond}, Config{})
	stA := n.Start(req("dup", 20), SubmitOptions{})
	aborted := make(chan engine.AbortResult, 1)
	go func() { aborted <- stA.Abort() }()
	waitFor(t, "A's abort queued behind its add", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.inbox) == 2
	})
	stB := n.Start(req("dup", 20), SubmitOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	go n.Run(ctx)
	t.Cleanup(func() { cancel(); <-n.Done() })
	if res := <-aborted; res != engine.Aborted {
		t.Fatalf("A's abort: %v", res)
	}
	outA := drainWithin(t, stA)
	if last := outA[len(outA)-1]; !last.Finished || last.Status != sched.FinishedAborted || len(outA) != 1 {
		t.Fatalf("A's stream got %+v, want only its aborted finish", outA)
	}
	outB := drainWithin(t, stB)
	if last := outB[len(outB)-1]; !last.Finished || last.Status != sched.FinishedLength || len(outB) != 20 || last.Req == outA[0].Req {
		t.Fatalf("B's stream got %d outputs ending %+v, want its own 20 tokens", len(outB), last)
	}

	stC := n.Start(req("dup", 100), SubmitOptions{})
	first, err := stC.Recv(context.Background(), nil)
	if err != nil || len(first) == 0 || first[len(first)-1].Finished {
		t.Fatalf("C's first outputs %+v, %v", first, err)
	}
	if res := stA.Abort(); res != engine.AbortAlreadyFinished {
		t.Errorf("A's abort after its finish: %v", res)
	}
	if res := stA.Stop(); res != engine.AbortAlreadyFinished {
		t.Errorf("A's stop after its finish: %v", res)
	}
	stA.Delivered(false)
	outC := append(first, drainWithin(t, stC)...)
	if last := outC[len(outC)-1]; last.Status != sched.FinishedLength || len(outC) != 100 {
		t.Fatalf("C got %d outputs ending %+v: A's stream reached it", len(outC), last)
	}
	// The id-addressed abort (the abort endpoint) is unchanged.
	if res := n.Abort("dup"); res != engine.AbortAlreadyFinished {
		t.Errorf("Node.Abort of a finished id: %v", res)
	}
}

// drainWithin reads s to the end, failing (not hanging) if the end does not
// come within pdWait: a stream whose finish went elsewhere never ends.
func drainWithin(t *testing.T, s *Stream) []engine.Output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pdWait)
	defer cancel()
	var all, buf []engine.Output
	for {
		var err error
		buf, err = s.Recv(ctx, buf)
		all = append(all, buf...)
		if err == io.EOF {
			return all
		}
		if err != nil {
			t.Fatalf("stream %s: %v after %d outputs", s.ID(), err, len(all))
		}
	}
}
