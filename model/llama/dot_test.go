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

func TestDotQ8KernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for nb := 1; nb <= 48; nb++ {
		n := nb * Q8Block
		x := make([]float32, n)
		raw := make([]byte, nb*q8BlockBytes)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for b := 0; b < nb; b++ {
			h := F32ToF16(float32(r.Float64() * 0.05))
			raw[b*q8BlockBytes], raw[b*q8BlockBytes+1] = byte(h), byte(h>>8)
			for i := 0; i < Q8Block; i++ {
				raw[b*q8BlockBytes+2+i] = byte(r.IntN(256))
			}
		}
		g := dotQ8Generic(raw, x)
		if v := dotQ8(raw, x); math.Float32bits(v) != math.Float32bits(g) {
			t.Fatalf("%d blocks: dotQ8 %v, generic %v (AVX2 %v)", nb, v, g, hasAVX2FMA)
		}
		ref := 0.0
		for b := 0; b < nb; b++ {
			d := float64(F16ToF32(uint16(raw[b*q8BlockBytes]) | uint16(raw[b*q8BlockBytes+1])<<8))
			for i := 0; i < Q8Block; i++ {
				ref += d * float64(int8(raw[b*q8BlockBytes+2+i])) * float64(x[b*Q8Block+i])
			}
		}
		if math.Abs(float64(g)-ref) > 1e-4*(1+math.Abs(ref)) {
			t.Fatalf("%d blocks: %v, float64 %v", nb, g, ref)
		}
	}
}
