package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/faultapi"
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
	// DecodeBlocks overrides Blocks on D engines when positive.
	DecodeBlocks int
	// DigestOnly runs pools without KV bytes (large simulations).
	DigestOnly bool
	Sched      sched.Config
	// DecodeSched overrides Sched on D engines when MaxNumSeqs > 0
	// (congestion).
	DecodeSched sched.Config
	Network     memnet.Conditions
	// PrefillStepScale, when positive, multiplies the modelled duration
	// of every step of a prefill engine: a slow model whose prefill steps
	// last about a lease, during which P's loop keeps serving its leases.
	PrefillStepScale float64
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
		Network:       memnet.Conditions{MinDelay: 100 * time.Microsecond, MaxDelay: 300 * time.Microsecond, CloseDetectDelay: 50 * time.Millisecond},
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
	// exec computes the node's steps, off the loop (engine.LoopConfig.
	// Async): a step's KV is written and its tokens sampled when it
	// completes, at its modelled end (startStep); res is its result.
	exec *synth.Executor
	res  model.StepResult
	// tiers are the node's offload tiers (volatile, like its core).
	tiers []*tierStore
	// active: something reached the core this instant (an input, a
	// completion, a Step with a non-empty Ready); checkedPool is the pool
	// version of the last check. A node that was quiet since its last
	// check, pool unchanged, is not checked again (see check).
	active      bool
	checkedPool uint64
	// poke: something reached the core since the node was last driven;
	// wake is Loop.NextWake as of then. With World.sparse only nodes
	// poked or due are driven (wake.go): idx is the node's index in
	// World.Nodes, wakeKey and hix its key and place in the wake queue,
	// visited the pass that last listed it.
	poke bool
	wake clock.Instant
	// fed: the node's outputs handed it an input (Delivered) during the
	// turn being driven; drive turns it again (Loop's contract).
	fed     bool
	wakeKey clock.Instant
	idx     int
	hix     int
	visited uint64
	c       *World

	// Crashed: the node is down (killed, or exited after a drain).
	Crashed bool
	// Exited: the node drained and exited cleanly (Crashed is set too).
	Exited bool
	// Hung: the node stops stepping while its connections stay open; what
	// reaches it waits in its backlog until it resumes.
	Hung    bool
	backlog []pendingCall
	hangGen uint64
	// Paused: the node's loop is busy (a long turn, a pause of its
	// process's goroutines) while its transport runs: messages reach its
	// port, stamped with their arrival, and wait there; HTTP calls, step
	// and copy completions wait in its backlog (Pause).
	Paused   bool
	pauseGen uint64
	// lastPause is when the node's loop last paused or resumed.
	lastPause clock.Instant
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
	pastFreedReads       int
	pastSpill            SpillCounts
}

// FreedReads returns the producer's reads of freed blocks over all the
// node's lives (xfer.ProducerStats.FreedReads).
func (n *Node) FreedReads() int {
	k := n.pastFreedReads
	if p := n.Core.Producer(); p != nil && !n.Crashed {
		k += int(p.Stats().FreedReads)
	}
	return k
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

// Lease spill figures of a simulated P (docs/scenarios.md S26): the engine
// core decides and carries out spills and restores; the simulator only
// counts them (and checks, at every block P sends, that the lease still
// holds its primary copy: port.go).

// SpillCounts are a P's lease spill counters.
type SpillCounts struct {
	// SpilledBlocks had their primary copies dropped for a tier copy;
	// RestoredTier were loaded back from the tier for a read, RestoredPool
	// were found still cached in the pool.
	SpilledBlocks, RestoredTier, RestoredPool uint64
}

func (s *SpillCounts) add(o SpillCounts) {
	s.SpilledBlocks += o.SpilledBlocks
	s.RestoredTier += o.RestoredTier
	s.RestoredPool += o.RestoredPool
}

// SpillCounts returns the node's lease spill counters over all its lives.
func (n *Node) SpillCounts() SpillCounts {
	s := n.pastSpill
	p, o := n.Core.Producer(), n.Core.Offload()
	if p == nil || o == nil || n.Crashed {
		return s
	}
	st := o.Stats()
	s.add(SpillCounts{SpilledBlocks: p.Stats().SpilledBlocks, RestoredTier: st.LeaseRestoreLoadedBlocks, RestoredPool: st.LeaseRestoreHitBlocks})
	return s
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
	// DecodeLegDelay holds the decode leg at the proxy this long after P
	// answered (a slow or stalled proxy): a leg later than the claim
	// timeout finds the lease released unclaimed (S25).
	DecodeLegDelay time.Duration
	// injected is set once a fault of the fault API (InjectFaults) hit
	// the request; dropAnswer: P's answer is dropped after the grant.
	injected, dropAnswer bool

	// P and D are the request's engines; nil ones are chosen by the
	// proxy's routing policy (Spec.Routing) when it sends the leg.
	P, D *Node
	// leg is the engine with the proxy's outstanding leg, for routing.
	leg *Node

	Tokens []int32 // received from D (in a fleet run only if keep)
	ntok   int     // tokens received
	keep   bool    // a fleet run keeps its tokens for the oracle
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
	// dReq is the request's id in the core dCore of its decode engine,
	// once that core accepted it.
	dReq      uint64
	dCore     *engine.Core
	responded bool // P's response reached the proxy
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

// World is a deterministic P/D cluster: engines, a network and a proxy,
// all in one goroutine on a virtual clock. Not safe for concurrent use.
type World struct {
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
	OnInstant func(c *World)
	// OnMessage, when set, sees every message delivered to an engine,
	// before the engine does.
	OnMessage func(c *World, from, to transport.Addr, m wire.Message)
	// Intercept, when set, may replace a message delivered to an engine
	// (corrupt it in flight: copy before changing, a duplicate is the same
	// value) or drop it (return nil).
	Intercept func(c *World, from, to transport.Addr, m wire.Message) wire.Message

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
	// apiFaults and apiRng decide the fault API's faults (faultapi.go);
	// nil: none.
	apiFaults     *faultapi.Registry
	apiRng        *rand.Rand
	injectedKinds map[faultapi.Kind]int
	// EarlyFrees counts leases that expired (or went unclaimed) while their
	// request waited for them at a decoder that was up and could reach P:
	// memory freed under a reader that still wanted it.
	EarlyFrees int
	// Exits counts nodes that drained and exited.
	Exits int

	trace  uint64 // FNV-1a over every event, in order
	Events uint64 // number of events traced

	// sparse drives, at each instant, only the nodes with work (poked
	// since they were last driven, or due by Loop.NextWake) instead of
	// every node; checkEvery > 0 runs the after-instant checks (check)
	// only once per checkEvery of simulated time. The fleet runs this way
	// (fleet.go); Options.Sparse runs swarm seeds this way to show that it
	// changes no outcome.
	sparse     bool
	wakes      wakeQueue
	pokes      []*Node // poked, to be driven at the next instant
	visit      []int   // this pass's nodes, a min-heap of indices
	passGen    uint64
	passIdx    int
	inPass     bool
	checkEvery time.Duration
	nextCheck  clock.Instant
	checking   bool // this instant runs the checks
	// fleet is the fleet run's bookkeeping (nil outside RunFleet);
	// fleetPick draws its proxy's engines.
	fleet     *fleetRun
	fleetPick *rand.Rand
}

// MsgFaults are message faults the cluster applies to what engines send.
// Unlike memnet's, they can be changed during a run.
type MsgFaults struct {
	// DropProb: the message is lost and its connection breaks (both ends
	// learn of it, the sender after Spec.Network.CloseDetectDelay).
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
func New(spec Spec) *World {
	c := &World{
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
	c.Net = memnet.New(rand.New(rand.NewPCG(spec.Seed, 0x6e6574)), spec.Network)
	for i := 0; i < spec.Prefill; i++ {
		c.addNode(transport.Addr(fmt.Sprintf("p%d", i)), engine.RolePrefill)
	}
	for i := 0; i < spec.Decode; i++ {
		c.addNode(transport.Addr(fmt.Sprintf("d%d", i)), engine.RoleDecode)
	}
	return c
}

func (c *World) addNode(name transport.Addr, role engine.Role) {
	n := &Node{Name: name, Role: role, Released: map[wire.Reason]int{}, ReleasedAt: map[wire.LeaseID]Release{},
		idx: len(c.Nodes), hix: -1, c: c}
	c.boot(n)
	c.Nodes = append(c.Nodes, n)
	c.byName[name] = n
}

// boot (re)creates a node's volatile state: a fresh core and executor.
func (c *World) boot(n *Node) {
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
	blocks := s.Blocks
	if n.Role == engine.RoleDecode && s.DecodeBlocks > 0 {
		blocks = s.DecodeBlocks
	}
	cfg := engine.Config{
		Pool:        kvblock.Config{NumBlocks: blocks, BlockSizeTokens: s.BlockSize, BytesPerToken: bpt},
		Sched:       sc,
		MaxModelLen: s.Profile.MaxModelLen, VocabSize: s.Profile.VocabSize, EOS: s.Profile.EOS,
		RecentFinished: 64, // only what a late abort is told (sim ignores it)
		Role:           n.Role, EngineID: string(n.Name), Transfer: &t, Secret: c.secret,
		Offload: s.Offload,
	}
	n.Core = engine.NewCore(cfg, rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64())))
	delete(c.expiry.claims, n.Name) // a restarted P has seen no claim
	n.port = newPort(c, n, n.Core)
	n.exec = synth.New(s.Profile, n.Core.Pool(), s.ModelSeed)
	n.Loop = engine.NewLoop(n.Core, n.exec, engine.LoopConfig{
		Port: n.port, Copier: copier{c, n}, Async: true,
	})
	n.tiers = offloadTiers(s.Offload)
	n.Hung, n.Paused = false, false
	n.backlog = nil
	n.draining = false
	n.touch()
	c.setWake(n, 0)
	if p := n.Core.Producer(); p != nil {
		p.OnRelease(func(now clock.Instant, l wire.LeaseID, r wire.Reason) {
			n.touch()
			n.Released[r]++
			n.ReleasedAt[l] = Release{At: now, Reason: r}
			c.mix(traceRelease, uint64(l), uint64(r))
			if (r == wire.ReasonExpired || r == wire.ReasonUnclaimed) && c.waitedFor(n, l, r) {
				c.EarlyFrees++
			}
			if c.fleet != nil {
				c.fleet.released(now, n, l)
				delete(c.byLease, leaseKey{n.Name, l})
			}
		})
	}
	c.Net.Listen(n.Name)
}

// waitedFor reports whether lease l of P node n, released for reason r,
// belongs to a request that is waiting for it at a decoder that is up,
// with no fault touching either node or the pair since the lease was
// granted (for unclaimed, since shortly before it), and that has not read
// it yet.
func (c *World) waitedFor(n *Node, l wire.LeaseID, r wire.Reason) bool {
	q := c.byLease[leaseKey{n.Name, l}]
	if q == nil || !q.atD || q.Done || q.Pulled || q.leaseRead || q.Fallback != 0 || q.D.Crashed || q.D.Hung || q.injected {
		return false
	}
	if cons := q.D.Core.Consumer(); q.dCore == q.D.Core && cons != nil && !cons.Has(q.dReq) {
		// D's consumer is done with the pull: it gave up on the lease
		// itself (P was silent past D's view of the lease: a pause of
		// P's loop longer than D's margin), or D has the blocks.
		return false
	}
	last := max(n.lastFault, q.D.lastFault, c.lastFault[pairKey(n.Name, q.D.Name)])
	if r == wire.ReasonUnclaimed {
		// A claim is D's first RENEW on the lease, which may wait for a
		// handshake that P's busy loop has not answered: a pause of P's
		// loop is not P's fault for a renewal that came on time (the
		// invariants judge those on arrival), but a claim that could not
		// leave D in time is not late at P either.
		last = max(last, n.lastPause)
	}
	since := q.GrantedAt
	if r == wire.ReasonUnclaimed {
		// A claim deadline is short (a third of the lease: tens of
		// milliseconds at the swarm's shortest leases): a fault just
		// before the grant still has D detecting the lost connection and
		// redialling, so the decoder counts as reachable only if the pair
		// was quiet for that long before the grant.
		since = since.Add(-(c.Spec.Network.CloseDetectDelay + c.Spec.Transfer.HeartbeatInterval))
	}
	return c.parts[pairKey(n.Name, q.D.Name)] == 0 && last < since
}

func pairKey(a, b transport.Addr) [2]transport.Addr {
	if b < a {
		a, b = b, a
	}
	return [2]transport.Addr{a, b}
}

// Node returns the node named name.
func (c *World) Node(name string) *Node { return c.byName[transport.Addr(name)] }

// touch marks that something reached n's core: it is checked after the
// instant and (sparse driving) driven at the next.
func (n *Node) touch() {
	n.active = true
	if !n.poke {
		n.poke = true
		n.c.poked(n)
	}
}
