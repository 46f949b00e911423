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
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/proxy/route"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport"
	"github.com/kvlease/kvlease/transport/memnet"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// Spec describes a simulated cluster.
type Spec struct {
	Seed      uint64
	Profile   synth.Profile
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
	// Routing, when set, is the proxy's routing policy (proxy/route) for
	// requests whose P or D is nil: the proxy picks each leg's engine when
	// it sends the leg, from the loads it sees — its own legs in flight,
	// each engine's waiting requests and KV usage (scraped fresh), and a
	// pause (RoutingPause) after an engine could not be reached.
	Routing *route.Config
	// Offload, when set, gives every engine offload tiers (simulated in
	// memory) under this configuration. A copy takes OffloadLatency plus
	// its modelled size over OffloadBandwidth (bytes per second; 0: no
	// size cost), and fails part way with probability OffloadFailProb.
	Offload          *offload.Config
	OffloadLatency   time.Duration
	OffloadBandwidth float64
	OffloadFailProb  float64
}

// RoutingPause is how long the in-sim proxy passes over an engine it could
// not reach.
const RoutingPause = time.Second

// DefaultSpec is a small 1P1D cluster on the tiny profile with the lease
// policy.
func DefaultSpec() Spec {
	p, _ := synth.LookupProfile("tiny")
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
	// Core is the node's core, for inspection; Loop drives it, as the
	// production node's does (engine.Loop).
	Core *engine.Core
	Loop *engine.Loop
	port *port
	// tiers are the node's offload tiers (volatile, like its core).
	tiers []*tierStore
	// active: something reached the core this instant (an input, a
	// completion, a Step with a non-empty Ready); checkedPool is the pool
	// version of the last check. A node that was quiet since its last
	// check, pool unchanged, is not checked again (see check).
	active      bool
	checkedPool uint64

	// Crashed: the node is down (killed, or exited after a drain).
	Crashed bool
	// Exited: the node drained and exited cleanly (Crashed is set too).
	Exited bool
	// Hung: the node stops stepping while its connections stay open; what
	// reaches it waits in its backlog until it resumes.
	Hung    bool
	backlog []pendingCall
	hangGen uint64
	// draining: exit once the core reports Drained.
	draining bool
	// lastFault is the last instant a fault touched the node (crash,
	// restart, hang, resume).
	lastFault clock.Instant

	// Released counts P's lease releases by reason, over the node's life
	// (restarts included).
	Released map[wire.Reason]int
	// ReleasedAt records when each lease was released and why (P side,
	// restarts included).
	ReleasedAt map[wire.LeaseID]Release
	Restarts   int

	// past are the producer's lease block-seconds of earlier lives (a
	// restart starts a fresh core).
	pastRead, pastUnread float64
}

// BlockSeconds returns the block-seconds held by this node's leases over
// all its lives, split by whether the lease was read.
func (n *Node) BlockSeconds() (read, unread float64) {
	read, unread = n.pastRead, n.pastUnread
	if p := n.Core.Producer(); p != nil && !n.Crashed {
		st := p.Stats()
		read += st.BlockSecondsRead
		unread += st.BlockSecondsUnread
	}
	return read, unread
}

// pendingCall is work waiting for a hung node; req, when set, is the
// client request it belongs to (failed if the node crashes instead).
type pendingCall struct {
	req *Req
	fn  func()
}

// Release is one lease release seen on a P node.
type Release struct {
	At     clock.Instant
	Reason wire.Reason
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
	// EdgeReject makes D's HTTP edge refuse the request before its core
	// sees it (an invalid field, an unknown model): the edge tells P
	// (Core.Reject) and answers the client with this error.
	EdgeReject string
	// LostAfterPrefill makes the proxy lose the request after P answered:
	// nobody ever presents the lease token.
	LostAfterPrefill bool

	// P and D are the request's engines; nil ones are chosen by the
	// proxy's routing policy (Spec.Routing) when it sends the leg.
	P, D *Node
	// leg is the engine with the proxy's outstanding leg, for routing.
	leg *Node

	Tokens []int32 // received from D
	Status sched.Status
	Done   bool
	// Error is a rejection or failure the client saw, with its HTTP
	// status.
	Error      string
	HTTPStatus int
	Pulled     bool
	Fallback   xfer.FallbackReason
	Grant      *xfer.Grant
	clientGone bool // the client disconnected
	atD        bool
	responded  bool // P's response reached the proxy
	// leaseRead: P streamed a whole read of the lease. D no longer needs it
	// (it may wait in D's scheduler, holding its own copy, and its RELEASE
	// may be dropped at D's notice bound): its expiry is no early free.
	leaseRead bool
	SentAt    clock.Instant
	FirstAt   clock.Instant
	DoneAt    clock.Instant
	// GrantedAt is when P's response (carrying the lease) was written.
	GrantedAt clock.Instant
}

// Cluster is a deterministic P/D cluster: engines, a network and a proxy,
// all in one goroutine on a virtual clock. Not safe for concurrent use.
type Cluster struct {
	Spec Spec
	Now  clock.Instant
	Net  *memnet.Net

	expiry expiryWatch // expiry invariants (invariants.go)

	Nodes    []*Node
	byName   map[transport.Addr]*Node
	probes   map[transport.Addr]*Probe
	Requests map[string]*Req
	order    []string

	rng    *rand.Rand
	secret []byte
	events evHeap
	evSeq  uint64
	deliv  []memnet.Delivery
	// conns is the live connection from one node to another, by the
	// (local, remote) pair, as the local end knows it.
	conns map[[2]transport.Addr]transport.ConnID

	// Violations are invariant failures seen so far.
	Violations []string
	// StopOnViolation makes RunUntil and RunIdle return at the end of the
	// first instant with a violation (a failed run need not go on; a broken
	// core may not even make progress).
	StopOnViolation bool
	// OnInstant, when set, runs after every instant's work (extra checks).
	OnInstant func(c *Cluster)
	// OnMessage, when set, sees every message delivered to an engine,
	// before the engine does.
	OnMessage func(c *Cluster, from, to transport.Addr, m wire.Message)
	// Intercept, when set, may replace a message delivered to an engine
	// (corrupt it in flight: copy before changing, a duplicate is the same
	// value) or drop it (return nil).
	Intercept func(c *Cluster, from, to transport.Addr, m wire.Message) wire.Message

	// AbortBothLegs makes the proxy carry a client's abort to P as well
	// when the request is already at D (P revokes the lease, after any
	// read in flight).
	AbortBothLegs bool

	// MsgFaults are message faults applied to every engine's sends; set
	// them to the zero value to stop them (the liveness phase).
	MsgFaults MsgFaults
	faultRng  *rand.Rand
	held      map[heldKey]wire.Message // a message overtaken by the next on its connection
	parts     map[[2]transport.Addr]int
	// lastFault is the last instant a fault touched a pair of nodes (a
	// partition began or ended, a connection between them broke).
	lastFault map[[2]transport.Addr]clock.Instant

	// The proxy's routing state (Spec.Routing).
	pickP, pickD *route.Picker
	inFlight     map[*Node]int
	downUntil    map[*Node]clock.Instant
	loads        []route.Load
	cands        []*Node

	byLease map[leaseKey]*Req
	// EarlyFrees counts leases that expired while their request waited
	// for them at a decoder that was up and could reach P: memory freed
	// under a reader that still wanted it.
	EarlyFrees int
	// Exits counts nodes that drained and exited.
	Exits int

	trace  uint64 // FNV-1a over every event, in order
	Events uint64 // number of events traced
}

// MsgFaults are message faults the cluster applies to what engines send.
// Unlike memnet's, they can be changed during a run.
type MsgFaults struct {
	// DropProb: the message is lost and its connection breaks (both ends
	// learn of it, the sender after Spec.Faults.CloseDetectDelay).
	DropProb float64
	// DupProb: the message is sent twice.
	DupProb float64
	// ReorderProb: the message is overtaken by the next one sent on its
	// connection in the same instant.
	ReorderProb float64
	// CorruptProb: a block's content is damaged in flight (its checksum
	// no longer matches).
	CorruptProb float64
}

type heldKey struct {
	conn transport.ConnID
	from transport.Addr
}

type leaseKey struct {
	node  transport.Addr
	lease wire.LeaseID
}

// New builds a cluster from spec. Engine names are "p0".."pN", "d0"...
func New(spec Spec) *Cluster {
	c := &Cluster{
		Spec:      spec,
		rng:       rand.New(rand.NewPCG(spec.Seed, 0x6b766c)),
		byName:    map[transport.Addr]*Node{},
		probes:    map[transport.Addr]*Probe{},
		Requests:  map[string]*Req{},
		conns:     map[[2]transport.Addr]transport.ConnID{},
		secret:    []byte("simulated cluster secret"),
		trace:     fnvOffset,
		held:      map[heldKey]wire.Message{},
		parts:     map[[2]transport.Addr]int{},
		lastFault: map[[2]transport.Addr]clock.Instant{},
		byLease:   map[leaseKey]*Req{},
	}
	c.faultRng = rand.New(rand.NewPCG(spec.Seed, 0x6d7367))
	if spec.Routing != nil {
		c.pickP, c.pickD = route.NewPicker(*spec.Routing), route.NewPicker(*spec.Routing)
		c.inFlight, c.downUntil = map[*Node]int{}, map[*Node]clock.Instant{}
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
	n := &Node{Name: name, Role: role, Released: map[wire.Reason]int{}, ReleasedAt: map[wire.LeaseID]Release{}}
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
		RecentFinished: 64, // only what a late abort is told (sim ignores it)
		Role:           n.Role, EngineID: string(n.Name), Transfer: &t, Secret: c.secret,
		Offload: s.Offload,
	}
	n.Core = engine.NewCore(cfg, rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64())))
	n.port = newPort(c, n, n.Core)
	n.Loop = engine.NewLoop(n.Core, synth.New(s.Profile, n.Core.Pool(), s.ModelSeed), engine.LoopConfig{
		Port: n.port, Copier: copier{c, n},
	})
	n.tiers = offloadTiers(s.Offload)
	n.Hung = false
	n.backlog = nil
	n.draining = false
	n.active = true
	if p := n.Core.Producer(); p != nil {
		p.OnRelease(func(now clock.Instant, l wire.LeaseID, r wire.Reason) {
			n.active = true
			n.Released[r]++
			n.ReleasedAt[l] = Release{At: now, Reason: r}
			c.mix(traceRelease, uint64(l), uint64(r))
			if r == wire.ReasonExpired && c.waitedFor(n, l) {
				c.EarlyFrees++
			}
		})
	}
	c.Net.Listen(n.Name)
}

// waitedFor reports whether lease l of P node n belongs to a request that
// is waiting for it at a decoder that is up, with no fault touching either
// node or the pair since the lease was granted, and that has not read it
// yet.
func (c *Cluster) waitedFor(n *Node, l wire.LeaseID) bool {
	r := c.byLease[leaseKey{n.Name, l}]
	if r == nil || !r.atD || r.Done || r.Pulled || r.leaseRead || r.Fallback != 0 || r.D.Crashed || r.D.Hung {
		return false
	}
	last := max(n.lastFault, r.D.lastFault, c.lastFault[pairKey(n.Name, r.D.Name)])
	return c.parts[pairKey(n.Name, r.D.Name)] == 0 && last < r.GrantedAt
}

func pairKey(a, b transport.Addr) [2]transport.Addr {
	if b < a {
		a, b = b, a
	}
	return [2]transport.Addr{a, b}
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

// call runs fn on node n now, later (n is hung: fn waits in its backlog) or
// never (n is down: it reports false). r is the client request the call
// serves, if any: it fails if n crashes before the call runs.
func (c *Cluster) call(n *Node, r *Req, fn func()) bool {
	switch {
	case n.Crashed:
		return false
	case n.Hung:
		n.backlog = append(n.backlog, pendingCall{r, fn})
	default:
		n.active = true
		fn()
	}
	return true
}

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
		c.mix(traceSubmit, hashString(r.ID))
		if r.Local {
			c.After(c.Spec.HTTPDelay, func() { c.sendToD(r, nil) })
			return
		}
		c.After(c.Spec.HTTPDelay, func() {
			if r.clientGone {
				return
			}
			if r.P == nil {
				r.P = c.route(engine.RolePrefill)
			}
			c.legStart(r, r.P)
			ok := c.call(r.P, r, func() {
				if r.clientGone {
					return
				}
				res, _ := r.P.Loop.Add(c.Now, &engine.Request{
					ID: r.ID, Prompt: r.Prompt, MaxTokens: 1, Sampling: r.Sampling, SeedSet: r.SeedSet,
					RemoteDecode: true,
				})
				if res != engine.Accepted {
					c.fail(r, "prefill rejected: "+res.String(), res.HTTPStatus())
				}
			})
			if !ok {
				c.unreachable(r.P)
				c.fail(r, "prefill unreachable", 502)
			}
		})
	})
}

// route picks an engine of role for a leg with the proxy's routing policy.
func (c *Cluster) route(role engine.Role) *Node {
	pick := c.pickD
	if role == engine.RolePrefill {
		pick = c.pickP
	}
	if pick == nil {
		panic("sim: a request without engines and no Spec.Routing")
	}
	c.loads, c.cands = c.loads[:0], c.cands[:0]
	for _, n := range c.Nodes {
		if n.Role != role {
			continue
		}
		l := route.Load{InFlight: c.inFlight[n], DownUntil: c.downUntil[n]}
		if !n.Crashed && !n.Hung { // a scrape of a dead or hung engine fails
			st := n.Core.Stats()
			l.Scraped, l.ScrapedAt = true, c.Now
			l.Waiting, l.KVUsage = float64(st.Waiting), n.Core.Pool().Usage()
		}
		c.loads = append(c.loads, l)
		c.cands = append(c.cands, n)
	}
	i, ok := pick.Pick(c.Now, c.loads, nil)
	if !ok {
		panic("sim: no engine to route to")
	}
	return c.cands[i]
}

// legStart and legEnd count the proxy's legs in flight per engine.
func (c *Cluster) legStart(r *Req, n *Node) {
	c.legEnd(r)
	if c.inFlight != nil {
		r.leg = n
		c.inFlight[n]++
	}
}

func (c *Cluster) legEnd(r *Req) {
	if r.leg != nil {
		c.inFlight[r.leg]--
		r.leg = nil
	}
}

// unreachable pauses routing to n.
func (c *Cluster) unreachable(n *Node) {
	if c.downUntil != nil {
		c.downUntil[n] = c.Now.Add(RoutingPause)
	}
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
		c.legEnd(r)
		c.mix(traceAbort, hashString(r.ID))
		c.After(c.Spec.HTTPDelay, func() {
			switch {
			case r.atD:
				c.call(r.D, nil, func() { r.D.Loop.Abort(c.Now, r.ID) })
				if c.AbortBothLegs && !r.Local && r.P != nil {
					c.call(r.P, nil, func() { r.P.Loop.Abort(c.Now, r.ID) })
				}
			case r.P != nil:
				c.call(r.P, nil, func() { r.P.Loop.Abort(c.Now, r.ID) })
			}
		})
	})
}

func (c *Cluster) fail(r *Req, why string, status int) {
	if r.Done {
		return
	}
	r.Done, r.Error, r.HTTPStatus, r.Status, r.DoneAt = true, why, status, sched.FinishedError, c.Now
	c.legEnd(r)
	c.mix(traceFail, hashString(r.ID))
}

// releaseAtP is the proxy giving up a lease it holds: it aborts the
// request on P (policy lease revokes the lease at once).
func (c *Cluster) releaseAtP(r *Req) {
	if r.P != nil {
		c.call(r.P, nil, func() { r.P.Loop.Abort(c.Now, r.ID) })
	}
}

// sendToD is the proxy's decode leg.
func (c *Cluster) sendToD(r *Req, g *xfer.Grant) {
	if r.clientGone || r.Done {
		if g != nil {
			c.releaseAtP(r) // the proxy releases the lease it holds
		}
		return
	}
	if r.D == nil {
		r.D = c.route(engine.RoleDecode)
	}
	d := r.D
	c.legStart(r, d)
	var in *engine.Request
	var remote *xfer.Remote
	if g != nil {
		remote = &xfer.Remote{EngineID: string(r.P.Name), Addr: string(r.P.Name), Lease: g.Lease, Token: g.Token,
			NumBlocks: len(g.BlockIDs), NumTokens: g.NumTokens, ExpiresIn: g.ExpiresIn}
	}
	in = &engine.Request{ID: r.ID, Prompt: r.Prompt, MaxTokens: r.MaxTokens, Sampling: r.Sampling,
		SeedSet: r.SeedSet, IgnoreEOS: r.IgnoreEOS, Remote: remote}
	ok := c.call(d, r, func() {
		if r.clientGone || r.Done {
			if g != nil {
				c.releaseAtP(r)
			}
			return
		}
		r.atD = true
		if r.EdgeReject != "" {
			d.Loop.Reject(c.Now, remote)
			c.fail(r, "decode rejected: "+r.EdgeReject, 400)
			return
		}
		if res, _ := d.Loop.Add(c.Now, in); res != engine.Accepted {
			c.fail(r, "decode rejected: "+res.String(), res.HTTPStatus())
		}
	})
	if !ok {
		c.unreachable(d)
		c.fail(r, "decode unreachable", 502)
		if g != nil {
			c.releaseAtP(r)
		}
	}
}

// outputs routes a node's outputs to the proxy and clients.
func (c *Cluster) outputs(n *Node, outs []engine.Output) {
	for _, o := range outs {
		r, ok := c.Requests[o.ID]
		if !ok {
			continue
		}
		c.mix(traceOutput, hashString(o.ID), uint64(uint32(o.Token)), uint64(o.Status))
		if n.Role == engine.RolePrefill && !r.atD {
			if !o.Finished {
				continue
			}
			if o.Status != sched.FinishedLength && o.Status != sched.FinishedStopped {
				if !r.clientGone {
					c.fail(r, "prefill "+o.Status.String(), 500)
				}
				continue
			}
			// P writes the response now: it reaches a client that is still
			// there, or it is undelivered.
			c.legEnd(r)
			ok := !r.clientGone
			n.Loop.Delivered(c.Now, r.ID, ok)
			if !ok {
				continue
			}
			g := o.Grant
			r.Grant = g
			r.GrantedAt = c.Now
			r.responded = true
			if g != nil {
				c.byLease[leaseKey{n.Name, g.Lease}] = r
			}
			if r.LostAfterPrefill {
				continue
			}
			c.After(c.Spec.HTTPDelay, func() {
				if g == nil {
					c.sendToD(r, nil) // no lease: D computes the prompt
					return
				}
				c.After(c.Spec.HTTPDelay, func() { c.sendToD(r, g) })
			})
			continue
		}
		if r.clientGone || r.Done {
			continue // the client left, or already has its answer
		}
		if o.Pulled {
			r.Pulled = true
		}
		if o.Fallback != 0 {
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
			c.legEnd(r)
			if o.Status == sched.FinishedError {
				r.Error = "decode failed: " + o.Fallback.String()
				r.HTTPStatus = 502
			}
		}
	}
}

// --- driving ---

// drive turns one node's loop — the production engine's, engine.Loop —
// until it asks for no more at this instant, and routes its outputs.
func (c *Cluster) drive(n *Node) {
	if n.Crashed || n.Hung {
		return
	}
	for turns := 0; ; turns++ {
		c.feed(n)
		t := n.Loop.Turn(c.Now)
		if t.Moved {
			n.active = true
		}
		if p := n.Core.Producer(); p != nil {
			// The sweep ran first in Step: nothing due by now may be left
			// (DESIGN.md: expiry sweeps every lease whose deadline passed).
			if err := p.CheckDue(c.Now); err != nil {
				c.violate("%s: %v", n.Name, err)
			}
		}
		if b := t.Batch; b != nil {
			sc := n.Core.Config().Sched
			if len(b.Seqs) > sc.MaxNumSeqs || b.NumTokens() > sc.MaxNumBatchedTokens {
				c.violate("%s: batch of %d sequences, %d tokens over the budget (%d, %d)", n.Name,
					len(b.Seqs), b.NumTokens(), sc.MaxNumSeqs, sc.MaxNumBatchedTokens)
			}
		}
		c.outputs(n, t.Outputs)
		if !t.Again || n.Crashed || n.Hung {
			break
		}
		if turns == 1<<16 {
			panic(fmt.Sprintf("sim: %s turns without end at %v", n.Name, c.Now))
		}
	}
	if n.draining && n.Loop.Drained() {
		c.exit(n)
	}
}

// send sends m from node n on connection id through the message faults.
// It reports false when the message is certainly not sent (the
// connection is not open, or it broke on this message).
func (c *Cluster) send(n *Node, id transport.ConnID, m wire.Message) bool {
	f := c.MsgFaults
	if f.DropProb > 0 && c.faultRng.Float64() < f.DropProb {
		c.reset(n, id)
		return false
	}
	if b, ok := m.(*wire.Block); ok && f.CorruptProb > 0 && c.faultRng.Float64() < f.CorruptProb {
		m = corrupt(b, c.faultRng)
	}
	k := heldKey{id, n.Name}
	if h, ok := c.held[k]; ok {
		delete(c.held, k)
		ok := c.Net.Send(c.Now, id, n.Name, m) // m overtakes h
		c.Net.Send(c.Now, id, n.Name, h)
		return ok
	}
	if f.ReorderProb > 0 && c.faultRng.Float64() < f.ReorderProb {
		c.held[k] = m // sent after the next message, or at the end of the instant
		return true
	}
	ok := c.Net.Send(c.Now, id, n.Name, m)
	if ok && f.DupProb > 0 && c.faultRng.Float64() < f.DupProb {
		c.Net.Send(c.Now, id, n.Name, m)
	}
	return ok
}

// corrupt returns a copy of b with one bit of its content flipped: a KV
// byte, or (digest-only pools) a slot digest.
func corrupt(b *wire.Block, rng *rand.Rand) *wire.Block {
	bad := *b
	if len(b.Data) > 0 {
		bad.Data = append([]byte(nil), b.Data...)
		bad.Data[rng.IntN(len(bad.Data))] ^= 1 << rng.IntN(8)
	} else if len(b.Digests) > 0 {
		bad.Digests = append([]uint64(nil), b.Digests...)
		bad.Digests[rng.IntN(len(bad.Digests))] ^= 1 << rng.IntN(64)
	}
	return &bad
}

// reset breaks connection id as a lost message would: the peer gets what
// was sent before, then Closed; node n learns of it after
// Spec.Faults.CloseDetectDelay.
func (c *Cluster) reset(n *Node, id transport.ConnID) {
	delete(c.held, heldKey{id, n.Name})
	for k, v := range c.conns {
		if v == id {
			c.lastFault[pairKey(k[0], k[1])] = c.Now
		}
	}
	c.Net.Close(c.Now, id, n.Name)
	c.forgetConn(id)
	core := n.Core
	c.mix(traceReset, uint64(id))
	p := n.port
	c.After(c.Spec.Faults.CloseDetectDelay, func() {
		c.call(n, nil, func() {
			if n.Core == core {
				p.push(transport.Event{Kind: transport.Closed, Conn: id, Local: n.Name, Reason: "connection reset"})
			}
		})
	})
}

// flush sends the message held back on connection id by node from.
func (c *Cluster) flush(id transport.ConnID, from transport.Addr) {
	k := heldKey{id, from}
	if h, ok := c.held[k]; ok {
		delete(c.held, k)
		c.Net.Send(c.Now, id, from, h)
	}
}

// flushAll sends every held message, in connection order.
func (c *Cluster) flushAll() {
	if len(c.held) == 0 {
		return
	}
	keys := make([]heldKey, 0, len(c.held))
	for k := range c.held {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].conn != keys[j].conn {
			return keys[i].conn < keys[j].conn
		}
		return keys[i].from < keys[j].from
	})
	for _, k := range keys {
		c.flush(k.conn, k.from)
	}
}

// dropHeld forgets the messages held back for a node that went down.
func (c *Cluster) dropHeld(a transport.Addr) {
	for k := range c.held {
		if k.from == a {
			delete(c.held, k)
		}
	}
}

func (c *Cluster) deliver(d memnet.Delivery) {
	ev := d.Event
	if p := c.probes[d.To]; p != nil {
		p.deliver(c, ev)
		return
	}
	n := c.byName[d.To]
	if n == nil || n.Crashed {
		return
	}
	if ev.Kind == transport.Received && c.Intercept != nil {
		m := c.Intercept(c, ev.Remote, ev.Local, ev.Msg)
		if m == nil {
			return
		}
		ev.Msg = m
	}
	c.mixEvent(ev)
	c.call(n, nil, func() { c.handle(n, ev) })
}

// feed hands the events waiting in node n's port to its loop one at a
// time (Loop.Handle, what the loop's Turn does with each event it polls),
// checking the expiry invariants around every message (invariants.go).
func (c *Cluster) feed(n *Node) {
	evs := n.port.inbox
	if len(evs) == 0 {
		return
	}
	n.port.inbox = n.port.spare[:0]
	for i := range evs {
		ev := &evs[i]
		if ev.Kind != transport.Received {
			n.Loop.Handle(c.Now, *ev)
			continue
		}
		due := c.dueNamed(n, ev.Msg)
		n.Loop.Handle(c.Now, *ev)
		c.checkExpiry(n, ev.Conn, ev.Msg, due)
	}
	clear(evs)
	n.port.spare = evs[:0]
}

// handle gives a network event to the node's port, for its next turn.
func (c *Cluster) handle(n *Node, ev transport.Event) {
	switch ev.Kind {
	case transport.Dialed, transport.Accepted:
		c.conns[[2]transport.Addr{ev.Local, ev.Remote}] = ev.Conn
	case transport.Received:
		if c.OnMessage != nil {
			c.OnMessage(c, ev.Remote, ev.Local, ev.Msg)
		}
	case transport.Closed:
		if c.conns[[2]transport.Addr{ev.Local, ev.Remote}] == ev.Conn {
			delete(c.conns, [2]transport.Addr{ev.Local, ev.Remote})
		}
	}
	n.port.push(ev)
}

func (c *Cluster) forgetConn(id transport.ConnID) {
	for k, v := range c.conns {
		if v == id {
			delete(c.conns, k)
		}
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
		t = min(t, n.Loop.NextWake())
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
		if t == clock.Never || c.stopped() {
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
	for c.Now < end && !c.stopped() {
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
		c.drive(n)
	}
	c.flushAll()
	c.check()
	if c.OnInstant != nil {
		c.OnInstant(c)
	}
}

// stopped reports whether a run must stop (StopOnViolation and a
// violation seen).
func (c *Cluster) stopped() bool { return c.StopOnViolation && len(c.Violations) > 0 }

func (c *Cluster) violate(format string, args ...any) {
	c.Violations = append(c.Violations, fmt.Sprintf("%v: ", c.Now)+fmt.Sprintf(format, args...))
}

// check runs every engine's invariant checks (Core.Check: pool accounting,
// request, lease, pull and offload bookkeeping) after an instant. A node
// is checked when anything reached its core since its last check — an
// input, a completion, a step that produced anything, a lease release —
// or its pool changed; a quiet node's core holds what already passed (a
// step with nothing to show changes none of what the checks look at), so
// checking it again would only cost time. RunSeed checks every node once
// more at the end.
func (c *Cluster) check() {
	for _, n := range c.Nodes {
		if n.Crashed {
			continue
		}
		v := n.Core.Pool().Version()
		if !n.active && v == n.checkedPool {
			continue
		}
		n.active, n.checkedPool = false, v
		if err := n.Core.Check(); err != nil {
			c.violate("%s: %v", n.Name, err)
		}
	}
}

// --- faults ---

// Crash kills a node at instant t: its volatile state is lost and its peers
// see their connections close.
func (c *Cluster) Crash(t clock.Instant, name string) {
	c.At(t, func() { c.crash(c.byName[transport.Addr(name)]) })
}

func (c *Cluster) crash(n *Node) {
	if n.Crashed {
		return
	}
	c.mix(traceCrash, hashString(string(n.Name)))
	n.lastFault = c.Now
	n.pastRead, n.pastUnread = n.BlockSeconds()
	n.Crashed = true
	n.Hung = false
	for _, pc := range n.backlog {
		if pc.req != nil {
			c.fail(pc.req, string(n.Name)+" crashed", 502)
		}
	}
	n.backlog = nil
	n.draining = false
	c.dropHeld(n.Name)
	c.Net.Crash(c.Now, n.Name)
	c.forgetConnsOf(n.Name)
	for _, id := range sortedNames(c.Requests) {
		r := c.Requests[id]
		if r.Done {
			continue
		}
		if (r.atD && r.D == n) || (!r.atD && r.P == n && !r.Local && !r.responded) {
			c.fail(r, string(n.Name)+" crashed", 502)
		}
	}
}

func (c *Cluster) forgetConnsOf(a transport.Addr) {
	for k := range c.conns {
		if k[0] == a || k[1] == a {
			delete(c.conns, k)
		}
	}
}

// Restart brings a crashed (or exited) node back at instant t with empty
// state and the same engine id.
func (c *Cluster) Restart(t clock.Instant, name string) {
	c.At(t, func() {
		n := c.byName[transport.Addr(name)]
		if !n.Crashed {
			return
		}
		c.mix(traceRestart, hashString(name))
		n.lastFault = c.Now
		c.Net.Restart(n.Name)
		n.Crashed = false
		n.Exited = false
		n.Restarts++
		c.boot(n)
	})
}

// Hang stops node name from stepping over [t, t+d): its connections stay
// open, and everything that reaches it (messages, HTTP calls, its own
// streams) waits until it resumes, in order.
func (c *Cluster) Hang(t clock.Instant, name string, d time.Duration) {
	n := c.byName[transport.Addr(name)]
	c.At(t, func() {
		if n.Crashed || n.Hung {
			return
		}
		c.mix(traceHang, hashString(name))
		n.Hung = true
		n.lastFault = c.Now
		n.hangGen++
		gen := n.hangGen
		c.After(d, func() {
			if !n.Hung || n.hangGen != gen {
				return
			}
			n.Hung = false
			n.lastFault = c.Now
			c.mix(traceResume, hashString(name))
			for len(n.backlog) > 0 && !n.Hung && !n.Crashed {
				pc := n.backlog[0]
				n.backlog = n.backlog[1:]
				n.active = true
				pc.fn()
			}
		})
	})
}

// Partition cuts a from b over [t, t+d). Overlapping partitions of the
// same pair nest: the pair heals when the last one ends.
func (c *Cluster) Partition(t clock.Instant, a, b string, d time.Duration) {
	k := pairKey(transport.Addr(a), transport.Addr(b))
	c.At(t, func() {
		c.mix(tracePartition, hashString(a), hashString(b))
		c.lastFault[k] = c.Now
		if c.parts[k]++; c.parts[k] == 1 {
			c.Net.Partition(c.Now, k[0], k[1])
		}
	})
	c.At(t.Add(d), func() {
		c.lastFault[k] = c.Now
		if c.parts[k]--; c.parts[k] == 0 {
			delete(c.parts, k)
			c.Net.Heal(c.Now, k[0], k[1])
		}
	})
}

// Drain starts a graceful shutdown of node name at instant t (SIGTERM):
// it refuses new requests, serves its outstanding leases until they are
// read, released or expired, at most until t+grace (then they end with
// reason shutdown), and exits once it has nothing left (Node.Exited).
func (c *Cluster) Drain(t clock.Instant, name string, grace time.Duration) {
	n := c.byName[transport.Addr(name)]
	c.At(t, func() {
		c.call(n, nil, func() {
			c.mix(traceDrain, hashString(name))
			n.Loop.DrainBy(c.Now.Add(grace))
			n.draining = true
		})
	})
}

// exit stops a drained node cleanly: it closes its connections and stops
// listening.
func (c *Cluster) exit(n *Node) {
	c.mix(traceExit, hashString(string(n.Name)))
	c.Exits++
	// The production node's exit: the loop's graceful shutdown closes the
	// connections it knows after their last frames (a drained engine has
	// no read left to stream, so none waits); the transport then goes
	// down with whatever else it had.
	c.outputs(n, n.Loop.Shutdown(c.Now, true))
	n.Loop.Closed(c.Now)
	keys := make([][2]transport.Addr, 0)
	for k := range c.conns {
		if k[0] == n.Name {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][1] < keys[j][1] })
	for _, k := range keys {
		c.Net.Close(c.Now, c.conns[k], n.Name)
		delete(c.conns, k)
	}
	c.Net.Unlisten(n.Name)
	n.Crashed, n.Exited, n.draining = true, true, false
}

// Inject sends m at instant t from node from to node to on their live
// connection (as if from's edge had sent it: a duplicate, a late replay or
// a forged message). It reports nothing: with no live connection the
// message is not sent.
func (c *Cluster) Inject(t clock.Instant, from, to string, m wire.Message) {
	c.At(t, func() {
		if id, ok := c.conns[[2]transport.Addr{transport.Addr(from), transport.Addr(to)}]; ok {
			c.Net.Send(c.Now, id, transport.Addr(from), m)
		}
	})
}

// Conn returns the live connection from node from to node to, as from
// knows it.
func (c *Cluster) Conn(from, to string) (transport.ConnID, bool) {
	id, ok := c.conns[[2]transport.Addr{transport.Addr(from), transport.Addr(to)}]
	return id, ok
}

// --- probes ---

// Probe is a raw network endpoint that is not an engine: a stranger that
// dials engines and sends whatever it likes (unauthenticated peers, forged
// messages). It records what it receives. With Secret set it answers P's
// handshake as engine EngineID would (a peer that knows the secret).
type Probe struct {
	Name     transport.Addr
	EngineID string
	Secret   []byte
	Conn     transport.ConnID
	Up       bool // the dial succeeded and the connection is open
	Authed   bool // P accepted the handshake
	Closed   bool // the connection was closed or the dial failed
	Received []wire.Message
	nonce    [16]byte
}

// NewProbe registers a probe named name.
func (c *Cluster) NewProbe(name string) *Probe {
	p := &Probe{Name: transport.Addr(name), EngineID: name}
	c.probes[p.Name] = p
	return p
}

// ClusterSecret is the secret engines share (for probes that must know it).
func (c *Cluster) ClusterSecret() []byte { return c.secret }

// ProbeDial makes probe p connect to node to at instant t; with Secret set
// it then runs the handshake.
func (c *Cluster) ProbeDial(t clock.Instant, p *Probe, to string) {
	c.At(t, func() { p.Conn = c.Net.Dial(c.Now, p.Name, transport.Addr(to)) })
}

// ProbeSend makes probe p send m at instant t.
func (c *Cluster) ProbeSend(t clock.Instant, p *Probe, m wire.Message) {
	c.At(t, func() { c.Net.Send(c.Now, p.Conn, p.Name, m) })
}

func (p *Probe) deliver(c *Cluster, ev transport.Event) {
	switch ev.Kind {
	case transport.Dialed:
		p.Up = true
		if p.Secret != nil {
			p.nonce = [16]byte{byte(ev.Conn), 0x70}
			c.Net.Send(c.Now, p.Conn, p.Name, &wire.Hello{Version: wire.Version, EngineID: p.EngineID, Nonce: p.nonce})
		}
	case transport.Received:
		p.Received = append(p.Received, ev.Msg)
		switch m := ev.Msg.(type) {
		case *wire.HelloAck:
			if p.Secret != nil && m.Status == wire.StatusOK {
				c.Net.Send(c.Now, p.Conn, p.Name, &wire.Auth{MAC: wire.ComputeMAC(p.Secret, wire.RoleD, m.Nonce, m.EngineID, p.EngineID)})
			}
		case *wire.AuthAck:
			p.Authed = m.Status == wire.StatusOK
		}
	case transport.Closed, transport.DialFailed:
		p.Up, p.Closed = false, true
	}
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

// --- trace hash ---

// TraceHash is a hash of everything that happened so far, in order:
// deliveries, outputs, releases, faults. Two runs of the same seed must
// give the same hash.
func (c *Cluster) TraceHash() uint64 { return c.trace }

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

const (
	traceSubmit uint64 = iota + 1
	traceAbort
	traceFail
	traceOutput
	traceRelease
	traceReadEnd
	traceDeliver
	traceCrash
	traceRestart
	traceHang
	traceResume
	tracePartition
	traceDrain
	traceExit
	traceReset
	traceOffload
)

func (c *Cluster) mix(vals ...uint64) {
	h := c.trace
	for _, v := range vals {
		h = fnvMix(h, v)
	}
	c.trace = fnvMix(h, uint64(c.Now))
	c.Events++
}

// fnvMix is FNV-1a over v's eight bytes, low first.
func fnvMix(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

func (c *Cluster) mixEvent(ev transport.Event) {
	var a, b uint64
	var typ wire.MsgType
	switch m := ev.Msg.(type) {
	case nil:
	case *wire.Renew:
		a, b = m.Seq, uint64(len(m.Leases))
	case *wire.RenewAck:
		a, b = m.Seq, uint64(len(m.Results))
	case *wire.Read:
		a, b = m.ReadID, uint64(m.Lease)
	case *wire.Block:
		a, b = m.ReadID, uint64(m.Index)<<32|uint64(m.Checksum&0xffffffff)
	case *wire.ReadEnd:
		a, b = m.ReadID, uint64(m.Status)
	case *wire.Release:
		a, b = uint64(m.Lease), uint64(m.Reason)
	case *wire.ReleaseAck:
		a, b = uint64(m.Lease), uint64(m.Status)
	case *wire.Revoked:
		a, b = uint64(m.Lease), uint64(m.Reason)
	}
	if ev.Msg != nil {
		typ = ev.Msg.Type()
	}
	c.mix(traceDeliver, uint64(ev.Kind), uint64(ev.Conn), hashString(string(ev.Local)), uint64(typ), a, b)
}

func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
