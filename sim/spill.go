package sim

// Lease spill figures of a simulated P (docs/scenarios.md S26): the engine
// core decides and carries out spills and restores; the simulator only
// counts them (and checks, at every block P sends, that the lease still
// holds its primary copy: port.go).

// SpillCounts are a P's lease spill counters.
type SpillCounts struct {
	// SpilledBlocks had their primary copies dropped for a tier copy;
	// RestoredTier were loaded back from the tier for a read, RestoredPool
	// were found still cached in the pool.
	SpilledBlocks, RestoredTier, RestoredPool uint64
}

func (s *SpillCounts) add(o SpillCounts) {
	s.SpilledBlocks += o.SpilledBlocks
	s.RestoredTier += o.RestoredTier
	s.RestoredPool += o.RestoredPool
}

// SpillCounts returns the node's lease spill counters over all its lives.
func (n *Node) SpillCounts() SpillCounts {
	s := n.pastSpill
	p, o := n.Core.Producer(), n.Core.Offload()
	if p == nil || o == nil || n.Crashed {
		return s
	}
	st := o.Stats()
	s.add(SpillCounts{SpilledBlocks: p.Stats().SpilledBlocks, RestoredTier: st.LeaseRestoreLoadedBlocks, RestoredPool: st.LeaseRestoreHitBlocks})
	return s
}
