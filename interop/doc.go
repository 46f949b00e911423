// Package interop holds tests (only) that drive kvlease with llm-d's own
// components, imported as Go libraries at the versions go.mod pins:
//
//   - llm-d-kv-cache's KV events pipeline (pkg/kvevents: its ZMQ
//     subscriber, Pool and the VLLMAdapter decoder that llm-d's router
//     shares, with an in-memory kvblock index) subscribed to `kvlease
//     serve --kv-events-endpoint`, in every encoding kvlease offers;
//   - llm-d-inference-scheduler's P/D sidecar (pkg/sidecar/proxy, the
//     nixlv2 connector) in front of a kvlease decode engine, with a kvlease
//     prefill engine named in its x-prefiller-host-port header;
//   - the endpoint picker's metrics scraper (gateway-api-inference-extension's
//     pkg/epp/backend/metrics, which llm-d-inference-scheduler builds on) on
//     kvlease's /metrics.
//
// The module has its own go.mod (as deploy/ has) so that kvlease's own
// module does not depend on llm-d's Kubernetes-sized dependency tree; a
// replace points it at the kvlease checkout it sits in. The engines run
// as processes of a kvlease binary built from that checkout; the tests
// import only kvlease's kvblock and kvevents/kveventstest (small, stable
// dependencies), so that a module kvlease adds elsewhere does not change
// this module's go.sum.
package interop
