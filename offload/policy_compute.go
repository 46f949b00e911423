package offload

// storeOnCompute offers every full block of a request as soon as it is
// computed, and again, if a tier refused it, at every later step, at
// preemption and at teardown. It stores the most, earliest: every block a
// later request may want is in the tiers before anybody evicts it, at the
// cost of copying blocks nobody reads again. It keeps no state.
type storeOnCompute struct{ PolicyBase }

func (storeOnCompute) Name() string { return StoreOnCompute.String() }

func (storeOnCompute) Request(ev RequestEvent) Offer { return Offer{To: len(ev.Hashes)} }
