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
// integers either way. The 32-weight types sum a block's lanes to one
// int32 (ADD, ADDV), Q4_K and Q5_K a super-block's, whose conversion
// rounds to nearest above 2^24, as the twin's does.

// LANESDOT(x0, x1, lo, hi): lanes 0-3 (weights V0 times inputs x0) into
// lo, lanes 4-7 (V1 times x1) into hi, as int32, by SDOT.
#define LANESDOT(x0, x1, lo, hi) \
	VZERO(lo); \
	VZERO(hi); \
	VSDOT(lo, 0, x0); \
	VSDOT(hi, 1, x1)

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
	HALFMUL(1, x1, hi, 7)

// ILANESDOT(w0, w1, x0, x1, lo, hi): lanes 0-3 of weights w0 times
// inputs x0 into lo, lanes 4-7 (w1, x1) into hi, as int32, by SDOT.
#define ILANESDOT(w0, w1, x0, x1, lo, hi) \
	VZERO(lo); \
	VZERO(hi); \
	VSDOT(lo, w0, x0); \
	VSDOT(hi, w1, x1)

// ILANESMUL(w0, w1, x0, x1, lo, hi): ILANESDOT's lanes without SDOT.
// Clobbers V12, V13.
#define ILANESMUL(w0, w1, x0, x1, lo, hi) \
	HALFMUL(w0, x0, lo, 12); \
	HALFMUL(w1, x1, hi, 13)

// Q8W: the next Q8_0 block of weights at R0: its scale dw (float16,
// widened) in F24, its 32 quants in V0, V1; R0 moves past it.
#define Q8W \
	MOVHU.P 2(R0), R8; \
	VLD1.P  32(R0), [V0.B16, V1.B16]; \
	FMOVS   R8, F24; \
	FCVTHS  F24, F24

// Q8ACC(xd, acc): the block's I, the lanes in V4, V5 summed (ADD, ADDV)
// and converted (SCVTF), then acc = fma(float32(dw × the input's scale
// at xd, which moves on), float32(I), acc) (FMADD).
#define Q8ACC(xd, acc) \
	VADD    V5.S4, V4.S4, V4.S4; \
	VADDV   V4.S4, V4; \
	VMOV    V4.S[0], R8; \
	SCVTFWS R8, F26; \
	FMOVS.P 4(xd), F25; \
	FMULS   F24, F25, F25; \
	FMADDS  F26, acc, F25, acc

// Q40W: the next Q4_0 block of weights at R0 (a float16 scale, then 16
// bytes: weights 0-15 in the low nibbles, 16-31 in the high ones), as
// Q8W leaves a Q8_0 block: the scale in F24, the quants less 8 in V0, V1.
#define Q40W \
	MOVHU.P 2(R0), R8; \
	VLD1.P  16(R0), [V0.B16]; \
	VUSHR   $4, V0.B16, V1.B16; \
	VAND    V30.B16, V0.B16, V0.B16; \
	VSUB    V29.B16, V0.B16, V0.B16; \
	VSUB    V29.B16, V1.B16, V1.B16; \
	FMOVS   R8, F24; \
	FCVTHS  F24, F24

// Q4SETUP: Q40W's constants (V30: 15 a byte, V29: 8).
#define Q4SETUP \
	VMOVI $15, V30.B16; \
	VMOVI $8, V29.B16

// q5tab: Q50W's tables: a byte's bit masks 1…128 twice, then the TBL
// indices that spread qh bytes 0, 1 (weights 0-15) and 2, 3 (16-31) over
// the eight weights each holds the bits of.
DATA q5tab<>+0(SB)/8, $0x8040201008040201
DATA q5tab<>+8(SB)/8, $0x8040201008040201
DATA q5tab<>+16(SB)/8, $0x0000000000000000
DATA q5tab<>+24(SB)/8, $0x0101010101010101
DATA q5tab<>+32(SB)/8, $0x0202020202020202
DATA q5tab<>+40(SB)/8, $0x0303030303030303
GLOBL q5tab<>(SB), RODATA|NOPTR, $48

// Q5SETUP: Q50W's constants (V8-V10: q5tab, V12: 16 a byte, V30: 15).
#define Q5SETUP \
	MOVD  $q5tab<>(SB), R5; \
	VLD1  (R5), [V8.B16, V9.B16, V10.B16]; \
	VMOVI $16, V12.B16; \
	VMOVI $15, V30.B16

// Q50W: the next Q5_0 block of weights at R0 (a float16 scale, the 32
// fifth bits qh, then 16 bytes of nibbles as Q4_0's), as Q8W leaves a
// Q8_0 block: bit i of qh, spread to byte i (TBL) and tested (CMTST),
// becomes 16 in weight i's nibble; the quants less 16 in V0, V1. Clobbers
// V2, V3, V13 and R5.
#define Q50W \
	MOVHU.P 2(R0), R8; \
	MOVWU.P 4(R0), R5; \
	VLD1.P  16(R0), [V0.B16]; \
	VMOV    R5, V13.S[0]; \
	VTBL    V9.B16, [V13.B16], V2.B16; \
	VTBL    V10.B16, [V13.B16], V3.B16; \
	VCMTST  V8.B16, V2.B16, V2.B16; \
	VCMTST  V8.B16, V3.B16, V3.B16; \
	VAND    V12.B16, V2.B16, V2.B16; \
	VAND    V12.B16, V3.B16, V3.B16; \
	VUSHR   $4, V0.B16, V1.B16; \
	VAND    V30.B16, V0.B16, V0.B16; \
	VORR    V2.B16, V0.B16, V0.B16; \
	VORR    V3.B16, V1.B16, V1.B16; \
	VSUB    V12.B16, V0.B16, V0.B16; \
	VSUB    V12.B16, V1.B16, V1.B16; \
	FMOVS   R8, F24; \
	FCVTHS  F24, F24

// Q8X1(LANES, W, SETUP): the body of a one-input kernel of the 32-weight
// types, its lanes by LANES, its blocks read by W (Q8W, Q40W, Q50W) with
// the constants SETUP loads.
#define Q8X1(LANES, W, SETUP) \
	MOVD raw+0(FP), R0; \
	MOVD rows+8(FP), R1; \
	MOVD out+48(FP), R6; \
	SETUP; \
q8x1row: \
	MOVD xq+24(FP), R10; \
	MOVD xd+32(FP), R14; \
	MOVD nblocks+16(FP), R22; \
	VEOR V16.B16, V16.B16, V16.B16; \
q8x1block: \
	W; \
	VLD1.P 32(R10), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R14, F16); \
	SUBS $1, R22, R22; \
	BNE  q8x1block; \
	FMOVS F16, (R6); \
	ADD   $4, R6, R6; \
	SUBS  $1, R1, R1; \
	BNE   q8x1row; \
	RET

// func dotQ8Ix1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix1DOT(SB), NOSPLIT, $0-64
	Q8X1(LANESDOT, Q8W, Q4SETUP)

// func dotQ8Ix1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix1MUL(SB), NOSPLIT, $0-64
	Q8X1(LANESMUL, Q8W, Q4SETUP)

// Q8X4ROW sets up a row of the x4 kernels: input r's quants at R10-R13,
// scales at R14, R15, R20, R21, blocks left in R22, accumulators F16,
// F18, F20, F22 (input r: F(16+2r)) at zero.
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

// Q8X4OUT writes the four inputs' results to out + r·outStride (R6 the
// row's place in input 0's outputs).
#define Q8X4OUT \
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

// Q8X4(LANES, W, SETUP): the body of a four-input kernel of the 32-weight
// types, as Q8X1's.
#define Q8X4(LANES, W, SETUP) \
	Q8X4ARGS; \
	SETUP; \
q8x4row: \
	Q8X4ROW; \
q8x4block: \
	W; \
	VLD1.P 32(R10), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R14, F16); \
	VLD1.P 32(R11), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R15, F18); \
	VLD1.P 32(R12), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R20, F20); \
	VLD1.P 32(R13), [V2.B16, V3.B16]; \
	LANES(2, 3, 4, 5); \
	Q8ACC(R21, F22); \
	SUBS $1, R22, R22; \
	BNE  q8x4block; \
	Q8X4OUT; \
	SUBS $1, R1, R1; \
	BNE  q8x4row; \
	RET

// func dotQ8Ix4DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix4DOT(SB), NOSPLIT, $0-64
	Q8X4(LANESDOT, Q8W, Q4SETUP)

// func dotQ8Ix4MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix4MUL(SB), NOSPLIT, $0-64
	Q8X4(LANESMUL, Q8W, Q4SETUP)

// func dotQ40Ix1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ40Ix1DOT(SB), NOSPLIT, $0-64
	Q8X1(LANESDOT, Q40W, Q4SETUP)

// func dotQ40Ix1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ40Ix1MUL(SB), NOSPLIT, $0-64
	Q8X1(LANESMUL, Q40W, Q4SETUP)

// func dotQ40Ix4DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ40Ix4DOT(SB), NOSPLIT, $0-64
	Q8X4(LANESDOT, Q40W, Q4SETUP)

// func dotQ40Ix4MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ40Ix4MUL(SB), NOSPLIT, $0-64
	Q8X4(LANESMUL, Q40W, Q4SETUP)

// func dotQ50Ix1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ50Ix1DOT(SB), NOSPLIT, $0-64
	Q8X1(LANESDOT, Q50W, Q5SETUP)

// func dotQ50Ix1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ50Ix1MUL(SB), NOSPLIT, $0-64
	Q8X1(LANESMUL, Q50W, Q5SETUP)

// func dotQ50Ix4DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ50Ix4DOT(SB), NOSPLIT, $0-64
	Q8X4(LANESDOT, Q50W, Q5SETUP)

// func dotQ50Ix4MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ50Ix4MUL(SB), NOSPLIT, $0-64
	Q8X4(LANESMUL, Q50W, Q5SETUP)

// Q4KSUB(wlo, whi, sc, LANES): the next sub-block's 32 inputs (at R10,
// which moves on) times its weights (wlo, whi) in int32 lanes, times its
// scale (register sc, broadcast to V15), added to I (V16, V17).
#define Q4KSUB(wlo, whi, sc, LANES) \
	VLD1.P 32(R10), [V6.B16, V7.B16]; \
	LANES(wlo, whi, 6, 7, 8, 9); \
	VDUP   sc, V15.S4; \
	VMLA4(16, 8, 15); \
	VMLA4(17, 9, 15)

// Q4KPAIR(sa, sb, LANES, HIGH): the next 32 quant bytes (at R7, which
// moves on): their low nibbles are sub-block 2p (scale sa), the high ones
// sub-block 2p+1 (scale sb); HIGH adds each sub-block's fifth bit (Q5_K)
// or nothing (Q4_K).
#define Q4KPAIR(sa, sb, LANES, HIGH) \
	VLD1.P 32(R7), [V0.B16, V1.B16]; \
	VAND   V30.B16, V0.B16, V2.B16; \
	VAND   V30.B16, V1.B16, V3.B16; \
	VUSHR  $4, V0.B16, V4.B16; \
	VUSHR  $4, V1.B16, V5.B16; \
	HIGH(V2.B16, V3.B16); \
	Q4KSUB(2, 3, sa, LANES); \
	HIGH(V4.B16, V5.B16); \
	Q4KSUB(4, 5, sb, LANES)

// Q5HIGH(a, b): Q5_K's fifth bits of the next sub-block (bit 0 of its qh
// bytes, V22: weights 0-15, V23: 16-31) put at bit 4 of its weights a, b;
// the qh bytes move on to the next sub-block's bit.
#define Q5HIGH(a, b) \
	VAND  V31.B16, V22.B16, V14.B16; \
	VSHL  $4, V14.B16, V14.B16; \
	VORR  V14.B16, a, a; \
	VAND  V31.B16, V23.B16, V25.B16; \
	VSHL  $4, V25.B16, V25.B16; \
	VORR  V25.B16, b, b; \
	VUSHR $1, V22.B16, V22.B16; \
	VUSHR $1, V23.B16, V23.B16

// Q4HIGH(a, b): Q4_K's quants are the nibbles.
#define Q4HIGH(a, b) NOP

// QKX1(LANES, QS, BB, HIGH): the body of the one-input Q4_K and Q5_K
// kernels (dotKInt's order; the quant nibbles at QS in a block of BB
// bytes, the fifth bits by HIGH):
// per super-block, I_j = Σ_k sc_k · lane j of sub-block k in int32
// (exact; V16, V17) and the minimums' lanes m_j·(bs_2j + bs_2j+1) (V10,
// V11), each summed to one int32 (ADD, ADDV: I and M) and converted
// (SCVTF); then acc (F18) = fma(float32(d·dx), float32(I), acc) (FMADD)
// and acc = acc − float32(dmin·dx)·float32(M) fused (FMSUB); the result
// acc. The scales and minimums
// (kScales) are unpacked in general registers: sc_k in R11-R13, R19-R21,
// R23, R24; m_k into V28, V29 lane by lane.
#define QKX1(LANES, QS, BB, HIGH) \
	MOVD  raw+0(FP), R0; \
	MOVD  rows+8(FP), R1; \
	MOVD  out+48(FP), R6; \
	VMOVI $15, V30.B16; \
	VMOVI $1, V31.B16; \
qkx1row: \
	MOVD xq+24(FP), R10; \
	MOVD xd+32(FP), R14; \
	MOVD bs+40(FP), R15; \
	MOVD nblocks+16(FP), R22; \
	VZERO(18); \
qkx1block: \
	MOVHU   (R0), R8; \
	FMOVS   R8, F24; \
	FCVTHS  F24, F24; \
	MOVHU   2(R0), R8; \
	FMOVS   R8, F26; \
	FCVTHS  F26, F26; \
	FMOVS.P 4(R14), F25; \
	FMULS   F25, F24, F24; \
	FMULS   F25, F26, F26; \
	MOVD    4(R0), R2; \
	MOVWU   12(R0), R3; \
	UBFX    $0, R2, $6, R11; \
	UBFX    $8, R2, $6, R12; \
	UBFX    $16, R2, $6, R13; \
	UBFX    $24, R2, $6, R19; \
	UBFX    $0, R3, $4, R20; \
	UBFX    $6, R2, $2, R8; \
	ORR     R8<<4, R20, R20; \
	UBFX    $8, R3, $4, R21; \
	UBFX    $14, R2, $2, R8; \
	ORR     R8<<4, R21, R21; \
	UBFX    $16, R3, $4, R23; \
	UBFX    $22, R2, $2, R8; \
	ORR     R8<<4, R23, R23; \
	UBFX    $24, R3, $4, R24; \
	UBFX    $30, R2, $2, R8; \
	ORR     R8<<4, R24, R24; \
	UBFX    $32, R2, $6, R8; \
	VMOV    R8, V28.S[0]; \
	UBFX    $40, R2, $6, R8; \
	VMOV    R8, V28.S[1]; \
	UBFX    $48, R2, $6, R8; \
	VMOV    R8, V28.S[2]; \
	UBFX    $56, R2, $6, R8; \
	VMOV    R8, V28.S[3]; \
	UBFX    $4, R3, $4, R8; \
	UBFX    $38, R2, $2, R9; \
	ORR     R9<<4, R8, R8; \
	VMOV    R8, V29.S[0]; \
	UBFX    $12, R3, $4, R8; \
	UBFX    $46, R2, $2, R9; \
	ORR     R9<<4, R8, R8; \
	VMOV    R8, V29.S[1]; \
	UBFX    $20, R3, $4, R8; \
	UBFX    $54, R2, $2, R9; \
	ORR     R9<<4, R8, R8; \
	VMOV    R8, V29.S[2]; \
	UBFX    $28, R3, $4, R8; \
	UBFX    $62, R2, $2, R9; \
	ORR     R9<<4, R8, R8; \
	VMOV    R8, V29.S[3]; \
	ADD     $16, R0, R7; \
	VLD1    (R7), [V22.B16, V23.B16]; \
	ADD     $QS, R0, R7; \
	VZERO(16); \
	VZERO(17); \
	Q4KPAIR(R11, R12, LANES, HIGH); \
	Q4KPAIR(R13, R19, LANES, HIGH); \
	Q4KPAIR(R20, R21, LANES, HIGH); \
	Q4KPAIR(R23, R24, LANES, HIGH); \
	VADD    V17.S4, V16.S4, V16.S4; \
	VADDV   V16.S4, V16; \
	VMOV    V16.S[0], R8; \
	SCVTFWS R8, F16; \
	VLD1.P  32(R15), [V10.H8, V11.H8]; \
	VSADDLP4(10, 10); \
	VSADDLP4(11, 11); \
	VMUL4(10, 10, 28); \
	VMUL4(11, 11, 29); \
	VADD    V11.S4, V10.S4, V10.S4; \
	VADDV   V10.S4, V10; \
	VMOV    V10.S[0], R8; \
	SCVTFWS R8, F10; \
	FMADDS  F16, F18, F24, F18; \
	FMSUBS  F10, F18, F26, F18; \
	ADD     $BB, R0, R0; \
	SUBS    $1, R22, R22; \
	BNE     qkx1block; \
	FMOVS   F18, (R6); \
	ADD     $4, R6, R6; \
	SUBS    $1, R1, R1; \
	BNE     qkx1row; \
	RET

// func dotQ4KIx1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ4KIx1DOT(SB), NOSPLIT, $0-64
	QKX1(ILANESDOT, 16, 144, Q4HIGH)

// func dotQ4KIx1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ4KIx1MUL(SB), NOSPLIT, $0-64
	QKX1(ILANESMUL, 16, 144, Q4HIGH)

// func dotQ5KIx1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ5KIx1DOT(SB), NOSPLIT, $0-64
	QKX1(ILANESDOT, 48, 176, Q5HIGH)

// func dotQ5KIx1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ5KIx1MUL(SB), NOSPLIT, $0-64
	QKX1(ILANESMUL, 48, 176, Q5HIGH)

// Q6SUB(off, LANES): the next 32 inputs (at R10, which moves on) times
// the weights in V6 (sub-block 2c of 16: lanes 0-3) and V7 (sub-block
// 2c+1: lanes 4-7) in int32 lanes, times the sub-blocks' int8 scales at
// off(R0) and off+1(R0), added to I (V16, V17).
#define Q6SUB(off, LANES) \
	VLD1.P 32(R10), [V10.B16, V11.B16]; \
	LANES(6, 7, 10, 11, 8, 9); \
	MOVB   off(R0), R8; \
	VDUP   R8, V15.S4; \
	VMLA4(16, 8, 15); \
	MOVB   off+1(R0), R8; \
	VDUP   R8, V15.S4; \
	VMLA4(17, 9, 15)

// Q6FIN: the high bits in V12, V13 (already at bits 4-5, masked) joined
// to the low nibbles in V6, V7, less 32: the weights as int8.
#define Q6FIN \
	VORR V12.B16, V6.B16, V6.B16; \
	VORR V13.B16, V7.B16, V7.B16; \
	VSUB V31.B16, V6.B16, V6.B16; \
	VSUB V31.B16, V7.B16, V7.B16

// Q6HALF(h, LANES): weights 128h..128h+127 of the super-block: low
// nibbles from ql (V0-V3: bytes 64h..64h+63 of the block), two high bits
// from qh (V4, V5: bytes 128+32h..), as q6 reads them: group g of 32
// takes the low (g < 2) or high nibbles of ql bytes 32(g mod 2).. and
// bits 2g, 2g+1 of the qh bytes; scales 192+2(4h+g), +1.
#define Q6HALF(h, LANES) \
	ADD   $(64*h), R0, R7; \
	VLD1  (R7), [V0.B16, V1.B16, V2.B16, V3.B16]; \
	ADD   $(128+32*h), R0, R7; \
	VLD1  (R7), [V4.B16, V5.B16]; \
	VAND  V30.B16, V0.B16, V6.B16; \
	VAND  V30.B16, V1.B16, V7.B16; \
	VSHL  $4, V4.B16, V12.B16; \
	VSHL  $4, V5.B16, V13.B16; \
	VAND  V27.B16, V12.B16, V12.B16; \
	VAND  V27.B16, V13.B16, V13.B16; \
	Q6FIN; \
	Q6SUB(192+8*h, LANES); \
	VAND  V30.B16, V2.B16, V6.B16; \
	VAND  V30.B16, V3.B16, V7.B16; \
	VSHL  $2, V4.B16, V12.B16; \
	VSHL  $2, V5.B16, V13.B16; \
	VAND  V27.B16, V12.B16, V12.B16; \
	VAND  V27.B16, V13.B16, V13.B16; \
	Q6FIN; \
	Q6SUB(194+8*h, LANES); \
	VUSHR $4, V0.B16, V6.B16; \
	VUSHR $4, V1.B16, V7.B16; \
	VAND  V27.B16, V4.B16, V12.B16; \
	VAND  V27.B16, V5.B16, V13.B16; \
	Q6FIN; \
	Q6SUB(196+8*h, LANES); \
	VUSHR $4, V2.B16, V6.B16; \
	VUSHR $4, V3.B16, V7.B16; \
	VUSHR $2, V4.B16, V12.B16; \
	VUSHR $2, V5.B16, V13.B16; \
	VAND  V27.B16, V12.B16, V12.B16; \
	VAND  V27.B16, V13.B16, V13.B16; \
	Q6FIN; \
	Q6SUB(198+8*h, LANES)

// Q6KX1(LANES): the body of the one-input Q6_K kernel (dotKInt's order):
// per super-block, I_j = Σ_c sc · lane j of group c of 32 (lanes 0-3
// scaled by sub-block 2c's int8 scale, 4-7 by 2c+1's) in int32 (exact),
// acc_j = fma(float32(d·dx), float32(I_j), acc_j); the result hsum8(acc)
// (Q6_K has no minimums: dotKInt's − hsum8 of zeros changes nothing).
#define Q6KX1(LANES) \
	MOVD  raw+0(FP), R0; \
	MOVD  rows+8(FP), R1; \
	MOVD  out+48(FP), R6; \
	VMOVI $15, V30.B16; \
	VMOVI $48, V27.B16; \
	VMOVI $32, V31.B16; \
q6kx1row: \
	MOVD xq+24(FP), R10; \
	MOVD xd+32(FP), R14; \
	MOVD nblocks+16(FP), R22; \
	VEOR V18.B16, V18.B16, V18.B16; \
	VEOR V19.B16, V19.B16, V19.B16; \
q6kx1block: \
	MOVHU   208(R0), R8; \
	FMOVS   R8, F24; \
	FCVTHS  F24, F24; \
	FMOVS.P 4(R14), F25; \
	FMULS   F25, F24, F24; \
	VZERO(16); \
	VZERO(17); \
	Q6HALF(0, LANES); \
	Q6HALF(1, LANES); \
	VSCVTF4(16, 16); \
	VSCVTF4(17, 17); \
	VDUP    V24.S[0], V24.S4; \
	VFMLA   V16.S4, V24.S4, V18.S4; \
	VFMLA   V17.S4, V24.S4, V19.S4; \
	ADD     $210, R0, R0; \
	SUBS    $1, R22, R22; \
	BNE     q6kx1block; \
	HSUM8(18, 19, 22); \
	FMOVS   F18, (R6); \
	ADD     $4, R6, R6; \
	SUBS    $1, R1, R1; \
	BNE     q6kx1row; \
	RET

// func dotQ6KIx1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ6KIx1DOT(SB), NOSPLIT, $0-64
	Q6KX1(ILANESDOT)

// func dotQ6KIx1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ6KIx1MUL(SB), NOSPLIT, $0-64
	Q6KX1(ILANESMUL)
