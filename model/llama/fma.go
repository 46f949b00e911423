package llama

import "math"

// fma32 is a·b + c rounded once to float32 (to nearest, ties to even): the
// fused multiply-add of IEEE 754 in single precision, which VFMADD231PS
// computes per lane. It is the generic twin of the vector kernels' fused
// steps, so it must give their bits for every input.
//
// float32(math.FMA(float64(a), float64(b), float64(c))) does not: it
// rounds twice, to float64 and then to float32, and when the first rounding
// lands exactly halfway between two float32 values the second one breaks
// the tie by evenness instead of by the discarded bits (1+2⁻²³ plus a
// product just under 2⁻²⁴ rounds down once but up twice). So:
//
//   - p = a·b in float64 is exact (24-bit significands give at most 48
//     bits; exponents stay within float64's normal range);
//   - s = p + c rounded to float64, and the error e of that addition
//     exactly (Knuth's TwoSum: s + e = p + c);
//   - float32(s) is then a·b + c correctly rounded unless s sits exactly
//     halfway between two float32 values (its low 29 bits 1 followed by
//     zeros) or in float32's subnormal range, where halfway has more
//     zeros; only then (rarely) is e needed, and s is replaced by its
//     neighbour towards e when e ≠ 0 and s's last bit is even: that is
//     p + c rounded to odd in 53 bits, and rounding to odd with at least
//     two more bits than the target makes the final rounding to float32
//     correct (Boldo and Melquiond, "Emulation of FMA and correctly
//     rounded sums: proved algorithms using rounding to odd", IEEE Trans.
//     Computers 57(4), 2008).
//
// Infinities and NaNs pass through the float64 arithmetic unadjusted.
// Fusing p into the additions (which Go may do on some platforms) changes
// nothing: p is exact.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	cc := float64(c)
	s := p + cc
	bits := math.Float64bits(s)
	if bits&(1<<29-1) != 1<<28 && bits>>52&0x7ff >= 1023-126 {
		return float32(s) // not halfway, not subnormal in float32: one rounding decides
	}
	return fma32Odd(p, cc, s)
}

// fma32Odd is fma32's rare path: s = p + c rounded to float64, made the
// rounding to odd of p + c (TwoSum gives the error of s exactly), then
// rounded to float32. Kept out of line, so that fma32 inlines.
//
//go:noinline
func fma32Odd(p, c, s float64) float32 {
	bv := s - p
	e := (p - (s - bv)) + (c - bv)
	if e != 0 {
		bits := math.Float64bits(s)
		if bits&1 == 0 && bits>>52&0x7ff != 0x7ff {
			if (e > 0) == (s > 0) {
				bits++ // away from zero, towards a·b + c
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}
