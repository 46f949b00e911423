package node

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/sched"
)

// stepExec is a test executor: every sampled token is 'a' + position % 26
// and every step takes dur.
type stepExec struct{ dur time.Duration }

func (e stepExec) Execute(b *model.Batch, out *model.StepResult) {
	out.Tokens = out.Tokens[:0]
	for _, s := range b.Seqs {
		tok := model.NoToken
		if s.Sample {
			tok = 'a' + int32(len(s.Tokens)%26)
		}
		out.Tokens = append(out.Tokens, tok)
	}
	out.Duration = e.dur
}

func testCore(t *testing.T, maxWaiting int) *engine.Core {
	t.Helper()
	sc := sched.DefaultConfig()
	sc.MaxWaiting = maxWaiting
	return engine.NewCore(engine.Config{
		Pool:           kvblock.Config{NumBlocks: 64, BlockSizeTokens: 4},
		Sched:          sc,
		MaxModelLen:    128,
		VocabSize:      257,
		EOS:            256,
		RecentFinished: 16,
	}, rand.New(rand.NewPCG(1, 2)))
}

func startNode(t *testing.T, dur time.Duration, cfg Config) (*Node, context.CancelFunc) {
	t.Helper()
	n := New(testCore(t, 64), stepExec{dur}, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := n.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-n.Done() })
	return n, cancel
}

func req(id string, maxTokens int) *engine.Request {
	return &engine.Request{ID: id, Prompt: []int32{1, 2, 3, 4, 5}, MaxTokens: maxTokens, IgnoreEOS: true}
}

// drain reads s to the end.
func drain(t *testing.T, s *Stream) []engine.Output {
	t.Helper()
	var all, buf []engine.Output
	for {
		var err error
		buf, err = s.Recv(context.Background(), buf)
		all = append(all, buf...)
		if err == io.EOF {
			return all
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if len(buf) == 0 {
			t.Fatal("Recv returned nothing without an error")
		}
	}
}

func TestNodeGeneratesAndHonoursStepDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const step = 10 * time.Millisecond
		n, _ := startNode(t, step, Config{})
		start := n.Now()
		s, res := n.Submit(req("r1", 4))
		if res != engine.Accepted {
			t.Fatalf("Submit: %v", res)
		}
		outs := drain(t, s)
		if len(outs) != 4 {
			t.Fatalf("got %d outputs, want 4: %+v", len(outs), outs)
		}
		for i, o := range outs {
			if o.Token != 'a'+int32((5+i)%26) {
				t.Errorf("output %d token %d", i, o.Token)
			}
			// Step i ends (i+1) step durations after the submission: the
			// loop waited for each step's modelled duration.
			if want := start.Add(time.Duration(i+1) * step); o.At != want {
				t.Errorf("output %d at %v, want %v", i, o.At, want)
			}
		}
		last := outs[len(outs)-1]
		if !last.Finished || last.Status != sched.FinishedLength {
			t.Fatalf("last output %+v, want finished by length", last)
		}
		if last.Usage.PromptTokens != 5 || last.Usage.CompletionTokens != 4 {
			t.Errorf("usage %+v", last.Usage)
		}
		if at, ok := s.ScheduledAt(); !ok || at != start {
			t.Errorf("ScheduledAt = %v, %v; want %v", at, ok, start)
		}
		if _, err := s.Recv(context.Background(), nil); err != io.EOF {
			t.Errorf("Recv after the end: %v, want EOF", err)
		}
		if err := n.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := n.Stats()
		if st.Pool.Held != 0 || st.Streams != 0 || st.Requests != 0 || st.Finished[sched.FinishedLength] != 1 {
			t.Errorf("stats after the request: %+v", st)
		}
	})
}

func TestNodeAcceptsWorkWhileAStepRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := startNode(t, time.Second, Config{})
		s1, _ := n.Submit(req("r1", 3))
		synctest.Wait() // the first step is executing, its timer pending
		before := n.Now()
		s2, res := n.Submit(req("r2", 3))
		if res != engine.Accepted {
			t.Fatalf("Submit during a step: %v", res)
		}
		if got := n.Abort("r1"); got != engine.Aborted {
			t.Fatalf("Abort during a step: %v", got)
		}
		if n.Now() != before {
			t.Fatalf("Submit and Abort waited for the step: %v -> %v", before, n.Now())
		}
		outs := drain(t, s1)
		if last := outs[len(outs)-1]; last.Status != sched.FinishedAborted {
			t.Errorf("r1 ended %+v, want aborted", last)
		}
		if outs := drain(t, s2); len(outs) != 3 || outs[2].Status != sched.FinishedLength {
			t.Errorf("r2 outputs %+v", outs)
		}
		if err := n.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := n.Stats(); st.Pool.Held != 0 {
			t.Errorf("held blocks after abort: %d", st.Pool.Held)
		}
	})
}

func TestNodeAbortFreesBlocksAndReportsOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := startNode(t, time.Millisecond, Config{})
		s, _ := n.Submit(req("r1", 100))
		var buf []engine.Output
		buf, err := s.Recv(context.Background(), buf)
		if err != nil || len(buf) == 0 {
			t.Fatalf("first Recv: %v %v", buf, err)
		}
		if st := n.Stats(); st.Pool.Held == 0 || st.Running != 1 {
			t.Fatalf("while running: %+v", st)
		}
		if got := n.Abort("r1"); got != engine.Aborted {
			t.Fatalf("Abort: %v", got)
		}
		outs := drain(t, s)
		if last := outs[len(outs)-1]; !last.Finished || last.Status != sched.FinishedAborted {
			t.Fatalf("last output %+v", last)
		}
		if got := n.Abort("r1"); got != engine.AbortAlreadyFinished {
			t.Errorf("second Abort: %v", got)
		}
		if got := n.Abort("nope"); got != engine.AbortUnknown {
			t.Errorf("Abort of an unknown id: %v", got)
		}
		if err := n.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := n.Stats(); st.Pool.Held != 0 || st.Finished[sched.FinishedAborted] != 1 {
			t.Errorf("after abort: %+v", st)
		}
	})
}

func TestNodeRejections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := startNode(t, time.Millisecond, Config{})
		s, _ := n.Submit(req("dup", 50))
		if _, res := n.Submit(req("dup", 5)); res != engine.RejectedDuplicate {
			t.Errorf("duplicate id: %v", res)
		}
		if _, res := n.Submit(req("long", 1000)); res != engine.RejectedTooLong {
			t.Errorf("too long: %v", res)
		}
		if _, res := n.Submit(&engine.Request{ID: "empty", MaxTokens: 1}); res != engine.RejectedInvalid {
			t.Errorf("empty prompt: %v", res)
		}
		n.Drain()
		if !n.Draining() {
			t.Error("Draining() is false after Drain")
		}
		if _, res := n.Submit(req("late", 5)); res != engine.RejectedShuttingDown {
			t.Errorf("after Drain: %v", res)
		}
		// The live request runs to completion; WaitIdle sees it end.
		idle := make(chan error)
		go func() { idle <- n.WaitIdle(context.Background()) }()
		outs := drain(t, s)
		if last := outs[len(outs)-1]; last.Status != sched.FinishedLength || len(outs) != 50 {
			t.Errorf("drained request ended %+v after %d outputs", last, len(outs))
		}
		if err := <-idle; err != nil {
			t.Fatal(err)
		}
		st := n.Stats()
		if st.Rejected[engine.RejectedDuplicate] != 1 || st.Rejected[engine.RejectedTooLong] != 1 || !st.Draining {
			t.Errorf("stats: %+v", st)
		}
	})
}

func TestNodeQueueFullAtMaxWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(testCore(t, 1), stepExec{time.Second}, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		defer func() { cancel(); <-n.Done() }()
		// Both are queued before the loop starts, so the core sees two adds
		// in one iteration and its waiting queue (1) overflows.
		var wg sync.WaitGroup
		results := make([]engine.AddResult, 2)
		for i := range 2 {
			wg.Go(func() { _, results[i] = n.Submit(req(string(rune('a'+i)), 2)) })
		}
		synctest.Wait()
		go n.Run(ctx)
		wg.Wait()
		if !(results[0] == engine.Accepted && results[1] == engine.RejectedQueueFull) && !(results[1] == engine.Accepted && results[0] == engine.RejectedQueueFull) {
			t.Errorf("results %v, want one accepted and one queue full", results)
		}
	})
}

func TestNodeMaxPendingBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(testCore(t, 64), stepExec{0}, Config{MaxPending: 1})
		first := make(chan engine.AddResult)
		go func() { _, r := n.Submit(req("a", 2)); first <- r }()
		synctest.Wait() // the first submission is queued; Run has not started
		if _, res := n.Submit(req("b", 2)); res != engine.RejectedQueueFull {
			t.Errorf("over MaxPending: %v, want queue full", res)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go n.Run(ctx)
		if r := <-first; r != engine.Accepted {
			t.Errorf("queued submission: %v", r)
		}
		cancel()
		<-n.Done()
	})
}

func TestNodeFinishedOnlyWakesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := startNode(t, time.Millisecond, Config{})
		s, _ := n.SubmitWith(req("r", 8), SubmitOptions{FinishedOnly: true})
		outs, err := s.Recv(context.Background(), nil)
		if err != nil || len(outs) != 8 || !outs[7].Finished {
			t.Fatalf("one Recv got %d outputs (%v), want all 8", len(outs), err)
		}
	})
}

func TestNodeRecvHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := startNode(t, time.Hour, Config{})
		s, _ := n.Submit(req("r", 2))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.Recv(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Recv: %v, want deadline exceeded", err)
		}
		if got := s.Abort(); got != engine.Aborted {
			t.Fatalf("Abort: %v", got)
		}
	})
}

func TestNodeShutdownAbortsLiveRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, cancel := startNode(t, time.Second, Config{})
		s, _ := n.Submit(req("r", 100))
		synctest.Wait()
		cancel()
		outs := drain(t, s)
		if last := outs[len(outs)-1]; last.Status != sched.FinishedAborted {
			t.Fatalf("live request ended %+v, want aborted", last)
		}
		<-n.Done()
		if _, res := n.Submit(req("after", 2)); res != engine.RejectedShuttingDown {
			t.Errorf("Submit after Run: %v", res)
		}
		if got := n.Abort("r"); got != engine.AbortUnknown {
			t.Errorf("Abort after Run: %v", got)
		}
		if err := n.WaitIdle(context.Background()); err != nil {
			t.Errorf("WaitIdle after Run: %v", err)
		}
		st := n.Stats()
		if st.Pool.Held != 0 || st.Finished[sched.FinishedAborted] != 1 || !st.Draining {
			t.Errorf("final stats %+v", st)
		}
		if err := n.Run(context.Background()); !errors.Is(err, ErrRunTwice) {
			t.Errorf("second Run: %v", err)
		}
	})
}

func TestNodeStatsBeforeRun(t *testing.T) {
	n := New(testCore(t, 4), stepExec{0}, Config{})
	if st := n.Stats(); st.Pool.Free != 64 || st.Pool.Capacity != 64 || st.Requests != 0 {
		t.Errorf("stats before Run: %+v", st)
	}
}

// TestNodeConcurrentClients runs many clients at once (meant for -race).
func TestNodeConcurrentClients(t *testing.T) {
	n, _ := startNode(t, 0, Config{})
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Go(func() {
			for i := range 20 {
				id := string(rune('A'+c)) + "-" + string(rune('a'+i))
				s, res := n.SubmitWith(req(id, 6), SubmitOptions{FinishedOnly: i%2 == 0})
				if res != engine.Accepted {
					t.Errorf("%s: %v", id, res)
					return
				}
				if i%5 == 4 {
					s.Abort()
				}
				outs := drain(t, s)
				if !outs[len(outs)-1].Finished {
					t.Errorf("%s did not finish", id)
				}
				_ = n.Stats()
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if st := n.Stats(); st.Pool.Held != 0 || st.Requests != 0 {
		t.Errorf("after all clients: %+v", st)
	}
}

// BenchmarkNodeRoundTrip measures Submit to finished output with the
// zero-latency executor, 32 clients, 16-token prompts and 16 output tokens.
func BenchmarkNodeRoundTrip(b *testing.B) {
	core := engine.NewCore(engine.Config{
		Pool:        kvblock.Config{NumBlocks: 8192, BlockSizeTokens: 16},
		Sched:       sched.DefaultConfig(),
		MaxModelLen: 4096, VocabSize: 257, EOS: 256, RecentFinished: 1024,
	}, rand.New(rand.NewPCG(1, 2)))
	n := New(core, stepExec{0}, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-n.Done() }()
	go n.Run(ctx)
	prompt := make([]int32, 16)
	var next sync.Mutex
	id := 0
	b.SetParallelism(16) // 32 clients on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var buf []engine.Output
		for pb.Next() {
			next.Lock()
			id++
			r := &engine.Request{ID: strconv.Itoa(id), Prompt: prompt, MaxTokens: 16, IgnoreEOS: true}
			next.Unlock()
			s, res := n.SubmitWith(r, SubmitOptions{FinishedOnly: true})
			if res != engine.Accepted {
				b.Errorf("Submit: %v", res)
				return
			}
			for {
				var err error
				buf, err = s.Recv(ctx, buf)
				if err != nil {
					break
				}
			}
		}
	})
}
