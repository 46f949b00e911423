package engine

import (
	"fmt"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/sched"
)

// Check verifies the pool's accounting and that every request hold belongs
// to a live request (no orphan hold). Holds of other kinds are checked by
// the modules that own them.
func (c *Core) Check() error {
	if err := c.pool.Check(); err != nil {
		return err
	}
	n := 0
	for _, h := range c.pool.LiveHolds(nil) {
		if h.Kind != kvblock.HoldRequest {
			continue
		}
		n++
		r := c.byID.Get(h.Owner)
		if r == nil || r.Hold != h.ID {
			return fmt.Errorf("engine: orphan request hold %#x of request %d", uint64(h.ID), h.Owner)
		}
	}
	for _, r := range c.byID.All() {
		if r.Hold != 0 && !c.pool.Live(r.Hold) {
			return fmt.Errorf("engine: request %q names a dead hold", r.ext)
		}
	}
	if c.producer != nil {
		if err := c.producer.Check(); err != nil {
			return err
		}
	}
	if c.consumer != nil {
		if err := c.consumer.Check(); err != nil {
			return err
		}
	}
	for _, h := range c.pool.LiveHolds(nil) {
		switch h.Kind {
		case kvblock.HoldLease:
			if c.producer == nil {
				return fmt.Errorf("engine: lease hold %#x without a producer", uint64(h.ID))
			}
		case kvblock.HoldInbound:
			if c.consumer == nil {
				return fmt.Errorf("engine: inbound hold %#x without a consumer", uint64(h.ID))
			}
		case kvblock.HoldStore, kvblock.HoldLoad:
			if c.offload == nil {
				return fmt.Errorf("engine: %s hold %#x without an offload manager", h.Kind, uint64(h.ID))
			}
		}
	}
	if c.offload != nil {
		if err := c.offload.Check(); err != nil {
			return err
		}
		if err := c.checkSpill(); err != nil {
			return err
		}
		for _, r := range c.byID.All() {
			if r.loading != c.offload.Loading(r.ID) {
				return fmt.Errorf("engine: request %q loading %v, offload says %v", r.ext, r.loading, !r.loading)
			}
			if r.loading && (r.Hold != 0 || r.Status() != sched.Waiting && r.Status() != sched.Preempted) {
				return fmt.Errorf("engine: loading request %q has hold %#x and status %v", r.ext, uint64(r.Hold), r.Status())
			}
		}
	}
	return nil
}
