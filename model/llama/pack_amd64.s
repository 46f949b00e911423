#include "textflag.h"

// The packed Q5_K and Q6_K kernels (pack.go's layouts; Q4_K's are in
// packq4k_amd64.s). Q5_K's: eight rows of a group times
// one input per super-block, two rows per ZMM register. Per super-block:
// the input's eight sub-blocks of 32 quants, each in both halves of Z0-Z7;
// per pair of rows (2h, 2h+1: Z24-Z27) their 16 scale bytes, row 2h's in
// the low half's lanes, 2h+1's in the high half's (VPERMQ); per pair p of
// sub-blocks and pair of rows, one 64-byte load of quants (row 2h's 32
// bytes, then 2h+1's), the low nibbles (sub-block 2p) and the high ones
// (2p+1), with their fifth bits (below), times the input by VPMADDUBSW, times the sub-block's scale (one
// VPSHUFB of the row pair's scales into every word of each half) by
// VPDPWSSD into I (Z16-Z19: eight int32 lanes per row). Then dotKInt's
// float steps for eight rows at once (PKFLOATK): each row's lanes summed
// to its one I, each row's minimums times the inputs' pairs of sums of 16
// (VPMADDWD) summed to its one M, the eight rows' I and M in the lanes
// of Y registers (row r in lane r), and acc (Y8, row r in lane r) =
// fma(float32(d·dx), float32(I), acc), acc = −float32(dmin·dx)·
// float32(M) + acc fused (VFNMADD231PS). At the end of a group, acc is
// the eight rows' outputs.

DATA pk0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA pk0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA pk0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA pk0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA pk0f<>+32(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA pk0f<>+40(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA pk0f<>+48(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA pk0f<>+56(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL pk0f<>(SB), RODATA|NOPTR, $64

DATA pk30<>+0(SB)/1, $0x30
GLOBL pk30<>(SB), RODATA|NOPTR, $1

// pksum: VPERMD indices 0, 4, 8, 12, 2, 6, 10, 14 (PKFLOATK: rows 0-3
// at element 0 of each 128-bit lane, rows 4-7 at element 2), then zeros.
DATA pksum<>+0(SB)/8, $0x0000000400000000
DATA pksum<>+8(SB)/8, $0x0000000c00000008
DATA pksum<>+16(SB)/8, $0x0000000600000002
DATA pksum<>+24(SB)/8, $0x0000000e0000000a
DATA pksum<>+32(SB)/8, $0
DATA pksum<>+40(SB)/8, $0
DATA pksum<>+48(SB)/8, $0
DATA pksum<>+56(SB)/8, $0
GLOBL pksum<>(SB), RODATA|NOPTR, $64

// pkperm: VPERMQ indices 0, 0, 0, 0, 1, 1, 1, 1 (a row pair's scales).
DATA pkperm<>+0(SB)/8, $0
DATA pkperm<>+8(SB)/8, $0
DATA pkperm<>+16(SB)/8, $0
DATA pkperm<>+24(SB)/8, $0
DATA pkperm<>+32(SB)/8, $1
DATA pkperm<>+40(SB)/8, $1
DATA pkperm<>+48(SB)/8, $1
DATA pkperm<>+56(SB)/8, $1
GLOBL pkperm<>(SB), RODATA|NOPTR, $64

// pkscale: at 64k, VPSHUFB indices of byte k then a zero, repeated: sub-block
// k's scale in every word of each 128-bit lane.
DATA pkscale<>+0(SB)/8, $0x8000800080008000
DATA pkscale<>+8(SB)/8, $0x8000800080008000
DATA pkscale<>+16(SB)/8, $0x8000800080008000
DATA pkscale<>+24(SB)/8, $0x8000800080008000
DATA pkscale<>+32(SB)/8, $0x8000800080008000
DATA pkscale<>+40(SB)/8, $0x8000800080008000
DATA pkscale<>+48(SB)/8, $0x8000800080008000
DATA pkscale<>+56(SB)/8, $0x8000800080008000
DATA pkscale<>+64(SB)/8, $0x8001800180018001
DATA pkscale<>+72(SB)/8, $0x8001800180018001
DATA pkscale<>+80(SB)/8, $0x8001800180018001
DATA pkscale<>+88(SB)/8, $0x8001800180018001
DATA pkscale<>+96(SB)/8, $0x8001800180018001
DATA pkscale<>+104(SB)/8, $0x8001800180018001
DATA pkscale<>+112(SB)/8, $0x8001800180018001
DATA pkscale<>+120(SB)/8, $0x8001800180018001
DATA pkscale<>+128(SB)/8, $0x8002800280028002
DATA pkscale<>+136(SB)/8, $0x8002800280028002
DATA pkscale<>+144(SB)/8, $0x8002800280028002
DATA pkscale<>+152(SB)/8, $0x8002800280028002
DATA pkscale<>+160(SB)/8, $0x8002800280028002
DATA pkscale<>+168(SB)/8, $0x8002800280028002
DATA pkscale<>+176(SB)/8, $0x8002800280028002
DATA pkscale<>+184(SB)/8, $0x8002800280028002
DATA pkscale<>+192(SB)/8, $0x8003800380038003
DATA pkscale<>+200(SB)/8, $0x8003800380038003
DATA pkscale<>+208(SB)/8, $0x8003800380038003
DATA pkscale<>+216(SB)/8, $0x8003800380038003
DATA pkscale<>+224(SB)/8, $0x8003800380038003
DATA pkscale<>+232(SB)/8, $0x8003800380038003
DATA pkscale<>+240(SB)/8, $0x8003800380038003
DATA pkscale<>+248(SB)/8, $0x8003800380038003
DATA pkscale<>+256(SB)/8, $0x8004800480048004
DATA pkscale<>+264(SB)/8, $0x8004800480048004
DATA pkscale<>+272(SB)/8, $0x8004800480048004
DATA pkscale<>+280(SB)/8, $0x8004800480048004
DATA pkscale<>+288(SB)/8, $0x8004800480048004
DATA pkscale<>+296(SB)/8, $0x8004800480048004
DATA pkscale<>+304(SB)/8, $0x8004800480048004
DATA pkscale<>+312(SB)/8, $0x8004800480048004
DATA pkscale<>+320(SB)/8, $0x8005800580058005
DATA pkscale<>+328(SB)/8, $0x8005800580058005
DATA pkscale<>+336(SB)/8, $0x8005800580058005
DATA pkscale<>+344(SB)/8, $0x8005800580058005
DATA pkscale<>+352(SB)/8, $0x8005800580058005
DATA pkscale<>+360(SB)/8, $0x8005800580058005
DATA pkscale<>+368(SB)/8, $0x8005800580058005
DATA pkscale<>+376(SB)/8, $0x8005800580058005
DATA pkscale<>+384(SB)/8, $0x8006800680068006
DATA pkscale<>+392(SB)/8, $0x8006800680068006
DATA pkscale<>+400(SB)/8, $0x8006800680068006
DATA pkscale<>+408(SB)/8, $0x8006800680068006
DATA pkscale<>+416(SB)/8, $0x8006800680068006
DATA pkscale<>+424(SB)/8, $0x8006800680068006
DATA pkscale<>+432(SB)/8, $0x8006800680068006
DATA pkscale<>+440(SB)/8, $0x8006800680068006
DATA pkscale<>+448(SB)/8, $0x8007800780078007
DATA pkscale<>+456(SB)/8, $0x8007800780078007
DATA pkscale<>+464(SB)/8, $0x8007800780078007
DATA pkscale<>+472(SB)/8, $0x8007800780078007
DATA pkscale<>+480(SB)/8, $0x8007800780078007
DATA pkscale<>+488(SB)/8, $0x8007800780078007
DATA pkscale<>+496(SB)/8, $0x8007800780078007
DATA pkscale<>+504(SB)/8, $0x8007800780078007
GLOBL pkscale<>(SB), RODATA|NOPTR, $512

// pkrow: at 64h, VPERMPS indices 2h eight times, then 2h+1 eight times.
DATA pkrow<>+0(SB)/8, $0x0000000000000000
DATA pkrow<>+8(SB)/8, $0x0000000000000000
DATA pkrow<>+16(SB)/8, $0x0000000000000000
DATA pkrow<>+24(SB)/8, $0x0000000000000000
DATA pkrow<>+32(SB)/8, $0x0000000100000001
DATA pkrow<>+40(SB)/8, $0x0000000100000001
DATA pkrow<>+48(SB)/8, $0x0000000100000001
DATA pkrow<>+56(SB)/8, $0x0000000100000001
DATA pkrow<>+64(SB)/8, $0x0000000200000002
DATA pkrow<>+72(SB)/8, $0x0000000200000002
DATA pkrow<>+80(SB)/8, $0x0000000200000002
DATA pkrow<>+88(SB)/8, $0x0000000200000002
DATA pkrow<>+96(SB)/8, $0x0000000300000003
DATA pkrow<>+104(SB)/8, $0x0000000300000003
DATA pkrow<>+112(SB)/8, $0x0000000300000003
DATA pkrow<>+120(SB)/8, $0x0000000300000003
DATA pkrow<>+128(SB)/8, $0x0000000400000004
DATA pkrow<>+136(SB)/8, $0x0000000400000004
DATA pkrow<>+144(SB)/8, $0x0000000400000004
DATA pkrow<>+152(SB)/8, $0x0000000400000004
DATA pkrow<>+160(SB)/8, $0x0000000500000005
DATA pkrow<>+168(SB)/8, $0x0000000500000005
DATA pkrow<>+176(SB)/8, $0x0000000500000005
DATA pkrow<>+184(SB)/8, $0x0000000500000005
DATA pkrow<>+192(SB)/8, $0x0000000600000006
DATA pkrow<>+200(SB)/8, $0x0000000600000006
DATA pkrow<>+208(SB)/8, $0x0000000600000006
DATA pkrow<>+216(SB)/8, $0x0000000600000006
DATA pkrow<>+224(SB)/8, $0x0000000700000007
DATA pkrow<>+232(SB)/8, $0x0000000700000007
DATA pkrow<>+240(SB)/8, $0x0000000700000007
DATA pkrow<>+248(SB)/8, $0x0000000700000007
GLOBL pkrow<>(SB), RODATA|NOPTR, $256

// PKPAIR(off, XL, XH, sl, sh, Q, I): the 64 quant bytes at off(DI) (a
// row pair's sub-blocks 2p, 2p+1), the low nibbles times input XL with
// scale sl of Q, the high ones times XH with scale sh, into I.
#define PKPAIR(off, XL, XH, sl, sh, Q, I) \
	VPANDD off(DI), Z20, Z29; \
	VPMADDUBSW XL, Z29, Z29; \
	VPSHUFB pkscale<>+sl(SB), Q, Z31; \
	VPDPWSSD Z31, Z29, I; \
	VPSRLW $4, off(DI), Z30; \
	VPANDD Z30, Z20, Z30; \
	VPMADDUBSW XH, Z30, Z30; \
	VPSHUFB pkscale<>+sh(SB), Q, Z28; \
	VPDPWSSD Z28, Z30, I

// PKFLOATK: the float steps of the group's eight rows (I in Z16-Z19,
// row pair h in Z(16+h), row 2h in its low half). I: each row's two
// 128-bit lanes added (VSHUFI32X4 of two row pairs' even and odd lanes),
// rows 0-3 in the 128-bit lanes of Z0, rows 4-7 in Z1. M: the inputs'
// sums of 16 added pairwise to eight words (VPHADDW) in every 128-bit lane
// of Z2, times each row's eight minimums as words (rows 0-3 in Z3, 4-7 in
// Z4) by VPMADDWD. Then both reduced to one int32 per 128-bit lane and row
// (VPUNPCKLQDQ and VPUNPCKHQDQ of rows k and 4+k, VPSHUFD), row r in lane
// r of Y5 (I) and Y6 (M) by VPERMD (pksum in Z9), converted; acc (Y8) =
// fma(float32(d·dx), float32(I), acc), acc = −float32(dmin·dx)·float32(M)
// + acc fused, each row's d·dx and dmin·dx in its lane (Y29, Y30).
#define PKFLOATK \
	VSHUFI32X4 $0x88, Z17, Z16, Z0; \
	VSHUFI32X4 $0xDD, Z17, Z16, Z1; \
	VPADDD Z1, Z0, Z0; \
	VSHUFI32X4 $0x88, Z19, Z18, Z1; \
	VSHUFI32X4 $0xDD, Z19, Z18, Z2; \
	VPADDD Z2, Z1, Z1; \
	VMOVDQU (BX), X2; \
	VPHADDW 16(BX), X2, X2; \
	VSHUFI32X4 $0, Z2, Z2, Z2; \
	VPMOVZXBW 96(DI), Z3; \
	VPMADDWD Z2, Z3, Z3; \
	VPMOVZXBW 128(DI), Z4; \
	VPMADDWD Z2, Z4, Z4; \
	VPUNPCKLQDQ Z1, Z0, Z5; \
	VPUNPCKHQDQ Z1, Z0, Z7; \
	VPADDD Z7, Z5, Z5; \
	VPSHUFD $0xB1, Z5, Z7; \
	VPADDD Z7, Z5, Z5; \
	VPUNPCKLQDQ Z4, Z3, Z6; \
	VPUNPCKHQDQ Z4, Z3, Z7; \
	VPADDD Z7, Z6, Z6; \
	VPSHUFD $0xB1, Z6, Z7; \
	VPADDD Z7, Z6, Z6; \
	VPERMD Z5, Z9, Z5; \
	VPERMD Z6, Z9, Z6; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y6, Y6; \
	VBROADCASTSS (R10), Y28; \
	VCVTPH2PS (DI), Y29; \
	VMULPS Y28, Y29, Y29; \
	VCVTPH2PS 16(DI), Y30; \
	VMULPS Y28, Y30, Y30; \
	VFMADD231PS Y5, Y29, Y8; \
	VFNMADD231PS Y6, Y30, Y8

// PKHSUM(Z): hsum8 of each half's eight lanes into its lane 0
// ((h0+h2)+(h1+h3), h_j = a_j + a_{j+4}).
#define PKHSUM(Z) \
	VSHUFF32X4 $0xB1, Z, Z, Z28; \
	VADDPS Z28, Z, Z; \
	VPERMILPS $0x4E, Z, Z28; \
	VADDPS Z28, Z, Z; \
	VPERMILPS $0xB1, Z, Z28; \
	VADDPS Z28, Z, Z

// PKPROLOGUE: the Q5_K kernel's arguments, masks and indices.
#define PKPROLOGUE \
	MOVQ p+0(FP), DI; \
	MOVQ groups+8(FP), SI; \
	MOVQ out+48(FP), R12; \
	VMOVDQU64 pk0f<>(SB), Z20; \
	VMOVDQU64 pkperm<>(SB), Z21; \
	VMOVDQU32 pksum<>(SB), Z9

// PKGROUP: a group's inputs from their first super-block, acc zeroed.
#define PKGROUP \
	MOVQ xq+24(FP), AX; \
	MOVQ xd+32(FP), R10; \
	MOVQ bs+40(FP), BX; \
	MOVQ nblocks+16(FP), R13; \
	VPXORD Z8, Z8, Z8

// PKHEAD: a super-block's inputs in Z0-Z7, the row pairs' scales in
// Z24-Z27, I zeroed.
#define PKHEAD \
	VBROADCASTI64X4 0(AX), Z0; \
	VBROADCASTI64X4 32(AX), Z1; \
	VBROADCASTI64X4 64(AX), Z2; \
	VBROADCASTI64X4 96(AX), Z3; \
	VBROADCASTI64X4 128(AX), Z4; \
	VBROADCASTI64X4 160(AX), Z5; \
	VBROADCASTI64X4 192(AX), Z6; \
	VBROADCASTI64X4 224(AX), Z7; \
	VPERMQ 32(DI), Z21, Z24; \
	VPERMQ 48(DI), Z21, Z25; \
	VPERMQ 64(DI), Z21, Z26; \
	VPERMQ 80(DI), Z21, Z27; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19

// PKNEXT: the inputs' next super-block (DECQ of the count last).
#define PKNEXT \
	ADDQ $256, AX; \
	ADDQ $4, R10; \
	ADDQ $32, BX; \
	DECQ R13


// The packed Q6_K kernel (pack.go's layout): as Q5_K's, two rows per ZMM
// register. Per super-block: the input's eight groups of 32 quants in both
// halves of Z0-Z7, and per group c the words −32·(x_2w + x_2w+1) (VPMADDUBSW
// of 32 by the input, negated) in the frame at 64c. Per pair of rows h
// (2h, 2h+1): their 32 int8 scales as int16 (VPMOVSXBW), the words of
// scales 0-7 in every 128-bit lane of each row's half in Z20, 8-15 in Z21
// (VPERMQ); the high bits of groups 0-3 in Z24, 4-7 in Z25; per pair a of
// groups, the 64 bytes of low bits (group 2a in the low nibbles, 2a+1 in
// the high ones) in Z26. A group's quants q (0-63, before the −32) are its
// nibbles with their two high bits moved to bits 4-5 (VPTERNLOGD); then
// VPMADDUBSW by the input (pair sums ≤ 2·63·127) plus the frame's words
// (the −32, ≥ −2·32·127: the sum fits int16) is Σ (q−32)·x per pair of
// weights, and VPDPWSSD by the scales of the group's two sub-blocks of 16
// (one VPSHUFB: sub-block 2c's in the low 128-bit lane of each half,
// 2c+1's in the high one) adds dotKInt's lane sums into I (Z16-Z19).
// Then acc = fma(float32(d·dx), float32(I), acc) (Z8-Z11) and, per group
// of rows, hsum8 of each row's acc (Q6_K has no minimums).

DATA pk20<>+0(SB)/8, $0x2020202020202020
DATA pk20<>+8(SB)/8, $0x2020202020202020
DATA pk20<>+16(SB)/8, $0x2020202020202020
DATA pk20<>+24(SB)/8, $0x2020202020202020
DATA pk20<>+32(SB)/8, $0x2020202020202020
DATA pk20<>+40(SB)/8, $0x2020202020202020
DATA pk20<>+48(SB)/8, $0x2020202020202020
DATA pk20<>+56(SB)/8, $0x2020202020202020
GLOBL pk20<>(SB), RODATA|NOPTR, $64

// pkq6perm: VPERMQ indices of a row pair's scales 0-7 (at 0) and 8-15 (at 64)
// in both 128-bit lanes of each half.
DATA pkq6perm<>+0(SB)/8, $0
DATA pkq6perm<>+8(SB)/8, $1
DATA pkq6perm<>+16(SB)/8, $0
DATA pkq6perm<>+24(SB)/8, $1
DATA pkq6perm<>+32(SB)/8, $4
DATA pkq6perm<>+40(SB)/8, $5
DATA pkq6perm<>+48(SB)/8, $4
DATA pkq6perm<>+56(SB)/8, $5
DATA pkq6perm<>+64(SB)/8, $2
DATA pkq6perm<>+72(SB)/8, $3
DATA pkq6perm<>+80(SB)/8, $2
DATA pkq6perm<>+88(SB)/8, $3
DATA pkq6perm<>+96(SB)/8, $6
DATA pkq6perm<>+104(SB)/8, $7
DATA pkq6perm<>+112(SB)/8, $6
DATA pkq6perm<>+120(SB)/8, $7
GLOBL pkq6perm<>(SB), RODATA|NOPTR, $128

// pkq6scale: at 64c, VPSHUFB indices of word 2c mod 8 in the even 128-bit
// lanes and 2c+1 mod 8 in the odd ones: group c's two sub-block scales.
DATA pkq6scale<>+0(SB)/8, $0x0100010001000100
DATA pkq6scale<>+8(SB)/8, $0x0100010001000100
DATA pkq6scale<>+16(SB)/8, $0x0302030203020302
DATA pkq6scale<>+24(SB)/8, $0x0302030203020302
DATA pkq6scale<>+32(SB)/8, $0x0100010001000100
DATA pkq6scale<>+40(SB)/8, $0x0100010001000100
DATA pkq6scale<>+48(SB)/8, $0x0302030203020302
DATA pkq6scale<>+56(SB)/8, $0x0302030203020302
DATA pkq6scale<>+64(SB)/8, $0x0504050405040504
DATA pkq6scale<>+72(SB)/8, $0x0504050405040504
DATA pkq6scale<>+80(SB)/8, $0x0706070607060706
DATA pkq6scale<>+88(SB)/8, $0x0706070607060706
DATA pkq6scale<>+96(SB)/8, $0x0504050405040504
DATA pkq6scale<>+104(SB)/8, $0x0504050405040504
DATA pkq6scale<>+112(SB)/8, $0x0706070607060706
DATA pkq6scale<>+120(SB)/8, $0x0706070607060706
DATA pkq6scale<>+128(SB)/8, $0x0908090809080908
DATA pkq6scale<>+136(SB)/8, $0x0908090809080908
DATA pkq6scale<>+144(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA pkq6scale<>+152(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA pkq6scale<>+160(SB)/8, $0x0908090809080908
DATA pkq6scale<>+168(SB)/8, $0x0908090809080908
DATA pkq6scale<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA pkq6scale<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA pkq6scale<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA pkq6scale<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA pkq6scale<>+208(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA pkq6scale<>+216(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA pkq6scale<>+224(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA pkq6scale<>+232(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA pkq6scale<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA pkq6scale<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA pkq6scale<>+256(SB)/8, $0x0100010001000100
DATA pkq6scale<>+264(SB)/8, $0x0100010001000100
DATA pkq6scale<>+272(SB)/8, $0x0302030203020302
DATA pkq6scale<>+280(SB)/8, $0x0302030203020302
DATA pkq6scale<>+288(SB)/8, $0x0100010001000100
DATA pkq6scale<>+296(SB)/8, $0x0100010001000100
DATA pkq6scale<>+304(SB)/8, $0x0302030203020302
DATA pkq6scale<>+312(SB)/8, $0x0302030203020302
DATA pkq6scale<>+320(SB)/8, $0x0504050405040504
DATA pkq6scale<>+328(SB)/8, $0x0504050405040504
DATA pkq6scale<>+336(SB)/8, $0x0706070607060706
DATA pkq6scale<>+344(SB)/8, $0x0706070607060706
DATA pkq6scale<>+352(SB)/8, $0x0504050405040504
DATA pkq6scale<>+360(SB)/8, $0x0504050405040504
DATA pkq6scale<>+368(SB)/8, $0x0706070607060706
DATA pkq6scale<>+376(SB)/8, $0x0706070607060706
DATA pkq6scale<>+384(SB)/8, $0x0908090809080908
DATA pkq6scale<>+392(SB)/8, $0x0908090809080908
DATA pkq6scale<>+400(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA pkq6scale<>+408(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA pkq6scale<>+416(SB)/8, $0x0908090809080908
DATA pkq6scale<>+424(SB)/8, $0x0908090809080908
DATA pkq6scale<>+432(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA pkq6scale<>+440(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA pkq6scale<>+448(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA pkq6scale<>+456(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA pkq6scale<>+464(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA pkq6scale<>+472(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA pkq6scale<>+480(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA pkq6scale<>+488(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA pkq6scale<>+496(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA pkq6scale<>+504(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL pkq6scale<>(SB), RODATA|NOPTR, $512

// PK6MUL(X, c, Q, I): group c's quants (Z27) times input X, plus the
// frame's −32 words, times its scales (from Q) into I.
#define PK6MUL(X, c, Q, I) \
	VPMADDUBSW X, Z27, Z27; \
	VPADDW c(SP), Z27, Z27; \
	VPSHUFB pkq6scale<>+c(SB), Q, Z29; \
	VPDPWSSD Z29, Z27, I

// PK6LO(X, c, Q, I, B): group c (even) from the low nibbles of Z26 and the
// high bits at bits 4-5 of B, times X into I (PK6MUL).
#define PK6LO(X, c, Q, I, B) \
	VPANDD Z26, Z12, Z27; \
	VPTERNLOGD $0xF8, Z13, B, Z27; \
	PK6MUL(X, c, Q, I)

// PK6HI(X, c, Q, I, SH, n, QH): group c (odd) from the high nibbles of
// Z26 and the high bits of QH moved to bits 4-5 by SH $n, times X into I.
#define PK6HI(X, c, Q, I, SH, n, QH) \
	VPSRLW $4, Z26, Z27; \
	SH $n, QH, Z28; \
	VPANDD Z28, Z13, Z28; \
	VPTERNLOGD $0xEC, Z12, Z28, Z27; \
	PK6MUL(X, c, Q, I)

// PK6H(sc, I, acc, row): a super-block of the row pair whose scales are at
// sc(DI) and quants at CX (their 384 bytes) into I, then acc = fma(
// float32(d·dx) (Y23, each row's by VPERMPS with pkrow at row),
// float32(I), acc).
#define PK6H(sc, I, acc, row) \
	VPMOVSXBW sc(DI), Z22; \
	VPERMQ Z22, Z14, Z20; \
	VPERMQ Z22, Z15, Z21; \
	VPXORD I, I, I; \
	VMOVDQU64 (CX), Z24; \
	VMOVDQU64 64(CX), Z25; \
	VMOVDQU64 128(CX), Z26; \
	VPSLLW $4, Z24, Z28; \
	PK6LO(Z0, 0, Z20, I, Z28); \
	PK6HI(Z1, 64, Z20, I, VPSLLW, 2, Z24); \
	VMOVDQU64 192(CX), Z26; \
	PK6LO(Z2, 128, Z20, I, Z24); \
	PK6HI(Z3, 192, Z20, I, VPSRLW, 2, Z24); \
	VMOVDQU64 256(CX), Z26; \
	VPSLLW $4, Z25, Z28; \
	PK6LO(Z4, 256, Z21, I, Z28); \
	PK6HI(Z5, 320, Z21, I, VPSLLW, 2, Z25); \
	VMOVDQU64 320(CX), Z26; \
	PK6LO(Z6, 384, Z21, I, Z25); \
	PK6HI(Z7, 448, Z21, I, VPSRLW, 2, Z25); \
	VMOVDQU32 pkrow<>+row(SB), Z30; \
	VPERMPS Z23, Z30, Z31; \
	VCVTDQ2PS I, I; \
	VFMADD231PS I, Z31, acc

// func dotQ6KPx1AVX512(p *byte, groups, nblocks int, xq *int8, xd *float32, bs *int16, out *float32)
TEXT ·dotQ6KPx1AVX512(SB), NOSPLIT, $512-56
	MOVQ p+0(FP), DI
	MOVQ groups+8(FP), SI
	MOVQ out+48(FP), R12
	VMOVDQU64 pk0f<>(SB), Z12
	VPBROADCASTB pk30<>(SB), Z13
	VMOVDQU64 pkq6perm<>(SB), Z14
	VMOVDQU64 pkq6perm<>+64(SB), Z15
	MOVL $0x0101, AX
	KMOVW AX, K1
pk6group:
	MOVQ xq+24(FP), AX
	MOVQ xd+32(FP), R10
	MOVQ nblocks+16(FP), R13
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
pk6block:
	VMOVDQU64 pk20<>(SB), Z30
	VPXORD Z31, Z31, Z31
	VBROADCASTI64X4 0(AX), Z0
	VPMADDUBSW Z0, Z30, Z28
	VPSUBW Z28, Z31, Z28
	VMOVDQU64 Z28, 0(SP)
	VBROADCASTI64X4 32(AX), Z1
	VPMADDUBSW Z1, Z30, Z28
	VPSUBW Z28, Z31, Z28
	VMOVDQU64 Z28, 64(SP)
	VBROADCASTI64X4 64(AX), Z2
	VPMADDUBSW Z2, Z30, Z28
	VPSUBW Z28, Z31, Z28
	VMOVDQU64 Z28, 128(SP)
	VBROADCASTI64X4 96(AX), Z3
	VPMADDUBSW Z3, Z30, Z28
	VPSUBW Z28, Z31, Z28
	VMOVDQU64 Z28, 192(SP)
	VBROADCASTI64X4 128(AX), Z4
	VPMADDUBSW Z4, Z30, Z28
	VPSUBW Z28, Z31, Z28
	VMOVDQU64 Z28, 256(SP)
	VBROADCASTI64X4 160(AX), Z5
	VPMADDUBSW Z5, Z30, Z28
	VPSUBW Z28, Z31, Z28
	VMOVDQU64 Z28, 320(SP)
	VBROADCASTI64X4 192(AX), Z6
	VPMADDUBSW Z6, Z30, Z28
	VPSUBW Z28, Z31, Z28
	VMOVDQU64 Z28, 384(SP)
	VBROADCASTI64X4 224(AX), Z7
	VPMADDUBSW Z7, Z30, Z28
	VPSUBW Z28, Z31, Z28
	VMOVDQU64 Z28, 448(SP)
	VBROADCASTSS (R10), Y30
	VCVTPH2PS (DI), Y23
	VMULPS Y30, Y23, Y23
	LEAQ 192(DI), CX
	PK6H(16, Z16, Z8, 0)
	ADDQ $384, CX
	PK6H(48, Z17, Z9, 64)
	ADDQ $384, CX
	PK6H(80, Z18, Z10, 128)
	ADDQ $384, CX
	PK6H(112, Z19, Z11, 192)
	ADDQ $1728, DI
	ADDQ $256, AX
	ADDQ $4, R10
	DECQ R13
	JNZ pk6block
	PKHSUM(Z8)
	VCOMPRESSPS Z8, K1, 0(R12)
	PKHSUM(Z9)
	VCOMPRESSPS Z9, K1, 8(R12)
	PKHSUM(Z10)
	VCOMPRESSPS Z10, K1, 16(R12)
	PKHSUM(Z11)
	VCOMPRESSPS Z11, K1, 24(R12)
	ADDQ $32, R12
	DECQ SI
	JNZ pk6group
	VZEROUPPER
	RET

// The packed Q5_K kernel: the steps above with each sub-block's fifth bits
// (the row pair's 64 bytes of them in Z22) moved to bit 4 of its quants.

DATA pk10<>+0(SB)/8, $0x1010101010101010
DATA pk10<>+8(SB)/8, $0x1010101010101010
DATA pk10<>+16(SB)/8, $0x1010101010101010
DATA pk10<>+24(SB)/8, $0x1010101010101010
DATA pk10<>+32(SB)/8, $0x1010101010101010
DATA pk10<>+40(SB)/8, $0x1010101010101010
DATA pk10<>+48(SB)/8, $0x1010101010101010
DATA pk10<>+56(SB)/8, $0x1010101010101010
GLOBL pk10<>(SB), RODATA|NOPTR, $64

// PK5BIT(SH, n, W): the fifth bits of Z22 moved by SH $n to bit 4, or-ed
// into the low nibbles of W (whose other bits are cleared).
#define PK5BIT(SH, n, W) \
	SH $n, Z22, Z23; \
	VPANDD pk10<>(SB), Z23, Z23; \
	VPTERNLOGD $0xEC, Z20, Z23, W

// PK5PAIR(off, hoff, XL, XH, sl, sh, Q, I, SL, nl, SH, nh): PKPAIR for
// Q5_K, the fifth bits at hoff(DI) moved by SL $nl (sub-block 2p) and SH
// $nh (2p+1).
#define PK5PAIR(off, hoff, XL, XH, sl, sh, Q, I, SL, nl, SH, nh) \
	VMOVDQU64 hoff(DI), Z22; \
	VMOVDQU64 off(DI), Z29; \
	PK5BIT(SL, nl, Z29); \
	VPMADDUBSW XL, Z29, Z29; \
	VPSHUFB pkscale<>+sl(SB), Q, Z31; \
	VPDPWSSD Z31, Z29, I; \
	VPSRLW $4, off(DI), Z30; \
	PK5BIT(SH, nh, Z30); \
	VPMADDUBSW XH, Z30, Z30; \
	VPSHUFB pkscale<>+sh(SB), Q, Z28; \
	VPDPWSSD Z28, Z30, I

// func dotQ5KPx1AVX512(p *byte, groups, nblocks int, xq *int8, xd *float32, bs *int16, out *float32)
TEXT ·dotQ5KPx1AVX512(SB), NOSPLIT, $0-56
	PKPROLOGUE
pk5group:
	PKGROUP
pk5block:
	PKHEAD
	PK5PAIR(416, 160, Z0, Z1, 0, 64, Z24, Z16, VPSLLW, 4, VPSLLW, 3)
	PK5PAIR(480, 224, Z0, Z1, 0, 64, Z25, Z17, VPSLLW, 4, VPSLLW, 3)
	PK5PAIR(544, 288, Z0, Z1, 0, 64, Z26, Z18, VPSLLW, 4, VPSLLW, 3)
	PK5PAIR(608, 352, Z0, Z1, 0, 64, Z27, Z19, VPSLLW, 4, VPSLLW, 3)
	PK5PAIR(672, 160, Z2, Z3, 128, 192, Z24, Z16, VPSLLW, 2, VPSLLW, 1)
	PK5PAIR(736, 224, Z2, Z3, 128, 192, Z25, Z17, VPSLLW, 2, VPSLLW, 1)
	PK5PAIR(800, 288, Z2, Z3, 128, 192, Z26, Z18, VPSLLW, 2, VPSLLW, 1)
	PK5PAIR(864, 352, Z2, Z3, 128, 192, Z27, Z19, VPSLLW, 2, VPSLLW, 1)
	PK5PAIR(928, 160, Z4, Z5, 256, 320, Z24, Z16, VPSLLW, 0, VPSRLW, 1)
	PK5PAIR(992, 224, Z4, Z5, 256, 320, Z25, Z17, VPSLLW, 0, VPSRLW, 1)
	PK5PAIR(1056, 288, Z4, Z5, 256, 320, Z26, Z18, VPSLLW, 0, VPSRLW, 1)
	PK5PAIR(1120, 352, Z4, Z5, 256, 320, Z27, Z19, VPSLLW, 0, VPSRLW, 1)
	PK5PAIR(1184, 160, Z6, Z7, 384, 448, Z24, Z16, VPSRLW, 2, VPSRLW, 3)
	PK5PAIR(1248, 224, Z6, Z7, 384, 448, Z25, Z17, VPSRLW, 2, VPSRLW, 3)
	PK5PAIR(1312, 288, Z6, Z7, 384, 448, Z26, Z18, VPSRLW, 2, VPSRLW, 3)
	PK5PAIR(1376, 352, Z6, Z7, 384, 448, Z27, Z19, VPSRLW, 2, VPSRLW, 3)
	PKFLOATK
	ADDQ $1440, DI
	PKNEXT
	JNZ pk5block
	VMOVUPS Y8, (R12)
	ADDQ $32, R12
	DECQ SI
	JNZ pk5group
	VZEROUPPER
	RET
