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

// TestF32x8KernelsAgree: both eight-vector kernels, called directly (mulF32
// picks one per CPU), give the generic twin's bits.
func TestF32x8KernelsAgree(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 and FMA")
	}
	r := rand.New(rand.NewPCG(15, 16))
	for trial := 0; trial < 60; trial++ {
		cols, rows := 32*(1+r.IntN(30)), 1+r.IntN(40)
		stride := rows + r.IntN(3)
		w, x := make([]float32, rows*cols), make([]float32, 8*cols)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		for i := range x {
			x[i] = float32(r.NormFloat64() * 10)
		}
		want := make([]float32, 8*stride)
		mulF32Generic(w, cols, x, 8, want, stride)
		kernels := map[string]func(out []float32){
			"AVX2": func(out []float32) { dotF32x8AVX2(&w[0], rows, cols, &x[0], &out[0], stride) },
		}
		if hasAVX512 {
			kernels["AVX512"] = func(out []float32) { dotF32x8AVX512(&w[0], rows, cols, &x[0], &out[0], stride) }
		}
		for name, k := range kernels {
			got := make([]float32, 8*stride)
			k(got)
			for v := 0; v < 8; v++ {
				for i := 0; i < rows; i++ {
					if g, e := got[v*stride+i], want[v*stride+i]; math.Float32bits(g) != math.Float32bits(e) {
						t.Fatalf("%s %d×%d: out[%d][%d] = %v, generic %v", name, rows, cols, v, i, g, e)
					}
				}
			}
		}
	}
}
