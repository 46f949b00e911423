package offload

// storeOnFinish offers a request's computed full blocks once, when it
// finishes (vLLM's ON_FINISH store policy, vllm-project/vllm#50087: the
// store frontier does not move while the request runs, then every
// storable block goes at once). Stores never compete with the running
// request for copy bandwidth or hold its blocks while it runs, and a
// request aborted early stores what it computed; a block refused at finish
// is not offered again (the request is gone), and a preempted request's
// blocks are not stored. It keeps no state.
type storeOnFinish struct{ PolicyBase }

func (storeOnFinish) Name() string { return StoreOnFinish.String() }

func (storeOnFinish) Request(ev RequestEvent) Offer {
	if ev.Trigger != OnFinish {
		return Offer{}
	}
	return Offer{To: len(ev.Hashes)}
}
