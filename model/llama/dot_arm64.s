#include "textflag.h"
#include "neon_arm64.h"

// The NEON kernels of the one-vector and batched products and of
// attention (see dot_arm64.go). Each keeps its generic twin's order and
// roundings: VFMLA is a fused multiply-add (rounded once: fma32's bits),
// VFMUL4 then VFADD4 round the product and then the sum.

// func dotF32x1NEON(w *float32, rows, n int, x *float32, out *float32)
//
// out[i] = row i of w (rows rows of n floats, n a positive multiple of
// 32) times x, in dot32Generic's order: lane j (0..31) of eight 4-wide
// accumulators steps by VFMLA for k ≡ j (mod 32) in increasing k, then
// HSUM32 combines the lanes in its tree.
TEXT ·dotF32x1NEON(SB), NOSPLIT, $0-40
	MOVD w+0(FP), R0
	MOVD rows+8(FP), R1
	MOVD n+16(FP), R2
	MOVD x+24(FP), R3
	MOVD out+32(FP), R4

row1:
	MOVD R3, R5
	MOVD R2, R6
	ZERO4(V16.B16, V17.B16, V18.B16, V19.B16)
	ZERO4(V20.B16, V21.B16, V22.B16, V23.B16)

col1:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R5), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R5), [V12.S4, V13.S4, V14.S4, V15.S4]
	VFMLA  V8.S4, V0.S4, V16.S4
	VFMLA  V9.S4, V1.S4, V17.S4
	VFMLA  V10.S4, V2.S4, V18.S4
	VFMLA  V11.S4, V3.S4, V19.S4
	VFMLA  V12.S4, V4.S4, V20.S4
	VFMLA  V13.S4, V5.S4, V21.S4
	VFMLA  V14.S4, V6.S4, V22.S4
	VFMLA  V15.S4, V7.S4, V23.S4
	SUBS   $32, R6, R6
	BNE    col1

	HSUM32(16, 17, 18, 19, 20, 21, 22, 23, 24)
	FMOVS F16, (R4)
	ADD   $4, R4, R4
	SUBS  $1, R1, R1
	BNE   row1
	RET

// ACC4(x, a): the four lanes groups a..a+3 (registers) step by VFMLA
// with the weights in V0-V3 and the inputs in x..x+3.
#define ACC4(x0, x1, x2, x3, a0, a1, a2, a3) \
	VFMLA x0, V0.S4, a0; \
	VFMLA x1, V1.S4, a1; \
	VFMLA x2, V2.S4, a2; \
	VFMLA x3, V3.S4, a3

// PART16(a0, a1, a2, a3, lo, hi): lo = a0 + a2, hi = a1 + a3: the first
// step of dot32Generic's tree (l_j + l_{8+j}) over sixteen lanes.
#define PART16(a0, a1, a2, a3, lo, hi) \
	VFADD4(lo, a0, a2); \
	VFADD4(hi, a1, a3)

// LAST16(a0, a1, a2, a3, lo, hi): pass 1's lanes 16-31 (a0..a3) give
// l_{16+j} + l_{24+j}, added to pass 0's l_j + l_{8+j} in lo, hi: the
// v_j of dot32Generic's tree, combined by HSUM8 into lane 0 of lo.
// Clobbers V0-V2.
#define LAST16(a0, a1, a2, a3, lo, hi) \
	PART16(a0, a1, a2, a3, 0, 1); \
	VFADD4(lo, lo, 0); \
	VFADD4(hi, hi, 1); \
	HSUM8(lo, hi, 2)

// func dotF32x4NEON(w *float32, rows, n int, x *float32, out *float32, outStride int)
//
// out[r*outStride+i] = row i of w (rows rows of n floats, n a positive
// multiple of 32) times x vector r (x + r*n), for r < 4: dot32Generic's
// order. A row is two passes: pass 0 steps lanes 0-15 of the four
// vectors (sixteen accumulators, every 16 weights loaded once for the
// four), pass 1 lanes 16-31. V8-V15 keep pass 0's l_j + l_{8+j}
// (j < 8) until pass 1 gives l_{16+j} + l_{24+j}; their sums are the v_j
// of dot32Generic's tree, combined by HSUM8.
TEXT ·dotF32x4NEON(SB), NOSPLIT, $0-48
	MOVD w+0(FP), R0
	MOVD rows+8(FP), R1
	MOVD n+16(FP), R2
	MOVD x+24(FP), R3
	MOVD out+32(FP), R4
	MOVD outStride+40(FP), R7
	LSL  $2, R7, R7          // outStride in bytes
	LSL  $2, R2, R9          // a row (and a vector) in bytes
	MOVD $128, R19           // from one 32 columns to the next

row4:
	MOVD $0, R12             // the pass's byte offset in 32 columns: 0, 64

pass4:
	ADD  R12, R0, R14        // the weights of lanes 16·pass…
	ADD  R12, R3, R10        // …and the inputs'
	ADD  R9, R10, R11
	ADD  R9, R11, R13
	ADD  R9, R13, R15
	MOVD R2, R6
	ZERO4(V16.B16, V17.B16, V18.B16, V19.B16)
	ZERO4(V20.B16, V21.B16, V22.B16, V23.B16)
	ZERO4(V24.B16, V25.B16, V26.B16, V27.B16)
	ZERO4(V28.B16, V29.B16, V30.B16, V31.B16)

col4:
	VLD1.P (R14)(R19), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P (R10)(R19), [V4.S4, V5.S4, V6.S4, V7.S4]
	ACC4(V4.S4, V5.S4, V6.S4, V7.S4, V16.S4, V17.S4, V18.S4, V19.S4)
	VLD1.P (R11)(R19), [V4.S4, V5.S4, V6.S4, V7.S4]
	ACC4(V4.S4, V5.S4, V6.S4, V7.S4, V20.S4, V21.S4, V22.S4, V23.S4)
	VLD1.P (R13)(R19), [V4.S4, V5.S4, V6.S4, V7.S4]
	ACC4(V4.S4, V5.S4, V6.S4, V7.S4, V24.S4, V25.S4, V26.S4, V27.S4)
	VLD1.P (R15)(R19), [V4.S4, V5.S4, V6.S4, V7.S4]
	ACC4(V4.S4, V5.S4, V6.S4, V7.S4, V28.S4, V29.S4, V30.S4, V31.S4)
	SUBS $32, R6, R6
	BNE  col4

	CBNZ R12, second4
	PART16(16, 17, 18, 19, 8, 9)
	PART16(20, 21, 22, 23, 10, 11)
	PART16(24, 25, 26, 27, 12, 13)
	PART16(28, 29, 30, 31, 14, 15)
	MOVD $64, R12
	B    pass4

second4:
	LAST16(16, 17, 18, 19, 8, 9)
	LAST16(20, 21, 22, 23, 10, 11)
	LAST16(24, 25, 26, 27, 12, 13)
	LAST16(28, 29, 30, 31, 14, 15)
	MOVD  R4, R5
	FMOVS F8, (R5)
	ADD   R7, R5, R5
	FMOVS F10, (R5)
	ADD   R7, R5, R5
	FMOVS F12, (R5)
	ADD   R7, R5, R5
	FMOVS F14, (R5)

	ADD  R9, R0, R0
	ADD  $4, R4, R4
	SUBS $1, R1, R1
	BNE  row4
	RET

// func scoresNEON(out *float32, count int, k *float32, stride int, q *float32, n int)
//
// out[i] = dot4(k + i·stride, q) for i < count, n a positive multiple of
// 4: lane j of a 4-wide accumulator adds the products of index j mod 4
// in increasing index (VFMUL4, rounded, then VFADD4), and the lanes are
// combined as (l0+l1)+(l2+l3) by pairwise adds. Four keys at a time,
// each with its own accumulator, then the rest one by one.
TEXT ·scoresNEON(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD count+8(FP), R1
	MOVD k+16(FP), R2
	MOVD stride+24(FP), R3
	MOVD q+32(FP), R4
	MOVD n+40(FP), R5
	LSL  $2, R3, R3          // stride in bytes
	CMP  $4, R1
	BLT  one

four:
	MOVD R2, R10
	ADD  R3, R10, R11
	ADD  R3, R11, R12
	ADD  R3, R12, R13
	MOVD R4, R14
	MOVD R5, R6
	ZERO4(V16.B16, V17.B16, V18.B16, V19.B16)

fourk:
	VLD1.P 16(R14), [V0.S4]
	VLD1.P 16(R10), [V1.S4]
	VLD1.P 16(R11), [V2.S4]
	VLD1.P 16(R12), [V3.S4]
	VLD1.P 16(R13), [V4.S4]
	VFMUL4(5, 1, 0)
	VFMUL4(6, 2, 0)
	VFMUL4(7, 3, 0)
	VFMUL4(8, 4, 0)
	VFADD4(16, 16, 5)
	VFADD4(17, 17, 6)
	VFADD4(18, 18, 7)
	VFADD4(19, 19, 8)
	SUBS $4, R6, R6
	BNE  fourk

	VFADDP4(20, 16, 17)      // [k0: l0+l1, l2+l3, k1: l0+l1, l2+l3]
	VFADDP4(21, 18, 19)
	VFADDP4(22, 20, 21)      // [k0, k1, k2, k3]
	VST1.P [V22.S4], 16(R0)
	ADD  R3<<2, R2, R2       // the next four keys
	SUB  $4, R1, R1
	CMP  $4, R1
	BGE  four

one:
	CBZ  R1, done
	MOVD R2, R10
	MOVD R4, R14
	MOVD R5, R6
	VEOR V16.B16, V16.B16, V16.B16

onek:
	VLD1.P 16(R14), [V0.S4]
	VLD1.P 16(R10), [V1.S4]
	VFMUL4(5, 1, 0)
	VFADD4(16, 16, 5)
	SUBS $4, R6, R6
	BNE  onek

	VFADDP4(20, 16, 16)
	FADDP2(20, 20)
	FMOVS F20, (R0)
	ADD  $4, R0, R0
	ADD  R3, R2, R2
	SUB  $1, R1, R1
	B    one

done:
	RET

// func wsumNEON(out *float32, n int, a *float32, count int, v *float32, stride int)
//
// out[d] += a[i]·v[i·stride + d] for i = 0..count-1 in turn, d < n (a
// positive multiple of 4): 32 (then 4) elements of out stay in registers
// while the positions go by; each product is rounded (VFMUL4), then
// added (VFADD4).
TEXT ·wsumNEON(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD n+8(FP), R1
	MOVD a+16(FP), R2
	MOVD count+24(FP), R3
	MOVD v+32(FP), R4
	MOVD stride+40(FP), R5
	LSL  $2, R5, R5          // stride in bytes
	MOVD $64, R12

block32:
	CMP  $32, R1
	BLT  block4
	MOVD R0, R6
	VLD1.P 64(R6), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1   (R6), [V20.S4, V21.S4, V22.S4, V23.S4]
	MOVD R2, R7
	MOVD R3, R8
	MOVD R4, R9

pos32:
	VLD1R.P 4(R7), [V0.S4]
	MOVD R9, R10
	VLD1.P 64(R10), [V1.S4, V2.S4, V3.S4, V4.S4]
	VLD1   (R10), [V5.S4, V6.S4, V7.S4, V8.S4]
	VFMUL4(1, 1, 0)
	VFMUL4(2, 2, 0)
	VFMUL4(3, 3, 0)
	VFMUL4(4, 4, 0)
	VFMUL4(5, 5, 0)
	VFMUL4(6, 6, 0)
	VFMUL4(7, 7, 0)
	VFMUL4(8, 8, 0)
	VFADD4(16, 16, 1)
	VFADD4(17, 17, 2)
	VFADD4(18, 18, 3)
	VFADD4(19, 19, 4)
	VFADD4(20, 20, 5)
	VFADD4(21, 21, 6)
	VFADD4(22, 22, 7)
	VFADD4(23, 23, 8)
	ADD  R5, R9, R9
	SUBS $1, R8, R8
	BNE  pos32

	MOVD R0, R6
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R6)
	VST1   [V20.S4, V21.S4, V22.S4, V23.S4], (R6)
	ADD  $128, R0, R0
	ADD  $128, R4, R4
	SUB  $32, R1, R1
	B    block32

block4:
	CBZ  R1, wdone
	VLD1 (R0), [V16.S4]
	MOVD R2, R7
	MOVD R3, R8
	MOVD R4, R9

pos4:
	VLD1R.P 4(R7), [V0.S4]
	VLD1    (R9), [V1.S4]
	VFMUL4(1, 1, 0)
	VFADD4(16, 16, 1)
	ADD  R5, R9, R9
	SUBS $1, R8, R8
	BNE  pos4

	VST1.P [V16.S4], 16(R0)
	ADD  $16, R4, R4
	SUB  $4, R1, R1
	B    block4

wdone:
	RET

// func fma32FMA(a, b, c float32) float32
//
// a·b + c by the CPU's scalar fused multiply-add (FMADD, rounded once):
// the tests check fma32 against it.
TEXT ·fma32FMA(SB), NOSPLIT, $0-20
	FMOVS  a+0(FP), F0
	FMOVS  b+4(FP), F1
	FMOVS  c+8(FP), F2
	FMADDS F1, F2, F0, F3
	FMOVS  F3, ret+16(FP)
	RET

// func dotF16NEON(raw *byte, x *float32, n int) float32
//
// The float16 row raw (n values, n a positive multiple of 4) times x, in
// dotF16's order: each weight widened exactly (VFCVTL4), lane j of one
// 4-wide accumulator adds the products of index j mod 4 in increasing
// index (VFMUL4, rounded, then VFADD4), then (l0+l1)+(l2+l3).
TEXT ·dotF16NEON(SB), NOSPLIT, $0-28
	MOVD raw+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16

f16:
	VLD1.P 8(R0), [V0.H4]
	VLD1.P 16(R1), [V2.S4]
	VFCVTL4(1, 0)
	VFMUL4(1, 1, 2)
	VFADD4(16, 16, 1)
	SUBS $4, R2, R2
	BNE  f16

	VFADDP4(16, 16, 16)
	FADDP2(16, 16)
	FMOVS F16, ret+24(FP)
	RET

// func dotBF16x1NEON(raw *byte, rows, n int, x *float32, out *float32)
//
// out[i] = bfloat16 row i of raw (rows rows of n values, n a positive
// multiple of 32) times x, in dot32Generic's order over the weights
// widened exactly (a bfloat16 is the high half of its float32: VZIP1 and
// VZIP2 with a zero register put it there), as dotF32x1NEON steps and
// combines the lanes.
TEXT ·dotBF16x1NEON(SB), NOSPLIT, $0-40
	MOVD raw+0(FP), R0
	MOVD rows+8(FP), R1
	MOVD n+16(FP), R2
	MOVD x+24(FP), R3
	MOVD out+32(FP), R4
	VEOR V31.B16, V31.B16, V31.B16

rowb:
	MOVD R3, R5
	MOVD R2, R6
	ZERO4(V16.B16, V17.B16, V18.B16, V19.B16)
	ZERO4(V20.B16, V21.B16, V22.B16, V23.B16)

colb:
	VLD1.P 64(R0), [V0.H8, V1.H8, V2.H8, V3.H8]
	VLD1.P 64(R5), [V12.S4, V13.S4, V14.S4, V15.S4]
	VLD1.P 64(R5), [V24.S4, V25.S4, V26.S4, V27.S4]
	VZIP1  V0.H8, V31.H8, V4.H8
	VZIP2  V0.H8, V31.H8, V5.H8
	VZIP1  V1.H8, V31.H8, V6.H8
	VZIP2  V1.H8, V31.H8, V7.H8
	VZIP1  V2.H8, V31.H8, V8.H8
	VZIP2  V2.H8, V31.H8, V9.H8
	VZIP1  V3.H8, V31.H8, V10.H8
	VZIP2  V3.H8, V31.H8, V11.H8
	VFMLA  V12.S4, V4.S4, V16.S4
	VFMLA  V13.S4, V5.S4, V17.S4
	VFMLA  V14.S4, V6.S4, V18.S4
	VFMLA  V15.S4, V7.S4, V19.S4
	VFMLA  V24.S4, V8.S4, V20.S4
	VFMLA  V25.S4, V9.S4, V21.S4
	VFMLA  V26.S4, V10.S4, V22.S4
	VFMLA  V27.S4, V11.S4, V23.S4
	SUBS   $32, R6, R6
	BNE    colb

	HSUM32(16, 17, 18, 19, 20, 21, 22, 23, 28)
	FMOVS F16, (R4)
	ADD   $4, R4, R4
	SUBS  $1, R1, R1
	BNE   rowb
	RET
