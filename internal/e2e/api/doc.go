// Package api holds kvlease's end-to-end tests (EDGE, tests only): real
// engines served over loopback HTTP on 127.0.0.1, driven as a client would
// drive them, with the official openai-go SDK, raw HTTP where the SDK
// cannot say something (kv_transfer_params, malformed bodies), and
// /metrics to look inside. Engines run in-process (node.Node, httpapi,
// transport/tcp), and one test builds and runs the kvlease binary itself.
//
// Every test stops what it started. None sleeps to wait for something: they
// wait for a condition with a deadline.
package api
