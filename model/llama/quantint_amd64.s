#include "textflag.h"
#include "hsum_amd64.h"

// The integer kernels (dotIntGeneric states the order; these perform the
// same operations). Arguments: rows consecutive weight rows of nblocks
// blocks (super-blocks for the K-quants); the rounded inputs (acts): xq
// their quants, xd their scales, bs the K-quants' sums of 16; x1 kernels
// take input 0, x4 kernels inputs 0-3 (strides nblocks·block bytes,
// nblocks·4 and nblocks·32), writing out[r·outStride + i]. A group of 32
// weights times 32 inputs: VPSIGNB moves the weights' signs to the inputs
// (signed types), VPMADDUBSW multiplies |w| by them into 16 int16 pair
// sums (at most 2·128·127: no saturation), VPMADDWD by 1 (or the
// sub-block's scale) into the eight int32 lanes of dotIntGeneric. (The
// VNNI kernels of Q8_0, Q4_0 and Q5_0 for four and eight inputs take the
// inputs offset to unsigned instead: the offset kernels below.)

DATA one16<>+0(SB)/8, $0x0001000100010001
DATA one16<>+8(SB)/8, $0x0001000100010001
DATA one16<>+16(SB)/8, $0x0001000100010001
DATA one16<>+24(SB)/8, $0x0001000100010001
GLOBL one16<>(SB), RODATA|NOPTR, $32


// The K-quants (dotKInt): per super-block, the weights' sub-block scales
// (and Q4_K's, Q5_K's minimums) unpacked once per row and shared by the
// inputs; each group of 32 quants (unsigned for Q4_K and Q5_K, q−32 with
// its sign moved to the inputs for Q6_K) times the inputs' quants by
// VPMADDUBSW, times the scale of its sub-block by VPMADDWD, summed in
// int32 (I, eight lanes). Then per input the float steps. Q6_K: acc =
// fma(float32(d·dx), float32(I), acc) lane by lane, the accumulators in
// the frame (0(SP): acc, 128(SP): mn, per input; Q6_K's mn stay 0), the
// result hsum8(acc) − hsum8(mn). Q4_K and Q5_K (one integer per row and
// super-block): I's lanes and the minimums' (VPMADDWD(bsums, m)) summed
// in int32 by VPHADDD to one I and one M per input, then acc =
// fma(float32(d·dx), float32(I), acc) and acc = −float32(dmin·dx)·
// float32(M) + acc fused (VFNMADD231SS/PS), one float per input (the
// x4 kernels' four in a vector at 0(SP)), which is the result. The x4
// kernels apply each super-block to four inputs (Y8-Y11 their I, Y4-Y7
// temporaries).
// The VNNI kernels are the AVX2 ones with VPDPWSSD (AVX512-VNNI, VL) in
// place of VPMADDWD and VPADDD.

DATA ·q0fI+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·q0fI+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·q0fI+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·q0fI+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL ·q0fI(SB), RODATA|NOPTR, $32 // the packed kernels read it too

DATA ·q10I+0(SB)/8, $0x1010101010101010
DATA ·q10I+8(SB)/8, $0x1010101010101010
DATA ·q10I+16(SB)/8, $0x1010101010101010
DATA ·q10I+24(SB)/8, $0x1010101010101010
GLOBL ·q10I(SB), RODATA|NOPTR, $32 // and this one (packq8_amd64.s)

DATA q30I<>+0(SB)/8, $0x3030303030303030
DATA q30I<>+8(SB)/8, $0x3030303030303030
DATA q30I<>+16(SB)/8, $0x3030303030303030
DATA q30I<>+24(SB)/8, $0x3030303030303030
GLOBL q30I<>(SB), RODATA|NOPTR, $32

DATA q20I<>+0(SB)/8, $0x2020202020202020
DATA q20I<>+8(SB)/8, $0x2020202020202020
DATA q20I<>+16(SB)/8, $0x2020202020202020
DATA q20I<>+24(SB)/8, $0x2020202020202020
GLOBL q20I<>(SB), RODATA|NOPTR, $32

// kshuf: VPSHUFB indices repeating byte k (16 times, k < 8): sub-block k's scale for VPMOVZXBW.
DATA kshuf<>+0(SB)/8, $0x0000000000000000
DATA kshuf<>+8(SB)/8, $0x0000000000000000
DATA kshuf<>+16(SB)/8, $0x0101010101010101
DATA kshuf<>+24(SB)/8, $0x0101010101010101
DATA kshuf<>+32(SB)/8, $0x0202020202020202
DATA kshuf<>+40(SB)/8, $0x0202020202020202
DATA kshuf<>+48(SB)/8, $0x0303030303030303
DATA kshuf<>+56(SB)/8, $0x0303030303030303
DATA kshuf<>+64(SB)/8, $0x0404040404040404
DATA kshuf<>+72(SB)/8, $0x0404040404040404
DATA kshuf<>+80(SB)/8, $0x0505050505050505
DATA kshuf<>+88(SB)/8, $0x0505050505050505
DATA kshuf<>+96(SB)/8, $0x0606060606060606
DATA kshuf<>+104(SB)/8, $0x0606060606060606
DATA kshuf<>+112(SB)/8, $0x0707070707070707
DATA kshuf<>+120(SB)/8, $0x0707070707070707
GLOBL kshuf<>(SB), RODATA|NOPTR, $128

// kshufp: VPSHUFB indices repeating bytes 2c, 2c+1 (eight times, c < 4):
// the scales of sub-blocks 2c and 2c+1 in turn, for VPMOVZXBW (KSCVP).
DATA kshufp<>+0(SB)/8, $0x0100010001000100
DATA kshufp<>+8(SB)/8, $0x0100010001000100
DATA kshufp<>+16(SB)/8, $0x0302030203020302
DATA kshufp<>+24(SB)/8, $0x0302030203020302
DATA kshufp<>+32(SB)/8, $0x0504050405040504
DATA kshufp<>+40(SB)/8, $0x0504050405040504
DATA kshufp<>+48(SB)/8, $0x0706070607060706
DATA kshufp<>+56(SB)/8, $0x0706070607060706
GLOBL kshufp<>(SB), RODATA|NOPTR, $64

// kshufw: VPSHUFB indices repeating word k (bytes 2k, 2k+1; eight times
// per lane, k < 8): sub-block k's scale from the words of both lanes.
DATA kshufw<>+0(SB)/8, $0x0100010001000100
DATA kshufw<>+8(SB)/8, $0x0100010001000100
DATA kshufw<>+16(SB)/8, $0x0100010001000100
DATA kshufw<>+24(SB)/8, $0x0100010001000100
DATA kshufw<>+32(SB)/8, $0x0302030203020302
DATA kshufw<>+40(SB)/8, $0x0302030203020302
DATA kshufw<>+48(SB)/8, $0x0302030203020302
DATA kshufw<>+56(SB)/8, $0x0302030203020302
DATA kshufw<>+64(SB)/8, $0x0504050405040504
DATA kshufw<>+72(SB)/8, $0x0504050405040504
DATA kshufw<>+80(SB)/8, $0x0504050405040504
DATA kshufw<>+88(SB)/8, $0x0504050405040504
DATA kshufw<>+96(SB)/8, $0x0706070607060706
DATA kshufw<>+104(SB)/8, $0x0706070607060706
DATA kshufw<>+112(SB)/8, $0x0706070607060706
DATA kshufw<>+120(SB)/8, $0x0706070607060706
DATA kshufw<>+128(SB)/8, $0x0908090809080908
DATA kshufw<>+136(SB)/8, $0x0908090809080908
DATA kshufw<>+144(SB)/8, $0x0908090809080908
DATA kshufw<>+152(SB)/8, $0x0908090809080908
DATA kshufw<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kshufw<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kshufw<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kshufw<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kshufw<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kshufw<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kshufw<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kshufw<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kshufw<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kshufw<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kshufw<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kshufw<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kshufw<>(SB), RODATA|NOPTR, $256

// q6shuf: byte 2c eight times, then 2c+1 eight times (c < 8): the scales of group c's two sub-blocks of 16.
DATA q6shuf<>+0(SB)/8, $0x0000000000000000
DATA q6shuf<>+8(SB)/8, $0x0101010101010101
DATA q6shuf<>+16(SB)/8, $0x0202020202020202
DATA q6shuf<>+24(SB)/8, $0x0303030303030303
DATA q6shuf<>+32(SB)/8, $0x0404040404040404
DATA q6shuf<>+40(SB)/8, $0x0505050505050505
DATA q6shuf<>+48(SB)/8, $0x0606060606060606
DATA q6shuf<>+56(SB)/8, $0x0707070707070707
DATA q6shuf<>+64(SB)/8, $0x0808080808080808
DATA q6shuf<>+72(SB)/8, $0x0909090909090909
DATA q6shuf<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA q6shuf<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA q6shuf<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA q6shuf<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA q6shuf<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA q6shuf<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6shuf<>(SB), RODATA|NOPTR, $128


// q6shufw: for group c of a half super-block (c < 4), lane 0 repeating
// word 2c (bytes 4c, 4c+1), lane 1 word 2c+1: the scales of its two
// sub-blocks of 16 from int16 scales (Q6G1).
DATA q6shufw<>+0(SB)/8, $0x0100010001000100
DATA q6shufw<>+8(SB)/8, $0x0100010001000100
DATA q6shufw<>+16(SB)/8, $0x0302030203020302
DATA q6shufw<>+24(SB)/8, $0x0302030203020302
DATA q6shufw<>+32(SB)/8, $0x0504050405040504
DATA q6shufw<>+40(SB)/8, $0x0504050405040504
DATA q6shufw<>+48(SB)/8, $0x0706070607060706
DATA q6shufw<>+56(SB)/8, $0x0706070607060706
DATA q6shufw<>+64(SB)/8, $0x0908090809080908
DATA q6shufw<>+72(SB)/8, $0x0908090809080908
DATA q6shufw<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6shufw<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6shufw<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6shufw<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6shufw<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q6shufw<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q6shufw<>(SB), RODATA|NOPTR, $128

// KSCALESI: a Q4_K or Q5_K block at CX: its eight 6-bit scales (kScales)
// as bytes in X13, its minimums m_j as int16 at words 2j and 2j+1 to
// 256(SP), dmin in every lane to 288(SP), d in every lane of Y15.
// Clobbers R11, R14, Y12, Y14 (DI kept in 328(SP) meanwhile).
#define KSCALESI \
	MOVQ DI, 328(SP); \
	MOVL 4(CX), R11; \
	MOVL R11, R14; \
	SHRL $2, R14; \
	ANDL $0x30303030, R14; \
	ANDL $0x3f3f3f3f, R11; \
	MOVL 12(CX), DI; \
	ANDL $0x0f0f0f0f, DI; \
	ORL DI, R14; \
	SHLQ $32, R14; \
	ORQ R11, R14; \
	MOVQ R14, X13; \
	MOVL 8(CX), R11; \
	MOVL R11, R14; \
	SHRL $2, R14; \
	ANDL $0x30303030, R14; \
	ANDL $0x3f3f3f3f, R11; \
	MOVL 12(CX), DI; \
	SHRL $4, DI; \
	ANDL $0x0f0f0f0f, DI; \
	ORL DI, R14; \
	SHLQ $32, R14; \
	ORQ R11, R14; \
	MOVQ R14, X14; \
	MOVQ 328(SP), DI; \
	VPMOVZXBW X14, X14; \
	VPUNPCKLWD X14, X14, X12; \
	VPUNPCKHWD X14, X14, X14; \
	VINSERTI128 $1, X14, Y12, Y12; \
	VMOVDQU Y12, 256(SP); \
	VPBROADCASTW 2(CX), X12; \
	VCVTPH2PS X12, Y12; \
	VMOVUPS Y12, 288(SP); \
	VPBROADCASTW (CX), X15; \
	VCVTPH2PS X15, Y15

// KNIB(src): the 32 nibble bytes at src(CX): sub-block 2c's quants (low
// nibbles) into Y0, 2c+1's (high) into Y1.
#define KNIB(src) \
	VMOVDQU src(CX), Y0; \
	VPSRLW $4, Y0, Y1; \
	VPAND ·q0fI(SB), Y0, Y0; \
	VPAND ·q0fI(SB), Y1, Y1

// Q5BIT(OP, C, Y): Q5_K's fifth bits of a sub-block (qh in Y3, OP $C
// moves the sub-block's bit to bit 4) into the quants in Y.
#define Q5BIT(OP, C, Y) \
	OP $C, Y3, Y14; \
	VPAND ·q10I(SB), Y14, Y14; \
	VPOR Y14, Y, Y

// KSCV(off): the scales of sub-blocks 2c, 2c+1 (kshuf at off) as int16 in
// every word of Y2 and Y12.
#define KSCV(off) \
	VPSHUFB kshuf<>+off(SB), X13, X2; \
	VPMOVZXBW X2, Y2; \
	VPSHUFB kshuf<>+16+off(SB), X13, X12; \
	VPMOVZXBW X12, Y12

// KMUL(x0, x1, T, I): sub-blocks 2c (Y0, scale Y2) and 2c+1 (Y1, Y12)
// times the input quants at x0 and x1, into I.
#define KMUL(x0, x1, T, I) \
	VPMADDUBSW x0, Y0, T; \
	VPMADDWD Y2, T, T; \
	VPADDD T, I, I; \
	VPMADDUBSW x1, Y1, T; \
	VPMADDWD Y12, T, T; \
	VPADDD T, I, I

// KMULV: KMUL with VPDPWSSD (AVX512-VNNI and VL) in place of VPMADDWD
// and VPADDD: the same int32 sums.
#define KMULV(x0, x1, T, I) \
	VPMADDUBSW x0, Y0, T; \
	VPDPWSSD Y2, T, I; \
	VPMADDUBSW x1, Y1, T; \
	VPDPWSSD Y12, T, I

// KMULV1(x0, x1): KMULV for the one-input kernels with two accumulators
// (sub-block 2c into Y8, 2c+1 into Y9, added by KSUM1: the same int32
// sums), halving the chain of dependent VPDPWSSDs.
#define KMULV1(x0, x1, T, I) \
	VPMADDUBSW x0, Y0, T; \
	VPDPWSSD Y2, T, Y8; \
	VPMADDUBSW x1, Y1, Y7; \
	VPDPWSSD Y12, Y7, Y9

// KSUM1: Y9 into Y8 (Y9 zero for the one-accumulator MUL).
#define KSUM1 \
	VPADDD Y9, Y8, Y8

// KFLOAT(xd, acc, I): acc(SP) = fma(float32(d·dx), float32(I), acc) lane
// by lane (Q6_K; d in Y15, dx at xd); leaves dx broadcast in Y12.
#define KFLOAT(xd, acc, I) \
	VBROADCASTSS xd, Y12; \
	VMULPS Y15, Y12, Y13; \
	VCVTDQ2PS I, I; \
	VMOVUPS acc(SP), Y14; \
	VFMADD231PS I, Y13, Y14; \
	VMOVUPS Y14, acc(SP)

// Q6G(OP, C, sc): a group of 32 Q6_K quants: the nibbles in Y0 (the 32
// ql bytes, shifted for the high ones), their two high bits from qh (Y3;
// OP $C moves them to bits 4-5), minus 32, into Y0, |q−32| into Y1, the
// scales of its two sub-blocks (q6shuf at sc) as int16 into Y2 (eight
// words each).
#define Q6G(OP, C, sc) \
	VPAND ·q0fI(SB), Y0, Y0; \
	OP $C, Y3, Y14; \
	VPAND q30I<>(SB), Y14, Y14; \
	VPOR Y14, Y0, Y0; \
	VPSUBB q20I<>(SB), Y0, Y0; \
	VPABSB Y0, Y1; \
	VPSHUFB q6shuf<>+sc(SB), X13, X2; \
	VPMOVSXBW X2, Y2

// Q6G1(OP, C, sc, S): Q6G for the one-input kernel: the scales of the
// group's two sub-blocks by one VPSHUFB (q6shufw at sc) from the int16
// scales of its half super-block in both lanes of S (Q6KX1).
#define Q6G1(OP, C, sc, S) \
	VPAND ·q0fI(SB), Y0, Y0; \
	OP $C, Y3, Y14; \
	VPAND q30I<>(SB), Y14, Y14; \
	VPOR Y14, Y0, Y0; \
	VPSUBB q20I<>(SB), Y0, Y0; \
	VPABSB Y0, Y1; \
	VPSHUFB q6shufw<>+sc(SB), S, Y2

// Q6MUL(x, T, I): the group (Y0, Y1, Y2) times the input quants at x, into
// I (the weights' signs moved to the inputs).
#define Q6MUL(x, T, I) \
	VMOVDQU x, T; \
	VPSIGNB Y0, T, T; \
	VPMADDUBSW T, Y1, T; \
	VPMADDWD Y2, T, T; \
	VPADDD T, I, I

// Q6MULV: Q6MUL with VPDPWSSD in place of VPMADDWD and VPADDD.
#define Q6MULV(x, T, I) \
	VMOVDQU x, T; \
	VPSIGNB Y0, T, T; \
	VPMADDUBSW T, Y1, T; \
	VPDPWSSD Y2, T, I

#define Q6MUL4V(o) \
	Q6MULV(o(AX), Y4, Y8); \
	Q6MULV(o(AX)(DX*1), Y5, Y9); \
	Q6MULV(o(AX)(DX*2), Y6, Y10); \
	Q6MULV(o(AX)(R8*1), Y7, Y11)

// Q6MUL4(o): Q6MUL for the four inputs, quants at o of each.
#define Q6MUL4(o) \
	Q6MUL(o(AX), Y4, Y8); \
	Q6MUL(o(AX)(DX*1), Y5, Y9); \
	Q6MUL(o(AX)(DX*2), Y6, Y10); \
	Q6MUL(o(AX)(R8*1), Y7, Y11)

// KPROLOGUE: strides (quants DX, R8 = 3·DX; scales R9, R13 = 3·R9; sums
// SI, DI = 3·SI) and out into R12.
#define KPROLOGUE \
	MOVQ raw+0(FP), CX; \
	MOVQ nblocks+16(FP), DX; \
	MOVQ DX, R9; \
	SHLQ $2, R9; \
	LEAQ (R9)(R9*2), R13; \
	MOVQ R9, SI; \
	SHLQ $3, SI; \
	LEAQ (SI)(SI*2), DI; \
	SHLQ $8, DX; \
	LEAQ (DX)(DX*2), R8; \
	MOVQ out+48(FP), R12

// KROW: a row's inputs from their first super-block (AX, R10, BX), its
// super-block count to 320(SP).
#define KROW \
	MOVQ xq+24(FP), AX; \
	MOVQ xd+32(FP), R10; \
	MOVQ bs+40(FP), BX; \
	MOVQ nblocks+16(FP), R11; \
	MOVQ R11, 320(SP); \
	VXORPS Y0, Y0, Y0

// KNEXT(bb): the next super-block (bb bytes of weights).
#define KNEXT(bb) \
	ADDQ $bb, CX; \
	ADDQ $256, AX; \
	ADDQ $4, R10; \
	ADDQ $32, BX; \
	DECQ 320(SP)

// KMUL4(o0, o1): KMUL for the four inputs, quants at o0 and o1 of each.
#define KMUL4(o0, o1) \
	KMUL(o0(AX), o1(AX), Y4, Y8); \
	KMUL(o0(AX)(DX*1), o1(AX)(DX*1), Y5, Y9); \
	KMUL(o0(AX)(DX*2), o1(AX)(DX*2), Y6, Y10); \
	KMUL(o0(AX)(R8*1), o1(AX)(R8*1), Y7, Y11)

#define KMUL4V(o0, o1) \
	KMULV(o0(AX), o1(AX), Y4, Y8); \
	KMULV(o0(AX)(DX*1), o1(AX)(DX*1), Y5, Y9); \
	KMULV(o0(AX)(DX*2), o1(AX)(DX*2), Y6, Y10); \
	KMULV(o0(AX)(R8*1), o1(AX)(R8*1), Y7, Y11)

// HADD4(A, B, C, D): in each half of A, lane r the sum of that half's
// lanes of the r-th of A, B, C, D (int32, VPHADDD; clobbers C).
#define HADD4(A, B, C, D) \
	VPHADDD B, A, A; \
	VPHADDD D, C, C; \
	VPHADDD C, A, A

// KFINK4: the float steps of Q4_K and Q5_K for four inputs: each
// input's I (Y8-Y11) and minimums' lanes (VPMADDWD of its sums of 16 by
// the m words at 256(SP), into Y4-Y7) summed to one int32 by a tree of
// VPHADDD (inputs 0-3 in the four lanes of each half) and the halves
// added; the four dx (R10, stride R9) in one vector; then acc (the four
// floats at 0(SP)) = fma(float32(d·dx), float32(I), acc) and acc =
// −float32(dmin·dx)·float32(M) + acc fused, lane by lane (d in Y15,
// SCALES4(b, s1, s3, X): four inputs' scales at b, b+s1, b+2·s1 and b+s3
// into X's lanes 0-3.
#define SCALES4(b, s1, s3, X) \
	VMOVSS    (b), X; \
	VINSERTPS $0x10, (b)(s1*1), X, X; \
	VINSERTPS $0x20, (b)(s1*2), X, X; \
	VINSERTPS $0x30, (b)(s3*1), X, X

// dmin at 288(SP)).
#define KFINK4 \
	VMOVDQU 256(SP), Y3; \
	VPMADDWD (BX), Y3, Y4; \
	VPMADDWD (BX)(SI*1), Y3, Y5; \
	VPMADDWD (BX)(SI*2), Y3, Y6; \
	VPMADDWD (BX)(DI*1), Y3, Y7; \
	HADD4(Y8, Y9, Y10, Y11); \
	HADD4(Y4, Y5, Y6, Y7); \
	VEXTRACTI128 $1, Y8, X9; \
	VPADDD X9, X8, X8; \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD X5, X4, X4; \
	VCVTDQ2PS X8, X8; \
	VCVTDQ2PS X4, X4; \
	SCALES4(R10, R9, R13, X12); \
	VMULPS X15, X12, X13; \
	VMULPS 288(SP), X12, X12; \
	VMOVUPS 0(SP), X14; \
	VFMADD231PS X8, X13, X14; \
	VFNMADD231PS X4, X12, X14; \
	VMOVUPS X14, 0(SP)

// KOUT4: the four inputs' results to out (R12, stride R11 bytes).
#define KOUT4 \
	MOVQ outStride+56(FP), R11; \
	SHLQ $2, R11; \
	MOVQ R12, R14; \
	KOUT(0, 128); \
	ADDQ R11, R14; \
	KOUT(32, 160); \
	ADDQ R11, R14; \
	KOUT(64, 192); \
	ADDQ R11, R14; \
	KOUT(96, 224)

// KOUTK4: the four results of Q4_K or Q5_K (0(SP), KFINK4) to out (R12,
// stride outStride; through AX, which KROW reloads).
#define KOUTK4 \
	MOVQ outStride+56(FP), R11; \
	SHLQ $2, R11; \
	MOVQ R12, R14; \
	KOUTK(0); \
	KOUTK(4); \
	KOUTK(8); \
	KOUTK(12)

// KOUTK(off): the float at off(SP) to (R14), R14 to the next input's.
#define KOUTK(off) \
	MOVL off(SP), AX; \
	MOVL AX, (R14); \
	ADDQ R11, R14

// KOUT(acc, mn): hsum8 of acc(SP) minus hsum8 of mn(SP) to (R14).
#define KOUT(acc, mn) \
	VMOVUPS acc(SP), Y0; \
	HSUM(Y0, X0, X1); \
	VMOVUPS mn(SP), Y2; \
	HSUM(Y2, X2, X1); \
	VSUBSS X2, X0, X0; \
	VMOVSS X0, (R14)

// The one-input K-quant kernels keep everything of a row in registers:
// acc in Y10 (Q4_K's and Q5_K's in lane 0) and Q6_K's mn in Y11 (KROW1),
// the super-block's minimums, d and dmin in Y5 and X15 (KSCALES1), the
// super-block count in R13 (KNEXT1). Same operations, same order as the
// frame-based x4 kernels.

// KSCALES1: KSCALESI for the one-input kernels: the scales as int16 in
// words 0-7 of both lanes of Y13 (one VPSHUFB per sub-block: KSCV1), the
// minimums (int16 at words 2j and 2j+1) in Y5, d and dmin in lanes 0 and
// 1 of X15. Clobbers R11, R14, DI, Y12, Y14.
#define KSCALES1 \
	MOVL 4(CX), R11; \
	MOVL R11, R14; \
	SHRL $2, R14; \
	ANDL $0x30303030, R14; \
	ANDL $0x3f3f3f3f, R11; \
	MOVL 12(CX), DI; \
	ANDL $0x0f0f0f0f, DI; \
	ORL DI, R14; \
	SHLQ $32, R14; \
	ORQ R11, R14; \
	MOVQ R14, X13; \
	MOVL 8(CX), R11; \
	MOVL R11, R14; \
	SHRL $2, R14; \
	ANDL $0x30303030, R14; \
	ANDL $0x3f3f3f3f, R11; \
	MOVL 12(CX), DI; \
	SHRL $4, DI; \
	ANDL $0x0f0f0f0f, DI; \
	ORL DI, R14; \
	SHLQ $32, R14; \
	ORQ R11, R14; \
	MOVQ R14, X14; \
	VPMOVZXBW X14, X14; \
	VPUNPCKLWD X14, X14, X12; \
	VPUNPCKHWD X14, X14, X14; \
	VINSERTI128 $1, X14, Y12, Y5; \
	VMOVSS (CX), X15; \
	VCVTPH2PS X15, X15; \
	VPMOVZXBW X13, X13; \
	VINSERTI128 $1, X13, Y13, Y13

// KSCV1(off): KSCV for the one-input kernels (scales in Y13 from
// KSCALES1): sub-block 2c's scale in every word of Y2, 2c+1's in Y12.
#define KSCV1(off) \
	VPSHUFB kshufw<>+off(SB), Y13, Y2; \
	VPSHUFB kshufw<>+32+off(SB), Y13, Y12

// KROW1: KROW for the one-input kernels (acc and mn zeroed in Y10, Y11;
// Y6 too, for KFINISH).
#define KROW1 \
	MOVQ xq+24(FP), AX; \
	MOVQ xd+32(FP), R10; \
	MOVQ bs+40(FP), BX; \
	MOVQ nblocks+16(FP), R13; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
	VXORPS Y6, Y6, Y6

// KNEXT1(bb): KNEXT for the one-input kernels.
#define KNEXT1(bb) \
	ADDQ $bb, CX; \
	ADDQ $256, AX; \
	ADDQ $4, R10; \
	ADDQ $32, BX; \
	DECQ R13

// KFLOAT1: KFLOAT with acc in Y10 (Q6_K).
#define KFLOAT1(I) \
	VBROADCASTSS (R10), Y12; \
	VMULPS Y15, Y12, Y13; \
	VCVTDQ2PS I, I; \
	VFMADD231PS I, Y13, Y10

// KOUT1: hsum8 of acc minus hsum8 of mn to (R12).
#define KOUT1 \
	HSUM(Y10, X10, X1); \
	HSUM(Y11, X11, X1); \
	VSUBSS X11, X10, X10; \
	VMOVSS X10, (R12)

// The float steps of Q4_K and Q5_K in the one-input kernels are split
// in two so that a super-block's wait on its lane sums overlaps the next
// one's multiplications: KSTART at the end of super-block b, KFINISH in
// super-block b+1 after its first sub-block pair (after the last
// super-block, at the end of the row). KROW1 zeroes what KFINISH reads, so
// the first KFINISH of a row adds 0·0 twice to acc = +0: +0.

// KSTART: I (Y8) and the minimums' lanes (VPMADDWD of the sums of 16 by
// m, Y5) added pairwise by VPHADDD into Y11 (I's in lanes 0, 1, 4, 5,
// M's in 2, 3, 6, 7); float32(d·dx), float32(dmin·dx) in lanes 0, 1 of
// X6. Clobbers Y4, Y12.
#define KSTART \
	VPMADDWD (BX), Y5, Y4; \
	VPHADDD Y4, Y8, Y11; \
	VBROADCASTSS (R10), X12; \
	VMULPS X12, X15, X6

// KFINISH: I and M summed to one int32 each (the halves of Y11 added,
// VPSHUFD and VPADDD), converted; acc (lane 0 of X10) = fma(float32(d·dx),
// float32(I), acc), then acc = −float32(dmin·dx)·float32(M) + acc fused.
// Clobbers Y11, Y14.
#define KFINISH \
	VEXTRACTI128 $1, Y11, X14; \
	VPADDD X14, X11, X11; \
	VPSHUFD $0xB1, X11, X14; \
	VPADDD X14, X11, X11; \
	VCVTDQ2PS X11, X11; \
	VFMADD231SS X11, X6, X10; \
	VMOVHLPS X11, X11, X11; \
	VMOVSHDUP X6, X14; \
	VFNMADD231SS X11, X14, X10

// KOUTK1: the Q4_K or Q5_K row's result (acc, lane 0 of X10) to (R12).
#define KOUTK1 \
	VMOVSS X10, (R12)

// Q4KX1(MUL): a Q4_K super-block at CX times one input, multiplied by MUL.
#define Q4KX1(MUL) \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	KSCALES1; \
	KNIB(16); \
	KSCV1(0); \
	MUL((AX), 32(AX), Y4, Y8); \
	KFINISH; \
	KNIB(48); \
	KSCV1(64); \
	MUL(64(AX), 96(AX), Y4, Y8); \
	KNIB(80); \
	KSCV1(128); \
	MUL(128(AX), 160(AX), Y4, Y8); \
	KNIB(112); \
	KSCV1(192); \
	MUL(192(AX), 224(AX), Y4, Y8); \
	KSUM1; \
	KSTART

// Q4KX4(MUL4): a Q4_K super-block at CX times four inputs, multiplied by MUL4.
#define Q4KX4(MUL4) \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	KSCALESI; \
	KNIB(16); \
	KSCV(0); \
	MUL4(0, 32); \
	KNIB(48); \
	KSCV(32); \
	MUL4(64, 96); \
	KNIB(80); \
	KSCV(64); \
	MUL4(128, 160); \
	KNIB(112); \
	KSCV(96); \
	MUL4(192, 224); \
	KFINK4

// Q5KX1(MUL): a Q5_K super-block at CX times one input, multiplied by MUL.
#define Q5KX1(MUL) \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	KSCALES1; \
	VMOVDQU 16(CX), Y3; \
	KNIB(48); \
	Q5BIT(VPSLLW, 4, Y0); \
	Q5BIT(VPSLLW, 3, Y1); \
	KSCV1(0); \
	MUL((AX), 32(AX), Y4, Y8); \
	KFINISH; \
	KNIB(80); \
	Q5BIT(VPSLLW, 2, Y0); \
	Q5BIT(VPSLLW, 1, Y1); \
	KSCV1(64); \
	MUL(64(AX), 96(AX), Y4, Y8); \
	KNIB(112); \
	Q5BIT(VPSLLW, 0, Y0); \
	Q5BIT(VPSRLW, 1, Y1); \
	KSCV1(128); \
	MUL(128(AX), 160(AX), Y4, Y8); \
	KNIB(144); \
	Q5BIT(VPSRLW, 2, Y0); \
	Q5BIT(VPSRLW, 3, Y1); \
	KSCV1(192); \
	MUL(192(AX), 224(AX), Y4, Y8); \
	KSUM1; \
	KSTART

// Q5KX4(MUL4): a Q5_K super-block at CX times four inputs, multiplied by MUL4.
#define Q5KX4(MUL4) \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	KSCALESI; \
	VMOVDQU 16(CX), Y3; \
	KNIB(48); \
	Q5BIT(VPSLLW, 4, Y0); \
	Q5BIT(VPSLLW, 3, Y1); \
	KSCV(0); \
	MUL4(0, 32); \
	KNIB(80); \
	Q5BIT(VPSLLW, 2, Y0); \
	Q5BIT(VPSLLW, 1, Y1); \
	KSCV(32); \
	MUL4(64, 96); \
	KNIB(112); \
	Q5BIT(VPSLLW, 0, Y0); \
	Q5BIT(VPSRLW, 1, Y1); \
	KSCV(64); \
	MUL4(128, 160); \
	KNIB(144); \
	Q5BIT(VPSRLW, 2, Y0); \
	Q5BIT(VPSRLW, 3, Y1); \
	KSCV(96); \
	MUL4(192, 224); \
	KFINK4

// Q6KX1(MUL): a Q6_K super-block at CX times one input, multiplied by MUL.
#define Q6KX1(MUL) \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPMOVSXBW 192(CX), Y5; \
	VPERMQ $0x44, Y5, Y13; \
	VPERMQ $0xee, Y5, Y5; \
	VPBROADCASTW 208(CX), X15; \
	VCVTPH2PS X15, Y15; \
	VMOVDQU 128(CX), Y3; \
	VMOVDQU 0(CX), Y0; \
	Q6G1(VPSLLW, 4, 0, Y13); \
	MUL((AX), Y4, Y8); \
	VMOVDQU 32(CX), Y0; \
	Q6G1(VPSLLW, 2, 32, Y13); \
	MUL(32(AX), Y4, Y9); \
	VMOVDQU 0(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6G1(VPSLLW, 0, 64, Y13); \
	MUL(64(AX), Y4, Y8); \
	VMOVDQU 32(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6G1(VPSRLW, 2, 96, Y13); \
	MUL(96(AX), Y4, Y9); \
	VMOVDQU 160(CX), Y3; \
	VMOVDQU 64(CX), Y0; \
	Q6G1(VPSLLW, 4, 0, Y5); \
	MUL(128(AX), Y4, Y8); \
	VMOVDQU 96(CX), Y0; \
	Q6G1(VPSLLW, 2, 32, Y5); \
	MUL(160(AX), Y4, Y9); \
	VMOVDQU 64(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6G1(VPSLLW, 0, 64, Y5); \
	MUL(192(AX), Y4, Y8); \
	VMOVDQU 96(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6G1(VPSRLW, 2, 96, Y5); \
	MUL(224(AX), Y4, Y9); \
	VPADDD Y9, Y8, Y8; \
	KFLOAT1(Y8)

// Q6WALK(M): the eight groups of 32 of a Q6_K super-block at CX (its
// scales to X13, d to Y15) for the x4 and x8 kernels, each group times
// the inputs by M(o), o the group's offset in an input's quants.
#define Q6WALK(M) \
	VMOVDQU 192(CX), X13; \
	VPBROADCASTW 208(CX), X15; \
	VCVTPH2PS X15, Y15; \
	VMOVDQU 128(CX), Y3; \
	VMOVDQU 0(CX), Y0; \
	Q6G(VPSLLW, 4, 0); \
	M(0); \
	VMOVDQU 32(CX), Y0; \
	Q6G(VPSLLW, 2, 16); \
	M(32); \
	VMOVDQU 0(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6G(VPSLLW, 0, 32); \
	M(64); \
	VMOVDQU 32(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6G(VPSRLW, 2, 48); \
	M(96); \
	VMOVDQU 160(CX), Y3; \
	VMOVDQU 64(CX), Y0; \
	Q6G(VPSLLW, 4, 64); \
	M(128); \
	VMOVDQU 96(CX), Y0; \
	Q6G(VPSLLW, 2, 80); \
	M(160); \
	VMOVDQU 64(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6G(VPSLLW, 0, 96); \
	M(192); \
	VMOVDQU 96(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6G(VPSRLW, 2, 112); \
	M(224)

// Q6KX4(MUL4): a Q6_K super-block at CX times four inputs, multiplied by MUL4.
#define Q6KX4(MUL4) \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	Q6WALK(MUL4); \
	KFLOAT((R10), 0, Y8); \
	KFLOAT((R10)(R9*1), 32, Y9); \
	KFLOAT((R10)(R9*2), 64, Y10); \
	KFLOAT((R10)(R13*1), 96, Y11)

DATA q08I<>+0(SB)/8, $0x0808080808080808
DATA q08I<>+8(SB)/8, $0x0808080808080808
DATA q08I<>+16(SB)/8, $0x0808080808080808
DATA q08I<>+24(SB)/8, $0x0808080808080808
GLOBL q08I<>(SB), RODATA|NOPTR, $32

// qhbyteI: VPSHUFB indices copying byte i/8 of a broadcast uint32 to byte i;
// qhbitI: the bit of byte i it keeps, 1 << (i mod 8).
DATA qhbyteI<>+0(SB)/8, $0x0000000000000000
DATA qhbyteI<>+8(SB)/8, $0x0101010101010101
DATA qhbyteI<>+16(SB)/8, $0x0202020202020202
DATA qhbyteI<>+24(SB)/8, $0x0303030303030303
GLOBL qhbyteI<>(SB), RODATA|NOPTR, $32

DATA qhbitI<>+0(SB)/8, $0x8040201008040201
DATA qhbitI<>+8(SB)/8, $0x8040201008040201
DATA qhbitI<>+16(SB)/8, $0x8040201008040201
DATA qhbitI<>+24(SB)/8, $0x8040201008040201
GLOBL qhbitI<>(SB), RODATA|NOPTR, $32


// W80, W40, W50: a Q8_0, Q4_0 or Q5_0 block at SI: its 32 quants as
// signed bytes (q, q−8, q−16; weight t < 16 the low nibble of byte t,
// 16+t its high nibble) into Y1. Clobber Y2.
#define W80 \
	VMOVDQU 2(SI), Y1

#define W40 \
	VMOVDQU     2(SI), X1; \
	VPSRLW      $4, X1, X2; \
	VINSERTI128 $1, X2, Y1, Y1; \
	VPAND       ·q0fI(SB), Y1, Y1; \
	VPSUBB      q08I<>(SB), Y1, Y1

#define W50 \
	VMOVDQU      6(SI), X1; \
	VPSRLW       $4, X1, X2; \
	VINSERTI128  $1, X2, Y1, Y1; \
	VPAND        ·q0fI(SB), Y1, Y1; \
	VPBROADCASTD 2(SI), Y2; \
	VPSHUFB      qhbyteI<>(SB), Y2, Y2; \
	VPAND        qhbitI<>(SB), Y2, Y2; \
	VPCMPEQB     qhbitI<>(SB), Y2, Y2; \
	VPAND        ·q10I(SB), Y2, Y2; \
	VPOR         Y2, Y1, Y1; \
	VPSUBB       ·q10I(SB), Y1, Y1

// Q8I32(T, U, Z): the eight int32 lanes of |w| (U) times the inputs with
// w's signs (T) into Z: VPMADDUBSW, then VPMADDWD by 1 (Y15); Q8I32V: the
// same lanes by one VPDPBUSD (AVX512-VNNI, VL) into Z, zeroed first.
#define Q8I32(T, U, Z) \
	VPMADDUBSW T, U, T; \
	VPMADDWD   Y15, T, Z

#define Q8I32V(T, U, Z) \
	VPXOR    Z, Z, Z; \
	VPDPBUSD T, U, Z

// Q8X1(I32, W): a block at SI (its quants by W) times the input block at
// AX (scale at R10): the lanes by I32, summed to the block's I in X3's
// lane 0, then acc (X0) = fma(float32(dw·dx), float32(I), acc).
#define Q8X1(I32, W) \
	W; \
	VMOVDQU      (AX), Y2; \
	VPSIGNB      Y1, Y2, Y2; \
	VPABSB       Y1, Y1; \
	I32(Y2, Y1, Y3); \
	VEXTRACTI128 $1, Y3, X2; \
	VPADDD       X2, X3, X3; \
	VPSHUFD      $0x4e, X3, X2; \
	VPADDD       X2, X3, X3; \
	VPSHUFD      $0xb1, X3, X2; \
	VPADDD       X2, X3, X3; \
	VCVTDQ2PS    X3, X3; \
	VPBROADCASTW (SI), X7; \
	VCVTPH2PS    X7, X7; \
	VMULSS       (R10), X7, X7; \
	VFMADD231SS  X3, X7, X0

// Q8X1Q(I32, W, bb): four blocks (bb bytes each) at SI times the input's
// four at AX as Q8X1 takes one, their lanes (Y3-Y6) summed together
// (VPHADDD twice, then the halves) to the four I, converted at once and
// times the four float32(dw·dx) at once (dw gathered by VPINSRW into X9,
// dx the four at R10); then the four fused steps into X0 in block order.
// SI, AX, R10 and CX move on by four blocks.
#define Q8X1ONE(I32, W, k, T, bb) \
	W; \
	VPINSRW $k, (SI), X9, X9; \
	VMOVDQU (32*k)(AX), Y2; \
	VPSIGNB Y1, Y2, Y2; \
	VPABSB  Y1, Y1; \
	I32(Y2, Y1, T); \
	ADDQ    $bb, SI

#define Q8X1Q(I32, W, bb) \
	Q8X1ONE(I32, W, 0, Y3, bb); \
	Q8X1ONE(I32, W, 1, Y4, bb); \
	Q8X1ONE(I32, W, 2, Y5, bb); \
	Q8X1ONE(I32, W, 3, Y6, bb); \
	VPHADDD      Y4, Y3, Y3; \
	VPHADDD      Y6, Y5, Y5; \
	VPHADDD      Y5, Y3, Y3; \
	VEXTRACTI128 $1, Y3, X4; \
	VPADDD       X4, X3, X3; \
	VCVTDQ2PS    X3, X3; \
	VCVTPH2PS    X9, X9; \
	VMULPS       (R10), X9, X9; \
	VFMADD231SS  X3, X9, X0; \
	VPERMILPS    $1, X3, X4; \
	VPERMILPS    $1, X9, X5; \
	VFMADD231SS  X4, X5, X0; \
	VPERMILPS    $2, X3, X4; \
	VPERMILPS    $2, X9, X5; \
	VFMADD231SS  X4, X5, X0; \
	VPERMILPS    $3, X3, X4; \
	VPERMILPS    $3, X9, X5; \
	VFMADD231SS  X4, X5, X0; \
	ADDQ         $128, AX; \
	ADDQ         $16, R10; \
	SUBQ         $4, CX

// Q8IN(I32, xs, T, D): input r of a block (w in Y1, |w| in Y3): quants at
// (AX)(xs), the lanes into D.
#define Q8IN(I32, xs, T, D) \
	VMOVDQU (AX)(xs), T; \
	VPSIGNB Y1, T, T; \
	I32(T, Y3, D)

// Q8X4(I32, W): a block at SI (its quants by W) times four inputs: their
// lanes summed to the block's four I (VPHADDD twice, then the halves),
// converted, times the four float32(dw·dx), into X8 (lane r: input r's
// acc) by one fused step.
#define Q8X4(I32, W) \
	W; \
	VPABSB       Y1, Y3; \
	Q8IN(I32, R9*1, Y2, Y4); \
	Q8IN(I32, DX*1, Y5, Y6); \
	Q8IN(I32, DX*2, Y12, Y13); \
	Q8IN(I32, R8*1, Y14, Y0); \
	VPHADDD      Y6, Y4, Y4; \
	VPHADDD      Y0, Y13, Y13; \
	VPHADDD      Y13, Y4, Y4; \
	VEXTRACTI128 $1, Y4, X6; \
	VPADDD       X6, X4, X4; \
	VCVTDQ2PS    X4, X4; \
	VPBROADCASTW (SI), X7; \
	VCVTPH2PS    X7, X7; \
	SCALES4(R10, R11, R13, X6); \
	VMULPS       X6, X7, X7; \
	VFMADD231PS  X4, X7, X8

// Q8PRO4: the x4 kernels' strides (quants DX, R8 = 3·DX; scales R11, R13
// = 3·R11; out R14 bytes) and R9 = 0.
#define Q8PRO4 \
	MOVQ    raw+0(FP), SI; \
	MOVQ    rows+8(FP), BX; \
	MOVQ    nblocks+16(FP), DX; \
	SHLQ    $5, DX; \
	LEAQ    (DX)(DX*2), R8; \
	MOVQ    nblocks+16(FP), R11; \
	SHLQ    $2, R11; \
	LEAQ    (R11)(R11*2), R13; \
	MOVQ    out+48(FP), R12; \
	MOVQ    outStride+56(FP), R14; \
	SHLQ    $2, R14; \
	VMOVDQU one16<>(SB), Y15; \
	XORQ    R9, R9

// Q8ROW(Z): zero the accumulators (Z), the inputs from their first block.
#define Q8ROW(Z) \
	Z; \
	MOVQ   xq+24(FP), AX; \
	MOVQ   xd+32(FP), R10; \
	MOVQ   nblocks+16(FP), CX

#define ZERO1 VXORPS Y0, Y0, Y0

#define ZERO4 VXORPS Y8, Y8, Y8

// Q8NEXT(bb): the next block (bb bytes of weights).
#define Q8NEXT(bb) \
	ADDQ $bb, SI; \
	ADDQ $32, AX; \
	ADDQ $4, R10; \
	DECQ CX

// Q8OUT4: the four inputs' results (X8) to out[r·outStride] (R12, R14
// bytes); Q8OUT1: the one input's (X0).
#define Q8OUT4 \
	VMOVSS     X8, (R12); \
	VEXTRACTPS $1, X8, (R12)(R14*1); \
	VEXTRACTPS $2, X8, (R12)(R14*2); \
	LEAQ       (R12)(R14*2), CX; \
	VEXTRACTPS $3, X8, (CX)(R14*1)

#define Q8OUT1 \
	VMOVSS X0, (R12)

// func dotQ8Ix1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix1AVX2(SB), NOSPLIT, $0-64
	MOVQ    raw+0(FP), SI
	MOVQ    rows+8(FP), BX
	MOVQ    out+48(FP), R12
	VMOVDQU one16<>(SB), Y15
dotQ8Ix1AVX2row:
	Q8ROW(ZERO1)
	CMPQ CX, $4
	JLT  dotQ8Ix1AVX2block
dotQ8Ix1AVX2quad:
	PREFETCHT0 544(SI)
	PREFETCHT0 608(SI)
	Q8X1Q(Q8I32, W80, 34)
	CMPQ CX, $4
	JGE  dotQ8Ix1AVX2quad
	TESTQ CX, CX
	JZ   dotQ8Ix1AVX2out
dotQ8Ix1AVX2block:
	PREFETCHT0 544(SI)
	Q8X1(Q8I32, W80)
	Q8NEXT(34)
	JNZ dotQ8Ix1AVX2block
dotQ8Ix1AVX2out:
	Q8OUT1
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ8Ix1AVX2row
	VZEROUPPER
	RET

// func dotQ8Ix4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix4AVX2(SB), NOSPLIT, $0-64
	Q8PRO4
dotQ8Ix4AVX2row:
	Q8ROW(ZERO4)
dotQ8Ix4AVX2block:
	PREFETCHT0 544(SI)
	Q8X4(Q8I32, W80)
	Q8NEXT(34)
	JNZ dotQ8Ix4AVX2block
	Q8OUT4
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ8Ix4AVX2row
	VZEROUPPER
	RET

// func dotQ40Ix1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ40Ix1AVX2(SB), NOSPLIT, $0-64
	MOVQ    raw+0(FP), SI
	MOVQ    rows+8(FP), BX
	MOVQ    out+48(FP), R12
	VMOVDQU one16<>(SB), Y15
dotQ40Ix1AVX2row:
	Q8ROW(ZERO1)
	CMPQ CX, $4
	JLT  dotQ40Ix1AVX2block
dotQ40Ix1AVX2quad:
	PREFETCHT0 288(SI)
	PREFETCHT0 352(SI)
	Q8X1Q(Q8I32, W40, 18)
	CMPQ CX, $4
	JGE  dotQ40Ix1AVX2quad
	TESTQ CX, CX
	JZ   dotQ40Ix1AVX2out
dotQ40Ix1AVX2block:
	PREFETCHT0 288(SI)
	Q8X1(Q8I32, W40)
	Q8NEXT(18)
	JNZ dotQ40Ix1AVX2block
dotQ40Ix1AVX2out:
	Q8OUT1
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ40Ix1AVX2row
	VZEROUPPER
	RET

// func dotQ40Ix4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ40Ix4AVX2(SB), NOSPLIT, $0-64
	Q8PRO4
dotQ40Ix4AVX2row:
	Q8ROW(ZERO4)
dotQ40Ix4AVX2block:
	PREFETCHT0 288(SI)
	Q8X4(Q8I32, W40)
	Q8NEXT(18)
	JNZ dotQ40Ix4AVX2block
	Q8OUT4
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ40Ix4AVX2row
	VZEROUPPER
	RET

// func dotQ50Ix1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ50Ix1AVX2(SB), NOSPLIT, $0-64
	MOVQ    raw+0(FP), SI
	MOVQ    rows+8(FP), BX
	MOVQ    out+48(FP), R12
	VMOVDQU one16<>(SB), Y15
dotQ50Ix1AVX2row:
	Q8ROW(ZERO1)
	CMPQ CX, $4
	JLT  dotQ50Ix1AVX2block
dotQ50Ix1AVX2quad:
	PREFETCHT0 352(SI)
	PREFETCHT0 416(SI)
	Q8X1Q(Q8I32, W50, 22)
	CMPQ CX, $4
	JGE  dotQ50Ix1AVX2quad
	TESTQ CX, CX
	JZ   dotQ50Ix1AVX2out
dotQ50Ix1AVX2block:
	PREFETCHT0 352(SI)
	Q8X1(Q8I32, W50)
	Q8NEXT(22)
	JNZ dotQ50Ix1AVX2block
dotQ50Ix1AVX2out:
	Q8OUT1
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ50Ix1AVX2row
	VZEROUPPER
	RET

// func dotQ50Ix4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ50Ix4AVX2(SB), NOSPLIT, $0-64
	Q8PRO4
dotQ50Ix4AVX2row:
	Q8ROW(ZERO4)
dotQ50Ix4AVX2block:
	PREFETCHT0 352(SI)
	Q8X4(Q8I32, W50)
	Q8NEXT(22)
	JNZ dotQ50Ix4AVX2block
	Q8OUT4
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ50Ix4AVX2row
	VZEROUPPER
	RET

// func dotQ8Ix1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix1VNNI(SB), NOSPLIT, $0-64
	MOVQ    raw+0(FP), SI
	MOVQ    rows+8(FP), BX
	MOVQ    out+48(FP), R12
	VMOVDQU one16<>(SB), Y15
dotQ8Ix1VNNIrow:
	Q8ROW(ZERO1)
	CMPQ CX, $4
	JLT  dotQ8Ix1VNNIblock
dotQ8Ix1VNNIquad:
	// no software prefetch: 16 blocks ahead it slowed TinyLlama Q8_0
	// decode (one thread 17.0, 17.7 -> 18.7, 19.4 tok/cpu-s without)
	Q8X1Q(Q8I32V, W80, 34)
	CMPQ CX, $4
	JGE  dotQ8Ix1VNNIquad
	TESTQ CX, CX
	JZ   dotQ8Ix1VNNIout
dotQ8Ix1VNNIblock:
	Q8X1(Q8I32V, W80)
	Q8NEXT(34)
	JNZ dotQ8Ix1VNNIblock
dotQ8Ix1VNNIout:
	Q8OUT1
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ8Ix1VNNIrow
	VZEROUPPER
	RET

// func dotQ8Ix4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix4VNNI(SB), NOSPLIT, $0-64
	Q8PRO4
dotQ8Ix4VNNIrow:
	Q8ROW(ZERO4)
dotQ8Ix4VNNIblock:
	PREFETCHT0 544(SI)
	Q8X4(Q8I32V, W80)
	Q8NEXT(34)
	JNZ dotQ8Ix4VNNIblock
	Q8OUT4
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ8Ix4VNNIrow
	VZEROUPPER
	RET

// func dotQ40Ix1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ40Ix1VNNI(SB), NOSPLIT, $0-64
	MOVQ    raw+0(FP), SI
	MOVQ    rows+8(FP), BX
	MOVQ    out+48(FP), R12
	VMOVDQU one16<>(SB), Y15
dotQ40Ix1VNNIrow:
	Q8ROW(ZERO1)
	CMPQ CX, $4
	JLT  dotQ40Ix1VNNIblock
dotQ40Ix1VNNIquad:
	PREFETCHT0 288(SI)
	PREFETCHT0 352(SI)
	Q8X1Q(Q8I32V, W40, 18)
	CMPQ CX, $4
	JGE  dotQ40Ix1VNNIquad
	TESTQ CX, CX
	JZ   dotQ40Ix1VNNIout
dotQ40Ix1VNNIblock:
	PREFETCHT0 288(SI)
	Q8X1(Q8I32V, W40)
	Q8NEXT(18)
	JNZ dotQ40Ix1VNNIblock
dotQ40Ix1VNNIout:
	Q8OUT1
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ40Ix1VNNIrow
	VZEROUPPER
	RET

// func dotQ40Ix4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ40Ix4VNNI(SB), NOSPLIT, $0-64
	Q8PRO4
dotQ40Ix4VNNIrow:
	Q8ROW(ZERO4)
dotQ40Ix4VNNIblock:
	PREFETCHT0 288(SI)
	Q8X4(Q8I32V, W40)
	Q8NEXT(18)
	JNZ dotQ40Ix4VNNIblock
	Q8OUT4
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ40Ix4VNNIrow
	VZEROUPPER
	RET

// func dotQ50Ix1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ50Ix1VNNI(SB), NOSPLIT, $0-64
	MOVQ    raw+0(FP), SI
	MOVQ    rows+8(FP), BX
	MOVQ    out+48(FP), R12
	VMOVDQU one16<>(SB), Y15
dotQ50Ix1VNNIrow:
	Q8ROW(ZERO1)
	CMPQ CX, $4
	JLT  dotQ50Ix1VNNIblock
dotQ50Ix1VNNIquad:
	PREFETCHT0 352(SI)
	PREFETCHT0 416(SI)
	Q8X1Q(Q8I32V, W50, 22)
	CMPQ CX, $4
	JGE  dotQ50Ix1VNNIquad
	TESTQ CX, CX
	JZ   dotQ50Ix1VNNIout
dotQ50Ix1VNNIblock:
	PREFETCHT0 352(SI)
	Q8X1(Q8I32V, W50)
	Q8NEXT(22)
	JNZ dotQ50Ix1VNNIblock
dotQ50Ix1VNNIout:
	Q8OUT1
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ50Ix1VNNIrow
	VZEROUPPER
	RET

// func dotQ50Ix4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ50Ix4VNNI(SB), NOSPLIT, $0-64
	Q8PRO4
dotQ50Ix4VNNIrow:
	Q8ROW(ZERO4)
dotQ50Ix4VNNIblock:
	PREFETCHT0 352(SI)
	Q8X4(Q8I32V, W50)
	Q8NEXT(22)
	JNZ dotQ50Ix4VNNIblock
	Q8OUT4
	ADDQ $4, R12
	DECQ BX
	JNZ dotQ50Ix4VNNIrow
	VZEROUPPER
	RET

// ZACC8: Y16-Y23 zeroed.
#define ZACC8 \
	VPXORD Y16, Y16, Y16; \
	VPXORD Y17, Y17, Y17; \
	VPXORD Y18, Y18, Y18; \
	VPXORD Y19, Y19, Y19; \
	VPXORD Y20, Y20, Y20; \
	VPXORD Y21, Y21, Y21; \
	VPXORD Y22, Y22, Y22; \
	VPXORD Y23, Y23, Y23

// func dotQ4KIx1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ4KIx1AVX2(SB), 0, $336-64
	KPROLOGUE
dotQ4KIx1AVX2row:
	KROW1
dotQ4KIx1AVX2block:
	PREFETCHT0 1152(CX)
	PREFETCHT0 1216(CX)
	PREFETCHT0 1280(CX)
	Q4KX1(KMUL)
	KNEXT1(144)
	JNZ dotQ4KIx1AVX2block
	KFINISH
	KOUTK1
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ4KIx1AVX2row
	VZEROUPPER
	RET

// func dotQ4KIx4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ4KIx4AVX2(SB), 0, $336-64
	KPROLOGUE
dotQ4KIx4AVX2row:
	KROW
	VMOVUPS X0, 0(SP)
dotQ4KIx4AVX2block:
	PREFETCHT0 1152(CX)
	PREFETCHT0 1216(CX)
	PREFETCHT0 1280(CX)
	Q4KX4(KMUL4)
	KNEXT(144)
	JNZ dotQ4KIx4AVX2block
	KOUTK4
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ4KIx4AVX2row
	VZEROUPPER
	RET

// func dotQ5KIx1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ5KIx1AVX2(SB), 0, $336-64
	KPROLOGUE
dotQ5KIx1AVX2row:
	KROW1
dotQ5KIx1AVX2block:
	PREFETCHT0 1408(CX)
	PREFETCHT0 1472(CX)
	PREFETCHT0 1536(CX)
	Q5KX1(KMUL)
	KNEXT1(176)
	JNZ dotQ5KIx1AVX2block
	KFINISH
	KOUTK1
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ5KIx1AVX2row
	VZEROUPPER
	RET

// func dotQ5KIx4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ5KIx4AVX2(SB), 0, $336-64
	KPROLOGUE
dotQ5KIx4AVX2row:
	KROW
	VMOVUPS X0, 0(SP)
dotQ5KIx4AVX2block:
	PREFETCHT0 1408(CX)
	PREFETCHT0 1472(CX)
	PREFETCHT0 1536(CX)
	Q5KX4(KMUL4)
	KNEXT(176)
	JNZ dotQ5KIx4AVX2block
	KOUTK4
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ5KIx4AVX2row
	VZEROUPPER
	RET

// func dotQ6KIx1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ6KIx1AVX2(SB), 0, $336-64
	KPROLOGUE
dotQ6KIx1AVX2row:
	KROW1
dotQ6KIx1AVX2block:
	PREFETCHT0 1680(CX)
	PREFETCHT0 1744(CX)
	PREFETCHT0 1808(CX)
	PREFETCHT0 1872(CX)
	Q6KX1(Q6MUL)
	KNEXT1(210)
	JNZ dotQ6KIx1AVX2block
	KOUT1
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ6KIx1AVX2row
	VZEROUPPER
	RET

// func dotQ6KIx4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ6KIx4AVX2(SB), 0, $336-64
	KPROLOGUE
dotQ6KIx4AVX2row:
	KROW
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y0, 128(SP)
	VMOVUPS Y0, 32(SP)
	VMOVUPS Y0, 160(SP)
	VMOVUPS Y0, 64(SP)
	VMOVUPS Y0, 192(SP)
	VMOVUPS Y0, 96(SP)
	VMOVUPS Y0, 224(SP)
dotQ6KIx4AVX2block:
	PREFETCHT0 1680(CX)
	PREFETCHT0 1744(CX)
	PREFETCHT0 1808(CX)
	PREFETCHT0 1872(CX)
	Q6KX4(Q6MUL4)
	KNEXT(210)
	JNZ dotQ6KIx4AVX2block
	KOUT4
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ6KIx4AVX2row
	VZEROUPPER
	RET

// func dotQ4KIx1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ4KIx1VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ4KIx1VNNIrow:
	KROW1
dotQ4KIx1VNNIblock:
	PREFETCHT0 1152(CX)
	PREFETCHT0 1216(CX)
	PREFETCHT0 1280(CX)
	Q4KX1(KMULV1)
	KNEXT1(144)
	JNZ dotQ4KIx1VNNIblock
	KFINISH
	KOUTK1
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ4KIx1VNNIrow
	VZEROUPPER
	RET

// func dotQ4KIx4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ4KIx4VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ4KIx4VNNIrow:
	KROW
	VMOVUPS X0, 0(SP)
dotQ4KIx4VNNIblock:
	PREFETCHT0 1152(CX)
	PREFETCHT0 1216(CX)
	PREFETCHT0 1280(CX)
	Q4KX4(KMUL4V)
	KNEXT(144)
	JNZ dotQ4KIx4VNNIblock
	KOUTK4
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ4KIx4VNNIrow
	VZEROUPPER
	RET

// func dotQ5KIx1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ5KIx1VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ5KIx1VNNIrow:
	KROW1
dotQ5KIx1VNNIblock:
	PREFETCHT0 1408(CX)
	PREFETCHT0 1472(CX)
	PREFETCHT0 1536(CX)
	Q5KX1(KMULV1)
	KNEXT1(176)
	JNZ dotQ5KIx1VNNIblock
	KFINISH
	KOUTK1
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ5KIx1VNNIrow
	VZEROUPPER
	RET

// func dotQ5KIx4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ5KIx4VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ5KIx4VNNIrow:
	KROW
	VMOVUPS X0, 0(SP)
dotQ5KIx4VNNIblock:
	PREFETCHT0 1408(CX)
	PREFETCHT0 1472(CX)
	PREFETCHT0 1536(CX)
	Q5KX4(KMUL4V)
	KNEXT(176)
	JNZ dotQ5KIx4VNNIblock
	KOUTK4
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ5KIx4VNNIrow
	VZEROUPPER
	RET

// func dotQ6KIx1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ6KIx1VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ6KIx1VNNIrow:
	KROW1
dotQ6KIx1VNNIblock:
	PREFETCHT0 1680(CX)
	PREFETCHT0 1744(CX)
	PREFETCHT0 1808(CX)
	PREFETCHT0 1872(CX)
	Q6KX1(Q6MULV)
	KNEXT1(210)
	JNZ dotQ6KIx1VNNIblock
	KOUT1
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ6KIx1VNNIrow
	VZEROUPPER
	RET

// func dotQ6KIx4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ6KIx4VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ6KIx4VNNIrow:
	KROW
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y0, 128(SP)
	VMOVUPS Y0, 32(SP)
	VMOVUPS Y0, 160(SP)
	VMOVUPS Y0, 64(SP)
	VMOVUPS Y0, 192(SP)
	VMOVUPS Y0, 96(SP)
	VMOVUPS Y0, 224(SP)
dotQ6KIx4VNNIblock:
	PREFETCHT0 1680(CX)
	PREFETCHT0 1744(CX)
	PREFETCHT0 1808(CX)
	PREFETCHT0 1872(CX)
	Q6KX4(Q6MUL4V)
	KNEXT(210)
	JNZ dotQ6KIx4VNNIblock
	KOUT4
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ6KIx4VNNIrow
	VZEROUPPER
	RET

// The eight-input K-quant kernels (VNNI only: they need AVX-512's
// registers Y16-Y31): each super-block unpacked once for eight inputs,
// their int32 sums I in Y4-Y11 (VPMADDUBSW into Y3 or Y14), the inputs
// 4-7 at R11 = AX + 4·DX while multiplying; for the whole row, Q6_K's
// acc in Y16-Y23 and mn in Y24-Y31, Q4_K's and Q5_K's acc (one float per
// input) in the lanes of Y16. Per input the same operations in the same
// order as the four-input kernels: the same bits.

// KSCVP(off): the scales of sub-blocks 2c, 2c+1 (kshufp at off) as int16
// in the even and odd words of Y2 (KMULVP's pairs).
#define KSCVP(off) \
	VPSHUFB   kshufp<>+off(SB), X13, X2; \
	VPMOVZXBW X2, Y2

// KMULVP(x0, x1, T, U, I): KMULV by VPDPBUSD. Lane l of KMULV's sum is
// s(2c)·(bytes 4l..4l+3 of Y0 times x0) + s(2c+1)·(the same of Y1 and
// x1). VPDPBUSD forms each 4-byte sum in one step (T from Y0, U from Y1;
// |sum| <= 4·31·128, an int16); U moves to the odd words of T and one
// VPDPWSSD with KSCVP's pairs adds both scaled sums to lane l: the same
// int32s, three multiplying instructions per 64 weights where KMULV has
// four (they share two pipes on Zen 4; the shift and blend do not).
#define KMULVP(x0, x1, T, U, I) \
	PAIRSUMS(x0, x1, T, U); \
	VPDPWSSD Y2, T, I

// PAIRSUMS(x0, x1, T, U): each lane's 4-byte sums of Y0 times x0 in the
// even words of T and of Y1 times x1 in the odd ones (U scratch; KMULVP,
// Q6MULVP).
#define PAIRSUMS(x0, x1, T, U) \
	VPXOR    T, T, T; \
	VPDPBUSD x0, Y0, T; \
	VPXOR    U, U, U; \
	VPDPBUSD x1, Y1, U; \
	VPSLLD   $16, U, U; \
	VPBLENDW $0xaa, U, T, T

// KMULV8(o0, o1, T, U): KMULVP for the eight inputs, quants at o0 and
// o1 of each, T and U its scratch.
#define KMULV8(o0, o1, T, U) \
	KMULVP(o0(AX), o1(AX), T, U, Y4); \
	KMULVP(o0(AX)(DX*1), o1(AX)(DX*1), T, U, Y5); \
	KMULVP(o0(AX)(DX*2), o1(AX)(DX*2), T, U, Y6); \
	KMULVP(o0(AX)(R8*1), o1(AX)(R8*1), T, U, Y7); \
	KMULVP(o0(R11), o1(R11), T, U, Y8); \
	KMULVP(o0(R11)(DX*1), o1(R11)(DX*1), T, U, Y9); \
	KMULVP(o0(R11)(DX*2), o1(R11)(DX*2), T, U, Y10); \
	KMULVP(o0(R11)(R8*1), o1(R11)(R8*1), T, U, Y11)

// KFLOAT8(xd, acc, I): KFLOAT with acc in a register.
#define KFLOAT8(xd, acc, I) \
	VBROADCASTSS xd, Y12; \
	VMULPS Y15, Y12, Y13; \
	VCVTDQ2PS I, I; \
	VFMADD231PS I, Y13, acc

// HALVES(A, B, T): A's halves plus B's halves: lanes 0-3 of A + those of
// lanes 4-7, lanes 4-7 the same of B (VPERM2I128; T scratch).
#define HALVES(A, B, T) \
	VPERM2I128 $0x20, B, A, T; \
	VPERM2I128 $0x31, B, A, A; \
	VPADDD T, A, A

// KSTART8: KFINK4 for eight inputs, split as KSTART and KFINISH: inputs
// 0-3 and 4-7 each by the tree of VPHADDD (scales of inputs 4-7 from
// R14, sums of 16 from R11), the halves of both joined by VPERM2I128 and
// added (input r in lane r), float32(I) into Y17 and float32(M) into Y18,
// the eight dx gathered in Y12, float32(d·dx) into Y19 and float32(dmin·
// dx) into Y20; KFINISH8 applies them to acc (Y16, one float per input)
// after the next super-block's first sub-block pair, or at the end of the
// row.
#define KSTART8 \
	HADD4(Y4, Y5, Y6, Y7); \
	HADD4(Y8, Y9, Y10, Y11); \
	HALVES(Y4, Y8, Y5); \
	VMOVDQU 256(SP), Y3; \
	LEAQ (BX)(SI*4), R11; \
	VPMADDWD (BX), Y3, Y0; \
	VPMADDWD (BX)(SI*1), Y3, Y1; \
	VPMADDWD (BX)(SI*2), Y3, Y2; \
	VPMADDWD (BX)(DI*1), Y3, Y5; \
	HADD4(Y0, Y1, Y2, Y5); \
	VPMADDWD (R11), Y3, Y6; \
	VPMADDWD (R11)(SI*1), Y3, Y7; \
	VPMADDWD (R11)(SI*2), Y3, Y9; \
	VPMADDWD (R11)(DI*1), Y3, Y10; \
	HADD4(Y6, Y7, Y9, Y10); \
	HALVES(Y0, Y6, Y5); \
	VCVTDQ2PS Y4, Y17; \
	VCVTDQ2PS Y0, Y18; \
	LEAQ (R10)(R9*4), R14; \
	SCALES4(R10, R9, R13, X12); \
	SCALES4(R14, R9, R13, X13); \
	VINSERTF128 $1, X13, Y12, Y12; \
	VMULPS Y15, Y12, Y19; \
	VMULPS 288(SP), Y12, Y20

// KFINISH8: KFINISH for eight inputs: acc (Y16) = fma(float32(d·dx)
// (Y19), float32(I) (Y17), acc), then acc = −float32(dmin·dx) (Y20)·
// float32(M) (Y18) + acc fused, lane by lane.
#define KFINISH8 \
	VFMADD231PS Y17, Y19, Y16; \
	VFNMADD231PS Y18, Y20, Y16

// KZEROK8: acc and what KFINISH8 reads (Y16-Y20) zeroed.
#define KZEROK8 \
	VPXORD Y16, Y16, Y16; \
	VPXORD Y17, Y17, Y17; \
	VPXORD Y18, Y18, Y18; \
	VPXORD Y19, Y19, Y19; \
	VPXORD Y20, Y20, Y20

// ZEROI8: the eight inputs' int32 sums (Y4-Y11) zeroed.
#define ZEROI8 \
	VPXOR Y4, Y4, Y4; \
	VPXOR Y5, Y5, Y5; \
	VPXOR Y6, Y6, Y6; \
	VPXOR Y7, Y7, Y7; \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11

// Q4KX8: a Q4_K super-block at CX times eight inputs.
#define Q4KX8 \
	ZEROI8; \
	KSCALESI; \
	LEAQ (AX)(DX*4), R11; \
	KNIB(16); \
	KSCVP(0); \
	KMULV8(0, 32, Y3, Y14); \
	KFINISH8; \
	KNIB(48); \
	KSCVP(16); \
	KMULV8(64, 96, Y3, Y14); \
	KNIB(80); \
	KSCVP(32); \
	KMULV8(128, 160, Y3, Y14); \
	KNIB(112); \
	KSCVP(48); \
	KMULV8(192, 224, Y3, Y14); \
	KSTART8

// KZERO8: acc and mn of the eight inputs zeroed.
#define KZERO8 \
	ZACC8; \
	VPXORD Y24, Y24, Y24; \
	VPXORD Y25, Y25, Y25; \
	VPXORD Y26, Y26, Y26; \
	VPXORD Y27, Y27, Y27; \
	VPXORD Y28, Y28, Y28; \
	VPXORD Y29, Y29, Y29; \
	VPXORD Y30, Y30, Y30; \
	VPXORD Y31, Y31, Y31

// KOUTR(acc, mn): hsum8 of acc minus hsum8 of mn to (R14), then R14 to
// the next input's output (stride R11 bytes).
#define KOUTR(acc, mn) \
	VMOVAPS acc, Y0; \
	HSUM(Y0, X0, X1); \
	VMOVAPS mn, Y2; \
	HSUM(Y2, X2, X1); \
	VSUBSS X2, X0, X0; \
	VMOVSS X0, (R14); \
	ADDQ R11, R14

// KOUTK8: the eight results of Q4_K or Q5_K (Y16) to out (R12, stride
// outStride), through the frame.
#define KOUTK8 \
	VMOVUPS Y16, 0(SP); \
	KOUTK4; \
	KOUTK(16); \
	KOUTK(20); \
	KOUTK(24); \
	KOUTK(28)

// KOUT8: the eight inputs' results to out (R12, stride outStride; Q6_K).
#define KOUT8 \
	MOVQ outStride+56(FP), R11; \
	SHLQ $2, R11; \
	MOVQ R12, R14; \
	KOUTR(Y16, Y24); \
	KOUTR(Y17, Y25); \
	KOUTR(Y18, Y26); \
	KOUTR(Y19, Y27); \
	KOUTR(Y20, Y28); \
	KOUTR(Y21, Y29); \
	KOUTR(Y22, Y30); \
	KOUTR(Y23, Y31)

// func dotQ4KIx8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ4KIx8VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ4KIx8VNNIrow:
	KROW
	KZEROK8
dotQ4KIx8VNNIblock:
	PREFETCHT0 1152(CX)
	PREFETCHT0 1216(CX)
	PREFETCHT0 1280(CX)
	Q4KX8
	KNEXT(144)
	JNZ dotQ4KIx8VNNIblock
	KFINISH8
	KOUTK8
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ4KIx8VNNIrow
	VZEROUPPER
	RET

// The eight-input Q6_K kernel takes the quants unsigned (q, 0-63: no
// VPSUBB and VPABSB per group, no VPSIGNB per input) and two groups of 32
// at a time (2p, 2p+1: input quants 64p… and 64p+32…). Per input,
// VPDPBUSD forms lane l's Σ q·x over bytes 4l…4l+3 of each group (≤
// 4·63·127: an int16), the second group's moves to the odd words of the
// first's (shift, blend), the input's offset words (acts.q6, in bs's
// place: −32·Σ x of the same four bytes) make both Σ (q−32)·x, and one
// VPDPWSSD by the word pairs of the four sub-blocks' scales adds
// s·Σ (q−32)·x of each group to lane l: dotKInt's int32 lanes, with
// three multiplying instructions per 64 weights and input where
// VPSIGNB+VPMADDUBSW+VPDPWSSD took six.

// q6shufp: at 16p, VPSHUFB indices of scale bytes 4p, 4p+2 in turn
// (eight bytes), then 4p+1, 4p+3: groups 2p's and 2p+1's sub-block
// scales as Q6MULVP's word pairs (after VPMOVSXBW).
DATA q6shufp<>+0(SB)/8, $0x0200020002000200
DATA q6shufp<>+8(SB)/8, $0x0301030103010301
DATA q6shufp<>+16(SB)/8, $0x0604060406040604
DATA q6shufp<>+24(SB)/8, $0x0705070507050705
DATA q6shufp<>+32(SB)/8, $0x0a080a080a080a08
DATA q6shufp<>+40(SB)/8, $0x0b090b090b090b09
DATA q6shufp<>+48(SB)/8, $0x0e0c0e0c0e0c0e0c
DATA q6shufp<>+56(SB)/8, $0x0f0d0f0d0f0d0f0d
GLOBL q6shufp<>(SB), RODATA|NOPTR, $64

// Q6Q(OP, C, Y): a group's quants q (0-63) into Y: the nibbles in Y (the
// 32 ql bytes, shifted for the high ones) and two high bits from qh (Y3;
// OP $C moves them to bits 4-5). Clobbers Y14.
#define Q6Q(OP, C, Y) \
	VPAND ·q0fI(SB), Y, Y; \
	OP $C, Y3, Y14; \
	VPAND q30I<>(SB), Y14, Y14; \
	VPOR Y14, Y, Y

// Q6Q0(Y): Q6Q for the groups whose high bits are at bits 4-5 already.
#define Q6Q0(Y) \
	VPAND ·q0fI(SB), Y, Y; \
	VPAND q30I<>(SB), Y3, Y14; \
	VPOR Y14, Y, Y

// Q6SCP(off): the scale word pairs of two groups (q6shufp at off) into Y2.
#define Q6SCP(off) \
	VPSHUFB q6shufp<>+off(SB), X13, X2; \
	VPMOVSXBW X2, Y2

// Q6MULVP(xa, xb, c, T, U, I): groups 2p (Y0) and 2p+1 (Y1) times the
// input quants at xa and xb, offset words at c, into I (T, U scratch).
#define Q6MULVP(xa, xb, c, T, U, I) \
	PAIRSUMS(xa, xb, T, U); \
	VPADDW   c, T, T; \
	VPDPWSSD Y2, T, I

// Q6HALFP(M, q, qh, s, o, c): a half super-block of Q6_K at CX (low
// bits at q, high bits at qh, its pairs' scales at s and s+16 of
// q6shufp) times the inputs by M, the quants at o and o+32, o+64 and
// o+96 of an input, its offset words at c and c+32.
#define Q6HALFP(M, q, qh, s, o, c) \
	VMOVDQU qh(CX), Y3; \
	VMOVDQU q(CX), Y0; \
	Q6Q(VPSLLW, 4, Y0); \
	VMOVDQU (q+32)(CX), Y1; \
	Q6Q(VPSLLW, 2, Y1); \
	Q6SCP(s); \
	M(o, (o+32), c); \
	VMOVDQU q(CX), Y0; \
	VPSRLW $4, Y0, Y0; \
	Q6Q0(Y0); \
	VMOVDQU (q+32)(CX), Y1; \
	VPSRLW $4, Y1, Y1; \
	Q6Q(VPSRLW, 2, Y1); \
	Q6SCP((s+16)); \
	M((o+64), (o+96), (c+32))

// Q6WALKP(M): the four pairs of groups of a Q6_K super-block at CX (its
// scales to X13, d to Y15), each pair times the inputs by M(oa, ob, c):
// the groups' offsets in an input's quants and the pair's in its offset
// words.
#define Q6WALKP(M) \
	VMOVDQU 192(CX), X13; \
	VPBROADCASTW 208(CX), X15; \
	VCVTPH2PS X15, Y15; \
	Q6HALFP(M, 0, 128, 0, 0, 0); \
	Q6HALFP(M, 64, 160, 32, 128, 64)

// Q6MULV8P(oa, ob, c): Q6MULVP for the eight inputs (offset words of
// inputs 0-3 at BX, stride 4·SI; 4-7 at R14).
#define Q6MULV8P(oa, ob, c) \
	Q6MULVP(oa(AX), ob(AX), c(BX), Y12, Y14, Y4); \
	Q6MULVP(oa(AX)(DX*1), ob(AX)(DX*1), c(BX)(SI*4), Y12, Y14, Y5); \
	Q6MULVP(oa(AX)(DX*2), ob(AX)(DX*2), c(BX)(SI*8), Y12, Y14, Y6); \
	Q6MULVP(oa(AX)(R8*1), ob(AX)(R8*1), c(BX)(DI*4), Y12, Y14, Y7); \
	Q6MULVP(oa(R11), ob(R11), c(R14), Y12, Y14, Y8); \
	Q6MULVP(oa(R11)(DX*1), ob(R11)(DX*1), c(R14)(SI*4), Y12, Y14, Y9); \
	Q6MULVP(oa(R11)(DX*2), ob(R11)(DX*2), c(R14)(SI*8), Y12, Y14, Y10); \
	Q6MULVP(oa(R11)(R8*1), ob(R11)(R8*1), c(R14)(DI*4), Y12, Y14, Y11)

// Q6KX8: a Q6_K super-block at CX times eight inputs (mn stay 0).
#define Q6KX8 \
	ZEROI8; \
	LEAQ (AX)(DX*4), R11; \
	LEAQ (BX)(SI*8), R14; \
	LEAQ (R14)(SI*8), R14; \
	Q6WALKP(Q6MULV8P); \
	LEAQ (R10)(R9*4), R14; \
	KFLOAT8((R10), Y16, Y4); \
	KFLOAT8((R10)(R9*1), Y17, Y5); \
	KFLOAT8((R10)(R9*2), Y18, Y6); \
	KFLOAT8((R10)(R13*1), Y19, Y7); \
	KFLOAT8((R14), Y20, Y8); \
	KFLOAT8((R14)(R9*1), Y21, Y9); \
	KFLOAT8((R14)(R9*2), Y22, Y10); \
	KFLOAT8((R14)(R13*1), Y23, Y11)

// KNEXT6: KNEXT for the Q6_K kernels that take offset words (128 bytes
// per super-block at BX).
#define KNEXT6 \
	ADDQ $210, CX; \
	ADDQ $256, AX; \
	ADDQ $4, R10; \
	ADDQ $128, BX; \
	DECQ 320(SP)

// func dotQ6KIx8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ6KIx8VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ6KIx8VNNIrow:
	KROW
	KZERO8
dotQ6KIx8VNNIblock:
	PREFETCHT0 1680(CX)
	PREFETCHT0 1744(CX)
	PREFETCHT0 1808(CX)
	PREFETCHT0 1872(CX)
	Q6KX8
	KNEXT6
	JNZ dotQ6KIx8VNNIblock
	KOUT8
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ6KIx8VNNIrow
	VZEROUPPER
	RET

// Q5KX8: a Q5_K super-block at CX times eight inputs (qh in Y3 throughout,
// so the products go through Y12 and Y14).
#define Q5KX8 \
	ZEROI8; \
	KSCALESI; \
	LEAQ (AX)(DX*4), R11; \
	VMOVDQU 16(CX), Y3; \
	KNIB(48); \
	Q5BIT(VPSLLW, 4, Y0); \
	Q5BIT(VPSLLW, 3, Y1); \
	KSCVP(0); \
	KMULV8(0, 32, Y12, Y14); \
	KFINISH8; \
	KNIB(80); \
	Q5BIT(VPSLLW, 2, Y0); \
	Q5BIT(VPSLLW, 1, Y1); \
	KSCVP(16); \
	KMULV8(64, 96, Y12, Y14); \
	KNIB(112); \
	Q5BIT(VPSLLW, 0, Y0); \
	Q5BIT(VPSRLW, 1, Y1); \
	KSCVP(32); \
	KMULV8(128, 160, Y12, Y14); \
	KNIB(144); \
	Q5BIT(VPSRLW, 2, Y0); \
	Q5BIT(VPSRLW, 3, Y1); \
	KSCVP(48); \
	KMULV8(192, 224, Y12, Y14); \
	KSTART8

// func dotQ5KIx8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ5KIx8VNNI(SB), 0, $336-64
	KPROLOGUE
dotQ5KIx8VNNIrow:
	KROW
	KZEROK8
dotQ5KIx8VNNIblock:
	PREFETCHT0 1408(CX)
	PREFETCHT0 1472(CX)
	PREFETCHT0 1536(CX)
	Q5KX8
	KNEXT(176)
	JNZ dotQ5KIx8VNNIblock
	KFINISH8
	KOUTK8
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ dotQ5KIx8VNNIrow
	VZEROUPPER
	RET
