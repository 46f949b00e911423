package sim

import (
	"testing"
)

// BenchmarkSwarmSeed runs one swarm seed per iteration (seeds 0, 1, ...;
// digest-only, policy lease) and reports simulated requests per wall
// second, the figure of kvlease sim --seeds.
func BenchmarkSwarmSeed(b *testing.B) {
	reqs := 0
	seed := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		res, err := RunSeed(seed, Options{})
		if err != nil {
			b.Fatal(err)
		}
		reqs += res.Requests
		seed++
	}
	b.ReportMetric(float64(reqs)/b.Elapsed().Seconds(), "req/s")
}
