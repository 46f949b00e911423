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
		addEdgeValues(r, x, 200)
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
		for i := range want.q {
			if got.q[i] != want.q[i] {
				t.Fatalf("%d×%d: q[%d] = %d, quantQ8 %d (x %v)", n, cols, i, got.q[i], want.q[i], x[i])
			}
		}
		for i := range want.ob {
			if got.ob[i] != want.ob[i] {
				t.Fatalf("%d×%d: ob[%d] = %d, quantQ8 %d", n, cols, i, got.ob[i], want.ob[i])
			}
		}
	}
}

// TestQuantizeQ8KAgrees: actQ8K's vector rounding (quantQ8KVec, by
// quantQ8KAVX512 and by quantQ8KAVX2) gives quantQ8K's quants, scales and
// sums of 16 bit for bit, on inputs with edge values (zeros, huge and tiny
// magnitudes, subnormals, NaN and infinities, whole super-blocks of them,
// the largest |x| twice with either sign first).
func TestQuantizeQ8KAgrees(t *testing.T) {
	avx512, avx2 := useQuantAVX512, useQuantKAVX2
	defer func() { useQuantAVX512, useQuantKAVX2 = avx512, avx2 }()
	kernels := map[string]bool{}
	if avx512 {
		kernels["AVX-512"] = true
	}
	if avx2 {
		kernels["AVX2"] = false
	}
	if len(kernels) == 0 {
		t.Skip("no AVX2: quantQ8K rounds every super-block")
	}
	for name, use512 := range kernels {
		t.Run(name, func(t *testing.T) { quantizeQ8KAgrees(t, use512) })
	}
}

func quantizeQ8KAgrees(t *testing.T, use512 bool) {
	r := rand.New(rand.NewPCG(33, 34))
	for trial := 0; trial < 300; trial++ {
		n, cols := 1+r.IntN(5), qkK*(1+r.IntN(6))
		x := randomInputs(r, n, cols)
		addEdgeValues(r, x, 2000)
		b := r.IntN(n * cols / qkK)
		blk := x[qkK*b : qkK*(b+1)]
		switch trial % 4 {
		case 0: // a whole super-block tiny, subnormal or zero
			for i := range blk {
				blk[i] = []float32{1e-37, 1e-40, 0, 3e-36}[trial/4%4] * float32(r.NormFloat64())
			}
		case 1: // its largest |x| twice, either sign first
			m := float32(0)
			for _, v := range blk {
				m = max(m, float32(math.Abs(float64(v))))
			}
			i, j := r.IntN(qkK), r.IntN(qkK)
			blk[i], blk[j] = m*2, -m*2
		}
		var got, want acts
		useQuantAVX512, useQuantKAVX2 = use512, !use512
		got.quantize(actQ8K, x, cols, n)
		useQuantAVX512, useQuantKAVX2 = false, false
		want.quantize(actQ8K, x, cols, n)
		for i := range want.d {
			if math.Float32bits(got.d[i]) != math.Float32bits(want.d[i]) {
				t.Fatalf("%d×%d: d[%d] = %v, quantQ8K %v", n, cols, i, got.d[i], want.d[i])
			}
		}
		for i := range want.q {
			if got.q[i] != want.q[i] {
				t.Fatalf("%d×%d: q[%d] = %d, quantQ8K %d (x %v)", n, cols, i, got.q[i], want.q[i], x[i])
			}
		}
		for i := range want.bs {
			if got.bs[i] != want.bs[i] {
				t.Fatalf("%d×%d: bs[%d] = %d, quantQ8K %d", n, cols, i, got.bs[i], want.bs[i])
			}
		}
	}
}

// addEdgeValues makes about 4 in oneIn of x NaN, an infinity, a subnormal
// or tiny.
func addEdgeValues(r *rand.Rand, x []float32, oneIn int) {
	for i := range x {
		switch r.IntN(oneIn) {
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
}
