package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/xfer"
)

// Options tune a swarm run. The zero value is the standard run: policy
// lease, digest-only pools, a 3 s faulty phase, a workload and fault
// profile drawn from the seed.
type Options struct {
	// Policy is the release policy of every engine.
	Policy xfer.Policy
	// FullKV runs pools with real KV bytes (slower); by default pools keep
	// only per-slot digests, which the oracle check and checksums use the
	// same way.
	FullKV bool
	// Requests overrides the drawn number of client requests (0: drawn).
	Requests int
	// NoFaults runs the drawn workload with no fault at all.
	NoFaults bool
	// SafetyPhase is how long faults are injected (0: 3 s simulated).
	SafetyPhase time.Duration
	// LivenessLimit bounds the fault-free phase that follows: by then every
	// request must be terminal, every lease ended and every pool free of
	// holds (0: 20 minutes simulated, beyond legacy-timeout's 480 s).
	LivenessLimit time.Duration
	// Offload forces offload tiers on every engine of every seed: "any"
	// with the policy drawn from the seed, or a policy name
	// (offload.PolicyNames). "" leaves it to the seed (one seed in four).
	// The seed's draws are the same either way: only the outcome of the
	// on/off draw and of the policy draw is replaced.
	Offload string
	// LeaseSpill forces the lease spill policy (offload.LeaseSpillNames)
	// of every seed with offload tiers; "" leaves it to the seed.
	LeaseSpill string
	// Blocks, when positive, replaces every engine's drawn pool capacity
	// (small pools put P under memory pressure).
	Blocks int
	// Sparse drives, at each instant, only the engines with work (the
	// fleet's way, fleet.go) instead of every engine; the checks stay on
	// every instant. The swarm with and without it must pass alike.
	Sparse bool
	// APIFaults injects the fault API's faults (package faultapi) during
	// the safety phase: each kind with probability one half, hitting a
	// share of the requests it applies to, drawn from a source of the seed
	// of its own (the seed's other draws stay as they were).
	APIFaults bool
	// Profile, when set, is used instead of a profile drawn from the seed
	// (the policy report's StandardFaults); the workload and the instants
	// of the faults are still drawn from the seed.
	Profile *Profile
}

// OffloadAny is the Options.Offload value that turns offload on for every
// seed with the policy the seed draws.
const OffloadAny = "any"

const (
	defaultSafetyPhase   = 3 * time.Second
	defaultLivenessLimit = 20 * time.Minute
)

func (o Options) withDefaults() Options {
	if o.SafetyPhase <= 0 {
		o.SafetyPhase = defaultSafetyPhase
	}
	if o.LivenessLimit <= 0 {
		o.LivenessLimit = defaultLivenessLimit
	}
	return o
}

// Profile is the fault profile and cluster shape drawn for one seed.
type Profile struct {
	Prefill, Decode    int
	Blocks             int
	DecodeMaxNumSeqs   int // D's batch bound (small: congestion)
	MaxWaiting         int // D's bound on requests waiting for KV
	Lease              time.Duration
	Fallback           xfer.Fallback
	MinDelay, MaxDelay time.Duration
	ReadBandwidth      float64
	PartitionTimeout   time.Duration
	Msg                MsgFaults
	Partitions         int
	Crashes            int
	Hangs              int
	Drains             int // graceful shutdowns (SIGTERM), each followed by a restart
	// Pauses are busy spells of an engine's loop (World.Pause), each up
	// to PauseMax, at random instants of the safety phase: messages reach
	// the engine and wait, stamped with their arrival.
	Pauses   int
	PauseMax time.Duration
	// PrefillStepScale, when positive, slows every prefill engine's steps
	// by this factor (Spec.PrefillStepScale): a long prefill lasts about a
	// lease, and P's leases must not expire because of it.
	PrefillStepScale float64
	AbortShare       float64
	// Burst: arrivals come within the first fifth of the window; LongShare
	// of the requests decode for hundreds of tokens (with a small D batch
	// bound, requests wait in D's queue for longer than a lease).
	Burst     bool
	LongShare float64
	// AbortBothLegs: the proxy aborts at P too (World.AbortBothLegs).
	AbortBothLegs bool
	// Offload is every engine's offload store policy (offload.PolicyNames),
	// "" for none; its tiers hold OffloadCPUBlocks and OffloadDiskBlocks
	// blocks (0: no such tier). A copy takes OffloadLatency plus its size
	// over OffloadBandwidth, and fails part way with OffloadFailProb.
	Offload                             string
	OffloadCPUBlocks, OffloadDiskBlocks int
	OffloadLatency                      time.Duration
	OffloadBandwidth, OffloadFailProb   float64
	// LeaseSpill is P's lease spill policy (offload.LeaseSpillNames) when
	// there are offload tiers.
	LeaseSpill string
	// Routing is the proxy's routing policy (proxy/route: round-robin or
	// least-loaded) choosing each leg's engine; "" assigns each request a
	// P and a D at random up front.
	Routing string
	// AbortWithin: a client that leaves does so within this long of
	// sending its request (0: 2 × Lease).
	AbortWithin time.Duration
	// Rate, when positive, makes arrivals a Poisson process of Rate
	// requests per simulated second (otherwise they are uniform over the
	// first 80% of the safety phase, or its first fifth with Burst).
	Rate float64
	// Script are faults at fixed instants, on top of the drawn ones.
	Script []Fault
}

// FaultKind is the kind of a scripted Fault.
type FaultKind uint8

const (
	// FaultCrash kills Node at At and restarts it For later (volatile
	// state lost, same engine id).
	FaultCrash FaultKind = iota + 1
	// FaultHang stops Node from stepping over [At, At+For).
	FaultHang
	// FaultPartition cuts Node from Peer over [At, At+For).
	FaultPartition
)

func (k FaultKind) String() string {
	switch k {
	case FaultCrash:
		return "crash"
	case FaultHang:
		return "hang"
	case FaultPartition:
		return "partition"
	}
	return fmt.Sprintf("FaultKind(%d)", k)
}

// Fault is one scripted fault of a Profile. Nodes are named p0.., d0...
type Fault struct {
	Kind FaultKind     `json:"kind"`
	Node string        `json:"node"`
	Peer string        `json:"peer,omitempty"` // FaultPartition only
	At   time.Duration `json:"at_ns"`
	For  time.Duration `json:"for_ns"`
}

func (f Fault) String() string {
	s := fmt.Sprintf("%s %s", f.Kind, f.Node)
	if f.Peer != "" {
		s += "-" + f.Peer
	}
	return s + fmt.Sprintf(" at %v for %v", f.At, f.For)
}

// StandardFaults is the fixed fault mix of the policy report (kvlease sim
// --report) and the demo, run by RunSeed like any swarm seed (pass it as
// Options.Profile; the seed draws the workload and the abort instants):
//
//   - one prefill engine and two decode engines of 512 blocks, tiny model
//     profile, 3 s leases (legacy-timeout keeps its fixed 480 s), fallback
//     by recompute;
//   - Poisson arrivals at 200 requests per simulated second, prompts cut
//     from three shared documents (prefix cache hits on both sides), 1–24
//     output tokens, and 5% long requests of 100–500 tokens;
//   - congested decoders: 4 running sequences each, and at most 6
//     requests waiting for remote KV (more are rejected: RELEASE(rejected)
//     where the policy sends one);
//   - 10% of clients leave within 100 ms of sending (aborts before, during
//     and after the prefill; the proxy tells only the engine that has the
//     request);
//   - each request's engines are drawn at random up front, as a proxy
//     without health checks routes (vLLM's toy proxy): requests sent to
//     the crashed d0 fail, and the proxy gives up the leases they carry;
//   - decode engine d0 crashes at 800 ms and restarts 400 ms later;
//   - a healthy network: 100–300 µs latency, 2 GB/s transfers, no message
//     faults.
func StandardFaults() Profile {
	return Profile{
		Prefill: 1, Decode: 2, Blocks: 512,
		DecodeMaxNumSeqs: 4, MaxWaiting: 6, LongShare: 0.05,
		Lease:    3 * time.Second,
		Fallback: xfer.FallbackRecompute,
		MinDelay: 100 * time.Microsecond, MaxDelay: 300 * time.Microsecond,
		ReadBandwidth: 2e9,
		AbortShare:    0.1, AbortWithin: 100 * time.Millisecond,
		Rate:   200,
		Script: []Fault{{Kind: FaultCrash, Node: "d0", At: 800 * time.Millisecond, For: 400 * time.Millisecond}},
	}
}

func (p Profile) String() string {
	s := fmt.Sprintf("%dP%dD blocks=%d d_seqs=%d waiting=%d lease=%v fallback=%v delay=[%v,%v] bw=%sB/s burst=%v long=%.2f ptimeout=%v drop=%.3f dup=%.2f reorder=%.2f partitions=%d crashes=%d hangs=%d aborts=%.2f",
		p.Prefill, p.Decode, p.Blocks, p.DecodeMaxNumSeqs, p.MaxWaiting, p.Lease, p.Fallback, p.MinDelay, p.MaxDelay,
		siPrefix(p.ReadBandwidth), p.Burst, p.LongShare, p.PartitionTimeout, p.Msg.DropProb, p.Msg.DupProb, p.Msg.ReorderProb,
		p.Partitions, p.Crashes, p.Hangs, p.AbortShare) + fmt.Sprintf(" corrupt=%.3f abort_both=%v drains=%d", p.Msg.CorruptProb, p.AbortBothLegs, p.Drains)
	if p.AbortWithin > 0 {
		s += fmt.Sprintf(" abort_within=%v", p.AbortWithin)
	}
	if p.Routing != "" {
		s += " routing=" + p.Routing
	}
	if p.Offload != "" {
		s += fmt.Sprintf(" offload=%s spill=%s cpu=%d disk=%d copy=%v+%sB/s fail=%.2f", p.Offload, p.LeaseSpill, p.OffloadCPUBlocks, p.OffloadDiskBlocks,
			p.OffloadLatency, siPrefix(p.OffloadBandwidth), p.OffloadFailProb)
	}
	if p.Rate > 0 {
		s += fmt.Sprintf(" rate=%g/s", p.Rate)
	}
	if p.Pauses > 0 {
		s += fmt.Sprintf(" pauses=%d pause_max=%v", p.Pauses, p.PauseMax)
	}
	if p.PrefillStepScale > 0 {
		s += fmt.Sprintf(" prefill_step_scale=%.0f", p.PrefillStepScale)
	}
	for _, f := range p.Script {
		s += " [" + f.String() + "]"
	}
	return s
}

// Result is what one seed's run produced. Counters cover the whole run;
// times are simulated.
type Result struct {
	Seed    uint64
	Policy  xfer.Policy
	Profile Profile

	Requests  int
	Completed int // finished normally, output checked against the oracle
	Failed    int // the client got an error
	Aborted   int // the client left
	Pulled    int // completed with the prefix pulled from P
	Fallbacks int // completed (or failed) after falling back

	// Goodput is completed requests per simulated second (up to the last
	// completion).
	Goodput float64
	// P99TTFT is the 99th percentile time to first token of completed
	// requests.
	P99TTFT time.Duration
	// UnreadBlockSeconds are block-seconds held by leases nobody read
	// (stranded memory); ReadBlockSeconds those of leases read.
	UnreadBlockSeconds, ReadBlockSeconds float64
	// EarlyFrees counts leases that expired while a reachable decoder was
	// waiting for them.
	EarlyFrees int
	// FreedReads counts READs of ended leases that vLLM's design would
	// have served from freed blocks (policy vllm only; the other policies
	// tell D, and refuse): the silent-corruption risk.
	FreedReads int
	// Released counts lease releases by reason, over every P.
	Released map[string]int
	// LastRelease is when the last lease ended (0: no lease ended): under
	// a fixed timeout, long after the last request.
	LastRelease time.Duration
	// Exits counts engines that drained and exited.
	Exits int
	// Spill counts lease blocks spilled to offload tiers and brought back
	// for reads (Node.SpillCounts, over every P).
	Spill SpillCounts

	// SimTime is the simulated time the run took (both phases); Events the
	// number of traced events; TraceHash a hash of every event in order:
	// the same seed gives the same hash.
	SimTime   time.Duration
	Events    uint64
	TraceHash uint64

	// HeldAtEnd is the blocks still held on live engines when the run
	// ended (a leak if not zero); Mismatches the completed requests whose
	// tokens differ from the oracle's (each is also a failure).
	HeldAtEnd  int
	Mismatches int

	// Injected counts the fault API's faults that hit requests, by kind
	// (Options.APIFaults).
	Injected map[string]int

	// Failures lists every invariant violation, liveness failure and
	// output mismatch (empty when the seed passed).
	Failures []string
}

// ReplayCommand is the command that replays seed with opts.
func ReplayCommand(seed uint64, opts Options) string {
	cmd := fmt.Sprintf("go run ./cmd/kvlease sim --seed %d", seed)
	if opts.Policy != xfer.PolicyLease {
		cmd += " --policy " + opts.Policy.String()
	}
	if opts.FullKV {
		cmd += " --full-kv"
	}
	if opts.Requests > 0 {
		cmd += fmt.Sprintf(" --requests %d", opts.Requests)
	}
	if opts.NoFaults {
		cmd += " --no-faults"
	}
	if opts.Offload != "" {
		cmd += " --offload " + opts.Offload
	}
	if opts.LeaseSpill != "" {
		cmd += " --lease-spill " + opts.LeaseSpill
	}
	if opts.APIFaults {
		cmd += " --api-faults"
	}
	if opts.Blocks > 0 {
		cmd += fmt.Sprintf(" --blocks %d", opts.Blocks)
	}
	if opts.Sparse {
		cmd += " --sparse"
	}
	if opts.SafetyPhase > 0 && opts.SafetyPhase != defaultSafetyPhase {
		cmd += " --safety-phase " + opts.SafetyPhase.String()
	}
	if opts.LivenessLimit > 0 && opts.LivenessLimit != defaultLivenessLimit {
		cmd += " --liveness-limit " + opts.LivenessLimit.String()
	}
	return cmd
}

// RunSeed runs one swarm seed: it draws a cluster, a workload and a fault
// profile from the seed, runs a safety phase with faults (invariants
// checked after every instant), then a liveness phase without faults on a
// connected cluster, and checks that every request ended, every lease
// ended and every pool holds nothing, and that every completed request's
// tokens equal the oracle's. The error, when the seed failed, names the
// seed, the failures and the replay command. A panic inside the cores is
// a failure too.
func RunSeed(seed uint64, opts Options) (res Result, err error) {
	opts = opts.withDefaults()
	res = Result{Seed: seed, Policy: opts.Policy}
	defer func() {
		if p := recover(); p != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
		}
		if len(res.Failures) > 0 {
			err = fmt.Errorf("sim: seed %d failed (%s; %s):\n  %s\nreplay: %s", seed, opts.Policy, res.Profile,
				strings.Join(res.Failures, "\n  "), ReplayCommand(seed, opts))
		}
	}()
	root := rand.New(rand.NewPCG(seed, 0x7377726d))
	sub := func() *rand.Rand { return rand.New(rand.NewPCG(root.Uint64(), root.Uint64())) }
	profRng, workRng, faultRng := sub(), sub(), sub()

	prof := drawProfile(profRng, rand.New(rand.NewPCG(seed, 0x0ff10ad)), opts)
	// From a source of their own, so that every other draw of the seed
	// stays as it was.
	drawLoopTiming(rand.New(rand.NewPCG(seed, 0x6c6f6f70)), &prof, opts)
	if opts.Profile != nil {
		prof = *opts.Profile
		if opts.NoFaults {
			prof = prof.withoutFaults()
		}
	}
	if opts.Blocks > 0 {
		prof.Blocks = opts.Blocks
	}
	res.Profile = prof
	spec := specFor(seed, root.Uint64(), prof, opts)
	c := New(spec)
	c.MsgFaults = prof.Msg
	c.AbortBothLegs = prof.AbortBothLegs
	c.StopOnViolation = true
	if opts.Sparse {
		c.setSparse()
	}

	reqs := drawWorkload(c, workRng, prof, opts)
	res.Requests = len(reqs)
	end := clock.Instant(opts.SafetyPhase)
	down := scheduleFaults(c, faultRng, prof, end)
	schedulePauses(c, rand.New(rand.NewPCG(seed, 0x7061757365)), prof, end)

	if opts.APIFaults && !opts.NoFaults {
		frng := rand.New(rand.NewPCG(seed, 0x6661756c7473))
		c.InjectFaults(drawAPIFaults(frng, prof.Lease), frng)
	}

	// Safety phase.
	c.RunUntil(end)
	c.InjectFaults(nil, nil) // the liveness phase is fault-free
	for k, n := range c.FaultsInjected() {
		if res.Injected == nil {
			res.Injected = map[string]int{}
		}
		res.Injected[k.String()] = n
	}
	if len(c.Violations) > 0 {
		res.SimTime = time.Duration(c.Now)
		res.Failures = append(res.Failures, c.Violations...)
		summarize(c, reqs, &res)
		return res, nil
	}
	// Liveness phase: faults stop, every node is up and connected (a node
	// still draining exits when done and is restarted then).
	c.MsgFaults = MsgFaults{}
	for _, name := range down {
		c.Restart(end, name)
	}
	idle := c.RunIdle(opts.LivenessLimit)
	for i := 0; idle && i < len(c.Nodes) && len(c.Violations) == 0; i++ {
		restarted := false
		for _, n := range c.Nodes {
			if n.Exited {
				c.Restart(c.Now, string(n.Name))
				restarted = true
			}
		}
		if !restarted {
			break
		}
		idle = c.RunIdle(opts.LivenessLimit)
	}
	res.SimTime = time.Duration(c.Now)
	res.Failures = append(res.Failures, c.Violations...)
	if len(c.Violations) > 0 {
		summarize(c, reqs, &res)
		return res, nil
	}
	if !idle {
		res.Failures = append(res.Failures, fmt.Sprintf("liveness: cluster still busy %v after the faults stopped", opts.LivenessLimit))
	}
	for _, n := range c.Nodes {
		if n.Crashed {
			res.Failures = append(res.Failures, fmt.Sprintf("liveness: %s still down", n.Name))
			continue
		}
		if err := n.Core.Check(); err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("%s: %v", n.Name, err))
		}
		// Once more without the shortcuts of Pool.Check and of the offload
		// tier's incremental Check.
		if err := n.Core.Pool().CheckFull(); err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("%s: %v", n.Name, err))
		}
		if co := n.Core.Offload(); co != nil {
			if err := co.CheckFull(); err != nil {
				res.Failures = append(res.Failures, fmt.Sprintf("%s: %v", n.Name, err))
			}
		}
		if h := n.Core.Pool().NumHeld(); h != 0 {
			res.HeldAtEnd += h
			res.Failures = append(res.Failures, fmt.Sprintf("liveness: %s still holds %d blocks", n.Name, h))
		}
		if p := n.Core.Producer(); p != nil && p.NumLeases() != 0 {
			res.Failures = append(res.Failures, fmt.Sprintf("liveness: %s has %d leases", n.Name, p.NumLeases()))
		}
		if cons := n.Core.Consumer(); cons != nil && !cons.Idle() {
			res.Failures = append(res.Failures, fmt.Sprintf("liveness: %s's consumer is not idle", n.Name))
		}
		if n.Core.NumRequests() != 0 {
			res.Failures = append(res.Failures, fmt.Sprintf("liveness: %s has %d live requests", n.Name, n.Core.NumRequests()))
		}
	}
	for _, r := range reqs {
		if !r.Done {
			res.Failures = append(res.Failures, fmt.Sprintf("liveness: request %s never ended", r.ID))
		}
	}
	bad := NewOracle(spec).Verify(c)
	res.Mismatches = len(bad)
	res.Failures = append(res.Failures, bad...)
	summarize(c, reqs, &res)
	if opts.Policy == xfer.PolicyLease && res.EarlyFrees > 0 {
		// Under the lease policy a decoder that waits, with no fault on it,
		// its P or the path between them, keeps its lease alive.
		res.Failures = append(res.Failures, fmt.Sprintf("%d leases expired under a waiting, reachable decoder", res.EarlyFrees))
	}
	return res, nil
}

// siPrefix formats v with three significant digits and a k, M or G
// prefix.
func siPrefix(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}
