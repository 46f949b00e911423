package sched

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// Every sequence of every batch describes its own request, while
// requests finish, new ones take their places in the batch and a small
// pool preempts and readmits: the batch keeps a request's fixed fields
// from one step to the next only while the request keeps its place.
func TestBatchSeqsDescribeTheirRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := DefaultConfig()
	cfg.MaxNumBatchedTokens = 24
	h := newHarness(t, 12, cfg)
	byID := map[uint64]*Request{}
	next := uint64(1)
	add := func() {
		r := newReq(next, 2+rng.IntN(10), 1+rng.IntN(12))
		r.Sampling = model.Sampling{Temperature: float64(next), Seed: next, TopK: int(next % 7),
			LogitBias: []model.TokenBias{{Token: int32(next), Bias: 1}}}
		r.Extras.Adapter = kvblock.Adapter{Name: "a", ID: int32(next % 3), Digest: next % 3}
		byID[next] = r
		next++
		h.s.Add(r)
	}
	for step := 0; step < 400; step++ {
		for h.s.NumWaiting() < 3 && next < 120 {
			add()
		}
		b := h.s.Schedule()
		for i := range b.Seqs {
			s := &b.Seqs[i]
			r := byID[s.Req]
			if r == nil {
				t.Fatalf("step %d: seq %d is of unknown request %d", step, i, s.Req)
			}
			if !reflect.DeepEqual(s.Sampling, r.Sampling) || s.NumPromptTokens != r.NumPromptTokens ||
				s.Adapter != r.Extras.Adapter || s.Start != r.NumComputed || s.Mask != nil ||
				len(s.Tokens) != len(r.Tokens) || s.Sample != (s.Start+s.Count == len(r.Tokens)) {
				t.Fatalf("step %d: seq %d %+v does not describe request %d", step, i, *s, s.Req)
			}
		}
		if len(b.Seqs) == 0 {
			if next >= 120 {
				if h.s.Stats().Preemptions == 0 {
					t.Error("no preemption: the pool is too large for the test")
				}
				return
			}
			continue
		}
		b.Seqs[0].Mask = []uint64{1} // an engine masks a constrained seq; the next step must not see it
		fakeExec{}.Execute(b, &h.res)
		for _, o := range h.s.Update(&h.res) {
			if o.Finished.Finished() {
				h.pool.Release(o.Req.Hold)
				o.Req.Hold = 0
			}
		}
	}
	t.Fatal("the requests did not finish in 400 steps")
}
