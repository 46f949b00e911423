package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantizeQ8Agrees: actQ8's vector rounding (quantQ8Vec) gives
// quantQ8's quants, scales, sums and offset copies bit for bit, on inputs
// with edge values (zeros, huge and tiny magnitudes, subnormals, NaN and
// infinities, whole blocks of them).
func TestQuantizeQ8Agrees(t *testing.T) {
	if !useQuantAVX2 {
		t.Skip("no AVX2: quantQ8 rounds every block")
	}
	r := rand.New(rand.NewPCG(31, 32))
	for trial := 0; trial < 300; trial++ {
		n, cols := 1+r.IntN(19), 32*(1+r.IntN(12))
		x := randomInputs(r, n, cols)
		for i := range x {
			switch r.IntN(200) {
			case 0:
				x[i] = float32(math.NaN())
			case 1:
				x[i] = float32(math.Inf(1 - 2*r.IntN(2)))
			case 2:
				x[i] = math.Float32frombits(r.Uint32() & 0x807fffff) // subnormal
			case 3:
				x[i] *= 1e-37
			}
		}
		if trial%4 == 0 { // a whole block tiny, subnormal or zero
			b := r.IntN(n * cols / 32)
			for i := 32 * b; i < 32*b+32; i++ {
				x[i] = []float32{1e-37, 1e-40, 0, 3e-36}[trial/4%4] * float32(r.NormFloat64())
			}
		}
		var got, want acts
		got.quantize(actQ8, x, cols, n)
		useQuantAVX2 = false
		want.quantize(actQ8, x, cols, n)
		useQuantAVX2 = true
		same := func(name string, g, w []float32) {
			for i := range w {
				if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
					t.Fatalf("%d×%d: %s[%d] = %v, quantQ8 %v", n, cols, name, i, g[i], w[i])
				}
			}
		}
		same("d", got.d, want.d)
		same("s", got.s, want.s)
		same("dt", got.dt, want.dt)
		for i := range want.q {
			if got.q[i] != want.q[i] {
				t.Fatalf("%d×%d: q[%d] = %d, quantQ8 %d (x %v)", n, cols, i, got.q[i], want.q[i], x[i])
			}
		}
		for i := range want.u {
			if got.u[i] != want.u[i] {
				t.Fatalf("%d×%d: u[%d] = %d, quantQ8 %d", n, cols, i, got.u[i], want.u[i])
			}
		}
	}
}
