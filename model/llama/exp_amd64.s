#include "textflag.h"
#include "hsum_amd64.h"

// exp32's constants, eight lanes each (exp.go has their float32 values).
#define EXPC(name, bits) \
	DATA name<>+0(SB)/4, $bits; DATA name<>+4(SB)/4, $bits; \
	DATA name<>+8(SB)/4, $bits; DATA name<>+12(SB)/4, $bits; \
	DATA name<>+16(SB)/4, $bits; DATA name<>+20(SB)/4, $bits; \
	DATA name<>+24(SB)/4, $bits; DATA name<>+28(SB)/4, $bits; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

EXPC(expHi, 0x42b00000)
EXPC(expLo, 0xc2aeac4f)
EXPC(expLog2e, 0x3fb8aa3b)
EXPC(expNLn2Hi, 0xbf318000)
EXPC(expNLn2Lo, 0x395e8083)
EXPC(expC5, 0x39506967)
EXPC(expC4, 0x3ab743ce)
EXPC(expC3, 0x3c088908)
EXPC(expC2, 0x3d2aa9c1)
EXPC(expC1, 0x3e2aaaaa)
EXPC(expC0, 0x3f000000)
EXPC(expOne, 0x3f800000)
EXPC(expInf, 0x7f800000)
EXPC(expBias, 0x3f800000)
EXPC(expSign, 0x80000000)

// EXP32: exp32 of the eight lanes of Y0 into Y3, exp32's operations in
// order (constants in Y8-Y13 as EXPCONST loads them; clobbers Y1, Y2,
// Y4-Y7).
#define EXP32 \
	VMULPS      Y8, Y0, Y1; \
	VROUNDPS    $0, Y1, Y1; \
	VMOVAPS     Y0, Y2; \
	VFMADD231PS Y9, Y1, Y2; \
	VFMADD231PS Y10, Y1, Y2; \
	VMOVUPS     expC5<>(SB), Y3; \
	VFMADD213PS expC4<>(SB), Y2, Y3; \
	VFMADD213PS expC3<>(SB), Y2, Y3; \
	VFMADD213PS expC2<>(SB), Y2, Y3; \
	VFMADD213PS expC1<>(SB), Y2, Y3; \
	VFMADD213PS expC0<>(SB), Y2, Y3; \
	VMULPS      Y2, Y2, Y4; \
	VFMADD213PS Y2, Y4, Y3; \
	VADDPS      Y13, Y3, Y3; \
	VCVTPS2DQ   Y1, Y4; \
	VPSLLD      $23, Y4, Y4; \
	VPADDD      expBias<>(SB), Y4, Y4; \
	VMULPS      Y4, Y3, Y3; \
	VCMPPS      $0x1e, Y11, Y0, Y5; \
	VBLENDVPS   Y5, expInf<>(SB), Y3, Y3; \
	VCMPPS      $0x11, Y12, Y0, Y6; \
	VANDNPS     Y3, Y6, Y3; \
	VCMPPS      $3, Y0, Y0, Y7; \
	VBLENDVPS   Y7, Y0, Y3, Y3

// EXPCONST: exp32's constants into Y8-Y13.
#define EXPCONST \
	VMOVUPS expLog2e<>(SB), Y8; \
	VMOVUPS expNLn2Hi<>(SB), Y9; \
	VMOVUPS expNLn2Lo<>(SB), Y10; \
	VMOVUPS expHi<>(SB), Y11; \
	VMOVUPS expLo<>(SB), Y12; \
	VMOVUPS expOne<>(SB), Y13

// func expSumAVX2(sc *float32, n int, mx float32) float32
//
// expSumGeneric's first n (a positive multiple of 8) positions: each v
// replaced by exp32(v − mx) (EXP32), the lanes' sums reduced by HSUM.
TEXT ·expSumAVX2(SB), NOSPLIT, $0-28
	MOVQ         sc+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS mx+16(FP), Y15
	VXORPS       Y14, Y14, Y14
	EXPCONST

expsum:
	VMOVUPS (SI), Y0
	VSUBPS  Y15, Y0, Y0 // x = v − mx
	EXP32
	VMOVUPS Y3, (SI)
	VADDPS  Y3, Y14, Y14
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNZ     expsum

	HSUM(Y14, X14, X0)
	VMOVSS X14, ret+24(FP)
	VZEROUPPER
	RET

// func siluMulAVX2(h1, h3 *float32, n int)
//
// siluMulGeneric on n (a positive multiple of 8) positions: h1 = h1 /
// (1 + exp32(−h1)) · h3, each operation rounded.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-24
	MOVQ    h1+0(FP), SI
	MOVQ    h3+8(FP), DI
	MOVQ    n+16(FP), CX
	VMOVUPS expSign<>(SB), Y15
	EXPCONST

silu:
	VMOVUPS (SI), Y14
	VXORPS  Y15, Y14, Y0 // −g
	EXP32
	VADDPS  Y13, Y3, Y3  // 1 + e
	VDIVPS  Y3, Y14, Y3  // g / (1 + e)
	VMULPS  (DI), Y3, Y3 // · h3
	VMOVUPS Y3, (SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     silu
	VZEROUPPER
	RET
