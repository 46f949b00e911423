package llama

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fmaInputs are triples for fma32: random magnitudes (subnormal to large),
// and triples built so that a·b + c falls within a few float64 ulps of a
// float32 rounding boundary, where a double rounding goes wrong.
func fmaInputs(r *rand.Rand, n int) [][3]float32 {
	anyF := func() float32 {
		switch r.IntN(8) {
		case 0:
			return math.Float32frombits(r.Uint32()) // any bits: NaNs are dropped below
		case 1:
			return float32(r.NormFloat64()) * math.SmallestNonzeroFloat32 * float32(r.IntN(1<<20))
		default:
			return float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
		}
	}
	var out [][3]float32
	for len(out) < n {
		a, b, c := anyF(), anyF(), anyF()
		if r.IntN(2) == 0 && c != 0 && !math.IsInf(float64(c), 0) && a != 0 {
			// a·b ≈ ±half an ulp of c (or a multiple), plus a few float64 ulps.
			ulp := math.Abs(float64(math.Nextafter32(c, float32(math.Inf(1)))) - float64(c))
			t := ulp / 2 * float64(1+2*r.IntN(3))
			if r.IntN(2) == 0 {
				t = -t
			}
			b = float32(t / float64(a))
			for k := r.IntN(4); k > 0; k-- {
				b = math.Nextafter32(b, float32(math.Inf(2*r.IntN(2)-1)))
			}
		}
		if a != a || b != b || c != c {
			continue
		}
		out = append(out, [3]float32{a, b, c})
	}
	return append(out,
		[3]float32{1 + 0x1p-23, (1 - 0x1p-23) * 0x1p-24, 1 + 0x1p-23},
		[3]float32{0, 5, -0}, [3]float32{-0, 5, -0}, [3]float32{-1, 1, 1},
		[3]float32{math.MaxFloat32, 2, 0}, [3]float32{float32(math.Inf(1)), 1, 1},
		[3]float32{math.SmallestNonzeroFloat32, 0.5, 0}, [3]float32{math.SmallestNonzeroFloat32, 0.75, 0})
}

// TestFMA32Exact: fma32 is a·b + c computed exactly (big.Float) and rounded
// once to float32; and float32(math.FMA(…)) is not, on the triple of its
// documentation.
func TestFMA32Exact(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, in := range fmaInputs(r, 200000) {
		a, b, c := in[0], in[1], in[2]
		got := fma32(a, b, c)
		if math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || math.IsInf(float64(c), 0) {
			continue // big.Float has no infinities to compare with
		}
		x := new(big.Float).SetPrec(2000).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetFloat64(float64(c)))
		want, _ := x.Float32()
		if math.Abs(float64(want)) < 2*math.SmallestNonzeroFloat32 {
			// big.Float flushes below the smallest subnormal; compare
			// these with float64 instead: they are exact there.
			want = float32(float64(a)*float64(b) + float64(c))
		}
		if got != want && !(got == 0 && want == 0) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), exact rounding %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	a, b, c := float32(1+0x1p-23), float32((1-0x1p-23)*0x1p-24), float32(1+0x1p-23)
	if got := fma32(a, b, c); got != 1+0x1p-23 {
		t.Fatalf("fma32 = %g, want 1+2⁻²³", got)
	}
	if twice := float32(math.FMA(float64(a), float64(b), float64(c))); twice != 1+0x1p-22 {
		t.Fatalf("double rounding gave %g: the documented counterexample no longer holds", twice)
	}
}
