package offload

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
)

// requestLevel stores a request's computed full blocks as one unit when it
// finishes, all or nothing per tier (Offer.Whole), and lets a lookup load
// only whole units: the loaded run must end at the last block of a unit
// some request stored (vLLM's REQUEST_LEVEL tier policy,
// vllm-project/vllm#43205, where a request-level tier takes a request's
// blocks together rather than block by block). A conversation's next turn
// extends the previous turn's whole prompt and answer, so it loads the
// previous unit entire; a request that shares only part of a unit loads
// none of it. It never leaves a tier with a request's head and not its
// tail, at the cost of storing nothing of a request a tier cannot take
// entire, and of not sharing partial prefixes.
//
// It remembers the last hash of each unit it offered (a FIFO bounded by
// the tiers' total capacity, so at least one entry per block the tiers
// can hold). A remembered end whose blocks a tier later lost no longer
// loads: Loadable is asked only about blocks that are ready in a tier.
type requestLevel struct {
	ends  map[kvblock.Hash]int // unit end → times in fifo
	fifo  []kvblock.Hash       // ring of remembered ends, oldest at head
	head  int
	count int
}

func newRequestLevel(env PolicyEnv) *requestLevel {
	return &requestLevel{ends: make(map[kvblock.Hash]int), fifo: make([]kvblock.Hash, max(1, env.TierBlocks))}
}

func (*requestLevel) Name() string { return RequestLevel.String() }

func (p *requestLevel) Request(ev RequestEvent) Offer {
	if ev.Trigger != OnFinish || len(ev.Hashes) == 0 {
		return Offer{}
	}
	p.remember(ev.Hashes[len(ev.Hashes)-1])
	return Offer{To: len(ev.Hashes), Whole: true}
}

func (p *requestLevel) remember(h kvblock.Hash) {
	if p.count == len(p.fifo) {
		old := p.fifo[p.head]
		if p.ends[old]--; p.ends[old] == 0 {
			delete(p.ends, old)
		}
		p.head = (p.head + 1) % len(p.fifo)
		p.count--
	}
	p.fifo[(p.head+p.count)%len(p.fifo)] = h
	p.count++
	p.ends[h]++
}

// Loadable cuts the hits to the longest run ending at a unit's last block.
func (p *requestLevel) Loadable(hashes []kvblock.Hash, first, hits int) int {
	for k := hits; k > 0; k-- {
		if p.ends[hashes[first+k-1]] > 0 {
			return k
		}
	}
	return 0
}

func (*requestLevel) Evicting(_ *kvblock.Pool, _ int, b []kvblock.BlockID, h []kvblock.Hash) ([]kvblock.BlockID, []kvblock.Hash) {
	return b, h
}

func (*requestLevel) Placed(kvblock.BlockID) {}

func (*requestLevel) Forget(uint64) {}

// Check verifies that the index counts exactly the ring's entries.
func (p *requestLevel) Check() error {
	if p.count < 0 || p.count > len(p.fifo) {
		return fmt.Errorf("offload: request-level ring holds %d of %d", p.count, len(p.fifo))
	}
	n := 0
	for _, c := range p.ends {
		if c <= 0 {
			return fmt.Errorf("offload: request-level index counts %d", c)
		}
		n += c
	}
	if n != p.count {
		return fmt.Errorf("offload: request-level index counts %d ends, ring %d", n, p.count)
	}
	return nil
}
