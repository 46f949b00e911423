package llama

//go:noescape
func expSumAVX2(sc *float32, n int, mx float32) float32

// expSum is expSumGeneric with the AVX2 kernel for the lanes: the same
// bits.
func expSum(sc []float32, mx float32) float32 {
	n8 := len(sc) &^ 7
	if !hasAVX2FMA || n8 == 0 {
		return expSumGeneric(sc, mx)
	}
	return expSumTail(sc[n8:], mx, expSumAVX2(&sc[0], n8, mx))
}

//go:noescape
func siluMulAVX2(h1, h3 *float32, n int)

// siluMul is siluMulGeneric with the AVX2 kernel for all but the last
// len(h1) mod 8: the same bits.
func siluMul(h1, h3 []float32) {
	h3 = h3[:len(h1)]
	n8 := 0
	if hasAVX2FMA {
		if n8 = len(h1) &^ 7; n8 > 0 {
			siluMulAVX2(&h1[0], &h3[0], n8)
		}
	}
	siluMulGeneric(h1[n8:], h3[n8:])
}
