package metrics

import (
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

// releaseReasons are the label values of kvlease_leases_released_total,
// always exported: exactly wire's reasons, in wire order.
var releaseReasons = wire.Reasons()

// The label values of the decode side's counters: every value the consumer
// can report, exported from the start (zero until it happens), and no other.
var (
	fallbackReasons = xfer.FallbackReasons()
	failureKinds    = xfer.FailureKinds()
	sentReasons     = xfer.ReleaseReasonsSent()
	// peerFailureKinds are the reasons of kvlease_transfer_peers_failing:
	// the failures to reach a peer.
	peerFailureKinds = []xfer.FailureKind{xfer.FailureUnreachable, xfer.FailureHandshakeTimeout, xfer.FailureHandshakeClosed,
		xfer.FailureUnauthenticated, xfer.FailureBadVersion, xfer.FailureHandshakeRefused}
)

// emitEach emits one sample per key of keys, in order, with m's count
// (zero when absent) and the key's String as the label value.
func emitEach[K interface {
	comparable
	String() string
}](m map[K]uint64, keys []K, emit emitFunc) {
	for _, k := range keys {
		emit(float64(m[k]), k.String())
	}
}

// producer and consumer return the side's stats, or zeros on an engine
// without that side, so every series exists whatever the role.
func producer(s *engine.NodeStats) *xfer.ProducerStats {
	if p := s.Producer; p != nil {
		return p
	}
	return &xfer.ProducerStats{}
}

func consumer(s *engine.NodeStats) *xfer.ConsumerStats {
	if c := s.Consumer; c != nil {
		return c
	}
	return &xfer.ConsumerStats{}
}

// transferMetrics are kvlease's P/D metrics (docs/operations.md, "Metrics").
var transferMetrics = []snapshotMetric{
	{
		name: "kvlease_leases_active", kind: gauge,
		help: "Leases this prefill engine holds on KV blocks for remote decoders.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(producer(s).Active)) },
	},
	{
		name: "kvlease_leases_granted_total", kind: counter,
		help: "Leases granted on finished do_remote_decode prefills.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(producer(s).Granted)) },
	},
	{
		name: "kvlease_leases_refused_total", kind: counter,
		help: "Finished do_remote_decode prefills that got no lease (the lease table was full); their blocks were freed.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(producer(s).Refused)) },
	},
	{
		name: "kvlease_leases_released_total", kind: counter,
		help:   "Leases released, by reason: read_done, rejected, aborted, undelivered, peer_lost, expired, fallback, shutdown, unclaimed (no decode engine claimed the lease within --kv-claim-timeout).",
		labels: []string{"reason"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emitEach(producer(s).Released, releaseReasons, emit)
		},
	},
	{
		name: "kvlease_leases_claimed_after_release_total", kind: counter,
		help:   "Leases a decode engine claimed (RENEW or READ) after this prefill engine had released them, by the reason they were released for; that decoder recomputes the prompt. reason=unclaimed: the claim deadline was shorter than that decoder's path.",
		labels: []string{"reason"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emitEach(producer(s).ClaimedAfterRelease, releaseReasons, emit)
		},
	},
	{
		name: "kvlease_lease_block_seconds_total", kind: counter,
		help:   "Block-seconds of KV held by released leases, by whether a read completed (outcome=read) or not (outcome=unread: stranded memory).",
		labels: []string{"outcome"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			p := producer(s)
			emit(p.BlockSecondsRead, "read")
			emit(p.BlockSecondsUnread, "unread")
		},
	},
	{
		name: "kvlease_lease_reads_total", kind: counter,
		help:   "READs of leased blocks by result: served, refused (bad token, unknown or released lease), busy (too many reads in flight).",
		labels: []string{"result"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			p := producer(s)
			emit(float64(p.ReadsServed), "served")
			emit(float64(p.ReadsRefused), "refused")
			emit(float64(p.ReadsBusy), "busy")
		},
	},
	{
		name: "kvlease_lease_reads_of_freed_blocks_total", kind: counter,
		help: "Under --release-policy vllm: READs of a lease that had ended, which vLLM's design serves from freed blocks (silent corruption risked); refused here. Always 0 under the other policies, which tell the decoder.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(producer(s).FreedReads)) },
	},
	{
		name: "kvlease_transfer_auth_failures_total", kind: counter,
		help: "Transfer sessions that failed the cluster-secret handshake.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(producer(s).AuthFailures)) },
	},
	{
		name: "kvlease_transfer_bytes_total", kind: counter,
		help:   "KV bytes moved between engines: direction=out served by this prefill engine, direction=in pulled by this decode engine.",
		labels: []string{"direction"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emit(float64(producer(s).BytesServed), "out")
			emit(float64(consumer(s).Bytes), "in")
		},
	},
	{
		name: "kvlease_transfer_blocks_total", kind: counter,
		help:   "Remote-prefix blocks on this decode engine: pulled from the prefill engine, or hit (already in the local prefix cache, not pulled).",
		labels: []string{"source"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			c := consumer(s)
			emit(float64(c.PulledBlocks), "pulled")
			emit(float64(c.HitBlocks), "hit")
		},
	},
	{
		name: "kvlease_transfer_failures_total", kind: counter,
		help:   "Transfer failures on this decode engine by kind, retried or not.",
		labels: []string{"kind"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emitEach(consumer(s).Failures, failureKinds, emit)
		},
	},
	{
		name: "kvlease_transfer_peers_failing", kind: gauge,
		help: "Prefill endpoints whose last connection attempt from this decode engine failed (no handshake succeeded since) within the last 5 minutes, by reason: " +
			"unauthenticated (different cluster secrets), bad_version, handshake_timeout (a silent or stopped endpoint), handshake_closed (not a kvlease prefill engine), handshake_refused, unreachable.",
		labels: []string{"reason"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emitEach(consumer(s).PeersFailing, peerFailureKinds, emit)
		},
	},
	{
		name: "kvlease_remote_prefill_fallbacks_total", kind: counter,
		help:   "Requests whose remote prefix could not be had, by reason; they were recomputed locally or failed, by the fallback policy.",
		labels: []string{"reason"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emitEach(consumer(s).Fallbacks, fallbackReasons, emit)
		},
	},
	{
		name: "kvlease_remote_prefill_requests", kind: gauge,
		help:   "Requests of this decode engine waiting for their remote prefix (state=waiting) or pulling it (state=reading).",
		labels: []string{"state"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			c := consumer(s)
			emit(float64(c.Waiting), "waiting")
			emit(float64(c.Reading), "reading")
		},
	},
	{
		name: "kvlease_releases_sent_total", kind: counter,
		help:   "RELEASE notices this decode engine sent to prefill engines, by reason: read_done, rejected, aborted, fallback.",
		labels: []string{"reason"},
		read: func(s *engine.NodeStats, emit emitFunc) {
			emitEach(consumer(s).ReleasesSent, sentReasons, emit)
		},
	},
	{
		name: "kvlease_lease_renewals_sent_total", kind: counter,
		help: "Batched RENEW heartbeats this decode engine sent.",
		read: func(s *engine.NodeStats, emit emitFunc) { emit(float64(consumer(s).RenewsSent)) },
	},
}
