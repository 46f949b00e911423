package llama

import "math"

// exp32 is e^x in float32 arithmetic, the definition the vector kernels
// (expSum) follow operation for operation, so that softmax's bits do not
// depend on the CPU: math.Exp is a different function on amd64 and arm64.
//
// x is split as n·ln2 + r with n = x·log2(e) rounded to the nearest
// integer (ties to even) and r = x − n·ln2 in two fused steps (ln2 as a
// float32 high part with 8 trailing zero bits and a low part, Cody and
// Waite), |r| ≤ ln2/2; e^r = 1 + r + r²·p(r) with p Cephes' expf
// polynomial of degree 5 (fused multiply-adds, Horner); times 2^n by
// exponent bits. Relative error about 1e-7 (two units in the last place).
// Beyond float32's normal range it saturates: x > 88 gives +Inf, x <
// −87.33654 gives 0 (e^x is then below the smallest normal float32; the
// subnormals are not produced), NaN gives NaN.
func exp32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > expHi:
		return float32(math.Inf(1))
	case x < expLo:
		return 0
	}
	n := float32(math.RoundToEven(float64(float32(x * expLog2e))))
	r := fma32(n, -expLn2Hi, x)
	r = fma32(n, -expLn2Lo, r)
	p := fma32(expC5, r, expC4)
	p = fma32(p, r, expC3)
	p = fma32(p, r, expC2)
	p = fma32(p, r, expC1)
	p = fma32(p, r, expC0)
	y := fma32(p, float32(r*r), r)
	y = float32(y + 1)
	return float32(y * math.Float32frombits(uint32(int32(n)+127)<<23))
}

// exp32's constants (float32 values; the kernels load the same bits).
const (
	expHi    = float32(88)
	expLo    = float32(-87.33654)
	expLog2e = float32(1.44269504088896341)
	expLn2Hi = float32(0.693359375)
	expLn2Lo = float32(-2.12194440e-4)
	expC5    = float32(1.9875691500e-4)
	expC4    = float32(1.3981999507e-3)
	expC3    = float32(8.3334519073e-3)
	expC2    = float32(4.1665795894e-2)
	expC1    = float32(1.6666665459e-1)
	expC0    = float32(5.0000001201e-1)
)

// expSumGeneric replaces each v of sc by exp32(v − mx) and returns their
// sum: the first len(sc) &^ 7 in eight lanes (position p in lane p mod 8)
// combined as hsum8, then the rest added in position order. expSum picks
// a vector kernel of the same operations.
func expSumGeneric(sc []float32, mx float32) float32 {
	n8 := len(sc) &^ 7
	var lanes [8]float32
	for p := 0; p < n8; p++ {
		v := exp32(float32(sc[p] - mx))
		sc[p] = v
		lanes[p&7] = float32(lanes[p&7] + v)
	}
	return expSumTail(sc[n8:], mx, hsum8(&lanes))
}

// expSumTail is expSumGeneric's rest: each v of sc (the positions after
// the lanes) replaced by exp32(v − mx) and added to sum in order.
func expSumTail(sc []float32, mx, sum float32) float32 {
	for p, v := range sc {
		v = exp32(float32(v - mx))
		sc[p] = v
		sum = float32(sum + v)
	}
	return sum
}

// siluMulGeneric sets h1[i] = silu(h1[i]) · h3[i], silu(g) = g / (1 +
// exp32(−g)), each operation rounded to float32 (the feed-forward gate).
// siluMul picks a vector kernel of the same operations.
func siluMulGeneric(h1, h3 []float32) {
	h3 = h3[:len(h1)]
	for i, g := range h1 {
		h1[i] = float32(g/float32(1+exp32(-g))) * h3[i]
	}
}
