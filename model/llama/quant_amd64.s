#include "textflag.h"

// The quantised kernels; dotQuantGeneric states each type's order and
// these perform the same operations. Each decodes a block's quants into
// the frame as int8 (Q: 256 bytes at 0(SP); 32 for the 32-weight types)
// and the K-quants' sub-block scales as float32 (D: at 256(SP)), then runs
// the sub-blocks: per group of 8 quants VPMOVSXBD and VCVTDQ2PS (exact),
// the lane's first product VMULPS, the next ones VFMADD231PS into its
// chain, then VFMADD231PS of the scale and the chain into the
// accumulator. The x1 kernels apply rows consecutive rows to one vector;
// the x4 kernels apply each block of a row to four vectors (x + r·cols
// floats, r < 4; their blockSums at sums + r·cols/32) while it is decoded
// in the frame, writing out[r·outStride + i].

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

// SUB32X1(q, x, D): the 32 quants at q(SP) times the vector at x(AX),
// each lane's chain then times the scale D into Y0. Clobbers Y8, Y12.
#define SUB32X1(q, x, D) \
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
	VFMADD231PS Y8, D, Y0

// SUB32X4(q, x, D): the 32 quants at q(SP) times each of the four vectors at x(AX) (strides DX; R8 = 3·DX),
// each lane's chain then times the scale D into Y0-Y3. Clobbers Y8-Y11, Y12.
#define SUB32X4(q, x, D) \
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
	VFMADD231PS Y8, D, Y0; \
	VFMADD231PS Y9, D, Y1; \
	VFMADD231PS Y10, D, Y2; \
	VFMADD231PS Y11, D, Y3

// SUB16X1(q, x, D): the 16 quants at q(SP) times the vector at x(AX),
// each lane's chain then times the scale D into Y0. Clobbers Y8, Y12.
#define SUB16X1(q, x, D) \
	VPMOVSXBD q+0(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VMULPS x+0(AX), Y12, Y8; \
	VPMOVSXBD q+8(SP), Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMADD231PS x+32(AX), Y12, Y8; \
	VFMADD231PS Y8, D, Y0

// SUB16X4(q, x, D): the 16 quants at q(SP) times each of the four vectors at x(AX) (strides DX; R8 = 3·DX),
// each lane's chain then times the scale D into Y0-Y3. Clobbers Y8-Y11, Y12.
#define SUB16X4(q, x, D) \
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
	VFMADD231PS Y8, D, Y0; \
	VFMADD231PS Y9, D, Y1; \
	VFMADD231PS Y10, D, Y2; \
	VFMADD231PS Y11, D, Y3

// HSUM(Y, X, T): X (the low half of Y) = hsum8 of Y's lanes.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VMOVHLPS X, X, T; \
	VADDPS T, X, X; \
	VMOVSHDUP X, T; \
	VADDSS T, X, X

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

// Q6LOW(src, q, OP, C), Q6HIGH(…): quants 32s..32s+31 of a Q6_K half: the low (high) nibbles of the 32 ql bytes at src(CX), bits 2s..2s+1 of qh (Y10; OP $C moves them to bits 4-5), minus 32, to q(SP).
#define Q6LOW(src, q, OP, C) \
	VMOVDQU src(CX), Y11; \
	VPAND q0f<>(SB), Y11, Y11; \
	OP $C, Y10, Y12; \
	VPAND q30<>(SB), Y12, Y12; \
	VPOR Y12, Y11, Y11; \
	VPSUBB q20<>(SB), Y11, Y11; \
	VMOVDQU Y11, q(SP)

#define Q6HIGH(src, q, OP, C) \
	VMOVDQU src(CX), Y11; \
	VPSRLW $4, Y11, Y11; \
	VPAND q0f<>(SB), Y11, Y11; \
	OP $C, Y10, Y12; \
	VPAND q30<>(SB), Y12, Y12; \
	VPOR Y12, Y11, Y11; \
	VPSUBB q20<>(SB), Y11, Y11; \
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
// Q4_K rows times one vector.
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
	VXORPS Y4, Y4, Y4

dotQ4Kx1AVX2block:
	PREFETCHT0 576(CX)
	KSCALES
	NIBBLES(16, 0)
	NIBBLES(48, 64)
	NIBBLES(80, 128)
	NIBBLES(112, 192)
	VFMADD231PS (R9), Y14, Y4 // min terms: lane k is sub-block k
	VBROADCASTSS 256(SP), Y13
	SUB32X1(0, 0, Y13)
	VBROADCASTSS 260(SP), Y13
	SUB32X1(32, 128, Y13)
	VBROADCASTSS 264(SP), Y13
	SUB32X1(64, 256, Y13)
	VBROADCASTSS 268(SP), Y13
	SUB32X1(96, 384, Y13)
	VBROADCASTSS 272(SP), Y13
	SUB32X1(128, 512, Y13)
	VBROADCASTSS 276(SP), Y13
	SUB32X1(160, 640, Y13)
	VBROADCASTSS 280(SP), Y13
	SUB32X1(192, 768, Y13)
	VBROADCASTSS 284(SP), Y13
	SUB32X1(224, 896, Y13)
	ADDQ $144, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ4Kx1AVX2block

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
TEXT ·dotQ4Kx4AVX2(SB), 0, $320-56
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
	VXORPS Y4, Y4, Y4
	VXORPS Y1, Y1, Y1
	VXORPS Y5, Y5, Y5
	VXORPS Y2, Y2, Y2
	VXORPS Y6, Y6, Y6
	VXORPS Y3, Y3, Y3
	VXORPS Y7, Y7, Y7

dotQ4Kx4AVX2block:
	PREFETCHT0 576(CX)
	KSCALES
	NIBBLES(16, 0)
	NIBBLES(48, 64)
	NIBBLES(80, 128)
	NIBBLES(112, 192)
	VFMADD231PS (R9), Y14, Y4 // min terms: lane k is sub-block k
	VFMADD231PS (R9)(SI*1), Y14, Y5
	VFMADD231PS (R9)(SI*2), Y14, Y6
	LEAQ (R9)(SI*2), R10
	VFMADD231PS (R10)(SI*1), Y14, Y7
	VBROADCASTSS 256(SP), Y13
	SUB32X4(0, 0, Y13)
	VBROADCASTSS 260(SP), Y13
	SUB32X4(32, 128, Y13)
	VBROADCASTSS 264(SP), Y13
	SUB32X4(64, 256, Y13)
	VBROADCASTSS 268(SP), Y13
	SUB32X4(96, 384, Y13)
	VBROADCASTSS 272(SP), Y13
	SUB32X4(128, 512, Y13)
	VBROADCASTSS 276(SP), Y13
	SUB32X4(160, 640, Y13)
	VBROADCASTSS 280(SP), Y13
	SUB32X4(192, 768, Y13)
	VBROADCASTSS 284(SP), Y13
	SUB32X4(224, 896, Y13)
	ADDQ $144, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ4Kx4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	HSUM(Y0, X0, X12)
	HSUM(Y4, X4, X12)
	VSUBSS X4, X0, X0
	VMOVSS X0, (R13)
	ADDQ R10, R13
	HSUM(Y1, X1, X12)
	HSUM(Y5, X5, X12)
	VSUBSS X5, X1, X1
	VMOVSS X1, (R13)
	ADDQ R10, R13
	HSUM(Y2, X2, X12)
	HSUM(Y6, X6, X12)
	VSUBSS X6, X2, X2
	VMOVSS X2, (R13)
	ADDQ R10, R13
	HSUM(Y3, X3, X12)
	HSUM(Y7, X7, X12)
	VSUBSS X7, X3, X3
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ4Kx4AVX2row
	VZEROUPPER
	RET

// func dotQ5Kx1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q5_K rows times one vector.
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
	VXORPS Y4, Y4, Y4

dotQ5Kx1AVX2block:
	PREFETCHT0 704(CX)
	KSCALES
	VMOVDQU 16(CX), Y10
	Q5NIBBLES(48, 0, VPSLLW, 4, VPSLLW, 3)
	Q5NIBBLES(80, 64, VPSLLW, 2, VPSLLW, 1)
	Q5NIBBLES(112, 128, VPSLLW, 0, VPSRLW, 1)
	Q5NIBBLES(144, 192, VPSRLW, 2, VPSRLW, 3)
	VFMADD231PS (R9), Y14, Y4 // min terms: lane k is sub-block k
	VBROADCASTSS 256(SP), Y13
	SUB32X1(0, 0, Y13)
	VBROADCASTSS 260(SP), Y13
	SUB32X1(32, 128, Y13)
	VBROADCASTSS 264(SP), Y13
	SUB32X1(64, 256, Y13)
	VBROADCASTSS 268(SP), Y13
	SUB32X1(96, 384, Y13)
	VBROADCASTSS 272(SP), Y13
	SUB32X1(128, 512, Y13)
	VBROADCASTSS 276(SP), Y13
	SUB32X1(160, 640, Y13)
	VBROADCASTSS 280(SP), Y13
	SUB32X1(192, 768, Y13)
	VBROADCASTSS 284(SP), Y13
	SUB32X1(224, 896, Y13)
	ADDQ $176, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ5Kx1AVX2block

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
TEXT ·dotQ5Kx4AVX2(SB), 0, $320-56
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
	VXORPS Y4, Y4, Y4
	VXORPS Y1, Y1, Y1
	VXORPS Y5, Y5, Y5
	VXORPS Y2, Y2, Y2
	VXORPS Y6, Y6, Y6
	VXORPS Y3, Y3, Y3
	VXORPS Y7, Y7, Y7

dotQ5Kx4AVX2block:
	PREFETCHT0 704(CX)
	KSCALES
	VMOVDQU 16(CX), Y10
	Q5NIBBLES(48, 0, VPSLLW, 4, VPSLLW, 3)
	Q5NIBBLES(80, 64, VPSLLW, 2, VPSLLW, 1)
	Q5NIBBLES(112, 128, VPSLLW, 0, VPSRLW, 1)
	Q5NIBBLES(144, 192, VPSRLW, 2, VPSRLW, 3)
	VFMADD231PS (R9), Y14, Y4 // min terms: lane k is sub-block k
	VFMADD231PS (R9)(SI*1), Y14, Y5
	VFMADD231PS (R9)(SI*2), Y14, Y6
	LEAQ (R9)(SI*2), R10
	VFMADD231PS (R10)(SI*1), Y14, Y7
	VBROADCASTSS 256(SP), Y13
	SUB32X4(0, 0, Y13)
	VBROADCASTSS 260(SP), Y13
	SUB32X4(32, 128, Y13)
	VBROADCASTSS 264(SP), Y13
	SUB32X4(64, 256, Y13)
	VBROADCASTSS 268(SP), Y13
	SUB32X4(96, 384, Y13)
	VBROADCASTSS 272(SP), Y13
	SUB32X4(128, 512, Y13)
	VBROADCASTSS 276(SP), Y13
	SUB32X4(160, 640, Y13)
	VBROADCASTSS 280(SP), Y13
	SUB32X4(192, 768, Y13)
	VBROADCASTSS 284(SP), Y13
	SUB32X4(224, 896, Y13)
	ADDQ $176, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ5Kx4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	HSUM(Y0, X0, X12)
	HSUM(Y4, X4, X12)
	VSUBSS X4, X0, X0
	VMOVSS X0, (R13)
	ADDQ R10, R13
	HSUM(Y1, X1, X12)
	HSUM(Y5, X5, X12)
	VSUBSS X5, X1, X1
	VMOVSS X1, (R13)
	ADDQ R10, R13
	HSUM(Y2, X2, X12)
	HSUM(Y6, X6, X12)
	VSUBSS X6, X2, X2
	VMOVSS X2, (R13)
	ADDQ R10, R13
	HSUM(Y3, X3, X12)
	HSUM(Y7, X7, X12)
	VSUBSS X7, X3, X3
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ5Kx4AVX2row
	VZEROUPPER
	RET

// func dotQ6Kx1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q6_K rows times one vector.
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
	SUB16X1(0, 0, Y13)
	VBROADCASTSS 260(SP), Y13
	SUB16X1(16, 64, Y13)
	VBROADCASTSS 264(SP), Y13
	SUB16X1(32, 128, Y13)
	VBROADCASTSS 268(SP), Y13
	SUB16X1(48, 192, Y13)
	VBROADCASTSS 272(SP), Y13
	SUB16X1(64, 256, Y13)
	VBROADCASTSS 276(SP), Y13
	SUB16X1(80, 320, Y13)
	VBROADCASTSS 280(SP), Y13
	SUB16X1(96, 384, Y13)
	VBROADCASTSS 284(SP), Y13
	SUB16X1(112, 448, Y13)
	VBROADCASTSS 288(SP), Y13
	SUB16X1(128, 512, Y13)
	VBROADCASTSS 292(SP), Y13
	SUB16X1(144, 576, Y13)
	VBROADCASTSS 296(SP), Y13
	SUB16X1(160, 640, Y13)
	VBROADCASTSS 300(SP), Y13
	SUB16X1(176, 704, Y13)
	VBROADCASTSS 304(SP), Y13
	SUB16X1(192, 768, Y13)
	VBROADCASTSS 308(SP), Y13
	SUB16X1(208, 832, Y13)
	VBROADCASTSS 312(SP), Y13
	SUB16X1(224, 896, Y13)
	VBROADCASTSS 316(SP), Y13
	SUB16X1(240, 960, Y13)
	ADDQ $210, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ6Kx1AVX2block

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
TEXT ·dotQ6Kx4AVX2(SB), 0, $320-56
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
	SUB16X4(0, 0, Y13)
	VBROADCASTSS 260(SP), Y13
	SUB16X4(16, 64, Y13)
	VBROADCASTSS 264(SP), Y13
	SUB16X4(32, 128, Y13)
	VBROADCASTSS 268(SP), Y13
	SUB16X4(48, 192, Y13)
	VBROADCASTSS 272(SP), Y13
	SUB16X4(64, 256, Y13)
	VBROADCASTSS 276(SP), Y13
	SUB16X4(80, 320, Y13)
	VBROADCASTSS 280(SP), Y13
	SUB16X4(96, 384, Y13)
	VBROADCASTSS 284(SP), Y13
	SUB16X4(112, 448, Y13)
	VBROADCASTSS 288(SP), Y13
	SUB16X4(128, 512, Y13)
	VBROADCASTSS 292(SP), Y13
	SUB16X4(144, 576, Y13)
	VBROADCASTSS 296(SP), Y13
	SUB16X4(160, 640, Y13)
	VBROADCASTSS 300(SP), Y13
	SUB16X4(176, 704, Y13)
	VBROADCASTSS 304(SP), Y13
	SUB16X4(192, 768, Y13)
	VBROADCASTSS 308(SP), Y13
	SUB16X4(208, 832, Y13)
	VBROADCASTSS 312(SP), Y13
	SUB16X4(224, 896, Y13)
	VBROADCASTSS 316(SP), Y13
	SUB16X4(240, 960, Y13)
	ADDQ $210, CX
	ADDQ $1024, AX
	ADDQ $32, R9
	DECQ R11
	JNZ  dotQ6Kx4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R13)
	ADDQ R10, R13
	HSUM(Y1, X1, X12)
	VMOVSS X1, (R13)
	ADDQ R10, R13
	HSUM(Y2, X2, X12)
	VMOVSS X2, (R13)
	ADDQ R10, R13
	HSUM(Y3, X3, X12)
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ6Kx4AVX2row
	VZEROUPPER
	RET

// func dotQ40x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q4_0 rows times one vector.
TEXT ·dotQ40x1AVX2(SB), 0, $64-48
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

dotQ40x1AVX2block:
	PREFETCHT0 144(CX)
	Q4NIBBLES(2)
	VPSUBB q08<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW (CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13)
	ADDQ $18, CX
	ADDQ $128, AX
	ADDQ $4, R9
	DECQ R11
	JNZ  dotQ40x1AVX2block

	HSUM(Y0, X0, X12)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ40x1AVX2row
	VZEROUPPER
	RET

// func dotQ40x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q4_0 rows times four vectors.
TEXT ·dotQ40x4AVX2(SB), 0, $64-56
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

dotQ40x4AVX2block:
	PREFETCHT0 144(CX)
	Q4NIBBLES(2)
	VPSUBB q08<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW (CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13)
	ADDQ $18, CX
	ADDQ $128, AX
	ADDQ $4, R9
	DECQ R11
	JNZ  dotQ40x4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R13)
	ADDQ R10, R13
	HSUM(Y1, X1, X12)
	VMOVSS X1, (R13)
	ADDQ R10, R13
	HSUM(Y2, X2, X12)
	VMOVSS X2, (R13)
	ADDQ R10, R13
	HSUM(Y3, X3, X12)
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ40x4AVX2row
	VZEROUPPER
	RET

// func dotQ41x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q4_1 rows times one vector; the minimums chain in X4-X7 (scalar).
TEXT ·dotQ41x1AVX2(SB), 0, $64-48
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
	VXORPS Y4, Y4, Y4

dotQ41x1AVX2block:
	PREFETCHT0 160(CX)
	Q4NIBBLES(4)
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW (CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS (R9), X14, X4
	ADDQ $20, CX
	ADDQ $128, AX
	ADDQ $4, R9
	DECQ R11
	JNZ  dotQ41x1AVX2block

	HSUM(Y0, X0, X12)
	VADDSS X4, X0, X0
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ41x1AVX2row
	VZEROUPPER
	RET

// func dotQ41x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q4_1 rows times four vectors; the minimums chain in X4-X7 (scalar).
TEXT ·dotQ41x4AVX2(SB), 0, $64-56
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
	VXORPS Y4, Y4, Y4
	VXORPS Y1, Y1, Y1
	VXORPS Y5, Y5, Y5
	VXORPS Y2, Y2, Y2
	VXORPS Y6, Y6, Y6
	VXORPS Y3, Y3, Y3
	VXORPS Y7, Y7, Y7

dotQ41x4AVX2block:
	PREFETCHT0 160(CX)
	Q4NIBBLES(4)
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW (CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS (R9), X14, X4
	VFMADD231SS (R9)(SI*1), X14, X5
	VFMADD231SS (R9)(SI*2), X14, X6
	LEAQ (R9)(SI*2), R10
	VFMADD231SS (R10)(SI*1), X14, X7
	ADDQ $20, CX
	ADDQ $128, AX
	ADDQ $4, R9
	DECQ R11
	JNZ  dotQ41x4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	HSUM(Y0, X0, X12)
	VADDSS X4, X0, X0
	VMOVSS X0, (R13)
	ADDQ R10, R13
	HSUM(Y1, X1, X12)
	VADDSS X5, X1, X1
	VMOVSS X1, (R13)
	ADDQ R10, R13
	HSUM(Y2, X2, X12)
	VADDSS X6, X2, X2
	VMOVSS X2, (R13)
	ADDQ R10, R13
	HSUM(Y3, X3, X12)
	VADDSS X7, X3, X3
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ41x4AVX2row
	VZEROUPPER
	RET

// func dotQ50x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q5_0 rows times one vector.
TEXT ·dotQ50x1AVX2(SB), 0, $64-48
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

dotQ50x1AVX2block:
	PREFETCHT0 176(CX)
	Q4NIBBLES(6)
	Q5HIGH(2)
	VPOR Y9, Y8, Y8
	VPSUBB q10<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW (CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13)
	ADDQ $22, CX
	ADDQ $128, AX
	ADDQ $4, R9
	DECQ R11
	JNZ  dotQ50x1AVX2block

	HSUM(Y0, X0, X12)
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ50x1AVX2row
	VZEROUPPER
	RET

// func dotQ50x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q5_0 rows times four vectors.
TEXT ·dotQ50x4AVX2(SB), 0, $64-56
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

dotQ50x4AVX2block:
	PREFETCHT0 176(CX)
	Q4NIBBLES(6)
	Q5HIGH(2)
	VPOR Y9, Y8, Y8
	VPSUBB q10<>(SB), Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW (CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13)
	ADDQ $22, CX
	ADDQ $128, AX
	ADDQ $4, R9
	DECQ R11
	JNZ  dotQ50x4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	HSUM(Y0, X0, X12)
	VMOVSS X0, (R13)
	ADDQ R10, R13
	HSUM(Y1, X1, X12)
	VMOVSS X1, (R13)
	ADDQ R10, R13
	HSUM(Y2, X2, X12)
	VMOVSS X2, (R13)
	ADDQ R10, R13
	HSUM(Y3, X3, X12)
	VMOVSS X3, (R13)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ50x4AVX2row
	VZEROUPPER
	RET

// func dotQ51x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
//
// Q5_1 rows times one vector; the minimums chain in X4-X7 (scalar).
TEXT ·dotQ51x1AVX2(SB), 0, $64-48
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
	VXORPS Y4, Y4, Y4

dotQ51x1AVX2block:
	PREFETCHT0 192(CX)
	Q4NIBBLES(8)
	Q5HIGH(4)
	VPOR Y9, Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW (CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X1(0, 0, Y13)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS (R9), X14, X4
	ADDQ $24, CX
	ADDQ $128, AX
	ADDQ $4, R9
	DECQ R11
	JNZ  dotQ51x1AVX2block

	HSUM(Y0, X0, X12)
	VADDSS X4, X0, X0
	VMOVSS X0, (R12)
	ADDQ $4, R12
	DECQ rows+8(FP)
	JNZ  dotQ51x1AVX2row
	VZEROUPPER
	RET

// func dotQ51x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
//
// Q5_1 rows times four vectors; the minimums chain in X4-X7 (scalar).
TEXT ·dotQ51x4AVX2(SB), 0, $64-56
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
	VXORPS Y4, Y4, Y4
	VXORPS Y1, Y1, Y1
	VXORPS Y5, Y5, Y5
	VXORPS Y2, Y2, Y2
	VXORPS Y6, Y6, Y6
	VXORPS Y3, Y3, Y3
	VXORPS Y7, Y7, Y7

dotQ51x4AVX2block:
	PREFETCHT0 192(CX)
	Q4NIBBLES(8)
	Q5HIGH(4)
	VPOR Y9, Y8, Y8
	VMOVDQU Y8, 0(SP)
	VPBROADCASTW (CX), X13
	VCVTPH2PS X13, Y13 // d
	SUB32X4(0, 0, Y13)
	VPBROADCASTW 2(CX), X14
	VCVTPH2PS X14, X14 // m
	VFMADD231SS (R9), X14, X4
	VFMADD231SS (R9)(SI*1), X14, X5
	VFMADD231SS (R9)(SI*2), X14, X6
	LEAQ (R9)(SI*2), R10
	VFMADD231SS (R10)(SI*1), X14, X7
	ADDQ $24, CX
	ADDQ $128, AX
	ADDQ $4, R9
	DECQ R11
	JNZ  dotQ51x4AVX2block

	MOVQ outStride+48(FP), R10
	SHLQ $2, R10
	MOVQ R12, R13
	HSUM(Y0, X0, X12)
	VADDSS X4, X0, X0
	VMOVSS X0, (R13)
	ADDQ R10, R13
	HSUM(Y1, X1, X12)
	VADDSS X5, X1, X1
	VMOVSS X1, (R13)
	ADDQ R10, R13
	HSUM(Y2, X2, X12)
	VADDSS X6, X2, X2
	VMOVSS X2, (R13)
	ADDQ R10, R13
	HSUM(Y3, X3, X12)
	VADDSS X7, X3, X3
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

