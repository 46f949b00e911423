package scenarios

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/kvlease/kvlease/internal/e2e"
)

// S26: a leased, unread block spilled to P's offload tier, then read by D.
// P runs --offload with --lease-spill always and a pool of 24 blocks: a
// lease's full blocks are stored to the host-memory tier and their primary
// copies let go at once; the prefills that follow reuse the pool, so the
// first lease's blocks are gone from it when D's decode leg comes. D's
// READ is served after P loads them back from the tier, with the same
// checksums: D pulls (no fallback) and its tokens equal the single
// engine's. P ends with nothing held and nothing pinned in its tier.
func TestE2ES26SpilledLeaseReadByD(t *testing.T) {
	skipShort(t)
	const pBlocks = 24
	// A longer lease than the package's: the leases wait, unclaimed and
	// unrenewed, while the other prompts are prefilled.
	long := []string{"--kv-lease", "30s"}
	p := startP(t, append([]string{"--num-blocks", strconv.Itoa(pBlocks), "--offload", "cpu:256blocks", "--lease-spill", "always"}, long...)...)
	d := startD(t, "D", append([]string{"--fallback", "fail"}, long...)...)

	first := job{id: "s26-first", prompt: pdPrompt + " Its blocks leave the pool before they are read.", maxTokens: 12, seed: 26}
	kv := p.prefill(t, first)
	e2e.WaitFor(t, "P to spill the first lease", func() bool { return p.metrics(t).get("kvlease_lease_spilled_blocks_total", "policy", "always") > 0 })
	// Other prefills (no prefix in common with it) take the pool over:
	// its least recently released blocks, the first lease's spilled ones,
	// are reused first.
	var others []job
	for i := range 6 {
		j := job{id: fmt.Sprintf("s26-other-%d", i), prompt: fmt.Sprintf("Prompt number %d fills the prefill engine's pool with blocks of its own, so that the first lease's go. %s", i, pdPrompt), maxTokens: 4, seed: int64(40 + i)}
		others = append(others, j)
		kvj := p.prefill(t, j)
		defer decodeMatches(t, d, j, kvj) // read (and released) at the end
	}
	m := p.metrics(t)
	if m.get("kvlease_lease_spilled_blocks", "policy", "always") == 0 {
		t.Fatalf("no lease block in P's tier after %d prefills", len(others)+1)
	}

	decodeMatches(t, d, first, kv)
	m = p.metrics(t)
	if got := m.get("kvlease_lease_restored_blocks_total", "policy", "always", "source", "tier"); got == 0 {
		t.Errorf("no spilled block was loaded back from the tier for D's read (from the pool: %v)",
			m.get("kvlease_lease_restored_blocks_total", "policy", "always", "source", "pool"))
	}
	t.Logf("P spilled %v blocks; D's read loaded %v back from the tier, found %v still in the pool",
		m.get("kvlease_lease_spilled_blocks_total", "policy", "always"), m.get("kvlease_lease_restored_blocks_total", "policy", "always", "source", "tier"),
		m.get("kvlease_lease_restored_blocks_total", "policy", "always", "source", "pool"))
	if f := d.metrics(t).sum("kvlease_remote_prefill_fallbacks_total"); f != 0 {
		t.Errorf("D fell back %v times", f)
	}
	t.Cleanup(func() {
		// After the deferred decodes: every lease read and released, no
		// block held, none pinned in the tier.
		e2e.WaitFor(t, "P to release every lease", func() bool {
			m := p.metrics(t)
			return m.held() == 0 && m.get("kvlease_leases_active") == 0 && m.get("kvlease_lease_spilled_blocks", "policy", "always") == 0
		})
		if got := p.metrics(t).get("kvlease_leases_released_total", "reason", "read_done"); got != float64(len(others)+1) {
			t.Errorf("P released %v leases read_done, want %d", got, len(others)+1)
		}
		checkSettled(t, d)
	})
}
