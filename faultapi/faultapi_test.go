package faultapi

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

func TestParseSpecRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec, field, msg string
	}{
		{`{"kind":"expire_lease","bogus":1}`, "bogus", "unknown field"},
		{`{"kind":"latency","delay_ms":5,"scope":{"rate":1,"share":2}}`, "share", "unknown field"},
		{`{"kind":"melt_gpu"}`, "kind", "unknown kind"},
		{`{}`, "kind", "required"},
		{`{"kind":"latency"}`, "delay_ms", "required by kind latency"},
		{`{"kind":"refuse_read","delay_ms":5}`, "delay_ms", "does not apply to kind refuse_read"},
		{`{"kind":"http_error","after_ms":5}`, "after_ms", "does not apply"},
		{`{"kind":"http_error","status":200}`, "status", "400..599"},
		{`{"kind":"reject_decode","status":600}`, "status", "400..599"},
		{`{"kind":"latency","delay_ms":0}`, "delay_ms", "1..600000"},
		{`{"kind":"latency","delay_ms":600001}`, "delay_ms", "1..600000"},
		{`{"kind":"expire_lease","after_ms":-1}`, "after_ms", "0..3600000"},
		{`{"kind":"corrupt_blocks","reads":0}`, "reads", "1..1000"},
		{`{"kind":"fallback","scope":{"rate":1.5}}`, "scope.rate", "0..1"},
		{`{"kind":"fallback","scope":{"rate":-0.1}}`, "scope.rate", "0..1"},
		{`{"kind":"fallback","scope":{"request_id":"[a-"}}`, "scope.request_id", "not a valid pattern"},
		{`{"kind":"fallback","scope":{"request_id":"` + strings.Repeat("a", 257) + `"}}`, "scope.request_id", "longer than"},
		{`{"kind":"fallback","scope":{"duration_ms":0}}`, "scope.duration_ms", "1.."},
		{`{"kind":"fallback","scope":{"count":0}}`, "scope.count", "1.."},
		{`{"kind":"latency","delay_ms":"5"}`, "delay_ms", "must be a JSON integer"},
		{`{"kind":"fallback","scope":{"count":1.5}}`, "scope.count", "must be a JSON integer"},
		{`{"kind":"fallback"} {}`, "", "trailing data"},
		{`[1]`, "", "must be a JSON object"},
		{`{"kind":"fallback"`, "", "not a JSON object"},
		{strings.Repeat(" ", MaxSpecBytes+1), "", "at most"},
	} {
		_, err := ParseSpec([]byte(tc.spec))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %v, want an *Error", tc.spec, err)
			continue
		}
		if e.Field != tc.field || !strings.Contains(e.Error(), tc.msg) {
			t.Errorf("%.60s: field %q, %q; want field %q and %q", tc.spec, e.Field, e.Error(), tc.field, tc.msg)
		}
	}
}

func TestParseSpecDefaultsAndRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Spec
	}{
		{`{"kind":"http_error"}`, Spec{Kind: HTTPError, Status: 500, Scope: Scope{Rate: 1}}},
		{`{"kind":"reject_decode"}`, Spec{Kind: RejectDecode, Status: 503, Scope: Scope{Rate: 1}}},
		{`{"kind":"corrupt_blocks"}`, Spec{Kind: CorruptBlocks, Reads: 1, Scope: Scope{Rate: 1}}},
		{`{"kind":"expire_lease","after_ms":250,"scope":{"rate":0.25,"request_id":"pd-*","duration_ms":60000,"count":3}}`,
			Spec{Kind: ExpireLease, After: 250 * time.Millisecond,
				Scope: Scope{Rate: 0.25, RequestID: "pd-*", Duration: time.Minute, Count: 3}}},
		{`{"kind":"stall_pull","delay_ms":1500}`, Spec{Kind: StallPull, Delay: 1500 * time.Millisecond, Scope: Scope{Rate: 1}}},
	} {
		got, err := ParseSpec([]byte(tc.spec))
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.spec, got, err, tc.want)
			continue
		}
		again, err := ParseSpec(got.AppendJSON(nil))
		if err != nil || again != got {
			t.Errorf("%s: round trip %s gives %+v, %v", tc.spec, got.AppendJSON(nil), again, err)
		}
	}
	for _, k := range Kinds() {
		if got, ok := ParseKind(k.String()); !ok || got != k {
			t.Errorf("kind %v does not parse back", k)
		}
	}
}

func mustSpec(t *testing.T, s string) Spec {
	t.Helper()
	sp, err := ParseSpec([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func kindsOf(p Plan) []Kind {
	var ks []Kind
	for _, f := range p.Fired {
		ks = append(ks, f.Kind)
	}
	return ks
}

func TestDecideStagesAndPatterns(t *testing.T) {
	r := NewRegistry(0)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []string{
		`{"kind":"expire_lease","after_ms":100}`,
		`{"kind":"stall_pull","delay_ms":200,"scope":{"request_id":"slow-*"}}`,
		`{"kind":"latency","delay_ms":300}`,
		`{"kind":"latency","delay_ms":999}`, // a second of the same kind: never both
	} {
		if _, err := r.Add(0, mustSpec(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	p := r.Decide(0, rng, Request{ID: "a", Prefill: true})
	if ks := kindsOf(p); len(ks) != 2 || ks[0] != ExpireLease || ks[1] != Latency || !p.Expire ||
		p.ExpireAfter != 100*time.Millisecond || p.Latency != 300*time.Millisecond {
		t.Errorf("prefill leg: %v %+v", ks, p)
	}
	p = r.Decide(0, rng, Request{ID: "a", Decode: true})
	if ks := kindsOf(p); len(ks) != 1 || ks[0] != Latency {
		t.Errorf("decode leg a: %v", ks)
	}
	p = r.Decide(0, rng, Request{ID: "slow-1", Decode: true})
	if ks := kindsOf(p); len(ks) != 2 || ks[0] != StallPull || p.StallPull != 200*time.Millisecond {
		t.Errorf("decode leg slow-1: %v %+v", ks, p)
	}
	p = r.Decide(0, rng, Request{ID: "plain"})
	if ks := kindsOf(p); len(ks) != 1 || ks[0] != Latency {
		t.Errorf("plain request: %v", ks)
	}
	list := r.List(0)
	if list[0].Fired != 1 || list[1].Fired != 1 || list[2].Fired != 4 || list[3].Fired != 0 {
		t.Errorf("fired counts %d %d %d %d", list[0].Fired, list[1].Fired, list[2].Fired, list[3].Fired)
	}
}

func TestDecideTerminalFaultsExcludeOthers(t *testing.T) {
	r := NewRegistry(0)
	r.Add(0, mustSpec(t, `{"kind":"latency","delay_ms":5}`))
	r.Add(0, mustSpec(t, `{"kind":"reject_decode","status":429}`))
	p := r.Decide(0, nil, Request{ID: "x", Decode: true})
	if ks := kindsOf(p); len(ks) != 1 || ks[0] != RejectDecode || p.RejectStatus != 429 || p.Latency != 0 {
		t.Errorf("%v %+v", ks, p)
	}
	if l := r.List(0); l[0].Fired != 0 {
		t.Errorf("the latency fault counted %d firings on a rejected request", l[0].Fired)
	}
}

// Rates are drawn from the injected source only: one seed, one outcome;
// the share hit is near the rate.
func TestDecideRateIsSeeded(t *testing.T) {
	run := func(seed uint64) (hits int, pattern []bool) {
		r := NewRegistry(0)
		r.Add(0, mustSpec(t, `{"kind":"http_error","scope":{"rate":0.3}}`))
		rng := rand.New(rand.NewPCG(seed, 7))
		for i := 0; i < 2000; i++ {
			hit := !r.Decide(0, rng, Request{ID: "r"}).Empty()
			pattern = append(pattern, hit)
			if hit {
				hits++
			}
		}
		return hits, pattern
	}
	h1, p1 := run(42)
	h2, p2 := run(42)
	if h1 != h2 || len(p1) != len(p2) {
		t.Fatalf("same seed, %d and %d hits", h1, h2)
	}
	for i := range p1 {
		if p1[i] != p2[i] {
			t.Fatalf("same seed, different decision at %d", i)
		}
	}
	if h1 < 500 || h1 > 700 {
		t.Errorf("rate 0.3 hit %d of 2000", h1)
	}
	// Rates 0 and 1 draw nothing.
	r := NewRegistry(0)
	r.Add(0, mustSpec(t, `{"kind":"http_error","scope":{"rate":0}}`))
	r.Add(0, mustSpec(t, `{"kind":"latency","delay_ms":1}`))
	if p := r.Decide(0, nil, Request{ID: "r"}); len(p.Fired) != 1 || p.Fired[0].Kind != Latency {
		t.Errorf("rate 0 and 1 with no source: %+v", p)
	}
}

func TestCountAndDurationEndFaults(t *testing.T) {
	r := NewRegistry(0)
	r.Add(0, mustSpec(t, `{"kind":"fallback","scope":{"count":2}}`))
	r.Add(0, mustSpec(t, `{"kind":"latency","delay_ms":1,"scope":{"duration_ms":1000}}`))
	q := Request{ID: "d", Decode: true}
	for i, want := range []int{2, 2, 1} {
		if p := r.Decide(clock.Instant(i), nil, q); len(p.Fired) != want {
			t.Errorf("decision %d: %d faults hit, want %d", i, len(p.Fired), want)
		}
	}
	if l := r.List(3); len(l) != 1 || l[0].Spec.Kind != Latency {
		t.Fatalf("after the count ran out: %+v", l)
	}
	end := clock.Instant(time.Second)
	if p := r.Decide(end-1, nil, q); len(p.Fired) != 1 {
		t.Errorf("just before the duration's end: %+v", p)
	}
	if p := r.Decide(end, nil, q); !p.Empty() || r.Len() != 0 {
		t.Errorf("at the duration's end: %+v, %d left", p, r.Len())
	}
}

func TestRegistryBoundAndDelete(t *testing.T) {
	r := NewRegistry(2)
	a, _ := r.Add(0, mustSpec(t, `{"kind":"fallback"}`))
	b, _ := r.Add(0, mustSpec(t, `{"kind":"refuse_read"}`))
	if _, err := r.Add(0, mustSpec(t, `{"kind":"drop_response"}`)); !errors.Is(err, ErrFull) {
		t.Fatalf("third fault: %v, want ErrFull", err)
	}
	if !r.Delete(a.ID) || r.Delete(a.ID) {
		t.Fatal("Delete of an active fault, then again")
	}
	c, err := r.Add(0, mustSpec(t, `{"kind":"drop_response"}`))
	if err != nil || c.ID <= b.ID {
		t.Fatalf("after a delete: %+v %v", c, err)
	}
	if n := r.Clear(); n != 2 || r.Len() != 0 {
		t.Fatalf("Clear: %d, %d left", n, r.Len())
	}
}

func TestFaultJSON(t *testing.T) {
	r := NewRegistry(0)
	f, _ := r.Add(0, mustSpec(t, `{"kind":"stall_blocks","delay_ms":250,"scope":{"duration_ms":2000}}`))
	got := string(f.AppendJSON(nil, clock.Instant(500*time.Millisecond)))
	want := `{"id":1,"spec":{"kind":"stall_blocks","delay_ms":250,"scope":{"rate":1,"duration_ms":2000}},"remaining_ms":1500,"fired":0}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(`{"kind":"expire_lease","after_ms":250,"scope":{"rate":0.25,"request_id":"pd-*","duration_ms":60000,"count":3}}`))
	f.Add([]byte(`{"kind":"http_error","status":503}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		again, err := ParseSpec(s.AppendJSON(nil))
		if err != nil || again != s {
			t.Fatalf("round trip of %+v: %+v, %v", s, again, err)
		}
	})
}

func TestPlanToTransferFaults(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		p          Plan
		reason     wire.Reason
		after      time.Duration
		refuse     bool
		stallReads time.Duration
	}{
		{Plan{}, 0, 0, false, 0},
		{Plan{Expire: true, ExpireAfter: 5 * ms}, wire.ReasonExpired, 5 * ms, false, 0},
		{Plan{Revoke: true, RevokeAfter: 7 * ms, RefuseReads: true}, wire.ReasonAborted, 7 * ms, true, 0},
		{Plan{Expire: true, ExpireAfter: 9 * ms, Revoke: true, RevokeAfter: 3 * ms}, wire.ReasonAborted, 3 * ms, false, 0},
		{Plan{Expire: true, ExpireAfter: 3 * ms, Revoke: true, RevokeAfter: 3 * ms, StallBlocks: ms}, wire.ReasonExpired, 3 * ms, false, ms},
	} {
		lf := tc.p.LeaseFaults()
		if lf.EndReason != tc.reason || lf.EndAfter != tc.after || lf.RefuseReads != tc.refuse || lf.StallReads != tc.stallReads {
			t.Errorf("%+v: %+v", tc.p, lf)
		}
	}
	p := Plan{StopHeartbeats: true, StallPull: 2 * ms, Fallback: true}
	if pf := p.PullFaults(); pf != (xfer.PullFaults{NoHeartbeats: true, Stall: 2 * ms, Fallback: true}) {
		t.Errorf("pull faults %+v", pf)
	}
}
