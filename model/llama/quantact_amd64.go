package llama

import "golang.org/x/sys/cpu"

// quantQ8AVX2 is quantQ8 over nb blocks from x (quantact_amd64.s),
// stopping at the first block it leaves to quantQ8; it returns the
// number of blocks done.
//
//go:noescape
func quantQ8AVX2(x *float32, nb int, q *int8, d, s *float32, ob *int32) int

// useQuantAVX2 selects quantQ8AVX2 (the tests turn it off to compare).
var useQuantAVX2 = hasAVX2FMA

// quantQ8Vec is quantQ8AVX2 where the CPU has it, else 0 blocks done.
func quantQ8Vec(x *float32, nb int, q *int8, d, s *float32, ob *int32) int {
	if !useQuantAVX2 {
		return 0
	}
	return quantQ8AVX2(x, nb, q, d, s, ob)
}

// quantQ8KAVX512 is quantQ8K without the sums of 16 over nb super-blocks
// from x (quantact_amd64.s), stopping at the first it leaves to quantQ8K;
// it returns the number of super-blocks done.
//
//go:noescape
func quantQ8KAVX512(x *float32, nb int, q *int8, d *float32) int

// useQuantAVX512 selects quantQ8KAVX512 (the tests turn it off to compare).
var useQuantAVX512 = hasAVX2FMA && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW

// quantQ8KAVX2 is quantQ8KAVX512 for CPUs with AVX2 but not AVX-512
// (quantact_amd64.s).
//
//go:noescape
func quantQ8KAVX2(x *float32, nb int, q *int8, d *float32) int

// useQuantKAVX2 selects quantQ8KAVX2 where quantQ8KAVX512 is not used (the
// tests turn it off to compare).
var useQuantKAVX2 = hasAVX2FMA

// quantQ8KVec is quantQ8KAVX512 or quantQ8KAVX2 where the CPU has them,
// else 0 done.
func quantQ8KVec(x *float32, nb int, q *int8, d *float32) int {
	switch {
	case useQuantAVX512:
		return quantQ8KAVX512(x, nb, q, d)
	case useQuantKAVX2:
		return quantQ8KAVX2(x, nb, q, d)
	}
	return 0
}
