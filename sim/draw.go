package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/proxy/route"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/transport/memnet"
	"github.com/kvlease/kvlease/xfer"
)

// What a swarm seed draws: its profile, its cluster spec, its workload and
// its fault schedule, each from its own sub-seeded source; and the summary
// of a run.

// withoutFaults is p with every fault removed (the shape and the
// workload stay).
func (p Profile) withoutFaults() Profile {
	p.Msg = MsgFaults{}
	p.PartitionTimeout = 0
	p.Partitions, p.Crashes, p.Hangs, p.Drains = 0, 0, 0, 0
	p.Pauses = 0
	p.AbortShare = 0
	p.Script = nil
	p.OffloadFailProb = 0
	return p
}

// drawOffload draws the offload tiers, their policy and their copies'
// timing and failures into p (Options.Offload may impose the policy).
func drawOffload(rng *rand.Rand, p *Profile, opts Options) {
	p.Offload = offload.PolicyNames[rng.IntN(len(offload.PolicyNames))]
	if opts.Offload != "" && opts.Offload != OffloadAny {
		p.Offload = opts.Offload
	}
	if k := rng.IntN(3); k != 1 {
		p.OffloadCPUBlocks = 8 + rng.IntN(p.Blocks)
	}
	if k := rng.IntN(3); k != 0 || p.OffloadCPUBlocks == 0 {
		p.OffloadDiskBlocks = 16 + rng.IntN(2*p.Blocks)
	}
	p.OffloadLatency = time.Duration(20+rng.IntN(2000)) * time.Microsecond
	p.OffloadBandwidth = math.Pow(10, 7+3*rng.Float64())
	if !opts.NoFaults && rng.IntN(2) == 0 {
		p.OffloadFailProb = 0.3 * rng.Float64()
	}
	// The lease spill policy follows from what was drawn rather than from
	// a draw of its own, so every other draw of the seed stays as it was.
	p.LeaseSpill = offload.LeaseSpillNames[(p.OffloadCPUBlocks+p.OffloadDiskBlocks)%len(offload.LeaseSpillNames)]
	if opts.LeaseSpill != "" {
		p.LeaseSpill = opts.LeaseSpill
	}
}

// drawProfile draws the cluster shape and fault profile. offRng draws the
// offload parameters of a seed that does not draw offload itself when
// Options.Offload forces it.
func drawProfile(rng, offRng *rand.Rand, opts Options) Profile {
	p := Profile{
		Prefill:          1 + rng.IntN(2),
		Decode:           1 + rng.IntN(3),
		Blocks:           96 + rng.IntN(416),
		DecodeMaxNumSeqs: 32,
		MaxWaiting:       4096,
		// 200 ms to 5 s, log-uniform: short leases make queue waits longer
		// than a lease common.
		Lease:         time.Duration(0.2 * math.Pow(25, rng.Float64()) * float64(time.Second)).Round(time.Millisecond),
		MinDelay:      time.Duration(50+rng.IntN(950)) * time.Microsecond,
		ReadBandwidth: math.Pow(10, 6+3.5*rng.Float64()),
	}
	p.MaxDelay = p.MinDelay + time.Duration(rng.IntN(5000))*time.Microsecond
	if rng.IntN(4) == 0 {
		// A slow transfer path (30 kB/s to 1 MB/s): a read lasts a good
		// part of a lease, so releases, aborts, expiries and D's read
		// timeouts land while P streams it (the lease is pinned).
		p.ReadBandwidth = math.Pow(10, 4.5+1.5*rng.Float64())
	}
	if rng.IntN(3) == 0 {
		p.DecodeMaxNumSeqs = 1 + rng.IntN(4)
		p.Burst = rng.IntN(2) == 0
		p.LongShare = 0.3 * rng.Float64()
	}
	if rng.IntN(4) == 0 {
		p.MaxWaiting = 1 + rng.IntN(6)
	}
	if rng.IntN(5) == 0 {
		p.Fallback = xfer.FallbackFail
	}
	if k := rng.IntN(3); k > 0 {
		p.Routing = route.Policies[k-1]
	}
	switch {
	case rng.IntN(4) == 0:
		drawOffload(rng, &p, opts)
	case opts.Offload != "":
		// Forced on a seed that does not draw offload: its parameters come
		// from their own source, so the rest of the profile (drawn after
		// this point from rng) is the seed's own.
		drawOffload(offRng, &p, opts)
	}
	if opts.NoFaults {
		return p
	}
	if rng.IntN(2) == 0 {
		p.Msg.DupProb = 0.2 * rng.Float64()
	}
	if rng.IntN(2) == 0 {
		p.Msg.ReorderProb = 0.2 * rng.Float64()
	}
	if rng.IntN(4) == 0 {
		p.Msg.CorruptProb = 0.1 * rng.Float64()
	}
	p.AbortShare = 0.3 * rng.Float64()
	p.AbortBothLegs = rng.IntN(2) == 0
	switch rng.IntN(4) {
	case 0:
		// Healthy nodes and paths: only duplication, reordering and
		// latency. Here a waiting decoder must never lose its lease.
	case 1: // one node or path fault
		switch rng.IntN(3) {
		case 0:
			p.Partitions = 1
		case 1:
			p.Crashes = 1
		default:
			p.Hangs = 1
		}
	default:
		if rng.IntN(2) == 0 {
			p.PartitionTimeout = time.Duration(50+rng.IntN(950)) * time.Millisecond
		}
		if rng.IntN(3) == 0 {
			p.Msg.DropProb = 0.02 * rng.Float64()
		}
		p.Partitions = rng.IntN(4)
		p.Crashes = rng.IntN(3)
		p.Hangs = rng.IntN(3)
		p.Drains = rng.IntN(2)
	}
	return p
}

// drawLoopTiming draws what times the engines' loops (issue 29): one seed
// in five has a slow model on its prefill engines, whose 320-token prefill
// step lasts half a lease to two leases; one in two (unless NoFaults) has
// its loops paused up to six times, each pause up to 1.5 leases, so that
// messages wait at busy engines past their leases' due instants.
func drawLoopTiming(rng *rand.Rand, p *Profile, opts Options) {
	if rng.IntN(5) == 0 {
		prof, _ := synth.LookupProfile("tiny")
		ref := prof.Duration(&model.Batch{Seqs: []model.Seq{{Count: 320}}})
		p.PrefillStepScale = float64(p.Lease) * (0.5 + 1.5*rng.Float64()) / float64(ref)
	}
	if !opts.NoFaults && rng.IntN(2) == 0 {
		p.Pauses = 1 + rng.IntN(6)
		p.PauseMax = time.Duration(float64(p.Lease) * (0.1 + 1.4*rng.Float64()))
	}
}

// schedulePauses pauses random engines' loops p.Pauses times inside
// [0, end), each for up to p.PauseMax.
func schedulePauses(c *World, rng *rand.Rand, p Profile, end clock.Instant) {
	for range p.Pauses {
		n := c.Nodes[rng.IntN(len(c.Nodes))]
		at := clock.Instant(rng.Int64N(int64(end)))
		c.Pause(at, string(n.Name), time.Duration(1+rng.Int64N(int64(p.PauseMax))))
	}
}

func specFor(seed, netSeed uint64, p Profile, opts Options) Spec {
	s := DefaultSpec()
	s.PrefillStepScale = p.PrefillStepScale
	s.Seed = netSeed ^ seed
	s.Prefill, s.Decode = p.Prefill, p.Decode
	s.Blocks = p.Blocks
	s.DigestOnly = !opts.FullKV
	t := policyConfig(opts.Policy, p.Lease)
	t.Fallback = p.Fallback
	t.MaxWaiting = p.MaxWaiting
	if t.MaxQueueWait > 0 {
		// 1 to 4 leases (the default), by the seed rather than a draw of
		// the profile's (the other draws stay those of earlier builds):
		// congested decoders reach it.
		t.MaxQueueWait = time.Duration(1+seed%4) * p.Lease
	}
	s.Transfer = t
	if p.DecodeMaxNumSeqs != s.Sched.MaxNumSeqs {
		s.DecodeSched = s.Sched
		s.DecodeSched.MaxNumSeqs = p.DecodeMaxNumSeqs
	}
	s.Network = memnet.Conditions{MinDelay: p.MinDelay, MaxDelay: p.MaxDelay,
		CloseDetectDelay: 50 * time.Millisecond, PartitionTimeout: p.PartitionTimeout}
	s.ReadBandwidth = p.ReadBandwidth
	if p.Offload != "" {
		pol, err := offload.ParsePolicy(p.Offload)
		if err != nil {
			panic(fmt.Sprintf("sim: profile offload: %v", err))
		}
		var tiers []offload.TierConfig
		if p.OffloadCPUBlocks > 0 {
			tiers = append(tiers, offload.TierConfig{Medium: offload.MediumCPU, Blocks: p.OffloadCPUBlocks})
		}
		if p.OffloadDiskBlocks > 0 {
			tiers = append(tiers, offload.TierConfig{Medium: offload.MediumDisk, Path: "sim", Blocks: p.OffloadDiskBlocks})
		}
		oc := offload.DefaultConfig(tiers)
		oc.Policy = pol
		if p.LeaseSpill != "" {
			if oc.LeaseSpill, err = offload.ParseLeaseSpill(p.LeaseSpill); err != nil {
				panic(fmt.Sprintf("sim: profile lease spill: %v", err))
			}
		}
		s.Offload = &oc
		s.OffloadLatency, s.OffloadBandwidth, s.OffloadFailProb = p.OffloadLatency, p.OffloadBandwidth, p.OffloadFailProb
	}
	if p.Routing != "" {
		rc := route.DefaultConfig()
		pol, err := route.ParsePolicy(p.Routing)
		if err != nil {
			panic(fmt.Sprintf("sim: profile routing: %v", err))
		}
		rc.Policy = pol
		s.Routing = &rc
	}
	return s
}

// policyConfig is policy pol's transfer configuration with leases of
// lease (legacy-timeout keeps its fixed timeout).
func policyConfig(pol xfer.Policy, lease time.Duration) xfer.Config {
	t := xfer.DefaultConfig(pol)
	if pol != xfer.PolicyLegacyTimeout {
		t = t.WithLease(lease)
	}
	return t
}

// drawWorkload submits the clients' requests: arrivals over the first 80%
// of the safety phase, prompts cut from a few shared documents (so decoders
// hit their prefix caches), some sampled with a fixed seed, some aborted
// by their client at a random moment.
func drawWorkload(c *World, rng *rand.Rand, p Profile, opts Options) []*Req {
	n := opts.Requests
	if n <= 0 {
		n = 10 + rng.IntN(31)
	}
	docs := make([][]int32, 3)
	for i := range docs {
		docs[i] = make([]int32, 320)
		for j := range docs[i] {
			docs[i][j] = int32(32 + rng.IntN(90))
		}
	}
	window := time.Duration(float64(opts.SafetyPhase) * 0.8)
	if p.Burst {
		window /= 5
	}
	abortWithin := p.AbortWithin
	if abortWithin <= 0 {
		abortWithin = 2 * p.Lease
	}
	var arrival clock.Instant
	var ps, ds []*Node
	for _, nd := range c.Nodes {
		if nd.Role == engine.RolePrefill {
			ps = append(ps, nd)
		} else {
			ds = append(ds, nd)
		}
	}
	reqs := make([]*Req, 0, n)
	for i := range n {
		doc := docs[rng.IntN(len(docs))]
		plen := 1 + rng.IntN(len(doc))
		prompt := append([]int32(nil), doc[:plen]...)
		if rng.IntN(2) == 0 { // a private suffix
			for range 1 + rng.IntN(40) {
				prompt = append(prompt, int32(32+rng.IntN(90)))
			}
		}
		r := &Req{
			ID: fmt.Sprintf("s%03d", i), Prompt: prompt, MaxTokens: 1 + rng.IntN(24),
			IgnoreEOS: rng.IntN(2) == 0, P: ps[rng.IntN(len(ps))], D: ds[rng.IntN(len(ds))],
		}
		if rng.Float64() < p.LongShare {
			r.MaxTokens = 100 + rng.IntN(400)
			r.IgnoreEOS = true
		}
		if rng.IntN(4) == 0 {
			r.Sampling = model.Sampling{Temperature: 0.8, TopP: 0.95, Seed: rng.Uint64()}
			r.SeedSet = true
		}
		if rng.IntN(20) == 0 {
			r.Local = true
		}
		if p.Routing != "" {
			r.P, r.D = nil, nil // the proxy's routing policy picks them
		}
		at := clock.Instant(rng.Int64N(int64(window)))
		if p.Rate > 0 {
			arrival = arrival.Add(time.Duration(rng.ExpFloat64() / p.Rate * float64(time.Second)))
			at = arrival
		}
		c.Submit(at, r)
		if rng.Float64() < p.AbortShare {
			c.Abort(at.Add(time.Duration(rng.Int64N(int64(abortWithin)))), r)
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// scheduleFaults schedules partitions, crashes (with restarts) and hangs
// inside [0, end) and returns the nodes that may still be down at end.
func scheduleFaults(c *World, rng *rand.Rand, p Profile, end clock.Instant) []string {
	span := time.Duration(end)
	var ps, ds []string
	for _, n := range c.Nodes {
		if n.Role == engine.RolePrefill {
			ps = append(ps, string(n.Name))
		} else {
			ds = append(ds, string(n.Name))
		}
	}
	all := append(append([]string(nil), ps...), ds...)
	within := func(max time.Duration) (clock.Instant, time.Duration) {
		at := rng.Int64N(int64(span))
		d := time.Duration(1 + rng.Int64N(int64(max)))
		if rest := span - time.Duration(at); d > rest {
			d = rest
		}
		return clock.Instant(at), d
	}
	for range p.Partitions {
		at, d := within(2 * p.Lease)
		c.Partition(at, ps[rng.IntN(len(ps))], ds[rng.IntN(len(ds))], d)
	}
	var down []string
	for range p.Crashes {
		name := all[rng.IntN(len(all))]
		at, d := within(time.Second)
		c.Crash(at, name)
		c.Restart(at.Add(d), name)
		down = append(down, name) // a later crash may outlive its restart
	}
	for range p.Hangs {
		at, d := within(2 * p.Lease)
		c.Hang(at, all[rng.IntN(len(all))], d)
	}
	for range p.Drains {
		name := all[rng.IntN(len(all))]
		at, grace := within(2 * p.Lease)
		c.Drain(at, name, grace)
		c.Restart(at.Add(grace+time.Duration(rng.Int64N(int64(time.Second)))), name) // if it exited by then
		down = append(down, name)
	}
	for _, f := range p.Script {
		at := clock.Instant(f.At)
		if c.Node(f.Node) == nil || (f.Kind == FaultPartition && c.Node(f.Peer) == nil) {
			panic(fmt.Sprintf("sim: scripted fault %v names an engine the cluster does not have", f))
		}
		switch f.Kind {
		case FaultCrash:
			c.Crash(at, f.Node)
			c.Restart(at.Add(f.For), f.Node)
			down = append(down, f.Node)
		case FaultHang:
			c.Hang(at, f.Node, f.For)
		case FaultPartition:
			c.Partition(at, f.Node, f.Peer, f.For)
		default:
			panic(fmt.Sprintf("sim: scripted fault of unknown kind %d", f.Kind))
		}
	}
	slices.Sort(down)
	return slices.Compact(down)
}

func summarize(c *World, reqs []*Req, res *Result) {
	var ttft []time.Duration
	var last clock.Instant
	for _, r := range reqs {
		switch {
		case r.clientGone:
			res.Aborted++
		case r.Error != "":
			res.Failed++
		case r.Done && r.Status != sched.FinishedAborted:
			res.Completed++
			ttft = append(ttft, r.FirstAt.Sub(r.SentAt))
			last = clock.Max(last, r.DoneAt)
			if r.Pulled {
				res.Pulled++
			}
		}
		if r.Fallback != 0 {
			res.Fallbacks++
		}
	}
	if last > 0 {
		res.Goodput = float64(res.Completed) / time.Duration(last).Seconds()
	}
	if len(ttft) > 0 {
		slices.Sort(ttft)
		res.P99TTFT = ttft[(len(ttft)*99+99)/100-1]
	}
	res.Released = map[string]int{}
	for _, n := range c.Nodes {
		res.FreedReads += n.FreedReads()
		res.Spill.add(n.SpillCounts())
		read, unread := n.BlockSeconds()
		res.ReadBlockSeconds += read
		res.UnreadBlockSeconds += unread
		for r, k := range n.Released {
			res.Released[r.String()] += k
		}
		for _, rel := range n.ReleasedAt {
			res.LastRelease = max(res.LastRelease, time.Duration(rel.At))
		}
	}
	res.EarlyFrees = c.EarlyFrees
	res.Exits = c.Exits
	res.Events = c.Events
	res.TraceHash = c.TraceHash()
}
