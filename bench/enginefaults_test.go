package bench

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRunPoint(t *testing.T) {
	for _, tc := range []struct {
		p    Progress
		want float64
	}{
		{Progress{Elapsed: time.Second, Duration: 4 * time.Second}, 0.25},
		{Progress{Done: 30, Total: 40}, 0.75},
		// Either bound may end the run: the further one counts.
		{Progress{Elapsed: time.Second, Duration: 2 * time.Second, Done: 1, Total: 40}, 0.5},
		{Progress{Elapsed: time.Second, Duration: 10 * time.Second, Done: 20, Total: 40}, 0.5},
		{Progress{Elapsed: time.Minute, Duration: time.Second}, 1},
		{Progress{Elapsed: time.Second}, 0}, // no bound known
	} {
		if got := runPoint(tc.p); got != tc.want {
			t.Errorf("runPoint(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestFaultPlan(t *testing.T) {
	kill := Fault{At: 0.3, Action: FaultKill, Engine: 1}
	restart := Fault{At: 0.6, Action: FaultRestart, Engine: 1}
	pause := Fault{At: 0.3, Action: FaultPause, Engine: 2}
	late := Fault{At: 0.9, Action: FaultKill, Engine: 2}
	p := newFaultPlan([]Fault{restart, late, kill, pause})
	at := func(point float64) Progress {
		return Progress{Elapsed: time.Duration(point * float64(10*time.Second)), Duration: 10 * time.Second}
	}
	if got := p.due(at(0.1)); len(got) != 0 {
		t.Fatalf("due(0.1) = %v", got)
	}
	// Ties keep the order they were given in.
	if got := p.due(at(0.3)); !reflect.DeepEqual(got, []Fault{kill, pause}) {
		t.Fatalf("due(0.3) = %v", got)
	}
	if got := p.due(at(0.35)); len(got) != 0 {
		t.Fatalf("a fault handed out twice: %v", got)
	}
	// The run ends at 0.5: the restart is a repair and still runs; the
	// late kill is skipped.
	repairs, skipped := p.rest()
	if !reflect.DeepEqual(repairs, []Fault{restart}) || !reflect.DeepEqual(skipped, []Fault{late}) {
		t.Fatalf("rest: repairs %v, skipped %v", repairs, skipped)
	}
	if got := p.due(at(1)); len(got) != 0 {
		t.Fatalf("after rest, due(1) = %v", got)
	}
}

// A run bounded by requests can stall on a hung engine: Done stops at
// the hang's point. The repair then falls due by the run's pace so far.
func TestFaultPlanStalledRun(t *testing.T) {
	pause := Fault{At: 0.3, Action: FaultPause, Engine: 1}
	resume := Fault{At: 0.6, Action: FaultResume, Engine: 1}
	p := newFaultPlan([]Fault{pause, resume})
	// 30 of 100 requests done after 1.5 s: 5 s per run.
	if got := p.due(Progress{Elapsed: 1500 * time.Millisecond, Done: 30, Total: 100}); !reflect.DeepEqual(got, []Fault{pause}) {
		t.Fatalf("due at 30%% = %v", got)
	}
	// Stalled at 31 done: the resume is due 0.3 × 5 s = 1.5 s later.
	if got := p.due(Progress{Elapsed: 2900 * time.Millisecond, Done: 31, Total: 100}); len(got) != 0 {
		t.Fatalf("due at 2.9 s = %v", got)
	}
	if got := p.due(Progress{Elapsed: 3 * time.Second, Done: 31, Total: 100}); !reflect.DeepEqual(got, []Fault{resume}) {
		t.Fatalf("due at 3 s = %v", got)
	}
	// Without a pace (no fault yet), time alone does not make a fault due.
	p = newFaultPlan([]Fault{pause})
	if got := p.due(Progress{Elapsed: time.Hour, Done: 1, Total: 100}); len(got) != 0 {
		t.Fatalf("due without pace = %v", got)
	}
}

func TestValidateFaults(t *testing.T) {
	ok := []Fault{{At: 0, Action: FaultKill, Engine: 0}, {At: 1, Action: FaultResume, Engine: 2}}
	if err := validateFaults(ok, 3); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Fault{
		{At: -0.1, Action: FaultKill},
		{At: 1.5, Action: FaultKill},
		{At: 0.5, Action: FaultKill, Engine: 3},
		{At: 0.5, Action: FaultKill, Engine: -1},
		{At: 0.5, Action: "explode"},
	} {
		if err := validateFaults([]Fault{f}, 3); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
}

// fakeFaulter records the actions done to it.
type fakeFaulter struct {
	mu   sync.Mutex
	log  []string
	fail map[string]error
}

func (f *fakeFaulter) act(what string, i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := fmt.Sprintf("%s %d", what, i)
	f.log = append(f.log, s)
	return f.fail[s]
}

func (f *fakeFaulter) Kill(i int) error                         { return f.act("kill", i) }
func (f *fakeFaulter) Restart(ctx context.Context, i int) error { return f.act("restart", i) }
func (f *fakeFaulter) Pause(i int) error                        { return f.act("pause", i) }
func (f *fakeFaulter) Resume(i int) error                       { return f.act("resume", i) }

func TestFaultDriver(t *testing.T) {
	target := &fakeFaulter{fail: map[string]error{"pause 2": errors.New("no such process")}}
	d := newFaultDriver(context.Background(), target, []Fault{
		{At: 0.3, Action: FaultKill, Engine: 1, EngineName: "decode0"},
		{At: 0.6, Action: FaultRestart, Engine: 1, EngineName: "decode0"},
		{At: 0.4, Action: FaultPause, Engine: 2},
		{At: 0.7, Action: FaultResume, Engine: 2},
		{At: 0.95, Action: FaultKill, Engine: 2},
	})
	for _, p := range []Progress{
		{Elapsed: 0, Duration: 10 * time.Second},
		{Elapsed: 3 * time.Second, Duration: 10 * time.Second},
		{Elapsed: 4 * time.Second, Duration: 10 * time.Second},
		{Elapsed: 6500 * time.Millisecond, Duration: 10 * time.Second},
	} {
		d.observe(p)
	}
	// The load ends at 65%: the resume still runs, the late kill does not.
	recs := d.finish()
	want := []string{"kill 1", "pause 2", "restart 1", "resume 2"}
	if !reflect.DeepEqual(target.log, want) {
		t.Fatalf("actions %v, want %v", target.log, want)
	}
	if len(recs) != 5 || !recs[4].Skipped || recs[4].Action != FaultKill || recs[1].Error != "no such process" {
		t.Fatalf("records %+v", recs)
	}
	for _, r := range recs[:4] {
		if r.Skipped || r.AtSeconds < 0 {
			t.Errorf("record %+v", r)
		}
	}
	if s := recs[0].String(); !strings.Contains(s, "kill decode0 at 30%") {
		t.Errorf("record text %q", s)
	}
	if s := recs[1].String(); !strings.Contains(s, "failed: no such process") {
		t.Errorf("record text %q", s)
	}
	// finish is idempotent; observe after it does nothing.
	d.observe(Progress{Elapsed: 10 * time.Second, Duration: 10 * time.Second})
	if again := d.finish(); len(again) != 5 || len(target.log) != 4 {
		t.Fatalf("second finish: %d records, %d actions", len(again), len(target.log))
	}
}

func TestScenarioApply(t *testing.T) {
	for _, s := range Scenarios {
		var c ClusterRun
		c.Cluster.Prefill = 2
		if err := s.Apply(&c); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if c.Scenario != s {
			t.Errorf("%s: scenario recorded as %q", s, c.Scenario)
		}
		if err := validateFaults(c.Faults, c.Cluster.Prefill+max(c.Cluster.Decode, 1)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		switch s {
		case ScenarioDecodeCrash, ScenarioDecodeHang:
			// The first decode engine comes after the 2 prefill engines,
			// and another decode engine takes its requests meanwhile.
			if len(c.Faults) != 2 || c.Faults[0].Engine != 2 || c.Faults[1].Engine != 2 || c.Cluster.Decode < 2 ||
				!c.Faults[1].Action.repairs() || c.Faults[0].At >= c.Faults[1].At {
				t.Errorf("%s: faults %+v, decode %d", s, c.Faults, c.Cluster.Decode)
			}
		case ScenarioDecodeReject:
			if c.Load.InvalidRate == 0 {
				t.Errorf("%s: no invalid requests", s)
			}
		case ScenarioDecodeCongested:
			if strings.Join(c.DecodeArgs, " ") != "--max-num-seqs 2" || len(c.PrefillArgs) != 0 {
				t.Errorf("%s: decode args %v, prefill args %v", s, c.DecodeArgs, c.PrefillArgs)
			}
		case ScenarioClientAbort:
			if c.Load.AbortRate == 0 {
				t.Errorf("%s: no aborts", s)
			}
		}
	}
	// A share the user set is kept.
	c := ClusterRun{Load: Config{InvalidRate: 0.05}}
	if err := ScenarioDecodeReject.Apply(&c); err != nil || c.Load.InvalidRate != 0.05 {
		t.Fatalf("invalid rate %v, err %v", c.Load.InvalidRate, err)
	}
	if _, err := ParseScenario("decode-explode"); err == nil || !strings.Contains(err.Error(), "decode-crash") {
		t.Fatalf("ParseScenario: %v", err)
	}
	c = ClusterRun{Faults: []Fault{{Action: FaultKill}}}
	if err := ScenarioDecodeCrash.Apply(&c); err == nil {
		t.Fatal("a scenario replaced the config's faults")
	}
}
