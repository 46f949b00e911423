package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/proxy/route"
)

// TestRoutingSpreadsAndAvoidsADeadEngine: with the proxy's routing policy
// the in-sim proxy picks each leg's engine; round robin spreads requests
// over the engines, and an engine that could not be reached is passed
// over for RoutingPause.
func TestRoutingSpreadsAndAvoidsADeadEngine(t *testing.T) {
	spec := DefaultSpec()
	spec.Prefill, spec.Decode = 2, 2
	rc := route.DefaultConfig()
	spec.Routing = &rc
	c := New(spec)
	var rs []*Req
	submit := func(at time.Duration, n int) {
		for range n {
			r := &Req{ID: fmt.Sprintf("r%02d", len(rs)), Prompt: prompt(len(rs), 40), MaxTokens: 4, IgnoreEOS: true}
			rs = append(rs, r)
			c.Submit(clock.Instant(at), r)
			at += 20 * ms
		}
	}
	submit(0, 8)
	c.Crash(clock.Instant(500*ms), "d1")
	submit(600*ms, 6)
	settle(t, c, 30*time.Second)
	legs := map[string]int{}
	for _, r := range rs[:8] {
		if !r.Done || r.Error != "" {
			t.Fatalf("%s: done %v error %q", r.ID, r.Done, r.Error)
		}
		legs[string(r.P.Name)]++
		legs[string(r.D.Name)]++
	}
	for _, n := range []string{"p0", "p1", "d0", "d1"} {
		if legs[n] != 4 {
			t.Errorf("round robin gave %s %d of 8 requests (%v)", n, legs[n], legs)
		}
	}
	// After d1's crash: at most one request fails on it, then d0 takes
	// every one.
	failed := 0
	for _, r := range rs[8:] {
		switch {
		case r.Error != "":
			failed++
			if r.D.Name != "d1" {
				t.Errorf("%s failed on %s: %s", r.ID, r.D.Name, r.Error)
			}
		case r.D.Name != "d0":
			t.Errorf("%s went to %s after it was found down", r.ID, r.D.Name)
		}
	}
	if failed > 1 {
		t.Errorf("%d requests failed on the dead engine; the proxy should pass it over after the first", failed)
	}
	if !c.Node("d1").Crashed {
		t.Fatal("d1 is up")
	}
}
