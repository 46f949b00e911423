package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/sched"
)

// TestLoopAsyncStep: with LoopConfig.Async a Turn hands its batch to the
// driver (Turn.Execute) and the step stays in flight until StepDone,
// whatever the time: turns meanwhile schedule nothing, admit requests, and
// an abort of a request in the running step finishes it at once while its
// blocks stay held (CheckStep passes) until the step ends. Shutdown with
// the step still executing panics: the driver must wait for it.
func TestLoopAsyncStep(t *testing.T) {
	core := NewCore(Config{
		Pool:        kvblock.Config{NumBlocks: 64, BlockSizeTokens: 4},
		Sched:       sched.DefaultConfig(),
		MaxModelLen: 128, VocabSize: 257, EOS: 256, RecentFinished: 16,
	}, rand.New(rand.NewPCG(1, 1)))
	l := NewLoop(core, stepExec{}, LoopConfig{Async: true})
	add := func(id string) {
		if res, _ := l.Add(0, &Request{ID: id, Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, MaxTokens: 3, IgnoreEOS: true}); res != Accepted {
			t.Fatalf("Add %s: %v", id, res)
		}
	}
	add("a")
	tn := l.Turn(0)
	if !tn.Execute || tn.Batch == nil || len(tn.Batch.Seqs) != 1 {
		t.Fatalf("first turn %+v: want a batch to execute", tn)
	}
	b, aReq := tn.Batch, tn.Batch.Seqs[0].Req
	if w := l.NextWake(); w != clock.Never {
		t.Fatalf("NextWake %v with only an asynchronous step in flight: its end is an input", w)
	}
	add("b")
	for now := clock.Instant(1); now < 5; now++ {
		if tn := l.Turn(now); tn.Batch != nil || tn.Execute {
			t.Fatalf("turn at %v started a step while one executes", now)
		}
	}
	if r := l.Abort(5, "a"); r != Aborted {
		t.Fatalf("abort of the running request: %v", r)
	}
	tn = l.Turn(5)
	if len(tn.Outputs) != 1 || !tn.Outputs[0].Finished || tn.Outputs[0].Status != sched.FinishedAborted {
		t.Fatalf("outputs after the abort %+v, want a's finished output", tn.Outputs)
	}
	if held := core.Pool().NumHeld(); held != 3 {
		t.Fatalf("%d blocks held during the step; the aborted request's 3 must stay", held)
	}
	if err := l.CheckStep(); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Shutdown with an asynchronous step executing did not panic")
			}
		}()
		l.Shutdown(6, false)
	}()
	var res model.StepResult
	stepExec{}.Execute(b, &res)
	l.StepDone(7, &res)
	if held := core.Pool().NumHeld(); held != 0 {
		t.Fatalf("%d blocks held after the aborted request's step ended", held)
	}
	if tn := l.Turn(7); !tn.Execute || tn.Batch == nil || tn.Batch.Seqs[0].Req == aReq {
		t.Fatalf("turn after StepDone %+v: want b's step", tn)
	}
}
