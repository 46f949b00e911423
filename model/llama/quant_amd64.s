#include "textflag.h"
#include "hsum_amd64.h"

// The quantised kernels; dotQuantGeneric states each type's order and
// these perform the same operations. The x4 kernels (and the 32-weight
// types' x1) decode a block's quants into the frame as int8 (Q: 256 bytes
// at 0(SP); 32 for the 32-weight types); the one-row K-quant kernels keep
// them in registers (Q4_K reads them straight from the block); the
// K-quants' sub-block scales go to the frame as float32 (D: at 256(SP)).
// Then per sub-block: per group of 8 quants VPMOVSXBD (or VPMOVZXBD) and
// VCVTDQ2PS (exact), the lane's first product VMULPS, the next ones
// VFMADD231PS into its chain, then VFMADD231PS of the scale and the chain
// into the accumulator of the sub-block's (block's) parity. The x1
// kernels apply rows consecutive rows to one vector; the x4 kernels apply
// each block of a row to four vectors (x + r·cols floats, r < 4; their
// blockSums at sums + r·cols/32) while it is decoded in the frame, writing
// out[r·outStride + i]. The macros below are the pieces every kernel is
// written with.

DATA q0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q0f<>(SB), RODATA|NOPTR, $32

DATA q10<>+0(SB)/8, $0x1010101010101010
DATA q10<>+8(SB)/8, $0x1010101010101010
DATA q10<>+16(SB)/8, $0x1010101010101010
DATA q10<>+24(SB)/8, $0x1010101010101010
GLOBL q10<>(SB), RODATA|NOPTR, $32

DATA q30<>+0(SB)/8, $0x3030303030303030
DATA q30<>+8(SB)/8, $0x3030303030303030
DATA q30<>+16(SB)/8, $0x3030303030303030
DATA q30<>+24(SB)/8, $0x3030303030303030
GLOBL q30<>(SB), RODATA|NOPTR, $32

DATA q20<>+0(SB)/8, $0x2020202020202020
DATA q20<>+8(SB)/8, $0x2020202020202020
DATA q20<>+16(SB)/8, $0x2020202020202020
DATA q20<>+24(SB)/8, $0x2020202020202020
GLOBL q20<>(SB), RODATA|NOPTR, $32

DATA d0f<>+0(SB)/8, $0x0000000f0000000f
DATA d0f<>+8(SB)/8, $0x0000000f0000000f
DATA d0f<>+16(SB)/8, $0x0000000f0000000f
DATA d0f<>+24(SB)/8, $0x0000000f0000000f
GLOBL d0f<>(SB), RODATA|NOPTR, $32

DATA q08<>+0(SB)/8, $0x0808080808080808
DATA q08<>+8(SB)/8, $0x0808080808080808
DATA q08<>+16(SB)/8, $0x0808080808080808
DATA q08<>+24(SB)/8, $0x0808080808080808
GLOBL q08<>(SB), RODATA|NOPTR, $32

// qhbyte: VPSHUFB indices copying byte i/8 of a broadcast uint32 to byte i;
// qhbit: the bit of byte i it keeps, 1 << (i mod 8).
DATA qhbyte<>+0(SB)/8, $0x0000000000000000
DATA qhbyte<>+8(SB)/8, $0x0101010101010101
DATA qhbyte<>+16(SB)/8, $0x0202020202020202
DATA qhbyte<>+24(SB)/8, $0x0303030303030303
GLOBL qhbyte<>(SB), RODATA|NOPTR, $32

DATA qhbit<>+0(SB)/8, $0x8040201008040201
DATA qhbit<>+8(SB)/8, $0x8040201008040201
DATA qhbit<>+16(SB)/8, $0x8040201008040201
DATA qhbit<>+24(SB)/8, $0x8040201008040201
GLOBL qhbit<>(SB), RODATA|NOPTR, $32

// SUB32X1(q, x, D, A): the 32 quants at q(SP) times the vector at x(AX),
// each lane's chain then times the scale D into A. Clobbers Y8, Y12.
#define SUB32X1(q, x, D, A) \
	VPMOVSXBD q+0(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMULPS x+0(AX), Y12, Y8; \
	VPMOVSXBD q+8(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+32(AX), Y12, Y8; \
	VPMOVSXBD q+16(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+64(AX), Y12, Y8; \
	VPMOVSXBD q+24(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+96(AX), Y12, Y8; \
	VFMADD231PS Y8, D, A

// SUB32X4(q, x, D, A0, A1, A2, A3): the 32 quants at q(SP) times each of the four vectors at x(AX) (strides DX; R8 = 3·DX),
// each lane's chain then times the scale D into A0-A3. Clobbers Y8-Y11, Y12.
#define SUB32X4(q, x, D, A0, A1, A2, A3) \
	VPMOVSXBD q+0(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMULPS x+0(AX), Y12, Y8; \
	VMULPS x+0(AX)(DX*1), Y12, Y9; \
	VMULPS x+0(AX)(DX*2), Y12, Y10; \
	VMULPS x+0(AX)(R8*1), Y12, Y11; \
	VPMOVSXBD q+8(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+32(AX), Y12, Y8; \
	VFMADD231PS x+32(AX)(DX*1), Y12, Y9; \
	VFMADD231PS x+32(AX)(DX*2), Y12, Y10; \
	VFMADD231PS x+32(AX)(R8*1), Y12, Y11; \
	VPMOVSXBD q+16(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+64(AX), Y12, Y8; \
	VFMADD231PS x+64(AX)(DX*1), Y12, Y9; \
	VFMADD231PS x+64(AX)(DX*2), Y12, Y10; \
	VFMADD231PS x+64(AX)(R8*1), Y12, Y11; \
	VPMOVSXBD q+24(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+96(AX), Y12, Y8; \
	VFMADD231PS x+96(AX)(DX*1), Y12, Y9; \
	VFMADD231PS x+96(AX)(DX*2), Y12, Y10; \
	VFMADD231PS x+96(AX)(R8*1), Y12, Y11; \
	VFMADD231PS Y8, D, A0; \
	VFMADD231PS Y9, D, A1; \
	VFMADD231PS Y10, D, A2; \
	VFMADD231PS Y11, D, A3

// SUB16X1(q, x, D, A): the 16 quants at q(SP) times the vector at x(AX),
// each lane's chain then times the scale D into A. Clobbers Y8, Y12.
#define SUB16X1(q, x, D, A) \
	VPMOVSXBD q+0(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMULPS x+0(AX), Y12, Y8; \
	VPMOVSXBD q+8(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+32(AX), Y12, Y8; \
	VFMADD231PS Y8, D, A

// SUB16X4(q, x, D, A0, A1, A2, A3): the 16 quants at q(SP) times each of the four vectors at x(AX) (strides DX; R8 = 3·DX),
// each lane's chain then times the scale D into A0-A3. Clobbers Y8-Y11, Y12.
#define SUB16X4(q, x, D, A0, A1, A2, A3) \
	VPMOVSXBD q+0(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMULPS x+0(AX), Y12, Y8; \
	VMULPS x+0(AX)(DX*1), Y12, Y9; \
	VMULPS x+0(AX)(DX*2), Y12, Y10; \
	VMULPS x+0(AX)(R8*1), Y12, Y11; \
	VPMOVSXBD q+8(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+32(AX), Y12, Y8; \
	VFMADD231PS x+32(AX)(DX*1), Y12, Y9; \
	VFMADD231PS x+32(AX)(DX*2), Y12, Y10; \
	VFMADD231PS x+32(AX)(R8*1), Y12, Y11; \
	VFMADD231PS Y8, D, A0; \
	VFMADD231PS Y9, D, A1; \
	VFMADD231PS Y10, D, A2; \
	VFMADD231PS Y11, D, A3

// Q4KPAIRX1(src, x, de, do): Q4_K sub-blocks 2c and 2c+1 straight from their 32 nibble bytes at src(CX) (VPMOVZXBD, then the low nibbles for 2c, the high for 2c+1; Y15 holds 15 per lane), times the vector at x(AX) and x+128(AX), their scales at de(SP) and do(SP) into Y0 and Y1. Clobbers Y8-Y13.
#define Q4KPAIRX1(src, x, de, do) \
	VPMOVZXBD src+0(CX), Y12; \
	VPSRLD $4, Y12, Y13; \
	VPAND Y15, Y12, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VCVTDQ2PS Y13, Y13; \
	VMULPS x+0(AX), Y12, Y8; \
	VMULPS x+128(AX), Y13, Y9; \
	VPMOVZXBD src+8(CX), Y12; \
	VPSRLD $4, Y12, Y13; \
	VPAND Y15, Y12, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VCVTDQ2PS Y13, Y13; \
	VFMADD231PS x+32(AX), Y12, Y8; \
	VFMADD231PS x+160(AX), Y13, Y9; \
	VPMOVZXBD src+16(CX), Y12; \
	VPSRLD $4, Y12, Y13; \
	VPAND Y15, Y12, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VCVTDQ2PS Y13, Y13; \
	VFMADD231PS x+64(AX), Y12, Y8; \
	VFMADD231PS x+192(AX), Y13, Y9; \
	VPMOVZXBD src+24(CX), Y12; \
	VPSRLD $4, Y12, Y13; \
	VPAND Y15, Y12, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VCVTDQ2PS Y13, Y13; \
	VFMADD231PS x+96(AX), Y12, Y8; \
	VFMADD231PS x+224(AX), Y13, Y9; \
	VBROADCASTSS de(SP), Y10; \
	VFMADD231PS Y8, Y10, Y0; \
	VBROADCASTSS do(SP), Y11; \
	VFMADD231PS Y9, Y11, Y1

// SUB32REGX1(Yq, Xq, x, D, A): SUB32X1 with the 32 quants in register Yq (Xq its low half; expanded in registers, not reloaded from the frame), chain in Y14, scale at D(SP) broadcast into Y15, into A. Clobbers Y12-Y15.
#define SUB32REGX1(Yq, Xq, x, D, A) \
	VPMOVSXBD Xq, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMULPS x+0(AX), Y12, Y14; \
	VPSRLDQ $8, Xq, X13; \
	VPMOVSXBD X13, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+32(AX), Y12, Y14; \
	VEXTRACTI128 $1, Yq, X13; \
	VPMOVSXBD X13, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+64(AX), Y12, Y14; \
	VPSRLDQ $8, X13, X13; \
	VPMOVSXBD X13, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+96(AX), Y12, Y14; \
	VBROADCASTSS D(SP), Y15; \
	VFMADD231PS Y14, Y15, A

// Q6PAIRX1(x, de, do): Q6_K sub-blocks 2k (even) and 2k+1 (odd) with their 32 quants in Y11 (as Q6LOW/Q6HIGH leave them), times the vector at x(AX), scales at de(SP) and do(SP), into Y0 and Y1. Clobbers Y8, Y9, Y11-Y13, Y15.
#define Q6PAIRX1(x, de, do) \
	VPMOVSXBD X11, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMULPS x+0(AX), Y12, Y8; \
	VPSRLDQ $8, X11, X13; \
	VPMOVSXBD X13, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+32(AX), Y12, Y8; \
	VEXTRACTI128 $1, Y11, X11; \
	VPMOVSXBD X11, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMULPS x+64(AX), Y12, Y9; \
	VPSRLDQ $8, X11, X13; \
	VPMOVSXBD X13, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+96(AX), Y12, Y9; \
	VBROADCASTSS de(SP), Y15; \
	VFMADD231PS Y8, Y15, Y0; \
	VBROADCASTSS do(SP), Y15; \
	VFMADD231PS Y9, Y15, Y1

// KSCALES: Q4_K and Q5_K block at CX: d·sc_k (k < 8) into D (256(SP)), dmin·m_k into Y14 (kScales's unpacking, four bytes at a time).
#define KSCALES \
	VPBROADCASTW (CX), X12; \
	VCVTPH2PS X12, Y12; \
	VPBROADCASTW 2(CX), X13; \
	VCVTPH2PS X13, Y13; \
	MOVL 4(CX), R10; \
	MOVL 12(CX), R13; \
	MOVL R10, R14; \
	SHRL $2, R14; \
	ANDL $0x30303030, R14; \
	ANDL $0x0f0f0f0f, R13; \
	ORL R13, R14; \
	ANDL $0x3f3f3f3f, R10; \
	SHLQ $32, R14; \
	ORQ R10, R14; \
	MOVQ R14, X14; \
	VPMOVZXBD X14, Y14; \
	VCVTDQ2PS Y14, Y14; \
	VMULPS Y12, Y14, Y14; \
	VMOVUPS Y14, 256(SP); \
	MOVL 8(CX), R10; \
	MOVL 12(CX), R13; \
	SHRL $4, R13; \
	ANDL $0x0f0f0f0f, R13; \
	MOVL R10, R14; \
	SHRL $2, R14; \
	ANDL $0x30303030, R14; \
	ORL R13, R14; \
	ANDL $0x3f3f3f3f, R10; \
	SHLQ $32, R14; \
	ORQ R10, R14; \
	MOVQ R14, X14; \
	VPMOVZXBD X14, Y14; \
	VCVTDQ2PS Y14, Y14; \
	VMULPS Y13, Y14, Y14

// NIBBLES(src, q): the 32 bytes at src(CX): low nibbles to q(SP), high nibbles to q+32(SP) (Q4_K's sub-blocks 2c, 2c+1).
#define NIBBLES(src, q) \
	VMOVDQU src(CX), Y8; \
	VPAND q0f<>(SB), Y8, Y9; \
	VMOVDQU Y9, q(SP); \
	VPSRLW $4, Y8, Y8; \
	VPAND q0f<>(SB), Y8, Y8; \
	VMOVDQU Y8, q+32(SP)

// Q5NIBBLES(src, q, OP0, C0, OP1, C1): NIBBLES with the fifth bits: qh (Y10) shifted by OP0 $C0 (VPSLLW or VPSRLW) puts bit 2c of each byte at bit 4, OP1 $C1 bit 2c+1.
#define Q5NIBBLES(src, q, OP0, C0, OP1, C1) \
	VMOVDQU src(CX), Y8; \
	VPAND q0f<>(SB), Y8, Y9; \
	VPSRLW $4, Y8, Y8; \
	VPAND q0f<>(SB), Y8, Y8; \
	OP0 $C0, Y10, Y11; \
	VPAND q10<>(SB), Y11, Y11; \
	VPOR Y11, Y9, Y9; \
	VMOVDQU Y9, q(SP); \
	OP1 $C1, Y10, Y11; \
	VPAND q10<>(SB), Y11, Y11; \
	VPOR Y11, Y8, Y8; \
	VMOVDQU Y8, q+32(SP)

// Q5NIBREG(src, OP0, C0, OP1, C1): Q5NIBBLES leaving the quants of sub-block 2c in Y9 and of 2c+1 in Y8 instead of the frame.
#define Q5NIBREG(src, OP0, C0, OP1, C1) \
	VMOVDQU src(CX), Y8; \
	VPAND q0f<>(SB), Y8, Y9; \
	VPSRLW $4, Y8, Y8; \
	VPAND q0f<>(SB), Y8, Y8; \
	OP0 $C0, Y10, Y11; \
	VPAND q10<>(SB), Y11, Y11; \
	VPOR Y11, Y9, Y9; \
	OP1 $C1, Y10, Y11; \
	VPAND q10<>(SB), Y11, Y11; \
	VPOR Y11, Y8, Y8

// Q6LOW(src, q, OP, C), Q6HIGH(…): quants 32s..32s+31 of a Q6_K half: the low (high) nibbles of the 32 ql bytes at src(CX), bits 2s..2s+1 of qh (Y10; OP $C moves them to bits 4-5), minus 32, to q(SP).
// Q6LOWREG(src, OP, C, M0F, M30, M20), Q6HIGHREG(…): Q6LOW, Q6HIGH leaving the quants in Y11; the masks 0x0f, 0x30 and 0x20 per byte are operands (registers or the constants).
#define Q6LOWREG(src, OP, C, M0F, M30, M20) \
	VMOVDQU src(CX), Y11; \
	VPAND M0F, Y11, Y11; \
	OP $C, Y10, Y12; \
	VPAND M30, Y12, Y12; \
	VPOR Y12, Y11, Y11; \
	VPSUBB M20, Y11, Y11

#define Q6HIGHREG(src, OP, C, M0F, M30, M20) \
	VMOVDQU src(CX), Y11; \
	VPSRLW $4, Y11, Y11; \
	VPAND M0F, Y11, Y11; \
	OP $C, Y10, Y12; \
	VPAND M30, Y12, Y12; \
	VPOR Y12, Y11, Y11; \
	VPSUBB M20, Y11, Y11

#define Q6LOW(src, q, OP, C) \
	Q6LOWREG(src, OP, C, q0f<>(SB), q30<>(SB), q20<>(SB)); \
	VMOVDQU Y11, q(SP)

#define Q6HIGH(src, q, OP, C) \
	Q6HIGHREG(src, OP, C, q0f<>(SB), q30<>(SB), q20<>(SB)); \
	VMOVDQU Y11, q(SP)

// Q4NIBBLES(src): the 16 nibble bytes at src(CX) as 32 int8 quants (low nibbles first) into Y8, unsigned.
#define Q4NIBBLES(src) \
	VMOVDQU src(CX), X8; \
	VPSRLW $4, X8, X9; \
	VINSERTI128 $1, X9, Y8, Y8; \
	VPAND q0f<>(SB), Y8, Y8

// Q5HIGH(src): the uint32 at src(CX) as 32 bytes, byte i 0x10 when bit i is set, into Y9.
#define Q5HIGH(src) \
	VPBROADCASTD src(CX), Y9; \
	VPSHUFB qhbyte<>(SB), Y9, Y9; \
	VPAND qhbit<>(SB), Y9, Y9; \
	VPCMPEQB qhbit<>(SB), Y9, Y9; \
	VPAND q10<>(SB), Y9, Y9

// func dotQ4Kx1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q4_K rows times one vector (the quants straight from the block: Q4KPAIRX1).
TEXT ·dotQ4Kx1AVX2(SB), 0, $320-48
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $10, DX // vector stride in bytes: nblocks·256 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ4Kx1AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y4, Y4, Y4
	VMOVDQU d0f<>(SB), Y15

dotQ4Kx1AVX2block:
	PREFETCHT0 576(CX)
	KSCALES
	VFMADD231PS (R9), Y14, Y4 // min terms: lane k is sub-block k
	Q4KPAIRX1(16, 0, 256, 260)
	Q4KPAIRX1(48, 256, 264, 268)
	Q4KPAIRX1(80, 512, 272, 276)
	Q4KPAIRX1(112, 768, 280, 284)
	ADDQ $144, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ4Kx1AVX2block

	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X12)
	HSUM(Y4, X4, X12)
	VSUBSS X4, X0, X0
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ4Kx1AVX2row
	VZEROUPPER
	RET

// func dotQ4Kx4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q4_K rows times four vectors.
TEXT ·dotQ4Kx4AVX2(SB), 0, $448-56
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $10, DX // vector stride in bytes: nblocks·256 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ4Kx4AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVUPS Y0, 320(SP)
	VMOVUPS Y0, 352(SP)
	VMOVUPS Y0, 384(SP)
	VMOVUPS Y0, 416(SP)

dotQ4Kx4AVX2block:
	PREFETCHT0 576(CX)
	KSCALES
	NIBBLES(16, 0)
	NIBBLES(48, 64)
	NIBBLES(80, 128)
	NIBBLES(112, 192)
	LEAQ (R9)(SI*2), R10
	VMOVUPS 320(SP), Y8
	VFMADD231PS (R9), Y14, Y8 // min terms: lane k is sub-block k
	VMOVUPS Y8, 320(SP)
	VMOVUPS 352(SP), Y8
	VFMADD231PS (R9)(SI*1), Y14, Y8 // min terms: lane k is sub-block k
	VMOVUPS Y8, 352(SP)
	VMOVUPS 384(SP), Y8
	VFMADD231PS (R9)(SI*2), Y14, Y8 // min terms: lane k is sub-block k
	VMOVUPS Y8, 384(SP)
	VMOVUPS 416(SP), Y8
	VFMADD231PS (R10)(SI*1), Y14, Y8 // min terms: lane k is sub-block k
	VMOVUPS Y8, 416(SP)
	VBROADCASTSS 256(SP), Y13
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 260(SP), Y13
	SUB32X4(32, 128, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 264(SP), Y13
	SUB32X4(64, 256, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 268(SP), Y13
	SUB32X4(96, 384, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 272(SP), Y13
	SUB32X4(128, 512, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 276(SP), Y13
	SUB32X4(160, 640, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 280(SP), Y13
	SUB32X4(192, 768, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 284(SP), Y13
	SUB32X4(224, 896, Y13, Y4, Y5, Y6, Y7)
	ADDQ $144, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ4Kx4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	VADDPS Y4, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVUPS 320(SP), Y8
	HSUM(Y8, X8, X12)
	VSUBSS X8, X0, X0
	VMOVSS X0, (R13)
	ADDQ R10, R13
	VADDPS Y5, Y1, Y1
	HSUM(Y1, X1, X12)
	VMOVUPS 352(SP), Y8
	HSUM(Y8, X8, X12)
	VSUBSS X8, X1, X1
	VMOVSS X1, (R13)
	ADDQ R10, R13
	VADDPS Y6, Y2, Y2
	HSUM(Y2, X2, X12)
	VMOVUPS 384(SP), Y8
	HSUM(Y8, X8, X12)
	VSUBSS X8, X2, X2
	VMOVSS X2, (R13)
	ADDQ R10, R13
	VADDPS Y7, Y3, Y3
	HSUM(Y3, X3, X12)
	VMOVUPS 416(SP), Y8
	HSUM(Y8, X8, X12)
	VSUBSS X8, X3, X3
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ4Kx4AVX2row
	VZEROUPPER
	RET

// func dotQ5Kx1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q5_K rows times one vector (the quants decoded into registers: Q5NIBREG, SUB32REGX1).
TEXT ·dotQ5Kx1AVX2(SB), 0, $320-48
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $10, DX // vector stride in bytes: nblocks·256 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ5Kx1AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y4, Y4, Y4

dotQ5Kx1AVX2block:
	PREFETCHT0 704(CX)
	KSCALES
	VFMADD231PS (R9), Y14, Y4 // min terms: lane k is sub-block k
	VMOVDQU 16(CX), Y10
	Q5NIBREG(48, VPSLLW, 4, VPSLLW, 3)
	SUB32REGX1(Y9, X9, 0, 256, Y0)
	SUB32REGX1(Y8, X8, 128, 260, Y1)
	Q5NIBREG(80, VPSLLW, 2, VPSLLW, 1)
	SUB32REGX1(Y9, X9, 256, 264, Y0)
	SUB32REGX1(Y8, X8, 384, 268, Y1)
	Q5NIBREG(112, VPSLLW, 0, VPSRLW, 1)
	SUB32REGX1(Y9, X9, 512, 272, Y0)
	SUB32REGX1(Y8, X8, 640, 276, Y1)
	Q5NIBREG(144, VPSRLW, 2, VPSRLW, 3)
	SUB32REGX1(Y9, X9, 768, 280, Y0)
	SUB32REGX1(Y8, X8, 896, 284, Y1)
	ADDQ $176, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ5Kx1AVX2block

	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X12)
	HSUM(Y4, X4, X12)
	VSUBSS X4, X0, X0
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ5Kx1AVX2row
	VZEROUPPER
	RET

// func dotQ5Kx4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q5_K rows times four vectors.
TEXT ·dotQ5Kx4AVX2(SB), 0, $448-56
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $10, DX // vector stride in bytes: nblocks·256 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ5Kx4AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVUPS Y0, 320(SP)
	VMOVUPS Y0, 352(SP)
	VMOVUPS Y0, 384(SP)
	VMOVUPS Y0, 416(SP)

dotQ5Kx4AVX2block:
	PREFETCHT0 704(CX)
	KSCALES
	VMOVDQU 16(CX), Y10
	Q5NIBBLES(48, 0, VPSLLW, 4, VPSLLW, 3)
	Q5NIBBLES(80, 64, VPSLLW, 2, VPSLLW, 1)
	Q5NIBBLES(112, 128, VPSLLW, 0, VPSRLW, 1)
	Q5NIBBLES(144, 192, VPSRLW, 2, VPSRLW, 3)
	LEAQ (R9)(SI*2), R10
	VMOVUPS 320(SP), Y8
	VFMADD231PS (R9), Y14, Y8 // min terms: lane k is sub-block k
	VMOVUPS Y8, 320(SP)
	VMOVUPS 352(SP), Y8
	VFMADD231PS (R9)(SI*1), Y14, Y8 // min terms: lane k is sub-block k
	VMOVUPS Y8, 352(SP)
	VMOVUPS 384(SP), Y8
	VFMADD231PS (R9)(SI*2), Y14, Y8 // min terms: lane k is sub-block k
	VMOVUPS Y8, 384(SP)
	VMOVUPS 416(SP), Y8
	VFMADD231PS (R10)(SI*1), Y14, Y8 // min terms: lane k is sub-block k
	VMOVUPS Y8, 416(SP)
	VBROADCASTSS 256(SP), Y13
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 260(SP), Y13
	SUB32X4(32, 128, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 264(SP), Y13
	SUB32X4(64, 256, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 268(SP), Y13
	SUB32X4(96, 384, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 272(SP), Y13
	SUB32X4(128, 512, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 276(SP), Y13
	SUB32X4(160, 640, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 280(SP), Y13
	SUB32X4(192, 768, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 284(SP), Y13
	SUB32X4(224, 896, Y13, Y4, Y5, Y6, Y7)
	ADDQ $176, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ5Kx4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	VADDPS Y4, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVUPS 320(SP), Y8
	HSUM(Y8, X8, X12)
	VSUBSS X8, X0, X0
	VMOVSS X0, (R13)
	ADDQ R10, R13
	VADDPS Y5, Y1, Y1
	HSUM(Y1, X1, X12)
	VMOVUPS 352(SP), Y8
	HSUM(Y8, X8, X12)
	VSUBSS X8, X1, X1
	VMOVSS X1, (R13)
	ADDQ R10, R13
	VADDPS Y6, Y2, Y2
	HSUM(Y2, X2, X12)
	VMOVUPS 384(SP), Y8
	HSUM(Y8, X8, X12)
	VSUBSS X8, X2, X2
	VMOVSS X2, (R13)
	ADDQ R10, R13
	VADDPS Y7, Y3, Y3
	HSUM(Y3, X3, X12)
	VMOVUPS 416(SP), Y8
	HSUM(Y8, X8, X12)
	VSUBSS X8, X3, X3
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ5Kx4AVX2row
	VZEROUPPER
	RET

// func dotQ6Kx1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q6_K rows times one vector (the quants decoded into registers: Q6LOWREG, Q6HIGHREG, Q6PAIRX1).
TEXT ·dotQ6Kx1AVX2(SB), 0, $320-48
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $10, DX // vector stride in bytes: nblocks·256 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ6Kx1AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VMOVDQU q0f<>(SB), Y5
	VMOVDQU q30<>(SB), Y6
	VMOVDQU q20<>(SB), Y7

dotQ6Kx1AVX2block:
	PREFETCHT0 840(CX)
	VPBROADCASTW 208(CX), X12
	VCVTPH2PS X12, Y12
	VPMOVSXBD 192(CX), Y13
	VCVTDQ2PS Y13, Y13
	VMULPS Y12, Y13, Y13
	VMOVUPS Y13, 256(SP)
	VPMOVSXBD 200(CX), Y13
	VCVTDQ2PS Y13, Y13
	VMULPS Y12, Y13, Y13
	VMOVUPS Y13, 288(SP)
	VMOVDQU 128(CX), Y10
	Q6LOWREG(0, VPSLLW, 4, Y5, Y6, Y7)
	Q6PAIRX1(0, 256, 260)
	Q6LOWREG(32, VPSLLW, 2, Y5, Y6, Y7)
	Q6PAIRX1(128, 264, 268)
	Q6HIGHREG(0, VPSLLW, 0, Y5, Y6, Y7)
	Q6PAIRX1(256, 272, 276)
	Q6HIGHREG(32, VPSRLW, 2, Y5, Y6, Y7)
	Q6PAIRX1(384, 280, 284)
	VMOVDQU 160(CX), Y10
	Q6LOWREG(64, VPSLLW, 4, Y5, Y6, Y7)
	Q6PAIRX1(512, 288, 292)
	Q6LOWREG(96, VPSLLW, 2, Y5, Y6, Y7)
	Q6PAIRX1(640, 296, 300)
	Q6HIGHREG(64, VPSLLW, 0, Y5, Y6, Y7)
	Q6PAIRX1(768, 304, 308)
	Q6HIGHREG(96, VPSRLW, 2, Y5, Y6, Y7)
	Q6PAIRX1(896, 312, 316)
	ADDQ $210, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ6Kx1AVX2block

	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ6Kx1AVX2row
	VZEROUPPER
	RET

// func dotQ6Kx4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q6_K rows times four vectors.
TEXT ·dotQ6Kx4AVX2(SB), 0, $448-56
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $10, DX // vector stride in bytes: nblocks·256 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ6Kx4AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

dotQ6Kx4AVX2block:
	PREFETCHT0 840(CX)
	VPBROADCASTW 208(CX), X12
	VCVTPH2PS X12, Y12
	VPMOVSXBD 192(CX), Y13
	VCVTDQ2PS Y13, Y13
	VMULPS Y12, Y13, Y13
	VMOVUPS Y13, 256(SP)
	VPMOVSXBD 200(CX), Y13
	VCVTDQ2PS Y13, Y13
	VMULPS Y12, Y13, Y13
	VMOVUPS Y13, 288(SP)
	VMOVDQU 128(CX), Y10
	Q6LOW(0, 0, VPSLLW, 4)
	Q6LOW(32, 32, VPSLLW, 2)
	Q6HIGH(0, 64, VPSLLW, 0)
	Q6HIGH(32, 96, VPSRLW, 2)
	VMOVDQU 160(CX), Y10
	Q6LOW(64, 128, VPSLLW, 4)
	Q6LOW(96, 160, VPSLLW, 2)
	Q6HIGH(64, 192, VPSLLW, 0)
	Q6HIGH(96, 224, VPSRLW, 2)
	VBROADCASTSS 256(SP), Y13
	SUB16X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 260(SP), Y13
	SUB16X4(16, 64, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 264(SP), Y13
	SUB16X4(32, 128, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 268(SP), Y13
	SUB16X4(48, 192, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 272(SP), Y13
	SUB16X4(64, 256, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 276(SP), Y13
	SUB16X4(80, 320, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 280(SP), Y13
	SUB16X4(96, 384, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 284(SP), Y13
	SUB16X4(112, 448, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 288(SP), Y13
	SUB16X4(128, 512, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 292(SP), Y13
	SUB16X4(144, 576, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 296(SP), Y13
	SUB16X4(160, 640, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 300(SP), Y13
	SUB16X4(176, 704, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 304(SP), Y13
	SUB16X4(192, 768, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 308(SP), Y13
	SUB16X4(208, 832, Y13, Y4, Y5, Y6, Y7)
	VBROADCASTSS 312(SP), Y13
	SUB16X4(224, 896, Y13, Y0, Y1, Y2, Y3)
	VBROADCASTSS 316(SP), Y13
	SUB16X4(240, 960, Y13, Y4, Y5, Y6, Y7)
	ADDQ $210, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ6Kx4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	VADDPS Y4, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R13)
	ADDQ R10, R13
	VADDPS Y5, Y1, Y1
	HSUM(Y1, X1, X12)
	VMOVSS X1, (R13)
	ADDQ R10, R13
	VADDPS Y6, Y2, Y2
	HSUM(Y2, X2, X12)
	VMOVSS X2, (R13)
	ADDQ R10, R13
	VADDPS Y7, Y3, Y3
	HSUM(Y3, X3, X12)
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ6Kx4AVX2row
	VZEROUPPER
	RET

// func dotQ40x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q4_0 rows times one vector, two blocks at a time (even and odd accumulators).
TEXT ·dotQ40x1AVX2(SB), 0, $96-48
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $7, DX // vector stride in bytes: nblocks·32 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ40x1AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

dotQ40x1AVX2pair:
	CMPQ R11, $2
	JLT  dotQ40x1AVX2tail
	PREFETCHT0 144(CX)
	Q4NIBBLES(2)
	VPSUBB q08<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13, Y0)
	Q4NIBBLES(20)
	VPSUBB q08<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 18(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 128, Y13, Y1)
	ADDQ $36, CX
	ADDQ $256, AX
	ADDQ $8, R9
	SUBQ $2, R11
	JMP  dotQ40x1AVX2pair

dotQ40x1AVX2tail:
	TESTQ R11, R11
	JZ    dotQ40x1AVX2done
	Q4NIBBLES(2)
	VPSUBB q08<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13, Y0)
	ADDQ $18, CX

dotQ40x1AVX2done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ40x1AVX2row
	VZEROUPPER
	RET

// func dotQ40x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q4_0 rows times four vectors, two blocks at a time (even and odd accumulators).
TEXT ·dotQ40x4AVX2(SB), 0, $96-56
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $7, DX // vector stride in bytes: nblocks·32 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ40x4AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

dotQ40x4AVX2pair:
	CMPQ R11, $2
	JLT  dotQ40x4AVX2tail
	PREFETCHT0 144(CX)
	Q4NIBBLES(2)
	VPSUBB q08<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	Q4NIBBLES(20)
	VPSUBB q08<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 18(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 128, Y13, Y4, Y5, Y6, Y7)
	ADDQ $36, CX
	ADDQ $256, AX
	ADDQ $8, R9
	SUBQ $2, R11
	JMP  dotQ40x4AVX2pair

dotQ40x4AVX2tail:
	TESTQ R11, R11
	JZ    dotQ40x4AVX2done
	Q4NIBBLES(2)
	VPSUBB q08<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	ADDQ $18, CX

dotQ40x4AVX2done:
	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	VADDPS Y4, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R13)
	ADDQ R10, R13
	VADDPS Y5, Y1, Y1
	HSUM(Y1, X1, X12)
	VMOVSS X1, (R13)
	ADDQ R10, R13
	VADDPS Y6, Y2, Y2
	HSUM(Y2, X2, X12)
	VMOVSS X2, (R13)
	ADDQ R10, R13
	VADDPS Y7, Y3, Y3
	HSUM(Y3, X3, X12)
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ40x4AVX2row
	VZEROUPPER
	RET

// func dotQ41x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q4_1 rows times one vector, two blocks at a time (even and odd accumulators); the minimums chain in X4 and X5.
TEXT ·dotQ41x1AVX2(SB), 0, $96-48
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $7, DX // vector stride in bytes: nblocks·32 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ41x1AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5

dotQ41x1AVX2pair:
	CMPQ R11, $2
	JLT  dotQ41x1AVX2tail
	PREFETCHT0 160(CX)
	Q4NIBBLES(4)
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13, Y0)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS 0(R9), X14, X4
	Q4NIBBLES(24)
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 20(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 128, Y13, Y1)
	VPBROADCASTW 22(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS 4(R9), X14, X5
	ADDQ $40, CX
	ADDQ $256, AX
	ADDQ $8, R9
	SUBQ $2, R11
	JMP  dotQ41x1AVX2pair

dotQ41x1AVX2tail:
	TESTQ R11, R11
	JZ    dotQ41x1AVX2done
	Q4NIBBLES(4)
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13, Y0)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS 0(R9), X14, X4
	ADDQ $20, CX

dotQ41x1AVX2done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X12)
	VADDSS X5, X4, X4
	VADDSS X4, X0, X0
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ41x1AVX2row
	VZEROUPPER
	RET

// func dotQ41x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q4_1 rows times four vectors, two blocks at a time (even and odd accumulators); the minimums chain in the frame.
TEXT ·dotQ41x4AVX2(SB), 0, $96-56
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $7, DX // vector stride in bytes: nblocks·32 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ41x4AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVUPS Y0, 32(SP)

dotQ41x4AVX2pair:
	CMPQ R11, $2
	JLT  dotQ41x4AVX2tail
	PREFETCHT0 160(CX)
	Q4NIBBLES(4)
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	LEAQ (R9)(SI*2), R10
	VMOVSS 32(SP), X15
	VFMADD231SS 0(R9), X14, X15
	VMOVSS X15, 32(SP)
	VMOVSS 40(SP), X15
	VFMADD231SS 0(R9)(SI*1), X14, X15
	VMOVSS X15, 40(SP)
	VMOVSS 48(SP), X15
	VFMADD231SS 0(R9)(SI*2), X14, X15
	VMOVSS X15, 48(SP)
	VMOVSS 56(SP), X15
	VFMADD231SS 0(R10)(SI*1), X14, X15
	VMOVSS X15, 56(SP)
	Q4NIBBLES(24)
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 20(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 128, Y13, Y4, Y5, Y6, Y7)
	VPBROADCASTW 22(CX), X14
	VCVTPH2PS X14, X14 // m
	LEAQ (R9)(SI*2), R10
	VMOVSS 36(SP), X15
	VFMADD231SS 4(R9), X14, X15
	VMOVSS X15, 36(SP)
	VMOVSS 44(SP), X15
	VFMADD231SS 4(R9)(SI*1), X14, X15
	VMOVSS X15, 44(SP)
	VMOVSS 52(SP), X15
	VFMADD231SS 4(R9)(SI*2), X14, X15
	VMOVSS X15, 52(SP)
	VMOVSS 60(SP), X15
	VFMADD231SS 4(R10)(SI*1), X14, X15
	VMOVSS X15, 60(SP)
	ADDQ $40, CX
	ADDQ $256, AX
	ADDQ $8, R9
	SUBQ $2, R11
	JMP  dotQ41x4AVX2pair

dotQ41x4AVX2tail:
	TESTQ R11, R11
	JZ    dotQ41x4AVX2done
	Q4NIBBLES(4)
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	LEAQ (R9)(SI*2), R10
	VMOVSS 32(SP), X15
	VFMADD231SS 0(R9), X14, X15
	VMOVSS X15, 32(SP)
	VMOVSS 40(SP), X15
	VFMADD231SS 0(R9)(SI*1), X14, X15
	VMOVSS X15, 40(SP)
	VMOVSS 48(SP), X15
	VFMADD231SS 0(R9)(SI*2), X14, X15
	VMOVSS X15, 48(SP)
	VMOVSS 56(SP), X15
	VFMADD231SS 0(R10)(SI*1), X14, X15
	VMOVSS X15, 56(SP)
	ADDQ $20, CX

dotQ41x4AVX2done:
	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	VADDPS Y4, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVSS 32(SP), X8
	VADDSS 36(SP), X8, X8
	VADDSS X8, X0, X0
	VMOVSS X0, (R13)
	ADDQ R10, R13
	VADDPS Y5, Y1, Y1
	HSUM(Y1, X1, X12)
	VMOVSS 40(SP), X8
	VADDSS 44(SP), X8, X8
	VADDSS X8, X1, X1
	VMOVSS X1, (R13)
	ADDQ R10, R13
	VADDPS Y6, Y2, Y2
	HSUM(Y2, X2, X12)
	VMOVSS 48(SP), X8
	VADDSS 52(SP), X8, X8
	VADDSS X8, X2, X2
	VMOVSS X2, (R13)
	ADDQ R10, R13
	VADDPS Y7, Y3, Y3
	HSUM(Y3, X3, X12)
	VMOVSS 56(SP), X8
	VADDSS 60(SP), X8, X8
	VADDSS X8, X3, X3
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ41x4AVX2row
	VZEROUPPER
	RET

// func dotQ50x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q5_0 rows times one vector, two blocks at a time (even and odd accumulators).
TEXT ·dotQ50x1AVX2(SB), 0, $96-48
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $7, DX // vector stride in bytes: nblocks·32 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ50x1AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

dotQ50x1AVX2pair:
	CMPQ R11, $2
	JLT  dotQ50x1AVX2tail
	PREFETCHT0 176(CX)
	Q4NIBBLES(6)
	Q5HIGH(2)
	VPOR Y9, Y8, Y8
	VPSUBB q10<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13, Y0)
	Q4NIBBLES(28)
	Q5HIGH(24)
	VPOR Y9, Y8, Y8
	VPSUBB q10<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 22(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 128, Y13, Y1)
	ADDQ $44, CX
	ADDQ $256, AX
	ADDQ $8, R9
	SUBQ $2, R11
	JMP  dotQ50x1AVX2pair

dotQ50x1AVX2tail:
	TESTQ R11, R11
	JZ    dotQ50x1AVX2done
	Q4NIBBLES(6)
	Q5HIGH(2)
	VPOR Y9, Y8, Y8
	VPSUBB q10<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13, Y0)
	ADDQ $22, CX

dotQ50x1AVX2done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ50x1AVX2row
	VZEROUPPER
	RET

// func dotQ50x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q5_0 rows times four vectors, two blocks at a time (even and odd accumulators).
TEXT ·dotQ50x4AVX2(SB), 0, $96-56
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $7, DX // vector stride in bytes: nblocks·32 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ50x4AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

dotQ50x4AVX2pair:
	CMPQ R11, $2
	JLT  dotQ50x4AVX2tail
	PREFETCHT0 176(CX)
	Q4NIBBLES(6)
	Q5HIGH(2)
	VPOR Y9, Y8, Y8
	VPSUBB q10<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	Q4NIBBLES(28)
	Q5HIGH(24)
	VPOR Y9, Y8, Y8
	VPSUBB q10<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 22(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 128, Y13, Y4, Y5, Y6, Y7)
	ADDQ $44, CX
	ADDQ $256, AX
	ADDQ $8, R9
	SUBQ $2, R11
	JMP  dotQ50x4AVX2pair

dotQ50x4AVX2tail:
	TESTQ R11, R11
	JZ    dotQ50x4AVX2done
	Q4NIBBLES(6)
	Q5HIGH(2)
	VPOR Y9, Y8, Y8
	VPSUBB q10<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	ADDQ $22, CX

dotQ50x4AVX2done:
	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	VADDPS Y4, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R13)
	ADDQ R10, R13
	VADDPS Y5, Y1, Y1
	HSUM(Y1, X1, X12)
	VMOVSS X1, (R13)
	ADDQ R10, R13
	VADDPS Y6, Y2, Y2
	HSUM(Y2, X2, X12)
	VMOVSS X2, (R13)
	ADDQ R10, R13
	VADDPS Y7, Y3, Y3
	HSUM(Y3, X3, X12)
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ50x4AVX2row
	VZEROUPPER
	RET

// func dotQ51x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q5_1 rows times one vector, two blocks at a time (even and odd accumulators); the minimums chain in X4 and X5.
TEXT ·dotQ51x1AVX2(SB), 0, $96-48
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $7, DX // vector stride in bytes: nblocks·32 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ51x1AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5

dotQ51x1AVX2pair:
	CMPQ R11, $2
	JLT  dotQ51x1AVX2tail
	PREFETCHT0 192(CX)
	Q4NIBBLES(8)
	Q5HIGH(4)
	VPOR Y9, Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13, Y0)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS 0(R9), X14, X4
	Q4NIBBLES(32)
	Q5HIGH(28)
	VPOR Y9, Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 24(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 128, Y13, Y1)
	VPBROADCASTW 26(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS 4(R9), X14, X5
	ADDQ $48, CX
	ADDQ $256, AX
	ADDQ $8, R9
	SUBQ $2, R11
	JMP  dotQ51x1AVX2pair

dotQ51x1AVX2tail:
	TESTQ R11, R11
	JZ    dotQ51x1AVX2done
	Q4NIBBLES(8)
	Q5HIGH(4)
	VPOR Y9, Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13, Y0)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS 0(R9), X14, X4
	ADDQ $24, CX

dotQ51x1AVX2done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X12)
	VADDSS X5, X4, X4
	VADDSS X4, X0, X0
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ51x1AVX2row
	VZEROUPPER
	RET

// func dotQ51x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q5_1 rows times four vectors, two blocks at a time (even and odd accumulators); the minimums chain in the frame.
TEXT ·dotQ51x4AVX2(SB), 0, $96-56
	MOVQ raw+0(FP), CX
	MOVQ nblocks+16(FP), DX
	SHLQ $7, DX // vector stride in bytes: nblocks·32 floats
	LEAQ (DX)(DX*2), R8
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12
	MOVQ DX, SI
	SHRQ $5, SI // blockSums stride in bytes
dotQ51x4AVX2row:
	MOVQ DI, AX
	MOVQ sums+32(FP), R9
	MOVQ nblocks+16(FP), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVUPS Y0, 32(SP)

dotQ51x4AVX2pair:
	CMPQ R11, $2
	JLT  dotQ51x4AVX2tail
	PREFETCHT0 192(CX)
	Q4NIBBLES(8)
	Q5HIGH(4)
	VPOR Y9, Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	LEAQ (R9)(SI*2), R10
	VMOVSS 32(SP), X15
	VFMADD231SS 0(R9), X14, X15
	VMOVSS X15, 32(SP)
	VMOVSS 40(SP), X15
	VFMADD231SS 0(R9)(SI*1), X14, X15
	VMOVSS X15, 40(SP)
	VMOVSS 48(SP), X15
	VFMADD231SS 0(R9)(SI*2), X14, X15
	VMOVSS X15, 48(SP)
	VMOVSS 56(SP), X15
	VFMADD231SS 0(R10)(SI*1), X14, X15
	VMOVSS X15, 56(SP)
	Q4NIBBLES(32)
	Q5HIGH(28)
	VPOR Y9, Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 24(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 128, Y13, Y4, Y5, Y6, Y7)
	VPBROADCASTW 26(CX), X14
	VCVTPH2PS X14, X14 // m
	LEAQ (R9)(SI*2), R10
	VMOVSS 36(SP), X15
	VFMADD231SS 4(R9), X14, X15
	VMOVSS X15, 36(SP)
	VMOVSS 44(SP), X15
	VFMADD231SS 4(R9)(SI*1), X14, X15
	VMOVSS X15, 44(SP)
	VMOVSS 52(SP), X15
	VFMADD231SS 4(R9)(SI*2), X14, X15
	VMOVSS X15, 52(SP)
	VMOVSS 60(SP), X15
	VFMADD231SS 4(R10)(SI*1), X14, X15
	VMOVSS X15, 60(SP)
	ADDQ $48, CX
	ADDQ $256, AX
	ADDQ $8, R9
	SUBQ $2, R11
	JMP  dotQ51x4AVX2pair

dotQ51x4AVX2tail:
	TESTQ R11, R11
	JZ    dotQ51x4AVX2done
	Q4NIBBLES(8)
	Q5HIGH(4)
	VPOR Y9, Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW 0(CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13, Y0, Y1, Y2, Y3)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	LEAQ (R9)(SI*2), R10
	VMOVSS 32(SP), X15
	VFMADD231SS 0(R9), X14, X15
	VMOVSS X15, 32(SP)
	VMOVSS 40(SP), X15
	VFMADD231SS 0(R9)(SI*1), X14, X15
	VMOVSS X15, 40(SP)
	VMOVSS 48(SP), X15
	VFMADD231SS 0(R9)(SI*2), X14, X15
	VMOVSS X15, 48(SP)
	VMOVSS 56(SP), X15
	VFMADD231SS 0(R10)(SI*1), X14, X15
	VMOVSS X15, 56(SP)
	ADDQ $24, CX

dotQ51x4AVX2done:
	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	VADDPS Y4, Y0, Y0
	HSUM(Y0, X0, X12)
	VMOVSS 32(SP), X8
	VADDSS 36(SP), X8, X8
	VADDSS X8, X0, X0
	VMOVSS X0, (R13)
	ADDQ R10, R13
	VADDPS Y5, Y1, Y1
	HSUM(Y1, X1, X12)
	VMOVSS 40(SP), X8
	VADDSS 44(SP), X8, X8
	VADDSS X8, X1, X1
	VMOVSS X1, (R13)
	ADDQ R10, R13
	VADDPS Y6, Y2, Y2
	HSUM(Y2, X2, X12)
	VMOVSS 48(SP), X8
	VADDSS 52(SP), X8, X8
	VADDSS X8, X2, X2
	VMOVSS X2, (R13)
	ADDQ R10, R13
	VADDPS Y7, Y3, Y3
	HSUM(Y3, X3, X12)
	VMOVSS 56(SP), X8
	VADDSS 60(SP), X8, X8
	VADDSS X8, X3, X3
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ51x4AVX2row
	VZEROUPPER
	RET

// func dotBF16x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// BF16 rows (nblocks weights each, a positive multiple of 32) times one
// vector in dot32Generic's order: each weight widened exactly (its bits
// shifted into the high half of a float32), four 8-lane accumulators
// stepped by VFMADD231PS as dot32AVX2 steps them, reduced as it reduces.
TEXT ·dotBF16x1AVX2(SB), NOSPLIT, $0-48
	MOVQ raw+0(FP), CX
	MOVQ rows+8(FP), BX
	MOVQ nblocks+16(FP), DX
	MOVQ x+24(FP), DI
	MOVQ out+40(FP), R12

bf16row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   DI, AX
	MOVQ   DX, R11

bf16loop:
	PREFETCHT0  512(CX)
	VPMOVZXWD   (CX), Y4
	VPSLLD      $16, Y4, Y4
	VFMADD231PS (AX), Y4, Y0
	VPMOVZXWD   16(CX), Y5
	VPSLLD      $16, Y5, Y5
	VFMADD231PS 32(AX), Y5, Y1
	VPMOVZXWD   32(CX), Y6
	VPSLLD      $16, Y6, Y6
	VFMADD231PS 64(AX), Y6, Y2
	VPMOVZXWD   48(CX), Y7
	VPSLLD      $16, Y7, Y7
	VFMADD231PS 96(AX), Y7, Y3
	ADDQ        $64, CX
	ADDQ        $128, AX
	SUBQ        $32, R11
	JNZ         bf16loop

	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, (R12)
	ADDQ   $4, R12
	DECQ   BX
	JNZ    bf16row
	VZEROUPPER
	RET

