package scenarios

import (
	"context"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/e2e"
)

// S25: P answers the prefill leg and the decode leg is never sent (a proxy
// that does not propagate the client's disconnect between the legs, as
// llm-d's P/D sidecar documents): no decode engine claims the lease, and P
// releases it as unclaimed at the claim deadline, not at the lease's end.
// The decode leg sent late anyway finds the lease gone; D recomputes and
// its tokens equal the single engine's. A request whose decode leg comes
// at once is claimed and read as usual.
func TestE2ES25DecodeLegNeverSent(t *testing.T) {
	skipShort(t)
	const claim = time.Second // --kv-lease 3s: heartbeat 500ms ≤ claim < lease
	p := startP(t, "--kv-claim-timeout", claim.String())
	d := startD(t, "D")

	// Sent at once: claimed, read, released read_done.
	ok := job{id: "s25-ok", prompt: pdPrompt, maxTokens: 12, seed: 25}
	decodeMatches(t, d, ok, p.prefill(t, ok))
	e2e.WaitFor(t, "P to free the read blocks", func() bool { return p.metrics(t).held() == 0 })

	// Never sent: released unclaimed, with nothing read.
	lost := job{id: "s25-lost", prompt: pdPrompt + " It is never decoded.", maxTokens: 12, seed: 26}
	kv := p.prefill(t, lost)
	leased := p.metrics(t).held()
	if leased == 0 {
		t.Fatal("P holds no block for the lost request's lease")
	}
	e2e.WaitFor(t, "P to release the unclaimed lease", func() bool {
		return p.metrics(t).get("kvlease_leases_released_total", "reason", "unclaimed") == 1
	})
	m := p.metrics(t)
	if m.held() != 0 || m.get("kvlease_leases_active") != 0 {
		t.Fatalf("P after the unclaimed release: %v held blocks, %v leases", m.held(), m.get("kvlease_leases_active"))
	}
	// Stranded for the claim timeout (at least; the release happens when
	// P's timer fires), not for the lease: P measures it on its own clock.
	if got := m.get("kvlease_lease_block_seconds_total", "outcome", "unread"); got < leased*claim.Seconds() {
		t.Errorf("unread block-seconds %v, want at least %v blocks × %v", got, leased, claim)
	}
	wantReleased(t, p, map[string]float64{"read_done": 1, "unclaimed": 1})

	// The late decode leg: "gone", recompute, the single engine's answer.
	got, err := d.complete(context.Background(), lost, lost.id, kv)
	if err != nil {
		t.Fatalf("late decode leg: %v", err)
	}
	matchesReference(t, lost, got)
	dm := d.metrics(t)
	if f := dm.get("kvlease_remote_prefill_fallbacks_total", "reason", "lease_gone"); f != 1 {
		t.Errorf("D fell back %v times for lease_gone, want 1 (all: %v)", f, dm.sum("kvlease_remote_prefill_fallbacks_total"))
	}
	wantReleased(t, p, map[string]float64{"read_done": 1, "unclaimed": 1})
	if served := p.metrics(t).get("kvlease_lease_reads_total", "result", "served"); served != 1 {
		t.Errorf("P served %v reads, want 1 (none of the released lease)", served)
	}
	checkSettled(t, p, d)
}
