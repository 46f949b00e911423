package node

import (
	"slices"
	"sync"
	"testing"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/wire"
)

// gatedExec is the simulated model, except that a step whose batch holds
// a request gated names blocks in Execute until the test opens the gate:
// a step that computes for as long as the test wants, as a real model's
// long prefill does.
type gatedExec struct {
	inner *synth.Executor
	gated func(b *model.Batch) bool
	// entered receives a value when a gated step starts; open lets it
	// finish.
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

// release opens the gate for good.
func (e *gatedExec) release() { e.once.Do(func() { close(e.open) }) }

func newGatedExec(inner *synth.Executor, gated func(*model.Batch) bool) *gatedExec {
	return &gatedExec{inner: inner, gated: gated, entered: make(chan struct{}, 16), open: make(chan struct{})}
}

func (e *gatedExec) Execute(b *model.Batch, out *model.StepResult) {
	if e.gated(b) {
		e.entered <- struct{}{}
		<-e.open
	}
	e.inner.Execute(b, out)
}

// hasSeqOf reports whether b computes a sequence of a request whose prompt
// has n tokens.
func hasSeqOf(n int) func(*model.Batch) bool {
	return func(b *model.Batch) bool {
		for i := range b.Seqs {
			if b.Seqs[i].NumPromptTokens == n {
				return true
			}
		}
		return false
	}
}

// TestS31PDAsyncStepKeepsServingLeases (issue 29): P's model computes a long
// prefill, in a step that lasts longer than a lease, while D — its only
// seat taken by a request whose own step also lasts — holds lease A in its
// queue and renews it. P's loop answers every RENEW during its step, so A
// never expires; once D admits A it pulls A's blocks from P, still in the
// same step, and decodes exactly the single-engine tokens. An abort of the
// long prefill during its step is answered at once; its blocks stay held
// until the step ends.
func TestS31PDAsyncStepKeepsServingLeases(t *testing.T) {
	pdNoLeaks(t)
	// Leases of 600 ms (shortLease): heartbeat 100 ms, extension 400 ms.
	const longLen, hogLen = 900, 7
	var pExec, dExec *gatedExec
	p := startGated(t, engine.RolePrefill, "p0", &pExec, hasSeqOf(longLen), nil)
	d := startGated(t, engine.RoleDecode, "d0", &dExec, hasSeqOf(hogLen), func(c *engine.Config) { c.Sched.MaxNumSeqs = 1 })
	// A failed test lets the steps end, so the nodes can shut down.
	t.Cleanup(func() { pExec.release(); dExec.release() })
	ep, _ := p.TransferEndpoint()

	reqA := &engine.Request{ID: "a", Prompt: pdPrompt(11, 100), MaxTokens: 6, IgnoreEOS: true}
	g := prefill(t, p, "a", reqA.Prompt)

	// D's seat: a local request whose first step blocks.
	hog, res := d.Submit(&engine.Request{ID: "hog", Prompt: pdPrompt(12, hogLen), MaxTokens: 2, IgnoreEOS: true})
	if res != engine.Accepted {
		t.Fatalf("D refused hog: %v", res)
	}
	<-dExec.entered

	// P's long prefill: its step blocks until the end of the test.
	long, res := p.Submit(&engine.Request{ID: "long", Prompt: pdPrompt(13, longLen), MaxTokens: 1, RemoteDecode: true})
	if res != engine.Accepted {
		t.Fatalf("P refused long: %v", res)
	}
	<-pExec.entered

	in := *reqA
	in.Remote = ep.Remote(g)
	sa, res := d.Submit(&in)
	if res != engine.Accepted {
		t.Fatalf("D refused a: %v", res)
	}
	// Six renewals, one every other heartbeat once A is within 200 ms of
	// its end: D renewed A for over 1.2 s, twice the lease, while P's
	// step ran (and within the max queue wait, four leases).
	renews := d.Stats().Consumer.RenewsSent
	waitFor(t, "D to renew lease A six times", func() bool { return d.Stats().Consumer.RenewsSent >= renews+6 })
	if st := p.Stats(); st.Producer.Active != 1 || len(st.Producer.Released) != 0 {
		t.Fatalf("P during its step: %d leases, released %v; want lease A alone, live", st.Producer.Active, st.Producer.Released)
	}

	// The abort of P's running request is answered during the step; its
	// finished output comes at once, its blocks stay held by the step.
	if r := p.Abort("long"); r != engine.Aborted {
		t.Fatalf("abort of the running prefill: %v", r)
	}
	if outs := drain(t, long); outs[len(outs)-1].Status != sched.FinishedAborted {
		t.Fatalf("aborted prefill ended %+v", outs[len(outs)-1])
	}
	if held := p.Stats().Pool.Held; held < longLen/16 {
		t.Fatalf("P holds %d blocks during the aborted step; its %d blocks must stay held", held, longLen/16)
	}

	// D's seat frees: A is admitted, pulled from P (still in its step)
	// and decoded.
	dExec.release()
	drain(t, hog)
	outs := drain(t, sa)
	var toks []int32
	for _, o := range outs {
		if o.Token != model.NoToken {
			toks = append(toks, o.Token)
		}
	}
	if !outs[0].Pulled || outs[0].Fallback != 0 {
		t.Fatalf("a: first output %+v, want the remote prefix pulled", outs[0])
	}
	if want := reference(t, reqA); !slices.Equal(toks, want) {
		t.Fatalf("a: D's tokens %v, the single engine's %v", toks, want)
	}
	if r := p.nextRelease(t); r.lease != g.Lease || r.reason != wire.ReasonReadDone {
		t.Fatalf("lease A released %+v, want read_done", r)
	}
	select {
	case <-pExec.open:
		t.Fatal("P's step ended before the test let it")
	default:
	}

	pExec.release()
	waitFor(t, "P to free the aborted step's blocks", func() bool {
		st := p.Stats()
		return st.Pool.Held == 0 && st.Requests == 0
	})
}

// startGated starts a node of role whose executor is the simulated model
// behind a gate (gatedExec), run off the loop (AsyncExecute).
func startGated(t *testing.T, role engine.Role, id string, exec **gatedExec, gated func(*model.Batch) bool, mutate func(*engine.Config)) *pdNode {
	t.Helper()
	return startPDExec(t, role, id, shortLease(), func(core *engine.Core) model.Executor {
		*exec = newGatedExec(synth.New(zeroProfile(t), core.Pool(), pdModelSeed), gated)
		return *exec
	}, mutate, Config{AsyncExecute: true})
}
