#include "textflag.h"
#include "packrx_amd64.h"

#define PFD 4736

// The packed Q4_K kernels (pack.go's Q4_K layout): eight rows of a group
// times one, four or eight inputs, one int32 lane per row. Per super-block
// and sub-block k, each 32-byte chunk c of its pair holds the eight rows'
// quants 4c…4c+3 (low nibbles sub-block 2p, high 2p+1); masked (and
// shifted) it is the unsigned operand of one VPDPBUSD per input, whose
// signed operand is the input's four quants broadcast from memory
// (.BCST): after the eight chunks each lane holds its row's sum over the
// sub-block's 32 weights (S), times the row's scale (VPMOVZXBD, VPMULLD)
// added to I. The minimums' M by VPDPWSSD: each row's pair of minimums
// (VPMOVZXBW) times the input's pair of sums of 32 (acts.bp, broadcast).
// Then dotKInt's two fused steps per row at once: acc = fma(float32(d·
// dx), float32(I), acc), acc = fma(−float32(dmin·dx), float32(M), acc)
// (VFNMADD231PS), d and dmin of the eight rows by VCVTPH2PS. At the end
// of a group each input's eight results are one store. AVX-512 F, BW, VL
// and VNNI (Y24-Y31, the broadcasts).

// Registers of the four- and eight-input kernels: S (sums over a
// sub-block) in Y0-Y7, I in Y8-Y15, acc in Y16-Y23, one per input; the
// mask of low nibbles in Y24, the chunk's quants in Y25, scales and
// minimums in Y26, the chunk's bytes in Y27, d and dmin of the rows in
// Y28, Y29, the input's dx in Y30. Inputs 0-3 at AX + {0, 1, 2, 3}·DX,
// 4-7 at R11 + the same; their scales dx at R10 (input 0; R12 the bytes
// from one input's to the next, CX three times that, SI input 4's) and
// their sums of 32 at BX (input 0; inputs at 4·R12 bytes apart).

// RXLO(C, q, x), RXHI(C, q, x): the chunk at q(DI), its low (high)
// nibbles, times the inputs' quants at x (C: RX8C or RX4C).
#define RXLO(C, q, x) \
	VPANDD q(DI), Y24, Y25; \
	C(x, Y25)

#define RXHI(C, q, x) \
	VMOVDQU32 q(DI), Y27; \
	VPSRLW    $4, Y27, Y25; \
	VPANDD    Y24, Y25, Y25; \
	C(x, Y25)

// RXSUB(C, H, q, x): a sub-block's eight chunks from q(DI) (H: RXLO or
// RXHI) times the inputs' quants from x.
#define RXSUB(C, H, q, x) \
	H(C, q, x); \
	H(C, q+32, x+4); \
	H(C, q+64, x+8); \
	H(C, q+96, x+12); \
	H(C, q+128, x+16); \
	H(C, q+160, x+20); \
	H(C, q+192, x+24); \
	H(C, q+224, x+28)

// RX8Z, RX4Z: S zeroed; RX8ZI, RX4ZI: I.
#define RX8Z \
	RX4Z; \
	VPXORD Y4, Y4, Y4; \
	VPXORD Y5, Y5, Y5; \
	VPXORD Y6, Y6, Y6; \
	VPXORD Y7, Y7, Y7

#define RX4Z \
	VPXORD Y0, Y0, Y0; \
	VPXORD Y1, Y1, Y1; \
	VPXORD Y2, Y2, Y2; \
	VPXORD Y3, Y3, Y3

#define RX8ZI \
	RX4ZI; \
	VPXORD Y12, Y12, Y12; \
	VPXORD Y13, Y13, Y13; \
	VPXORD Y14, Y14, Y14; \
	VPXORD Y15, Y15, Y15

#define RX4ZI \
	VPXORD Y8, Y8, Y8; \
	VPXORD Y9, Y9, Y9; \
	VPXORD Y10, Y10, Y10; \
	VPXORD Y11, Y11, Y11

// RX8SC(s), RX4SC(s): I += S times the rows' scales at s(DI).
#define RX8SC(s) \
	RX4SC(s); \
	VPMULLD Y26, Y4, Y4; \
	VPADDD  Y4, Y12, Y12; \
	VPMULLD Y26, Y5, Y5; \
	VPADDD  Y5, Y13, Y13; \
	VPMULLD Y26, Y6, Y6; \
	VPADDD  Y6, Y14, Y14; \
	VPMULLD Y26, Y7, Y7; \
	VPADDD  Y7, Y15, Y15

#define RX4SC(s) \
	VPMOVZXBD s(DI), Y26; \
	VPMULLD   Y26, Y0, Y0; \
	VPADDD    Y0, Y8, Y8; \
	VPMULLD   Y26, Y1, Y1; \
	VPADDD    Y1, Y9, Y9; \
	VPMULLD   Y26, Y2, Y2; \
	VPADDD    Y2, Y10, Y10; \
	VPMULLD   Y26, Y3, Y3; \
	VPADDD    Y3, Y11, Y11

// RXPAIR(C, Z, SC, p): the super-block's sub-blocks 2p and 2p+1 into I.
#define RXPAIR(C, Z, SC, p) \
	Z; \
	RXSUB(C, RXLO, 160+256*p, 64*p); \
	SC(32+16*p); \
	Z; \
	RXSUB(C, RXHI, 160+256*p, 64*p+32); \
	SC(40+16*p)

// RX8MIN(m, x), RX4MIN(m, x): M (in S) += the rows' pairs of minimums at
// m(DI) times the inputs' pair of sums of 32 at x (broadcast).
#define RX8MIN(m, x) \
	RX4MIN(m, x); \
	VPDPWSSD.BCST x(SI), Y26, Y4; \
	VPDPWSSD.BCST x(SI)(R12*4), Y26, Y5; \
	VPDPWSSD.BCST x(SI)(R12*8), Y26, Y6; \
	VPDPWSSD.BCST x(SI)(CX*4), Y26, Y7

#define RX4MIN(m, x) \
	VPMOVZXBW     m(DI), Y26; \
	VPDPWSSD.BCST x(BX), Y26, Y0; \
	VPDPWSSD.BCST x(BX)(R12*4), Y26, Y1; \
	VPDPWSSD.BCST x(BX)(R12*8), Y26, Y2; \
	VPDPWSSD.BCST x(BX)(CX*4), Y26, Y3

// RXMINS(Z, MIN): the super-block's M into S (SI: input 4's sums).
#define RXMINS(Z, MIN) \
	Z; \
	LEAQ (BX)(R12*8), SI; \
	LEAQ (SI)(R12*8), SI; \
	MIN(96, 0); \
	MIN(112, 4); \
	MIN(128, 8); \
	MIN(144, 12)

// RXF(xd, I, M, acc): acc = fma(float32(d·dx), float32(I), acc), then
// acc = fma(−float32(dmin·dx), float32(M), acc), the eight rows at once.
#define RXF(xd, I, M, acc) \
	VBROADCASTSS xd, Y30; \
	VMULPS       Y30, Y28, Y31; \
	VCVTDQ2PS    I, I; \
	VFMADD231PS  I, Y31, acc; \
	VMULPS       Y30, Y29, Y31; \
	VCVTDQ2PS    M, M; \
	VFNMADD231PS M, Y31, acc

// RX8FS, RX4FS: the super-block's float steps (SI: input 4's dx).
#define RX8FS \
	RX4FS; \
	LEAQ (R10)(R12*4), SI; \
	RXF((SI), Y12, Y4, Y20); \
	RXF((SI)(R12*1), Y13, Y5, Y21); \
	RXF((SI)(R12*2), Y14, Y6, Y22); \
	RXF((SI)(CX*1), Y15, Y7, Y23)

#define RX4FS \
	VCVTPH2PS (DI), Y28; \
	VCVTPH2PS 16(DI), Y29; \
	RXF((R10), Y8, Y0, Y16); \
	RXF((R10)(R12*1), Y9, Y1, Y17); \
	RXF((R10)(R12*2), Y10, Y2, Y18); \
	RXF((R10)(CX*1), Y11, Y3, Y19)

// RXPROLOGUE: the arguments and strides of the multi-input kernels.
#define RXPROLOGUE \
	MOVQ      p+0(FP), DI; \
	MOVQ      groups+8(FP), R9; \
	MOVQ      nblocks+16(FP), R12; \
	MOVQ      R12, DX; \
	SHLQ      $8, DX; \
	LEAQ      (DX)(DX*2), R8; \
	SHLQ      $2, R12; \
	LEAQ      (R12)(R12*2), CX; \
	VMOVDQU32 ·q0fI(SB), Y24

// RXGROUP: a group's inputs from their first super-block.
#define RXGROUP \
	MOVQ xq+24(FP), AX; \
	LEAQ (AX)(DX*4), R11; \
	MOVQ xd+32(FP), R10; \
	MOVQ bp+40(FP), BX; \
	MOVQ nblocks+16(FP), R13

// RXPF: the next super-block's bytes, PFD ahead, prefetched (see R8PF in
// packq8_amd64.s).
#define RXPF \
	PREFETCHT0 PFD+0(DI); \
	PREFETCHT0 PFD+64(DI); \
	PREFETCHT0 PFD+128(DI); \
	PREFETCHT0 PFD+192(DI); \
	PREFETCHT0 PFD+256(DI); \
	PREFETCHT0 PFD+320(DI); \
	PREFETCHT0 PFD+384(DI); \
	PREFETCHT0 PFD+448(DI); \
	PREFETCHT0 PFD+512(DI); \
	PREFETCHT0 PFD+576(DI); \
	PREFETCHT0 PFD+640(DI); \
	PREFETCHT0 PFD+704(DI); \
	PREFETCHT0 PFD+768(DI); \
	PREFETCHT0 PFD+832(DI); \
	PREFETCHT0 PFD+896(DI); \
	PREFETCHT0 PFD+960(DI); \
	PREFETCHT0 PFD+1024(DI); \
	PREFETCHT0 PFD+1088(DI); \
	PREFETCHT0 PFD+1152(DI)

// RXNEXT: the next super-block (DECQ of the count last).
#define RXNEXT \
	ADDQ $1184, DI; \
	ADDQ $256, AX; \
	ADDQ $256, R11; \
	ADDQ $4, R10; \
	ADDQ $16, BX; \
	DECQ R13

// func dotQ4KRx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp *int16, out *float32, outStride int)
TEXT ·dotQ4KRx8VNNI(SB), NOSPLIT, $0-64
	RXPROLOGUE

rx8group:
	RXGROUP
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y18, Y18, Y18
	VPXORD Y19, Y19, Y19
	VPXORD Y20, Y20, Y20
	VPXORD Y21, Y21, Y21
	VPXORD Y22, Y22, Y22
	VPXORD Y23, Y23, Y23

rx8block:
	RXPF
	RX8ZI
	RXPAIR(RX8C, RX8Z, RX8SC, 0)
	RXPAIR(RX8C, RX8Z, RX8SC, 1)
	RXPAIR(RX8C, RX8Z, RX8SC, 2)
	RXPAIR(RX8C, RX8Z, RX8SC, 3)
	RXMINS(RX8Z, RX8MIN)
	RX8FS
	RXNEXT
	JNZ rx8block
	RX8OUT
	DECQ R9
	JNZ  rx8group
	VZEROUPPER
	RET

// func dotQ4KRx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp *int16, out *float32, outStride int)
TEXT ·dotQ4KRx4VNNI(SB), NOSPLIT, $0-64
	RXPROLOGUE

rx4group:
	RXGROUP
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y18, Y18, Y18
	VPXORD Y19, Y19, Y19

rx4block:
	RXPF
	RX4ZI
	RXPAIR(RX4C, RX4Z, RX4SC, 0)
	RXPAIR(RX4C, RX4Z, RX4SC, 1)
	RXPAIR(RX4C, RX4Z, RX4SC, 2)
	RXPAIR(RX4C, RX4Z, RX4SC, 3)
	RXMINS(RX4Z, RX4MIN)
	RX4FS
	RXNEXT
	JNZ rx4block
	RX4OUT
	DECQ R9
	JNZ  rx4group
	VZEROUPPER
	RET

// The one-input kernel: each chunk loaded once, its low nibbles times
// the input's quants at x into lo, its high ones times those at y into
// hi; even and odd chunks into separate registers (Y0, Y2 and Y1, Y3:
// shorter dependency chains; integers, so the sums are the same). I in
// Y8, M in Y4, acc in Y16.

// RX1C(q, x, y, lo, hi): one chunk.
#define RX1C(q, x, y, lo, hi) \
	VMOVDQU32     q(DI), Y27; \
	VPANDD        Y24, Y27, Y25; \
	VPSRLW        $4, Y27, Y26; \
	VPANDD        Y24, Y26, Y26; \
	VPDPBUSD.BCST x(AX), Y25, lo; \
	VPDPBUSD.BCST y(AX), Y26, hi

// RX1PAIR(p): sub-blocks 2p and 2p+1 into I.
#define RX1PAIR(p) \
	VPXORD    Y0, Y0, Y0; \
	VPXORD    Y1, Y1, Y1; \
	VPXORD    Y2, Y2, Y2; \
	VPXORD    Y3, Y3, Y3; \
	RX1C(160+256*p, 64*p, 64*p+32, Y0, Y2); \
	RX1C(192+256*p, 64*p+4, 64*p+36, Y1, Y3); \
	RX1C(224+256*p, 64*p+8, 64*p+40, Y0, Y2); \
	RX1C(256+256*p, 64*p+12, 64*p+44, Y1, Y3); \
	RX1C(288+256*p, 64*p+16, 64*p+48, Y0, Y2); \
	RX1C(320+256*p, 64*p+20, 64*p+52, Y1, Y3); \
	RX1C(352+256*p, 64*p+24, 64*p+56, Y0, Y2); \
	RX1C(384+256*p, 64*p+28, 64*p+60, Y1, Y3); \
	VPADDD    Y1, Y0, Y0; \
	VPADDD    Y3, Y2, Y2; \
	VPMOVZXBD 32+16*p(DI), Y26; \
	VPMULLD   Y26, Y0, Y0; \
	VPADDD    Y0, Y8, Y8; \
	VPMOVZXBD 40+16*p(DI), Y26; \
	VPMULLD   Y26, Y2, Y2; \
	VPADDD    Y2, Y8, Y8

// RX1MIN(m, x): M += the rows' pairs of minimums at m(DI) times the
// input's pair of sums of 32 at x(BX).
#define RX1MIN(m, x) \
	VPMOVZXBW     m(DI), Y26; \
	VPDPWSSD.BCST x(BX), Y26, Y4

// func dotQ4KRx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp *int16, out *float32, outStride int)
TEXT ·dotQ4KRx1VNNI(SB), NOSPLIT, $0-64
	MOVQ      p+0(FP), DI
	MOVQ      groups+8(FP), R9
	MOVQ      out+48(FP), SI
	VMOVDQU32 ·q0fI(SB), Y24

rx1group:
	MOVQ   xq+24(FP), AX
	MOVQ   xd+32(FP), R10
	MOVQ   bp+40(FP), BX
	MOVQ   nblocks+16(FP), R13
	VPXORD Y16, Y16, Y16

rx1block:
	VPXORD Y8, Y8, Y8
	RX1PAIR(0)
	RX1PAIR(1)
	RX1PAIR(2)
	RX1PAIR(3)
	VPXORD Y4, Y4, Y4
	RX1MIN(96, 0)
	RX1MIN(112, 4)
	RX1MIN(128, 8)
	RX1MIN(144, 12)
	VCVTPH2PS (DI), Y28
	VCVTPH2PS 16(DI), Y29
	RXF((R10), Y8, Y4, Y16)
	ADDQ $1184, DI
	ADDQ $256, AX
	ADDQ $4, R10
	ADDQ $16, BX
	DECQ R13
	JNZ  rx1block
	VMOVUPS Y16, (SI)
	ADDQ    $32, SI
	DECQ    R9
	JNZ     rx1group
	VZEROUPPER
	RET
