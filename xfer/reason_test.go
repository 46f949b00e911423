package xfer

import (
	"regexp"
	"testing"

	"github.com/kvlease/kvlease/wire"
)

var labelValue = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

// Every defined reason and kind has its own label value; zero and values
// past the last are not valid and print as numbers.
func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range FallbackReasons() {
		if s := r.String(); !r.Valid() || !labelValue.MatchString(s) || seen[s] {
			t.Errorf("fallback reason %d: %q (valid %v, seen %v)", uint8(r), s, r.Valid(), seen[s])
		}
		seen[r.String()] = true
	}
	if len(seen) != int(numFallbackReasons)-1 {
		t.Errorf("FallbackReasons lists %d reasons, %d are defined", len(seen), numFallbackReasons-1)
	}
	clear(seen)
	for _, k := range FailureKinds() {
		if s := k.String(); !k.Valid() || !labelValue.MatchString(s) || seen[s] {
			t.Errorf("failure kind %d: %q (valid %v, seen %v)", uint8(k), s, k.Valid(), seen[s])
		}
		seen[k.String()] = true
	}
	if len(seen) != int(numFailureKinds)-1 {
		t.Errorf("FailureKinds lists %d kinds, %d are defined", len(seen), numFailureKinds-1)
	}
	for _, tc := range []struct {
		valid bool
		got   string
		want  string
	}{
		{FallbackReason(0).Valid(), FallbackReason(0).String(), "none"},
		{numFallbackReasons.Valid(), numFallbackReasons.String(), "FallbackReason(18)"},
		{FailureKind(0).Valid(), FailureKind(0).String(), "FailureKind(0)"},
		{numFailureKinds.Valid(), numFailureKinds.String(), "FailureKind(17)"},
	} {
		if tc.valid || tc.got != tc.want {
			t.Errorf("got %q valid %v, want %q invalid", tc.got, tc.valid, tc.want)
		}
	}
	for r := wire.ReasonReadDone; r.Valid(); r++ {
		want := r == wire.ReasonReadDone || r == wire.ReasonRejected || r == wire.ReasonAborted || r == wire.ReasonFallback
		if sendsReason(r) != want {
			t.Errorf("sendsReason(%v) = %v", r, !want)
		}
	}
	if n := len(ReleaseReasonsSent()); n != 4 {
		t.Errorf("ReleaseReasonsSent lists %d reasons", n)
	}
	for _, r := range ReleaseReasonsSent() {
		if !sendsReason(r) {
			t.Errorf("ReleaseReasonsSent lists %v, which sendsReason refuses", r)
		}
	}
}

// P answers every READ with a retryable status (busy, internal): D retries
// within MaxReadAttempts, counting each answer as a failure of that kind,
// then falls back with the matching reason and frees its inbound blocks.
func TestConsumerReadRefusedRetryably(t *testing.T) {
	for _, tc := range []struct {
		status wire.Status
		kind   FailureKind
		why    FallbackReason
	}{
		{wire.StatusBusy, FailureReadBusy, FallbackReadBusy},
		{wire.StatusInternal, FailureReadInternal, FallbackReadInternal},
	} {
		t.Run(tc.status.String(), func(t *testing.T) {
			cfg := testConfig(PolicyLease)
			e := newPair(t, cfg)
			e.alter = func(m wire.Message) wire.Message {
				switch m := m.(type) {
				case *wire.Block:
					return nil
				case *wire.ReadEnd:
					end := *m
					end.Status = tc.status
					return &end
				}
				return m
			}
			g := e.enqueue(1, "r", 8)
			e.run(at(0), true)
			d, ok := e.doneOf(1)
			if !ok || d.Outcome != FellBack || d.Why != tc.why || e.dpool.NumHeld() != 0 {
				t.Fatalf("done %+v, held %d", e.done, e.dpool.NumHeld())
			}
			st := e.c.Stats()
			if n := len(sentOf[*wire.Read](e)); n != cfg.MaxReadAttempts || st.Failures[tc.kind] != uint64(n) || st.Fallbacks[tc.why] != 1 {
				t.Fatalf("%d reads, failures %v, fallbacks %v", n, st.Failures, st.Fallbacks)
			}
			if r, ok := released(e.P, g.Lease); !ok || r.reason != wire.ReasonFallback {
				t.Fatalf("P: %+v", e.P.rel)
			}
		})
	}
}
