#include "textflag.h"
#include "packrx_amd64.h"

#define PFD 4096

// The packed Q8_0, Q4_0 and Q5_0 kernels (pack.go's 32-weight layouts): eight
// rows of a group times one, four or eight inputs, one int32 lane per row.
// Each 32-byte chunk c holds four quants of each of the eight rows,
// unsigned (Q8_0's q+128; Q4_0's nibbles, the low ones weights 4c…, the
// high ones 16+4c…; Q5_0's too, with their fifth bits): the unsigned operand of one VPDPBUSD per input,
// whose signed operand is the input's four quants broadcast from memory
// (.BCST). Each input's lanes start at its block offset (acts.ob, −Σx)
// shifted left by 7 (Q8_0), 3 (Q4_0) or 4 (Q5_0), so after the block they hold
// dotQ32Int's I = Σ w·x of every row. Then its one fused step per row at
// once: acc = fma(float32(dw·dx), float32(I), acc), dw of the eight rows
// by VCVTPH2PS. At the end of a group each input's eight results are one
// store. AVX-512 F, BW, VL and VNNI (Y16-Y31, the broadcasts).
//
// Registers of the four- and eight-input kernels: I in Y0-Y7, acc in
// Y16-Y23, one per input; the chunk in Y25 (Q4_0: the bytes in Y27, its
// high nibbles in Y26, the mask of low nibbles in Y24), dw of the rows
// in Y28, a scale product in Y31. Inputs' quants as packrx_amd64.h says;
// their scales dx at R10 (input 0; R12 the bytes from one input's to the
// next, CX three times that) and their offsets at BX (the same strides).
// The byte constants ·q0fI and ·q10I are quantint_amd64.s's.

// r50ix: the byte indices of VPSHUFBITQMB for Q5_0's chunk c (64c: low
// nibbles, quants 4c…; 64c+32: high nibbles, 16+4c…): byte 4i+j of a
// register (row i, quant j of the four) selects bit 4c+j (+16) of row
// i's 32 high bits, which are bits 32(i%2)… of the lane's quadword.
DATA r50ix<>+0(SB)/8, $0x2322212003020100
DATA r50ix<>+8(SB)/8, $0x2322212003020100
DATA r50ix<>+16(SB)/8, $0x2322212003020100
DATA r50ix<>+24(SB)/8, $0x2322212003020100
DATA r50ix<>+32(SB)/8, $0x3332313013121110
DATA r50ix<>+40(SB)/8, $0x3332313013121110
DATA r50ix<>+48(SB)/8, $0x3332313013121110
DATA r50ix<>+56(SB)/8, $0x3332313013121110
DATA r50ix<>+64(SB)/8, $0x2726252407060504
DATA r50ix<>+72(SB)/8, $0x2726252407060504
DATA r50ix<>+80(SB)/8, $0x2726252407060504
DATA r50ix<>+88(SB)/8, $0x2726252407060504
DATA r50ix<>+96(SB)/8, $0x3736353417161514
DATA r50ix<>+104(SB)/8, $0x3736353417161514
DATA r50ix<>+112(SB)/8, $0x3736353417161514
DATA r50ix<>+120(SB)/8, $0x3736353417161514
DATA r50ix<>+128(SB)/8, $0x2b2a29280b0a0908
DATA r50ix<>+136(SB)/8, $0x2b2a29280b0a0908
DATA r50ix<>+144(SB)/8, $0x2b2a29280b0a0908
DATA r50ix<>+152(SB)/8, $0x2b2a29280b0a0908
DATA r50ix<>+160(SB)/8, $0x3b3a39381b1a1918
DATA r50ix<>+168(SB)/8, $0x3b3a39381b1a1918
DATA r50ix<>+176(SB)/8, $0x3b3a39381b1a1918
DATA r50ix<>+184(SB)/8, $0x3b3a39381b1a1918
DATA r50ix<>+192(SB)/8, $0x2f2e2d2c0f0e0d0c
DATA r50ix<>+200(SB)/8, $0x2f2e2d2c0f0e0d0c
DATA r50ix<>+208(SB)/8, $0x2f2e2d2c0f0e0d0c
DATA r50ix<>+216(SB)/8, $0x2f2e2d2c0f0e0d0c
DATA r50ix<>+224(SB)/8, $0x3f3e3d3c1f1e1d1c
DATA r50ix<>+232(SB)/8, $0x3f3e3d3c1f1e1d1c
DATA r50ix<>+240(SB)/8, $0x3f3e3d3c1f1e1d1c
DATA r50ix<>+248(SB)/8, $0x3f3e3d3c1f1e1d1c
GLOBL r50ix<>(SB), RODATA|NOPTR, $256

// R8I4(sh), R8I8(sh): I of each input = its offset (BX) << sh.
#define R8I4(sh) \
	VPBROADCASTD (BX), Y0; \
	VPSLLD       $sh, Y0, Y0; \
	VPBROADCASTD (BX)(R12*1), Y1; \
	VPSLLD       $sh, Y1, Y1; \
	VPBROADCASTD (BX)(R12*2), Y2; \
	VPSLLD       $sh, Y2, Y2; \
	VPBROADCASTD (BX)(CX*1), Y3; \
	VPSLLD       $sh, Y3, Y3

#define R8I8(sh) \
	R8I4(sh); \
	LEAQ         (BX)(R12*4), SI; \
	VPBROADCASTD (SI), Y4; \
	VPSLLD       $sh, Y4, Y4; \
	VPBROADCASTD (SI)(R12*1), Y5; \
	VPSLLD       $sh, Y5, Y5; \
	VPBROADCASTD (SI)(R12*2), Y6; \
	VPSLLD       $sh, Y6, Y6; \
	VPBROADCASTD (SI)(CX*1), Y7; \
	VPSLLD       $sh, Y7, Y7

// R8Q(C): a Q8_0 block's eight chunks times the inputs (C: RX8C, RX4C).
#define R8Q(C) \
	VMOVDQU32 16(DI), Y25; \
	C(0, Y25); \
	VMOVDQU32 48(DI), Y25; \
	C(4, Y25); \
	VMOVDQU32 80(DI), Y25; \
	C(8, Y25); \
	VMOVDQU32 112(DI), Y25; \
	C(12, Y25); \
	VMOVDQU32 144(DI), Y25; \
	C(16, Y25); \
	VMOVDQU32 176(DI), Y25; \
	C(20, Y25); \
	VMOVDQU32 208(DI), Y25; \
	C(24, Y25); \
	VMOVDQU32 240(DI), Y25; \
	C(28, Y25)

// R40CH(C, q, x): the Q4_0 chunk at q(DI): its low nibbles times the
// inputs' quants at x, its high ones times those at x+16.
#define R40CH(C, q, x) \
	VMOVDQU32 q(DI), Y27; \
	VPANDD    Y24, Y27, Y25; \
	C(x, Y25); \
	VPSRLW    $4, Y27, Y26; \
	VPANDD    Y24, Y26, Y26; \
	C(x+16, Y26)

#define R40Q(C) \
	R40CH(C, 16, 0); \
	R40CH(C, 48, 4); \
	R40CH(C, 80, 8); \
	R40CH(C, 112, 12)

// R50CH(C, c, x): Q5_0's chunk c (its nibbles as R40CH's), each quant's
// high bit (Y29: the rows' 32 bits) added as 16 where set (VPSHUFBITQMB
// into K1, K2; VPADDB of Y30's 16s under them).
#define R50CH(C, c, x) \
	VMOVDQU32    48+32*c(DI), Y27; \
	VPANDD       Y24, Y27, Y25; \
	VPSHUFBITQMB r50ix<>+64*c(SB), Y29, K1; \
	VPADDB       Y30, Y25, K1, Y25; \
	C(x, Y25); \
	VPSRLW       $4, Y27, Y26; \
	VPANDD       Y24, Y26, Y26; \
	VPSHUFBITQMB r50ix<>+64*c+32(SB), Y29, K2; \
	VPADDB       Y30, Y26, K2, Y26; \
	C(x+16, Y26)

#define R50Q(C) \
	VMOVDQU32 16(DI), Y29; \
	R50CH(C, 0, 0); \
	R50CH(C, 1, 4); \
	R50CH(C, 2, 8); \
	R50CH(C, 3, 12)

// R8F(xd, I, acc): acc = fma(float32(dw·dx), float32(I), acc), the eight
// rows at once (dw in Y28).
#define R8F(xd, I, acc) \
	VMULPS.BCST xd, Y28, Y31; \
	VCVTDQ2PS   I, I; \
	VFMADD231PS I, Y31, acc

#define R8F4 \
	VCVTPH2PS (DI), Y28; \
	R8F((R10), Y0, Y16); \
	R8F((R10)(R12*1), Y1, Y17); \
	R8F((R10)(R12*2), Y2, Y18); \
	R8F((R10)(CX*1), Y3, Y19)

#define R8F8 \
	R8F4; \
	LEAQ (R10)(R12*4), SI; \
	R8F((SI), Y4, Y20); \
	R8F((SI)(R12*1), Y5, Y21); \
	R8F((SI)(R12*2), Y6, Y22); \
	R8F((SI)(CX*1), Y7, Y23)

// R8PRO: the arguments and strides of the multi-input kernels.
#define R8PRO \
	MOVQ      p+0(FP), DI; \
	MOVQ      groups+8(FP), R9; \
	MOVQ      nblocks+16(FP), R12; \
	MOVQ      R12, DX; \
	SHLQ      $5, DX; \
	LEAQ      (DX)(DX*2), R8; \
	SHLQ      $2, R12; \
	LEAQ      (R12)(R12*2), CX; \
	VMOVDQU32 ·q0fI(SB), Y24

// R8GROUP: a group's inputs from their first block, acc zeroed.
#define R8GROUP \
	MOVQ   xq+24(FP), AX; \
	LEAQ   (AX)(DX*4), R11; \
	MOVQ   xd+32(FP), R10; \
	MOVQ   ob+40(FP), BX; \
	MOVQ   nblocks+16(FP), R13; \
	VPXORD Y16, Y16, Y16; \
	VPXORD Y17, Y17, Y17; \
	VPXORD Y18, Y18, Y18; \
	VPXORD Y19, Y19, Y19; \
	VPXORD Y20, Y20, Y20; \
	VPXORD Y21, Y21, Y21; \
	VPXORD Y22, Y22, Y22; \
	VPXORD Y23, Y23, Y23

// R8PF, R40PF: the bytes PFD ahead prefetched (a block's and more: a
// decode step's weights come from DRAM, and the hardware's prefetch
// alone left the eight-input kernel at 82k Mw/cpu-s where 4 KiB ahead
// gives 105k-111k, MatVecDRAM Q8_0-packed n=16). Not in the one-input
// kernels, which stream at the memory's pace without (31 GB/cpu-s, and
// 25 with).
#define R8PF \
	R40PF; \
	PREFETCHT0 PFD+192(DI); \
	PREFETCHT0 PFD+256(DI)

#define R40PF \
	PREFETCHT0 PFD(DI); \
	PREFETCHT0 PFD+64(DI); \
	PREFETCHT0 PFD+128(DI)

// R8NEXT(pb): the next block (pb packed bytes; DECQ of the count last).
#define R8NEXT(pb) \
	ADDQ $pb, DI; \
	ADDQ $32, AX; \
	ADDQ $32, R11; \
	ADDQ $4, R10; \
	ADDQ $4, BX; \
	DECQ R13

// func dotQ8Rx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ8Rx8VNNI(SB), NOSPLIT, $0-64
	R8PRO

q8rx8group:
	R8GROUP

q8rx8block:
	R8PF
	R8I8(7)
	R8Q(RX8C)
	R8F8
	R8NEXT(272)
	JNZ q8rx8block
	RX8OUT
	DECQ R9
	JNZ  q8rx8group
	VZEROUPPER
	RET

// func dotQ8Rx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ8Rx4VNNI(SB), NOSPLIT, $0-64
	R8PRO

q8rx4group:
	R8GROUP

q8rx4block:
	R8PF
	R8I4(7)
	R8Q(RX4C)
	R8F4
	R8NEXT(272)
	JNZ q8rx4block
	RX4OUT
	DECQ R9
	JNZ  q8rx4group
	VZEROUPPER
	RET

// func dotQ40Rx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ40Rx8VNNI(SB), NOSPLIT, $0-64
	R8PRO

q40rx8group:
	R8GROUP

q40rx8block:
	R40PF
	R8I8(3)
	R40Q(RX8C)
	R8F8
	R8NEXT(144)
	JNZ q40rx8block
	RX8OUT
	DECQ R9
	JNZ  q40rx8group
	VZEROUPPER
	RET

// func dotQ40Rx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ40Rx4VNNI(SB), NOSPLIT, $0-64
	R8PRO

q40rx4group:
	R8GROUP

q40rx4block:
	R40PF
	R8I4(3)
	R40Q(RX4C)
	R8F4
	R8NEXT(144)
	JNZ q40rx4block
	RX4OUT
	DECQ R9
	JNZ  q40rx4group
	VZEROUPPER
	RET

// func dotQ50Rx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ50Rx8VNNI(SB), NOSPLIT, $0-64
	R8PRO
	VMOVDQU32 ·q10I(SB), Y30

q50rx8group:
	R8GROUP

q50rx8block:
	R40PF
	R8I8(4)
	R50Q(RX8C)
	R8F8
	R8NEXT(176)
	JNZ q50rx8block
	RX8OUT
	DECQ R9
	JNZ  q50rx8group
	VZEROUPPER
	RET

// func dotQ50Rx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ50Rx4VNNI(SB), NOSPLIT, $0-64
	R8PRO
	VMOVDQU32 ·q10I(SB), Y30

q50rx4group:
	R8GROUP

q50rx4block:
	R40PF
	R8I4(4)
	R50Q(RX4C)
	R8F4
	R8NEXT(176)
	JNZ q50rx4block
	RX4OUT
	DECQ R9
	JNZ  q50rx4group
	VZEROUPPER
	RET

// The one-input kernels: the chunks alternately into I (Y0, from the
// offset) and Y1 (from 0), added at the end of the block (shorter
// dependency chains; integers, so the sum is the same); acc in Y16.

// R1C8(q, x, A): the Q8_0 chunk at q(DI) times the input's quants at x
// into A.
#define R1C8(q, x, A) \
	VMOVDQU32     q(DI), Y25; \
	VPDPBUSD.BCST x(AX), Y25, A

// R1C40(q, x): the Q4_0 chunk at q(DI), low nibbles into Y0, high into Y1.
#define R1C40(q, x) \
	VMOVDQU32     q(DI), Y27; \
	VPANDD        Y24, Y27, Y25; \
	VPSRLW        $4, Y27, Y26; \
	VPANDD        Y24, Y26, Y26; \
	VPDPBUSD.BCST x(AX), Y25, Y0; \
	VPDPBUSD.BCST x+16(AX), Y26, Y1

// R1PRO, R1GROUP, R1NEXT(pb): as the multi-input kernels' for one input
// (its results at SI).
#define R1PRO \
	MOVQ      p+0(FP), DI; \
	MOVQ      groups+8(FP), R9; \
	MOVQ      out+48(FP), SI; \
	VMOVDQU32 ·q0fI(SB), Y24

#define R1GROUP \
	MOVQ   xq+24(FP), AX; \
	MOVQ   xd+32(FP), R10; \
	MOVQ   ob+40(FP), BX; \
	MOVQ   nblocks+16(FP), R13; \
	VPXORD Y16, Y16, Y16

#define R1NEXT(pb) \
	ADDQ $pb, DI; \
	ADDQ $32, AX; \
	ADDQ $4, R10; \
	ADDQ $4, BX; \
	DECQ R13

// R1END: a block's I (Y0 + Y1) into acc.
#define R1END \
	VPADDD    Y1, Y0, Y0; \
	VCVTPH2PS (DI), Y28; \
	R8F((R10), Y0, Y16)

// R1OUT: the group's eight results.
#define R1OUT \
	VMOVUPS Y16, (SI); \
	ADDQ    $32, SI

// func dotQ8Rx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ8Rx1VNNI(SB), NOSPLIT, $0-64
	R1PRO

q8rx1group:
	R1GROUP

q8rx1block:
	VPBROADCASTD (BX), Y0
	VPSLLD       $7, Y0, Y0
	VPXORD       Y1, Y1, Y1
	R1C8(16, 0, Y0)
	R1C8(48, 4, Y1)
	R1C8(80, 8, Y0)
	R1C8(112, 12, Y1)
	R1C8(144, 16, Y0)
	R1C8(176, 20, Y1)
	R1C8(208, 24, Y0)
	R1C8(240, 28, Y1)
	R1END
	R1NEXT(272)
	JNZ q8rx1block
	R1OUT
	DECQ R9
	JNZ  q8rx1group
	VZEROUPPER
	RET

// func dotQ40Rx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ40Rx1VNNI(SB), NOSPLIT, $0-64
	R1PRO

q40rx1group:
	R1GROUP

q40rx1block:
	VPBROADCASTD (BX), Y0
	VPSLLD       $3, Y0, Y0
	VPXORD       Y1, Y1, Y1
	R1C40(16, 0)
	R1C40(48, 4)
	R1C40(80, 8)
	R1C40(112, 12)
	R1END
	R1NEXT(144)
	JNZ q40rx1block
	R1OUT
	DECQ R9
	JNZ  q40rx1group
	VZEROUPPER
	RET

// R1C50(c): Q5_0's chunk c (R50CH's bytes), low nibbles into Y0, high
// into Y1.
#define R1C50(c) \
	VMOVDQU32     48+32*c(DI), Y27; \
	VPANDD        Y24, Y27, Y25; \
	VPSHUFBITQMB  r50ix<>+64*c(SB), Y29, K1; \
	VPADDB        Y30, Y25, K1, Y25; \
	VPSRLW        $4, Y27, Y26; \
	VPANDD        Y24, Y26, Y26; \
	VPSHUFBITQMB  r50ix<>+64*c+32(SB), Y29, K2; \
	VPADDB        Y30, Y26, K2, Y26; \
	VPDPBUSD.BCST 4*c(AX), Y25, Y0; \
	VPDPBUSD.BCST 16+4*c(AX), Y26, Y1

// func dotQ50Rx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
TEXT ·dotQ50Rx1VNNI(SB), NOSPLIT, $0-64
	R1PRO
	VMOVDQU32 ·q10I(SB), Y30

q50rx1group:
	R1GROUP

q50rx1block:
	VPBROADCASTD (BX), Y0
	VPSLLD       $4, Y0, Y0
	VPXORD       Y1, Y1, Y1
	VMOVDQU32    16(DI), Y29
	R1C50(0)
	R1C50(1)
	R1C50(2)
	R1C50(3)
	R1END
	R1NEXT(176)
	JNZ q50rx1block
	R1OUT
	DECQ R9
	JNZ  q50rx1group
	VZEROUPPER
	RET
