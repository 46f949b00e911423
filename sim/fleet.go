package sim

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport/memnet"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// The fleet run: tens of prefill and a hundred or more decode engines (the
// same engine.Loops as the swarm's, digest-only) under a steady Poisson
// load and per-hour rates of crashes, partitions and client aborts, for
// simulated hours. It measures what leases cost at that scale rather than
// searching for bugs, so it runs lighter than a swarm seed:
//
//   - sparse driving: an instant drives only the engines with work (an
//     input since their last turn, or due by Loop.NextWake), not all;
//   - the after-instant invariant checks (Core.Check of every engine that
//     changed) run once per FleetOptions.CheckEvery of simulated time, and
//     once more at the end; the per-message expiry checks, the per-turn
//     due-lease and batch-budget checks and the producer's panics stay on;
//   - no per-request retention: a request's tokens are counted, not kept
//     (except for the ones the oracle checks, one in OracleEvery), and a
//     request leaves the cluster's books a little after it ends.
//
// The swarm (RunSeed) keeps every check on every instant.

// FleetOptions describe a fleet run. A zero size, count, duration, rate or
// bound means its DefaultFleetOptions value; zero fault rates and shares
// mean none.
type FleetOptions struct {
	Seed   uint64
	Policy xfer.Policy
	// Prefill and Decode are the numbers of engines.
	Prefill, Decode int
	// Duration is the simulated time of the run.
	Duration time.Duration
	// Rate is client arrivals per simulated second (Poisson).
	Rate float64
	// Prompts are PromptMin..PromptMax tokens (uniform), the first half
	// or more of each cut from one of a few shared documents (prefix cache
	// hits); outputs 1..2×OutputMean-1 tokens (uniform, EOS ignored).
	PromptMin, PromptMax int
	OutputMean           int
	// PrefillBlocks and DecodeBlocks are each engine's pool (16-token
	// blocks).
	PrefillBlocks, DecodeBlocks int
	// DecodeMaxNumSeqs bounds each decoder's batch; DecodeMaxWaiting its
	// queue of requests waiting for remote KV (more are rejected).
	DecodeMaxNumSeqs, DecodeMaxWaiting int
	// Lease is the lease duration of the heartbeat policies (vLLM's 30 s;
	// legacy-timeout keeps its fixed 480 s).
	Lease time.Duration
	// CrashesPerHour: engines (any, uniformly) killed per simulated hour,
	// each restarted RestartAfter later with empty state.
	CrashesPerHour float64
	RestartAfter   time.Duration
	// PartitionsPerHour: engines cut off from every engine of the other
	// role per simulated hour, each for PartitionMin..PartitionMax
	// (uniform); the proxy still reaches them.
	PartitionsPerHour          float64
	PartitionMin, PartitionMax time.Duration
	// AbortsPerHour: clients that disconnect per simulated hour (each
	// request leaves with probability AbortsPerHour/(3600×Rate)). A
	// SidecarShare of them leave after the prefill engine answered and
	// before the decode leg went out, behind a proxy that does not carry
	// the abort (llm-d's sidecar): nobody ever presents their lease. The
	// rest leave within AbortWithin of sending, and the proxy tells the
	// engine that has the request.
	AbortsPerHour float64
	SidecarShare  float64
	AbortWithin   time.Duration
	// Sample is the interval of the time series and of the pool
	// occupancy samples; CheckEvery that of the invariant checks.
	Sample, CheckEvery time.Duration
	// OracleEvery: one completed request in OracleEvery (by id) keeps its
	// tokens and is checked against the single-engine oracle (0: the
	// default; negative: none).
	OracleEvery int
}

// DefaultFleetOptions is the 16 P × 64 D fleet for one simulated hour
// (FleetProfile: a 405B-class model, one engine per eight GPUs):
// 24576-block prefill pools, 4096-block decode pools running 2 sequences
// at a time with up to 192 waiting, 215 requests per second of
// 128–640-token prompts and 32 output tokens on average — a little more
// than the decoders serve (~200/s), so their queues fill over the first
// half hour and the requests waiting in them hold leases, as in a
// congested fleet —, 30 s
// leases, 6 crashes (restarted after a minute), 6 partitions of 5–90 s
// and 3% of the clients leaving per hour (half of them behind a sidecar
// proxy).
func DefaultFleetOptions() FleetOptions {
	const rate = 215
	return FleetOptions{
		Seed: 1, Policy: xfer.PolicyLease,
		Prefill: 16, Decode: 64, Duration: time.Hour,
		Rate:      rate,
		PromptMin: 128, PromptMax: 640, OutputMean: 32,
		PrefillBlocks: 24576, DecodeBlocks: 4096,
		DecodeMaxNumSeqs: 2, DecodeMaxWaiting: 192,
		Lease:          30 * time.Second,
		CrashesPerHour: 6, RestartAfter: time.Minute,
		PartitionsPerHour: 6, PartitionMin: 5 * time.Second, PartitionMax: 90 * time.Second,
		AbortsPerHour: 0.03 * rate * 3600, SidecarShare: 0.5, AbortWithin: 10 * time.Second,
		Sample: 10 * time.Second, CheckEvery: 30 * time.Second,
		OracleEvery: 1000,
	}
}

// FleetProfile is the fleet's model: a Llama-3.1-405B shape (126 layers,
// 8 KV heads of dim 128, bf16 KV: 504 KiB per token) with FP8 weights on
// eight H100s (one node, tensor parallel), timed as model/synth's
// llama-8b is: 405 GB of weights at 80% of 8 × 3.35 TB/s take 19 ms per
// decode step, 504 KiB per context token 24 ns, 2 × 405e9 FLOPs per prompt
// token at ~60% of 8 × 1,979 TFLOPS (FP8 dense) 85 µs. 640 GB of HBM less
// the weights leave ~200 GB of KV: ~25k 16-token blocks.
func FleetProfile() synth.Profile {
	p, _ := synth.LookupProfile("llama-8b")
	p.Name = "llama-405b-fp8-tp8"
	p.Layers = 126
	p.DecodePerStep = 19 * time.Millisecond
	p.DecodePerContextToken = 24 * time.Nanosecond
	p.PrefillPerToken = 85 * time.Microsecond
	return p
}

func (o FleetOptions) withDefaults() FleetOptions {
	d := DefaultFleetOptions()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&o.Prefill, d.Prefill)
	set(&o.Decode, d.Decode)
	setD(&o.Duration, d.Duration)
	if o.Rate <= 0 {
		o.Rate = d.Rate
	}
	set(&o.PromptMin, d.PromptMin)
	set(&o.PromptMax, max(d.PromptMax, o.PromptMin))
	set(&o.OutputMean, d.OutputMean)
	set(&o.PrefillBlocks, d.PrefillBlocks)
	set(&o.DecodeBlocks, d.DecodeBlocks)
	set(&o.DecodeMaxNumSeqs, d.DecodeMaxNumSeqs)
	set(&o.DecodeMaxWaiting, d.DecodeMaxWaiting)
	setD(&o.Lease, d.Lease)
	setD(&o.RestartAfter, d.RestartAfter)
	setD(&o.PartitionMin, d.PartitionMin)
	setD(&o.PartitionMax, max(d.PartitionMax, o.PartitionMin))
	setD(&o.AbortWithin, d.AbortWithin)
	setD(&o.Sample, d.Sample)
	setD(&o.CheckEvery, d.CheckEvery)
	if o.OracleEvery == 0 {
		o.OracleEvery = d.OracleEvery
	}
	return o
}

// Validate reports options a fleet cannot run with.
func (o FleetOptions) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Prefill > 1000 || o.Decode > 10000:
		return fmt.Errorf("sim: fleet of %d P and %d D: want at most 1000 and 10000", o.Prefill, o.Decode)
	case o.Duration > 7*24*time.Hour:
		return fmt.Errorf("sim: fleet duration %v: want at most a week", o.Duration)
	case o.Rate > 1e6 || math.IsNaN(o.Rate):
		return fmt.Errorf("sim: fleet rate %g/s: want at most 1e6", o.Rate)
	case o.PromptMax > 65536:
		return fmt.Errorf("sim: fleet prompts up to %d tokens: want at most 65536", o.PromptMax)
	case o.CrashesPerHour < 0 || o.PartitionsPerHour < 0 || o.AbortsPerHour < 0:
		return fmt.Errorf("sim: fleet fault rates must not be negative")
	case o.AbortsPerHour > o.Rate*3600:
		return fmt.Errorf("sim: %g aborts per hour exceed the %g arrivals per hour", o.AbortsPerHour, o.Rate*3600)
	case o.Lease < time.Second:
		return fmt.Errorf("sim: fleet lease %v: want at least 1s", o.Lease)
	case o.SidecarShare < 0 || o.SidecarShare > 1:
		return fmt.Errorf("sim: sidecar share %g: want 0..1", o.SidecarShare)
	case (o.PromptMax+2*o.OutputMean)/16+2 > o.DecodeBlocks:
		return fmt.Errorf("sim: decode pools of %d blocks cannot hold one request", o.DecodeBlocks)
	}
	if o.Policy != xfer.PolicyLegacyTimeout {
		if err := policyConfig(o.Policy, o.Lease).Validate(); err != nil {
			return fmt.Errorf("sim: fleet lease %v: %w", o.Lease, err)
		}
	}
	return nil
}

// FleetResult is what a fleet run measured. Rates are per simulated
// second; block-seconds count 16-token blocks.
type FleetResult struct {
	Options FleetOptions

	Arrived   int // requests sent by clients
	Completed int // finished normally
	Failed    int // the client got an error (a rejection, a crashed engine)
	Aborted   int // the client left
	InFlight  int // not ended when the run stopped
	// Fallbacks are requests whose decoder could not pull the prefix and
	// recomputed it (or failed); QueueWaits those of them that waited in
	// the decoder's queue past its max queue wait (xfer.FallbackQueueWait).
	Fallbacks, QueueWaits int
	// ClaimTimeoutMean and ClaimTimeoutMax are the claim deadline the
	// prefill engines gave new leases (xfer.Producer.ClaimTimeout, adapted
	// to the claim latencies they observed), over the samples; zero
	// without one.
	ClaimTimeoutMean, ClaimTimeoutMax time.Duration
	// InFlightMean and InFlightPeak are the requests in flight (sent, not
	// ended), over the samples.
	InFlightMean float64
	InFlightPeak int
	// Goodput is completed requests per second.
	Goodput float64
	// P50TTFT, P99TTFT are over completed requests.
	P50TTFT, P99TTFT time.Duration

	// StrandedPerRequest is the block-seconds held by leases that no read
	// completed, per arrived request (stranded memory: leases of requests
	// waiting at a decoder, lost, rejected or abandoned);
	// LeasedPerRequest all leased block-seconds per arrived request.
	StrandedPerRequest, LeasedPerRequest float64
	// WastedPerRequest is the part of StrandedPerRequest held by leases
	// that nobody will ever read, per arrived request: leases that ended
	// (or went with a crash) unread, and leases still live at the end
	// whose request is over — memory held for nothing, for requests
	// rejected, abandoned, lost behind a proxy, or whose decoder crashed
	// or was cut off.
	WastedPerRequest float64
	// PeakLeaseOccupancy is the most blocks leased on one prefill engine
	// at any instant, over its pool's size; P99LeaseOccupancy the 99th
	// percentile of that share over every prefill engine at every sample.
	// Blocks are counted per lease: a prefix shared by several leases
	// counts once for each (lease demand on the pool, which can exceed
	// it; the pool holds a shared block once).
	PeakLeaseOccupancy, P99LeaseOccupancy float64
	// Heartbeat traffic: RENEW and RENEW_ACK messages sent, and their
	// encoded bytes (frame headers included), per second per prefill
	// engine and per decode engine (every message has one end of each);
	// Renewals the lease renewals (entries of RENEWs) prefill engines
	// handled per second per prefill engine.
	HeartbeatMsgsPerP, HeartbeatBytesPerP float64
	HeartbeatMsgsPerD, HeartbeatBytesPerD float64
	RenewalsPerP                          float64
	// EarlyFrees: leases that expired under a waiting, reachable decoder;
	// FreedReads: reads of ended leases vLLM serves from freed blocks
	// (policy vllm).
	EarlyFrees, FreedReads int
	// Released counts lease releases by reason.
	Released map[string]int
	// Crashes and Partitions are the faults injected.
	Crashes, Partitions int
	// OracleChecked requests matched the single-engine oracle
	// (mismatches are Failures).
	OracleChecked int

	// Series samples the fleet every Options.Sample.
	Series []FleetSample

	Events    uint64
	TraceHash uint64
	// Failures are invariant violations and oracle mismatches (empty when
	// the run passed).
	Failures []string
}

// FleetSample is the fleet at one instant.
type FleetSample struct {
	At time.Duration
	// Stranded are blocks held by leases no read completed; Leased all
	// leased blocks, over every prefill engine.
	Stranded, Leased int
	InFlight         int
}

// fleetRun is a fleet run's bookkeeping inside the cluster.
type fleetRun struct {
	opts   FleetOptions
	leases map[*Node]map[wire.LeaseID]*fleetLease
	held   map[*Node]int // leased blocks per P

	// leased and unread are the leased blocks over every P, and their
	// integrals over time (block-seconds) up to at.
	leased, unread     int
	leasedBS, unreadBS float64
	wastedBS           float64 // of leases ended unread
	at                 clock.Instant
	peak               int // most blocks leased on one P

	hbMsgs, hbBytes, renewals uint64
	claimSum                  time.Duration // ClaimTimeout over the samples
	claimN                    int
	frame                     []byte // encoding scratch

	occ    []int // leased blocks of each P at each sample
	ttft   []time.Duration
	oracle *Oracle
	res    *FleetResult
}

type fleetLease struct {
	blocks  int
	read    bool
	granted clock.Instant
}

// advance integrates the leased block counts up to now.
func (f *fleetRun) advance(now clock.Instant) {
	if now > f.at {
		dt := now.Sub(f.at).Seconds()
		f.leasedBS += float64(f.leased) * dt
		f.unreadBS += float64(f.unread) * dt
		f.at = now
	}
}

// granted records a lease P node n granted now.
func (f *fleetRun) granted(now clock.Instant, n *Node, g *xfer.Grant) {
	if _, live := n.Core.Producer().Lease(g.Lease); !live {
		return // released in the turn that granted it
	}
	f.advance(now)
	m := f.leases[n]
	if m == nil {
		m = map[wire.LeaseID]*fleetLease{}
		f.leases[n] = m
	}
	b := len(g.BlockIDs)
	m[g.Lease] = &fleetLease{blocks: b, granted: now}
	f.leased += b
	f.unread += b
	f.held[n] += b
	f.peak = max(f.peak, f.held[n])
}

// read records that P node n streamed a whole read of lease l.
func (f *fleetRun) read(now clock.Instant, n *Node, l wire.LeaseID) {
	if fl := f.leases[n][l]; fl != nil && !fl.read {
		f.advance(now)
		fl.read = true
		f.unread -= fl.blocks
	}
}

// released records the release of lease l on P node n.
func (f *fleetRun) released(now clock.Instant, n *Node, l wire.LeaseID) {
	fl := f.leases[n][l]
	if fl == nil {
		return
	}
	f.advance(now)
	delete(f.leases[n], l)
	f.drop(now, n, fl)
}

func (f *fleetRun) drop(now clock.Instant, n *Node, fl *fleetLease) {
	if !fl.read {
		f.wastedBS += float64(fl.blocks) * now.Sub(fl.granted).Seconds()
	}
	f.leased -= fl.blocks
	f.held[n] -= fl.blocks
	if !fl.read {
		f.unread -= fl.blocks
	}
}

// crashed forgets P node n's leases: they went with its memory.
func (f *fleetRun) crashed(now clock.Instant, n *Node) {
	f.advance(now)
	for _, l := range slices.Sorted(maps.Keys(f.leases[n])) { // a sum's order must not vary
		f.drop(now, n, f.leases[n][l])
	}
	delete(f.leases, n)
}

// heartbeat counts a message sent if it is a heartbeat.
func (f *fleetRun) heartbeat(m wire.Message) {
	switch m.(type) {
	case *wire.Renew, *wire.RenewAck:
		f.hbMsgs++
		f.frame = wire.AppendFrame(f.frame[:0], m)
		f.hbBytes += uint64(len(f.frame))
	}
}

// fleetSpec is the cluster of a fleet run.
func fleetSpec(o FleetOptions, seed uint64) Spec {
	s := DefaultSpec()
	s.Seed = seed
	s.Profile = FleetProfile()
	s.Prefill, s.Decode = o.Prefill, o.Decode
	s.Blocks, s.DecodeBlocks = o.PrefillBlocks, o.DecodeBlocks
	s.DigestOnly = true
	sc := sched.DefaultConfig()
	sc.MaxNumSeqs = 64
	sc.MaxNumBatchedTokens = 8192
	sc.MaxWaiting = 4096
	s.Sched = sc
	dc := sc
	dc.MaxNumSeqs = o.DecodeMaxNumSeqs
	s.DecodeSched = dc
	t := policyConfig(o.Policy, o.Lease)
	t.MaxWaiting = o.DecodeMaxWaiting
	t.Fallback = xfer.FallbackRecompute
	s.Transfer = t
	// A datacenter network: 20–100 µs, 10 GB/s reads (the modelled size
	// is the full KV's), a lost connection noticed after 50 ms.
	s.Network = memnet.Conditions{MinDelay: 20 * time.Microsecond, MaxDelay: 100 * time.Microsecond, CloseDetectDelay: 50 * time.Millisecond}
	s.ReadBandwidth = 10e9
	s.HTTPDelay = 200 * time.Microsecond
	return s
}

// RunFleet runs one fleet: the same seed and options give the same result.
func RunFleet(opts FleetOptions) (res FleetResult, err error) {
	if err := opts.Validate(); err != nil {
		return FleetResult{}, err
	}
	o := opts.withDefaults()
	res = FleetResult{Options: o, Released: map[string]int{}}
	defer func() {
		if p := recover(); p != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
		}
		if len(res.Failures) > 0 {
			err = fmt.Errorf("sim: fleet seed %d (%s) failed: %s", o.Seed, o.Policy, res.Failures[0])
		}
	}()
	root := rand.New(rand.NewPCG(o.Seed, 0x666c656574))
	sub := func() *rand.Rand { return rand.New(rand.NewPCG(root.Uint64(), root.Uint64())) }
	workRng, faultRng, pickRng := sub(), sub(), sub()
	spec := fleetSpec(o, root.Uint64())
	c := New(spec)
	c.setSparse()
	c.checkEvery = o.CheckEvery
	c.StopOnViolation = true
	f := &fleetRun{opts: o, leases: map[*Node]map[wire.LeaseID]*fleetLease{}, held: map[*Node]int{}, res: &res}
	if o.OracleEvery > 0 {
		f.oracle = NewOracle(spec)
	}
	c.fleet = f
	c.fleetPick = pickRng
	c.downUntil = map[*Node]clock.Instant{}

	end := clock.Instant(o.Duration)
	c.scheduleFleetFaults(faultRng, end)
	arrivals := newFleetWorkload(c, workRng)
	arrivals.next(0)

	var inflightSum float64
	for t := clock.Instant(0); ; {
		t = min(t.Add(o.Sample), end)
		c.RunUntil(t)
		if c.stopped() {
			break
		}
		s := c.fleetSample()
		res.Series = append(res.Series, s)
		inflightSum += float64(s.InFlight)
		res.InFlightPeak = max(res.InFlightPeak, s.InFlight)
		if t == end {
			break
		}
	}
	f.advance(c.Now)
	for _, n := range c.Nodes {
		for _, l := range slices.Sorted(maps.Keys(f.leases[n])) { // a sum's order must not vary
			fl := f.leases[n][l]
			if q := c.byLease[leaseKey{n.Name, l}]; !fl.read && (q == nil || q.Done) {
				f.wastedBS += float64(fl.blocks) * c.Now.Sub(fl.granted).Seconds()
			}
		}
		if n.Crashed {
			continue
		}
		if err := n.Core.Check(); err != nil {
			c.violate("%s: %v", n.Name, err)
		}
	}
	c.retire(clock.Never)
	slices.Sort(res.Failures) // the oracle's, found in map order
	res.Failures = append(c.Violations, res.Failures...)
	for _, r := range c.Requests {
		if !r.Done {
			res.InFlight++
		}
	}
	secs := time.Duration(c.Now).Seconds()
	if len(res.Series) > 0 {
		res.InFlightMean = inflightSum / float64(len(res.Series))
	}
	if secs > 0 {
		res.Goodput = float64(res.Completed) / secs
		np, nd := float64(o.Prefill)*secs, float64(o.Decode)*secs
		res.HeartbeatMsgsPerP, res.HeartbeatBytesPerP = float64(f.hbMsgs)/np, float64(f.hbBytes)/np
		res.HeartbeatMsgsPerD, res.HeartbeatBytesPerD = float64(f.hbMsgs)/nd, float64(f.hbBytes)/nd
		res.RenewalsPerP = float64(f.renewals) / np
	}
	if res.Arrived > 0 {
		res.StrandedPerRequest = f.unreadBS / float64(res.Arrived)
		res.LeasedPerRequest = f.leasedBS / float64(res.Arrived)
		res.WastedPerRequest = f.wastedBS / float64(res.Arrived)
	}
	if f.claimN > 0 {
		res.ClaimTimeoutMean = f.claimSum / time.Duration(f.claimN)
	}
	res.PeakLeaseOccupancy = float64(f.peak) / float64(o.PrefillBlocks)
	res.P99LeaseOccupancy = f.occupancyP99()
	if len(f.ttft) > 0 {
		slices.Sort(f.ttft)
		res.P50TTFT = f.ttft[(len(f.ttft)+1)/2-1]
		res.P99TTFT = f.ttft[(len(f.ttft)*99+99)/100-1]
	}
	for _, n := range c.Nodes {
		res.FreedReads += n.FreedReads()
		for r, k := range n.Released {
			res.Released[r.String()] += k
		}
	}
	res.EarlyFrees = c.EarlyFrees
	res.Events = c.Events
	res.TraceHash = c.TraceHash()
	return res, nil
}

// occ are the per-P lease occupancy samples, in blocks.
func (f *fleetRun) occupancyP99() float64 {
	if len(f.occ) == 0 {
		return 0
	}
	slices.Sort(f.occ)
	return float64(f.occ[(len(f.occ)*99+99)/100-1]) / float64(f.opts.PrefillBlocks)
}

// fleetSample samples the fleet now, retires requests that ended a while
// ago and forgets old release records.
func (c *World) fleetSample() FleetSample {
	f := c.fleet
	f.advance(c.Now)
	for _, n := range c.Nodes {
		if n.Role == engine.RolePrefill {
			f.occ = append(f.occ, f.held[n])
			if p := n.Core.Producer(); p != nil && !n.Crashed {
				ct := p.ClaimTimeout(c.Now)
				f.claimSum += ct
				f.claimN++
				f.res.ClaimTimeoutMax = max(f.res.ClaimTimeoutMax, ct)
			}
		}
		// Only releases at the current instant matter to the expiry
		// checks (checkDueHandled); the fleet keeps no history.
		clear(n.ReleasedAt)
	}
	c.retire(c.Now.Add(-fleetRetireAfter))
	s := FleetSample{At: time.Duration(c.Now), Stranded: f.unread, Leased: f.leased}
	for _, r := range c.Requests {
		if !r.Done {
			s.InFlight++
		}
	}
	return s
}

// fleetRetireAfter is how long an ended request stays in the cluster's
// books: longer than any HTTP hop, so a late prefill answer still finds
// it (and the proxy gives its lease back).
const fleetRetireAfter = 10 * time.Second

// retire accounts for and forgets the requests that ended before t.
func (c *World) retire(t clock.Instant) {
	f := c.fleet
	res := f.res
	for id, r := range c.Requests {
		if !r.Done || r.DoneAt >= t {
			continue
		}
		delete(c.Requests, id)
		switch {
		case r.clientGone:
			res.Aborted++
		case r.Error != "":
			res.Failed++
		default:
			res.Completed++
			f.ttft = append(f.ttft, r.FirstAt.Sub(r.SentAt))
			if r.keep {
				f.verify(r)
			}
		}
		if r.Fallback != 0 {
			res.Fallbacks++
		}
		if r.Fallback == xfer.FallbackQueueWait {
			res.QueueWaits++
		}
	}
}

// verify checks a kept request's tokens against the oracle.
func (f *fleetRun) verify(r *Req) {
	want, st := f.oracle.Run(r)
	f.res.OracleChecked++
	if r.Status != st || !slices.Equal(r.Tokens, want) {
		f.res.Failures = append(f.res.Failures, fmt.Sprintf("request %s: %d tokens (%v), the oracle's %d (%v)", r.ID, len(r.Tokens), r.Status, len(want), st))
	}
}

// scheduleFleetFaults schedules crashes (with restarts) and partitions as
// Poisson processes over [0, end).
func (c *World) scheduleFleetFaults(rng *rand.Rand, end clock.Instant) {
	o := c.fleet.opts
	poisson := func(perHour float64, fn func(at clock.Instant)) {
		if perHour <= 0 {
			return
		}
		mean := float64(time.Hour) / perHour
		for at := clock.Instant(rng.ExpFloat64() * mean); at < end; at = at.Add(time.Duration(rng.ExpFloat64() * mean)) {
			fn(at)
		}
	}
	poisson(o.CrashesPerHour, func(at clock.Instant) {
		n := c.Nodes[rng.IntN(len(c.Nodes))]
		c.Crash(at, string(n.Name))
		c.Restart(at.Add(o.RestartAfter), string(n.Name))
		c.fleet.res.Crashes++
	})
	poisson(o.PartitionsPerHour, func(at clock.Instant) {
		n := c.Nodes[rng.IntN(len(c.Nodes))]
		d := o.PartitionMin + time.Duration(rng.Int64N(int64(o.PartitionMax-o.PartitionMin)+1))
		for _, m := range c.Nodes {
			if m.Role != n.Role {
				c.Partition(at, string(n.Name), string(m.Name), d)
			}
		}
		c.fleet.res.Partitions++
	})
}

// fleetWorkload draws the clients' requests one arrival at a time.
type fleetWorkload struct {
	c    *World
	rng  *rand.Rand
	docs [][]int32
	seq  int
	// pAbort: a request's client leaves.
	pAbort float64
}

func newFleetWorkload(c *World, rng *rand.Rand) *fleetWorkload {
	o := c.fleet.opts
	w := &fleetWorkload{c: c, rng: rng, pAbort: o.AbortsPerHour / (3600 * o.Rate)}
	w.docs = make([][]int32, 8)
	for i := range w.docs {
		w.docs[i] = make([]int32, o.PromptMax)
		for j := range w.docs[i] {
			w.docs[i][j] = int32(32 + rng.IntN(90))
		}
	}
	return w
}

// next schedules the arrival after the one at instant at.
func (w *fleetWorkload) next(at clock.Instant) {
	c, o := w.c, w.c.fleet.opts
	at = at.Add(time.Duration(w.rng.ExpFloat64() / o.Rate * float64(time.Second)))
	if at >= clock.Instant(o.Duration) {
		return
	}
	c.At(at, func() {
		w.arrive()
		w.next(at)
	})
}

// arrive sends one request now.
func (w *fleetWorkload) arrive() {
	c, o, rng := w.c, w.c.fleet.opts, w.rng
	w.seq++
	plen := o.PromptMin + rng.IntN(o.PromptMax-o.PromptMin+1)
	doc := w.docs[rng.IntN(len(w.docs))]
	shared := plen/2 + rng.IntN(plen/2+1)
	prompt := make([]int32, plen)
	copy(prompt, doc[:shared])
	for i := shared; i < plen; i++ {
		prompt[i] = int32(32 + rng.IntN(90))
	}
	r := &Req{ID: fmt.Sprintf("f%d", w.seq), Prompt: prompt, MaxTokens: 1 + rng.IntN(2*o.OutputMean-1), IgnoreEOS: true}
	r.keep = o.OracleEvery > 0 && w.seq%o.OracleEvery == 0
	c.fleet.res.Arrived++
	c.Submit(c.Now, r)
	if rng.Float64() < w.pAbort {
		if rng.Float64() < o.SidecarShare {
			r.LostAfterPrefill = true
		} else {
			c.Abort(c.Now.Add(time.Duration(rng.Int64N(int64(o.AbortWithin)))), r)
		}
	}
}

// fleetRoute is the fleet proxy's choice of engine for a leg: one of role
// at random among those its health checks see up (not crashed) and that
// it did not fail to reach within RoutingPause.
func (c *World) fleetRoute(role engine.Role) *Node {
	first, lo := 0, c.Spec.Prefill // New adds the P engines first
	if role == engine.RoleDecode {
		first, lo = c.Spec.Prefill, c.Spec.Decode
	}
	for range 8 {
		n := c.Nodes[first+c.fleetPick.IntN(lo)]
		if !n.Crashed && c.downUntil[n] <= c.Now {
			return n
		}
	}
	live := c.cands[:0]
	for _, n := range c.Nodes[first : first+lo] {
		if !n.Crashed && c.downUntil[n] <= c.Now {
			live = append(live, n)
		}
	}
	c.cands = live
	if len(live) == 0 {
		return c.Nodes[first+c.fleetPick.IntN(lo)] // all down: the leg fails
	}
	return live[c.fleetPick.IntN(len(live))]
}

// leftAfterPrefill ends request r whose client left once P answered,
// behind a proxy that drops the decode leg without telling anyone.
func (c *World) leftAfterPrefill(r *Req) {
	r.clientGone, r.Done, r.Status, r.DoneAt = true, true, sched.FinishedAborted, c.Now
	c.mix(traceAbort, hashString(r.ID))
}
