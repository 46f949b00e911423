package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotKernelsAgree: the vector kernel gives exactly the bits of the
// generic one (the order they share is the package's contract), for every
// length it takes (the multiples of 32) and lengths it leaves to the
// generic one; and both are close to a float64 sum.
func TestDotKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var lengths []int
	for n := 1; n <= 1376; n += 1 + n/7 {
		lengths = append(lengths, n)
	}
	for n := 32; n <= 2048; n += 32 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		w, x := make([]float32, n), make([]float32, n)
		ref := 0.0
		for i := range w {
			w[i], x[i] = float32(r.NormFloat64()), float32(r.NormFloat64()*10)
			ref += float64(w[i]) * float64(x[i])
		}
		g := dot32Generic(w, x)
		if v := dotF32(w, x); math.Float32bits(v) != math.Float32bits(g) {
			t.Fatalf("n=%d: dotF32 %v, generic %v (AVX2 %v)", n, v, g, hasAVX2FMA)
		}
		if math.Abs(float64(g)-ref) > 1e-4*(1+math.Sqrt(float64(n))*10) {
			t.Fatalf("n=%d: %v, float64 sum %v", n, g, ref)
		}
	}
}
