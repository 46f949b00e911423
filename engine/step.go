package engine

import "github.com/kvlease/kvlease/clock"

// Step schedules the next batch if none is executing, and returns it with
// the outputs and events produced since the previous Step.
func (c *Core) Step(now clock.Instant) Ready {
	var rd Ready
	c.step(now, &rd)
	return rd
}

// StepInto is Step writing its result into rd (all of it: what rd held
// before is gone), for a caller that keeps a Ready from turn to turn
// rather than copying one out of every call.
func (c *Core) StepInto(now clock.Instant, rd *Ready) { c.step(now, rd) }
