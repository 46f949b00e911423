// Package faultapi is the pure core of kvlease's fault-injection API for router
// testing: it parses and validates fault specs, keeps the active faults, and
// decides which faults hit a request. It does no I/O and reads no clock:
// the caller passes the instant and a *rand.Rand, so a simulator can drive
// the same decisions from a seed. The HTTP edge (httpapi/faultapi.go) serves
// POST/GET/DELETE /kvlease/v1/faults over a Registry and carries out the
// Plan of each request: the lease faults go to the prefill engine's
// producer (xfer.LeaseFaults), the pull faults to the decode engine's
// consumer (xfer.PullFaults), the rest it applies itself.
//
// A fault changes when things happen, never the safety rules: an early
// expiry or revocation goes through the producer's normal release path
// (a read in flight pins the lease), a corrupted block is caught by the
// decode engine's checksum, a stalled read keeps its lease pinned.
//
// A Registry is not safe for concurrent use.
package faultapi
