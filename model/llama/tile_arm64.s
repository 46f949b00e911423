#include "textflag.h"
#include "neon_arm64.h"

// TIN(xp, a0, a1, b0, b1, c0, c1): input j's 8 lanes of the pass (V6,
// V7, from xp) step output (0, j)'s lanes in a0, a1, (1, j)'s in b0, b1
// and (2, j)'s in c0, c1 by VFMLA with the three rows' weights in V0-V5.
#define TIN(xp, a0, a1, b0, b1, c0, c1) \
	VLD1.P (xp)(R11), [V6.S4, V7.S4]; \
	VFMLA  V6.S4, V0.S4, a0; \
	VFMLA  V7.S4, V1.S4, a1; \
	VFMLA  V6.S4, V2.S4, b0; \
	VFMLA  V7.S4, V3.S4, b1; \
	VFMLA  V6.S4, V4.S4, c0; \
	VFMLA  V7.S4, V5.S4, c1

// TOUT(off): the next output's 32 lanes from acc (R10), combined by
// HSUM32 and written to off(R24).
#define TOUT(off) \
	VLD1.P 64(R10), [V16.S4, V17.S4, V18.S4, V19.S4]; \
	VLD1.P 64(R10), [V20.S4, V21.S4, V22.S4, V23.S4]; \
	HSUM32(16, 17, 18, 19, 20, 21, 22, 23, 24); \
	FMOVS  F16, off(R24)

// func tileF32NEON(w *float32, ldw int, x *float32, ldx int, kc int, acc *float32, flags int, out *float32, outStride int)
//
// tileF32AVX2's work with NEON (the same Go driver, mulF32Tiles): a tile
// of three weight rows (w + i·ldw floats) times four input vectors (x +
// j·ldx floats) over kc columns (a positive multiple of 32), in
// dot32Generic's order. Twenty-four registers hold one 8-lane group of
// the twelve outputs' 32 lanes (output (i, j) in V(8+2o), V(9+2o), o =
// 3j+i), so the block is four passes, pass g stepping lanes 8g..8g+7
// (VFMLA, increasing column) of every output; between passes and blocks
// the lanes wait in acc (1,536 bytes, output (i, j)'s 32 lanes at
// 128·(3j+i)), loaded first when flags&1. With flags&2 each output's
// lanes are then combined in dot32Generic's tree (HSUM32) and written to
// out[j·outStride + i].
TEXT ·tileF32NEON(SB), NOSPLIT, $0-72
	MOVD w+0(FP), R0
	MOVD ldw+8(FP), R1
	MOVD x+16(FP), R2
	MOVD ldx+24(FP), R3
	MOVD kc+32(FP), R4
	MOVD acc+40(FP), R5
	MOVD flags+48(FP), R6
	MOVD out+56(FP), R7
	MOVD outStride+64(FP), R8
	LSL  $2, R1, R1
	LSL  $2, R3, R3
	LSL  $2, R8, R8
	MOVD $128, R11
	MOVD $0, R12             // the pass's byte offset in 32 columns: 32g

pass:
	ADD  R12, R5, R9         // lanes 8g.. of output 0 in acc
	ADD  R12, R0, R13
	ADD  R1, R13, R14
	ADD  R1, R14, R15
	ADD  R12, R2, R19
	ADD  R3, R19, R20
	ADD  R3, R20, R21
	ADD  R3, R21, R22
	TBZ  $0, R6, zero
	MOVD R9, R10
	VLD1.P (R10)(R11), [V8.S4, V9.S4]
	VLD1.P (R10)(R11), [V10.S4, V11.S4]
	VLD1.P (R10)(R11), [V12.S4, V13.S4]
	VLD1.P (R10)(R11), [V14.S4, V15.S4]
	VLD1.P (R10)(R11), [V16.S4, V17.S4]
	VLD1.P (R10)(R11), [V18.S4, V19.S4]
	VLD1.P (R10)(R11), [V20.S4, V21.S4]
	VLD1.P (R10)(R11), [V22.S4, V23.S4]
	VLD1.P (R10)(R11), [V24.S4, V25.S4]
	VLD1.P (R10)(R11), [V26.S4, V27.S4]
	VLD1.P (R10)(R11), [V28.S4, V29.S4]
	VLD1.P (R10)(R11), [V30.S4, V31.S4]
	B    cols

zero:
	ZERO4(V8.B16, V9.B16, V10.B16, V11.B16)
	ZERO4(V12.B16, V13.B16, V14.B16, V15.B16)
	ZERO4(V16.B16, V17.B16, V18.B16, V19.B16)
	ZERO4(V20.B16, V21.B16, V22.B16, V23.B16)
	ZERO4(V24.B16, V25.B16, V26.B16, V27.B16)
	ZERO4(V28.B16, V29.B16, V30.B16, V31.B16)

cols:
	MOVD R4, R23

col:
	VLD1.P (R13)(R11), [V0.S4, V1.S4]
	VLD1.P (R14)(R11), [V2.S4, V3.S4]
	VLD1.P (R15)(R11), [V4.S4, V5.S4]
	TIN(R19, V8.S4, V9.S4, V10.S4, V11.S4, V12.S4, V13.S4)
	TIN(R20, V14.S4, V15.S4, V16.S4, V17.S4, V18.S4, V19.S4)
	TIN(R21, V20.S4, V21.S4, V22.S4, V23.S4, V24.S4, V25.S4)
	TIN(R22, V26.S4, V27.S4, V28.S4, V29.S4, V30.S4, V31.S4)
	SUBS $32, R23, R23
	BNE  col

	MOVD R9, R10
	VST1.P [V8.S4, V9.S4], (R10)(R11)
	VST1.P [V10.S4, V11.S4], (R10)(R11)
	VST1.P [V12.S4, V13.S4], (R10)(R11)
	VST1.P [V14.S4, V15.S4], (R10)(R11)
	VST1.P [V16.S4, V17.S4], (R10)(R11)
	VST1.P [V18.S4, V19.S4], (R10)(R11)
	VST1.P [V20.S4, V21.S4], (R10)(R11)
	VST1.P [V22.S4, V23.S4], (R10)(R11)
	VST1.P [V24.S4, V25.S4], (R10)(R11)
	VST1.P [V26.S4, V27.S4], (R10)(R11)
	VST1.P [V28.S4, V29.S4], (R10)(R11)
	VST1.P [V30.S4, V31.S4], (R10)(R11)
	ADD  $32, R12, R12
	CMP  $128, R12
	BNE  pass

	TBZ  $1, R6, done
	MOVD R5, R10
	MOVD R7, R24
	TOUT(0)
	TOUT(4)
	TOUT(8)
	ADD  R8, R24, R24
	TOUT(0)
	TOUT(4)
	TOUT(8)
	ADD  R8, R24, R24
	TOUT(0)
	TOUT(4)
	TOUT(8)
	ADD  R8, R24, R24
	TOUT(0)
	TOUT(4)
	TOUT(8)

done:
	RET

// S4MUL(k, p0, p1, p2, p3): p_t = key floats (register k) × query t's
// (V0-V3), each product rounded.
#define S4MUL(k, p0, p1, p2, p3) \
	VFMUL4(p0, k, 0); \
	VFMUL4(p1, k, 1); \
	VFMUL4(p2, k, 2); \
	VFMUL4(p3, k, 3)

// S4ADD(p0, …, p3, a0, …, a3): a_t += p_t, each sum rounded.
#define S4ADD(p0, p1, p2, p3, a0, a1, a2, a3) \
	VFADD4(a0, a0, p0); \
	VFADD4(a1, a1, p1); \
	VFADD4(a2, a2, p2); \
	VFADD4(a3, a3, p3)

// S4OUT(a0, a1, a2, a3): one query's accumulators of keys 0-3 combined,
// each as (l0+l1)+(l2+l3), into [key 0, …, key 3] and written at R19,
// which moves on by outStride (R1) to the next query's row.
#define S4OUT(a0, a1, a2, a3) \
	VFADDP4(8, a0, a1); \
	VFADDP4(9, a2, a3); \
	VFADDP4(10, 8, 9); \
	VST1.P [V10.S4], (R19)(R1)

// func scores4NEON(out *float32, outStride int, count int, k *float32, stride int, qp *float32, n int)
//
// out[t·outStride + i] = dot4(k + i·stride, q_t) for four queries t < 4
// and i < count, n (the head dim) a positive multiple of 4; qp packs the
// queries as n/4 groups of 16 floats, group m holding q_t[4m..4m+3] at
// 4t. Key c's four floats are multiplied by each query's (VFMUL4,
// rounded) and added (VFADD4) into lane l = index mod 4 of the
// accumulator of (key c, query t), V(16+4c+t), in increasing index; each
// accumulator is then combined as dot4 combines its lanes, (l0+l1) +
// (l2+l3), by pairwise adds that leave a query's four keys side by side.
// Four keys at a time (sixteen chains in flight), then the rest one by
// one.
TEXT ·scores4NEON(SB), NOSPLIT, $0-56
	MOVD out+0(FP), R0
	MOVD outStride+8(FP), R1
	MOVD count+16(FP), R2
	MOVD k+24(FP), R3
	MOVD stride+32(FP), R4
	MOVD qp+40(FP), R5
	MOVD n+48(FP), R6
	LSL  $2, R1, R1
	LSL  $2, R4, R4
	CMP  $4, R2
	BLT  s4one

s4four:
	MOVD R3, R10
	ADD  R4, R10, R11
	ADD  R4, R11, R12
	ADD  R4, R12, R13
	MOVD R5, R14
	MOVD R6, R15
	ZERO4(V16.B16, V17.B16, V18.B16, V19.B16)
	ZERO4(V20.B16, V21.B16, V22.B16, V23.B16)
	ZERO4(V24.B16, V25.B16, V26.B16, V27.B16)
	ZERO4(V28.B16, V29.B16, V30.B16, V31.B16)

s4fourk:
	VLD1.P 64(R14), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 16(R10), [V4.S4]
	VLD1.P 16(R11), [V5.S4]
	VLD1.P 16(R12), [V6.S4]
	VLD1.P 16(R13), [V7.S4]
	S4MUL(4, 8, 9, 10, 11)
	S4ADD(8, 9, 10, 11, 16, 17, 18, 19)
	S4MUL(5, 12, 13, 14, 15)
	S4ADD(12, 13, 14, 15, 20, 21, 22, 23)
	S4MUL(6, 8, 9, 10, 11)
	S4ADD(8, 9, 10, 11, 24, 25, 26, 27)
	S4MUL(7, 12, 13, 14, 15)
	S4ADD(12, 13, 14, 15, 28, 29, 30, 31)
	SUBS $4, R15, R15
	BNE  s4fourk

	MOVD R0, R19
	S4OUT(16, 20, 24, 28)
	S4OUT(17, 21, 25, 29)
	S4OUT(18, 22, 26, 30)
	S4OUT(19, 23, 27, 31)
	ADD  $16, R0, R0
	ADD  R4<<2, R3, R3
	SUB  $4, R2, R2
	CMP  $4, R2
	BGE  s4four

s4one:
	CBZ  R2, s4done
	MOVD R3, R10
	MOVD R5, R14
	MOVD R6, R15
	ZERO4(V16.B16, V17.B16, V18.B16, V19.B16)

s4onek:
	VLD1.P 64(R14), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 16(R10), [V4.S4]
	S4MUL(4, 8, 9, 10, 11)
	S4ADD(8, 9, 10, 11, 16, 17, 18, 19)
	SUBS $4, R15, R15
	BNE  s4onek

	VFADDP4(20, 16, 17)      // [q0: l0+l1, l2+l3, q1: l0+l1, l2+l3]
	VFADDP4(21, 18, 19)
	VFADDP4(22, 20, 21)      // [q0, q1, q2, q3]
	MOVD R0, R19
	VST1.P V22.S[0], (R19)(R1)
	VST1.P V22.S[1], (R19)(R1)
	VST1.P V22.S[2], (R19)(R1)
	VST1.P V22.S[3], (R19)(R1)
	ADD  $4, R0, R0
	ADD  R4, R3, R3
	SUB  $1, R2, R2
	B    s4one

s4done:
	RET
