package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot32AVX2At288: the AVX2 kernel itself (dotF32 may pick either) at
// the 15M shape's width.
func TestDot32AVX2At288(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2")
	}
	n := 288
	w, x := make([]float32, n), make([]float32, n)
	for i := range w {
		w[i], x[i] = float32(i%7)-3, float32(i%5)*0.1
	}
	if dot32AVX2(&w[0], &x[0], n) != dot32Generic(w, x) {
		t.Fatal("AVX2 kernel differs at 288")
	}
}

// TestFMA32MatchesCPU: fma32 gives VFMADD231SS's bits (the vector kernels'
// per lane), signed zeros and infinities included.
func TestFMA32MatchesCPU(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no FMA")
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, in := range fmaInputs(r, 200000) {
		a, b, c := in[0], in[1], in[2]
		got, cpu := fma32(a, b, c), fma32FMA(a, b, c)
		if math.Float32bits(got) != math.Float32bits(cpu) && !(got != got && cpu != cpu) {
			t.Fatalf("fma32(%g, %g, %g) = %#x, VFMADD231SS %#x", a, b, c, math.Float32bits(got), math.Float32bits(cpu))
		}
	}
}
