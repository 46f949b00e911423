package route

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
)

func picker(p Policy) *Picker {
	c := DefaultConfig()
	c.Policy = p
	return NewPicker(c)
}

func picks(p *Picker, now clock.Instant, loads []Load, skip []bool, n int) []int {
	var out []int
	for range n {
		i, ok := p.Pick(now, loads, skip)
		if !ok {
			out = append(out, -1)
			continue
		}
		out = append(out, i)
	}
	return out
}

func TestParsePolicy(t *testing.T) {
	for i, name := range Policies {
		p, err := ParsePolicy(name)
		if err != nil || p != Policy(i) || p.String() != name {
			t.Errorf("ParsePolicy(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := ParsePolicy("random"); !errors.Is(err, ErrUnknownPolicy) || !strings.Contains(err.Error(), "round-robin, least-loaded") {
		t.Errorf("ParsePolicy(random) error = %v, want ErrUnknownPolicy listing the choices", err)
	}
	if s := Policy(9).String(); s != "Policy(9)" {
		t.Errorf("String of an unknown policy = %q", s)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Config{{Policy: 7, StaleAfter: time.Second}, {Policy: RoundRobin}, {Policy: LeastLoaded, StaleAfter: -1}}
	for _, c := range bad {
		if c.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewPicker with an invalid config did not panic")
		}
	}()
	NewPicker(Config{})
}

func TestRoundRobin(t *testing.T) {
	const now = clock.Instant(10 * time.Second)
	loads := make([]Load, 3)
	busy := []Load{{InFlight: 100}, {}, {InFlight: 5}}
	tests := []struct {
		name  string
		loads []Load
		skip  []bool
		want  []int
	}{
		{"cycles in order", loads, nil, []int{0, 1, 2, 0, 1, 2}},
		{"ignores load", busy, nil, []int{0, 1, 2, 0}},
		{"skips", loads, []bool{false, true, false}, []int{0, 2, 0, 2}},
		{"short skip mask skips nothing past its end", loads, []bool{true}, []int{1, 2, 1, 2}},
		{"all skipped", loads, []bool{true, true, true}, []int{-1, -1}},
		{"none", nil, nil, []int{-1}},
		{"passes over a down engine", []Load{{}, {DownUntil: now + 1}, {}}, nil, []int{0, 2, 0, 2}},
		{"a pause that ended is up", []Load{{}, {DownUntil: now}, {}}, nil, []int{0, 1, 2}},
		{"all down: still chooses", []Load{{DownUntil: now + 1}, {DownUntil: now + 1}}, nil, []int{0, 1, 0}},
		{"down and the only up one skipped: chooses a down one", []Load{{DownUntil: now + 1}, {}}, []bool{false, true}, []int{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := picks(picker(RoundRobin), now, tt.loads, tt.skip, len(tt.want)); !slices.Equal(got, tt.want) {
				t.Errorf("picks = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLeastLoaded(t *testing.T) {
	const now = clock.Instant(10 * time.Second)
	fresh := now - clock.Instant(time.Second)
	stale := now - clock.Instant(3*time.Second)
	tests := []struct {
		name  string
		loads []Load
		skip  []bool
		want  int
	}{
		{"fewest in flight", []Load{{InFlight: 3}, {InFlight: 1}, {InFlight: 2}}, nil, 1},
		{"fresh waiting adds to in flight", []Load{
			{InFlight: 1, Scraped: true, ScrapedAt: fresh, Waiting: 5},
			{InFlight: 3, Scraped: true, ScrapedAt: fresh, Waiting: 0},
		}, nil, 1},
		{"stale waiting is ignored", []Load{
			{InFlight: 1, Scraped: true, ScrapedAt: stale, Waiting: 5},
			{InFlight: 3, Scraped: true, ScrapedAt: fresh, Waiting: 0},
		}, nil, 0},
		{"kv usage breaks a tie", []Load{
			{InFlight: 1, Scraped: true, ScrapedAt: fresh, KVUsage: 0.9},
			{InFlight: 1, Scraped: true, ScrapedAt: fresh, KVUsage: 0.2},
		}, nil, 1},
		{"NaN and negative figures count as zero", []Load{
			{InFlight: 1},
			{InFlight: 1, Scraped: true, ScrapedAt: fresh, Waiting: math.NaN(), KVUsage: -3},
			{InFlight: 0, Scraped: true, ScrapedAt: fresh, Waiting: math.Inf(1)},
		}, []bool{true}, 1},
		{"skip", []Load{{InFlight: 0}, {InFlight: 9}}, []bool{true}, 1},
		{"down engine passed over though idle", []Load{{DownUntil: now + 1}, {InFlight: 50}}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := picker(LeastLoaded).Pick(now, tt.loads, tt.skip)
			if !ok || got != tt.want {
				t.Errorf("Pick = %d, %v, want %d", got, ok, tt.want)
			}
		})
	}
}

func TestLeastLoadedRotatesTies(t *testing.T) {
	p := picker(LeastLoaded)
	loads := make([]Load, 3)
	if got := picks(p, 0, loads, nil, 6); !slices.Equal(got, []int{0, 1, 2, 0, 1, 2}) {
		t.Errorf("equal engines picked %v, want a rotation", got)
	}
}

// TestLeastLoadedBalances drives the picker as the proxy does (count a leg
// in when picked, out when done) and checks that no engine gets more than
// one leg above another.
func TestLeastLoadedBalances(t *testing.T) {
	p := picker(LeastLoaded)
	loads := make([]Load, 4)
	var live []int
	for step := range 1000 {
		if step%3 == 2 && len(live) > 0 {
			loads[live[0]].InFlight--
			live = live[1:]
			continue
		}
		i, ok := p.Pick(0, loads, nil)
		if !ok {
			t.Fatal("no pick")
		}
		loads[i].InFlight++
		live = append(live, i)
		lo, hi := loads[0].InFlight, loads[0].InFlight
		for _, l := range loads {
			lo, hi = min(lo, l.InFlight), max(hi, l.InFlight)
		}
		if hi-lo > 1 {
			t.Fatalf("step %d: in-flight spread %d..%d", step, lo, hi)
		}
	}
}

func TestNormalizeHostPort(t *testing.T) {
	good := map[string]string{
		"127.0.0.1:8000":       "127.0.0.1:8000",
		"Prefill-0.NS.svc:080": "prefill-0.ns.svc:80",
		"[::1]:9000":           "[::1]:9000",
		"[FE80::1]:1":          "[fe80::1]:1",
		"localhost:65535":      "localhost:65535",
	}
	for in, want := range good {
		if got, err := NormalizeHostPort(in); err != nil || got != want {
			t.Errorf("NormalizeHostPort(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	bad := []string{"", "host", "host:", ":80", "host:0", "host:65536", "host:http", "::1:80", "[::1:80",
		"[]:80", "ho st:80", "a/b:80", "user@host:80", strings.Repeat("a", 400) + ":80", "h\x7f:1"}
	for _, in := range bad {
		if got, err := NormalizeHostPort(in); !errors.Is(err, ErrBadHostPort) {
			t.Errorf("NormalizeHostPort(%q) = %q, %v, want ErrBadHostPort", in, got, err)
		}
	}
}

func TestParseHostPorts(t *testing.T) {
	got, err := ParseHostPorts(" a:1 ,, B:02,[::1]:3 ")
	if err != nil || !slices.Equal(got, []string{"a:1", "b:2", "[::1]:3"}) {
		t.Errorf("ParseHostPorts = %q, %v", got, err)
	}
	if got, err := ParseHostPorts(" , "); err != nil || got != nil {
		t.Errorf("ParseHostPorts of an empty list = %q, %v", got, err)
	}
	if _, err := ParseHostPorts("a:1,b"); !errors.Is(err, ErrBadHostPort) {
		t.Errorf("a bad entry: err = %v", err)
	}
	atBound := strings.Repeat("h:1,", MaxHostPorts)
	if got, err := ParseHostPorts(atBound); err != nil || len(got) != MaxHostPorts {
		t.Errorf("%d entries: %d, %v", MaxHostPorts, len(got), err)
	}
	if _, err := ParseHostPorts(atBound + "h:2"); !errors.Is(err, ErrBadHostPort) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("%d entries: err = %v, want the bound", MaxHostPorts+1, err)
	}
}

func TestMatch(t *testing.T) {
	engines := []string{"p0:1", "p1:1", "p2:1"}
	skip, any := Match([]string{"p2:1", "x:1", "p0:1"}, engines)
	if !any || !slices.Equal(skip, []bool{false, true, false}) {
		t.Errorf("Match = %v, %v", skip, any)
	}
	if skip, any := Match(nil, engines); !any || slices.Contains(skip, true) {
		t.Errorf("Match(nil) = %v, %v, want all kept", skip, any)
	}
	if _, any := Match([]string{"x:1"}, engines); any {
		t.Error("Match of an unknown engine kept one")
	}
	if _, any := Match(nil, nil); any {
		t.Error("Match over no engines kept one")
	}
	// A skip mask from Match drives Pick.
	skip, _ = Match([]string{"p1:1"}, engines)
	if i, ok := picker(RoundRobin).Pick(0, make([]Load, 3), skip); !ok || i != 1 {
		t.Errorf("Pick with the header's mask = %d, %v, want 1", i, ok)
	}
}

func FuzzParseHostPorts(f *testing.F) {
	for _, s := range []string{"a:1", "a:1,b:2", "[::1]:80", " , ", "h:65536", "[x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hps, err := ParseHostPorts(s)
		if err != nil {
			return
		}
		if len(hps) > MaxHostPorts {
			t.Fatalf("%d entries", len(hps))
		}
		for _, hp := range hps {
			again, err := NormalizeHostPort(hp)
			if err != nil || again != hp {
				t.Fatalf("normalized %q does not normalize to itself: %q, %v", hp, again, err)
			}
		}
	})
}
