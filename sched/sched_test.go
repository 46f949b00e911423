package sched

import (
	"slices"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// fakeExec samples a token that depends only on the request's tokens.
type fakeExec struct{}

func (fakeExec) Execute(b *model.Batch, out *model.StepResult) {
	out.Tokens = out.Tokens[:0]
	for _, s := range b.Seqs {
		if !s.Sample {
			out.Tokens = append(out.Tokens, model.NoToken)
			continue
		}
		var h uint32 = 2166136261
		for _, t := range s.Tokens {
			h = (h ^ uint32(t)) * 16777619
		}
		out.Tokens = append(out.Tokens, int32(1+h%200))
	}
}

func newReq(id uint64, prompt, maxTokens int) *Request {
	r := &Request{ID: id, NumPromptTokens: prompt, MaxTokens: maxTokens, EOS: 999}
	for i := 0; i < prompt; i++ {
		r.Tokens = append(r.Tokens, int32(1+(int(id)*7+i)%100))
	}
	return r
}

type harness struct {
	t    *testing.T
	pool *kvblock.Pool
	s    *Scheduler
	res  model.StepResult
}

func newHarness(t *testing.T, blocks int, cfg Config) *harness {
	pool := kvblock.New(kvblock.Config{NumBlocks: blocks, BlockSizeTokens: 4})
	return &harness{t: t, pool: pool, s: New(cfg, pool)}
}

// step runs one scheduling step and returns the batch's (id, count) pairs
// and the outcomes. It releases the holds of finished requests, as the
// engine's teardown would.
func (h *harness) step() ([][2]int, []Outcome) {
	h.t.Helper()
	b := h.s.Schedule()
	var got [][2]int
	for _, s := range b.Seqs {
		got = append(got, [2]int{int(s.Req), s.Count})
		if len(s.Blocks)*4 < s.Start+s.Count {
			h.t.Fatalf("request %d: %d blocks cannot hold %d tokens", s.Req, len(s.Blocks), s.Start+s.Count)
		}
	}
	if len(b.Seqs) == 0 {
		return nil, nil
	}
	fakeExec{}.Execute(b, &h.res)
	outs := h.s.Update(&h.res)
	for _, o := range outs {
		if o.Finished.Finished() {
			h.pool.Release(o.Req.Hold)
			o.Req.Hold = 0
		}
	}
	if err := h.pool.Check(); err != nil {
		h.t.Fatal(err)
	}
	return got, outs
}

func TestDecodeUntilLength(t *testing.T) {
	h := newHarness(t, 64, DefaultConfig())
	r := newReq(1, 6, 3)
	h.s.Add(r)
	got, _ := h.step()
	if len(got) != 1 || got[0] != [2]int{1, 6} {
		t.Fatalf("prefill step = %v, want [[1 6]]", got)
	}
	for i := 0; i < 2; i++ {
		if got, _ := h.step(); len(got) != 1 || got[0][1] != 1 {
			t.Fatalf("decode step %d = %v", i, got)
		}
	}
	if r.Status() != FinishedLength || r.NumOutputTokens() != 3 {
		t.Fatalf("status %v with %d outputs, want length with 3", r.Status(), r.NumOutputTokens())
	}
	if h.s.NumRunning() != 0 || h.pool.NumHeld() != 0 {
		t.Fatalf("running %d held %d after finish", h.s.NumRunning(), h.pool.NumHeld())
	}
	if got, _ := h.step(); got != nil {
		t.Fatalf("idle step scheduled %v", got)
	}
}

func TestStopTokenAndMinTokens(t *testing.T) {
	h := newHarness(t, 64, DefaultConfig())
	r := newReq(1, 5, 10)
	// Learn the first token, then make it a stop token.
	probe := newReq(2, 5, 1)
	probe.Tokens = append([]int32(nil), r.Tokens...)
	h.s.Add(probe)
	_, outs := h.step()
	first := outs[0].Token
	r.StopTokenIDs = []int32{first}
	h.s.Add(r)
	h.step()
	if r.Status() != FinishedStopped || r.NumOutputTokens() != 1 {
		t.Fatalf("stop token: status %v outputs %d", r.Status(), r.NumOutputTokens())
	}
	r2 := newReq(3, 5, 2)
	r2.Tokens = append(r2.Tokens[:0], r.Tokens[:5]...)
	r2.StopTokenIDs = []int32{first}
	r2.MinTokens = 2
	h.s.Add(r2)
	h.step()
	h.step()
	if r2.Status() != FinishedLength || r2.NumOutputTokens() != 2 {
		t.Fatalf("min tokens: status %v outputs %d", r2.Status(), r2.NumOutputTokens())
	}
}

func TestChunkedPrefillRespectsBudget(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxNumBatchedTokens = 8
	h := newHarness(t, 64, cfg)
	a, b := newReq(1, 20, 2), newReq(2, 3, 2)
	h.s.Add(a)
	h.s.Add(b)
	want := [][][2]int{
		{{1, 8}},
		{{1, 8}},
		{{1, 4}, {2, 3}}, // a's last chunk samples; b fits in the rest
		{{1, 1}, {2, 1}},
	}
	for i, w := range want {
		got, _ := h.step()
		if len(got) != len(w) {
			t.Fatalf("step %d = %v, want %v", i, got, w)
		}
		for j := range w {
			if got[j] != w[j] {
				t.Fatalf("step %d = %v, want %v", i, got, w)
			}
		}
	}
}

// A long prompt arriving while requests decode is computed at most
// LongPrefillTokenThreshold positions per step, within a budget that would
// take it whole, beside the decodes; a short prompt is not held back.
func TestLongPrefillTokenThreshold(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LongPrefillTokenThreshold = 6
	h := newHarness(t, 64, cfg)
	a, b, c := newReq(1, 3, 8), newReq(2, 20, 2), newReq(3, 5, 2)
	h.s.Add(a)
	if got, _ := h.step(); len(got) != 1 || got[0] != [2]int{1, 3} {
		t.Fatalf("first step %v", got)
	}
	h.s.Add(b)
	h.s.Add(c)
	want := [][][2]int{
		{{1, 1}, {2, 6}, {3, 5}},
		{{1, 1}, {2, 6}, {3, 1}},
		{{1, 1}, {2, 6}},
		{{1, 1}, {2, 2}}, // b's last chunk samples
		{{1, 1}, {2, 1}},
	}
	for i, w := range want {
		got, _ := h.step()
		if !slices.Equal(got, w) {
			t.Fatalf("step %d = %v, want %v", i, got, w)
		}
	}
	if err := (Config{MaxNumSeqs: 1, MaxNumBatchedTokens: 1, MaxWaiting: 1, LongPrefillTokenThreshold: 4}).Validate(); err == nil {
		t.Error("a threshold without chunked prefill validated")
	}
}

func TestNoChunkedPrefillWaits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxNumBatchedTokens = 8
	cfg.ChunkedPrefill = false
	h := newHarness(t, 64, cfg)
	h.s.Add(newReq(1, 20, 2))
	if got, _ := h.step(); got != nil {
		t.Fatalf("a 20-token prompt ran in an 8-token budget without chunking: %v", got)
	}
}

func TestMaxNumSeqs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxNumSeqs = 2
	h := newHarness(t, 64, cfg)
	for i := 1; i <= 3; i++ {
		h.s.Add(newReq(uint64(i), 4, 5))
	}
	got, _ := h.step()
	if len(got) != 2 || h.s.NumWaiting() != 1 {
		t.Fatalf("scheduled %v with %d waiting, want 2 scheduled and 1 waiting", got, h.s.NumWaiting())
	}
}

func TestQueueFull(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxWaiting = 2
	h := newHarness(t, 64, cfg)
	if h.s.Add(newReq(1, 4, 1)) != Added || h.s.Add(newReq(2, 4, 1)) != Added {
		t.Fatal("first two not added")
	}
	if h.s.Add(newReq(3, 4, 1)) != QueueFull {
		t.Fatal("third added beyond MaxWaiting")
	}
	if h.s.Stats().QueueFullRejections != 1 {
		t.Fatal("rejection not counted")
	}
}

func TestPreemptionNewestFirstAndRecompute(t *testing.T) {
	// 6 blocks of 4 tokens. Three requests of 8 prompt tokens take 2 blocks
	// each; the first decode step needs a third block for each.
	h := newHarness(t, 6, DefaultConfig())
	reqs := []*Request{newReq(1, 8, 3), newReq(2, 8, 3), newReq(3, 8, 3)}
	for _, r := range reqs {
		h.s.Add(r)
	}
	h.step() // prefill all three: 6 blocks
	if h.pool.NumAvailable() != 0 {
		t.Fatalf("available %d after prefill, want 0", h.pool.NumAvailable())
	}
	got, _ := h.step() // request 1 needs a block: the newest (3) is preempted
	if reqs[2].Status() != Preempted && reqs[2].Status() != Running {
		t.Fatalf("request 3 status %v", reqs[2].Status())
	}
	if h.s.Stats().Preemptions == 0 || reqs[2].NumPreemptions != 1 {
		t.Fatalf("no preemption recorded: %+v", h.s.Stats())
	}
	for _, g := range got {
		if g[0] == 3 {
			t.Fatalf("preempted request scheduled in the same step: %v", got)
		}
	}
	for i := 0; i < 20 && h.s.NumRunning()+h.s.NumWaiting() > 0; i++ {
		h.step()
	}
	for _, r := range reqs {
		if r.Status() != FinishedLength || r.NumOutputTokens() != 3 {
			t.Fatalf("request %d: %v with %d outputs", r.ID, r.Status(), r.NumOutputTokens())
		}
	}
	st := h.s.Stats()
	if st.RecomputedPrefill == 0 {
		t.Fatal("recompute after preemption not counted")
	}
	// Each prompt position is computed here once, whatever was recomputed.
	if want := uint64(len(reqs) * 8); st.PromptComputedTokens != want {
		t.Fatalf("PromptComputedTokens %d, want %d (recomputed %d)", st.PromptComputedTokens, want, st.RecomputedPrefill)
	}
}

func TestPriorityPreemptsLowestPriority(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy = Priority
	h := newHarness(t, 6, cfg)
	a, b, c := newReq(1, 8, 3), newReq(2, 8, 3), newReq(3, 8, 3)
	a.Priority, b.Priority, c.Priority = 0, 5, 1
	for _, r := range []*Request{a, b, c} {
		h.s.Add(r)
	}
	h.step()
	h.step()
	if b.NumPreemptions != 1 || a.NumPreemptions != 0 || c.NumPreemptions != 0 {
		t.Fatalf("preemptions a=%d b=%d c=%d, want only b (priority 5)", a.NumPreemptions, b.NumPreemptions, c.NumPreemptions)
	}
}

func TestPriorityAdmissionOrder(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy = Priority
	cfg.MaxNumSeqs = 1
	h := newHarness(t, 64, cfg)
	lo, hi := newReq(1, 4, 1), newReq(2, 4, 1)
	lo.Priority, hi.Priority = 3, -1
	h.s.Add(lo)
	h.s.Add(hi)
	got, _ := h.step()
	if got[0][0] != 2 {
		t.Fatalf("admitted %v first, want request 2 (priority -1)", got)
	}
}

func TestPrefixHitSharesBlocks(t *testing.T) {
	h := newHarness(t, 64, DefaultConfig())
	a := newReq(1, 10, 1)
	h.s.Add(a)
	h.step()
	b := newReq(2, 10, 1)
	copy(b.Tokens, a.Tokens[:10])
	h.s.Add(b)
	got, _ := h.step()
	// Two full blocks (8 tokens) are cached; b computes the last 2.
	if got[0] != [2]int{2, 2} || b.NumCachedTokens != 8 {
		t.Fatalf("step %v cached %d, want [2 2] and 8", got, b.NumCachedTokens)
	}
	st := h.s.Stats()
	if st.PrefixHitTokens != 8 || st.PrefixQueryTokens != 20 {
		t.Fatalf("prefix stats %+v", st)
	}
	// a's 10 prompt positions and b's last 2: the hit is not computed.
	if st.PromptComputedTokens != 12 {
		t.Fatalf("PromptComputedTokens %d, want 12", st.PromptComputedTokens)
	}
}

func TestFullPromptHitStillComputesLastToken(t *testing.T) {
	h := newHarness(t, 64, DefaultConfig())
	a := newReq(1, 8, 1)
	h.s.Add(a)
	h.step()
	b := newReq(2, 8, 1)
	copy(b.Tokens, a.Tokens[:8])
	h.s.Add(b)
	got, _ := h.step()
	if got[0] != [2]int{2, 4} || b.NumCachedTokens != 4 {
		t.Fatalf("step %v cached %d: the last block must be recomputed to sample", got, b.NumCachedTokens)
	}
}

func TestFinishWaitingAndRunning(t *testing.T) {
	h := newHarness(t, 64, DefaultConfig())
	a, b := newReq(1, 4, 5), newReq(2, 4, 5)
	h.s.Add(a)
	h.step()
	h.s.Add(b)
	if !h.s.Finish(b, FinishedAborted) || h.s.NumWaiting() != 0 {
		t.Fatal("waiting request not removed")
	}
	if !h.s.Finish(a, FinishedAborted) || h.s.NumRunning() != 0 {
		t.Fatal("running request not removed")
	}
	if h.s.Finish(a, FinishedAborted) {
		t.Fatal("finishing twice reported a change")
	}
	h.pool.Release(a.Hold)
	if err := h.pool.Check(); err != nil || h.pool.NumHeld() != 0 {
		t.Fatalf("held %d: %v", h.pool.NumHeld(), err)
	}
}

func TestFinishDuringStepSkipsUpdate(t *testing.T) {
	h := newHarness(t, 64, DefaultConfig())
	a := newReq(1, 4, 5)
	h.s.Add(a)
	b := h.s.Schedule()
	if !a.InBatch() {
		t.Fatal("scheduled request not marked in batch")
	}
	h.s.Finish(a, FinishedAborted)
	fakeExec{}.Execute(b, &h.res)
	if outs := h.s.Update(&h.res); len(outs) != 0 {
		t.Fatalf("aborted request got outcomes %v", outs)
	}
	if a.InBatch() || a.NumOutputTokens() != 0 {
		t.Fatal("aborted request changed by its step")
	}
}

func BenchmarkSchedulerStep(b *testing.B) {
	for _, n := range []int{256, 1024} {
		b.Run("running="+itoa(n), func(b *testing.B) {
			const prompt, maxTokens = 64, 192
			pool := kvblock.New(kvblock.Config{NumBlocks: n * (prompt + maxTokens + 32) / 16, BlockSizeTokens: 16})
			cfg := DefaultConfig()
			cfg.MaxNumSeqs = n
			cfg.MaxNumBatchedTokens = n * prompt
			s := New(cfg, pool)
			reqs := make([]*Request, n)
			for i := range reqs {
				r := newReq(uint64(i+1), prompt, maxTokens)
				r.Tokens = append(make([]int32, 0, prompt+maxTokens+1), r.Tokens...)
				r.Hashes = make([]kvblock.Hash, 0, (prompt+maxTokens)/16+1)
				reqs[i] = r
				s.Add(r)
			}
			res := model.StepResult{Tokens: make([]int32, n)}
			step := func() {
				batch := s.Schedule()
				res.Tokens = res.Tokens[:len(batch.Seqs)]
				for i := range res.Tokens {
					res.Tokens[i] = int32(1 + i%100)
				}
				for _, o := range s.Update(&res) {
					if o.Finished.Finished() { // recycle: steady state
						r := o.Req
						pool.Release(r.Hold)
						r.Hold, r.NumComputed = 0, 0
						r.Tokens = r.Tokens[:prompt]
						r.admitted = false
						s.Add(r)
					}
				}
			}
			step() // prefill
			// Spread finishes so every step decodes about n requests.
			for i, r := range reqs {
				r.MaxTokens = 1 + i%maxTokens
			}
			for i := 0; i < maxTokens; i++ {
				step()
			}
			for _, r := range reqs {
				r.MaxTokens = maxTokens
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/req")
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for ; n > 0; n /= 10 {
		i--
		buf[i] = byte('0' + n%10)
	}
	return string(buf[i:])
}

// TestOnAdmitParksAndResumeKeepsPlace: OnAdmit is asked only about a
// request without blocks that fits; a parked request leaves the queue
// (Schedule goes on with the next), keeps its status, and Resume puts it
// back ahead of everything that arrived after it.
func TestOnAdmitParksAndResumeKeepsPlace(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxNumSeqs = 1
	h := newHarness(t, 64, cfg)
	var asked []uint64
	park := map[uint64]bool{2: true}
	h.s.OnAdmit = func(r *Request) Admission {
		asked = append(asked, r.ID)
		if park[r.ID] {
			delete(park, r.ID)
			return Park
		}
		return Admit
	}
	a, b, c, d := newReq(1, 4, 1), newReq(2, 4, 1), newReq(3, 4, 1), newReq(4, 4, 1)
	for _, r := range []*Request{a, b, c, d} {
		h.s.Add(r)
	}
	if got, _ := h.step(); len(got) != 1 || got[0][0] != 1 {
		t.Fatalf("step 1 ran %v, want request 1", got)
	}
	// b is parked, c goes in its place.
	if got, _ := h.step(); len(got) != 1 || got[0][0] != 3 {
		t.Fatalf("step 2 ran %v, want request 3", got)
	}
	if b.Status() != Waiting || h.s.NumWaiting() != 1 || b.Hold != 0 {
		t.Fatalf("parked request: %v, hold %v, %d waiting", b.Status(), b.Hold, h.s.NumWaiting())
	}
	e := newReq(5, 4, 1)
	h.s.Add(e)
	h.s.Resume(b)
	if got, _ := h.step(); len(got) != 1 || got[0][0] != 2 {
		t.Fatalf("step 3 ran %v, want the resumed request 2 ahead of 4 and 5", got)
	}
	for range 4 {
		h.step()
	}
	if want := []uint64{1, 2, 3, 2, 4, 5}; !slices.Equal(asked, want) {
		t.Fatalf("OnAdmit asked about %v, want %v", asked, want)
	}
	for _, r := range []*Request{a, b, c, d, e} {
		if r.Status() != FinishedLength {
			t.Fatalf("request %d: %v", r.ID, r.Status())
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Resume of a finished request did not panic")
			}
		}()
		h.s.Resume(b)
	}()
}

// TestOnAdmitNotAskedWithHoldOrWhenNotFitting: a request that already holds
// blocks (a pulled prefix) is admitted without asking, and the head that
// does not fit is not asked (nothing would be admitted anyway); a parked
// request can be finished while parked.
func TestOnAdmitNotAskedWithHoldOrWhenNotFitting(t *testing.T) {
	h := newHarness(t, 4, DefaultConfig())
	asked := 0
	h.s.OnAdmit = func(r *Request) Admission {
		asked++
		if r.ID == 3 {
			return Park
		}
		return Admit
	}
	big := newReq(1, 20, 1) // 5 blocks: never fits in 4
	h.s.Add(big)
	h.step()
	if asked != 0 {
		t.Fatal("asked about a request that does not fit")
	}
	h.s.Finish(big, FinishedAborted)
	held := newReq(2, 4, 1)
	held.Hold = h.pool.NewHold(kvblock.HoldRequest, 2)
	h.pool.Allocate(held.Hold, 1)
	held.NumComputed = 3
	h.s.Add(held)
	if got, _ := h.step(); len(got) != 1 || asked != 0 {
		t.Fatalf("ran %v, asked %d times", got, asked)
	}
	p := newReq(3, 4, 1)
	h.s.Add(p)
	h.step()
	if asked != 1 || h.s.NumWaiting() != 0 || p.Status() != Waiting {
		t.Fatalf("asked %d, %d waiting, %v", asked, h.s.NumWaiting(), p.Status())
	}
	if !h.s.Finish(p, FinishedAborted) || p.Status() != FinishedAborted {
		t.Fatal("parked request not finished")
	}
}

// TestOnAdmitDefer: a deferred head blocks the queue for the step (nothing
// behind it is admitted or asked about) and is asked again at the next.
func TestOnAdmitDefer(t *testing.T) {
	h := newHarness(t, 64, DefaultConfig())
	var asked []uint64
	defers := 2
	h.s.OnAdmit = func(r *Request) Admission {
		asked = append(asked, r.ID)
		if r.ID == 1 && defers > 0 {
			defers--
			return Defer
		}
		return Admit
	}
	a, b := newReq(1, 4, 1), newReq(2, 4, 1)
	h.s.Add(a)
	h.s.Add(b)
	for i := range 2 {
		if got, _ := h.step(); got != nil || h.s.NumWaiting() != 2 {
			t.Fatalf("deferral %d ran %v, %d waiting", i, got, h.s.NumWaiting())
		}
	}
	if got, _ := h.step(); len(got) != 2 || got[0][0] != 1 {
		t.Fatalf("after the deferrals ran %v", got)
	}
	if want := []uint64{1, 1, 1, 2}; !slices.Equal(asked, want) {
		t.Fatalf("asked %v, want %v", asked, want)
	}
}

// A decoder's pulled requests wait in the queue holding their prefix
// blocks. If the head of the queue needs blocks they hold and nothing runs,
// nothing would ever free one: the scheduler takes the blocks back from the
// last waiting request in queue order, and every request still ends.
func TestHeadStarvedByWaitingHoldsReclaims(t *testing.T) {
	h := newHarness(t, 6, DefaultConfig())
	head := newReq(1, 8, 2)
	h.s.Add(head) // first in the queue, no blocks yet
	var held []*Request
	for id := uint64(2); id <= 3; id++ {
		r := newReq(id, 12, 2)
		r.Hold = h.pool.NewHold(kvblock.HoldRequest, r.ID)
		if !h.pool.Allocate(r.Hold, 3) {
			t.Fatal("setup: no blocks")
		}
		r.NumComputed = 8 // as after a pull: the prefix is in the blocks
		h.s.Requeue(r)
		held = append(held, r)
	}
	if h.pool.NumAvailable() != 0 {
		t.Fatalf("setup: %d blocks available", h.pool.NumAvailable())
	}
	got, _ := h.step()
	if len(got) == 0 || got[0][0] != 1 {
		t.Fatalf("first step %v: the head was not admitted", got)
	}
	if st := h.s.Stats(); st.WaitingReclaims != 1 || held[1].NumPreemptions != 1 || held[0].NumPreemptions != 0 {
		t.Fatalf("reclaims %d, preemptions of 2 and 3: %d %d (want the newest, 3, reclaimed once)",
			st.WaitingReclaims, held[0].NumPreemptions, held[1].NumPreemptions)
	}
	for i := 0; i < 50 && h.s.NumRunning()+h.s.NumWaiting() > 0; i++ {
		h.step()
	}
	for _, r := range append([]*Request{head}, held...) {
		if r.Status() != FinishedLength {
			t.Errorf("request %d: %v", r.ID, r.Status())
		}
	}
	if h.pool.NumHeld() != 0 {
		t.Errorf("%d blocks still held", h.pool.NumHeld())
	}
}

// Waiting holds are not taken back while something runs: running requests
// will finish and free blocks.
func TestNoReclaimWhileRunning(t *testing.T) {
	h := newHarness(t, 5, DefaultConfig())
	run := newReq(1, 4, 4)
	h.s.Add(run)
	h.step() // run holds 1 block, then 2 while decoding
	r := newReq(2, 12, 2)
	r.Hold = h.pool.NewHold(kvblock.HoldRequest, r.ID)
	h.pool.Allocate(r.Hold, 3)
	r.NumComputed = 8
	big := newReq(3, 16, 2) // needs 4+ blocks: more than there are
	h.s.Add(big)
	h.s.Requeue(r)
	for i := 0; i < 3 && run.Status() == Running; i++ {
		h.step()
		if h.s.Stats().WaitingReclaims != 0 {
			t.Fatalf("a waiting hold was reclaimed while request 1 ran")
		}
	}
}

// TestMaxLoRAs: with MaxLoRAs 1, a request for a second adapter waits while
// the first adapter runs; the requests behind it (the running adapter's,
// the base model's) are admitted past it, and it keeps its place: it runs
// first once the first adapter's requests are done. Each batch runs at
// most one adapter.
func TestMaxLoRAs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxLoRAs = 1
	h := newHarness(t, 64, cfg)
	a := kvblock.Adapter{Name: "a", ID: 1, Digest: 1}
	b := kvblock.Adapter{Name: "b", ID: 2, Digest: 2}
	reqs := []*Request{newReq(1, 4, 2), newReq(2, 4, 3), newReq(3, 4, 2), newReq(4, 4, 2)}
	reqs[0].Extras.Adapter, reqs[1].Extras.Adapter, reqs[2].Extras.Adapter = a, b, a
	for _, r := range reqs {
		h.s.Add(r)
	}
	got, _ := h.step()
	if ids := []int{got[0][0], got[1][0], got[2][0]}; len(got) != 3 || !slices.Equal(ids, []int{1, 3, 4}) {
		t.Fatalf("first step ran %v, want requests 1, 3 (adapter a) and 4 (base) past 2 (adapter b)", got)
	}
	if h.s.NumWaiting() != 1 || reqs[1].Status() != Waiting {
		t.Fatalf("request 2 is %v with %d waiting", reqs[1].Status(), h.s.NumWaiting())
	}
	for reqs[0].Status() == Running || reqs[2].Status() == Running {
		got, _ = h.step()
		for _, g := range got {
			if g[0] == 2 && (reqs[0].Status() == Running || reqs[2].Status() == Running) {
				t.Fatal("adapter b ran beside adapter a")
			}
		}
	}
	for reqs[1].Status() == Waiting {
		if got, _ = h.step(); got == nil {
			t.Fatal("request 2 never ran after adapter a finished")
		}
	}
	if err := (Config{MaxNumSeqs: 1, MaxNumBatchedTokens: 1, MaxWaiting: 1, MaxLoRAs: -1}).Validate(); err == nil {
		t.Fatal("MaxLoRAs -1 validated")
	}
}

// A request whose MaxTokens (and MaxModelLen, here unlimited) would let it
// grow past what the whole pool can hold stops with FinishedLength at the
// pool's capacity in tokens (MaxLen). Before, it was preempted (it was the
// only victim) when it needed one block more than there are, and then
// waited at the head of the queue forever: nothing running could free the
// block it lacked, and every request behind it waited too (a decoder's
// hang in the simulator: kvlease sim --seed 1103 --blocks 48).
func TestGrowthStopsAtPoolCapacity(t *testing.T) {
	const blocks, bs = 8, 4
	h := newHarness(t, blocks, DefaultConfig())
	if h.s.MaxLen() != blocks*bs {
		t.Fatalf("MaxLen %d, want %d", h.s.MaxLen(), blocks*bs)
	}
	long := newReq(1, 10, 1000)
	h.s.Add(long)
	var behind *Request
	for i := 0; h.s.NumWaiting()+h.s.NumRunning() > 0; i++ {
		if behind == nil && len(long.Tokens) >= blocks*bs-2 {
			behind = newReq(2, 5, 3) // arrives as the long one nears the pool's end
			h.s.Add(behind)
		}
		if got, _ := h.step(); got == nil {
			t.Fatalf("step %d: nothing scheduled with %d waiting, %d running: request 1 is %v with %d tokens, more than %d blocks hold",
				i, h.s.NumWaiting(), h.s.NumRunning(), long.Status(), len(long.Tokens), blocks)
		}
	}
	if long.Status() != FinishedLength || len(long.Tokens) != blocks*bs {
		t.Fatalf("request 1: %v with %d tokens, want length with %d (the pool's capacity)", long.Status(), len(long.Tokens), blocks*bs)
	}
	if behind == nil || behind.Status() != FinishedLength || behind.NumOutputTokens() != 3 {
		t.Fatalf("request 2, behind it: %+v", behind)
	}
	if h.pool.NumHeld() != 0 {
		t.Fatalf("%d blocks still held", h.pool.NumHeld())
	}
}

// A step that preempts its only running request has nothing to run; it
// admits from the waiting queue rather than returning an empty batch. An
// empty batch tells the engine that nothing can run until something
// changes outside (a new request, an abort, blocks freed elsewhere), so
// it does not step again: before, the preempted request and a decoder's
// pulled request waiting with its blocks (MaxNumSeqs 1 kept it out) stayed
// queued forever, though the next Schedule would have reclaimed the
// waiting blocks and run the head (kvlease sim --seed 354 --blocks 40).
func TestPreemptionOfAllRunningAdmitsInTheSameStep(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxNumSeqs = 1
	h := newHarness(t, 10, cfg)
	grow := newReq(1, 10, 20) // needs a 7th block at 25 tokens
	h.s.Add(grow)
	h.step()
	pulled := newReq(2, 16, 2)
	pulled.Hold = h.pool.NewHold(kvblock.HoldRequest, pulled.ID)
	if !h.pool.Allocate(pulled.Hold, 4) {
		t.Fatal("setup: no blocks")
	}
	pulled.NumComputed = 15 // as after a pull
	h.s.Requeue(pulled)
	for i := 0; h.s.NumWaiting()+h.s.NumRunning() > 0; i++ {
		if got, _ := h.step(); got == nil {
			t.Fatalf("step %d: empty batch with %d waiting, %d running (request 1 %v with %d tokens, %d blocks available)",
				i, h.s.NumWaiting(), h.s.NumRunning(), grow.Status(), len(grow.Tokens), h.pool.NumAvailable())
		}
	}
	if grow.NumPreemptions != 1 || grow.Status() != FinishedLength || pulled.Status() != FinishedLength {
		t.Fatalf("request 1 %v after %d preemptions, request 2 %v", grow.Status(), grow.NumPreemptions, pulled.Status())
	}
	if h.pool.NumHeld() != 0 {
		t.Fatalf("%d blocks still held", h.pool.NumHeld())
	}
}
