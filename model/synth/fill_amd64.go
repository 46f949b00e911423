package synth

import "golang.org/x/sys/cpu"

// hasFillAVX512 selects fillAVX512, which needs AVX-512F and the 64-bit
// multiply of AVX-512DQ. It writes fill's bytes exactly (integer
// arithmetic only).
var hasFillAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

//go:noescape
func fillAVX512(dst *byte, sts *uint64, nsec, chunks int)

// fillVector writes kv as fill does when the CPU can and every section is
// a whole number of 64-byte chunks: sts[j] is section j's stream start,
// combine(seed^domainFill, j). It reports false, writing nothing, when it
// cannot.
func fillVector(kv []byte, sts []uint64, section int) bool {
	if !hasFillAVX512 || section%64 != 0 || section == 0 || len(sts) == 0 || len(kv) != len(sts)*section {
		return false
	}
	fillAVX512(&kv[0], &sts[0], len(sts), section/64)
	return true
}
