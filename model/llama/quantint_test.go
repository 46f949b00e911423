package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// intTypes are the weight types dotIntGeneric multiplies (actOf names
// those a step multiplies so), with the rounding of their inputs.
var intTypes = map[Type]actKind{Q8_0: actQ8, Q4_0: actQ8, Q5_0: actQ8, Q4_1: actQ8, Q5_1: actQ8, Q4_K: actQ8K, Q5_K: actQ8K, Q6_K: actQ8K}

func TestIntTypes(t *testing.T) {
	for _, typ := range loadable {
		if k := actOf(typ); k != actNone && intTypes[typ] != k {
			t.Fatalf("%s rounds its inputs as %d, its twin as %d", typ, k, intTypes[typ])
		}
	}
}

// randomInputs is n rows of cols floats with edge values (zeros of both
// signs, huge and tiny magnitudes, whole blocks of zeros).
func randomInputs(r *rand.Rand, n, cols int) []float32 {
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		switch r.IntN(40) {
		case 0:
			x[i] = 0
		case 1:
			x[i] = float32(math.Copysign(0, -1))
		case 2:
			x[i] *= 1e30
		case 3:
			x[i] *= 1e-30
		}
	}
	if n*cols >= 256 && r.IntN(3) == 0 {
		clear(x[:256])
	}
	return x
}

// TestIntKernelsAgree: every integer type's vector kernels (one input,
// four, eight) give the bits of the generic twin, on random shapes (rows
// of up to 200 blocks of 32) and strided outputs, and the generic twin is the exact value of its defined math
// (exact integers, the float32 scale products, then exact sums) within
// the float32 rounding of its accumulation (a rounding per block and
// lane, and the three of hsum8, relative to Σ|terms|).
func TestIntKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for _, typ := range []Type{Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K} {
		k := intTypes[typ]
		bk := k.block()
		for trial := 0; trial < 60; trial++ {
			cols := typ.Block() * (1 + r.IntN(6))
			if trial%10 == 0 {
				cols = 32 * (60 + r.IntN(140)) / typ.Block() * typ.Block() // rows of more than 64 blocks (the offset kernels' segments)
			}
			rows := 1 + r.IntN(20)
			n := 1 + r.IntN(19)
			stride := rows + r.IntN(3)
			raw := randomRows(r, typ, rows, cols, true)
			x := randomInputs(r, n, cols)
			if trial%10 == 0 { // no edge values, which make long rows' sums NaN
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
			}
			var a acts
			a.quantize(k, x, cols, n)
			got, want := make([]float32, n*stride), make([]float32, n*stride)
			mulInt(typ, raw, &a, got, stride)
			mulIntGeneric(typ, raw, &a, want, stride)
			rb := typ.RowBytes(cols)
			for v := 0; v < n; v++ {
				for i := 0; i < rows; i++ {
					g, e := got[v*stride+i], want[v*stride+i]
					if math.Float32bits(g) != math.Float32bits(e) && !(g != g && e != e) {
						t.Fatalf("%s %d×%d, %d inputs: out[%d][%d] = %v, generic %v (AVX2 %v)", typ, rows, cols, n, v, i, g, e, hasAVX2FMA)
					}
					ex, mag := exactInt(typ, raw[i*rb:(i+1)*rb], &a, v)
					if math.IsInf(mag, 0) || math.IsNaN(ex) || math.IsInf(float64(e), 0) {
						continue // overflowing edge scales
					}
					if d := math.Abs(float64(e) - ex); d > 0x1p-23*mag*float64(cols/bk+4)+1e-30 {
						t.Fatalf("%s %d cols: %v, exact %v (error %g, magnitude %g)", typ, cols, e, ex, d, mag)
					}
				}
			}
		}
	}
}

// exactInt is dotIntGeneric's defined value in float64: the integer sums
// of each block (weights decoded independently here: Row's quants,
// checked against gguf-py by the dequantisation tests) times the float32
// scale products, summed exactly; and Σ|terms|, the scale of its
// rounding.
func exactInt(typ Type, raw []byte, a *acts, r int) (float64, float64) {
	c := a.cols
	bk := a.kind.block()
	bb := typ.BlockBytes()
	sum, mag := 0.0, 0.0
	for b := 0; b < c/bk; b++ {
		blk := raw[b*bb : (b+1)*bb]
		dx := a.d[r*c/bk+b]
		x := a.q[r*c+b*bk : r*c+(b+1)*bk]
		switch typ {
		case Q4_K, Q5_K:
			sc, mn := kScales(blk[4:16])
			var isum, msum, iabs, mabs int64
			for t := 0; t < qkK; t++ {
				p := int64(sc[t/32]) * int64(qK(typ, blk, t/32, t%32)) * int64(x[t])
				isum, iabs = isum+p, iabs+max(p, -p)
				p = int64(mn[t/32]) * int64(x[t])
				msum, mabs = msum+p, mabs+max(p, -p)
			}
			d := float64(float32(f16tab[le16(blk)] * dx))
			dm := float64(float32(f16tab[le16(blk[2:])] * dx))
			sum += d*float64(isum) - dm*float64(msum)
			mag += math.Abs(d)*float64(iabs) + math.Abs(dm)*float64(mabs)
		case Q6_K:
			var isum, iabs int64
			for t := 0; t < qkK; t++ {
				p := int64(int8(blk[192+t/16])) * (int64(q6(blk, t)) - 32) * int64(x[t])
				isum, iabs = isum+p, iabs+max(p, -p)
			}
			d := float64(float32(f16tab[le16(blk[208:])] * dx))
			sum += d * float64(isum)
			mag += math.Abs(d) * float64(iabs)
		default:
			var w [32]int32
			q32Ints(typ, blk, &w)
			var isum, iabs int64
			for t := range w {
				p := int64(w[t]) * int64(x[t])
				isum, iabs = isum+p, iabs+max(p, -p)
			}
			d := float64(float32(f16tab[le16(blk)] * dx))
			sum += d * float64(isum)
			mag += math.Abs(d) * float64(iabs)
			if typ == Q4_1 || typ == Q5_1 {
				m := float64(f16tab[le16(blk[2:])]) * float64(a.s[r*c/bk+b])
				sum += m
				mag += math.Abs(m)
			}
		}
	}
	return sum, mag
}

// TestQuantizeActs: the rounding of the inputs as defined (actKind): each
// quant within half a step of x/d (so the rounding is to nearest), |q| ≤
// 127, ties to even, Q8_1's s, Q8_K's sums of 16 and Q6_K's offset words
// (acts.q6) as stated; zeros and NaNs as stated.
func TestQuantizeActs(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	for _, k := range []actKind{actQ8, actQ8K} {
		bk := k.block()
		for trial := 0; trial < 200; trial++ {
			x := randomInputs(r, 1, bk)
			if trial%5 == 0 {
				// ties: multiples of half a step of the block's scale
				for i := range x {
					x[i] = float32(r.IntN(255)-127) / 2
				}
				x[0] = 127 / 2.0
			}
			var a acts
			a.quantize(k, x, bk, 1)
			amax, mx := float32(0), float32(0)
			for _, v := range x {
				if v := float32(math.Abs(float64(v))); v > amax {
					amax = v
				}
			}
			for _, v := range x {
				if float32(math.Abs(float64(v))) == amax {
					mx = v
					break
				}
			}
			var scale float32 // x·scale, rounded, is q
			if k == actQ8 {
				if want := F16ToF32(F32ToF16(amax / 127)); a.d[0] != want {
					t.Fatalf("q8 d = %v, want %v", a.d[0], want)
				}
				if amax != 0 {
					scale = 127 / amax
				}
			} else if amax != 0 {
				scale = -127 / mx
				if a.d[0] != 1/scale {
					t.Fatalf("q8K d = %v, want %v", a.d[0], 1/scale)
				}
			}
			sum := 0
			for i, v := range x {
				p := float64(float32(v * scale))
				q := float64(a.q[i])
				if math.Abs(p-q) > 0.5 || math.Abs(p-q) == 0.5 && math.Mod(q, 2) != 0 || math.Abs(q) > 127 {
					t.Fatalf("%v: x %v · %v = %v rounds to %v", k, v, scale, p, q)
				}
				sum += int(a.q[i])
			}
			if k == actQ8 {
				if want := F16ToF32(F32ToF16(float32(amax / 127 * float32(sum)))); a.s[0] != want {
					t.Fatalf("q8 s = %v, want %v", a.s[0], want)
				}
			} else {
				for j := 0; j < 16; j++ {
					s := 0
					for _, q := range a.q[16*j : 16*j+16] {
						s += int(q)
					}
					if int(a.bs[j]) != s {
						t.Fatalf("q8K bsums[%d] = %d, want %d", j, a.bs[j], s)
					}
				}
				for w := 0; offsetActs && w < 64; w++ { // Q6_K's offset words (acts.q6)
					t0 := 64*(w/16) + 32*(w%2) + 4*(w%16/2)
					s := 0
					for _, q := range a.q[t0 : t0+4] {
						s += int(q)
					}
					if int(a.q6[w]) != -32*s {
						t.Fatalf("q8K q6[%d] = %d, want %d", w, a.q6[w], -32*s)
					}
				}
			}
		}
		x := make([]float32, bk)
		x[3] = float32(math.NaN())
		var a acts
		a.quantize(k, x, bk, 1)
		if a.d[0] == a.d[0] {
			t.Fatalf("%v: a NaN input gives the scale %v", k, a.d[0])
		}
	}
}

// TestQuantizeTinyBlocksAgree: a block so small that its inverse scale is
// infinite (largest |x| below about 3.7e-37) gets the same quants on
// every CPU (Go leaves converting ±Inf to an integer to the CPU): ±127 as
// x/d would round for its largest, 0 for its zeros, and a scale of 0.
func TestQuantizeTinyBlocksAgree(t *testing.T) {
	for _, k := range []actKind{actQ8, actQ8K} {
		bk := k.block()
		x := make([]float32, bk)
		for i := range x {
			x[i] = []float32{1e-38, -2e-38, 0, 3e-39}[i%4]
		}
		var a acts
		a.quantize(k, x, bk, 1)
		sign := int8(1) // Q8_K's inverse scale is -127 over its largest |x|, here -2e-38
		for i, v := range x {
			want := int8(0)
			if v > 0 {
				want = 127 * sign
			} else if v < 0 {
				want = -127 * sign
			}
			if a.q[i] != want {
				t.Fatalf("%v: x %v quantized to %d, want %d", k, v, a.q[i], want)
			}
		}
		if a.d[0] != 0 {
			t.Errorf("%v: scale %v, want 0", k, a.d[0])
		}
	}
}
