package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	msim "github.com/kvlease/kvlease/model/sim"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/transport/memnet"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// Spec describes a simulated cluster.
type Spec struct {
	Seed      uint64
	Profile   msim.Profile
	ModelSeed uint64
	Transfer  xfer.Config
	Prefill   int // number of P engines
	Decode    int // number of D engines
	// Blocks is each engine's pool capacity; BlockSize its block size.
	Blocks    int
	BlockSize int
	// DigestOnly runs pools without KV bytes (large simulations).
	DigestOnly bool
	Sched      sched.Config
	// DecodeSched overrides Sched on D engines when MaxNumSeqs > 0
	// (congestion).
	DecodeSched sched.Config
	Faults      memnet.Faults
	// ReadBandwidth is P's read streaming speed in bytes per second (0:
	// instant).
	ReadBandwidth float64
	// HTTPDelay is the one-way latency between the proxy and an engine.
	HTTPDelay time.Duration
}

// DefaultSpec is a small 1P1D cluster on the tiny profile with the lease
// policy.
func DefaultSpec() Spec {
	p, _ := msim.LookupProfile("tiny")
	sc := sched.DefaultConfig()
	sc.MaxNumSeqs = 32
	sc.MaxNumBatchedTokens = 2048
	sc.MaxWaiting = 256
	return Spec{
		Seed: 1, Profile: p, ModelSeed: 7,
		Transfer: xfer.DefaultConfig(xfer.PolicyLease).WithLease(3 * time.Second),
		Prefill:  1, Decode: 1, Blocks: 512, BlockSize: 16,
		Sched:         sc,
		Faults:        memnet.Faults{MinDelay: 100 * time.Microsecond, MaxDelay: 300 * time.Microsecond, CloseDetectDelay: 50 * time.Millisecond},
		ReadBandwidth: 2e9,
		HTTPDelay:     200 * time.Microsecond,
	}
}

// Node is one simulated engine.
type Node struct {
	Name transport.Addr
	Role engine.Role
	Core *engine.Core
	exec *msim.Executor

	busy      bool
	busyUntil clock.Instant
	res       model.StepResult

	Crashed bool
	// Hung: the node stops stepping while its connections stay open.
	Hung bool

	// Released counts P's lease releases by reason, over the node's life
	// (restarts included).
	Released map[wire.Reason]int
	Restarts int
}

// Req is one client request as the simulated proxy sees it.
type Req struct {
	ID        string
	Prompt    []int32
	MaxTokens int
	Sampling  model.Sampling
	SeedSet   bool
	IgnoreEOS bool
	// Local sends the request straight to a decode engine with no P leg.
	Local bool

	P, D *Node

	Tokens     []int32 // received from D
	Status     sched.Status
	Done       bool
	Error      string // a rejection or failure the client saw
	Pulled     bool
	Fallback   string
	Grant      *xfer.Grant
	clientGone bool // the client disconnected
	atD        bool
	delivered  bool
	SentAt     clock.Instant
	FirstAt    clock.Instant
	DoneAt     clock.Instant
}

// Cluster is a deterministic P/D cluster: engines, a network and a proxy,
// all in one goroutine on a virtual clock. Not safe for concurrent use.
type Cluster struct {
	Spec Spec
	Now  clock.Instant
	Net  *memnet.Net

	Nodes    []*Node
	byName   map[transport.Addr]*Node
	Requests map[string]*Req
	order    []string

	rng      *rand.Rand
	secret   []byte
	events   evHeap
	evSeq    uint64
	deliv    []memnet.Delivery
	dialing  map[transport.ConnID]string
	readsDue int

	// Violations are invariant failures seen so far.
	Violations []string
	// OnInstant, when set, runs after every instant's work (extra checks).
	OnInstant func(c *Cluster)
}

// New builds a cluster from spec. Engine names are "p0".."pN", "d0"...
func New(spec Spec) *Cluster {
	c := &Cluster{
		Spec:     spec,
		rng:      rand.New(rand.NewPCG(spec.Seed, 0x6b766c)),
		byName:   map[transport.Addr]*Node{},
		Requests: map[string]*Req{},
		dialing:  map[transport.ConnID]string{},
		secret:   []byte("simulated cluster secret"),
	}
	c.Net = memnet.New(rand.New(rand.NewPCG(spec.Seed, 0x6e6574)), spec.Faults)
	for i := 0; i < spec.Prefill; i++ {
		c.addNode(transport.Addr(fmt.Sprintf("p%d", i)), engine.RolePrefill)
	}
	for i := 0; i < spec.Decode; i++ {
		c.addNode(transport.Addr(fmt.Sprintf("d%d", i)), engine.RoleDecode)
	}
	return c
}

func (c *Cluster) addNode(name transport.Addr, role engine.Role) {
	n := &Node{Name: name, Role: role, Released: map[wire.Reason]int{}}
	c.boot(n)
	c.Nodes = append(c.Nodes, n)
	c.byName[name] = n
}

// boot (re)creates a node's volatile state: a fresh core and executor.
func (c *Cluster) boot(n *Node) {
	s := c.Spec
	bpt := s.Profile.BytesPerToken()
	if s.DigestOnly {
		bpt = 0
	}
	sc := s.Sched
	if n.Role == engine.RoleDecode && s.DecodeSched.MaxNumSeqs > 0 {
		sc = s.DecodeSched
	}
	t := s.Transfer
	cfg := engine.Config{
		Pool:        kvblock.Config{NumBlocks: s.Blocks, BlockSizeTokens: s.BlockSize, BytesPerToken: bpt},
		Sched:       sc,
		MaxModelLen: s.Profile.MaxModelLen, VocabSize: s.Profile.VocabSize, EOS: s.Profile.EOS,
		RecentFinished: 1024,
		Role:           n.Role, EngineID: string(n.Name), Transfer: &t, Secret: c.secret,
	}
	n.Core = engine.NewCore(cfg, rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64())))
	n.exec = msim.New(s.Profile, n.Core.Pool(), s.ModelSeed)
	n.busy = false
	if p := n.Core.Producer(); p != nil {
		p.OnRelease(func(now clock.Instant, l wire.LeaseID, r wire.Reason) { n.Released[r]++ })
	}
	c.Net.Listen(n.Name)
}

// Node returns the node named name.
func (c *Cluster) Node(name string) *Node { return c.byName[transport.Addr(name)] }

// --- scheduled events ---

type event struct {
	at  clock.Instant
	seq uint64
	fn  func()
}

type evHeap []event

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *evHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// At runs fn at instant t (at once if t is not after Now, in order).
func (c *Cluster) At(t clock.Instant, fn func()) {
	c.evSeq++
	heap.Push(&c.events, event{at: clock.Max(t, c.Now), seq: c.evSeq, fn: fn})
}

// After runs fn d after Now.
func (c *Cluster) After(d time.Duration, fn func()) { c.At(c.Now.Add(d), fn) }

// --- the proxy and its clients ---

// Submit sends r through the proxy at instant t: to P (max_tokens 1,
// do_remote_decode), then with P's lease to D, or straight to D when Local.
func (c *Cluster) Submit(t clock.Instant, r *Req) {
	if _, dup := c.Requests[r.ID]; dup {
		panic("sim: duplicate request id " + r.ID)
	}
	c.Requests[r.ID] = r
	c.order = append(c.order, r.ID)
	c.At(t, func() {
		r.SentAt = c.Now
		if r.Local {
			c.After(c.Spec.HTTPDelay, func() { c.sendToD(r, nil) })
			return
		}
		c.After(c.Spec.HTTPDelay, func() {
			if r.clientGone {
				return
			}
			if r.P.Crashed || r.P.Hung {
				c.fail(r, "prefill unreachable")
				return
			}
			res := r.P.Core.Add(c.Now, &engine.Request{
				ID: r.ID, Prompt: r.Prompt, MaxTokens: 1, Sampling: r.Sampling, SeedSet: r.SeedSet,
				RemoteDecode: true,
			})
			if res != engine.Accepted {
				c.fail(r, "prefill rejected: "+res.String())
			}
		})
	})
}

// Abort makes r's client disconnect at instant t. The proxy carries the
// abort to whichever engine has the request (the in-sim proxy knows).
func (c *Cluster) Abort(t clock.Instant, r *Req) {
	c.At(t, func() {
		if r.Done || r.clientGone {
			return
		}
		r.clientGone = true
		r.Done = true
		r.Status = sched.FinishedAborted
		r.DoneAt = c.Now
		c.After(c.Spec.HTTPDelay, func() {
			switch {
			case r.atD:
				if !r.D.Crashed && !r.D.Hung {
					r.D.Core.Abort(c.Now, r.ID)
				}
			case r.P != nil && !r.P.Crashed && !r.P.Hung:
				r.P.Core.Abort(c.Now, r.ID)
			}
		})
	})
}

func (c *Cluster) fail(r *Req, why string) {
	if r.Done {
		return
	}
	r.Done, r.Error, r.Status, r.DoneAt = true, why, sched.FinishedError, c.Now
}

// sendToD is the proxy's decode leg.
func (c *Cluster) sendToD(r *Req, g *xfer.Grant) {
	if r.clientGone {
		if g != nil && r.P != nil && !r.P.Crashed {
			r.P.Core.Abort(c.Now, r.ID) // the proxy releases the lease it holds
		}
		return
	}
	d := r.D
	if d.Crashed || d.Hung {
		c.fail(r, "decode unreachable")
		if g != nil && !r.P.Crashed {
			r.P.Core.Abort(c.Now, r.ID)
		}
		return
	}
	in := &engine.Request{ID: r.ID, Prompt: r.Prompt, MaxTokens: r.MaxTokens, Sampling: r.Sampling,
		SeedSet: r.SeedSet, IgnoreEOS: r.IgnoreEOS}
	if g != nil {
		in.Remote = &xfer.Remote{EngineID: string(r.P.Name), Addr: string(r.P.Name), Lease: g.Lease, Token: g.Token,
			NumBlocks: len(g.BlockIDs), NumTokens: g.NumTokens, ExpiresIn: g.ExpiresIn}
	}
	r.atD = true
	if res := d.Core.Add(c.Now, in); res != engine.Accepted {
		c.fail(r, "decode rejected: "+res.String())
	}
}

// outputs routes a node's outputs to the proxy and clients.
func (c *Cluster) outputs(n *Node, outs []engine.Output) {
	for _, o := range outs {
		r, ok := c.Requests[o.ID]
		if !ok {
			continue
		}
		if n.Role == engine.RolePrefill && !r.atD {
			if !o.Finished {
				continue
			}
			if o.Status != sched.FinishedLength && o.Status != sched.FinishedStopped {
				if !r.clientGone {
					c.fail(r, "prefill "+o.Status.String())
				}
				continue
			}
			// P writes the response now: it reaches a client that is still
			// there, or it is undelivered.
			ok := !r.clientGone
			n.Core.Delivered(c.Now, r.ID, ok)
			if !ok {
				continue
			}
			g := o.Grant
			r.Grant = g
			c.After(c.Spec.HTTPDelay, func() {
				if g == nil {
					c.sendToD(r, nil) // no lease: D computes the prompt
					return
				}
				c.After(c.Spec.HTTPDelay, func() { c.sendToD(r, g) })
			})
			continue
		}
		if r.clientGone {
			continue
		}
		if o.Pulled {
			r.Pulled = true
		}
		if o.Fallback != "" {
			r.Fallback = o.Fallback
		}
		if o.Token != model.NoToken {
			if len(r.Tokens) == 0 {
				r.FirstAt = c.Now
			}
			r.Tokens = append(r.Tokens, o.Token)
		}
		if o.Finished {
			r.Done, r.Status, r.DoneAt = true, o.Status, c.Now
		}
	}
}

// --- driving ---

// drive steps one node and carries out its Ready.
func (c *Cluster) drive(n *Node) {
	if n.Crashed || n.Hung {
		return
	}
	rd := n.Core.Step(c.Now)
	c.outputs(n, rd.Outputs)
	for _, e := range rd.Messages {
		id := transport.ConnID(e.Session)
		c.Net.Send(c.Now, id, n.Name, e.Msg)
		if e.Close {
			c.Net.Close(c.Now, id, n.Name)
		}
	}
	for _, w := range rd.Reads {
		c.stream(n, w)
	}
	for _, a := range rd.Actions {
		switch a.Kind {
		case xfer.ActionDial:
			id := c.Net.Dial(c.Now, n.Name, transport.Addr(a.Addr))
			c.dialing[id] = a.Addr
		case xfer.ActionSend:
			c.Net.Send(c.Now, transport.ConnID(a.Session), n.Name, a.Msg)
		case xfer.ActionClose:
			c.Net.Close(c.Now, transport.ConnID(a.Session), n.Name)
		}
	}
	if rd.Batch != nil {
		n.exec.Execute(rd.Batch, &n.res)
		n.busy = true
		n.busyUntil = c.Now.Add(n.res.Duration)
		if n.res.Duration == 0 {
			n.busyUntil = c.Now
		}
	}
}

// stream sends a read's blocks when the modelled transfer time has passed:
// the lease is pinned all along, and the bytes are taken from P's pool at
// the end, so a block freed early would be sent with the wrong content.
func (c *Cluster) stream(n *Node, w xfer.ReadWork) {
	d := time.Duration(0)
	if c.Spec.ReadBandwidth > 0 {
		d = time.Duration(float64(w.Bytes()) / c.Spec.ReadBandwidth * 1e9)
	}
	core := n.Core
	c.readsDue++
	c.After(d, func() {
		c.readsDue--
		if n.Crashed || n.Core != core {
			return
		}
		id := transport.ConnID(w.Session)
		ok := true
		for i := range w.Blocks {
			ok = ok && c.Net.Send(c.Now, id, n.Name, &w.Blocks[i])
		}
		ok = ok && c.Net.Send(c.Now, id, n.Name, &wire.ReadEnd{ReadID: w.ReadID, Lease: w.Lease, Status: wire.StatusOK})
		if ok {
			core.Producer().CountServed(w.Bytes())
		}
		if !n.Hung {
			core.ReadFinished(c.Now, w.Session, w.ReadID, ok)
		}
	})
}

func (c *Cluster) deliver(d memnet.Delivery) {
	n := c.byName[d.To]
	if n == nil || n.Crashed {
		return
	}
	ev := d.Event
	s := xfer.SessionID(ev.Conn)
	switch ev.Kind {
	case transport.Dialed:
		addr := c.dialing[ev.Conn]
		delete(c.dialing, ev.Conn)
		n.Core.PeerDialed(c.Now, addr, s)
	case transport.DialFailed:
		addr := c.dialing[ev.Conn]
		delete(c.dialing, ev.Conn)
		n.Core.PeerDialFailed(c.Now, addr)
	case transport.Accepted:
		n.Core.PeerAccepted(c.Now, s)
	case transport.Received:
		n.Core.PeerMessage(c.Now, s, ev.Msg)
	case transport.Closed:
		n.Core.PeerClosed(c.Now, s)
	}
}

// next is the earliest instant with work.
func (c *Cluster) next() clock.Instant {
	t := c.Net.Next()
	if len(c.events) > 0 {
		t = min(t, c.events[0].at)
	}
	for _, n := range c.Nodes {
		if n.Crashed || n.Hung {
			continue
		}
		if n.busy {
			t = min(t, n.busyUntil)
		}
		t = min(t, n.Core.NextDeadline())
	}
	return t
}

// RunUntil advances the cluster to instant end, doing all work due before
// it. It returns early, with Now at the last instant with work, when nothing
// is left to do.
func (c *Cluster) RunUntil(end clock.Instant) {
	spins := 0
	for {
		t := c.next()
		if t > end {
			c.Now = clock.Max(c.Now, end)
			return
		}
		if t <= c.Now {
			spins++
			if spins > 100000 {
				panic(fmt.Sprintf("sim: no progress at %v", c.Now))
			}
		} else {
			spins = 0
		}
		c.Now = clock.Max(c.Now, t)
		c.instant()
		if t == clock.Never {
			return
		}
	}
}

// Run advances the cluster by d.
func (c *Cluster) Run(d time.Duration) { c.RunUntil(c.Now.Add(d)) }

// RunIdle runs until nothing is left to do or limit passes; it reports
// whether the cluster went idle.
func (c *Cluster) RunIdle(limit time.Duration) bool {
	end := c.Now.Add(limit)
	for c.Now < end {
		t := c.next()
		if t == clock.Never {
			return true
		}
		if t > end {
			c.Now = end
			return false
		}
		c.RunUntil(t)
	}
	return c.next() == clock.Never
}

// instant does all the work due at Now.
func (c *Cluster) instant() {
	c.deliv = c.Net.Deliver(c.Now, c.deliv[:0])
	for _, d := range c.deliv {
		c.deliver(d)
	}
	for len(c.events) > 0 && c.events[0].at <= c.Now {
		e := heap.Pop(&c.events).(event)
		e.fn()
	}
	for _, n := range c.Nodes {
		if n.busy && n.busyUntil <= c.Now && !n.Crashed && !n.Hung {
			n.busy = false
			n.Core.Complete(c.Now, &n.res)
		}
	}
	for _, n := range c.Nodes {
		c.drive(n)
	}
	c.check()
	if c.OnInstant != nil {
		c.OnInstant(c)
	}
}

func (c *Cluster) check() {
	for _, n := range c.Nodes {
		if n.Crashed {
			continue
		}
		if err := n.Core.Check(); err != nil {
			c.Violations = append(c.Violations, fmt.Sprintf("%v %s: %v", c.Now, n.Name, err))
		}
	}
}

// --- faults ---

// Crash kills a node at instant t: its volatile state is lost and its peers
// see their connections close.
func (c *Cluster) Crash(t clock.Instant, name string) {
	c.At(t, func() {
		n := c.byName[transport.Addr(name)]
		n.Crashed = true
		n.busy = false
		c.Net.Crash(c.Now, n.Name)
		for _, r := range c.Requests {
			if r.Done {
				continue
			}
			if (r.atD && r.D == n) || (!r.atD && r.P == n && !r.Local) {
				c.fail(r, string(n.Name)+" crashed")
			}
		}
	})
}

// Restart brings a crashed node back at instant t with empty state and the
// same engine id.
func (c *Cluster) Restart(t clock.Instant, name string) {
	c.At(t, func() {
		n := c.byName[transport.Addr(name)]
		c.Net.Restart(n.Name)
		n.Crashed = false
		n.Restarts++
		c.boot(n)
	})
}

// Partition cuts a from b over [t, t+d).
func (c *Cluster) Partition(t clock.Instant, a, b string, d time.Duration) {
	c.At(t, func() { c.Net.Partition(c.Now, transport.Addr(a), transport.Addr(b)) })
	c.At(t.Add(d), func() { c.Net.Heal(c.Now, transport.Addr(a), transport.Addr(b)) })
}

// --- inspection ---

// Held is the number of blocks held on node name.
func (c *Cluster) Held(name string) int { return c.Node(name).Core.Pool().NumHeld() }

// Leases is the number of live leases on node name.
func (c *Cluster) Leases(name string) int {
	if p := c.Node(name).Core.Producer(); p != nil {
		return p.NumLeases()
	}
	return 0
}

// Ordered returns the requests in submission order.
func (c *Cluster) Ordered() []*Req {
	out := make([]*Req, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, c.Requests[id])
	}
	return out
}

// sortedNames is used where map order would leak into behaviour.
func sortedNames(m map[string]*Req) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
