package bench

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseDist(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Dist
	}{
		{"128", Dist{DistFixed, 128, 0}},
		{" 64-256 ", Dist{DistUniform, 64, 256}},
		{"uniform:1-1", Dist{DistUniform, 1, 1}},
		{"normal:128,32", Dist{DistNormal, 128, 32}},
		{"normal:10,0", Dist{DistNormal, 10, 0}},
		{"exp:50", Dist{DistExp, 50, 0}},
		{"fixed:7", Dist{DistFixed, 7, 0}},
	} {
		got, err := ParseDist(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDist(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		again, err := ParseDist(got.String())
		if err != nil || again != got {
			t.Errorf("%q does not round-trip through %q", tc.in, got.String())
		}
	}
	for _, bad := range []string{"", "x", "0", "-5", "256-64", "normal:10", "normal:0,1", "normal:10,-1", "exp:0", "zipf:3", "1e9", "NaN", "uniform:1,2", "5-x"} {
		if d, err := ParseDist(bad); err == nil {
			t.Errorf("ParseDist(%q) = %+v, want an error", bad, d)
		}
	}
}

func TestDistSample(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		d      Dist
		lo, hi int
		mean   float64
	}{
		{Fixed(7), 7, 7, 7},
		{Dist{DistUniform, 10, 20}, 10, 20, 15},
		{Dist{DistNormal, 100, 10}, 1, MaxLenTokens, 100},
		{Dist{DistNormal, 2, 50}, 1, MaxLenTokens, -1}, // clamped at 1: mean not checked
		{Dist{DistExp, 40, 0}, 1, MaxLenTokens, 40},
	} {
		sum := 0
		const n = 20000
		for range n {
			v := tc.d.Sample(r)
			if v < tc.lo || v > tc.hi {
				t.Fatalf("%s: sample %d outside [%d, %d]", tc.d, v, tc.lo, tc.hi)
			}
			sum += v
		}
		if mean := float64(sum) / n; tc.mean > 0 && math.Abs(mean-tc.mean) > tc.mean*0.05 {
			t.Errorf("%s: mean %.2f, want about %v", tc.d, mean, tc.mean)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.URL = "http://127.0.0.1:8000"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.URL = "" }, "URL"},
		{func(c *Config) { c.URL = "localhost:8000" }, "URL"},
		{func(c *Config) { c.API = "embeddings" }, "API"},
		{func(c *Config) { c.Concurrency = 0 }, "Concurrency"},
		{func(c *Config) { c.Concurrency = MaxConcurrency + 1 }, "Concurrency"},
		{func(c *Config) { c.Rate = -1 }, "Rate"},
		{func(c *Config) { c.Rate = math.Inf(1) }, "Rate"},
		{func(c *Config) { c.Requests = MaxRequests + 1 }, "Requests"},
		{func(c *Config) { c.Requests, c.Duration = 0, 0 }, "Requests 0 and Duration 0"},
		{func(c *Config) { c.MaxInflight = MaxInflight + 1 }, "MaxInflight"},
		{func(c *Config) { c.AbortRate = 1.5 }, "AbortRate"},
		{func(c *Config) { c.AbortRate = math.NaN() }, "AbortRate"},
		{func(c *Config) { c.InvalidRate = -0.1 }, "InvalidRate"},
		{func(c *Config) { c.Timeout = 0 }, "Timeout"},
		{func(c *Config) { c.SLO.TTFT = -time.Second }, "SLO.TTFT"},
		{func(c *Config) { c.MetricsURLs = []string{"nope"} }, "MetricsURLs"},
		{func(c *Config) { c.Workload.Kind = "poems" }, "Workload.Kind"},
		{func(c *Config) { c.Workload.Turns = MaxTurns + 1 }, "Workload.Turns"},
		{func(c *Config) { c.Workload.Groups = 0 }, "Workload.Groups"},
		{func(c *Config) { c.Workload.OutputLen = Dist{DistUniform, 5, 2} }, "Workload.OutputLen"},
		{func(c *Config) { c.Workload.CharsPerToken = 0.01 }, "Workload.CharsPerToken"},
	} {
		c := ok
		tc.change(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field+" "+ce.Problem, tc.want) {
			t.Errorf("error %v, want a ConfigError of %q", err, tc.want)
		}
	}
	// Open loop needs no Concurrency; defaults fill the zero Config.
	open := Config{URL: "http://x:1", Rate: 5, Concurrency: -1}.withDefaults()
	if err := open.Validate(); err != nil {
		t.Fatalf("open loop: %v", err)
	}
	if (Config{URL: "http://x:1"}).withDefaults().Requests != DefaultConfig().Requests {
		t.Fatal("a run with neither Requests nor Duration gets no default")
	}
	if (Config{URL: "http://x:1", Duration: time.Second}).withDefaults().Requests != 0 {
		t.Fatal("a Duration run gets a request limit")
	}
}
