package sim

import (
	"flag"
	"reflect"
	"testing"
	"time"

	"github.com/kvlease/kvlease/xfer"
)

var (
	fleetProbe = flag.Duration("fleet-probe", 0, "run the default fleet for this long and log the result (a profiling aid)")
	fleetScale = flag.Float64("fleet-scale", 1, "with -fleet-probe: engines, rate and aborts scaled by this")
)

// smallFleet is a 2 P × 8 D fleet for two simulated minutes with every
// fault kind at rates high enough to happen.
func smallFleet(pol xfer.Policy) FleetOptions {
	o := DefaultFleetOptions()
	o.Policy = pol
	o.Prefill, o.Decode = 2, 8
	o.Rate = 28
	o.Duration = 2 * time.Minute
	o.CrashesPerHour, o.PartitionsPerHour = 90, 90
	o.AbortsPerHour = 0.05 * o.Rate * 3600
	o.OracleEvery = 50
	return o
}

// TestFleetDeterministic: the same seed gives the same result, series and
// trace; another seed does not.
func TestFleetDeterministic(t *testing.T) {
	a, err := RunFleet(smallFleet(xfer.PolicyLease))
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunFleet(smallFleet(xfer.PolicyLease))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", a, b)
	}
	o := smallFleet(xfer.PolicyLease)
	o.Seed = 2
	c, err := RunFleet(o)
	if err != nil {
		t.Fatal(err)
	}
	if c.TraceHash == a.TraceHash {
		t.Fatal("seeds 1 and 2 gave the same trace")
	}
}

// TestFleetMeasures checks the figures of a small fleet under every
// policy against what each policy must do.
func TestFleetMeasures(t *testing.T) {
	res := map[xfer.Policy]FleetResult{}
	for _, pol := range xfer.Policies {
		r, err := RunFleet(smallFleet(pol))
		if err != nil {
			t.Fatalf("%s: %v", pol, err)
		}
		res[pol] = r
		if r.Completed == 0 || r.Goodput <= 0 || r.OracleChecked == 0 || r.Crashes == 0 || r.Partitions == 0 || r.Aborted == 0 {
			t.Errorf("%s: a run without completions, oracle checks or faults: %+v", pol, r)
		}
		if r.Arrived != r.Completed+r.Failed+r.Aborted+r.InFlight {
			t.Errorf("%s: %d arrived, %d+%d+%d+%d accounted for", pol, r.Arrived, r.Completed, r.Failed, r.Aborted, r.InFlight)
		}
		if len(r.Series) != 12 || r.InFlightPeak == 0 {
			t.Errorf("%s: %d samples, peak in flight %d", pol, len(r.Series), r.InFlightPeak)
		}
		if r.StrandedPerRequest <= 0 || r.StrandedPerRequest > r.LeasedPerRequest || r.WastedPerRequest > r.StrandedPerRequest {
			t.Errorf("%s: block·s per request: unread %g, leased %g, wasted %g", pol, r.StrandedPerRequest, r.LeasedPerRequest, r.WastedPerRequest)
		}
		if r.PeakLeaseOccupancy <= 0 || r.P99LeaseOccupancy > r.PeakLeaseOccupancy {
			t.Errorf("%s: lease occupancy peak %g, p99 %g", pol, r.PeakLeaseOccupancy, r.P99LeaseOccupancy)
		}
	}
	if r := res[xfer.PolicyLegacyTimeout]; r.HeartbeatMsgsPerP != 0 || r.RenewalsPerP != 0 {
		t.Errorf("legacy-timeout sent heartbeats: %+v", r)
	}
	for _, pol := range []xfer.Policy{xfer.PolicyLease, xfer.PolicyVLLM, xfer.PolicyVLLMLease} {
		if r := res[pol]; r.HeartbeatMsgsPerP <= 0 || r.HeartbeatBytesPerD <= 0 || r.RenewalsPerP <= 0 {
			t.Errorf("%s: no heartbeats: %+v", pol, r)
		}
	}
	// Leases nobody will read: released at once (abort), or after the
	// claim timeout (lost decode legs) under lease; held for the lease
	// (30 s) under the vLLM designs, for 480 s under legacy-timeout.
	lease, vllm, legacy := res[xfer.PolicyLease].WastedPerRequest, res[xfer.PolicyVLLM].WastedPerRequest, res[xfer.PolicyLegacyTimeout].WastedPerRequest
	if !(lease < vllm && vllm < legacy) {
		t.Errorf("wasted lease block·s per request: lease %g, vllm %g, legacy-timeout %g: want increasing", lease, vllm, legacy)
	}
	if r := res[xfer.PolicyLease]; r.Released["unclaimed"] == 0 || r.EarlyFrees != 0 {
		t.Errorf("lease: %v released, %d early frees: want unclaimed leases of lost decode legs and no early free", r.Released, r.EarlyFrees)
	}
}

func TestFleetOptionsAreValidated(t *testing.T) {
	for _, o := range []FleetOptions{
		{Prefill: 2000},
		{AbortsPerHour: 1e9, Rate: 1},
		{SidecarShare: 2},
		{Lease: time.Millisecond},
		{DecodeBlocks: 4, PromptMax: 4096},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestFleetProbe(t *testing.T) {
	if *fleetProbe == 0 {
		t.Skip("-fleet-probe not given")
	}
	o := DefaultFleetOptions()
	o.Duration = *fleetProbe
	s := *fleetScale
	o.Prefill, o.Decode = int(float64(o.Prefill)*s), int(float64(o.Decode)*s)
	o.Rate, o.AbortsPerHour = o.Rate*s, o.AbortsPerHour*s
	start := time.Now()
	res, err := RunFleet(o)
	t.Logf("wall %v err %v", time.Since(start), err)
	res.Series = nil
	t.Logf("%+v", res)
}
