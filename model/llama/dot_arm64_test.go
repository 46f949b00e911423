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
