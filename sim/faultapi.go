package sim

import (
	"math/rand/v2"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/faultapi"
)

// The fault API's faults (package faultapi) in the simulation: the cluster's
// proxy legs ask the same pure core the engines' HTTP edges ask, at the
// simulated instant with a source of the seed, and carry the plan out as
// the edges do (httpapi/faultapi.go): lease faults go to P's core with the
// prefill leg, pull faults to D's with the lease, errors and rejections
// end the leg (P told), latency delays it, a dropped answer is
// undelivered. The invariants and the oracle check stay on: a fault
// changes when things happen, never what may be freed.

// InjectFaults makes the proxy legs of requests submitted from now on ask
// reg, with rng for its rates; nil stops it. The cluster owns reg and
// rng.
func (c *World) InjectFaults(reg *faultapi.Registry, rng *rand.Rand) {
	c.apiFaults, c.apiRng = reg, rng
}

// FaultsInjected counts the faults that hit requests, by kind.
func (c *World) FaultsInjected() map[faultapi.Kind]int { return c.injectedKinds }

// decideFaults is the plan of r's leg as q describes it.
func (c *World) decideFaults(r *Req, q faultapi.Request) faultapi.Plan {
	if c.apiFaults == nil {
		return faultapi.Plan{}
	}
	p := c.apiFaults.Decide(c.Now, c.apiRng, q)
	if !p.Empty() {
		r.injected = true
		if c.injectedKinds == nil {
			c.injectedKinds = map[faultapi.Kind]int{}
		}
		for _, f := range p.Fired {
			c.injectedKinds[f.Kind]++
			c.mix(traceInjected, hashString(r.ID), uint64(f.Kind))
		}
	}
	return p
}

// drawAPIFaults draws a fault API configuration for a seed: each kind
// with probability one half, hitting 2–30% of the requests it applies to,
// its delays and instants within two leases.
func drawAPIFaults(rng *rand.Rand, lease time.Duration) *faultapi.Registry {
	reg := faultapi.NewRegistry(int(len(faultapi.Kinds())))
	statuses := []int{429, 500, 503}
	for _, k := range faultapi.Kinds() {
		if rng.IntN(2) == 0 {
			continue
		}
		s := faultapi.Spec{Kind: k, Scope: faultapi.Scope{Rate: 0.02 + 0.28*rng.Float64()}}
		switch k {
		case faultapi.ExpireLease, faultapi.RevokeLease:
			s.After = time.Duration(rng.Int64N(int64(lease)))
		case faultapi.StallBlocks, faultapi.DelayPrefill, faultapi.StallPull, faultapi.Latency:
			s.Delay = time.Duration(1 + rng.Int64N(int64(2*lease)))
		case faultapi.CorruptBlocks:
			s.Reads = 1 + rng.IntN(3)
		case faultapi.HTTPError, faultapi.RejectDecode:
			s.Status = statuses[rng.IntN(len(statuses))]
		}
		if _, err := reg.Add(clock.Instant(0), s); err != nil {
			panic(err) // the registry holds one fault per kind
		}
	}
	return reg
}
