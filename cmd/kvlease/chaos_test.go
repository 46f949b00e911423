package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseChaosFlags(t *testing.T) {
	o, err := parseChaosFlags([]string{"--duration", "10m", "--seed", "9", "--kv-lease", "5s", "--decode", "3",
		"--faults", "corrupt, jitter-loss"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.Duration != 10*time.Minute || o.cfg.Seed != 9 || o.cfg.Harness.Lease != 5*time.Second ||
		o.cfg.Harness.Decode != 3 || o.cfg.Workers != 4 || strings.Join(o.cfg.Kinds, ",") != "corrupt,jitter-loss" {
		t.Errorf("parsed %+v", o.cfg)
	}
	for _, c := range []struct{ args, want string }{
		{"--duration 0s", "--duration"},
		{"--workers 0", "--workers"},
		{"--kv-lease 100ms", "--kv-lease"},
		{"--decode 0", "--decode"},
		{"--faults corrupt,meteor", `no fault kind "meteor"`},
	} {
		if _, err := parseChaosFlags(strings.Fields(c.args), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.args, err, c.want)
		}
	}
}
