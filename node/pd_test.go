package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// These tests run real nodes over real TCP on loopback: a prefill node P
// and a decode node D, with the simulated model's zero-latency profile,
// whose KV bytes are a function of the token prefix, so a block that is
// lost, stale or corrupted in transit changes D's tokens.

// pdWait bounds every wait: far above what loopback needs, it only fires
// on a hang.
const pdWait = 10 * time.Second

const pdModelSeed = 7

var pdSecret = []byte("pd test cluster secret")

func zeroProfile(t *testing.T) synth.Profile {
	t.Helper()
	p, ok := synth.LookupProfile("zero")
	if !ok {
		t.Fatal("no zero profile")
	}
	return p
}

// pdConfig is a core configuration for role with transfer config xc (nil:
// single engine).
func pdConfig(t *testing.T, role engine.Role, id string, xc *xfer.Config) engine.Config {
	prof := zeroProfile(t)
	sc := sched.DefaultConfig()
	sc.MaxNumSeqs = 8
	sc.MaxNumBatchedTokens = 2048
	return engine.Config{
		Pool:        kvblock.Config{NumBlocks: 512, BlockSizeTokens: 16, BytesPerToken: prof.BytesPerToken()},
		Sched:       sc,
		MaxModelLen: prof.MaxModelLen, VocabSize: prof.VocabSize, EOS: prof.EOS,
		RecentFinished: 64,
		Role:           role, EngineID: id, Transfer: xc, Secret: pdSecret,
	}
}

// shortLease is a lease configuration scaled so the tests take
// milliseconds: heartbeat every 100 ms, peer grace 40 ms.
func shortLease() xfer.Config {
	return xfer.DefaultConfig(xfer.PolicyLease).WithLease(600 * time.Millisecond)
}

type release struct {
	lease  wire.LeaseID
	reason wire.Reason
}

// pdNode is a running node with its transport and, on P, its lease releases.
type pdNode struct {
	*Node
	tr       *tcp.Transport
	released chan release
	cancel   context.CancelFunc
}

// startPD starts a node of role. exec nil means the simulated model on the
// node's pool; mutate, if set, adjusts the core configuration.
func startPD(t *testing.T, role engine.Role, id string, xc xfer.Config, exec model.Executor, mutate func(*engine.Config)) *pdNode {
	t.Helper()
	return startPDWith(t, role, id, xc, exec, mutate, Config{})
}

// startPDWith is startPD with node options (its Transport is set here).
func startPDWith(t *testing.T, role engine.Role, id string, xc xfer.Config, exec model.Executor, mutate func(*engine.Config), ncfg Config) *pdNode {
	t.Helper()
	return startPDExec(t, role, id, xc, func(*engine.Core) model.Executor { return exec }, mutate, ncfg)
}

// startPDExec is startPDWith with the executor made on the node's core by
// mk (which returns nil for the simulated model).
func startPDExec(t *testing.T, role engine.Role, id string, xc xfer.Config, mk func(*engine.Core) model.Executor, mutate func(*engine.Config), ncfg Config) *pdNode {
	t.Helper()
	cfg := pdConfig(t, role, id, &xc)
	if mutate != nil {
		mutate(&cfg)
	}
	core := engine.NewCore(cfg, rand.New(rand.NewPCG(uint64(len(id)), 99)))
	exec := mk(core)
	if exec == nil {
		exec = synth.New(zeroProfile(t), core.Pool(), pdModelSeed)
	}
	pn := &pdNode{released: make(chan release, 64)}
	if p := core.Producer(); p != nil {
		p.OnRelease(func(_ clock.Instant, l wire.LeaseID, r wire.Reason) {
			select {
			case pn.released <- release{l, r}:
			default:
				t.Errorf("%s: more releases than the test expects", id)
			}
		})
	}
	tr, err := tcp.New(tcp.Config{KeepaliveInterval: 50 * time.Millisecond, IdleTimeout: time.Second, Secret: pdSecret})
	if err != nil {
		t.Fatal(err)
	}
	if role != engine.RoleDecode {
		if err := tr.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	pn.tr = tr
	ncfg.Transport = tr
	pn.Node = New(core, exec, ncfg)
	ctx, cancel := context.WithCancel(context.Background())
	pn.cancel = cancel
	go func() {
		if err := pn.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", id, err)
		}
	}()
	t.Cleanup(func() { cancel(); <-pn.Done() })
	return pn
}

// waitFor polls cond until it holds, failing the test after pdWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pdWait)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// nextRelease waits for P's next lease release.
func (pn *pdNode) nextRelease(t *testing.T) release {
	t.Helper()
	select {
	case r := <-pn.released:
		return r
	case <-time.After(pdWait):
		t.Fatalf("no lease released within %v", pdWait)
		return release{}
	}
}

// prefill runs a remote-decode prefill on P and returns the lease grant.
func prefill(t *testing.T, p *pdNode, id string, prompt []int32) *xfer.Grant {
	t.Helper()
	s, res := p.Submit(&engine.Request{ID: id, Prompt: prompt, MaxTokens: 1, RemoteDecode: true})
	if res != engine.Accepted {
		t.Fatalf("P refused %s: %v", id, res)
	}
	outs := drain(t, s)
	last := outs[len(outs)-1]
	if last.Status != sched.FinishedLength || last.Grant == nil {
		t.Fatalf("P's prefill of %s ended %+v, want finished with a grant", id, last)
	}
	p.Delivered(id, true)
	return last.Grant
}

// reference runs req on a single engine, driven step by step, and returns
// its tokens.
func reference(t *testing.T, req *engine.Request) []int32 {
	t.Helper()
	core := engine.NewCore(pdConfig(t, engine.RoleBoth, "", nil), rand.New(rand.NewPCG(5, 5)))
	exec := synth.New(zeroProfile(t), core.Pool(), pdModelSeed)
	r := *req
	r.Remote = nil
	if res := core.Add(0, &r); res != engine.Accepted {
		t.Fatalf("reference Add: %v", res)
	}
	var toks []int32
	var res model.StepResult
	for range 100000 {
		rd := core.Step(0)
		for _, o := range rd.Outputs {
			if o.Token != model.NoToken {
				toks = append(toks, o.Token)
			}
			if o.Finished {
				return toks
			}
		}
		if rd.Batch != nil {
			exec.Execute(rd.Batch, &res)
			core.Complete(0, &res)
		}
	}
	t.Fatal("reference run did not finish")
	return nil
}

func pdPrompt(seed uint64, n int) []int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(r.IntN(256))
	}
	return p
}

// pdNoLeaks fails the test if goroutines started during it outlive it
// (cleanups registered later run first: nodes and transports are down).
func pdNoLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		waitFor(t, "the goroutines of nodes and transports to end", func() bool { return runtime.NumGoroutine() <= base })
	})
}

// TestPDTransferMatchesSingleEngine: P prefills and leases, D pulls the
// blocks over TCP and decodes; D's tokens are the single-engine run's, and
// P ends with no lease hold.
func TestPDTransferMatchesSingleEngine(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(5 * time.Second)
	p := startPD(t, engine.RolePrefill, "p0", xc, nil, nil)
	d := startPD(t, engine.RoleDecode, "d0", xc, nil, nil)
	ep, ok := p.TransferEndpoint()
	if !ok || ep.EngineID != "p0" || ep.Host != "127.0.0.1" || ep.Addr() != string(p.tr.Addr()) {
		t.Fatalf("P's endpoint %+v, %v; listener %s", ep, ok, p.tr.Addr())
	}
	if _, ok := d.TransferEndpoint(); ok {
		t.Error("a decode node advertises a transfer endpoint")
	}

	reqs := []*engine.Request{
		{ID: "short", Prompt: pdPrompt(1, 20), MaxTokens: 12, IgnoreEOS: true},
		{ID: "exact", Prompt: pdPrompt(2, 64), MaxTokens: 8, IgnoreEOS: true},
		{ID: "long", Prompt: pdPrompt(3, 1500), MaxTokens: 16, IgnoreEOS: true},
		{ID: "seeded", Prompt: pdPrompt(4, 300), MaxTokens: 16, IgnoreEOS: true,
			Sampling: model.Sampling{Temperature: 0.9, TopP: 0.95, Seed: 42}, SeedSet: true},
	}
	var wg sync.WaitGroup
	for _, req := range reqs {
		wg.Go(func() {
			g := prefill(t, p, req.ID, req.Prompt)
			if g.NumTokens != len(req.Prompt) {
				t.Errorf("%s: grant of %d tokens for a %d-token prompt", req.ID, g.NumTokens, len(req.Prompt))
			}
			in := *req
			in.Remote = ep.Remote(g)
			s, res := d.Submit(&in)
			if res != engine.Accepted {
				t.Errorf("D refused %s: %v", req.ID, res)
				return
			}
			outs := drain(t, s)
			var toks []int32
			for _, o := range outs {
				if o.Token != model.NoToken {
					toks = append(toks, o.Token)
				}
			}
			if !outs[0].Pulled || outs[0].Fallback != 0 {
				t.Errorf("%s: first output %+v, want the remote prefix pulled", req.ID, outs[0])
			}
			last := outs[len(outs)-1]
			if last.Status != sched.FinishedLength || last.Usage.CachedTokens != len(req.Prompt) {
				t.Errorf("%s: D ended %+v", req.ID, last)
			}
			if want := reference(t, req); !slices.Equal(toks, want) {
				t.Errorf("%s: D's tokens differ from the single-engine run:\n got %v\nwant %v", req.ID, toks, want)
			}
		})
	}
	wg.Wait()
	for range reqs {
		if r := p.nextRelease(t); r.reason != wire.ReasonReadDone {
			t.Errorf("lease %d released with %v, want read_done", r.lease, r.reason)
		}
	}
	waitFor(t, "P to drop every lease hold", func() bool {
		st := p.Stats()
		return st.Pool.Held == 0 && st.Producer.Active == 0 && st.ReadStreams == 0
	})
	st := p.Stats()
	if st.Producer.ReadsServed != uint64(len(reqs)) || st.Producer.BytesServed == 0 {
		t.Errorf("P served %d reads, %d bytes; want %d reads", st.Producer.ReadsServed, st.Producer.BytesServed, len(reqs))
	}
	ds := d.Stats()
	if ds.Consumer.Pulls != uint64(len(reqs)) || ds.Pool.Held != 0 {
		t.Errorf("D: %d pulls, %d blocks held; want %d pulls, none held", ds.Consumer.Pulls, ds.Pool.Held, len(reqs))
	}
}

// TestPDDecodeKilledReleasesAfterGrace: D admits a request, renews its
// lease (binding it to D's session) and dies; P releases the lease with
// reason peer_lost after the grace, long before it would expire.
func TestPDDecodeKilledReleasesAfterGrace(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(30 * time.Second)
	xc.HeartbeatInterval = 100 * time.Millisecond
	xc.PeerGrace = 100 * time.Millisecond
	xc.RetryInterval = 50 * time.Millisecond
	// Every heartbeat extends the lease, so D renews it at each (D's
	// heartbeats name only the leases a renewal extends).
	xc.LeaseExtension = xc.LeaseDuration
	p := startPD(t, engine.RolePrefill, "p0", xc, nil, nil)
	d := startPD(t, engine.RoleDecode, "d0", xc, stepExec{time.Hour}, func(c *engine.Config) { c.Sched.MaxNumSeqs = 1 })
	ep, _ := p.TransferEndpoint()

	// A local request takes D's only slot for an hour.
	if _, res := d.Submit(&engine.Request{ID: "hog", Prompt: []int32{1, 2, 3}, MaxTokens: 5}); res != engine.Accepted {
		t.Fatalf("hog: %v", res)
	}
	prompt := pdPrompt(9, 100)
	g := prefill(t, p, "r", prompt)
	if _, res := d.Submit(&engine.Request{ID: "r", Prompt: prompt, MaxTokens: 4, Remote: ep.Remote(g)}); res != engine.Accepted {
		t.Fatalf("D refused r: %v", res)
	}
	// Two heartbeats: the first RENEW reached P (loopback) before D dies,
	// and P handles it before the connection's end.
	waitFor(t, "D to renew the lease twice", func() bool { return d.Stats().Consumer.RenewsSent >= 2 })
	select {
	case r := <-p.released:
		t.Fatalf("lease released before D died: %v", r.reason)
	default:
	}
	if st := p.Stats(); st.Pool.Held == 0 || st.Producer.Active != 1 {
		t.Fatalf("P before D dies: %d blocks held, %d leases", st.Pool.Held, st.Producer.Active)
	}
	d.tr.Shutdown() // D is killed: its connections reset
	if r := p.nextRelease(t); r.lease != g.Lease || r.reason != wire.ReasonPeerLost {
		t.Fatalf("lease %d released with %v, want lease %d peer_lost", r.lease, r.reason, g.Lease)
	}
	waitFor(t, "P to drop the lease hold", func() bool {
		st := p.Stats()
		return st.Pool.Held == 0 && st.Producer.Active == 0
	})
}

// TestPDRejectionReleasesAtOnce: D refuses a request that carries a remote
// prefix; it tells P (RELEASE rejected) and P frees the blocks without
// waiting for the lease to expire.
func TestPDRejectionReleasesAtOnce(t *testing.T) {
	pdNoLeaks(t)
	xc := xfer.DefaultConfig(xfer.PolicyLease).WithLease(30 * time.Second)
	p := startPD(t, engine.RolePrefill, "p0", xc, nil, nil)
	d := startPD(t, engine.RoleDecode, "d0", xc, nil, nil)
	ep, _ := p.TransferEndpoint()

	prompt := pdPrompt(11, 40)
	g := prefill(t, p, "r", prompt)
	tooLong := zeroProfile(t).MaxModelLen // prompt + max_tokens > max_model_len
	if _, res := d.Submit(&engine.Request{ID: "r", Prompt: prompt, MaxTokens: tooLong, Remote: ep.Remote(g)}); res != engine.RejectedTooLong {
		t.Fatalf("D's answer %v, want too long", res)
	}
	if r := p.nextRelease(t); r.lease != g.Lease || r.reason != wire.ReasonRejected {
		t.Fatalf("lease %d released with %v, want lease %d rejected", r.lease, r.reason, g.Lease)
	}
	waitFor(t, "P to drop the lease hold", func() bool {
		st := p.Stats()
		return st.Pool.Held == 0 && st.Producer.Active == 0
	})
	if n := d.Stats().Consumer.ReleasesSent[wire.ReasonRejected]; n == 0 {
		t.Error("D counted no RELEASE(rejected)")
	}
}

// TestPDUnreachablePrefillFallsBack: D is given a lease on a P nobody
// listens at; it cannot dial and recomputes the prompt itself, producing
// the single-engine tokens.
func TestPDUnreachablePrefillFallsBack(t *testing.T) {
	pdNoLeaks(t)
	xc := shortLease()
	d := startPD(t, engine.RoleDecode, "d0", xc, nil, nil)
	dead, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr()
	dead.Shutdown() // nobody listens there any more
	prompt := pdPrompt(13, 50)
	req := &engine.Request{ID: "r", Prompt: prompt, MaxTokens: 6, IgnoreEOS: true}
	in := *req
	in.Remote = &xfer.Remote{EngineID: "p0", Addr: string(addr), Lease: 1, Token: wire.Token{1},
		NumBlocks: 4, NumTokens: 50, ExpiresIn: 600 * time.Millisecond}
	s, res := d.Submit(&in)
	if res != engine.Accepted {
		t.Fatalf("D refused r: %v", res)
	}
	outs := drain(t, s)
	if outs[0].Pulled || outs[0].Fallback == 0 {
		t.Errorf("first output %+v, want a fallback", outs[0])
	}
	var toks []int32
	for _, o := range outs {
		if o.Token != model.NoToken {
			toks = append(toks, o.Token)
		}
	}
	if want := reference(t, req); !slices.Equal(toks, want) {
		t.Errorf("fallback tokens %v, want %v", toks, want)
	}
}

func TestTransferEndpoint(t *testing.T) {
	cases := []struct {
		listen, advertise string
		want              TransferEndpoint
		ok                bool
	}{
		{"127.0.0.1:9000", "", TransferEndpoint{"p", "127.0.0.1", 9000}, true},
		{"[::1]:9000", "", TransferEndpoint{"p", "::1", 9000}, true},
		{"0.0.0.0:9000", "", TransferEndpoint{}, false},
		{"0.0.0.0:9000", "p0.cluster.local", TransferEndpoint{"p", "p0.cluster.local", 9000}, true},
		{"[::]:9000", "10.0.0.7", TransferEndpoint{"p", "10.0.0.7", 9000}, true},
		{"", "", TransferEndpoint{}, false},
		{"host:notaport", "", TransferEndpoint{}, false},
	}
	for _, c := range cases {
		got, ok := endpointOf("p", transportAddr(c.listen), c.advertise)
		if ok != c.ok || got != c.want {
			t.Errorf("endpointOf(%q, %q) = %+v, %v; want %+v, %v", c.listen, c.advertise, got, ok, c.want, c.ok)
		}
	}
	if got := (TransferEndpoint{Host: "::1", Port: 9}).Addr(); got != "[::1]:9" {
		t.Errorf("Addr of an IPv6 endpoint: %q", got)
	}
	g := &xfer.Grant{Lease: 3, Token: wire.Token{9}, ExpiresIn: time.Second, BlockIDs: make([]kvblock.BlockID, 2), NumTokens: 20}
	r := TransferEndpoint{"p", "h", 1}.Remote(g)
	want := xfer.Remote{EngineID: "p", Addr: "h:1", Lease: 3, Token: wire.Token{9}, NumBlocks: 2, NumTokens: 20, ExpiresIn: time.Second}
	if *r != want {
		t.Errorf("Remote = %+v, want %+v", *r, want)
	}
}

func TestNewNodeNeedsTransportForTransfer(t *testing.T) {
	xc := shortLease()
	core := engine.NewCore(pdConfig(t, engine.RolePrefill, "p0", &xc), rand.New(rand.NewPCG(1, 1)))
	defer func() {
		if r := recover(); r == nil || fmt.Sprint(r) == "" {
			t.Error("New without a transport for a transfer core did not panic")
		}
	}()
	New(core, stepExec{}, Config{})
}

func transportAddr(s string) transport.Addr { return transport.Addr(s) }
