package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExp32Accuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for i := 0; i < 200000; i++ {
		x := float32(r.Float64()*(88+87.33) - 87.33)
		if i < 1000 {
			x = float32(r.NormFloat64()) // softmax's usual range
		}
		got, want := float64(exp32(x)), math.Exp(float64(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
			if rel > 3e-7 {
				t.Fatalf("exp32(%v) = %v, e^x = %v: relative error %.3g", x, got, want, rel)
			}
		}
	}
	t.Logf("largest relative error %.3g", worst)
	for _, c := range []struct{ x, want float32 }{
		{0, 1},
		{expHi, float32(math.Exp(88))},
		{math.Nextafter32(expHi, 100), float32(math.Inf(1))},
		{float32(math.Inf(1)), float32(math.Inf(1))},
		{math.Nextafter32(expLo, -100), 0},
		{float32(math.Inf(-1)), 0},
	} {
		if got := exp32(c.x); got != c.want && math.Abs(float64(got-c.want)) > 3e-7*float64(c.want) {
			t.Errorf("exp32(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := exp32(expLo); got == 0 || got > 1.2e-38 {
		t.Errorf("exp32(%v) = %v, want the smallest normal range", expLo, got)
	}
	if got := exp32(float32(math.NaN())); got == got {
		t.Errorf("exp32(NaN) = %v", got)
	}
}

// TestExpSumAgrees: expSum (the vector kernel where there is one) gives
// expSumGeneric's bits, values and sum, on every length and on the
// saturating and special inputs.
func TestExpSumAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	special := []float32{0, expHi, math.Nextafter32(expHi, 100), expLo, math.Nextafter32(expLo, -100),
		math.Nextafter32(expLo, 100), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -1e30, 1e30, 0.5 * float32(math.Ln2), -0.5 * float32(math.Ln2)}
	for trial := 0; trial < 2000; trial++ {
		n := r.IntN(80)
		sc := make([]float32, n)
		for i := range sc {
			switch r.IntN(8) {
			case 0:
				sc[i] = special[r.IntN(len(special))]
			case 1:
				sc[i] = float32(r.Float64()*180 - 90)
			default:
				sc[i] = float32(r.NormFloat64() * 8)
			}
		}
		mx := float32(0)
		if r.IntN(2) == 0 {
			mx = float32(r.NormFloat64())
		}
		a, b := append([]float32(nil), sc...), append([]float32(nil), sc...)
		sa, sb := expSum(a, mx), expSumGeneric(b, mx)
		if math.Float32bits(sa) != math.Float32bits(sb) && !(sa != sa && sb != sb) {
			t.Fatalf("n=%d mx=%v: sum %v, generic %v (AVX2 %v)", n, mx, sa, sb, hasAVX2FMA)
		}
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
				t.Fatalf("n=%d mx=%v: exp(%v) = %v, generic %v (AVX2 %v)", n, mx, sc[i]-mx, a[i], b[i], hasAVX2FMA)
			}
		}
	}
}

// TestSiluMulAgrees: siluMul (the vector kernel where there is one) gives
// siluMulGeneric's bits on every length and on saturating and special
// gates.
func TestSiluMulAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), -expHi, -math.Nextafter32(expHi, 100), -expLo, -math.Nextafter32(expLo, -100),
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -1e30, 1e30, 3e38}
	for trial := 0; trial < 2000; trial++ {
		n := r.IntN(80)
		h1, h3 := make([]float32, n), make([]float32, n)
		for i := range h1 {
			switch r.IntN(8) {
			case 0:
				h1[i] = special[r.IntN(len(special))]
			case 1:
				h1[i] = float32(r.Float64()*200 - 100)
			default:
				h1[i] = float32(r.NormFloat64() * 4)
			}
			h3[i] = float32(r.NormFloat64())
		}
		a, b := append([]float32(nil), h1...), append([]float32(nil), h1...)
		siluMul(a, h3)
		siluMulGeneric(b, h3)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
				t.Fatalf("n=%d: silu(%v)·%v = %v, generic %v (AVX2 %v)", n, h1[i], h3[i], a[i], b[i], hasAVX2FMA)
			}
		}
	}
}
