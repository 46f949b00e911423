package offload

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/kvblock"
)

func TestConfigErrors(t *testing.T) {
	pc := kvblock.Config{NumBlocks: 8, BlockSizeTokens: 16, BytesPerToken: 1024}
	ok := DefaultConfig(cpuBlocks(4))
	if err := ok.ValidateFor(pc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no tier", func(c *Config) { c.Tiers = nil }, "--offload: no tier"},
		{"two cpu", func(c *Config) { c.Tiers = append(c.Tiers, c.Tiers[0]) }, "two cpu tiers"},
		{"policy", func(c *Config) { c.Policy = 0 }, "--offload-policy"},
		{"disk path", func(c *Config) { c.Tiers = []TierConfig{{Medium: MediumDisk, Blocks: 4}} }, "needs a path"},
		{"size", func(c *Config) { c.Tiers = []TierConfig{{Medium: MediumCPU}} }, "positive size"},
		{"tiny tier", func(c *Config) { c.Tiers = []TierConfig{{Medium: MediumCPU, Bytes: 100}} }, "holds no block"},
		{"eviction", func(c *Config) { c.Eviction = "fifo" }, "Eviction"},
		{"bounds", func(c *Config) { c.MaxInflightLoadBlocks = -1 }, "negative"},
	} {
		c := DefaultConfig(cpuBlocks(4))
		tc.mod(&c)
		err := c.ValidateFor(pc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	mustPanic(t, "holds no block", func() {
		NewCoordinator(Config{Tiers: []TierConfig{{Medium: MediumCPU, Bytes: 10}}, Policy: StoreOnCompute}, kvblock.New(pc))
	})
}

func TestParseTiers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []TierConfig
		err  string
	}{
		{"", nil, ""},
		{"cpu:4GiB", []TierConfig{{Medium: MediumCPU, Bytes: 4 << 30}}, ""},
		{"cpu:512M,disk:/var/tmp/kv:2T", []TierConfig{{Medium: MediumCPU, Bytes: 512 << 20}, {Medium: MediumDisk, Path: "/var/tmp/kv", Bytes: 2 << 40}}, ""},
		{"disk:/a:b:10GB", []TierConfig{{Medium: MediumDisk, Path: "/a:b", Bytes: 10e9}}, ""},
		{"CPU:4096blocks", []TierConfig{{Medium: MediumCPU, Blocks: 4096}}, ""},
		{"cpu:100", []TierConfig{{Medium: MediumCPU, Bytes: 100}}, ""},
		{"gpu:1G", nil, `unknown tier "gpu"`},
		{"cpu", nil, "want cpu:SIZE"},
		{"cpu:", nil, "bad size"},
		{"cpu:-5G", nil, "bad size"},
		{"cpu:1.5G", nil, "bad size"},
		{"cpu:0blocks", nil, "bad block count"},
		{"cpu:1G,cpu:2G", nil, "second cpu tier"},
		{"disk:1G", nil, "needs a path"},
		{"disk::1G", nil, "path is empty"},
		{"cpu:2000PiB", nil, "bad size"},
		{"cpu:9000000T", nil, "over 1 PiB"},
	} {
		got, err := ParseTiers(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--offload") {
				t.Errorf("ParseTiers(%q) = %v, %v; want an error naming --offload containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseTiers(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, name := range PolicyNames {
		k, err := ParsePolicy(name)
		if err != nil || k.String() != name {
			t.Errorf("ParsePolicy(%q) = %v, %v", name, k, err)
		}
	}
	if _, err := ParsePolicy("lru"); err == nil || !strings.Contains(err.Error(), "--offload-policy") {
		t.Errorf("ParsePolicy(lru) = %v", err)
	}
	pc := kvblock.Config{NumBlocks: 8, BlockSizeTokens: 16, BytesPerToken: 1000}
	if n, err := (TierConfig{Medium: MediumCPU, Bytes: 10 * 16 * 1008}).NumBlocks(pc); n != 10 || err != nil {
		t.Errorf("NumBlocks = %d, %v; want 10", n, err)
	}
}

func FuzzParseTiers(f *testing.F) {
	for _, s := range []string{"cpu:4GiB", "cpu:1G,disk:/tmp/x:2G", "disk:a:b:3blocks", ",", "cpu:1K,"} {
		f.Add(s)
	}
	pc := kvblock.Config{NumBlocks: 8, BlockSizeTokens: 16, BytesPerToken: 1024}
	f.Fuzz(func(t *testing.T, s string) {
		tiers, err := ParseTiers(s)
		if err != nil {
			if !strings.Contains(err.Error(), "--offload") {
				t.Fatalf("error %q does not name --offload", err)
			}
			return
		}
		if len(tiers) == 0 {
			return
		}
		c := DefaultConfig(tiers)
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseTiers(%q) = %+v, which fails Validate: %v", s, tiers, err)
		}
		_ = c.ValidateFor(pc)
		for _, tc := range tiers {
			if _, err := ParseTiers(tc.String()); err != nil {
				t.Fatalf("tier %+v prints as %q which does not parse: %v", tc, tc.String(), err)
			}
		}
	})
}
