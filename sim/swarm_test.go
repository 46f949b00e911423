package sim

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/race"
	"github.com/kvlease/kvlease/offload"
	"github.com/kvlease/kvlease/xfer"
)

var (
	seedsFlag = flag.Int("seeds", 0, "number of swarm seeds to run per policy (0: the default for the mode)")
	seedFlag  = flag.Uint64("seed", 0, "first swarm seed")
	freshFlag = flag.Int("fresh", 10, "fresh swarm seeds, drawn from the clock, that TestSwarm runs after the fixed ones")
)

// swarmSeeds is how many seeds TestSwarm runs: a few hundred by default,
// fewer with -short, any number with -seeds.
func swarmSeeds() int {
	switch {
	case *seedsFlag > 0:
		return *seedsFlag
	case testing.Short():
		return 40
	case race.Enabled:
		return 60 // the detector slows the simulation twentyfold and finds nothing in one goroutine
	}
	return 300
}

// regressionSeeds failed once; each stays in the suite with what it found.
var regressionSeeds = []struct {
	seed uint64
	opts Options
	what string
}{
	{1537, Options{}, "D deadlock: pulled requests waiting with their blocks starved a preempted head of the queue while nothing ran (sched now reclaims waiting holds)"},
	{4522, Options{}, "the same D deadlock"},
	{1103, Options{Blocks: 48, LeaseSpill: "never"}, "D hang: a request grew one token past D's pool, was preempted and could never be admitted again; " +
		"the requests behind it waited forever and D renewed their leases on P forever (sched now stops a request at the pool's capacity)"},
	{62, Options{Blocks: 40}, "the same hang, with a pulled request queued behind the one that outgrew the pool"},
	{354, Options{Blocks: 40}, "D hang: the step preempted its only running request and admitted nothing; the empty batch meant " +
		"no further step, so the preempted head and a pulled request waiting with its blocks stayed queued (sched now admits after such a preemption)"},
	{697, Options{Blocks: 64}, "the same lost wake-up"},
	{212, Options{Blocks: 24, APIFaults: true}, "P hang, in the simulator's driver: a response dropped by the fault API was reported " +
		"undelivered (Loop.Delivered) after the turn, its lease released its blocks at once, and no turn followed, so the waiting prefills never saw them " +
		"(drive now turns again after an input its outputs handed over, as the production node does)"},
}

func TestSwarmRegressionSeeds(t *testing.T) {
	for _, rs := range regressionSeeds {
		if res, err := RunSeed(rs.seed, rs.opts); err != nil {
			t.Errorf("seed %d (%s): %v\n%s", rs.seed, rs.what, err, strings.Join(res.Failures, "\n"))
		}
	}
}

func TestSwarm(t *testing.T) {
	start := time.Now()
	n := swarmSeeds()
	var reqs, events int
	for i := range n {
		seed := *seedFlag + uint64(i)
		res, err := RunSeed(seed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		reqs += res.Requests
		events += int(res.Events)
	}
	t.Logf("%d seeds, %d requests, %d events in %v", n, reqs, events, time.Since(start))
}

// TestSwarmFresh runs a few seeds nobody ran before (drawn from the clock):
// over many CI runs they cover far more than the fixed list. A failure
// names its seed and the command that replays it.
func TestSwarmFresh(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	for i := range *freshFlag {
		seed := base + uint64(i)*0x9e3779b97f4a7c15
		if _, err := RunSeed(seed, Options{}); err != nil {
			t.Fatalf("fresh seed: %v", err)
		}
	}
	t.Logf("fresh seeds %d.. (step 0x9e3779b97f4a7c15): %d passed", base, *freshFlag)
}

func TestSwarmOtherPolicies(t *testing.T) {
	n := max(swarmSeeds()/10, 4)
	for _, pol := range []xfer.Policy{xfer.PolicyVLLM, xfer.PolicyVLLMLease, xfer.PolicyLegacyTimeout} {
		for i := range n {
			if _, err := RunSeed(*seedFlag+uint64(i), Options{Policy: pol}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSwarmOffloadForced: Options.Offload turns offload on for every seed,
// with the named policy or (OffloadAny) the drawn one, and changes nothing
// else the seed draws.
func TestSwarmOffloadForced(t *testing.T) {
	n := max(swarmSeeds()/20, 2)
	for i := range n {
		seed := *seedFlag + 2_000_000 + uint64(i)
		drawn, err := RunSeed(seed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range append([]string{OffloadAny}, offload.PolicyNames...) {
			res, err := RunSeed(seed, Options{Offload: name})
			if err != nil {
				t.Fatal(err)
			}
			p := res.Profile
			switch {
			case p.Offload == "" || p.OffloadCPUBlocks+p.OffloadDiskBlocks == 0:
				t.Fatalf("seed %d --offload %s: no offload in %s", seed, name, p)
			case name != OffloadAny && p.Offload != name:
				t.Fatalf("seed %d --offload %s: policy %s", seed, name, p.Offload)
			case drawn.Profile.Offload != "" && name == OffloadAny && p.String() != drawn.Profile.String():
				t.Fatalf("seed %d draws offload; forcing it changed the profile:\n%s\n%s", seed, drawn.Profile, p)
			}
			p.Offload, p.OffloadCPUBlocks, p.OffloadDiskBlocks, p.OffloadLatency, p.OffloadBandwidth, p.OffloadFailProb =
				drawn.Profile.Offload, drawn.Profile.OffloadCPUBlocks, drawn.Profile.OffloadDiskBlocks,
				drawn.Profile.OffloadLatency, drawn.Profile.OffloadBandwidth, drawn.Profile.OffloadFailProb
			if drawn.Profile.Offload == "" && p.String() != drawn.Profile.String() {
				t.Fatalf("seed %d --offload %s: the rest of the profile changed:\n%s\n%s", seed, name, drawn.Profile, p)
			}
		}
	}
}

func TestSwarmFullKV(t *testing.T) {
	// Real KV bytes: corruption hits the bytes, and the oracle compares
	// tokens derived from them.
	for i := range max(swarmSeeds()/20, 4) {
		if _, err := RunSeed(*seedFlag+1_000_000+uint64(i), Options{FullKV: true}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSwarmSameSeedSameTrace(t *testing.T) {
	for _, seed := range []uint64{1, 7, 42} {
		a, errA := RunSeed(seed, Options{})
		b, errB := RunSeed(seed, Options{})
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if a.TraceHash != b.TraceHash || a.Events != b.Events || a.Completed != b.Completed || a.SimTime != b.SimTime {
			t.Fatalf("seed %d: %x/%d vs %x/%d", seed, a.TraceHash, a.Events, b.TraceHash, b.Events)
		}
		if a.Events == 0 || a.Requests == 0 {
			t.Fatalf("seed %d did nothing: %+v", seed, a)
		}
	}
	a, _ := RunSeed(1, Options{})
	b, _ := RunSeed(2, Options{})
	if a.TraceHash == b.TraceHash {
		t.Fatal("different seeds, same trace")
	}
}

func TestSwarmFailureNamesSeedAndReplay(t *testing.T) {
	// A liveness bound nobody can meet: the run fails, and says how to
	// replay it.
	res, err := RunSeed(5, Options{Policy: xfer.PolicyLegacyTimeout, SafetyPhase: time.Millisecond, LivenessLimit: time.Nanosecond})
	if err == nil || len(res.Failures) == 0 {
		t.Fatal("no failure")
	}
	for _, want := range []string{"seed 5", "liveness", "go run ./cmd/kvlease sim --seed 5 --policy legacy-timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestSwarmSparse runs swarm seeds with sparse driving, the fleet's: an
// engine driven only when it has work must behave as one driven at every
// instant (every invariant and the oracle hold).
func TestSwarmSparse(t *testing.T) {
	n := max(swarmSeeds()/3, 10)
	for i := range n {
		for _, pol := range []xfer.Policy{xfer.PolicyLease, xfer.PolicyVLLM} {
			if _, err := RunSeed(*seedFlag+uint64(i), Options{Policy: pol, Sparse: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
