package offload

// preemptionOnly offers a request's computed full blocks when it is
// preempted, so that its recomputation can load them back; nothing else
// reaches the tiers. It copies the least, and helps only preempted
// requests. It keeps no state.
type preemptionOnly struct{ PolicyBase }

func (preemptionOnly) Name() string { return PreemptionOnly.String() }

func (preemptionOnly) Request(ev RequestEvent) Offer {
	if ev.Trigger != OnPreempt {
		return Offer{}
	}
	return Offer{To: len(ev.Hashes)}
}
