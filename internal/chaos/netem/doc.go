// Package netem is a userspace stand-in for Linux's netem queueing
// discipline, for kernels built without it: what a link does to each IP
// packet — delay with jitter, loss, reordering, duplication, corruption —
// applied by a program that forwards the packets between TUN devices.
//
// Fault describes one link's impairment in netem's terms. Queue is the
// pure core: it takes each packet with the instant it arrived and the
// fault in force, decides its fate from an injected *rand.Rand (dropped,
// corrupted, duplicated, sent at once ahead of the others, or held until
// its due instant) and hands packets back in due order; it has a bounded
// capacity, beyond which packets are dropped and counted, as netem's
// limit. Forwarder (forward.go, the edge) drives a Queue with the wall
// clock: one goroutine reads each device, one writes each packet to the
// device of its destination address when it is due.
//
// The TCP below the programs on either side sees real loss, reordering,
// duplicates and corrupted segments and answers them as it would on a
// real link: retransmits, SACKs, duplicate ACKs, segments dropped by
// their checksum.
package netem
