package sched

import "github.com/kvlease/kvlease/model"

// nextOutcome appends the outcome of r to the step's outcomes, no token
// and not finished yet, and returns it for Update to fill in place: its
// fields are stored one by one, where appending a whole Outcome would
// copy it with a bulk write barrier while the GC marks.
func (s *Scheduler) nextOutcome(r *Request) *Outcome {
	n := len(s.outcomes)
	if n < cap(s.outcomes) {
		s.outcomes = s.outcomes[:n+1]
	} else {
		s.outcomes = append(s.outcomes, Outcome{})
	}
	o := &s.outcomes[n]
	o.Req, o.Token, o.Finished, o.Logprobs, o.PromptLogprobs = r, model.NoToken, 0, nil, nil
	return o
}

// Preemptions is Stats().Preemptions, without copying the Stats.
func (s *Scheduler) Preemptions() uint64 { return s.stats.Preemptions }
