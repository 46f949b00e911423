package llama

import (
	"encoding/binary"
	"math"
)

// Quantised activations. The matrices of the types intKind names multiply
// integers: each input row is first rounded to 8-bit blocks (once per row
// and matrix product, shared by the matrices with the same input), then
// every block of weights is multiplied by its block of rounded inputs in
// int32 (exact in any order), and only the scale products and their
// accumulation are floating point, in one order on every path. The
// rounding is llama.cpp's (its x86 CPU backend's quantize_row_q8_0,
// q8_1 and q8_K), so kvlease and llama.cpp multiply the same integers:
//
//   - actQ8 (for Q8_0, Q4_0 and Q5_0 weights; ggml's Q8_0 and Q8_1
//     blocks; Q8_1's s, for Q4_1 and Q5_1, is kept for their twin): per block of 32 inputs, amax = max |x_t|; d =
//     float32(amax/127), stored as float16 (rounded to nearest even: dx,
//     the scale the kernels use); id = float32(127/amax), 0 when amax is
//     0; q_t = float32(x_t·id) rounded to the nearest integer, ties to
//     even (|q_t| ≤ 127). Q8_1's s = float16(float32(d·Σq_t)), with the
//     unrounded d, for the minimums of Q4_1 and Q5_1.
//   - actQ8K (for Q4_K, Q5_K, Q6_K; ggml's Q8_K): per super-block of 256,
//     max is the first x_t of the largest |x_t|; when it is 0 every q_t
//     and d are 0; else iscale = float32(−127/max), q_t = float32(iscale·
//     x_t) rounded to nearest, ties to even, at most 127; dx =
//     float32(1/iscale) (a float32, not float16); and the sum of each 16
//     consecutive q_t (bsums, for the minimums of Q4_K and Q5_K).
//
// A NaN input gives every q_t of its block 0 and the block a NaN scale
// (no integer conversion of a NaN, which Go leaves to the platform), so
// the NaN reaches the outputs as it would with float inputs.
type actKind uint8

const (
	actNone actKind = iota
	actQ8
	actQ8K
	actKinds
)

// actOf is the activation rounding of weight type t's integer kernels, or
// actNone when t multiplies float32 inputs.
func actOf(t Type) actKind {
	switch t {
	case Q8_0, Q4_0, Q5_0:
		return actQ8
	case Q4_K, Q5_K, Q6_K:
		return actQ8K
	}
	return actNone
}

// acts is n input rows of cols rounded for one actKind.
type acts struct {
	kind    actKind
	cols, n int
	src     *float32 // the first input rounded (matmulTask's reuse check)
	q       []int8   // n·cols quants
	d       []float32
	s       []float32 // actQ8: Q8_1's s per block
	bs      []int16   // actQ8K: 16 sums per super-block
	// q6 is actQ8K's offset words for Q6_K's eight-input kernel where the
	// CPU has it (offsetActs): per input and super-block 64, per pair p
	// of its groups of 32 quants (64p…64p+63) at 16p, lane l's −32·Σ q_t
	// over t = 64p+4l…64p+4l+3 and over 64p+32+4l…+3 in words 2l and
	// 2l+1 (q6Offsets).
	q6 []int16
	// bp is actQ8K's sums of 32 per super-block (bs_2k + bs_2k+1, k =
	// 0…7), for the minimums of the packed Q4_K kernels (mulPacked).
	bp []int16
	// ob is actQ8's block offsets, −Σ q_t per block of 32: the packed
	// Q8_0 and Q4_0 kernels take the weights' quants unsigned (q+128,
	// q), so their sums exceed Σ w·x by 128 or 8 times the inputs' sum.
	ob []int32
}

// block is the number of inputs per scale of kind k.
func (k actKind) block() int {
	if k == actQ8K {
		return qkK
	}
	return 32
}

// size makes a hold n rows of cols for kind k (growing its buffers).
func (a *acts) size(k actKind, cols, n int) {
	a.kind, a.cols, a.n = k, cols, n
	nb := n * cols / k.block()
	a.q = grow(a.q, n*cols)
	a.d = grow(a.d, nb)
	if k == actQ8 {
		a.s = grow(a.s, nb)
		a.ob = grow(a.ob, nb)
	} else {
		a.bs = grow(a.bs, 16*nb)
		a.bp = grow(a.bp, 8*nb)
		if offsetActs {
			a.q6 = grow(a.q6, 64*nb)
		}
	}
}

// quantizeRows rounds rows lo..hi-1 of x (a.cols floats each) into a.
func (a *acts) quantizeRows(x []float32, lo, hi int) {
	c, bk := a.cols, a.kind.block()
	nb := c / bk
	for r := lo; r < hi; r++ {
		xr := x[r*c : (r+1)*c]
		b0 := r * nb
		if a.kind == actQ8 {
			a.quantizeQ8Row(xr, r)
			continue
		}
		for b := 0; b < nb; b++ {
			done := quantQ8KVec(&xr[b*bk], nb-b, &a.q[r*c+b*bk], &a.d[b0+b])
			for ; done > 0; done-- {
				sums16(a.q[r*c+b*bk:r*c+(b+1)*bk], a.bs[16*(b0+b):16*(b0+b+1)])
				b++
			}
			if b == nb {
				break
			}
			a.d[b0+b] = quantQ8K(xr[b*bk:(b+1)*bk], a.q[r*c+b*bk:r*c+(b+1)*bk], a.bs[16*(b0+b):16*(b0+b+1)])
		}
		for t := 8 * b0; t < 8*(b0+nb); t++ {
			a.bp[t] = a.bs[2*t] + a.bs[2*t+1]
		}
		if offsetActs {
			for b := 0; b < nb; b++ {
				q6Offsets(a.q[r*c+b*bk:r*c+(b+1)*bk], a.q6[64*(b0+b):64*(b0+b+1)])
			}
		}
	}
}

// q6Offsets sets o to the offset words of a super-block's quants q (see
// acts.q6): with Q6_K's quants taken unsigned (0…63), Σ q·x of four
// weights plus its word is Σ (q−32)·x, the kernels' lane sum.
func q6Offsets(q []int8, o []int16) {
	q, o = q[:qkK:qkK], o[:64:64]
	for p := 0; p < 4; p++ {
		for w := 0; w < 16; w++ {
			t := 64*p + 32*(w&1) + 4*(w>>1)
			o[16*p+w] = -32 * (int16(q[t]) + int16(q[t+1]) + int16(q[t+2]) + int16(q[t+3]))
		}
	}
}

// quantizeQ8Row rounds input row r (xr) for actQ8: by quantQ8Vec, and by
// quantQ8 the blocks it leaves (the same values).
func (a *acts) quantizeQ8Row(xr []float32, r int) {
	c := a.cols
	nb := c / 32
	b0 := r * nb
	for b := 0; b < nb; b++ {
		b += quantQ8Vec(&xr[32*b], nb-b, &a.q[r*c+32*b], &a.d[b0+b], &a.s[b0+b], &a.ob[b0+b])
		if b == nb {
			break
		}
		var sum int32
		a.d[b0+b], a.s[b0+b], sum = quantQ8(xr[32*b:32*(b+1)], a.q[r*c+32*b:r*c+32*(b+1)])
		a.ob[b0+b] = -sum
	}
}

// quantize rounds the n rows of x (cols floats each) for kind k.
func (a *acts) quantize(k actKind, x []float32, cols, n int) {
	a.size(k, cols, n)
	a.quantizeRows(x, 0, n)
	a.src = &x[0]
}

// roundQ is v rounded to the nearest integer, ties to even: 0 for NaN,
// and ±Inf and whatever is beyond int32 saturated to its bounds (Go leaves
// that conversion to the CPU: amd64 and arm64 differ).
func roundQ(v float32) int32 {
	switch {
	case v != v:
		return 0
	case v >= 1<<31:
		return math.MaxInt32
	case v <= -(1 << 31):
		return math.MinInt32
	}
	return int32(math.RoundToEven(float64(v)))
}

// clampQ is q within ±127, the range of a rounded input's quant. Only a
// block whose largest |x| is so small that its inverse scale is infinite
// (below about 3.7e-37) has quants beyond it: they become ±127, as x/d
// would round for the largest, and the block's scale is 0 as a float16.
func clampQ(q int32) int8 { return int8(max(min(q, 127), -127)) }

// quantQ8 rounds 32 inputs to ggml's Q8_0/Q8_1 block (see actKind): the
// quants into q, and the scale dx and Q8_1's s, as float32, and the sum
// of the quants.
func quantQ8(x []float32, q []int8) (dx, s float32, sum int32) {
	x, q = x[:32:32], q[:32:32]
	amax := float32(0)
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v)))) // NaN if any is
	}
	d := float32(amax / 127)
	id := float32(0)
	if amax != 0 {
		id = float32(127 / amax)
	}
	for t, v := range x {
		qt := int32(clampQ(roundQ(float32(v * id))))
		q[t] = int8(qt)
		sum += qt
	}
	return F16ToF32(F32ToF16(d)), F16ToF32(F32ToF16(float32(d * float32(sum)))), sum
}

// quantQ8K rounds 256 inputs to ggml's Q8_K block (see actKind): the
// quants into q, the sums of 16 into bs, the scale returned.
func quantQ8K(x []float32, q []int8, bs []int16) float32 {
	x, q, bs = x[:qkK:qkK], q[:qkK:qkK], bs[:16:16]
	amax, mx := float32(0), float32(0)
	nan := false
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, mx = a, v
		}
		nan = nan || v != v
	}
	if nan {
		clear(q)
		clear(bs)
		return float32(math.NaN())
	}
	if amax == 0 {
		clear(q)
		clear(bs)
		return 0
	}
	iscale := float32(-127 / mx)
	for t, v := range x {
		q[t] = clampQ(roundQ(float32(iscale * v)))
	}
	sums16(q, bs)
	return float32(1 / iscale)
}

// sums16 sets bs to the sums of each 16 consecutive quants of a
// super-block (Q8_K's bsums).
func sums16(q []int8, bs []int16) {
	q, bs = q[:qkK:qkK], bs[:16:16]
	for j := range bs {
		s := int16(0)
		for _, v := range q[16*j : 16*j+16] {
			s += int16(v)
		}
		bs[j] = s
	}
}

// The integer dot products (dotIntGeneric; the vector kernels in
// quantint_amd64.s perform the same operations). With w_t the weight
// quants as signed integers (Q8_0 q, Q4_0 q−8, Q5_0 q−16, Q6_K q−32; Q4_1,
// Q5_1, Q4_K and Q5_K q ≥ 0) and x_t the rounded inputs, lane j (0..7) of
// a group of 32 consecutive weights is the exact integer Σ w_t·x_t over its
// weights 4j..4j+3:
//
//   - Q8_0, Q4_0, Q5_0: one integer per block b, I = Σ w_t·x_t over its 32
//     weights (the sum of the eight lanes), and with the weights' scale dw
//     and the inputs' dx, acc = fma(float32(dw·dx), float32(I), acc);
//     blocks in order, acc from +0; the result acc. So a kernel may keep a
//     row per register lane (the packed layouts) and pays one float step
//     per row and block.
//   - Q4_1, Q5_1: per block b, acc_j = fma(float32(dw·dx), float32(lane
//     j), acc_j), blocks in order, and mn = fma(m, s, mn) per block with
//     the weights' minimum m and the inputs' s (Q8_1's); hsum8(acc) + mn.
//     (Defined and tested, but no vector kernels yet: a step multiplies
//     Q4_1 and Q5_1 rows by float32 inputs, actOf.)
//   - Q4_K, Q5_K: one integer per super-block, not eight lanes: I = Σ_k
//     sc_k · Σ_t q_t·x_t over the 32 weights t of sub-block k (int32,
//     exact: the sum of the eight lanes) and M = Σ_k m_k·(bsums_2k +
//     bsums_2k+1) (int32, exact); then acc = fma(float32(d·dx),
//     float32(I), acc) and acc = fma(−float32(dmin·dx), float32(M), acc),
//     super-blocks in order, acc from +0; the result acc. (float32(I) is
//     rounded to nearest beyond 2^24, the same conversion on every path.)
//     So a kernel keeps one int32 per row and super-block however it
//     splits the integer work (lanes, rows interleaved in a register), and
//     pays two float steps per row and super-block where eight lanes and
//     their minimums cost sixteen conversions and fused steps (the second
//     step is VFNMADD231SS/PS on amd64, FMSUB on arm64: −(a·b) + c fused
//     is fma(−a, b, c)).
//   - Q6_K: per super-block, I_j = Σ_c sc_{2c+j/4} · lane j of group c of
//     32 (lanes 0-3 are sub-block 2c of 16, lanes 4-7 sub-block 2c+1);
//     acc_j = fma(float32(d·dx), float32(I_j), acc_j); hsum8(acc).
//
// Every fma is rounded once (fma32; VFMADD231PS in the kernels), every
// other float operation rounded to float32. The integers are exact in
// any order, so the kernels compute them with VPMADDUBSW (the sign of
// the weights moved to the inputs) and VPMADDWD as suits them.

// dotIntGeneric is a row of raw (type t, actOf(t) != actNone) times input
// row r of a.
func dotIntGeneric(t Type, raw []byte, a *acts, r int) float32 {
	c := a.cols
	xq := a.q[r*c : (r+1)*c]
	nb := c / a.kind.block()
	xd := a.d[r*nb : (r+1)*nb]
	switch t {
	case Q4_K, Q5_K:
		return dotKInt(t, raw, xq, xd, a.bs[16*r*nb:16*(r+1)*nb])
	case Q6_K:
		return dotQ6KInt(raw, xq, xd)
	}
	return dotQ32Int(t, raw, xq, xd, a.s[r*nb:(r+1)*nb])
}

// lanes4 adds the eight lane sums of 32 weights w and inputs x, each
// times sc[j] (sc per lane), to I.
func lanes4(I *[8]int32, w *[32]int32, x []int8, sc *[8]int32) {
	x = x[:32:32]
	for j := 0; j < 8; j++ {
		s := int32(0)
		for u := 4 * j; u < 4*j+4; u++ {
			s += w[u] * int32(x[u])
		}
		I[j] += sc[j] * s
	}
}

var ones8 = [8]int32{1, 1, 1, 1, 1, 1, 1, 1}

// dotQ32Int is dotIntGeneric for the 32-weight types.
func dotQ32Int(t Type, raw []byte, xq []int8, xd, xs []float32) float32 {
	bb := t.BlockBytes()
	if t == Q8_0 || t == Q4_0 || t == Q5_0 {
		var acc float32
		var w [32]int32
		for b := range xd {
			blk := raw[b*bb : (b+1)*bb : (b+1)*bb]
			q32Ints(t, blk, &w)
			x := xq[32*b : 32*b+32 : 32*b+32]
			I := int32(0)
			for i, v := range w {
				I += v * int32(x[i])
			}
			acc = fma32(float32(f16tab[le16(blk)]*xd[b]), float32(I), acc)
		}
		return acc
	}
	var acc [8]float32
	var mn float32
	var w [32]int32
	for b := range xd {
		blk := raw[b*bb : (b+1)*bb : (b+1)*bb]
		q32Ints(t, blk, &w)
		var I [8]int32
		lanes4(&I, &w, xq[32*b:], &ones8)
		d := float32(f16tab[le16(blk)] * xd[b])
		for j := range acc {
			acc[j] = fma32(d, float32(I[j]), acc[j])
		}
		if t == Q4_1 || t == Q5_1 {
			mn = fma32(f16tab[le16(blk[2:])], xs[b], mn)
		}
	}
	return hsum8(&acc) + mn
}

// q32Ints sets w to the signed quants of a 32-weight block.
func q32Ints(t Type, blk []byte, w *[32]int32) {
	switch t {
	case Q8_0:
		for i := range w {
			w[i] = int32(int8(blk[2+i]))
		}
	case Q4_0:
		for i := range w {
			w[i] = int32(q4Nibble(blk[2:18], i)) - 8
		}
	case Q5_0:
		qh := binary.LittleEndian.Uint32(blk[2:])
		for i := range w {
			w[i] = int32(q4Nibble(blk[6:22], i)|uint8(qh>>i&1)<<4) - 16
		}
	case Q4_1:
		for i := range w {
			w[i] = int32(q4Nibble(blk[4:20], i))
		}
	default: // Q5_1
		qh := binary.LittleEndian.Uint32(blk[4:])
		for i := range w {
			w[i] = int32(q4Nibble(blk[8:24], i) | uint8(qh>>i&1)<<4)
		}
	}
}

// dotKInt is dotIntGeneric for Q4_K and Q5_K: per super-block one
// integer I (all eight sub-blocks, each scaled) and one M (the minimums
// times the inputs' sums of 16), applied by two fused steps to one
// accumulator.
func dotKInt(t Type, raw []byte, xq []int8, xd []float32, bs []int16) float32 {
	bb := t.BlockBytes()
	var acc float32
	for b := range xd {
		blk := raw[b*bb : (b+1)*bb : (b+1)*bb]
		x := xq[qkK*b : qkK*(b+1) : qkK*(b+1)]
		sc, m := kScales(blk[4:16])
		var I, M int32
		for k := 0; k < 8; k++ {
			s := int32(0)
			for l := 0; l < 32; l++ {
				s += int32(qK(t, blk, k, l)) * int32(x[32*k+l])
			}
			I += int32(sc[k]) * s
			M += int32(m[k]) * (int32(bs[16*b+2*k]) + int32(bs[16*b+2*k+1]))
		}
		acc = fma32(float32(f16tab[le16(blk)]*xd[b]), float32(I), acc)
		acc = fma32(-float32(f16tab[le16(blk[2:])]*xd[b]), float32(M), acc)
	}
	return acc
}

// dotQ6KInt is dotIntGeneric for Q6_K.
func dotQ6KInt(raw []byte, xq []int8, xd []float32) float32 {
	var acc [8]float32
	var w [32]int32
	for b := range xd {
		blk := raw[b*210 : (b+1)*210 : (b+1)*210]
		x := xq[qkK*b : qkK*(b+1)]
		var I [8]int32
		for c := 0; c < 8; c++ {
			for i := range w {
				w[i] = int32(q6(blk, 32*c+i)) - 32
			}
			s0, s1 := int32(int8(blk[192+2*c])), int32(int8(blk[193+2*c]))
			lanes4(&I, &w, x[32*c:], &[8]int32{s0, s0, s0, s0, s1, s1, s1, s1})
		}
		dd := float32(f16tab[le16(blk[208:])] * xd[b])
		for j := range acc {
			acc[j] = fma32(dd, float32(I[j]), acc[j])
		}
	}
	return hsum8(&acc)
}

// mulIntGeneric sets out[r·stride + i] = dotIntGeneric(row i of raw,
// input r of a) for the rows of raw and r < a.n. mulInt is the same with
// the vector kernels where the CPU has them: the same bits.
func mulIntGeneric(t Type, raw []byte, a *acts, out []float32, stride int) {
	rb := t.RowBytes(a.cols)
	rows := len(raw) / rb
	for r := 0; r < a.n; r++ {
		for i := 0; i < rows; i++ {
			out[r*stride+i] = dotIntGeneric(t, raw[i*rb:(i+1)*rb], a, r)
		}
	}
}
