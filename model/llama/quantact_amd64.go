package llama

// quantQ8AVX2 is quantQ8 over nb blocks from x (quantact_amd64.s),
// stopping at the first block it leaves to quantQ8; it returns the
// number of blocks done.
//
//go:noescape
func quantQ8AVX2(x *float32, nb int, q *int8, d, s *float32, u *uint8) int

// useQuantAVX2 selects quantQ8AVX2 (the tests turn it off to compare).
var useQuantAVX2 = hasAVX2FMA

// quantQ8Vec is quantQ8AVX2 where the CPU has it, else 0 blocks done.
func quantQ8Vec(x *float32, nb int, q *int8, d, s *float32, u *uint8) int {
	if !useQuantAVX2 {
		return 0
	}
	return quantQ8AVX2(x, nb, q, d, s, u)
}
