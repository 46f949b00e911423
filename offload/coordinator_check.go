package offload

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
)

// Check verifies the coordinator's bookkeeping against the pool and its
// managers: every live store and load hold in the pool is one the
// coordinator tracks and vice versa, with the right blocks; in-flight
// counts match and are within their bounds; held loads are live holds of
// cached blocks; every manager and the policy pass their own checks. It
// does not check the pool itself (Pool.Check). It is incremental: a
// manager is checked only if it changed since its last passing check
// (Manager.Check), and the holds are cross-checked only if the pool or the
// coordinator's own state changed since the last pass. CheckFull checks
// everything.
func (c *Coordinator) Check() error { return c.check(false) }

// CheckFull is Check without the incremental shortcuts: every manager in
// full (Manager.CheckFull) and the holds cross-checked.
func (c *Coordinator) CheckFull() error { return c.check(true) }

func (c *Coordinator) check(full bool) error {
	for i, m := range c.tiers {
		check := m.Check
		if full {
			check = m.CheckFull
		}
		if err := check(); err != nil {
			return fmt.Errorf("tier %d: %w", i, err)
		}
	}
	if err := c.policy.Check(); err != nil {
		return err
	}
	if err := c.marks.check(); err != nil {
		return err
	}
	pv := c.pool.Version()
	if !full && c.checkedOK && c.checkedVersion == c.version && c.checkedPool == pv {
		return nil
	}
	c.checkedOK = false
	if c.scratchStore == nil {
		c.scratchStore, c.scratchLoad, c.scratchPending = map[kvblock.HoldID]bool{}, map[kvblock.HoldID]bool{}, map[*loadGroup]int{}
	}
	clear(c.scratchStore)
	clear(c.scratchLoad)
	clear(c.scratchPending)
	storeHolds := c.scratchStore
	inStore := 0
	for id, j := range c.stores {
		if !c.pool.Live(j.hold) || c.pool.Kind(j.hold) != kvblock.HoldStore || c.pool.Owner(j.hold) != uint64(id) {
			return fmt.Errorf("offload: store %d names hold %#x which is not its live store hold", id, uint64(j.hold))
		}
		if c.pool.Len(j.hold) != len(j.hashes) {
			return fmt.Errorf("offload: store %d holds %d blocks for %d hashes", id, c.pool.Len(j.hold), len(j.hashes))
		}
		for _, h := range j.hashes {
			if ready, present := c.tiers[j.tier].Contains(h); !present || ready {
				return fmt.Errorf("offload: store %d: block %x is not being stored in tier %d", id, h, j.tier)
			}
		}
		storeHolds[j.hold] = true
		inStore += len(j.hashes)
	}
	loadHolds := c.scratchLoad
	inLoad, pending := 0, c.scratchPending
	for id, j := range c.loads {
		pending[j.group]++
		if len(j.index) != len(j.hashes) {
			return fmt.Errorf("offload: load %d has %d positions for %d hashes", id, len(j.index), len(j.hashes))
		}
	}
	for g, n := range pending {
		if g.pending != n {
			return fmt.Errorf("offload: request %d has %d loads pending, counted %d", g.req, g.pending, n)
		}
		if !c.pool.Live(g.hold) || c.pool.Kind(g.hold) != kvblock.HoldLoad {
			return fmt.Errorf("offload: request %d's load hold %#x is not live", g.req, uint64(g.hold))
		}
		if c.pool.Len(g.hold) != g.first+len(g.hashes) {
			return fmt.Errorf("offload: request %d's load hold has %d blocks, want %d", g.req, c.pool.Len(g.hold), g.first+len(g.hashes))
		}
		if !g.gone && c.groups[g.req] != g {
			return fmt.Errorf("offload: request %d's loads are not indexed", g.req)
		}
		loadHolds[g.hold] = true
		inLoad += len(g.hashes)
	}
	for req, g := range c.groups {
		if pending[g] == 0 || g.gone || g.req != req {
			return fmt.Errorf("offload: request %d is indexed as loading with nothing pending", req)
		}
	}
	if inStore != c.inStore || inLoad != c.inLoad {
		return fmt.Errorf("offload: in flight store %d load %d, recorded %d %d", inStore, inLoad, c.inStore, c.inLoad)
	}
	// One load may exceed the load bound, alone (see lookup).
	if c.inStore > c.cfg.MaxInflightStoreBlocks || (c.inLoad > c.cfg.MaxInflightLoadBlocks && len(pending) > 1) {
		return fmt.Errorf("offload: in flight store %d load %d over bounds %d %d", c.inStore, c.inLoad, c.cfg.MaxInflightStoreBlocks, c.cfg.MaxInflightLoadBlocks)
	}
	if err := c.checkHeld(loadHolds); err != nil {
		return err
	}
	if err := c.checkLeases(loadHolds); err != nil {
		return err
	}
	if err := c.checkRetries(); err != nil {
		return err
	}
	c.scratchHolds = c.pool.LiveHolds(c.scratchHolds[:0])
	for _, h := range c.scratchHolds {
		switch {
		case h.Kind == kvblock.HoldStore && !storeHolds[h.ID]:
			return fmt.Errorf("offload: orphan store hold %#x", uint64(h.ID))
		case h.Kind == kvblock.HoldLoad && !loadHolds[h.ID]:
			return fmt.Errorf("offload: orphan load hold %#x", uint64(h.ID))
		}
	}
	c.checkedVersion, c.checkedPool, c.checkedOK = c.version, pv, true
	return nil
}
