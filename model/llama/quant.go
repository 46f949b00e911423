package llama

import (
	"encoding/binary"
	"math"
)

// The block layouts of the quantised types, as ggml defines them (all
// scales little-endian float16; a "nibble" pair byte holds two 4-bit
// quants, the low one first):
//
//   - Q4_0 (32 weights, 18 bytes): d, 16 bytes of nibbles; weight t < 16 is
//     the low nibble of byte t, weight 16+t its high nibble; w = d·(q−8).
//   - Q4_1 (32, 20): d, m, nibbles as Q4_0; w = d·q + m.
//   - Q5_0 (32, 22): d, qh (uint32), nibbles as Q4_0; bit t of qh is the
//     fifth bit of weight t; w = d·(q−16).
//   - Q5_1 (32, 24): d, m, qh, nibbles; w = d·q + m.
//   - Q4_K (256, 144): d, dmin, 12 bytes of eight 6-bit scales and eight
//     6-bit mins (kScales), 128 bytes of nibbles: sub-block k of 32 weights
//     is the low (k even) or high (k odd) nibbles of bytes 32·(k/2) …
//     32·(k/2)+31; w = d·sc_k·q − dmin·m_k.
//   - Q5_K (256, 176): d, dmin, scales as Q4_K, 32 bytes qh, 128 bytes of
//     nibbles as Q4_K; bit k of qh[l] is the fifth bit of weight l of
//     sub-block k.
//   - Q6_K (256, 210): 128 bytes ql, 64 bytes qh, 16 int8 scales, d. In
//     each half h of 128 weights, weight 64·n + t (t < 64) has nibble n of
//     ql[64h+t] as its low four bits, and weight 32·s + l (l < 32) has bits
//     2s, 2s+1 of qh[32h+l] as its high two; sub-block k of 16 weights has
//     scale sc_k; w = d·sc_k·(q−32).
const (
	qkK = 256 // weights in a K-quant super-block
)

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

// kScales unpacks Q4_K's and Q5_K's twelve scale bytes: scale k < 4 is
// the low six bits of byte k and min k of byte 4+k; scale 4+k is the low
// nibble of byte 8+k with the top two bits of byte k above it, min 4+k the
// high nibble of byte 8+k with the top two bits of byte 4+k above it.
func kScales(b []byte) (sc, mn [8]uint8) {
	b = b[:12]
	for k := 0; k < 4; k++ {
		sc[k] = b[k] & 63
		mn[k] = b[4+k] & 63
		sc[4+k] = b[8+k]&15 | b[k]>>6<<4
		mn[4+k] = b[8+k]>>4 | b[4+k]>>6<<4
	}
	return sc, mn
}

// q4Nibble is quant t (< 32) of a 32-weight block's 16 nibble bytes.
func q4Nibble(qs []byte, t int) uint8 { return qs[t&15] >> (4 * (t >> 4)) & 15 }

// q6 is quant i (< 256, before the −32) of a Q6_K block.
func q6(blk []byte, i int) uint8 {
	h, r := i>>7, i&127
	lo := blk[64*h+r&63] >> (4 * (r >> 6)) & 15
	hi := blk[128+32*h+r&31] >> (2 * (r >> 5)) & 3
	return lo | hi<<4
}

// dequantize decodes one row of raw (whole blocks of t) into dst, as ggml
// and gguf-py do: the block's scales are converted to float32 (d·sc_k
// rounded to float32 for the K-quants), then each weight is scale ×
// float32(quant), rounded, minus (K-quants) or plus (Q4_1, Q5_1) the
// block's float32 minimum, rounded again.
func dequantize(t Type, raw []byte, dst []float32) {
	switch t {
	case F16:
		for i := range dst {
			dst[i] = f16tab[le16(raw[2*i:])]
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(le16(raw[2*i:])) << 16)
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := raw[b*34 : (b+1)*34]
			d := f16tab[le16(blk)]
			for i := 0; i < 32; i++ {
				dst[b*32+i] = d * float32(int8(blk[2+i]))
			}
		}
	case Q4_0, Q5_0, Q4_1, Q5_1:
		bb := t.BlockBytes()
		for b := 0; b < len(dst)/32; b++ {
			blk := raw[b*bb : (b+1)*bb]
			d := f16tab[le16(blk)]
			for i := 0; i < 32; i++ {
				dst[b*32+i] = q32Weight(t, blk, d, i)
			}
		}
	case Q4_K, Q5_K:
		bb := t.BlockBytes()
		for b := 0; b < len(dst)/qkK; b++ {
			blk := raw[b*bb : (b+1)*bb]
			d, dmin := f16tab[le16(blk)], f16tab[le16(blk[2:])]
			sc, mn := kScales(blk[4:16])
			for k := 0; k < 8; k++ {
				d1, m1 := float32(d*float32(sc[k])), float32(dmin*float32(mn[k]))
				for l := 0; l < 32; l++ {
					dst[b*qkK+32*k+l] = float32(d1*float32(qK(t, blk, k, l))) - m1
				}
			}
		}
	case Q6_K:
		for b := 0; b < len(dst)/qkK; b++ {
			blk := raw[b*210 : (b+1)*210]
			d := f16tab[le16(blk[208:])]
			for i := 0; i < qkK; i++ {
				d1 := float32(d * float32(int8(blk[192+i/16])))
				dst[b*qkK+i] = d1 * float32(int(q6(blk, i))-32)
			}
		}
	}
}

// q32Weight is weight i of a Q4_0, Q5_0, Q4_1 or Q5_1 block with scale d.
func q32Weight(t Type, blk []byte, d float32, i int) float32 {
	switch t {
	case Q4_0:
		return d * float32(int(q4Nibble(blk[2:18], i))-8)
	case Q5_0:
		q := q4Nibble(blk[6:22], i) | uint8(binary.LittleEndian.Uint32(blk[2:])>>i&1)<<4
		return d * float32(int(q)-16)
	case Q4_1:
		return float32(d*float32(q4Nibble(blk[4:20], i))) + f16tab[le16(blk[2:])]
	default: // Q5_1
		q := q4Nibble(blk[8:24], i) | uint8(binary.LittleEndian.Uint32(blk[4:])>>i&1)<<4
		return float32(d*float32(q)) + f16tab[le16(blk[2:])]
	}
}

// qK is quant l of sub-block k of a Q4_K or Q5_K block.
func qK(t Type, blk []byte, k, l int) uint8 {
	if t == Q4_K {
		return blk[16+32*(k>>1)+l] >> (4 * (k & 1)) & 15
	}
	return blk[48+32*(k>>1)+l]>>(4*(k&1))&15 | (blk[16+l]>>k&1)<<4
}

// hsum8 is (h0+h2) + (h1+h3) with h_j = a[j] + a[j+4]: how every kernel
// reduces its eight lanes.
func hsum8(a *[8]float32) float32 {
	h0, h1, h2, h3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (h0 + h2) + (h1 + h3)
}

// sum32 is the sum of x[0:32] in the order the min terms use: v_j =
// (x[j]+x[8+j]) + (x[16+j]+x[24+j]), then hsum8(v).
func sum32(x []float32) float32 {
	x = x[:32:32]
	var v [8]float32
	for j := range v {
		v[j] = (x[j] + x[8+j]) + (x[16+j] + x[24+j])
	}
	return hsum8(&v)
}

// blockSums sets s[r·cols/32 + t] = sum32 of chunk t of vector r, for the
// n vectors of x (cols floats each, cols a multiple of 32): the inputs of
// the min terms of Q4_1 and Q5_1 (see dotQuantGeneric). s
// grows as needed and is returned.
func blockSums(s []float32, x []float32, cols, n int) []float32 {
	m := n * (cols / 32)
	if cap(s) < m {
		s = make([]float32, m)
	}
	s = s[:m]
	for i := range s {
		s[i] = sum32(x[32*i:])
	}
	return s
}

// needsSums reports whether t's kernels take blockSums of their inputs.
func needsSums(t Type) bool { return t == Q4_1 || t == Q5_1 }

// dotQuantGeneric is a row of raw (type BF16, Q4_1 or Q5_1) times x, in the type's fixed order (the vector kernels give the
// same bits). With p_i the product of a float32 quant (an exact small
// integer) and its input, and two
// accumulators of eight lanes, A_0 and A_1:
//
//   - Q4_1, Q5_1: per block b of 32, lane j (0..7) is s_j = p_j, then
//     fma(q, x, s_j) for weights 8+j, 16+j, 24+j; A_{b mod 2,j} = fma(d,
//     s_j, A_{b mod 2,j}); and mn_{b mod 2} = fma(m, sum32(x of the
//     block), mn_{b mod 2}); the result hsum16(A) + (mn_0 + mn_1).
//   - BF16: dot32Generic's order over the (exactly) decoded weights.
//
// hsum16(A) is hsum8 of A_{0,j} + A_{1,j}. Two accumulators, so that a
// one-row kernel has two chains of fused multiply-adds in flight. Every
// fma is rounded once (fma32; VFMADD231PS in the kernels), every other
// operation rounded to float32.
func dotQuantGeneric(t Type, raw []byte, x []float32) float32 {
	switch t {
	case BF16:
		return dotBF16Generic(raw, x)
	}
	return dotQ32Generic(t, raw, x)
}

// dotQ32Generic is dotQuantGeneric for Q4_1 and Q5_1.
func dotQ32Generic(t Type, raw []byte, x []float32) float32 {
	bb := t.BlockBytes()
	var acc [2][8]float32
	var mn [2]float32
	var q [32]float32
	for b := 0; b < len(x)/32; b++ {
		blk := raw[b*bb : (b+1)*bb : (b+1)*bb]
		d := f16tab[le16(blk)]
		xx := x[32*b : 32*b+32 : 32*b+32]
		qs := blk[4:20]
		var qh uint32
		if t == Q5_1 {
			qs, qh = blk[8:24], binary.LittleEndian.Uint32(blk[4:])
		}
		for i := range q {
			q[i] = float32(q4Nibble(qs, i) | uint8(qh>>i&1)<<4)
		}
		scaledChain32(&acc[b&1], d, &q, xx)
		mn[b&1] = fma32(f16tab[le16(blk[2:])], sum32(xx), mn[b&1])
	}
	return hsum16(&acc) + (mn[0] + mn[1])
}

// hsum16 is hsum8 of the lane-wise sums of two accumulators.
func hsum16(acc *[2][8]float32) float32 {
	var v [8]float32
	for j := range v {
		v[j] = acc[0][j] + acc[1][j]
	}
	return hsum8(&v)
}

// scaledChain32 adds d times 32 quants' products with xx to acc: lane j
// chains q[j]·xx[j] (rounded), then fused multiply-adds of weights 8+j,
// 16+j, 24+j, and acc[j] = fma(d, chain, acc[j]).
func scaledChain32(acc *[8]float32, d float32, q *[32]float32, xx []float32) {
	xx = xx[:32:32]
	for j := 0; j < 8; j++ {
		s := float32(q[j] * xx[j])
		s = fma32(q[8+j], xx[8+j], s)
		s = fma32(q[16+j], xx[16+j], s)
		s = fma32(q[24+j], xx[24+j], s)
		acc[j] = fma32(d, s, acc[j])
	}
}

// dotBF16Generic is dot32Generic over the bfloat16 weights in raw, each
// decoded exactly (its bits the high half of a float32).
func dotBF16Generic(raw []byte, x []float32) float32 {
	raw = raw[:2*len(x)]
	w := func(k int) float32 { return math.Float32frombits(uint32(le16(raw[2*k:])) << 16) }
	var l [32]float32
	k := 0
	for ; k+32 <= len(x); k += 32 {
		xx := x[k : k+32 : k+32]
		for j := range l {
			l[j] = fma32(w(k+j), xx[j], l[j])
		}
	}
	for j := 0; k+j < len(x); j++ {
		l[j] = fma32(w(k+j), x[k+j], l[j])
	}
	var v [8]float32
	for j := range v {
		v[j] = (l[j] + l[8+j]) + (l[16+j] + l[24+j])
	}
	h0, h1, h2, h3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
	return (h0 + h2) + (h1 + h3)
}

// mulQuantGeneric sets out[r·stride + i] = dotQuantGeneric(row i of raw,
// vector r of x) for the rows of raw (whole rows of cols weights of type
// t) and the n vectors of x (cols floats each). mulQuant is the same with
// the vector kernels where the CPU has them: the same bits.
func mulQuantGeneric(t Type, raw []byte, cols int, x []float32, n int, out []float32, stride int) {
	rb := t.RowBytes(cols)
	rows := len(raw) / rb
	for r := 0; r < n; r++ {
		xr := x[r*cols : (r+1)*cols]
		for i := 0; i < rows; i++ {
			out[r*stride+i] = dotQuantGeneric(t, raw[i*rb:(i+1)*rb], xr)
		}
	}
}
