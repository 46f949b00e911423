#include "textflag.h"
#include "neon_arm64.h"

// The integer kernels with NEON (dotIntGeneric states the order; these
// perform the same operations). Arguments as quantint_amd64.s's: rows
// consecutive weight rows of nblocks blocks; the rounded inputs (acts):
// xq their quants, xd their scales; x1 kernels take input 0, x4 kernels
// inputs 0-3 (strides nblocks·32 and nblocks·4 bytes), writing
// out[r·outStride + i]. A group of 32 weights (V0, V1) times 32 inputs
// gives the eight int32 lanes of dotIntGeneric (lane j: weights
// 4j..4j+3) by SDOT where the CPU has the DotProd extension (…DOT
// kernels), else by SMULL, SMULL2, SADDLP and ADDP (…MUL kernels): exact
// integers either way, converted exactly to float32 (|lane| ≤ 2^16).

// LANESDOT(x0, x1, lo, hi): lanes 0-3 (weights V0 times inputs x0) into
// lo, lanes 4-7 (V1 times x1) into hi, as float32, by SDOT.
#define LANESDOT(x0, x1, lo, hi) \
	VZERO(lo); \
	VZERO(hi); \
	VSDOT(lo, 0, x0); \
	VSDOT(hi, 1, x1); \
	VSCVTF4(lo, lo); \
	VSCVTF4(hi, hi)

// HALFMUL(w, x, d, t): lanes of 16 weights w times inputs x into d
// (int32): the sixteen int16 products pairwise widened (SADDLP), then
// pairs of pairs (ADDP). Clobbers t.
#define HALFMUL(w, x, d, t) \
	VSMULL(d, w, x); \
	VSMULL2(t, w, x); \
	VSADDLP4(d, d); \
	VSADDLP4(t, t); \
	WORD $(0x4EA0BC00 | ((t)<<16) | ((d)<<5) | (d))

// LANESMUL(x0, x1, lo, hi): LANESDOT's lanes without SDOT. Clobbers V6,
// V7.
#define LANESMUL(x0, x1, lo, hi) \
	HALFMUL(0, x0, lo, 6); \
	HALFMUL(1, x1, hi, 7); \
	VSCVTF4(lo, lo); \
	VSCVTF4(hi, hi)

// Q8W: the next Q8_0 block of weights at R0: its scale dw (float16,
// widened) in F24, its 32 quants in V0, V1; R0 moves past it.
#define Q8W \
	MOVHU.P 2(R0), R8; \
	VLD1.P  32(R0), [V0.B16, V1.B16]; \
	FMOVS   R8, F24; \
	FCVTHS  F24, F24

// Q8ACC(xd, lo, hi, a0, a1): acc (a0: lanes 0-3, a1: 4-7) += d × lanes,
// d = float32(dw × the input's scale at xd, which moves on), each lane a
// fused multiply-add (VFMLA).
#define Q8ACC(xd, lo, hi, a0, a1) \
	FMOVS.P 4(xd), F25; \
	FMULS   F24, F25, F25; \
	VDUP    V25.S[0], V25.S4; \
	VFMLA   lo, V25.S4, a0; \
	VFMLA   hi, V25.S4, a1

// Q8X1(LANES): the body of a one-input kernel, its lanes by LANES.
#define Q8X1(LANES) \
	MOVD raw+0(FP), R0; \
	MOVD rows+8(FP), R1; \
	MOVD out+48(FP), R6; \
q8x1row: \
	MOVD xq+24(FP), R10; \
	MOVD xd+32(FP), R14; \
	MOVD nblocks+16(FP), R22; \
	VEOR V16.B16, V16.B16, V16.B16; \
	VEOR V17.B16, V17.B16, V17.B16; \
q8x1block: \
	Q8W; \
	VLD1.P 32(R10), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R14, V4.S4, V5.S4, V16.S4, V17.S4); \
	SUBS $1, R22, R22; \
	BNE  q8x1block; \
	HSUM8(16, 17, 18); \
	FMOVS F16, (R6); \
	ADD   $4, R6, R6; \
	SUBS  $1, R1, R1; \
	BNE   q8x1row; \
	RET

// func dotQ8Ix1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix1DOT(SB), NOSPLIT, $0-64
	Q8X1(LANESDOT)

// func dotQ8Ix1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix1MUL(SB), NOSPLIT, $0-64
	Q8X1(LANESMUL)

// Q8X4ROW sets up a row of the x4 kernels: input r's quants at R10-R13,
// scales at R14, R15, R20, R21, blocks left in R22, accumulators V16-V23
// (input r: lanes 0-3 in V(16+2r), 4-7 in V(17+2r)) at zero.
#define Q8X4ROW \
	MOVD R3, R10; \
	ADD  R9, R10, R11; \
	ADD  R9, R11, R12; \
	ADD  R9, R12, R13; \
	MOVD R4, R14; \
	ADD  R19, R14, R15; \
	ADD  R19, R15, R20; \
	ADD  R19, R20, R21; \
	MOVD R2, R22; \
	ZERO4(V16.B16, V17.B16, V18.B16, V19.B16); \
	ZERO4(V20.B16, V21.B16, V22.B16, V23.B16)

// Q8X4OUT combines the four inputs' accumulators (HSUM8) and writes them
// to out + r·outStride (R6 the row's place in input 0's outputs).
#define Q8X4OUT \
	HSUM8(16, 17, 26); \
	HSUM8(18, 19, 26); \
	HSUM8(20, 21, 26); \
	HSUM8(22, 23, 26); \
	MOVD  R6, R8; \
	FMOVS F16, (R8); \
	ADD   R7, R8, R8; \
	FMOVS F18, (R8); \
	ADD   R7, R8, R8; \
	FMOVS F20, (R8); \
	ADD   R7, R8, R8; \
	FMOVS F22, (R8); \
	ADD   $4, R6, R6

// Q8X4ARGS loads the x4 kernels' arguments: R9 and R19 the strides of
// the inputs' quants and scales, R7 outStride in bytes.
#define Q8X4ARGS \
	MOVD raw+0(FP), R0; \
	MOVD rows+8(FP), R1; \
	MOVD nblocks+16(FP), R2; \
	MOVD xq+24(FP), R3; \
	MOVD xd+32(FP), R4; \
	MOVD out+48(FP), R6; \
	MOVD outStride+56(FP), R7; \
	LSL  $2, R7, R7; \
	LSL  $5, R2, R9; \
	LSL  $2, R2, R19

// Q8X4(LANES): the body of a four-input kernel, its lanes by LANES.
#define Q8X4(LANES) \
	Q8X4ARGS; \
q8x4row: \
	Q8X4ROW; \
q8x4block: \
	Q8W; \
	VLD1.P 32(R10), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R14, V4.S4, V5.S4, V16.S4, V17.S4); \
	VLD1.P 32(R11), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R15, V4.S4, V5.S4, V18.S4, V19.S4); \
	VLD1.P 32(R12), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R20, V4.S4, V5.S4, V20.S4, V21.S4); \
	VLD1.P 32(R13), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R21, V4.S4, V5.S4, V22.S4, V23.S4); \
	SUBS $1, R22, R22; \
	BNE  q8x4block; \
	Q8X4OUT; \
	SUBS $1, R1, R1; \
	BNE  q8x4row; \
	RET

// func dotQ8Ix4DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix4DOT(SB), NOSPLIT, $0-64
	Q8X4(LANESDOT)

// func dotQ8Ix4MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix4MUL(SB), NOSPLIT, $0-64
	Q8X4(LANESMUL)
