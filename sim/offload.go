package sim

import (
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
)

// tierStore is one simulated offload tier of one engine: block records by
// slot, in memory (offload/tier's memory store, without its goroutines). It
// is volatile: a crash loses it with the coordinator that knew its slots.
type tierStore struct {
	recs []tierRecord
}

type tierRecord struct {
	valid   bool
	hash    kvblock.Hash
	digests []uint64
	data    []byte
}

func (t *tierStore) slot(s offload.Slot) *tierRecord {
	if int(s) >= len(t.recs) {
		t.recs = append(t.recs, make([]tierRecord, int(s)+1-len(t.recs))...)
	}
	return &t.recs[s]
}

// copyLater runs one offload copy of node n (its copier's): it completes
// after its modelled time (Spec.OffloadBandwidth), copying the blocks then
// (a store reads the pool at the end, so a block freed under its store
// hold would be stored with the wrong content and loaded back wrong: the
// oracle sees it), and fails part way with Spec.OffloadFailProb (the
// copies before the failure count, as tier.Run reports them). Work of a
// core that crashed is dropped with it; a hung node completes nothing
// until it resumes.
func (c *World) copyLater(n *Node, id uint64, store bool, tier int, blocks []kvblock.BlockID, hashes []kvblock.Hash, slots []offload.Slot) {
	core := n.Core
	pool := core.Pool()
	d := c.Spec.OffloadLatency
	if bw := c.Spec.OffloadBandwidth; bw > 0 {
		bytes := len(blocks) * pool.BlockSizeTokens() * c.Spec.Profile.BytesPerToken() // modelled as full KV
		d += time.Duration(float64(bytes) / bw * 1e9)
	}
	// The failure is drawn now, from the cluster's fault source, so that
	// the outcome does not depend on what else completes at the same
	// instant.
	copied := len(blocks)
	if p := c.Spec.OffloadFailProb; p > 0 && c.faultRng.Float64() < p {
		copied = c.faultRng.IntN(len(blocks) + 1)
	}
	var done func()
	done = func() {
		if n.Crashed || n.Core != core {
			return // the work died with its core
		}
		if n.halted() {
			n.backlog = append(n.backlog, pendingCall{nil, done})
			return
		}
		ts := n.tiers[tier]
		bpt := pool.Config().BytesPerToken
		k := 0
		for ; k < copied; k++ {
			rec := ts.slot(slots[k])
			dig := pool.Digests(blocks[k])
			if store {
				rec.valid = false
				rec.digests = append(rec.digests[:0], dig...)
				if bpt > 0 {
					rec.data = append(rec.data[:0], pool.Bytes(blocks[k])...)
				}
				rec.hash, rec.valid = hashes[k], true
				continue
			}
			if !rec.valid || rec.hash != hashes[k] {
				break // a miss: the load fails here
			}
			copy(dig, rec.digests)
			if bpt > 0 {
				copy(pool.Bytes(blocks[k]), rec.data)
			}
		}
		c.mix(traceOffload, id, uint64(k), boolBit(store))
		n.touch()
		n.Loop.Copied(c.Now, engine.Copied{Store: store, ID: offload.WorkID(id), Blocks: k})
	}
	c.At(c.Now.Add(d), done)
}

// offloadTiers returns fresh tier stores for a core's offload config.
func offloadTiers(cfg *offload.Config) []*tierStore {
	if cfg == nil {
		return nil
	}
	ts := make([]*tierStore, len(cfg.Tiers))
	for i := range ts {
		ts[i] = &tierStore{}
	}
	return ts
}
