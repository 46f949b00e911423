#include "textflag.h"
#include "hsum_amd64.h"

// The float-input quantised kernels (Q4_1, Q5_1; BF16);
// dotQuantGeneric states each type's order and these perform the same
// operations. They decode a block's quants into the frame as int8 (Q: 32
// bytes at 0(SP)). Then per group of 8 quants VPMOVSXBD and VCVTDQ2PS
// (exact), the lane's first product VMULPS, the next ones VFMADD231PS
// into its chain, then VFMADD231PS of the scale and the chain into the
// accumulator of the block's parity. The x1
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

