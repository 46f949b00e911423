// Package clock defines Instant, the only notion of time inside kvlease's
// pure cores.
//
// Cores never read a clock. Every input that depends on time carries the
// current Instant, passed in by the caller: the real edges derive it from a
// monotonic clock, the simulator from its virtual clock. time.Duration is used
// as a type only.
package clock
