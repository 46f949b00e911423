package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFMA32MatchesCPU: fma32 gives FMADD's bits (FMLA's per lane: the
// NEON kernels' fused step), signed zeros and infinities included.
func TestFMA32MatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, in := range fmaInputs(r, 200000) {
		a, b, c := in[0], in[1], in[2]
		got, cpu := fma32(a, b, c), fma32FMA(a, b, c)
		if math.Float32bits(got) != math.Float32bits(cpu) && !(got != got && cpu != cpu) {
			t.Fatalf("fma32(%g, %g, %g) = %#x, FMADD %#x", a, b, c, math.Float32bits(got), math.Float32bits(cpu))
		}
	}
}

// TestDotF16NEONAgrees: the F16 kernel gives dotF16Generic's bits on rows
// of any float16 bit pattern (subnormals, zeros of both signs,
// infinities and NaNs among them) and lengths with every remainder of 4.
func TestDotF16NEONAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for trial := 0; trial < 400; trial++ {
		n := 1 + r.IntN(300)
		raw, x := make([]byte, 2*n), make([]float32, n)
		for i := range x {
			h := uint16(r.Uint32())
			if r.IntN(4) > 0 {
				h = F32ToF16(float32(r.NormFloat64()))
			}
			raw[2*i], raw[2*i+1] = byte(h), byte(h>>8)
			x[i] = float32(r.NormFloat64() * 4)
		}
		got, want := dotF16(raw, x), dotF16Generic(raw, x)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("n=%d: dotF16 %v, generic %v", n, got, want)
		}
	}
}
