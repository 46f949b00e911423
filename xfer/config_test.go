package xfer

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig(PolicyLease)
	if c.LeaseDuration != 30*time.Second || c.HeartbeatInterval != 5*time.Second ||
		c.LeaseExtension != 20*time.Second || c.PeerGrace != 2*time.Second || c.Fallback != FallbackRecompute {
		t.Fatalf("%+v", c)
	}
	if DefaultConfig(PolicyLegacyTimeout).LeaseDuration != 480*time.Second {
		t.Fatal("legacy timeout")
	}
	for _, p := range Policies {
		want := p == PolicyLease
		if c := DefaultConfig(p); c.ClaimsLeases() != want || (want && c.ClaimTimeout != 10*time.Second) {
			t.Errorf("%v: claim timeout %v, ClaimsLeases %v", p, c.ClaimTimeout, c.ClaimsLeases())
		}
	}
	for _, p := range Policies {
		if err := DefaultConfig(p).Validate(); err != nil {
			t.Errorf("%v: %v", p, err)
		}
		if err := DefaultConfig(p).WithLease(3 * time.Second).Validate(); err != nil {
			t.Errorf("%v with a 3 s lease: %v", p, err)
		}
	}
}

func TestWithLease(t *testing.T) {
	c := DefaultConfig(PolicyLease).WithLease(30 * time.Second)
	if c.HeartbeatInterval != 5*time.Second || c.LeaseExtension != 20*time.Second || c.PeerGrace != 2*time.Second || c.RetryInterval != 200*time.Millisecond {
		t.Fatalf("%+v", c)
	}
	c = DefaultConfig(PolicyLease).WithLease(600 * time.Millisecond)
	if c.HeartbeatInterval != 100*time.Millisecond || c.RetryInterval != 50*time.Millisecond || c.ClaimTimeout != 200*time.Millisecond {
		t.Fatalf("%+v", c)
	}
	// No claim deadline stays none.
	c = DefaultConfig(PolicyLease)
	c.ClaimTimeout = 0
	if c = c.WithLease(3 * time.Second); c.ClaimTimeout != 0 || c.ClaimsLeases() {
		t.Fatalf("%+v", c)
	}
}

func TestPolicyPredicates(t *testing.T) {
	cases := []struct {
		p                                   Policy
		heartbeats, binds, aborts, notifies bool
	}{
		{PolicyLease, true, true, true, true},
		{PolicyVLLMLease, true, false, false, true},
		{PolicyLegacyTimeout, false, false, false, false},
		{PolicyVLLM, true, false, false, true},
	}
	for _, p := range Policies {
		c := DefaultConfig(p)
		vllm := p == PolicyVLLM
		if c.TellsExpiry() == vllm || c.ClaimsAtOnce() != (c.Heartbeats() && !vllm) ||
			c.NotifiesDrop() != (c.NotifiesRejection() && !vllm) || c.ClaimsLeases() != (p == PolicyLease) {
			t.Errorf("%v: tells expiry %v, claims at once %v, notifies drop %v", p, c.TellsExpiry(), c.ClaimsAtOnce(), c.NotifiesDrop())
		}
	}
	for _, tc := range cases {
		c := DefaultConfig(tc.p)
		if c.Heartbeats() != tc.heartbeats || c.BindsSessions() != tc.binds || c.HonoursAbort() != tc.aborts || c.NotifiesRejection() != tc.notifies {
			t.Errorf("%v: %v %v %v %v", tc.p, c.Heartbeats(), c.BindsSessions(), c.HonoursAbort(), c.NotifiesRejection())
		}
	}
}

func TestParsePolicyAndFallback(t *testing.T) {
	for _, p := range Policies {
		got, err := ParsePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("%v: %v %v", p, got, err)
		}
	}
	if _, err := ParsePolicy("lru"); err == nil || !strings.Contains(err.Error(), "legacy-timeout") {
		t.Errorf("bad policy: %v", err)
	}
	if Policy(9).String() != "Policy(9)" {
		t.Error(Policy(9).String())
	}
	for _, f := range []Fallback{FallbackRecompute, FallbackFail} {
		got, err := ParseFallback(f.String())
		if err != nil || got != f {
			t.Errorf("%v: %v %v", f, got, err)
		}
	}
	if _, err := ParseFallback("retry"); err == nil {
		t.Error("bad fallback accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *Config)
		want   string // part of the error; "" for valid
	}{
		{"default", func(c *Config) {}, ""},
		{"unknown policy", func(c *Config) { c.Policy = 7 }, "unknown policy"},
		{"zero lease", func(c *Config) { c.LeaseDuration = 0 }, "lease duration"},
		{"zero heartbeat", func(c *Config) { c.HeartbeatInterval = 0 }, "heartbeat interval"},
		{"lease under 3 heartbeats", func(c *Config) { c.HeartbeatInterval = 11 * time.Second }, "3 × the heartbeat"},
		{"lease exactly 3 heartbeats", func(c *Config) { c.HeartbeatInterval, c.ClaimTimeout = 10*time.Second, 10*time.Second }, ""},
		{"negative claim timeout", func(c *Config) { c.ClaimTimeout = -1 }, "claim timeout must not be negative"},
		{"no claim timeout", func(c *Config) { c.ClaimTimeout = 0 }, ""},
		{"claim timeout under a heartbeat", func(c *Config) { c.ClaimTimeout = 4 * time.Second }, "at least the heartbeat interval"},
		{"claim timeout exactly a heartbeat", func(c *Config) { c.ClaimTimeout = 5 * time.Second }, ""},
		{"claim timeout as long as the lease", func(c *Config) { c.ClaimTimeout = 30 * time.Second }, "shorter than the lease duration"},
		{"claim timeout under another policy", func(c *Config) { c.Policy = PolicyVLLMLease }, "lease policy only"},
		{"extension under 2 heartbeats", func(c *Config) { c.LeaseExtension = 9 * time.Second }, "extension"},
		{"negative grace", func(c *Config) { c.PeerGrace = -1 }, "peer grace"},
		{"zero grace", func(c *Config) { c.PeerGrace = 0 }, ""},
		{"max leases", func(c *Config) { c.MaxLeases = 0 }, "MaxLeases"},
		{"tombstones", func(c *Config) { c.Tombstones = -1 }, "Tombstones"},
		{"no tombstones", func(c *Config) { c.Tombstones = 0 }, ""},
		{"served reads", func(c *Config) { c.MaxServedReads = 0 }, "MaxServedReads"},
		{"inflight reads", func(c *Config) { c.MaxInflightReads = 0 }, "MaxInflightReads"},
		{"waiting", func(c *Config) { c.MaxWaiting = 0 }, "MaxWaiting"},
		{"attempts", func(c *Config) { c.MaxReadAttempts = 0 }, "MaxReadAttempts"},
		{"retry", func(c *Config) { c.RetryInterval = 0 }, "retry interval"},
	}
	for _, tc := range cases {
		c := DefaultConfig(PolicyLease)
		tc.change(&c)
		err := c.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// legacy-timeout has no heartbeats to check.
	c := DefaultConfig(PolicyLegacyTimeout)
	c.HeartbeatInterval = 0
	if err := c.Validate(); err != nil {
		t.Errorf("legacy without heartbeat: %v", err)
	}
}

func TestNewPanicsOnInvalidConfig(t *testing.T) {
	c := DefaultConfig(PolicyLease)
	c.MaxLeases = 0
	for name, f := range map[string]func(){
		"producer": func() { NewProducer(c, testPool(), "p", testSecret, nil) },
		"consumer": func() { NewConsumer(c, testPool(), "d", testSecret, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
